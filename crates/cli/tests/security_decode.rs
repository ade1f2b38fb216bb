//! Security round 2, exact decoding at the command line's own protocol edge: `openagents acp`
//! reads an editor's messages exactly (a key given twice is refused with a null id, never read
//! as its last copy), and its approval timeout is bounded like every other duration.

mod security_common;

use security_common::*;

fn acp_lines(s: &Setup, input: &str) -> (Option<i32>, Vec<serde_json::Value>, String) {
    let out = run(s.command(&["acp", "--runner", "ask"]), input.as_bytes());
    let lines = String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}"))).collect();
    (out.status.code(), lines, String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn an_editor_message_with_a_key_given_twice_is_refused_and_names_neither_id() {
    let s = Setup::new("acp-dup", "");
    // (the message, what the refusal says)
    let cases = [
        (r#"{"jsonrpc":"2.0","id":"decoy","id":7,"method":"initialize","params":{"protocolVersion":1}}"#, "duplicate property `id`"),
        (r#"{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":1,"protocolVersion":1}}"#, "duplicate property `protocolVersion`"),
    ];
    for (message, why) in cases {
        let (code, lines, err) = acp_lines(&s, &format!("{message}\n"));
        assert_eq!(code, Some(0), "{message}: {err}");
        assert_eq!(lines.len(), 1, "{message}: exactly one answer: {lines:?}");
        let reply = &lines[0];
        assert_eq!(reply["id"], serde_json::Value::Null, "{message}: neither id is echoed: {reply}");
        assert_eq!(reply["error"]["code"], -32600, "{message}: {reply}");
        assert!(reply.get("result").is_none(), "{message}: nothing was initialized: {reply}");
        assert!(reply.to_string().contains(why), "{message}: {reply}");
        assert!(!reply.to_string().contains("decoy"), "{message}: {reply}");
    }
    // The same message, exact, is answered.
    let (_, lines, err) = acp_lines(&s, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"initialize\",\"params\":{\"protocolVersion\":1}}\n");
    assert_eq!(lines.first().map(|l| l["id"].clone()), Some(serde_json::json!(7)), "{lines:?} {err}");
    assert!(lines[0].get("result").is_some(), "{lines:?}");
}

#[test]
fn an_absurd_acp_approval_timeout_is_refused_at_startup() {
    let s = Setup::new("acp-timeout", "");
    for value in ["18446744073709551615", "86401", "0"] {
        let out = run(s.command(&["acp", "--runner", "ask", &format!("--approval-timeout={value}")]), b"");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{value}: {err}");
        assert!(err.contains("--approval-timeout") && err.contains(value), "{value}: {err}");
    }
}
