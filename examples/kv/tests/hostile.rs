//! What the generated dispatch does with input meant to break it, over the real `kv-server
//! --stdio`: every line gets its typed answer (not JSON, or nested past the parser's 127 levels, -32700;
//! params breaking the schema -32602) and the server goes on serving.

mod common;

use std::process::Stdio;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

#[tokio::test]
async fn hostile_lines_get_typed_errors_and_the_server_goes_on() {
    let mut child = common::stdio_command().stdin(Stdio::piped()).stdout(Stdio::piped()).kill_on_drop(true).spawn().expect("kv-server --stdio starts");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = tokio::io::BufReader::new(child.stdout.take().expect("stdout"));
    let deep = 100_000;
    let cases: Vec<(Vec<u8>, i64)> = vec![
        (b"\xff\xfe{}".to_vec(), -32700),
        (format!(r#"{{"jsonrpc":"2.0","id":1,"method":"put","params":{{"key":"a","value":{}"#, "[".repeat(deep)).into_bytes(), -32700),
        (format!(r#"{{"jsonrpc":"2.0","id":2,"method":"put","params":{{"key":"a","value":{{"kind":"text","text":{}1{}}}}}}}"#, "[".repeat(deep), "]".repeat(deep)).into_bytes(), -32700),
        (format!(r#"{{"jsonrpc":"2.0","id":3,"method":"get","params":{{"key":"{}"}}}}"#, "k".repeat(1 << 20)).into_bytes(), -32602),
        (br#"{"jsonrpc":"2.0","id":4,"method":"put","params":{"key":"a","value":{"kind":"text","text":"x"},"key":"b"}}"#.to_vec(), -32602),
        (br#"{"jsonrpc":"2.0","id":5,"method":"put","params":{"key":"a","value":{"kind":"colour","colour":"red"}}}"#.to_vec(), -32602),
        (br#"{"jsonrpc":"2.0","id":6,"method":"get","params":{"key":"a","extra":true}}"#.to_vec(), -32602),
        (br#"{"jsonrpc":"2.0","id":7,"method":"get"}"#.to_vec(), -32602),
    ];
    for (line, code) in cases {
        stdin.write_all(&line).await.expect("write");
        stdin.write_all(b"\n").await.expect("write");
        let mut reply = String::new();
        stdout.read_line(&mut reply).await.expect("a reply");
        assert!(reply.len() < 64 * 1024, "a bounded reply: {} bytes", reply.len());
        let v: serde_json::Value = serde_json::from_str(&reply).unwrap_or_else(|e| panic!("JSON ({e}): {reply}"));
        assert_eq!(v["error"]["code"].as_i64(), Some(code), "{}", &reply[..reply.len().min(300)]);
    }
    stdin.write_all(br#"{"jsonrpc":"2.0","id":8,"method":"put","params":{"key":"a","value":{"kind":"flag","flag":true}}}"#).await.expect("write");
    stdin.write_all(b"\n").await.expect("write");
    let mut reply = String::new();
    stdout.read_line(&mut reply).await.expect("a reply");
    assert_eq!(serde_json::from_str::<serde_json::Value>(&reply).expect("JSON")["result"]["version"], 1, "{reply}");
    drop(stdin);
    assert!(child.wait().await.expect("exits").success());
}
