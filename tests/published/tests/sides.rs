//! The per-side method modules of the published protocols: ACP's from its own `x-method`/`x-side`
//! marks, MCP's from the method file beside its schema (`<name>.methods.json`). Each side's
//! `Request`/`Notification` decodes params by method through the exact decoders, knows no other
//! method, and each request's marker type names its params and result types.

use openagents_rt::{DocumentError, RpcMethod};
use openagents_published::{acp_v1, mcp_2025_11_25, mcp_2026_07_28};

/// Compiles only when `M`'s params and result are `P` and `R`.
fn types_of<M: RpcMethod<Params = P, Result = R>, P, R>() {}

#[test]
fn acp_sides_decode_by_method_and_name_their_result_types() {
    types_of::<acp_v1::agent_side::SessionPrompt, acp_v1::PromptRequest, acp_v1::PromptResponse>();
    types_of::<acp_v1::client_side::SessionRequestPermission, acp_v1::RequestPermissionRequest, acp_v1::RequestPermissionResponse>();
    let ok = acp_v1::agent_side::Request::decode("session/prompt", br#"{"sessionId":"s","prompt":[{"type":"text","text":"hi"}]}"#);
    assert!(matches!(ok, Some(Ok(acp_v1::agent_side::Request::SessionPrompt(ref p))) if p.session_id == "s"), "{ok:?}");
    assert!(matches!(acp_v1::agent_side::Request::decode("session/prompt", br#"{"sessionId":"s"}"#), Some(Err(DocumentError::Invalid(_)))));
    assert!(acp_v1::agent_side::Request::decode("tools/call", b"{}").is_none(), "a method of another protocol is unknown");
    assert!(acp_v1::client_side::Notification::decode("session/update", br#"{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"x"}}}"#).is_some_and(|r| r.is_ok()));
}

#[test]
fn mcp_sides_come_from_the_method_file() {
    // 2025-11-25: the server handles the client's requests; the client the server's.
    types_of::<mcp_2025_11_25::server_side::ToolsCall, mcp_2025_11_25::CallToolRequestParams, mcp_2025_11_25::CallToolResult>();
    types_of::<mcp_2025_11_25::server_side::Initialize, mcp_2025_11_25::InitializeRequestParams, mcp_2025_11_25::InitializeResult>();
    types_of::<mcp_2025_11_25::client_side::SamplingCreateMessage, mcp_2025_11_25::CreateMessageRequestParams, mcp_2025_11_25::CreateMessageResult>();
    let call = mcp_2025_11_25::server_side::Request::decode("tools/call", br#"{"name":"echo","arguments":{"text":"hi"}}"#);
    assert!(matches!(call, Some(Ok(mcp_2025_11_25::server_side::Request::ToolsCall(ref p))) if p.name == "echo"), "{call:?}");
    assert!(matches!(mcp_2025_11_25::server_side::Request::decode("tools/call", br#"{"arguments":{}}"#), Some(Err(DocumentError::Invalid(_)))), "`name` is required");
    assert!(mcp_2025_11_25::server_side::Request::decode("sampling/createMessage", b"{}").is_none(), "the server does not handle the client's methods");
    assert!(mcp_2025_11_25::server_side::Notification::METHODS.contains(&"notifications/initialized"));
    assert!(mcp_2025_11_25::client_side::Request::METHODS.contains(&"roots/list"));
    // 2026-07-28: no server-to-client requests; tools/call as before.
    types_of::<mcp_2026_07_28::server_side::ToolsCall, mcp_2026_07_28::CallToolRequestParams, mcp_2026_07_28::CallToolResult>();
    assert!(mcp_2026_07_28::server_side::Request::METHODS.contains(&"server/discover"));
    assert!(mcp_2026_07_28::client_side::Notification::METHODS.contains(&"notifications/tools/list_changed"));
}
