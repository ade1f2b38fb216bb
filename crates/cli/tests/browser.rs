//! What a browser meets, against the real `openagents serve --http` with the operator's
//! `[capabilities.server] allowed_origins = ["https://app.example"]`: CORS on `POST /rpc` and
//! `GET /events` (preflights answered without a token, nothing for any other origin), the
//! WebSocket's `Origin` check before the upgrade (403 for a page of an origin not allowed; the
//! runtime's own origin and clients that send no `Origin` allowed), and the refusal of a
//! handshake that offers the bearer subprotocol without `openagents.v2` (browsers would fail it
//! with an opaque 1006).

mod security_common;

use std::net::SocketAddr;

use security_common::{BOUND, Listening, Setup, http_exchange};
use serde_json::Value;
use tokio_tungstenite::tungstenite;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

const ALLOWED: &str = "https://app.example";
const OTHER: &str = "https://evil.example";

/// `openagents serve --http` with `allowed_origins = [ALLOWED]`, killed on drop.
struct Http {
    addr: SocketAddr,
    token: String,
    // Declared before the setup: the server stops before its folder is removed.
    _server: Listening,
    _setup: Setup,
}

async fn start() -> Http {
    tokio::task::spawn_blocking(start_blocking)
        .await
        .expect("the server starts")
}

fn start_blocking() -> Http {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let setup = Setup::with_config(
        &format!(
            "browser-{}",
            N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ),
        &format!("allowed_origins = [\"{ALLOWED}\"]\n"),
        "",
    );
    listening(setup)
}

/// `openagents serve --http` of `setup`, with the token it generated.
fn listening(setup: Setup) -> Http {
    let server = setup.listen(&[]);
    Http {
        addr: server.addr,
        token: server.token.clone(),
        _server: server,
        _setup: setup,
    }
}

/// An HTTP response, read whole.
#[derive(Debug)]
struct Resp {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Resp {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "status {}: body is not JSON ({e}): {}",
                self.status,
                String::from_utf8_lossy(&self.body)
            )
        })
    }
}

impl Http {
    /// One request on a fresh connection (`Connection: close`), the response read whole.
    async fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, String)],
        body: &str,
    ) -> Resp {
        let mut raw = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nContent-Length: {}\r\nConnection: close\r\n",
            self.addr,
            body.len()
        );
        for (k, v) in headers {
            raw.push_str(&format!("{k}: {v}\r\n"));
        }
        raw.push_str("\r\n");
        raw.push_str(body);
        let addr = self.addr;
        tokio::task::spawn_blocking(move || exchange(addr, raw.as_bytes()))
            .await
            .expect("the exchange")
    }
}

fn exchange(addr: SocketAddr, request: &[u8]) -> Resp {
    let (status, headers, body) = http_exchange(addr, request);
    Resp {
        status,
        headers,
        body,
    }
}

fn header<'a>(r: &'a Resp, name: &str) -> Option<&'a str> {
    r.headers
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

fn cors_headers(r: &Resp) -> Vec<String> {
    r.headers
        .iter()
        .map(|(k, _)| k.clone())
        .filter(|k| k.starts_with("access-control-"))
        .collect()
}

async fn preflight(http: &Http, origin: &str, path: &str, method: &str) -> Resp {
    let headers = [
        ("origin", origin.to_owned()),
        ("access-control-request-method", method.to_owned()),
        (
            "access-control-request-headers",
            "authorization, content-type".to_owned(),
        ),
    ];
    http.request("OPTIONS", path, &headers, "").await
}

#[tokio::test]
async fn a_preflight_from_an_allowed_origin_gets_the_cors_headers_without_a_token() {
    let http = start().await;
    for (path, method) in [("/rpc", "POST"), ("/events", "GET")] {
        let r = preflight(&http, ALLOWED, path, method).await;
        assert!(r.status == 204 || r.status == 200, "{path}: {r:?}");
        assert_eq!(
            header(&r, "access-control-allow-origin"),
            Some(ALLOWED),
            "{path}"
        );
        let methods = header(&r, "access-control-allow-methods")
            .unwrap_or_default()
            .to_ascii_uppercase();
        assert!(
            methods.split(',').any(|m| m.trim() == method),
            "{path}: allow-methods {methods:?} lacks {method}"
        );
        let allowed: Vec<String> = header(&r, "access-control-allow-headers")
            .unwrap_or_default()
            .split(',')
            .map(|h| h.trim().to_ascii_lowercase())
            .collect();
        for h in ["authorization", "content-type"] {
            assert!(
                allowed.iter().any(|a| a == h),
                "{path}: allow-headers {allowed:?} lacks {h}"
            );
        }
        let max_age: u64 = header(&r, "access-control-max-age")
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{path}: no numeric max-age: {r:?}"));
        assert!(max_age > 0);
        assert!(
            header(&r, "vary").is_some_and(|v| v.to_ascii_lowercase().contains("origin")),
            "{path}: a preflight answer varies by Origin"
        );
    }
}

#[tokio::test]
async fn a_preflight_from_any_other_origin_gets_no_cors_headers() {
    let http = start().await;
    for origin in [
        OTHER,
        "https://app.example.evil",
        "http://app.example",
        "https://app.example:8443",
        "null",
    ] {
        let r = preflight(&http, origin, "/rpc", "POST").await;
        assert_eq!(cors_headers(&r), Vec::<String>::new(), "{origin}: {r:?}");
    }
}

#[tokio::test]
async fn responses_are_readable_by_the_allowed_origin_only() {
    let http = start().await;
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"status"}"#;
    let admin = http.token.clone();
    let post = |origin: &'static str, token: Option<String>| {
        let mut headers = vec![
            ("content-type", "application/json".to_owned()),
            ("origin", origin.to_owned()),
        ];
        if let Some(t) = token {
            headers.push(("authorization", format!("Bearer {t}")));
        }
        let http = &http;
        async move { http.request("POST", "/rpc", &headers, body).await }
    };
    let r = post(ALLOWED, Some(admin.clone())).await;
    assert_eq!(r.status, 200);
    assert_eq!(header(&r, "access-control-allow-origin"), Some(ALLOWED));
    // A 401 is readable too, so a page can tell a bad token from a network failure.
    let r = post(ALLOWED, None).await;
    assert_eq!(r.status, 401);
    assert_eq!(header(&r, "access-control-allow-origin"), Some(ALLOWED));
    assert_eq!(r.json()["jsonrpc"], "2.0");
    for token in [Some(admin), None] {
        let r = post(OTHER, token).await;
        assert_eq!(cors_headers(&r), Vec::<String>::new(), "{r:?}");
    }
}

/// A WebSocket handshake to `/frontend/v2` with `origin` (none: no header) and the offered
/// `protocols`, authorized by the Authorization header when `header_token`: the selected
/// subprotocol on success, or the refusal's status and body.
async fn handshake(
    http: &Http,
    origin: Option<&str>,
    protocols: &str,
    header_token: bool,
) -> Result<Option<String>, (u16, String)> {
    let mut request = format!("ws://{}/frontend/v2", http.addr)
        .into_client_request()
        .expect("a request");
    let h = request.headers_mut();
    if let Some(o) = origin {
        h.insert("origin", o.parse().expect("header"));
    }
    if !protocols.is_empty() {
        h.insert("sec-websocket-protocol", protocols.parse().expect("header"));
    }
    if header_token {
        h.insert(
            "authorization",
            format!("Bearer {}", http.token).parse().expect("header"),
        );
    }
    let handshake = tokio::time::timeout(BOUND, tokio_tungstenite::connect_async(request))
        .await
        .expect("the handshake in time");
    match handshake {
        Ok((_ws, response)) => Ok(response
            .headers()
            .get("sec-websocket-protocol")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)),
        Err(tungstenite::Error::Http(response)) => Err((response.status().as_u16(), body_text(&response))),
        Err(e) => panic!("the handshake failed without an HTTP answer: {e}"),
    }
}

fn refusal_body(body: &str) -> Value {
    let v: Value = serde_json::from_str(body)
        .unwrap_or_else(|e| panic!("a refusal body that is not JSON ({e}): {body}"));
    assert_eq!(v["jsonrpc"], "2.0", "{v}");
    assert_eq!(v["id"], Value::Null, "{v}");
    v
}

#[tokio::test]
async fn a_websocket_from_an_origin_not_allowed_is_refused_before_the_upgrade() {
    let http = start().await;
    let own = format!("http://{}", http.addr);
    let bearer = format!("openagents.v2, openagents.bearer.{}", http.token);
    // (what, Origin, protocols, Authorization header, expected subprotocol)
    let allowed: [(&str, Option<&str>, &str, bool, Option<&str>); 4] = [
        ("no Origin (not a browser)", None, "", true, None),
        (
            "the allowed origin",
            Some(ALLOWED),
            &bearer,
            false,
            Some("openagents.v2"),
        ),
        (
            "the runtime's own origin",
            Some(&own),
            &bearer,
            false,
            Some("openagents.v2"),
        ),
        (
            "no Origin, header token and openagents.v2",
            None,
            "openagents.v2",
            true,
            Some("openagents.v2"),
        ),
    ];
    for (what, origin, protocols, header_token, expected) in allowed {
        assert_eq!(
            handshake(&http, origin, protocols, header_token).await,
            Ok(expected.map(str::to_owned)),
            "{what}"
        );
    }
    for origin in [OTHER, "http://127.0.0.1:1", "null"] {
        let (status, body) = handshake(&http, Some(origin), &bearer, false)
            .await
            .expect_err(origin);
        assert_eq!(status, 403, "{origin}: {body}");
        let v = refusal_body(&body);
        assert_eq!(v["error"]["data"]["code"], "forbidden", "{origin}: {v}");
        // Refused before authentication: a header token does not change it.
        let (status, _) = handshake(&http, Some(origin), "openagents.v2", true)
            .await
            .expect_err(origin);
        assert_eq!(status, 403, "{origin} with a header token");
    }
}

#[tokio::test]
async fn offering_only_the_bearer_subprotocol_is_refused_with_what_to_offer() {
    let http = start().await;
    let only_bearer = format!("openagents.bearer.{}", http.token);
    for origin in [None, Some(ALLOWED)] {
        let (status, body) = handshake(&http, origin, &only_bearer, false)
            .await
            .expect_err("only the bearer subprotocol");
        assert_eq!(status, 400, "{body}");
        let v = refusal_body(&body);
        assert_eq!(v["error"]["data"]["code"], "invalid_request", "{v}");
        let message = v["error"]["data"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("openagents.v2"),
            "the refusal says to offer openagents.v2: {message}"
        );
        assert!(
            !body.contains(&http.token),
            "the refusal never repeats the token: {body}"
        );
    }
    // With openagents.v2 beside it, the same token opens the socket.
    assert_eq!(
        handshake(
            &http,
            Some(ALLOWED),
            &format!("{only_bearer}, openagents.v2"),
            false
        )
        .await,
        Ok(Some("openagents.v2".to_owned()))
    );
}

/// `openagents serve --http` with the operator's `allowed_hosts = ["agents.internal"]`.
fn start_with_allowed_hosts() -> Http {
    listening(Setup::with_config("browser-hosts", "allowed_hosts = [\"agents.internal\"]\n", ""))
}

/// A WebSocket handshake to `/frontend/v2` with `Host: host`, `Origin: origin` and the bearer
/// subprotocol: the status of the answer (101 when it upgrades).
async fn handshake_as(http: &Http, host: &str, origin: &str) -> u16 {
    let mut request = format!("ws://{}/frontend/v2", http.addr)
        .into_client_request()
        .expect("a request");
    let h = request.headers_mut();
    h.insert("host", host.parse().expect("header"));
    h.insert("origin", origin.parse().expect("header"));
    let protocols = format!("openagents.v2, openagents.bearer.{}", http.token);
    h.insert("sec-websocket-protocol", protocols.parse().expect("header"));
    let handshake = tokio::time::timeout(BOUND, tokio_tungstenite::connect_async(request))
        .await
        .expect("the handshake in time");
    match handshake {
        Ok((_ws, response)) => response.status().as_u16(),
        Err(tungstenite::Error::Http(response)) => {
            refusal_body(&body_text(&response));
            response.status().as_u16()
        }
        Err(e) => panic!("the handshake failed without an HTTP answer: {e}"),
    }
}

#[tokio::test]
async fn only_hosts_the_runtime_answers_to_get_the_page_and_the_websocket() {
    let http = tokio::task::spawn_blocking(start_with_allowed_hosts)
        .await
        .expect("the server starts");
    let port = http.addr.port();
    let page = |host: String| {
        let addr = http.addr;
        let raw = format!("GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
        async move {
            tokio::task::spawn_blocking(move || exchange(addr, raw.as_bytes()))
                .await
                .expect("the exchange")
        }
    };
    // The operator's name, the loopback names, the address itself.
    for host in [
        format!("agents.internal:{port}"),
        format!("localhost:{port}"),
        format!("127.0.0.1:{port}"),
    ] {
        assert_eq!(page(host.clone()).await.status, 200, "GET / with Host {host}");
        let origin = format!("http://{host}");
        assert_eq!(handshake_as(&http, &host, &origin).await, 101, "the WebSocket with Host {host}");
    }
    // DNS rebinding: a name the runtime does not answer to.
    let evil = format!("evil.example:{port}");
    let r = page(evil.clone()).await;
    assert_eq!(r.status, 421, "GET / with Host {evil}");
    assert_eq!(r.json()["error"]["data"]["code"], "forbidden");
    let status = handshake_as(&http, &evil, &format!("http://{evil}")).await;
    assert!(status == 403 || status == 421, "the rebinding pair on the WebSocket: {status}");
    // Nor is the rebinding page's origin its own on `POST /rpc`.
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"status"}"#;
    let headers = [
        ("content-type", "application/json".to_owned()),
        ("authorization", format!("Bearer {}", http.token)),
        ("origin", format!("http://{evil}")),
    ];
    let mut raw = format!(
        "POST /rpc HTTP/1.1\r\nHost: {evil}\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (k, v) in &headers {
        raw.push_str(&format!("{k}: {v}\r\n"));
    }
    raw.push_str("\r\n");
    raw.push_str(body);
    let addr = http.addr;
    let r = tokio::task::spawn_blocking(move || exchange(addr, raw.as_bytes()))
        .await
        .expect("the exchange");
    assert_eq!(r.status, 403, "POST /rpc from the rebinding page");
}

#[tokio::test]
async fn rpc_and_events_refuse_a_browser_origin_not_allowed() {
    let http = start().await;
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"status"}"#;
    let auth = ("authorization", format!("Bearer {}", http.token));
    let json = ("content-type", "application/json".to_owned());
    let r = http
        .request("POST", "/rpc", &[auth.clone(), json.clone(), ("origin", OTHER.to_owned())], body)
        .await;
    assert_eq!(r.status, 403, "POST /rpc from {OTHER}");
    assert_eq!(r.json()["error"]["data"]["code"], "forbidden");
    let r = http
        .request("GET", "/events", &[auth.clone(), ("origin", OTHER.to_owned())], "")
        .await;
    assert_eq!(r.status, 403, "GET /events from {OTHER}");
    assert_eq!(r.json()["error"]["data"]["code"], "forbidden");
    // The allowed origin, and a client without an Origin, are served.
    let r = http
        .request("POST", "/rpc", &[auth.clone(), json.clone(), ("origin", ALLOWED.to_owned())], body)
        .await;
    assert_eq!(r.status, 200);
    let r = http.request("POST", "/rpc", &[auth, json], body).await;
    assert_eq!(r.status, 200);
}

/// The body of a refused WebSocket handshake, as text (empty when it had none).
fn body_text(response: &tungstenite::http::Response<Option<Vec<u8>>>) -> String {
    response.body().as_ref().map(|b| String::from_utf8_lossy(b).into_owned()).unwrap_or_default()
}
