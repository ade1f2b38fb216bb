//! The server's metrics on loopback and on a line connection: off by default, `GET /metrics`
//! behind the authenticator, the exact counts after known traffic (calls by method, errors by
//! code, notifications, batches, refusals by status), bounded method labels, the in-flight and
//! connection gauges back at 0, and an exposition that parses as Prometheus text 0.0.4.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::time::Duration;

use common::{TestHandler, http, serve_at, tokens};
use futures_util::{SinkExt, StreamExt};
use openagents_rpc::metrics::{MAX_METHOD_LABELS, OTHER_LABEL, UNKNOWN_METHOD};
use openagents_rpc::{BoxFuture, Context, Handler, Identity, Limits, Metrics, RpcError, RpcServer, codes, serve_lines};
use serde_json::value::RawValue;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
use tokio_tungstenite::tungstenite::Message;

const JSON: (&str, &str) = ("content-type", "application/json");
const AUTH: (&str, &str) = ("authorization", "Bearer secret-token");
const METHODS: &[&str] = &["echo", "add", "fail", "whoami", "notify_me", "wait"];

/// A sample's name with its labels as written (`name{a="b"}`), and its value.
type Samples = BTreeMap<String, f64>;

/// Fails with `$($why)*` unless `$cond`.
macro_rules! ensure {
    ($cond:expr, $($why:tt)*) => {
        if !$cond {
            return Err(format!($($why)*));
        }
    };
}

/// Parses `text` as the Prometheus text format 0.0.4, refusing anything it does not allow:
/// each family has one `# HELP` and one `# TYPE` line before its samples, which are contiguous;
/// each sample is `name{label="value",...} value` (no timestamp) of its family (a histogram's
/// `_bucket` with `le`, `_sum`, `_count`), its label values escaped; no series twice; a
/// histogram's buckets cumulative and ending at `+Inf` equal to its `_count`.
fn parse_exposition(text: &str) -> Result<Samples, String> {
    ensure!(text.ends_with('\n'), "the exposition does not end with a line feed");
    let mut types: BTreeMap<String, String> = BTreeMap::new();
    let mut helps: BTreeSet<String> = BTreeSet::new();
    let mut seen: BTreeSet<String> = BTreeSet::new();
    let mut current: Option<String> = None;
    let mut samples = Samples::new();
    for (n, line) in text.lines().enumerate() {
        let at = format!("line {}: {line:?}", n + 1);
        if let Some(rest) = line.strip_prefix("# ") {
            let (keyword, rest) = rest.split_once(' ').ok_or_else(|| format!("{at}: a comment without a name"))?;
            let (name, tail) = rest.split_once(' ').ok_or_else(|| format!("{at}: no text"))?;
            ensure!(valid_name(name), "{at}: the metric name");
            ensure!(!seen.contains(name), "{at}: after the family's samples");
            match keyword {
                "HELP" => {
                    ensure!(helps.insert(name.to_owned()), "{at}: a second HELP");
                    ensure!(!tail.is_empty() && !tail.contains('\\'), "{at}: the help text");
                }
                "TYPE" => {
                    ensure!(["counter", "gauge", "histogram", "summary", "untyped"].contains(&tail), "{at}: the type");
                    ensure!(types.insert(name.to_owned(), tail.to_owned()).is_none(), "{at}: a second TYPE");
                }
                other => return Err(format!("{at}: `# {other}`")),
            }
            continue;
        }
        ensure!(!line.is_empty() && !line.starts_with('#'), "{at}: an empty line or a bad comment");
        let (series, value) = line.rsplit_once(' ').ok_or_else(|| format!("{at}: no value"))?;
        let value: f64 = match value {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            v => v.parse().map_err(|_| format!("{at}: the value"))?,
        };
        let (name, labels) = match series.split_once('{') {
            Some((name, rest)) => (name, parse_labels(rest.strip_suffix('}').ok_or_else(|| format!("{at}: the labels"))?).map_err(|e| format!("{at}: {e}"))?),
            None => (series, Vec::new()),
        };
        ensure!(valid_name(name), "{at}: the metric name");
        let family = if types.contains_key(name) {
            name.to_owned()
        } else {
            let base = ["_bucket", "_sum", "_count"].iter().find_map(|s| name.strip_suffix(s)).ok_or_else(|| format!("{at}: no TYPE for `{name}`"))?;
            ensure!(types.get(base).map(String::as_str) == Some("histogram"), "{at}: `{name}` of no histogram");
            ensure!(name.ends_with("_bucket") == labels.iter().any(|(k, _)| k == "le"), "{at}: `le` on buckets only");
            base.to_owned()
        };
        ensure!(helps.contains(&family), "{at}: no HELP for `{family}`");
        if current.as_deref() != Some(family.as_str()) {
            ensure!(!seen.contains(&family), "{at}: the samples of `{family}` are not together");
            current = Some(family.clone());
        }
        for suffix in ["", "_bucket", "_sum", "_count"] {
            seen.insert(format!("{family}{suffix}"));
        }
        ensure!(samples.insert(series.to_owned(), value).is_none(), "{at}: a series twice");
    }
    for (family, kind) in &types {
        ensure!(helps.contains(family), "`{family}` has a TYPE and no HELP");
        if kind == "histogram" {
            check_histogram(&samples, family)?;
        }
    }
    Ok(samples)
}

/// [`parse_exposition`] of what must be a valid exposition.
fn parse(text: &str) -> Samples {
    parse_exposition(text).unwrap_or_else(|e| panic!("not Prometheus text: {e}\n{text}"))
}

fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':') && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

/// `a="x",b="y\"z"` into its pairs, the values unescaped.
fn parse_labels(mut s: &str) -> Result<Vec<(String, String)>, String> {
    let mut out: Vec<(String, String)> = Vec::new();
    while !s.is_empty() {
        let (name, rest) = s.split_once("=\"").ok_or("a label without `=\"`")?;
        ensure!(valid_name(name) && !name.starts_with("__"), "the label name `{name}`");
        let mut value = String::new();
        let mut chars = rest.char_indices();
        let end = loop {
            match chars.next() {
                Some((i, '"')) => break i,
                Some((_, '\\')) => match chars.next() {
                    Some((_, '\\')) => value.push('\\'),
                    Some((_, '"')) => value.push('"'),
                    Some((_, 'n')) => value.push('\n'),
                    other => return Err(format!("the escape {other:?}")),
                },
                Some((_, '\n')) | None => return Err("an unterminated label value".into()),
                Some((_, c)) => value.push(c),
            }
        };
        ensure!(!out.iter().any(|(n, _)| n == name), "the label `{name}` twice");
        out.push((name.to_owned(), value));
        s = &rest[end + 1..];
        match s.strip_prefix(',') {
            Some(more) => s = more,
            None => ensure!(s.is_empty(), "`{s}` after a label"),
        }
    }
    Ok(out)
}

/// Each series of the histogram `family`: buckets cumulative in increasing `le`, the last
/// `+Inf` and equal to `_count`, and a `_sum`.
fn check_histogram(samples: &Samples, family: &str) -> Result<(), String> {
    let count_name = format!("{family}_count");
    for (series, count) in samples.iter().filter(|(k, _)| k.strip_prefix(&count_name).is_some_and(|r| r.is_empty() || r.starts_with('{'))) {
        let labels = series[count_name.len()..].trim_start_matches('{').trim_end_matches('}');
        let bucket_prefix = if labels.is_empty() { format!("{family}_bucket{{le=\"") } else { format!("{family}_bucket{{{labels},le=\"") };
        let mut buckets = Vec::new();
        for (k, v) in samples {
            let Some(le) = k.strip_prefix(&bucket_prefix).and_then(|r| r.strip_suffix("\"}")) else { continue };
            let le: f64 = if le == "+Inf" { f64::INFINITY } else { le.parse().map_err(|_| format!("{k}: `le`"))? };
            buckets.push((le, *v));
        }
        buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
        ensure!(buckets.len() > 1 && buckets.last().map(|b| b.0) == Some(f64::INFINITY), "{series}: no `+Inf` bucket: {buckets:?}");
        ensure!(buckets.windows(2).all(|w| w[0].1 <= w[1].1), "{series}: the buckets are not cumulative: {buckets:?}");
        ensure!(buckets.last().map(|b| b.1) == Some(*count), "{series}: `+Inf` is not the count");
        let sum = if labels.is_empty() { format!("{family}_sum") } else { format!("{family}_sum{{{labels}}}") };
        ensure!(samples.contains_key(&sum), "{series}: no `{sum}`");
    }
    Ok(())
}

/// The values of the series of `name` by their one label's value (`name{label="value"}`).
fn by_label(samples: &Samples, name: &str) -> BTreeMap<String, f64> {
    let prefix = format!("{name}{{");
    samples
        .iter()
        .filter_map(|(k, v)| {
            let labels = k.strip_prefix(&prefix)?.strip_suffix('}')?;
            let pairs = parse_labels(labels).unwrap_or_else(|e| panic!("{k}: {e}"));
            assert_eq!(pairs.len(), 1, "{k}");
            Some((pairs[0].1.clone(), *v))
        })
        .collect()
}

/// `(label, value)` pairs as the map [`by_label`] returns.
fn map(pairs: &[(&str, f64)]) -> BTreeMap<String, f64> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
}

/// `GET /metrics` with `headers`: status, headers, body text.
async fn get_metrics(addr: SocketAddr, headers: &[(&str, &str)]) -> (u16, Vec<(String, String)>, String) {
    let (status, h, body) = http(addr, "GET", "/metrics", headers, b"").await;
    (status, h, String::from_utf8(body).expect("UTF-8"))
}

/// Waits until `metrics` show `value` for the series `series` (a gauge a connection's task
/// changes when it ends).
async fn wait_for(metrics: &Metrics, series: &str, value: f64) {
    let waited = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            if parse(&metrics.render()).get(series) == Some(&value) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    assert!(waited.is_ok(), "{series} never became {value}: {}", metrics.render());
}

#[tokio::test]
async fn metrics_are_off_by_default() {
    let addr = serve_at(RpcServer::new(TestHandler::new())).await;
    for headers in [&[][..], &[AUTH][..]] {
        let (status, _, _) = get_metrics(addr, headers).await;
        assert_eq!(status, 404, "{headers:?}");
    }
    assert_eq!(http(addr, "POST", "/rpc", &[JSON], br#"{"jsonrpc":"2.0","id":1,"method":"echo"}"#).await.0, 200);
    // The router as well.
    let router = RpcServer::new(TestHandler::new()).router();
    let request = axum::http::Request::get("/metrics").body(axum::body::Body::empty()).expect("request");
    assert_eq!(tower::ServiceExt::oneshot(router, request).await.expect("answer").status(), 404);
}

/// A `POST /rpc`: its body, its headers, the status expected and the reply's error code.
type Exchange = (Vec<u8>, Vec<(&'static str, &'static str)>, u16, Option<i64>);

#[tokio::test]
async fn http_traffic_is_counted_exactly_and_metrics_need_the_token() {
    let limit = 512;
    let metrics = Metrics::with_methods(METHODS);
    let server = RpcServer::new(TestHandler::new()).limits(Limits { max_frame_bytes: limit, ..Limits::default() }).authenticator(tokens).metrics(metrics.clone());
    let addr = serve_at(server).await;
    let post = |body: Vec<u8>, headers: Vec<(&'static str, &'static str)>| async move { http(addr, "POST", "/rpc", &headers, &body).await };
    let authed = || vec![JSON, AUTH];
    let traffic: Vec<Exchange> = vec![
        (br#"{"jsonrpc":"2.0","id":1,"method":"add","params":{"a":1,"b":2}}"#.to_vec(), authed(), 200, None),
        (br#"{"jsonrpc":"2.0","id":2,"method":"fail"}"#.to_vec(), authed(), 200, Some(-32050)),
        (br#"{"jsonrpc":"2.0","method":"echo","params":[1]}"#.to_vec(), authed(), 204, None),
        (br#"{"jsonrpc":"2.0","id":3,"method":"nope"}"#.to_vec(), authed(), 200, Some(codes::METHOD_NOT_FOUND)),
        (br#"{"jsonrpc":"2.0","id":4,"method":"add","params":{"a":"x"}}"#.to_vec(), authed(), 200, Some(codes::INVALID_PARAMS)),
        (br#"{"jsonrpc":"2.0","id":5,"method":"echo","params":5}"#.to_vec(), authed(), 200, Some(codes::INVALID_PARAMS)),
        (b"{oops".to_vec(), authed(), 200, Some(codes::PARSE_ERROR)),
        (br#"{"jsonrpc":"1.0","id":6,"method":"echo"}"#.to_vec(), authed(), 200, Some(codes::INVALID_REQUEST)),
        (b"[]".to_vec(), authed(), 200, Some(codes::INVALID_REQUEST)),
        (format!(r#"{{"jsonrpc":"2.0","id":7,"method":"echo","params":["{}"]}}"#, "x".repeat(limit)).into_bytes(), authed(), 413, Some(codes::FRAME_TOO_LARGE)),
        (br#"{"jsonrpc":"2.0","id":8,"method":"add"}"#.to_vec(), vec![JSON], 401, Some(codes::UNAUTHORIZED)),
        (br#"{"jsonrpc":"2.0","id":9,"method":"add"}"#.to_vec(), vec![JSON, ("authorization", "Bearer wrong")], 401, Some(codes::UNAUTHORIZED)),
        (br#"{"jsonrpc":"2.0","id":10,"method":"add"}"#.to_vec(), vec![("content-type", "text/plain"), AUTH], 415, Some(codes::INVALID_REQUEST)),
    ];
    for (body, headers, status, error) in traffic {
        let context = String::from_utf8_lossy(&body[..body.len().min(80)]).into_owned();
        let (got, _, reply) = post(body, headers).await;
        assert_eq!(got, status, "{context}: {}", String::from_utf8_lossy(&reply));
        if status != 204 {
            let reply: serde_json::Value = serde_json::from_slice(&reply).expect("JSON");
            assert_eq!(reply["error"]["code"].as_i64(), error, "{context}: {reply}");
        }
    }
    // A batch: two calls (one to a method not declared) and a notification.
    let batch = br#"[{"jsonrpc":"2.0","id":11,"method":"add","params":{"a":1,"b":1}},{"jsonrpc":"2.0","method":"echo"},{"jsonrpc":"2.0","id":12,"method":"made/up"}]"#;
    let (status, _, reply) = post(batch.to_vec(), authed()).await;
    assert_eq!(status, 200);
    assert_eq!(serde_json::from_slice::<serde_json::Value>(&reply).expect("JSON").as_array().map(Vec::len), Some(2));

    // `GET /metrics` needs the token: each refusal is counted too.
    for headers in [&[][..], &[("authorization", "Bearer wrong")][..]] {
        let (status, h, body) = get_metrics(addr, headers).await;
        assert_eq!(status, 401, "{headers:?}");
        assert!(h.iter().any(|(k, v)| k == "www-authenticate" && v == "Bearer"));
        assert_eq!(common::code(&serde_json::from_str(&body).expect("JSON")), codes::UNAUTHORIZED);
    }
    let (status, h, text) = get_metrics(addr, &[AUTH]).await;
    assert_eq!(status, 200, "{text}");
    assert!(h.iter().any(|(k, v)| k == "content-type" && v == "text/plain; version=0.0.4; charset=utf-8"), "{h:?}");
    assert!(h.iter().any(|(k, v)| k == "cache-control" && v == "no-store"), "{h:?}");
    let samples = parse(&text);

    let calls = by_label(&samples, "openagents_rpc_calls_total");
    // Declared methods and `unknown`, nothing else: `nope` and `made/up` added no label. The
    // call with params that are not an object or an array never reached the handler.
    assert_eq!(calls, map(&[("add", 3.0), ("echo", 2.0), ("fail", 1.0), ("notify_me", 0.0), ("wait", 0.0), ("whoami", 0.0), ("unknown", 2.0)]), "{text}");
    let durations = by_label(&samples, "openagents_rpc_call_duration_seconds_count");
    assert_eq!(durations, calls, "a duration for each call: {text}");
    let errors = by_label(&samples, "openagents_rpc_errors_total");
    let mut expected = map(&[("-32050", 1.0), ("-32601", 2.0), ("-32602", 2.0), ("-32700", 1.0), ("-32600", 2.0)]);
    for code in [codes::INTERNAL_ERROR, codes::UNAUTHORIZED, codes::FORBIDDEN, codes::BUSY, codes::FRAME_TOO_LARGE, codes::TIMEOUT, codes::SHUTTING_DOWN] {
        expected.insert(code.to_string(), 0.0);
    }
    expected.insert(OTHER_LABEL.to_owned(), 0.0);
    // Transport refusals are counted by status, not as JSON-RPC errors.
    assert_eq!(errors, expected, "{text}");
    assert_eq!(samples.get("openagents_rpc_notifications_total"), Some(&2.0), "{text}");
    assert_eq!(samples.get("openagents_rpc_batches_total"), Some(&2.0), "`[]` is a batch too: {text}");
    let refused = by_label(&samples, "openagents_rpc_refused_total");
    assert_eq!(refused, map(&[("400", 0.0), ("401", 4.0), ("403", 0.0), ("408", 0.0), ("413", 1.0), ("415", 1.0), ("431", 0.0), ("503", 0.0)]), "{text}");
    assert_eq!(samples.get("openagents_rpc_in_flight"), Some(&0.0), "{text}");
    let connections = by_label(&samples, "openagents_rpc_connections");
    assert_eq!((connections.get("stdio"), connections.get("websocket")), (Some(&0.0), Some(&0.0)), "{text}");
    assert!(connections.get("http").is_some_and(|n| *n >= 1.0), "the connection asking is open: {text}");
    // Every connection was closed by the client: the gauge goes back to 0.
    wait_for(&metrics, "openagents_rpc_connections{transport=\"http\"}", 0.0).await;
}

#[tokio::test]
async fn metrics_without_an_authenticator_are_open_like_post_rpc() {
    let metrics = Metrics::new();
    let addr = serve_at(RpcServer::new(TestHandler::new()).metrics(metrics.clone())).await;
    let (status, _, text) = get_metrics(addr, &[]).await;
    assert_eq!(status, 200);
    parse(&text);
    // The program holding the metrics renders the same families.
    let families = |t: &str| t.lines().filter(|l| l.starts_with("# TYPE")).map(str::to_owned).collect::<Vec<_>>();
    assert_eq!(families(&text), families(&metrics.render()));
    assert_eq!(families(&text).len(), 8, "{text}");
}

#[tokio::test]
async fn made_up_method_names_add_no_series() {
    // Learned labels: only methods the handler answers get one.
    let metrics = Metrics::new();
    let addr = serve_at(RpcServer::new(TestHandler::new()).metrics(metrics.clone())).await;
    let made_up: Vec<String> = (0..100).map(|i| format!(r#"{{"jsonrpc":"2.0","id":{i},"method":"made-up-{i}"}}"#)).collect();
    for chunk in made_up.chunks(50) {
        let (status, _, _) = http(addr, "POST", "/rpc", &[JSON], format!("[{}]", chunk.join(",")).as_bytes()).await;
        assert_eq!(status, 200);
    }
    let (status, _, _) = http(addr, "POST", "/rpc", &[JSON], br#"{"jsonrpc":"2.0","id":1,"method":"whoami"}"#).await;
    assert_eq!(status, 200);
    let samples = parse(&metrics.render());
    assert_eq!(by_label(&samples, "openagents_rpc_calls_total"), map(&[("whoami", 1.0), (UNKNOWN_METHOD, 100.0), (OTHER_LABEL, 0.0)]));
    assert_eq!(by_label(&samples, "openagents_rpc_errors_total").get("-32601"), Some(&100.0));
    assert!(samples.keys().all(|k| !k.contains("made-up")), "no label of a made-up name");
    assert_eq!(samples.get("openagents_rpc_batches_total"), Some(&2.0));
    const { assert!(MAX_METHOD_LABELS < 100, "the test sends more names than there are labels") };

    // Declared labels: a method the handler answers but the list does not name is `unknown`.
    let metrics = Metrics::with_methods(&["echo", "echo", UNKNOWN_METHOD, OTHER_LABEL, &"x".repeat(200)]);
    let addr = serve_at(RpcServer::new(TestHandler::new()).metrics(metrics.clone())).await;
    for method in ["echo", "whoami", "nope"] {
        let body = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"{method}"}}"#);
        assert_eq!(http(addr, "POST", "/rpc", &[JSON], body.as_bytes()).await.0, 200);
    }
    let samples = parse(&metrics.render());
    assert_eq!(by_label(&samples, "openagents_rpc_calls_total"), map(&[("echo", 1.0), (UNKNOWN_METHOD, 2.0)]));
}

/// Answers every method with `null`: its names all reach the metrics.
struct AnswerAll;

impl Handler for AnswerAll {
    fn call<'a>(&'a self, _cx: &'a Context, _method: &'a str, _params: Option<&'a RawValue>) -> BoxFuture<'a, Result<Box<RawValue>, RpcError>> {
        Box::pin(async { Ok(openagents_rpc::null()) })
    }
}

#[tokio::test]
async fn learned_labels_stop_at_the_cap_and_are_escaped() {
    let metrics = Metrics::new();
    let addr = serve_at(RpcServer::new(AnswerAll).metrics(metrics.clone())).await;
    let weird = "we\\\"ird\\\\\\n";
    let mut names: Vec<String> = (0..MAX_METHOD_LABELS + 10).map(|i| format!("m{i}")).collect();
    names.insert(0, weird.to_owned());
    names.push("x".repeat(200));
    for name in &names {
        let body = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"{name}"}}"#);
        assert_eq!(http(addr, "POST", "/rpc", &[JSON], body.as_bytes()).await.0, 200, "{name}");
    }
    let text = metrics.render();
    let samples = parse(&text);
    let calls = by_label(&samples, "openagents_rpc_calls_total");
    assert_eq!(calls.len(), MAX_METHOD_LABELS + 2, "{text}");
    assert_eq!(calls.get("we\"ird\\\n"), Some(&1.0), "the name as the handler saw it: {text}");
    assert_eq!(calls.get(&format!("m{}", MAX_METHOD_LABELS - 2)), Some(&1.0), "{text}");
    assert_eq!(calls.get(&format!("m{}", MAX_METHOD_LABELS - 1)), None, "{text}");
    assert_eq!(calls.get(OTHER_LABEL), Some(&12.0), "{text}");
    assert_eq!(calls.get(UNKNOWN_METHOD), Some(&0.0), "{text}");
}

#[tokio::test]
async fn in_flight_and_connections_go_back_to_zero() {
    let handler = TestHandler::new();
    let metrics = Metrics::with_methods(METHODS);
    let addr = serve_at(RpcServer::new(handler.clone()).metrics(metrics.clone())).await;
    let gauges = |m: &Metrics| {
        let s = parse(&m.render());
        let c = by_label(&s, "openagents_rpc_connections");
        (s["openagents_rpc_in_flight"], c["websocket"], c["stdio"])
    };
    assert_eq!(gauges(&metrics), (0.0, 0.0, 0.0));
    let over_http = tokio::spawn(async move { http(addr, "POST", "/rpc", &[JSON], br#"{"jsonrpc":"2.0","id":1,"method":"wait"}"#).await });
    let (mut ws, _) = tokio_tungstenite::connect_async(format!("ws://{addr}/rpc")).await.expect("connects");
    ws.send(Message::text(r#"{"jsonrpc":"2.0","id":2,"method":"wait"}"#)).await.expect("send");
    handler.started(2).await;
    assert_eq!(gauges(&metrics), (2.0, 1.0, 0.0));
    let (status, _, text) = get_metrics(addr, &[]).await;
    assert_eq!(status, 200);
    let samples = parse(&text);
    assert_eq!(samples.get("openagents_rpc_in_flight"), Some(&2.0), "{text}");
    assert!(samples.get("openagents_rpc_connections{transport=\"http\"}").is_some_and(|n| *n >= 3.0), "the POST, the WebSocket's and this one: {text}");
    handler.release(2);
    let (status, _, body) = over_http.await.expect("task");
    assert_eq!((status, String::from_utf8_lossy(&body).into_owned()), (200, r#"{"jsonrpc":"2.0","id":1,"result":"waited"}"#.to_owned()));
    let reply = ws.next().await.expect("a reply").expect("a message");
    assert_eq!(reply.to_text().expect("text"), r#"{"jsonrpc":"2.0","id":2,"result":"waited"}"#);
    // Both calls answered: nothing in flight, whatever the connections do next.
    assert_eq!(gauges(&metrics).0, 0.0);
    assert_eq!(by_label(&parse(&metrics.render()), "openagents_rpc_calls_total")["wait"], 2.0);
    ws.close(None).await.expect("close");
    while ws.next().await.is_some() {}
    wait_for(&metrics, "openagents_rpc_connections{transport=\"websocket\"}", 0.0).await;
    wait_for(&metrics, "openagents_rpc_connections{transport=\"http\"}", 0.0).await;
}

#[tokio::test]
async fn a_call_dropped_unanswered_leaves_nothing_in_flight() {
    let handler = TestHandler::new();
    let metrics = Metrics::new();
    let server = RpcServer::new(handler.clone()).metrics(metrics.clone());
    let call = tokio::spawn(async move {
        let cx = Context::detached(Identity::new("test"));
        server.handle_message(&cx, br#"{"jsonrpc":"2.0","id":1,"method":"wait"}"#).await
    });
    handler.started(1).await;
    assert_eq!(parse(&metrics.render())["openagents_rpc_in_flight"], 1.0);
    // The caller goes away (an HTTP client disconnecting, a task cancelled): the call's future
    // is dropped unanswered.
    call.abort();
    assert!(call.await.is_err_and(|e| e.is_cancelled()));
    let samples = parse(&metrics.render());
    assert_eq!(samples["openagents_rpc_in_flight"], 0.0);
    assert_eq!(by_label(&samples, "openagents_rpc_calls_total").get("wait"), None, "an unanswered call is not counted");
}

/// Writes `line` and its line feed.
async fn send(w: &mut (impl tokio::io::AsyncWrite + Unpin), line: &str) {
    w.write_all(format!("{line}\n").as_bytes()).await.expect("write");
}

/// Reads one line as JSON.
async fn recv(r: &mut (impl tokio::io::AsyncBufRead + Unpin)) -> serde_json::Value {
    let mut reply = String::new();
    r.read_line(&mut reply).await.expect("read");
    serde_json::from_str(&reply).unwrap_or_else(|e| panic!("{e}: {reply:?}"))
}

type LineWriter = tokio::io::WriteHalf<tokio::io::DuplexStream>;
type LineReader = tokio::io::BufReader<tokio::io::ReadHalf<tokio::io::DuplexStream>>;

/// A line connection to `server` on an in-memory pipe: its writer, its reader, its task.
fn line_connection(server: RpcServer) -> (LineWriter, LineReader, tokio::task::JoinHandle<std::io::Result<()>>) {
    let (client, server_end) = tokio::io::duplex(1 << 16);
    let (sr, sw) = tokio::io::split(server_end);
    let task = tokio::spawn(async move { serve_lines(&server, tokio::io::BufReader::new(sr), sw).await });
    let (cr, cw) = tokio::io::split(client);
    (cw, tokio::io::BufReader::new(cr), task)
}

#[tokio::test]
async fn stdio_counts_its_calls_errors_and_connections() {
    let handler = TestHandler::new();
    // One set of counters for two line servers, as a process's stdio and HTTP would share it.
    let metrics = Metrics::with_methods(METHODS);
    let limit = 256;
    let (mut w, mut r, task) = line_connection(RpcServer::new(handler.clone()).limits(Limits { max_frame_bytes: limit, ..Limits::default() }).metrics(metrics.clone()));
    send(&mut w, r#"{"jsonrpc":"2.0","id":1,"method":"add","params":[]}"#).await;
    assert_eq!(recv(&mut r).await["error"]["code"], codes::INVALID_PARAMS);
    send(&mut w, r#"{"jsonrpc":"2.0","id":2,"method":"echo","params":[1]}"#).await;
    assert_eq!(recv(&mut r).await["result"], serde_json::json!([1]));
    send(&mut w, r#"{"jsonrpc":"2.0","id":3,"method":"nope"}"#).await;
    assert_eq!(recv(&mut r).await["error"]["code"], codes::METHOD_NOT_FOUND);
    send(&mut w, &format!(r#"{{"jsonrpc":"2.0","id":4,"method":"echo","params":["{}"]}}"#, "x".repeat(limit))).await;
    assert_eq!(recv(&mut r).await["error"]["code"], codes::FRAME_TOO_LARGE);
    send(&mut w, r#"[{"jsonrpc":"2.0","id":5,"method":"fail"}]"#).await;
    assert_eq!(recv(&mut r).await[0]["error"]["code"], -32050);
    send(&mut w, r#"{"jsonrpc":"2.0","method":"echo"}"#).await;

    // A second connection, one call in flight at most: a second call is answered busy at once.
    let (mut w2, mut r2, task2) = line_connection(RpcServer::new(handler.clone()).limits(Limits { max_in_flight: 1, ..Limits::default() }).metrics(metrics.clone()));
    send(&mut w2, r#"{"jsonrpc":"2.0","id":6,"method":"wait"}"#).await;
    handler.started(1).await;
    send(&mut w2, r#"{"jsonrpc":"2.0","id":7,"method":"echo"}"#).await;
    assert_eq!(recv(&mut r2).await["error"]["code"], codes::BUSY);
    let samples = parse(&metrics.render());
    assert_eq!((samples["openagents_rpc_connections{transport=\"stdio\"}"], samples["openagents_rpc_in_flight"]), (2.0, 1.0));
    handler.release(1);
    assert_eq!(recv(&mut r2).await["result"], "waited");

    // The inputs end: each connection finishes its calls (the notification too) and closes.
    w.shutdown().await.expect("shutdown");
    w2.shutdown().await.expect("shutdown");
    task.await.expect("task").expect("serve_lines ends cleanly");
    task2.await.expect("task").expect("serve_lines ends cleanly");
    let text = metrics.render();
    let samples = parse(&text);
    assert_eq!(by_label(&samples, "openagents_rpc_calls_total"), map(&[("add", 1.0), ("echo", 2.0), ("fail", 1.0), ("notify_me", 0.0), ("wait", 1.0), ("whoami", 0.0), ("unknown", 1.0)]), "{text}");
    let errors: BTreeMap<String, f64> = by_label(&samples, "openagents_rpc_errors_total").into_iter().filter(|(_, n)| *n > 0.0).collect();
    assert_eq!(errors, map(&[("-32602", 1.0), ("-32601", 1.0), ("-32008", 1.0), ("-32050", 1.0), ("-32003", 1.0)]), "{text}");
    assert_eq!((samples["openagents_rpc_notifications_total"], samples["openagents_rpc_batches_total"]), (1.0, 1.0), "{text}");
    assert_eq!(samples["openagents_rpc_in_flight"], 0.0, "{text}");
    assert_eq!(by_label(&samples, "openagents_rpc_connections"), map(&[("stdio", 0.0), ("http", 0.0), ("websocket", 0.0)]), "{text}");
    assert!(by_label(&samples, "openagents_rpc_refused_total").values().all(|n| *n == 0.0), "no HTTP here: {text}");
}

#[test]
fn the_parser_refuses_what_prometheus_would() {
    // The checks above are only as good as this parser: it must refuse broken expositions.
    let good = "# HELP a_total A.\n# TYPE a_total counter\na_total{m=\"x\\\"y\"} 1\n# HELP h H.\n# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_sum 3.5\nh_count 2\n";
    let samples = parse_exposition(good).expect("valid");
    assert_eq!((samples.get("a_total{m=\"x\\\"y\"}"), samples.get("h_count")), (Some(&1.0), Some(&2.0)));
    let cases = [
        ("a_total 1\n", "no TYPE"),
        ("# TYPE a_total counter\na_total 1\n", "no HELP"),
        ("# HELP a_total A.\n# TYPE a_total counter\na_total 1", "line feed"),
        ("# HELP a_total A.\n# TYPE a_total counter\na_total{m=\"x} 1\n", "unterminated"),
        ("# HELP a_total A.\n# TYPE a_total counter\na_total{m=\"x\\t\"} 1\n", "escape"),
        ("# HELP a_total A.\n# TYPE a_total counter\na_total{m=\"x\",m=\"y\"} 1\n", "twice"),
        ("# HELP a_total A.\n# TYPE a_total counter\na_total{m=\"x\"} one\n", "value"),
        ("# HELP a_total A.\n# TYPE a_total counter\na_total 1\na_total 2\n", "a series twice"),
        ("# HELP a_total A.\n# TYPE a_total counter\na_total 1\n# TYPE a_total counter\n", "after the family"),
        ("# HELP 1a A.\n# TYPE 1a counter\n1a 1\n", "metric name"),
        ("# HELP a A.\n# TYPE a histogram\na_bucket{le=\"1\"} 2\na_bucket{le=\"+Inf\"} 1\na_sum 0\na_count 1\n", "cumulative"),
        ("# HELP a A.\n# TYPE a histogram\na_bucket{le=\"1\"} 1\na_sum 0\na_count 1\n", "+Inf"),
        ("# HELP a A.\n# TYPE a histogram\na_bucket{le=\"1\"} 1\na_bucket{le=\"+Inf\"} 1\na_count 1\n", "no `a_sum`"),
        ("# HELP a A.\n# TYPE a counter\n# HELP b B.\n# TYPE b counter\na 1\nb 1\na{x=\"y\"} 1\n", "not together"),
    ];
    for (text, why) in cases {
        match parse_exposition(text) {
            Err(e) => assert!(e.contains(why), "{text:?}: refused for another reason: {e}"),
            Ok(s) => panic!("{text:?} taken: {s:?}"),
        }
    }
}
