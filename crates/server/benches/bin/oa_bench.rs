//! The programs behind `crates/server/benches/run.sh` (`make bench`): the three HTTP servers
//! compared on `status` (ours with authentication and schema validation, jsonrpsee, a bare
//! hyper floor), the stdio server and its floor, the stdio driver, the SSE subscribers, and the
//! report. Every server runs on a tokio `current_thread` runtime: one worker thread, which
//! `run.sh` pins to core 0.
//!
//! ```text
//! oa-bench serve-ours|serve-jsonrpsee|serve-floor BIND   prints the bound address, serves until killed
//! oa-bench check OURS JSONRPSEE FLOOR                    the three answer `status` with the same bytes
//! oa-bench stdio-ours | stdio-floor                      serve `status` lines on stdin/stdout
//! oa-bench stdio-drive N CMD ARGS…                       N status lines through CMD: lines per second
//! oa-bench sse ADDR SUBSCRIBERS EVENTS                   events per second to SUBSCRIBERS readers of GET /events
//! oa-bench report FILE                                   the markdown tables of run.sh's raw results
//! oa-bench token                                         prints the bearer token the clients send
//! ```

#![allow(missing_docs)]

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::io::{BufRead, Read, Write};
use std::net::SocketAddr;
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Empty, Full};
use hyper::body::{Bytes, Incoming};
use hyper::header::{AUTHORIZATION, CONTENT_TYPE, HOST};
use hyper::http::HeaderValue;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use openagents_protocol::Turn;
use openagents_server::{FnAgent, Grant, RpcEngine, RuntimeHttpCredential, RuntimeStatus, RuntimeSubmitError, TurnContext};
use tokio::net::{TcpListener, TcpStream};

/// The bearer token every benchmark client presents (the servers that do not check it get it too,
/// so every server reads the same request bytes).
pub const TOKEN: &str = "0b7c5e1f9a2d4c6e8f0a1b3c5d7e9f1a2b4c6d8e0f1a3b5c7d9e1f2a4b6c8d0e";
/// The request every `status` benchmark sends.
pub const STATUS_REQUEST: &str = r#"{"jsonrpc":"2.0","id":1,"method":"status"}"#;
/// The text each event of the SSE benchmark carries.
const EVENT_TEXT: &str = "lorem ipsum ";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize| args.get(i).cloned().unwrap_or_default();
    let result = match arg(0).as_str() {
        "serve-ours" => runtime().block_on(serve_ours(&arg(1))),
        "serve-jsonrpsee" => runtime().block_on(serve_jsonrpsee(&arg(1))),
        "serve-floor" => runtime().block_on(serve_floor(&arg(1))),
        "check" => runtime().block_on(check(&args[1..])),
        "stdio-ours" => stdio_ours(),
        "stdio-floor" => stdio_floor(),
        "stdio-drive" => stdio_drive(&args[1..]),
        "sse" => runtime().block_on(sse(&arg(1), arg(2).parse().unwrap_or(1), arg(3).parse().unwrap_or(100_000))),
        "report" => report(&arg(1)),
        "token" => {
            println!("{TOKEN}");
            Ok(())
        }
        _ => Err("usage: oa-bench serve-ours|serve-jsonrpsee|serve-floor BIND | check A B C | stdio-ours | stdio-floor | stdio-drive N CMD… | sse ADDR SUBS EVENTS | report FILE".into()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("oa-bench: {e}");
            ExitCode::FAILURE
        }
    }
}

type Res = Result<(), String>;

/// One worker thread: the server under test runs on exactly this thread (plus, for stdio,
/// tokio's blocking pool behind `stdin`/`stdout`, as in `openagents serve --stdio`).
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a tokio runtime")
}

/// The engine every "ours" benchmark drives: an in-process agent whose turn, given the task
/// `events:N`, publishes N text events (yielding to the subscribers every `OA_BENCH_YIELD_EVERY`,
/// default 16, so the agent does not simply outrun them on the one thread).
fn engine() -> RpcEngine {
    let every: usize = std::env::var("OA_BENCH_YIELD_EVERY").ok().and_then(|v| v.parse().ok()).unwrap_or(16).max(1);
    RpcEngine::new(FnAgent(move |turn: Turn, ctx: TurnContext| async move {
        let n: usize = turn.task.strip_prefix("events:").and_then(|n| n.parse().ok()).unwrap_or(0);
        for i in 0..n {
            ctx.text(EVENT_TEXT);
            if (i + 1) % every == 0 {
                tokio::task::yield_now().await;
            }
        }
        Ok::<_, RuntimeSubmitError>(format!("published {n} events"))
    }))
}

/// The `status` result a fresh engine answers the benchmark's credential (its `caller` member
/// included), which every comparison server returns.
fn fresh_status() -> RuntimeStatus {
    use futures_util::FutureExt;
    let caller = openagents_server::Caller { name: "bench".into(), grant: Grant::admin(), trusted: false };
    let reply = engine().handle(&caller, STATUS_REQUEST.as_bytes()).now_or_never().expect("status answers at once");
    serde_json::from_slice(&reply.outcome.expect("status answers")).expect("a status result")
}

/// The whole response body to [`STATUS_REQUEST`], as our server writes it.
fn status_response_bytes() -> Vec<u8> {
    let mut out = br#"{"jsonrpc":"2.0","id":1,"result":"#.to_vec();
    out.extend_from_slice(&serde_json::to_vec(&fresh_status()).expect("status encodes"));
    out.push(b'}');
    out
}

fn announce(addr: SocketAddr) {
    println!("{addr}");
    let _ = std::io::stdout().flush();
}

/// Ours: the real `run_http_authorized` path, bearer token and schema validation on.
async fn serve_ours(bind: &str) -> Res {
    let engine = engine();
    let creds = vec![RuntimeHttpCredential::new("bench", TOKEN, Grant::admin())];
    let addr = openagents_server::run_http_authorized(engine.clone(), bind, creds).await.map_err(|e| e.to_string())?;
    announce(addr);
    engine.wait_for_shutdown().await;
    Ok(())
}

/// jsonrpsee 0.26.1's HTTP server with one method, `status`, returning the same status.
async fn serve_jsonrpsee(bind: &str) -> Res {
    use jsonrpsee_server::types::ErrorObjectOwned;
    use jsonrpsee_server::{RpcModule, Server, ServerConfig};
    let config = ServerConfig::builder().http_only().max_connections(256).build();
    let server = Server::builder().set_config(config).build(bind).await.map_err(|e| e.to_string())?;
    let addr = server.local_addr().map_err(|e| e.to_string())?;
    let mut module = RpcModule::new(fresh_status());
    module.register_method("status", |_params, status: &RuntimeStatus, _ext| Ok::<_, ErrorObjectOwned>(status.clone())).map_err(|e| e.to_string())?;
    let handle = server.start(module);
    announce(addr);
    handle.stopped().await;
    Ok(())
}

/// The floor: hyper's HTTP/1 connection with a handler that reads the body and answers the
/// precomputed bytes, parsing nothing.
async fn serve_floor(bind: &str) -> Res {
    let listener = TcpListener::bind(bind).await.map_err(|e| e.to_string())?;
    announce(listener.local_addr().map_err(|e| e.to_string())?);
    let body = Bytes::from(status_response_bytes());
    loop {
        let Ok((stream, _)) = listener.accept().await else { continue };
        let body = body.clone();
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                let body = body.clone();
                async move {
                    let _ = req.into_body().collect().await;
                    let mut r = Response::new(Full::new(body));
                    r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
                    Ok::<_, Infallible>(r)
                }
            });
            let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), svc).await;
        });
    }
}

async fn post(addr: &str, body: &str, token: Option<&str>) -> Result<(StatusCode, Vec<u8>), String> {
    let stream = TcpStream::connect(addr).await.map_err(|e| format!("{addr}: {e}"))?;
    let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(|e| e.to_string())?;
    tokio::spawn(conn);
    let mut req = Request::post("/rpc").header(HOST, addr).header(CONTENT_TYPE, "application/json");
    if let Some(t) = token {
        req = req.header(AUTHORIZATION, format!("Bearer {t}"));
    }
    let resp = send.send_request(req.body(Full::new(Bytes::from(body.to_owned()))).map_err(|e| e.to_string())?).await.map_err(|e| e.to_string())?;
    let status = resp.status();
    let bytes = resp.into_body().collect().await.map_err(|e| e.to_string())?.to_bytes();
    Ok((status, bytes.to_vec()))
}

/// The three servers answer `status` with the same bytes, and ours refuses a request without
/// the token (authentication really is on).
async fn check(addrs: &[String]) -> Res {
    let [ours, jsonrpsee, floor] = addrs else { return Err("check OURS JSONRPSEE FLOOR".into()) };
    let (s, expected) = post(ours, STATUS_REQUEST, Some(TOKEN)).await?;
    if s != StatusCode::OK || !expected.starts_with(br#"{"jsonrpc":"2.0","id":1,"result":{"#) {
        return Err(format!("ours answered {s}: {}", String::from_utf8_lossy(&expected)));
    }
    for (name, addr) in [("jsonrpsee", jsonrpsee), ("floor", floor)] {
        let (s, body) = post(addr, STATUS_REQUEST, Some(TOKEN)).await?;
        if s != StatusCode::OK || body != expected {
            return Err(format!("{name} answered {s} with other bytes:\n  {}\nours:\n  {}", String::from_utf8_lossy(&body), String::from_utf8_lossy(&expected)));
        }
    }
    let (s, _) = post(ours, STATUS_REQUEST, None).await?;
    if s != StatusCode::UNAUTHORIZED {
        return Err(format!("ours answered {s} to a request without a token"));
    }
    let (s, body) = post(ours, r#"{"jsonrpc":"2.0","id":1,"method":"status","params":{"x":1}}"#, Some(TOKEN)).await?;
    if !String::from_utf8_lossy(&body).contains("invalid_params") {
        return Err(format!("ours accepted a request the schema refuses ({s})"));
    }
    println!("response ({} bytes, identical from all three): {}", expected.len(), String::from_utf8_lossy(&expected));
    Ok(())
}

/// `run_stdio_process` on this process's stdin/stdout, as `openagents serve --stdio` runs it.
fn stdio_ours() -> Res {
    runtime().block_on(openagents_server::run_stdio_process(engine())).map_err(|e| e.to_string())
}

/// The stdio floor: read a line, parse it as JSON, write a fixed reply; replies are flushed
/// whenever no further input is already buffered (the same policy as ours: a request/response
/// protocol never holds a reply back while it waits for input).
fn stdio_floor() -> Res {
    let mut reply = status_response_bytes();
    reply.push(b'\n');
    let stdin = std::io::stdin();
    let mut input = std::io::BufReader::with_capacity(64 * 1024, stdin.lock());
    let mut out = std::io::BufWriter::with_capacity(64 * 1024, std::io::stdout().lock());
    let mut line = Vec::with_capacity(256);
    loop {
        if input.buffer().is_empty() {
            out.flush().map_err(|e| e.to_string())?;
        }
        line.clear();
        if input.read_until(b'\n', &mut line).map_err(|e| e.to_string())? == 0 {
            return out.flush().map_err(|e| e.to_string());
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let parsed: serde_json::Value = match serde_json::from_slice(&line) {
            Ok(v) => v,
            Err(e) => return Err(format!("not JSON: {e}")),
        };
        std::hint::black_box(&parsed);
        out.write_all(&reply).map_err(|e| e.to_string())?;
    }
}

/// Feeds N status lines to CMD over a pipe while reading its replies from another; prints
/// the lines per second from the first byte written to the N-th reply read.
/// A process's CPU time so far (user + system, every thread), in clock ticks, from
/// `/proc/<pid>/stat`.
fn cpu_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After `pid (comm)`: state is the first field, utime the 12th and stime the 13th.
    let rest: Vec<&str> = stat[stat.rfind(')')? + 1..].split_whitespace().collect();
    Some(rest.get(11)?.parse::<u64>().ok()? + rest.get(12)?.parse::<u64>().ok()?)
}

fn stdio_drive(args: &[String]) -> Res {
    let n: usize = args.first().and_then(|n| n.parse().ok()).ok_or("stdio-drive N CMD ARGS…")?;
    let cmd = args.get(1).ok_or("stdio-drive N CMD ARGS…")?;
    let mut child = Command::new(cmd).args(&args[2..]).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::inherit()).spawn().map_err(|e| format!("{cmd}: {e}"))?;
    let mut stdin = child.stdin.take().ok_or("no stdin")?;
    let mut stdout = child.stdout.take().ok_or("no stdout")?;
    let line = format!("{STATUS_REQUEST}\n");
    let input = line.repeat(n).into_bytes();
    // Let the child start before the clock does.
    std::thread::sleep(Duration::from_millis(200));
    let cpu0 = cpu_ticks(child.id());
    let t0 = Instant::now();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let mut buf = vec![0u8; 1 << 16];
    let mut lines = 0usize;
    let mut first = Vec::new();
    while lines < n {
        let got = stdout.read(&mut buf).map_err(|e| e.to_string())?;
        if got == 0 {
            break;
        }
        if first.len() < 4096 && lines == 0 {
            first.extend_from_slice(&buf[..got]);
        }
        lines += buf[..got].iter().filter(|&&b| b == b'\n').count();
    }
    let elapsed = t0.elapsed();
    // Before the child exits: its CPU time (all its threads) over the run.
    let cpu = cpu_ticks(child.id()).zip(cpu0).map(|(b, a)| b - a);
    let _ = writer.join();
    let _ = child.wait();
    let first_line = first.split(|&b| b == b'\n').next().unwrap_or_default();
    if lines < n || !first_line.starts_with(br#"{"jsonrpc":"2.0","id":1,"result":{"#) {
        return Err(format!("{lines} of {n} replies; the first: {}", String::from_utf8_lossy(first_line)));
    }
    let cpu = cpu.map_or_else(String::new, |t| format!(" cpu_ticks={t}"));
    println!("lines={n} secs={:.4} lines_per_s={:.0}{cpu}", elapsed.as_secs_f64(), n as f64 / elapsed.as_secs_f64());
    Ok(())
}

#[derive(Default, Debug)]
struct Received {
    text: u64,
    missed: u64,
    done: Option<Instant>,
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// One subscriber of GET /events: counts text events until `turn_completed`.
async fn subscriber(addr: String, ready: tokio::sync::mpsc::Sender<()>) -> Result<Received, String> {
    let stream = TcpStream::connect(&addr).await.map_err(|e| e.to_string())?;
    let _ = stream.set_nodelay(true);
    let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(|e| e.to_string())?;
    tokio::spawn(conn);
    let req = Request::get("/events").header(HOST, &addr).header(AUTHORIZATION, format!("Bearer {TOKEN}")).body(Empty::<Bytes>::new()).map_err(|e| e.to_string())?;
    let resp = send.send_request(req).await.map_err(|e| e.to_string())?;
    if resp.status() != StatusCode::OK {
        return Err(format!("GET /events answered {}", resp.status()));
    }
    let _ = ready.send(()).await;
    let mut body = resp.into_body();
    let mut got = Received::default();
    let mut carry: Vec<u8> = Vec::with_capacity(1 << 16);
    while let Some(frame) = body.frame().await {
        let Ok(data) = frame.map_err(|e| e.to_string())?.into_data() else { continue };
        carry.extend_from_slice(&data);
        let mut start = 0;
        while let Some(nl) = carry[start..].iter().position(|&b| b == b'\n') {
            let line = &carry[start..start + nl];
            start += nl + 1;
            let Some(json) = line.strip_prefix(b"data:") else { continue };
            let Some(at) = find(json, br#""type":""#) else { continue };
            let kind = &json[at + 8..];
            if kind.starts_with(b"text\"") {
                got.text += 1;
            } else if kind.starts_with(b"lagged\"") {
                let missed = find(json, br#""missed":"#).map(|m| json[m + 9..].iter().take_while(|b| b.is_ascii_digit()).fold(0u64, |a, &b| a * 10 + u64::from(b - b'0')));
                got.missed += missed.unwrap_or(0);
            } else if kind.starts_with(b"turn_completed\"") || kind.starts_with(b"turn_failed\"") {
                got.done = Some(Instant::now());
                return Ok(got);
            }
        }
        carry.drain(..start);
    }
    Err("the event stream ended before the turn did".into())
}

/// SUBS readers of GET /events on a server of ours; one `submit` whose turn publishes EVENTS
/// text events; prints events per second delivered (to all readers together).
async fn sse(addr: &str, subs: usize, events: u64) -> Res {
    let (ready_tx, mut ready_rx) = tokio::sync::mpsc::channel(subs.max(1));
    let readers: Vec<_> = (0..subs).map(|_| tokio::spawn(subscriber(addr.to_owned(), ready_tx.clone()))).collect();
    drop(ready_tx);
    for _ in 0..subs {
        ready_rx.recv().await.ok_or("a subscriber failed to connect")?;
    }
    let submit = format!(r#"{{"jsonrpc":"2.0","id":2,"method":"submit","params":{{"task":"events:{events}","runner":"bench"}}}}"#);
    let t0 = Instant::now();
    let (s, body) = post(addr, &submit, Some(TOKEN)).await?;
    if s != StatusCode::OK || !String::from_utf8_lossy(&body).contains("\"result\"") {
        return Err(format!("submit answered {s}: {}", String::from_utf8_lossy(&body)));
    }
    let (mut text, mut missed, mut end) = (0u64, 0u64, t0);
    for r in readers {
        let got = r.await.map_err(|e| e.to_string())??;
        text += got.text;
        missed += got.missed;
        end = end.max(got.done.unwrap_or(t0));
    }
    let secs = end.duration_since(t0).as_secs_f64();
    println!(
        "subscribers={subs} published={events} delivered={text} missed={missed} secs={secs:.4} events_per_s={:.0} per_subscriber_per_s={:.0}",
        text as f64 / secs,
        text as f64 / secs / subs as f64
    );
    Ok(())
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn fields(line: &str) -> BTreeMap<&str, &str> {
    line.split_whitespace().filter_map(|kv| kv.split_once('=')).collect()
}

fn num(f: &BTreeMap<&str, &str>, k: &str) -> f64 {
    f.get(k).and_then(|v| v.parse().ok()).unwrap_or(f64::NAN)
}

fn fmt_us(us: f64) -> String {
    if us >= 1000.0 { format!("{:.2} ms", us / 1000.0) } else { format!("{us:.0} µs") }
}

/// Reads run.sh's raw results and prints the markdown tables.
///
/// Lines: `http conns=C round=R server=S requests=… duration_us=… errors=… p50_us=… p99_us=…
/// cpu_ticks=… clk_tck=…`, `stdio round=R server=S lines=… secs=… lines_per_s=… cpu_ticks=…
/// clk_tck=…`, `sse subscribers=… events_per_s=… cpu_ticks=… clk_tck=…` (the server's CPU time
/// over the run; a line without it leaves those columns out or `NaN`).
fn report(path: &str) -> Res {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    const SERVERS: [&str; 3] = ["ours", "jsonrpsee", "floor"];
    /// Per round: (req/s, p50 µs, p99 µs, the server's CPU µs per request).
    type Rounds = BTreeMap<u32, (f64, f64, f64, f64)>;
    let mut http: BTreeMap<(u32, &str), Rounds> = BTreeMap::new();
    let mut stdio: BTreeMap<&str, BTreeMap<u32, f64>> = BTreeMap::new();
    // Per round: the program's CPU µs per line.
    let mut stdio_cpu: BTreeMap<&str, BTreeMap<u32, f64>> = BTreeMap::new();
    let mut sse_lines = Vec::new();
    let mut errors = 0.0;
    let mut error_runs: Vec<String> = Vec::new();
    for line in text.lines() {
        let f = fields(line);
        match line.split_whitespace().next() {
            Some("http") => {
                let server = SERVERS.iter().find(|s| f.get("server") == Some(s)).copied().unwrap_or("?");
                let rps = num(&f, "requests") / (num(&f, "duration_us") / 1e6);
                errors += num(&f, "errors");
                if num(&f, "errors") > 0.0 {
                    let kinds: Vec<String> = ["connect", "read", "write", "timeout", "status"].iter().filter_map(|k| f.get(format!("err_{k}").as_str()).filter(|v| **v != "0").map(|v| format!("{k} {v}"))).collect();
                    error_runs.push(format!("{server} at {} connections, round {}: {} of {} requests ({})", f.get("conns").unwrap_or(&"?"), f.get("round").unwrap_or(&"?"), f.get("errors").unwrap_or(&"?"), f.get("requests").unwrap_or(&"?"), kinds.join(", ")));
                }
                let cpu_us = num(&f, "cpu_ticks") / num(&f, "clk_tck") * 1e6 / num(&f, "requests");
                http.entry((num(&f, "conns") as u32, server)).or_default().insert(num(&f, "round") as u32, (rps, num(&f, "p50_us"), num(&f, "p99_us"), cpu_us));
            }
            Some("stdio") => {
                let server = if f.get("server") == Some(&"ours") { "ours" } else { "floor" };
                stdio.entry(server).or_default().insert(num(&f, "round") as u32, num(&f, "lines_per_s"));
                stdio_cpu.entry(server).or_default().insert(num(&f, "round") as u32, num(&f, "cpu_ticks") / num(&f, "clk_tck") * 1e6 / num(&f, "lines"));
            }
            Some("sse") => sse_lines.push(f),
            _ => {}
        }
    }
    let conns: std::collections::BTreeSet<u32> = http.keys().map(|(c, _)| *c).collect();
    for c in conns {
        println!("#### {c} connection{}\n", if c == 1 { "" } else { "s" });
        println!("| server | req/s (median) | p50 | p99 | req/s per round | server CPU per request (median) |");
        println!("| --- | ---: | ---: | ---: | --- | ---: |");
        let rounds = |s: &str| http.get(&(c, s)).cloned().unwrap_or_default();
        for s in SERVERS {
            let r = rounds(s);
            let mut rps: Vec<f64> = r.values().map(|x| x.0).collect();
            let mut p50: Vec<f64> = r.values().map(|x| x.1).collect();
            let mut p99: Vec<f64> = r.values().map(|x| x.2).collect();
            let mut cpu: Vec<f64> = r.values().map(|x| x.3).collect();
            let per: Vec<String> = r.values().map(|x| format!("{:.0}", x.0)).collect();
            let label = match s {
                "ours" => "openagents (`run_http_authorized`: bearer token + schema validation)",
                "jsonrpsee" => "jsonrpsee 0.26.1 HTTP server",
                _ => "bare hyper handler (floor)",
            };
            let cpu = median(&mut cpu);
            let cpu = if cpu.is_finite() { format!("{cpu:.2} µs") } else { "—".to_owned() };
            println!("| {label} | {:.0} | {} | {} | {} | {cpu} |", median(&mut rps), fmt_us(median(&mut p50)), fmt_us(median(&mut p99)), per.join(", "));
        }
        // Per round, what `of` gives for `a` over what it gives for `b`: their median and each.
        let ratio_of = |of: fn(&(f64, f64, f64, f64)) -> f64, a: &str, b: &str| {
            let (ra, rb) = (rounds(a), rounds(b));
            let mut v: Vec<f64> = ra.iter().filter_map(|(round, x)| rb.get(round).map(|y| of(x) / of(y))).filter(|r| r.is_finite()).collect();
            let per: Vec<String> = v.iter().map(|r| format!("{r:.3}")).collect();
            (median(&mut v), per.join(", "))
        };
        let ratio = |a: &str, b: &str| ratio_of(|x| x.0, a, b);
        // By the server's own CPU per request: the other's cost over ours, so that it reads like
        // a throughput ratio (above 1: ours costs less).
        let cpu_ratio = |a: &str, b: &str| ratio_of(|x| x.3, b, a);
        let (oj, ojr) = ratio("ours", "jsonrpsee");
        let (of, ofr) = ratio("ours", "floor");
        let (fj, fjr) = ratio("floor", "jsonrpsee");
        println!("\nMedian of the per-round ratios: ours / jsonrpsee **{oj:.3}×** ({ojr}); ours / floor **{of:.3}×** ({ofr}); floor / jsonrpsee {fj:.3}× ({fjr}).");
        let (oj, ojr) = cpu_ratio("ours", "jsonrpsee");
        let (of, ofr) = cpu_ratio("ours", "floor");
        if oj.is_finite() || of.is_finite() {
            println!("By the server's CPU time per request (the other's over ours): ours / jsonrpsee **{oj:.3}×** ({ojr}); ours / floor **{of:.3}×** ({ofr}).");
        }
        println!();
    }
    if !stdio.is_empty() {
        let ours = stdio.get("ours").cloned().unwrap_or_default();
        let floor = stdio.get("floor").cloned().unwrap_or_default();
        let mut o: Vec<f64> = ours.values().copied().collect();
        let mut f: Vec<f64> = floor.values().copied().collect();
        let mut r: Vec<f64> = ours.iter().filter_map(|(k, v)| floor.get(k).map(|w| v / w)).collect();
        let per = |m: &BTreeMap<u32, f64>| m.values().map(|v| format!("{v:.0}")).collect::<Vec<_>>().join(", ");
        println!("#### stdio `status`\n");
        println!("| program | lines/s (median) | per round |");
        println!("| --- | ---: | --- |");
        println!("| openagents `run_stdio_process` (reader and writer threads, current_thread runtime) | {:.0} | {} |", median(&mut o), per(&ours));
        println!("| floor: read line, parse JSON, write fixed reply (std, blocking) | {:.0} | {} |", median(&mut f), per(&floor));
        println!("\nMedian of the per-round ratios: ours / floor **{:.3}×**.", median(&mut r));
        let (oc, fc) = (stdio_cpu.get("ours").cloned().unwrap_or_default(), stdio_cpu.get("floor").cloned().unwrap_or_default());
        let mut cr: Vec<f64> = oc.iter().filter_map(|(k, v)| fc.get(k).map(|w| w / v)).filter(|r| r.is_finite()).collect();
        if !cr.is_empty() {
            let per: Vec<String> = cr.iter().map(|r| format!("{r:.3}")).collect();
            let (mut o, mut f): (Vec<f64>, Vec<f64>) = (oc.values().copied().collect(), fc.values().copied().collect());
            println!(
                "By CPU time per line (every thread of the program): ours {:.3} µs, floor {:.3} µs; floor / ours **{:.3}×** ({}).",
                median(&mut o),
                median(&mut f),
                median(&mut cr),
                per.join(", ")
            );
        }
        println!();
    }
    if !sse_lines.is_empty() {
        println!("#### SSE fan-out (GET /events)\n");
        println!("| subscribers | events published | delivered (all subscribers) | missed (lagged) | seconds | events/s delivered | per subscriber/s | server CPU s | delivered per server CPU second |");
        println!("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
        let cpu_s = |f: &BTreeMap<&str, &str>| num(f, "cpu_ticks") / num(f, "clk_tck");
        for f in &sse_lines {
            println!(
                "| {} | {} | {} | {} | {} | {:.0} | {:.0} | {:.2} | {:.0} |",
                f.get("subscribers").unwrap_or(&"?"),
                f.get("published").unwrap_or(&"?"),
                f.get("delivered").unwrap_or(&"?"),
                f.get("missed").unwrap_or(&"?"),
                f.get("secs").unwrap_or(&"?"),
                num(f, "events_per_s"),
                num(f, "per_subscriber_per_s"),
                cpu_s(f),
                num(f, "delivered") / cpu_s(f)
            );
        }
        let by = |n: &str| sse_lines.iter().find(|f| f.get("subscribers") == Some(&n));
        if let (Some(one), Some(many)) = (by("1"), by("16")) {
            let per_cpu = |f: &BTreeMap<&str, &str>| num(f, "delivered") / cpu_s(f);
            println!(
                "\n16 subscribers against 1: events/s delivered **{:.2}×**; delivered per server CPU second **{:.2}×**.",
                num(many, "events_per_s") / num(one, "events_per_s"),
                per_cpu(many) / per_cpu(one)
            );
        }
        println!();
    }
    if errors > 0.0 {
        println!("**wrk counted {errors} errors (non-2xx or socket errors): the numbers above are not valid.** {}\n", error_runs.join("; "));
    }
    Ok(())
}
