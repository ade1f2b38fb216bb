//! The browser `Origin` check and CORS on loopback: a foreign origin refused with 403 on every
//! route (the WebSocket upgrade included) before authentication, requests without `Origin` and
//! pages of the server's own address let through, listed origins answered with CORS headers,
//! and `RpcServer::allow_origins` refusing what is not one exact origin.

mod common;

use std::net::SocketAddr;

use common::{TestHandler, http, serve_at, tokens};
use openagents_rpc::{CORS_MAX_AGE, Metrics, OriginError, RpcServer, codes};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::{self, Message};

const CALL: &[u8] = br#"{"jsonrpc":"2.0","id":1,"method":"whoami"}"#;
const JSON: (&str, &str) = ("content-type", "application/json");

/// The value of the header `name` (lowercase), when there is exactly one.
fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    let mut values = headers.iter().filter(|(k, _)| k == name).map(|(_, v)| v.as_str());
    let first = values.next();
    assert!(values.next().is_none(), "`{name}` given twice: {headers:?}");
    first
}

/// The `access-control-*` headers, sorted.
fn cors_headers(headers: &[(String, String)]) -> Vec<(String, String)> {
    let mut h: Vec<_> = headers.iter().filter(|(k, _)| k.starts_with("access-control-")).cloned().collect();
    h.sort();
    h
}

/// Asserts `body` is the JSON-RPC refusal of a foreign origin.
fn assert_forbidden(body: &[u8], context: &str) {
    let v: serde_json::Value = serde_json::from_slice(body).unwrap_or_else(|e| panic!("{context}: not JSON ({e}): {}", String::from_utf8_lossy(body)));
    assert_eq!((&v["jsonrpc"], &v["id"], &v["error"]["code"]), (&serde_json::json!("2.0"), &serde_json::Value::Null, &serde_json::json!(codes::FORBIDDEN)), "{context}: {v}");
    let message = v["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("allow_origins"), "{context}: the message says what to do: {message}");
}

/// Opens the WebSocket at `addr` with `origin`: the upgrade's answer, `Ok` when it upgraded.
async fn ws_with_origin(addr: SocketAddr, origin: &str) -> Result<tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>, (u16, Vec<u8>)> {
    let mut request = format!("ws://{addr}/rpc").into_client_request().expect("request");
    request.headers_mut().insert("origin", origin.parse().expect("header value"));
    match tokio_tungstenite::connect_async(request).await {
        Ok((ws, _)) => Ok(ws),
        Err(tungstenite::Error::Http(response)) => Err((response.status().as_u16(), response.body().clone().unwrap_or_default())),
        Err(e) => panic!("the upgrade neither succeeded nor was answered: {e}"),
    }
}

/// One call over an open WebSocket: its reply.
async fn ws_call(ws: &mut tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>) -> serde_json::Value {
    use futures_util::{SinkExt, StreamExt};
    ws.send(Message::text(std::str::from_utf8(CALL).expect("UTF-8"))).await.expect("send");
    let reply = ws.next().await.expect("a reply").expect("a message");
    serde_json::from_str(reply.to_text().expect("text")).expect("JSON")
}

/// A request: its method, path, headers and body.
type Request<'a> = (&'a str, &'a str, &'a [(&'a str, &'a str)], &'a [u8]);

#[tokio::test]
async fn a_foreign_origin_is_refused_with_403_on_every_route_before_authentication() {
    let metrics = Metrics::new();
    // An authenticator too: the origin is checked first, so no 401 tells the page anything.
    let server = RpcServer::new(TestHandler::new()).authenticator(tokens).metrics(metrics.clone());
    let addr = serve_at(server).await;
    let foreign = ("origin", "https://evil.example");
    let auth = ("authorization", "Bearer secret-token");
    let cases: &[Request<'_>] = &[
        ("POST", "/rpc", &[JSON, foreign], CALL),
        ("POST", "/rpc", &[JSON, foreign, auth], CALL),
        ("GET", "/rpc", &[foreign], b""),
        ("GET", "/health", &[foreign], b""),
        ("GET", "/metrics", &[foreign], b""),
        ("GET", "/metrics", &[foreign, auth], b""),
    ];
    for (method, path, headers, body) in cases {
        let context = format!("{method} {path} {headers:?}");
        let (status, h, body) = http(addr, method, path, headers, body).await;
        assert_eq!(status, 403, "{context}");
        assert_eq!(header(&h, "content-type"), Some("application/json"), "{context}");
        assert_eq!(cors_headers(&h), vec![], "{context}: no CORS header for a foreign page");
        assert_eq!(header(&h, "www-authenticate"), None, "{context}");
        assert_forbidden(&body, &context);
    }
    // The WebSocket upgrade: answered 403, no socket.
    match ws_with_origin(addr, "https://evil.example").await {
        Err((status, body)) => {
            assert_eq!(status, 403);
            assert_forbidden(&body, "the WebSocket upgrade");
        }
        Ok(_) => panic!("a foreign page opened the WebSocket"),
    }
    let text = metrics.render();
    assert!(text.contains("openagents_rpc_refused_total{status=\"403\"} 7\n"), "{text}");
    assert!(text.contains("openagents_rpc_refused_total{status=\"401\"} 0\n"), "{text}");
    assert!(text.contains("openagents_rpc_connections{transport=\"websocket\"} 0\n"), "{text}");
    assert!(text.contains("openagents_rpc_calls_total{method=\"unknown\"} 0\n"), "the handler never ran: {text}");
    // The same requests without `Origin` (a program, not a browser) go through.
    let (status, _, body) = http(addr, "POST", "/rpc", &[JSON, auth], CALL).await;
    assert_eq!((status, serde_json::from_slice::<serde_json::Value>(&body).expect("JSON")["result"].clone()), (200, serde_json::json!("alice")));
    assert_eq!(http(addr, "GET", "/health", &[], b"").await.0, 200);
    assert_eq!(http(addr, "GET", "/metrics", &[auth], b"").await.0, 200);
}

#[tokio::test]
async fn without_a_list_only_the_servers_own_ip_or_localhost_origin_is_allowed() {
    let addr = serve_at(RpcServer::new(TestHandler::new())).await;
    let port = addr.port();
    let own = addr.to_string();
    let other_port = if port == 1 { 2 } else { port - 1 };
    // (Origin, Host; None: the address connected to), allowed.
    let cases: Vec<(Option<String>, Option<String>, bool)> = vec![
        (None, None, true),
        (Some(format!("http://{own}")), None, true),
        (Some(format!("https://{own}")), None, true),
        (Some(format!("HTTP://{own}")), None, true),
        (Some(format!("http://localhost:{port}")), Some(format!("localhost:{port}")), true),
        (Some(format!("http://LocalHost:{port}")), Some(format!("localhost:{port}")), true),
        (Some("http://localhost".to_owned()), Some("localhost:80".to_owned()), true),
        (Some("https://localhost:443".to_owned()), Some("localhost".to_owned()), true),
        (Some(format!("http://[::1]:{port}")), Some(format!("[::1]:{port}")), true),
        (Some(format!("http://127.0.0.1:{other_port}")), None, false),
        (Some(format!("http://127.0.0.2:{port}")), None, false),
        (Some(format!("http://localhost:{port}")), None, false),
        (Some(format!("http://rebound.example:{port}")), Some(format!("rebound.example:{port}")), false),
        (Some(format!("http://127.0.0.1.nip.io:{port}")), Some(format!("127.0.0.1.nip.io:{port}")), false),
        (Some("null".to_owned()), None, false),
        (Some(format!("http://{own}/")), None, false),
        (Some(format!("ws://{own}")), None, false),
    ];
    for (origin, host, allowed) in cases {
        let mut headers = vec![JSON];
        if let Some(o) = &origin {
            headers.push(("origin", o));
        }
        if let Some(h) = &host {
            headers.push(("host", h));
        }
        let (status, h, body) = http(addr, "POST", "/rpc", &headers, CALL).await;
        let context = format!("Origin {origin:?}, Host {host:?}");
        if allowed {
            assert_eq!(status, 200, "{context}: {}", String::from_utf8_lossy(&body));
            assert_eq!(cors_headers(&h), vec![], "{context}: the server's own page needs no CORS");
        } else {
            assert_eq!(status, 403, "{context}");
            assert_forbidden(&body, &context);
        }
    }
}

#[tokio::test]
async fn listed_origins_get_cors_answers_and_headers() {
    let server = RpcServer::new(TestHandler::new()).authenticator(tokens).allow_origins(["https://app.example.com", "HTTP://LOCALHOST:80", "http://rebound.example:8080"]).expect("origins");
    let addr = serve_at(server).await;
    let auth = ("authorization", "Bearer secret-token");
    let max_age = CORS_MAX_AGE.as_secs().to_string();
    assert_eq!(max_age, "600");
    let preflight = |origin: &'static str| async move {
        http(addr, "OPTIONS", "/rpc", &[("origin", origin), ("access-control-request-method", "POST"), ("access-control-request-headers", "authorization, content-type")], b"").await
    };
    // A listed origin's preflight: 204 and exactly these CORS headers, no credentials.
    for origin in ["https://app.example.com", "https://App.Example.COM", "http://localhost", "http://localhost:80", "http://rebound.example:8080"] {
        let (status, h, body) = preflight(origin).await;
        assert_eq!((status, body.len()), (204, 0), "{origin}");
        let expected: Vec<(String, String)> = [
            ("access-control-allow-headers", "authorization, content-type"),
            ("access-control-allow-methods", "POST"),
            ("access-control-allow-origin", origin),
            ("access-control-max-age", max_age.as_str()),
        ]
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
        assert_eq!(cors_headers(&h), expected, "{origin}: the origin echoed as sent");
        assert_eq!(header(&h, "vary"), Some("Origin"), "{origin}");
    }
    // Any other origin's preflight: no CORS header at all, so the browser sends nothing.
    for origin in ["https://evil.example", "https://app.example.com:8443", "http://app.example.com", "null"] {
        let (status, h, _) = preflight(origin).await;
        assert_eq!(status, 204, "{origin}");
        assert_eq!(cors_headers(&h), vec![], "{origin}");
        assert_eq!(header(&h, "vary"), Some("Origin"), "{origin}");
    }
    // A listed origin's POST: the answer carries its origin and `Vary: Origin`, errors too.
    for (origin, headers, status) in [
        ("https://app.example.com", vec![JSON, auth], 200),
        ("http://localhost", vec![JSON, auth], 200),
        ("https://app.example.com", vec![JSON], 401),
        ("https://app.example.com", vec![("content-type", "text/plain"), auth], 415),
    ] {
        let mut headers = headers;
        headers.push(("origin", origin));
        let (got, h, body) = http(addr, "POST", "/rpc", &headers, CALL).await;
        assert_eq!(got, status, "{origin} {headers:?}: {}", String::from_utf8_lossy(&body));
        assert_eq!(cors_headers(&h), vec![("access-control-allow-origin".to_owned(), origin.to_owned())], "{origin} {headers:?}");
        assert_eq!(header(&h, "vary"), Some("Origin"), "{origin} {headers:?}");
        assert!(!h.iter().any(|(k, _)| k == "access-control-allow-credentials"));
    }
    // A listed name is allowed under that name's `Host`.
    let (status, _, _) = http(addr, "POST", "/rpc", &[JSON, auth, ("origin", "http://rebound.example:8080"), ("host", "rebound.example:8080")], CALL).await;
    assert_eq!(status, 200);
    // Unlisted: 403, no CORS header.
    let (status, h, body) = http(addr, "POST", "/rpc", &[JSON, auth, ("origin", "https://app.example.com:8443")], CALL).await;
    assert_eq!((status, cors_headers(&h)), (403, vec![]));
    assert_forbidden(&body, "an unlisted port");
    // The WebSocket takes a listed origin, and refuses others.
    let (status, _) = ws_with_origin(addr, "https://app.example.com").await.expect_err("no token: refused");
    assert_eq!(status, 401, "a listed origin still needs the token");
    let mut request = format!("ws://{addr}/rpc").into_client_request().expect("request");
    request.headers_mut().insert("origin", "https://app.example.com".parse().expect("value"));
    request.headers_mut().insert("authorization", "Bearer secret-token".parse().expect("value"));
    let (mut ws, _) = tokio_tungstenite::connect_async(request).await.expect("a listed page opens the WebSocket");
    assert_eq!(ws_call(&mut ws).await["result"], "alice");
    let (status, body) = ws_with_origin(addr, "https://evil.example").await.expect_err("refused");
    assert_eq!(status, 403);
    assert_forbidden(&body, "WebSocket");
}

#[tokio::test]
async fn the_websocket_opens_for_its_own_page_and_for_programs() {
    let addr = serve_at(RpcServer::new(TestHandler::new())).await;
    let mut ws = ws_with_origin(addr, &format!("http://{addr}")).await.map_err(|(s, _)| s).expect("its own page");
    assert_eq!(ws_call(&mut ws).await["result"], "anonymous");
    let (mut ws, _) = tokio_tungstenite::connect_async(format!("ws://{addr}/rpc")).await.expect("no Origin");
    assert_eq!(ws_call(&mut ws).await["result"], "anonymous");
}

#[tokio::test]
async fn a_later_list_replaces_an_earlier_one() {
    let server = RpcServer::new(TestHandler::new()).allow_origins(["https://a.example"]).expect("origins").allow_origins(["https://b.example"]).expect("origins");
    let addr = serve_at(server).await;
    for (origin, status) in [("https://a.example", 403), ("https://b.example", 200)] {
        assert_eq!(http(addr, "POST", "/rpc", &[JSON, ("origin", origin)], CALL).await.0, status, "{origin}");
    }
    let server = RpcServer::new(TestHandler::new()).allow_origins(["https://a.example"]).expect("origins").allow_origins(Vec::<String>::new()).expect("none");
    let addr = serve_at(server).await;
    assert_eq!(http(addr, "POST", "/rpc", &[JSON, ("origin", "https://a.example")], CALL).await.0, 403);
}

#[tokio::test]
async fn listed_origins_are_compared_normalized() {
    // (listed, sent by the page, allowed)
    let cases = [
        ("HTTP://LOCALHOST:80", "http://localhost", true),
        ("http://localhost", "http://localhost:80", true),
        ("https://App.Example.com:443", "https://app.example.com", true),
        (" https://app.example.com ", "https://app.example.com", true),
        ("http://[::1]:8080", "http://[::1]:8080", true),
        ("http://localhost:3000", "http://localhost", false),
        ("https://app.example.com", "http://app.example.com", false),
        ("https://app.example.com", "https://app.example.com:444", false),
        ("https://app.example.com", "https://sub.app.example.com", false),
        ("https://app.example.com", "https://app.example.com.evil.example", false),
    ];
    for (listed, sent, allowed) in cases {
        let addr = serve_at(RpcServer::new(TestHandler::new()).allow_origins([listed]).expect(listed)).await;
        let (status, h, _) = http(addr, "POST", "/rpc", &[JSON, ("origin", sent)], CALL).await;
        assert_eq!(status, if allowed { 200 } else { 403 }, "listed {listed:?}, sent {sent:?}");
        assert_eq!(header(&h, "access-control-allow-origin"), allowed.then_some(sent), "listed {listed:?}, sent {sent:?}");
    }
}

#[test]
fn allow_origins_refuses_wildcards_and_what_is_not_an_origin() {
    #[derive(Debug, PartialEq)]
    enum Refused {
        Wildcard,
        NotAnOrigin,
    }
    use Refused::{NotAnOrigin, Wildcard};
    let cases = [
        ("*", Wildcard),
        ("https://*.example.com", Wildcard),
        ("http://localhost:*", Wildcard),
        ("", NotAnOrigin),
        ("null", NotAnOrigin),
        ("app.example.com", NotAnOrigin),
        ("ftp://app.example.com", NotAnOrigin),
        ("ws://app.example.com", NotAnOrigin),
        ("https://app.example.com/", NotAnOrigin),
        ("https://app.example.com/app", NotAnOrigin),
        ("https://app.example.com?x", NotAnOrigin),
        ("https://user@app.example.com", NotAnOrigin),
        ("https://", NotAnOrigin),
        ("https://app.example.com:", NotAnOrigin),
        ("https://app.example.com:0", NotAnOrigin),
        ("https://app.example.com:65536", NotAnOrigin),
        ("https://app.example.com:+443", NotAnOrigin),
        ("http://::1", NotAnOrigin),
    ];
    for (entry, expected) in cases {
        // One bad entry among good ones refuses the list.
        match RpcServer::new(TestHandler::new()).allow_origins(["https://good.example", entry]) {
            Err(e) => {
                let got = match &e {
                    OriginError::Wildcard(_) => Wildcard,
                    OriginError::NotAnOrigin { .. } => NotAnOrigin,
                };
                assert_eq!(got, expected, "{entry:?}: {e:?}");
                let message = e.to_string();
                assert!(message.contains(&format!("`{entry}`")) && message.contains("https://app.example.com"), "{entry:?}: the message names the entry and shows an origin: {message}");
            }
            Ok(_) => panic!("{entry:?} was taken"),
        }
    }
}
