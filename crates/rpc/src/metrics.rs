//! A server's counters ([`Metrics`]) and their Prometheus text exposition (format 0.0.4), served
//! at `GET /metrics` when the server has them. Counting is a relaxed atomic add (and, per call,
//! two clock reads) on paths that already do far more work; nothing here locks or allocates per
//! call, except the first call of a method not yet seen, which claims its label once.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use crate::codes;

/// The upper bounds, in seconds, of the call latency histogram's buckets (as openagents' runtime
/// buckets its requests): from half a millisecond, for calls answered from memory, to five
/// minutes, for calls that wait on a slow backend.
pub const LATENCY_BUCKETS: &[f64] = &[0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0];

/// The most method labels [`Metrics::new`] learns: the first methods the handler answers (with
/// anything but -32601) each get their own label, later ones are counted under `other`. Bounds
/// the series a server exports whatever its callers send; a service has far fewer methods.
pub const MAX_METHOD_LABELS: usize = 64;

/// The most error codes counted under their own label beyond the core's own ([`codes`]); later
/// ones are counted under `code="other"`. A service's error codes are few; a handler that makes
/// them up per call cannot grow the exposition without bound.
pub const MAX_CODE_LABELS: usize = 32;

/// The longest method name that gets a label of its own, in bytes; a longer one is counted under
/// `other`.
pub const MAX_LABEL_BYTES: usize = 128;

/// The label of calls to methods the handler does not know (it answered -32601), or, with
/// [`Metrics::with_methods`], that are not declared.
pub const UNKNOWN_METHOD: &str = "unknown";

/// The label of calls to known methods past [`MAX_METHOD_LABELS`] (and of error codes past
/// [`MAX_CODE_LABELS`]).
pub const OTHER_LABEL: &str = "other";

/// The HTTP statuses of transport refusals, each a label of `openagents_rpc_refused_total`.
pub const REFUSED_STATUSES: [u16; 8] = [400, 401, 403, 408, 413, 415, 431, 503];

/// The core's own error codes: always exported, at 0 until answered.
const CORE_CODES: [i64; 11] = [codes::PARSE_ERROR, codes::INVALID_REQUEST, codes::METHOD_NOT_FOUND, codes::INVALID_PARAMS, codes::INTERNAL_ERROR, codes::UNAUTHORIZED, codes::FORBIDDEN, codes::BUSY, codes::FRAME_TOO_LARGE, codes::TIMEOUT, codes::SHUTTING_DOWN];

/// The transports a connection is counted under.
#[derive(Debug, Clone, Copy)]
#[cfg_attr(not(feature = "http"), allow(dead_code))]
pub(crate) enum Transport {
    /// A line connection ([`crate::serve_lines`], stdio).
    Stdio = 0,
    /// A TCP connection to [`crate::RpcServer::serve_http`] (a WebSocket's among them).
    Http = 1,
    /// A WebSocket.
    WebSocket = 2,
}

const TRANSPORTS: [&str; 3] = ["stdio", "http", "websocket"];

/// One method label's calls and their latencies.
struct MethodStats {
    name: OnceLock<Box<str>>,
    calls: AtomicU64,
    /// Counts per bucket of [`LATENCY_BUCKETS`], then `+Inf` (not cumulative: the exposition
    /// sums them).
    buckets: [AtomicU64; LATENCY_BUCKETS.len() + 1],
    /// The sum of durations, in microseconds.
    sum_us: AtomicU64,
}

impl MethodStats {
    fn new(name: Option<&str>) -> MethodStats {
        let slot = OnceLock::new();
        if let Some(n) = name {
            let _ = slot.set(n.into());
        }
        MethodStats { name: slot, calls: AtomicU64::new(0), buckets: std::array::from_fn(|_| AtomicU64::new(0)), sum_us: AtomicU64::new(0) }
    }

    fn record(&self, elapsed: Duration) {
        self.calls.fetch_add(1, Ordering::Relaxed);
        let seconds = elapsed.as_secs_f64();
        let bucket = LATENCY_BUCKETS.iter().position(|b| seconds <= *b).unwrap_or(LATENCY_BUCKETS.len());
        self.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        self.sum_us.fetch_add(u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX), Ordering::Relaxed);
    }
}

/// One error code's count.
struct CodeStats {
    code: OnceLock<i64>,
    count: AtomicU64,
}

struct Registry {
    /// Whether `methods` is a declared list ([`Metrics::with_methods`]) rather than learned.
    declared: bool,
    methods: Box<[MethodStats]>,
    unknown: MethodStats,
    other: MethodStats,
    codes: Box<[CodeStats]>,
    other_codes: AtomicU64,
    notifications: AtomicU64,
    batches: AtomicU64,
    refused: [AtomicU64; REFUSED_STATUSES.len()],
    in_flight: AtomicI64,
    connections: [AtomicI64; TRANSPORTS.len()],
}

/// A server's counters, exported in the Prometheus text format (version 0.0.4) by
/// [`Metrics::render`] and, on a server given them with [`crate::RpcServer::metrics`], at
/// `GET /metrics`. Cheap to clone: clones share the counters, so one set can count a process's
/// stdio and HTTP servers together, and the program can render them where it likes.
///
/// The families (every name starts `openagents_rpc_`):
///
/// | name | type | labels | what |
/// |---|---|---|---|
/// | `calls_total` | counter | `method` | calls (requests and notifications) the handler answered |
/// | `call_duration_seconds` | histogram | `method` | how long the handler took, buckets [`LATENCY_BUCKETS`] |
/// | `errors_total` | counter | `code` | JSON-RPC errors, the core's and the handler's (a notification's too, though it is not sent) |
/// | `notifications_total` | counter | | notifications received |
/// | `batches_total` | counter | | batches received |
/// | `refused_total` | counter | `status` | HTTP requests and WebSocket upgrades refused at the transport ([`REFUSED_STATUSES`]) |
/// | `in_flight` | gauge | | calls running in the handler now |
/// | `connections` | gauge | `transport` | connections open: `stdio` (each [`crate::serve_lines`]), `http` (TCP connections to [`crate::RpcServer::serve_http`], an upgraded WebSocket's among them), `websocket` |
///
/// Label cardinality is bounded: the handler trait lists no methods, so [`Metrics::new`] learns
/// a label for each method the handler answers with anything but -32601, up to
/// [`MAX_METHOD_LABELS`] (then `other`), and counts methods it does not know under `unknown`: a
/// caller sending made-up names adds no series. [`Metrics::with_methods`] takes the service's
/// declared names instead (a generated service's `Method::NAMES`), and counts every other name
/// under `unknown`. Error codes: the core's own and up to [`MAX_CODE_LABELS`] more, then `other`.
///
/// ```
/// use openagents_rpc::{Context, Identity, Metrics, RpcServer};
/// # use openagents_rpc::{BoxFuture, Handler, RpcError};
/// # use serde_json::value::RawValue;
/// # struct Echo;
/// # impl Handler for Echo {
/// #     fn call<'a>(&'a self, _cx: &'a Context, method: &'a str, params: Option<&'a RawValue>) -> BoxFuture<'a, Result<Box<RawValue>, RpcError>> {
/// #         Box::pin(async move { match method { "echo" => Ok(openagents_rpc::null()), other => Err(RpcError::method_not_found(other)) } })
/// #     }
/// # }
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let metrics = Metrics::with_methods(&["echo"]);
/// let server = RpcServer::new(Echo).metrics(metrics.clone());
/// let cx = Context::detached(Identity::new("test"));
/// server.handle_message(&cx, br#"{"jsonrpc":"2.0","id":1,"method":"echo"}"#).await;
/// server.handle_message(&cx, br#"{"jsonrpc":"2.0","id":2,"method":"nope"}"#).await;
/// let text = metrics.render();
/// assert!(text.contains("openagents_rpc_calls_total{method=\"echo\"} 1\n"));
/// assert!(text.contains("openagents_rpc_calls_total{method=\"unknown\"} 1\n"));
/// assert!(text.contains("openagents_rpc_errors_total{code=\"-32601\"} 1\n"));
/// # });
/// ```
#[derive(Clone)]
pub struct Metrics {
    inner: Arc<Registry>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").field("declared", &self.inner.declared).finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// Counters that learn their method labels: see the type's documentation.
    pub fn new() -> Metrics {
        Metrics::build(false, (0..MAX_METHOD_LABELS).map(|_| MethodStats::new(None)).collect())
    }

    /// Counters with one label per name of `methods` (the service's declared methods: a
    /// generated service's `Method::NAMES`); calls to any other name are counted under
    /// `unknown`. A name given twice, longer than [`MAX_LABEL_BYTES`], or `unknown` or `other`
    /// gets no label of its own.
    pub fn with_methods(methods: &[&str]) -> Metrics {
        let mut names: Vec<&str> = Vec::new();
        for m in methods {
            if m.len() <= MAX_LABEL_BYTES && *m != UNKNOWN_METHOD && *m != OTHER_LABEL && !names.contains(m) {
                names.push(m);
            }
        }
        Metrics::build(true, names.into_iter().map(|n| MethodStats::new(Some(n))).collect())
    }

    fn build(declared: bool, methods: Box<[MethodStats]>) -> Metrics {
        let codes = CORE_CODES
            .iter()
            .map(|c| Some(*c))
            .chain((0..MAX_CODE_LABELS).map(|_| None))
            .map(|c| {
                let code = OnceLock::new();
                if let Some(c) = c {
                    let _ = code.set(c);
                }
                CodeStats { code, count: AtomicU64::new(0) }
            })
            .collect();
        let inner = Registry {
            declared,
            methods,
            unknown: MethodStats::new(Some(UNKNOWN_METHOD)),
            other: MethodStats::new(Some(OTHER_LABEL)),
            codes,
            other_codes: AtomicU64::new(0),
            notifications: AtomicU64::new(0),
            batches: AtomicU64::new(0),
            refused: std::array::from_fn(|_| AtomicU64::new(0)),
            in_flight: AtomicI64::new(0),
            connections: std::array::from_fn(|_| AtomicI64::new(0)),
        };
        Metrics { inner: Arc::new(inner) }
    }

    /// The stats of `method`'s label; `not_found`: the handler answered -32601.
    fn method(&self, method: &str, not_found: bool) -> &MethodStats {
        let r = &*self.inner;
        if not_found {
            return &r.unknown;
        }
        for s in &r.methods {
            match s.name.get() {
                Some(n) if **n == *method => return s,
                Some(_) => {}
                None => {
                    // Labels are claimed in order, so racing first calls of one method meet at
                    // the same slot.
                    if method.len() > MAX_LABEL_BYTES || method == UNKNOWN_METHOD || method == OTHER_LABEL {
                        return &r.other;
                    }
                    if s.name.set(method.into()).is_ok() || s.name.get().is_some_and(|n| **n == *method) {
                        return s;
                    }
                }
            }
        }
        if r.declared { &r.unknown } else { &r.other }
    }

    /// A call is starting: counted in flight until the guard is dropped.
    pub(crate) fn call_started(&self) -> InFlight {
        self.inner.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight(Arc::clone(&self.inner))
    }

    /// The handler answered a call to `method` (`error`: the code it answered) after `elapsed`.
    pub(crate) fn call_finished(&self, method: &str, error: Option<i64>, elapsed: Duration) {
        self.method(method, error == Some(codes::METHOD_NOT_FOUND)).record(elapsed);
        if let Some(code) = error {
            self.error(code);
        }
    }

    /// Counts one JSON-RPC error answered (or, for a notification, dropped) with `code`.
    pub(crate) fn error(&self, code: i64) {
        let r = &*self.inner;
        for s in &r.codes {
            match s.code.get() {
                Some(c) if *c == code => {}
                Some(_) => continue,
                None => {
                    if s.code.set(code).is_err() && s.code.get() != Some(&code) {
                        continue;
                    }
                }
            }
            s.count.fetch_add(1, Ordering::Relaxed);
            return;
        }
        r.other_codes.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts one notification received.
    pub(crate) fn notification(&self) {
        self.inner.notifications.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts one batch received.
    pub(crate) fn batch(&self) {
        self.inner.batches.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts one transport refusal with the HTTP `status` (one of [`REFUSED_STATUSES`]).
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    pub(crate) fn refused(&self, status: u16) {
        if let Some(i) = REFUSED_STATUSES.iter().position(|s| *s == status) {
            self.inner.refused[i].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Counts an open connection of `transport` until the gauge is dropped.
    pub(crate) fn connection(&self, transport: Transport) -> ConnectionGauge {
        self.inner.connections[transport as usize].fetch_add(1, Ordering::Relaxed);
        ConnectionGauge(Arc::clone(&self.inner), transport)
    }

    /// The Prometheus text exposition (format 0.0.4) of these counters: the families in the
    /// type's documentation, each with its `# HELP` and `# TYPE` lines.
    pub fn render(&self) -> String {
        let r = &*self.inner;
        let mut out = String::with_capacity(8192);
        let family = |out: &mut String, name: &str, kind: &str, help: &str| {
            let _ = writeln!(out, "# HELP openagents_rpc_{name} {help}\n# TYPE openagents_rpc_{name} {kind}");
        };
        let methods: Vec<(&str, &MethodStats)> = r.methods.iter().chain([&r.unknown, &r.other]).filter_map(|s| s.name.get().map(|n| (&**n, s))).filter(|(n, _)| !(r.declared && *n == OTHER_LABEL)).collect();
        family(&mut out, "calls_total", "counter", "Calls (requests and notifications) the handler answered, by method.");
        for (name, s) in &methods {
            let _ = writeln!(out, "openagents_rpc_calls_total{{method=\"{}\"}} {}", escape(name), s.calls.load(Ordering::Relaxed));
        }
        family(&mut out, "call_duration_seconds", "histogram", "How long the handler took to answer a call, by method.");
        for (name, s) in &methods {
            let name = escape(name);
            let mut cumulative = 0;
            for (b, count) in s.buckets.iter().enumerate() {
                cumulative += count.load(Ordering::Relaxed);
                let le = LATENCY_BUCKETS.get(b).map_or_else(|| "+Inf".to_owned(), f64::to_string);
                let _ = writeln!(out, "openagents_rpc_call_duration_seconds_bucket{{method=\"{name}\",le=\"{le}\"}} {cumulative}");
            }
            let _ = writeln!(out, "openagents_rpc_call_duration_seconds_sum{{method=\"{name}\"}} {}", s.sum_us.load(Ordering::Relaxed) as f64 / 1e6);
            let _ = writeln!(out, "openagents_rpc_call_duration_seconds_count{{method=\"{name}\"}} {cumulative}");
        }
        family(&mut out, "errors_total", "counter", "JSON-RPC errors answered (a notification's dropped), by code.");
        for s in &r.codes {
            if let Some(code) = s.code.get() {
                let _ = writeln!(out, "openagents_rpc_errors_total{{code=\"{code}\"}} {}", s.count.load(Ordering::Relaxed));
            }
        }
        let _ = writeln!(out, "openagents_rpc_errors_total{{code=\"{OTHER_LABEL}\"}} {}", r.other_codes.load(Ordering::Relaxed));
        family(&mut out, "notifications_total", "counter", "Notifications received.");
        let _ = writeln!(out, "openagents_rpc_notifications_total {}", r.notifications.load(Ordering::Relaxed));
        family(&mut out, "batches_total", "counter", "Batches received.");
        let _ = writeln!(out, "openagents_rpc_batches_total {}", r.batches.load(Ordering::Relaxed));
        family(&mut out, "refused_total", "counter", "HTTP requests and WebSocket upgrades refused at the transport, by status.");
        for (status, n) in REFUSED_STATUSES.iter().zip(&r.refused) {
            let _ = writeln!(out, "openagents_rpc_refused_total{{status=\"{status}\"}} {}", n.load(Ordering::Relaxed));
        }
        family(&mut out, "in_flight", "gauge", "Calls running in the handler now.");
        let _ = writeln!(out, "openagents_rpc_in_flight {}", r.in_flight.load(Ordering::Relaxed));
        family(&mut out, "connections", "gauge", "Connections open, by transport.");
        for (transport, n) in TRANSPORTS.iter().zip(&r.connections) {
            let _ = writeln!(out, "openagents_rpc_connections{{transport=\"{transport}\"}} {}", n.load(Ordering::Relaxed));
        }
        out
    }
}

/// A label value escaped for the text format: `\`, `"` and line feeds.
fn escape(value: &str) -> std::borrow::Cow<'_, str> {
    if !value.contains(['\\', '"', '\n']) {
        return std::borrow::Cow::Borrowed(value);
    }
    std::borrow::Cow::Owned(value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n"))
}

/// A call counted in flight until dropped (also when its future is dropped unanswered).
pub(crate) struct InFlight(Arc<Registry>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A connection counted open until dropped.
pub(crate) struct ConnectionGauge(Arc<Registry>, Transport);

impl Drop for ConnectionGauge {
    fn drop(&mut self) {
        self.0.connections[self.1 as usize].fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn learned_labels_stop_at_the_cap_and_unknown_methods_add_none() {
        let m = Metrics::new();
        for i in 0..MAX_METHOD_LABELS + 5 {
            m.call_finished(&format!("m{i}"), None, Duration::from_millis(1));
        }
        for i in 0..100 {
            m.call_finished(&format!("made-up-{i}"), Some(codes::METHOD_NOT_FOUND), Duration::ZERO);
        }
        m.call_finished("we\"ird\\\n", None, Duration::ZERO);
        let text = m.render();
        let series = text.lines().filter(|l| l.starts_with("openagents_rpc_calls_total{")).count();
        assert_eq!(series, MAX_METHOD_LABELS + 2, "{text}");
        assert!(text.contains("openagents_rpc_calls_total{method=\"m63\"} 1\n"), "{text}");
        assert!(text.contains("openagents_rpc_calls_total{method=\"other\"} 6\n"), "{text}");
        assert!(text.contains("openagents_rpc_calls_total{method=\"unknown\"} 100\n"), "{text}");
        assert!(text.contains("openagents_rpc_errors_total{code=\"-32601\"} 100\n"), "{text}");
    }

    #[test]
    fn a_call_lands_in_its_bucket_and_the_counts_are_cumulative() {
        let m = Metrics::with_methods(&["a", "a", "other"]);
        m.call_finished("a", None, Duration::from_micros(3000));
        m.call_finished("a", Some(-32050), Duration::from_millis(200));
        m.call_finished("b", None, Duration::from_secs(1000));
        let text = m.render();
        assert!(text.contains("openagents_rpc_call_duration_seconds_bucket{method=\"a\",le=\"0.0025\"} 0\n"), "{text}");
        assert!(text.contains("openagents_rpc_call_duration_seconds_bucket{method=\"a\",le=\"0.005\"} 1\n"), "{text}");
        assert!(text.contains("openagents_rpc_call_duration_seconds_bucket{method=\"a\",le=\"+Inf\"} 2\n"), "{text}");
        assert!(text.contains("openagents_rpc_call_duration_seconds_sum{method=\"a\"} 0.203\n"), "{text}");
        assert!(text.contains("openagents_rpc_call_duration_seconds_bucket{method=\"unknown\",le=\"300\"} 0\n"), "{text}");
        assert!(text.contains("openagents_rpc_call_duration_seconds_count{method=\"unknown\"} 1\n"), "{text}");
        assert!(text.contains("openagents_rpc_errors_total{code=\"-32050\"} 1\n"), "{text}");
        assert!(!text.contains("method=\"other\""), "a declared list has no `other`: {text}");
        assert_eq!(text.matches("openagents_rpc_calls_total{method=\"a\"}").count(), 1, "{text}");
    }

    #[test]
    fn error_codes_past_the_cap_are_other() {
        let m = Metrics::new();
        for code in 0..(MAX_CODE_LABELS as i64 + 3) {
            m.error(-31000 - code);
        }
        m.error(codes::BUSY);
        let text = m.render();
        assert_eq!(text.lines().filter(|l| l.starts_with("openagents_rpc_errors_total{")).count(), CORE_CODES.len() + MAX_CODE_LABELS + 1, "{text}");
        assert!(text.contains("openagents_rpc_errors_total{code=\"other\"} 3\n"), "{text}");
        assert!(text.contains("openagents_rpc_errors_total{code=\"-32003\"} 1\n"), "{text}");
    }

    #[test]
    fn no_two_families_share_a_name_in_openmetrics_form() {
        let text = Metrics::new().render();
        let mut families = std::collections::BTreeSet::new();
        for line in text.lines() {
            let Some(rest) = line.strip_prefix("# TYPE ") else { continue };
            let (name, kind) = rest.split_once(' ').expect("# TYPE name kind");
            let family = if kind == "counter" { name.strip_suffix("_total").unwrap_or(name) } else { name };
            assert!(families.insert(family.to_owned()), "`{name}` is a family declared twice: {text}");
        }
        assert_eq!(families.len(), 8, "{text}");
    }
}
