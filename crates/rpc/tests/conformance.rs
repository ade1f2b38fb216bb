//! JSON-RPC 2.0 conformance of the core, in-process (no socket): each case a message and the
//! exact reply it must get, or none.

mod common;

use common::TestHandler;
use openagents_rpc::{Context, Identity, Limits, RpcServer};

fn server() -> RpcServer {
    RpcServer::new(TestHandler::new()).limits(Limits { max_batch: 4, ..Limits::default() })
}

async fn reply(input: &[u8]) -> Option<String> {
    let cx = Context::detached(Identity::new("test"));
    server().handle_message(&cx, input).await.map(|r| String::from_utf8(r).expect("a reply is UTF-8"))
}

/// `expected`: `None` for no reply; else the reply with each error's `message` left out (the
/// codes, ids and data are exact).
async fn check(input: &[u8], expected: Option<&str>) {
    let got = reply(input).await;
    let strip = |s: &str, got: bool| {
        let mut v: serde_json::Value = serde_json::from_str(s).unwrap_or_else(|e| panic!("reply is JSON ({e}): {s}"));
        let entries: Vec<&mut serde_json::Value> = match &mut v {
            serde_json::Value::Array(a) => a.iter_mut().collect(),
            one => vec![one],
        };
        for e in entries {
            if let Some(err) = e.get_mut("error").and_then(|e| e.as_object_mut()) {
                assert!(!got || err.get("message").and_then(|m| m.as_str()).is_some_and(|m| !m.is_empty()), "an error has a message: {s}");
                err.remove("message");
            }
        }
        v
    };
    match (got.as_deref(), expected) {
        (None, None) => {}
        (Some(g), Some(e)) => assert_eq!(strip(g, true), strip(e, false), "for {}", String::from_utf8_lossy(input)),
        (g, e) => panic!("for {}: got {g:?}, expected {e:?}", String::from_utf8_lossy(input)),
    }
}

#[tokio::test]
async fn requests_get_results_and_errors_by_where_the_problem_is() {
    let cases: &[(&[u8], Option<&str>)] = &[
        (br#"{"jsonrpc":"2.0","id":1,"method":"add","params":{"a":1,"b":2}}"#, Some(r#"{"jsonrpc":"2.0","id":1,"result":3}"#)),
        (br#"{"jsonrpc":"2.0","id":"x","method":"echo","params":[1,"a"]}"#, Some(r#"{"jsonrpc":"2.0","id":"x","result":[1,"a"]}"#)),
        (br#"{"jsonrpc":"2.0","id":null,"method":"echo"}"#, Some(r#"{"jsonrpc":"2.0","id":null,"result":null}"#)),
        // `"params": []` is no params.
        (br#"{"jsonrpc":"2.0","id":2,"method":"echo","params":[ ]}"#, Some(r#"{"jsonrpc":"2.0","id":2,"result":null}"#)),
        (br#"{"jsonrpc":"2.0","id":3,"method":"fail"}"#, Some(r#"{"jsonrpc":"2.0","id":3,"error":{"code":-32050,"data":{"why":"asked to"}}}"#)),
        // -32700: not JSON, whatever else is wrong.
        (b"{", Some(r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700}}"#)),
        (b"", Some(r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700}}"#)),
        (br#"{"jsonrpc":"2.0","id":1,"method":"echo"} x"#, Some(r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700}}"#)),
        (b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"echo\",\"params\":[\"\xff\"]}", Some(r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700}}"#)),
        (br#"[{"jsonrpc":"2.0","id":1,"method":"echo"},"#, Some(r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700}}"#)),
        // -32600: JSON, but not a request object.
        (b"1", Some(r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600}}"#)),
        (b"null", Some(r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600}}"#)),
        (br#"{"id":1,"method":"echo"}"#, Some(r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32600}}"#)),
        (br#"{"jsonrpc":"1.0","id":1,"method":"echo"}"#, Some(r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32600}}"#)),
        (br#"{"jsonrpc":"2.0","id":{"a":1},"method":"echo"}"#, Some(r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600}}"#)),
        (br#"{"jsonrpc":"2.0","id":[1],"method":"echo"}"#, Some(r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600}}"#)),
        (br#"{"jsonrpc":"2.0","id":true,"method":"echo"}"#, Some(r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600}}"#)),
        (br#"{"jsonrpc":"2.0","id":1}"#, Some(r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32600}}"#)),
        (br#"{"jsonrpc":"2.0","id":1,"method":7}"#, Some(r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32600}}"#)),
        (br#"{"jsonrpc":"2.0","id":1,"id":2,"method":"echo"}"#, Some(r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600}}"#)),
        (br#"{"jsonrpc":"2.0","id":1,"method":"echo","extra":1}"#, Some(r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32600}}"#)),
        // -32601 and -32602.
        (br#"{"jsonrpc":"2.0","id":1,"method":"nope"}"#, Some(r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32601}}"#)),
        (br#"{"jsonrpc":"2.0","id":1,"method":"echo","params":"text"}"#, Some(r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32602}}"#)),
        (br#"{"jsonrpc":"2.0","id":1,"method":"echo","params":3}"#, Some(r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32602}}"#)),
        (br#"{"jsonrpc":"2.0","id":1,"method":"add","params":{"a":"1"}}"#, Some(r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32602}}"#)),
        // Notifications: no reply, whatever their outcome.
        (br#"{"jsonrpc":"2.0","method":"echo","params":[1]}"#, None),
        (br#"{"jsonrpc":"2.0","method":"nope"}"#, None),
        (br#"{"jsonrpc":"2.0","method":"add","params":{}}"#, None),
        // Batches.
        (b"[]", Some(r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600}}"#)),
        (b" [ ] ", Some(r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600}}"#)),
        (b"[1]", Some(r#"[{"jsonrpc":"2.0","id":null,"error":{"code":-32600}}]"#)),
        (b"[1,2]", Some(r#"[{"jsonrpc":"2.0","id":null,"error":{"code":-32600}},{"jsonrpc":"2.0","id":null,"error":{"code":-32600}}]"#)),
        (
            br#"[{"jsonrpc":"2.0","id":1,"method":"add","params":{"a":1,"b":1}},{"jsonrpc":"2.0","method":"echo"},{"jsonrpc":"2.0","id":"b","method":"nope"},{"foo":1}]"#,
            Some(r#"[{"jsonrpc":"2.0","id":1,"result":2},{"jsonrpc":"2.0","id":"b","error":{"code":-32601}},{"jsonrpc":"2.0","id":null,"error":{"code":-32600}}]"#),
        ),
        (br#"[{"jsonrpc":"2.0","method":"echo"},{"jsonrpc":"2.0","method":"nope"}]"#, None),
        // Over max_batch (4 here): refused whole.
        (br#"[{"jsonrpc":"2.0","id":1,"method":"echo"},{"jsonrpc":"2.0","id":2,"method":"echo"},{"jsonrpc":"2.0","id":3,"method":"echo"},{"jsonrpc":"2.0","id":4,"method":"echo"},{"jsonrpc":"2.0","id":5,"method":"echo"}]"#, Some(r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600}}"#)),
    ];
    for (input, expected) in cases {
        check(input, *expected).await;
    }
}

#[tokio::test]
async fn a_batch_at_its_limit_is_served() {
    let batch = br#"[{"jsonrpc":"2.0","id":1,"method":"echo"},{"jsonrpc":"2.0","id":2,"method":"echo"},{"jsonrpc":"2.0","id":3,"method":"echo"},{"jsonrpc":"2.0","id":4,"method":"echo"}]"#;
    let got: serde_json::Value = serde_json::from_str(&reply(batch).await.expect("a reply")).expect("JSON");
    assert_eq!(got.as_array().map(Vec::len), Some(4), "{got}");
}

#[tokio::test]
async fn the_id_is_echoed_exactly_as_written() {
    for id in ["1.50", "1e3", "-0", "123456789012345678901234567890", r#""\u00e9""#, r#""é""#, "0", "-7"] {
        let input = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"echo"}}"#);
        let got = reply(input.as_bytes()).await.expect("a reply");
        assert_eq!(got, format!(r#"{{"jsonrpc":"2.0","id":{id},"result":null}}"#));
        let input = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"nope"}}"#);
        let got = reply(input.as_bytes()).await.expect("a reply");
        assert!(got.starts_with(&format!(r#"{{"jsonrpc":"2.0","id":{id},"error":"#)), "{got}");
    }
    // An id at the limit is echoed, counted in characters however it is escaped; one
    // character past it is refused with a null id; so is a number written longer than it.
    let max = openagents_rpc::MAX_ID_CHARS;
    for at in [format!("\"{}\"", "a".repeat(max)), format!("\"{}\"", "\\u00e9".repeat(max)), format!("1.{}", "0".repeat(max - 2))] {
        let got = reply(format!(r#"{{"jsonrpc":"2.0","id":{at},"method":"echo"}}"#).as_bytes()).await.expect("a reply");
        assert!(got.contains(&at), "{got}");
    }
    for past in [format!("\"{}\"", "a".repeat(max + 1)), format!("\"{}\"", "\\u00e9".repeat(max + 1)), format!("1.{}", "0".repeat(max - 1))] {
        let got: serde_json::Value = serde_json::from_str(&reply(format!(r#"{{"jsonrpc":"2.0","id":{past},"method":"echo"}}"#).as_bytes()).await.expect("a reply")).expect("JSON");
        assert_eq!((common::code(&got), got["id"].clone()), (-32600, serde_json::Value::Null), "{past}");
    }
}

#[tokio::test]
async fn hostile_input_never_panics_and_gets_a_bounded_answer() {
    let deep_open = "[".repeat(100_000);
    let deep_params = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"add","params":{{"a":{}1{}}}}}"#, "[".repeat(50_000), "]".repeat(50_000));
    let long_method = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"{}"}}"#, "m".repeat(100_000));
    let cases: Vec<(Vec<u8>, i64)> = vec![
        (deep_open.into_bytes(), -32700),
        (deep_params.into_bytes(), -32700),
        (format!(r#"{{"jsonrpc":"2.0","id":1,"method":"echo","params":[{}1{}]}}"#, "[".repeat(125), "]".repeat(125)).into_bytes(), 0),
        (format!(r#"{{"jsonrpc":"2.0","id":1,"method":"echo","params":[{}1{}]}}"#, "[".repeat(126), "]".repeat(126)).into_bytes(), -32700),
        (format!(r#"{{"jsonrpc":"2.0","id":1,"method":"echo","params":["{}"]}}"#, "[".repeat(1000)).into_bytes(), 0),
        (long_method.into_bytes(), -32601),
        (vec![0xff, 0xfe, 0x00], -32700),
        (b"\xef\xbb\xbf{}".to_vec(), -32700),
        (br#"{"jsonrpc":"2.0","id":1,"method":"\ud800"}"#.to_vec(), -32700),
    ];
    for (input, expected) in cases {
        let got = reply(&input).await.expect("a reply");
        assert!(got.len() < 4096, "the reply is bounded: {} bytes", got.len());
        let v: serde_json::Value = serde_json::from_str(&got).expect("JSON");
        let code = if v.get("result").is_some() { 0 } else { common::code(&v) };
        assert_eq!(code, expected, "{got}");
    }
}

#[tokio::test]
async fn a_handler_that_panics_answers_internal_error_and_the_rest_of_its_batch_is_answered() {
    check(br#"{"jsonrpc":"2.0","id":1,"method":"panic"}"#, Some(r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32603}}"#)).await;
    check(
        br#"[{"jsonrpc":"2.0","id":2,"method":"panic"},{"jsonrpc":"2.0","id":3,"method":"add","params":{"a":1,"b":1}}]"#,
        Some(r#"[{"jsonrpc":"2.0","id":2,"error":{"code":-32603}},{"jsonrpc":"2.0","id":3,"result":2}]"#),
    )
    .await;
    // A notification's panic is answered by nothing, as any notification; the server goes on.
    check(br#"{"jsonrpc":"2.0","method":"panic"}"#, None).await;
    check(br#"{"jsonrpc":"2.0","id":4,"method":"add","params":{"a":2,"b":2}}"#, Some(r#"{"jsonrpc":"2.0","id":4,"result":4}"#)).await;
    let message = reply(br#"{"jsonrpc":"2.0","id":5,"method":"panic"}"#).await.expect("a reply");
    assert!(message.contains("the handler of `panic` failed") && !message.contains("on purpose"), "{message}");
}
