//! The web page routes over real loopback sockets: `GET /` and every embedded asset answer 200
//! without a token, with the page's security headers; an unknown asset is 404; the rest of the
//! surface still needs the token; with the page off (or on the WebSocket-only listener) `GET /`
//! is 404. The page itself is tested in a browser by tests/web.

use std::net::SocketAddr;
use std::time::Duration;

use openagents_server::{EngineConfig, FnAgent, Grant, RpcEngine, RuntimeHttpCredential, TurnContext, run_frontend_websocket, run_http_authorized_web, web};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const TOKEN: &str = "tok-web-test-0123456789abcdef";

fn engine() -> RpcEngine {
    let agent = FnAgent(|turn: openagents_protocol::Turn, _ctx: TurnContext| async move { Ok::<_, openagents_server::RuntimeSubmitError>(turn.task) });
    RpcEngine::with_config(agent, EngineConfig { default_runner: Some("script".into()), ..EngineConfig::default() })
}

fn credentials() -> Vec<RuntimeHttpCredential> {
    vec![RuntimeHttpCredential::new("admin", TOKEN, Grant::admin())]
}

/// One request on its own connection: the status, the header block (lower-case names) and the body.
async fn get(addr: SocketAddr, method: &str, path: &str) -> (u16, Vec<(String, String)>, Vec<u8>) {
    let exchange = async {
        let mut s = TcpStream::connect(addr).await.expect("connect");
        let body = if method == "POST" { "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"status\"}" } else { "" };
        let extra = if method == "POST" { format!("content-type: application/json\r\ncontent-length: {}\r\n", body.len()) } else { String::new() };
        s.write_all(format!("{method} {path} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n{extra}\r\n{body}").as_bytes()).await.expect("write");
        let mut out = Vec::new();
        s.read_to_end(&mut out).await.expect("read");
        out
    };
    let out = tokio::time::timeout(Duration::from_secs(10), exchange).await.expect("an answer within 10 s");
    let split = out.windows(4).position(|w| w == b"\r\n\r\n").expect("a header block");
    let head = String::from_utf8_lossy(&out[..split]).into_owned();
    let mut lines = head.split("\r\n");
    let status = lines.next().and_then(|l| l.split(' ').nth(1)).and_then(|c| c.parse().ok()).expect("a status line");
    let headers = lines.filter_map(|l| l.split_once(':')).map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned())).collect();
    (status, headers, out[split + 4..].to_vec())
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_and_its_assets_need_no_token_and_carry_the_security_headers() {
    let engine = engine();
    let addr = run_http_authorized_web(engine.clone(), "127.0.0.1:0", credentials(), true).await.expect("bind");
    let paths: Vec<&str> = web::paths().collect();
    assert_eq!(paths, ["/", "/assets/app.js", "/assets/app.css", "/assets/icon.svg"]);
    for path in paths {
        let (status, headers, body) = get(addr, "GET", path).await;
        assert_eq!(status, 200, "{path}");
        assert!(!body.is_empty(), "{path}");
        assert_eq!(header(&headers, "content-security-policy"), Some(web::CONTENT_SECURITY_POLICY), "{path}");
        assert_eq!(header(&headers, "x-content-type-options"), Some("nosniff"), "{path}");
        assert_eq!(header(&headers, "referrer-policy"), Some("no-referrer"), "{path}");
        assert_eq!(header(&headers, "x-frame-options"), Some("DENY"), "{path}");
    }
    let (_, headers, body) = get(addr, "GET", "/").await;
    assert_eq!(header(&headers, "content-type"), Some("text/html; charset=utf-8"));
    assert!(String::from_utf8_lossy(&body).contains("<script type=\"module\" src=\"/assets/app.js\"></script>"));
    assert!(web::CONTENT_SECURITY_POLICY.contains("script-src 'self'") && web::CONTENT_SECURITY_POLICY.contains("connect-src 'self'"));
    assert_eq!(get(addr, "GET", "/assets/nope.js").await.0, 404);
    assert_eq!(get(addr, "GET", "/assets/").await.0, 404);
    // Everything else still needs the token.
    assert_eq!(get(addr, "POST", "/rpc").await.0, 401);
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_page_get_root_is_not_found() {
    let engine = engine();
    let off = run_http_authorized_web(engine.clone(), "127.0.0.1:0", credentials(), false).await.expect("bind");
    assert_eq!(get(off, "GET", "/").await.0, 404);
    assert_eq!(get(off, "GET", "/assets/app.js").await.0, 404);
    let ws_only = run_frontend_websocket(engine.clone(), "127.0.0.1:0", credentials()).await.expect("bind");
    assert_eq!(get(ws_only.local_addr(), "GET", "/").await.0, 404);
    engine.shutdown().await;
}
