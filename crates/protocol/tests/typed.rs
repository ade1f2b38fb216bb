//! The generated Rust types: forward compatibility for what clients read, exact decoding for
//! what the runtime reads, and the `Method` enum a server dispatches on.

use openagents_protocol::rt::{self, DocumentError, RpcMethod, Validate};
use openagents_protocol::*;

fn decode<T: rt::Wire>(json: &str) -> Result<T, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_str(json);
    T::decode(&mut de)
}

#[test]
fn client_read_types_keep_working_when_a_newer_server_adds_things() {
    // A new field on an open object is ignored by the typed reader.
    let status = r#"{"state":"idle","active_turn":null,"counters":{"submitted":1,"completed":1,"failed":0,"interrupted":0,"retried":7},
        "last_seq":3,"subscribers":0,"lease":null,"schema_version":"openagents.agent.runner.v1",
        "limits":{"max_frame":98304,"max_output":1048576,"max_line_bytes":16777216,"event_channel_capacity":1024},"uptime_s":12}"#;
    let s: RuntimeStatus = decode(status).expect("extra fields are ignored");
    assert_eq!(s.state, RuntimeState::Idle);
    assert_eq!(s.counters.submitted, 1);
    // A new state, event kind or error code is kept as an explicit unknown value.
    let s: RuntimeStatus = decode(&status.replace("\"idle\"", "\"paused\"")).expect("unknown states decode");
    assert_eq!(s.state, RuntimeState::Unknown("paused".into()));
    let e: ServerEvent = decode(r#"{"seq":9,"event":{"type":"tool_called","tool":"grep"}}"#).expect("unknown kinds decode");
    match &e.event {
        RuntimeEvent::Unknown(m) => assert_eq!(m["tool"], "grep"),
        other => panic!("expected Unknown, got {other:?}"),
    }
    assert_eq!(e.event.tag(), "tool_called");
    let code: ErrorCode = decode(r#""rate_limited""#).expect("unknown codes decode");
    assert!(!code.retryable(), "unknown codes are not retryable");
    // ...and re-encodes as it arrived.
    assert_eq!(serde_json::to_value(&e).unwrap()["event"]["tool"], "grep");
    // The strict validator still reports what the schema does not allow.
    let err = e.validate().expect_err("unknown kinds are not in the schema");
    assert_eq!(err[0].pointer, "/event/type");
}

#[test]
fn runtime_read_types_are_exact() {
    // Closed objects refuse unknown fields, including inside union branches.
    assert!(decode::<Event>(r#"{"type":"text","text":"x","extra":1}"#).is_err());
    assert!(decode::<AgentSpec>(r#"{"runner":"echo","command":"/bin/sh"}"#).is_err());
    // An object is never accepted as an array (serde's derive would take positional fields).
    assert!(decode::<AgentSpec>(r#"["echo"]"#).is_err());
    assert!(decode::<Event>(r#"["text","x"]"#).is_err());
    // Duplicate keys are refused.
    assert!(decode::<AgentSpec>(r#"{"runner":"a","runner":"b"}"#).is_err());
    // Closed unions refuse unknown tags.
    assert!(decode::<Event>(r#"{"type":"progress","text":"x"}"#).is_err());
    // 1.0 is an integer; 1.5 is not.
    let ev: ServerEvent = decode(r#"{"seq":1.0,"event":{"type":"text","text":"x"}}"#).expect("1.0 is an integer");
    assert_eq!(ev.seq, 1);
    assert!(decode::<ServerEvent>(r#"{"seq":1.5,"event":{"type":"text","text":"x"}}"#).is_err());
    // null is not missing: a required nullable property must be present, an optional one may
    // not be null.
    let p: Result<SubmitParams, _> = decode(r#"{"task":"x","runner":null}"#);
    assert!(p.is_err(), "optional non-nullable runner refuses null");
    assert!(decode::<SubmitParams>(r#"{"task":"x"}"#).is_ok());
}

#[test]
fn events_round_trip_in_the_seed_shape() {
    let e = Event::Text { text: "hello".into() };
    assert_eq!(serde_json::to_string(&e).unwrap(), r#"{"type":"text","text":"hello"}"#);
    let back: Event = serde_json::from_str(r#"{"type":"completed","result":"done"}"#).unwrap();
    assert_eq!(back, Event::Completed { result: "done".into() });
    assert_eq!(back.tag(), "completed");
}

/// A dispatch written the way a server writes it: one exhaustive `match`, each arm typed by its
/// method's marker so the result type cannot be mixed up.
fn dispatch(method: Method) -> serde_json::Value {
    fn answer<M: RpcMethod>(result: M::Result) -> serde_json::Value {
        serde_json::json!({ "method": M::NAME, "result": serde_json::to_value(result).unwrap() })
    }
    match method {
        Method::Submit(p) => answer::<methods::Submit>(SubmitResult { assignment: "a".into(), conversation: "c".into(), result: p.task }),
        Method::Interrupt(_) => answer::<methods::Interrupt>(InterruptResult { interrupted: false }),
        Method::Status(_) => answer::<methods::Status>(RuntimeStatus {
            state: RuntimeState::Idle,
            active_turn: None,
            counters: TurnCounters { submitted: 0, completed: 0, failed: 0, interrupted: 0 },
            last_seq: 0,
            subscribers: 0,
            lease: None,
            schema_version: VERSION.into(),
            limits: Limits::of_this_build(),
            protocol_version: Some(PROTOCOL_VERSION.into()),
            schema_digest: Some(SCHEMA_DIGEST.into()),
            caller: None,
        }),
        Method::Shutdown(_) => answer::<methods::Shutdown>(ShutdownResult { shutting_down: true }),
        Method::Release(_) => answer::<methods::Release>(ReleaseResult { released: false }),
        Method::Subscribe(_) => answer::<methods::Subscribe>(SubscribeResult { last_seq: 0 }),
        Method::Discover(_) => answer::<methods::Discover>(serde_json::from_str(OPENRPC_DOCUMENT).unwrap()),
        Method::Conversations(_) => answer::<methods::Conversations>(openagents_protocol::ConversationsResult { conversations: Vec::new(), next: None }),
        Method::Conversation(p) => answer::<methods::Conversation>(openagents_protocol::ConversationResult {
            conversation: openagents_protocol::ConversationSummary { id: p.id, runner: "echo".into(), title: String::new(), turns: 0, created_at_ms: 0, updated_at_ms: 0 },
            turns: Vec::new(),
            next: None,
        }),
    }
}

#[test]
fn requests_dispatch_on_the_generated_method_enum() {
    let cases = [
        (r#"{"jsonrpc":"2.0","id":1,"method":"status"}"#, "status"),
        (r#"{"id":"x","method":"interrupt","params":null}"#, "interrupt"),
        (r#"{"method":"shutdown","params":{}}"#, "shutdown"),
        (r#"{"id":7,"method":"submit","params":{"task":"hello"}}"#, "submit"),
        (r#"{"jsonrpc":"2.0","id":8,"method":"rpc.discover"}"#, "rpc.discover"),
    ];
    for (line, name) in cases {
        let req: RpcRequest = rt::parse_validated(line.as_bytes()).unwrap_or_else(|e| panic!("{line}: {e}"));
        assert_eq!(req.method_name(), name);
        let id = req.id().clone();
        let out = dispatch(req.into_method());
        assert_eq!(out["method"], name);
        if name == "submit" {
            assert_eq!(out["result"]["result"], "hello");
            assert_eq!(id, Some(serde_json::json!(7)));
        }
    }
    assert_eq!(Method::NAMES, &["submit", "interrupt", "status", "shutdown", "release", "subscribe", "rpc.discover", "conversations", "conversation"]);
}

#[test]
fn invalid_requests_report_the_pointer_of_the_problem() {
    let cases = [
        (r#"{"id":1,"method":"frobnicate"}"#, "/method", "oneOf"),
        (r#"{"id":1,"method":"submit","params":{"task":""}}"#, "/params/task", "minLength"),
        (r#"{"id":1,"method":"submit","params":{"task":"x","runner":"../bin/sh"}}"#, "/params/runner", "pattern"),
        (r#"{"id":1,"method":"status","params":[1]}"#, "/params", "type"),
        (r#"{"id":{"a":1},"method":"status"}"#, "/id", "type"),
        (r#"{"id":1,"method":"status","jsonrpc":"1.0"}"#, "/jsonrpc", "const"),
    ];
    for (line, pointer, keyword) in cases {
        match rt::parse_validated::<RpcRequest>(line.as_bytes()) {
            Err(DocumentError::Invalid(v)) => assert!(
                v.iter().any(|x| x.pointer == pointer && x.keyword == keyword),
                "{line}: expected {keyword} at {pointer}, got {v:?}"
            ),
            other => panic!("{line}: expected a violation, got {other:?}"),
        }
    }
}

#[test]
fn error_codes_document_retry_and_json_rpc_numbers() {
    assert_eq!(ErrorCode::ALL.len(), 19);
    assert_eq!(ErrorCode::ParseError.rpc_code(), -32700);
    assert_eq!((ErrorCode::RuntimeRestarted.as_str(), ErrorCode::RuntimeRestarted.rpc_code()), ("runtime_restarted", -32012));
    assert!(ErrorCode::RuntimeRestarted.retryable());
    assert_eq!((ErrorCode::ConversationNotFound.rpc_code(), ErrorCode::ConversationNotFound.retryable()), (-32013, false));
    assert_eq!((ErrorCode::StoreUnavailable.as_str(), ErrorCode::StoreUnavailable.rpc_code(), ErrorCode::StoreUnavailable.retryable()), ("store_unavailable", -32014, true));
    assert!(ErrorCode::Busy.retryable());
    assert!(!ErrorCode::Forbidden.retryable());
    assert_eq!(ErrorCode::UnknownMethod.rpc_code(), -32601);
    assert_eq!(ErrorCode::InvalidParams.as_str(), "invalid_params");
    let mut codes: Vec<i64> = ErrorCode::ALL.iter().map(ErrorCode::rpc_code).collect();
    codes.sort_unstable();
    codes.dedup();
    assert_eq!(codes.len(), ErrorCode::ALL.len(), "every code has its own JSON-RPC number");
}

#[test]
fn validate_json_checks_any_type_by_its_schema_name() {
    use openagents_protocol::{TYPES, validate_json};
    let turn = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/samples/turn.json")).expect("sample turn");
    assert_eq!(validate_json("Turn", &turn), Ok(()));
    // Every name in the registry is known (an empty object is valid or refused, never unknown).
    for t in TYPES {
        if let Err(v) = validate_json(t.name, b"{}") {
            assert!(v.iter().all(|v| v.keyword != "typeName"), "{}: {v:?}", t.name);
        }
    }
    let unknown = validate_json("NoSuchType", b"{}").expect_err("an unknown name is an error");
    assert_eq!((unknown.len(), unknown[0].keyword.as_str(), unknown[0].pointer.as_str()), (1, "typeName", ""));
    assert!(unknown[0].message.contains("NoSuchType") && unknown[0].message.contains("Turn"), "{}", unknown[0].message);
    let not_json = validate_json("Turn", b"{\"a\":").expect_err("not JSON");
    assert_eq!(not_json[0].keyword, "json");
    let invalid = validate_json("Turn", b"{}").expect_err("a turn needs its members");
    assert!(invalid.iter().any(|v| v.keyword == "required"), "{invalid:?}");
}
