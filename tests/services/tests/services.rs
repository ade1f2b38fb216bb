//! The generated service modules of other protocols' schemas and of ours, in use: ACP's client
//! side as a service (requests answered, notifications counted, unknown methods and bad params
//! refused by the generated dispatch), handlers and clients of ACP's and MCP's other sides, and
//! our own method union's `decode`.

use std::sync::atomic::{AtomicUsize, Ordering};

use openagents_rpc::{Context, Handler, HttpTransport, Identity, RpcError, RpcServer, codes};
use openagents_services_check::{acp, mcp, openagents};
use serde_json::value::RawValue;

fn raw(s: &str) -> Box<RawValue> {
    RawValue::from_string(s.to_owned()).expect("JSON")
}

/// ACP's client side: reads files from nowhere, counts session updates.
#[derive(Default)]
struct Editor {
    updates: AtomicUsize,
}

fn not_here() -> RpcError {
    RpcError::new(codes::METHOD_NOT_FOUND, "not offered by this editor")
}

impl acp::service::client_side::Service for Editor {
    async fn elicitation_create(&self, _: &Context, _: acp::CreateElicitationRequest) -> Result<acp::CreateElicitationResponse, RpcError> {
        Err(not_here())
    }
    async fn fs_read_text_file(&self, cx: &Context, p: acp::ReadTextFileRequest) -> Result<acp::ReadTextFileResponse, RpcError> {
        Ok(acp::ReadTextFileResponse { content: format!("{} asked for {} in {}", cx.identity().name(), p.path, p.session_id), meta: None })
    }
    async fn fs_write_text_file(&self, _: &Context, _: acp::WriteTextFileRequest) -> Result<acp::WriteTextFileResponse, RpcError> {
        Err(not_here())
    }
    async fn session_request_permission(&self, _: &Context, _: acp::RequestPermissionRequest) -> Result<acp::RequestPermissionResponse, RpcError> {
        Err(not_here())
    }
    async fn terminal_create(&self, _: &Context, _: acp::CreateTerminalRequest) -> Result<acp::CreateTerminalResponse, RpcError> {
        Err(not_here())
    }
    async fn terminal_kill(&self, _: &Context, _: acp::KillTerminalRequest) -> Result<acp::KillTerminalResponse, RpcError> {
        Err(not_here())
    }
    async fn terminal_output(&self, _: &Context, _: acp::TerminalOutputRequest) -> Result<acp::TerminalOutputResponse, RpcError> {
        Err(not_here())
    }
    async fn terminal_release(&self, _: &Context, _: acp::ReleaseTerminalRequest) -> Result<acp::ReleaseTerminalResponse, RpcError> {
        Err(not_here())
    }
    async fn terminal_wait_for_exit(&self, _: &Context, _: acp::WaitForTerminalExitRequest) -> Result<acp::WaitForTerminalExitResponse, RpcError> {
        Err(not_here())
    }
    async fn session_update(&self, _: &Context, _: acp::SessionNotification) {
        self.updates.fetch_add(1, Ordering::Relaxed);
    }
}

#[tokio::test]
async fn acp_client_side_served_by_the_generated_dispatch() {
    let editor = std::sync::Arc::new(Editor::default());
    let server = RpcServer::new(acp::service::client_side::ServiceHandler(editor.clone()));
    let cx = Context::detached(Identity::new("agent"));
    let cases: &[(&str, Option<&str>)] = &[
        (r#"{"jsonrpc":"2.0","id":1,"method":"fs/read_text_file","params":{"sessionId":"s1","path":"/tmp/a"}}"#, Some(r#"{"jsonrpc":"2.0","id":1,"result":{"content":"agent asked for /tmp/a in s1"}}"#)),
        (r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}}}"#, None),
    ];
    for (input, expected) in cases {
        let got = server.handle_message(&cx, input.as_bytes()).await.map(|r| String::from_utf8(r).expect("UTF-8"));
        assert_eq!(got.as_deref(), *expected, "{input}");
    }
    assert_eq!(editor.updates.load(Ordering::Relaxed), 1);
    let handler = acp::service::client_side::ServiceHandler(editor.clone());
    // A method of the other side, or of nobody: -32601 naming this side's methods.
    let e = handler.call(&cx, "session/prompt", Some(&raw(r#"{"sessionId":"s1","prompt":[]}"#))).await.expect_err("not this side's");
    assert_eq!(e.code, codes::METHOD_NOT_FOUND);
    assert!(e.message.contains("fs/read_text_file") && e.message.contains("session/update"), "{}", e.message);
    // Params breaking ACP's schema: -32602, each violation with its pointer from the request.
    let e = handler.call(&cx, "fs/read_text_file", Some(&raw(r#"{"sessionId":"s1","path":7}"#))).await.expect_err("a bad path");
    assert_eq!(e.code, codes::INVALID_PARAMS);
    let pointers: Vec<&str> = e.data.as_ref().and_then(|d| d["violations"].as_array()).into_iter().flatten().filter_map(|v| v["pointer"].as_str()).collect();
    assert!(pointers.contains(&"/params/path"), "{e:?}");
    let e = handler.call(&cx, "fs/read_text_file", None).await.expect_err("no params");
    assert_eq!(e.code, codes::INVALID_PARAMS);
    // The service's own refusal passes through as it is.
    let e = handler.call(&cx, "terminal/kill", Some(&raw(r#"{"sessionId":"s1","terminalId":"t"}"#))).await.expect_err("not offered");
    assert_eq!((e.code, e.message.as_str()), (codes::METHOD_NOT_FOUND, "not offered by this editor"));
}

/// Every side of ACP and MCP has a handler and a client (a type-level check: these build).
#[allow(dead_code)]
fn every_side_has_a_handler_and_a_client() {
    fn handler<H: Handler>(_: H) {}
    fn acp_agent<S: acp::service::agent_side::Service>(s: S) {
        handler(acp::service::agent_side::ServiceHandler::new(s));
    }
    fn mcp_server<S: mcp::service::server_side::Service>(s: S) {
        handler(mcp::service::server_side::ServiceHandler::new(s));
    }
    fn mcp_client<S: mcp::service::client_side::Service>(s: S) {
        handler(mcp::service::client_side::ServiceHandler::new(s));
    }
    fn ours<S: openagents::service::Service>(s: S) {
        handler(openagents::service::ServiceHandler::new(s));
    }
    let t = HttpTransport::new("http://127.0.0.1:1/rpc", None).expect("url");
    let _ = (acp::service::agent_side::Client::new(HttpTransport::new("http://127.0.0.1:1/rpc", None).expect("url")), mcp::service::server_side::Client::new(t));
}

#[test]
fn our_method_union_decodes_by_where_the_problem_is() {
    use openagents::service::decode;
    assert!(matches!(decode("status", None), Ok(openagents::Method::Status(None))));
    let e = decode("nope", None).expect_err("unknown");
    assert_eq!(e.code, codes::METHOD_NOT_FOUND);
    assert!(e.message.contains("submit, interrupt, status"), "{}", e.message);
    let e = decode("submit", None).expect_err("submit takes params");
    assert_eq!(e.code, codes::INVALID_PARAMS);
    let e = decode("submit", Some(&raw(r#"{"task": 5}"#))).expect_err("a bad task");
    assert_eq!(e.code, codes::INVALID_PARAMS);
    let pointers: Vec<&str> = e.data.as_ref().and_then(|d| d["violations"].as_array()).into_iter().flatten().filter_map(|v| v["pointer"].as_str()).collect();
    assert!(pointers.contains(&"/params/task"), "{e:?}");
}

#[test]
fn an_error_carries_the_schemas_error_object_as_its_data() {
    // Our schema's carrier `RuntimeSubmitError` requires `code`, `message` and `retryable`:
    // `service::error` sends all three, and `service::error_from` the whole object.
    use openagents::{ErrorCode, RuntimeSubmitError, service};
    let e = service::error(ErrorCode::UnknownMethod, "no such method");
    assert_eq!(e.code, ErrorCode::UnknownMethod.rpc_code());
    let data = e.data.clone().expect("data");
    assert_eq!(data, serde_json::json!({"code": "unknown_method", "message": "no such method", "retryable": false}));
    assert_eq!(openagents::validate_json("RuntimeSubmitError", data.to_string().as_bytes()), Ok(()));
    assert_eq!(service::error_code(&e), Some(ErrorCode::UnknownMethod));
    let full: RuntimeSubmitError = openagents_rt::parse_validated(br#"{"code":"unknown_method","message":"m","retryable":false}"#).expect("valid");
    let e = service::error_from(&full);
    assert_eq!((e.code, e.message.as_str()), (ErrorCode::UnknownMethod.rpc_code(), "m"));
    assert_eq!(openagents::validate_json("RuntimeSubmitError", e.data.expect("data").to_string().as_bytes()), Ok(()));
}
