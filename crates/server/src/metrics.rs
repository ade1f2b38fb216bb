//! The runtime's counters, and their Prometheus text exposition (`GET /metrics`, behind the
//! `metrics` grant). Counting is a relaxed atomic add on paths that already do far more work;
//! nothing here allocates per request.

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use openagents_protocol::Method;

/// The upper bounds, in seconds, of the request latency histogram's buckets.
pub const LATENCY_BUCKETS: &[f64] = &[0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0];

/// One method's requests: how many ended well or badly, and how long they took.
struct MethodStats {
    ok: AtomicU64,
    error: AtomicU64,
    /// Cumulative counts per bucket of [`LATENCY_BUCKETS`], then `+Inf`.
    buckets: Vec<AtomicU64>,
    /// The sum of durations, in microseconds.
    sum_us: AtomicU64,
}

impl MethodStats {
    fn new() -> Self {
        MethodStats { ok: AtomicU64::new(0), error: AtomicU64::new(0), buckets: (0..=LATENCY_BUCKETS.len()).map(|_| AtomicU64::new(0)).collect(), sum_us: AtomicU64::new(0) }
    }
}

/// Every counter the runtime keeps besides the engine's turn counters and the event hub's.
pub struct Metrics {
    /// Per method of [`Method::NAMES`], then one slot for unknown methods and unreadable
    /// requests.
    methods: Vec<MethodStats>,
    auth_failures: AtomicU64,
    forbidden: AtomicU64,
    connections: AtomicI64,
    connections_accepted: AtomicU64,
    body_bytes: AtomicI64,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            methods: (0..=Method::NAMES.len()).map(|_| MethodStats::new()).collect(),
            auth_failures: AtomicU64::new(0),
            forbidden: AtomicU64::new(0),
            connections: AtomicI64::new(0),
            connections_accepted: AtomicU64::new(0),
            body_bytes: AtomicI64::new(0),
        }
    }
}

/// A connection counted as open until it is dropped.
pub struct ConnectionGauge(Arc<Metrics>);

impl Drop for ConnectionGauge {
    fn drop(&mut self) {
        self.0.connections.fetch_sub(1, Ordering::Relaxed);
    }
}

/// What the exposition reads from the engine and the event hub.
pub struct Snapshot {
    /// Turns submitted, completed, failed, interrupted.
    pub turns: [(&'static str, i64); 4],
    /// Events published (the newest sequence number).
    pub events_published: i64,
    /// Open event subscriptions.
    pub subscribers: i64,
    /// `lagged` notices given to slow subscribers.
    pub lagged: u64,
    /// `gap` notices given to resuming subscribers.
    pub gaps: u64,
    /// Group commits to the store that failed.
    pub store_errors: u64,
    /// Whether a turn is running.
    pub running: bool,
    /// Approval requests asked, approved, denied.
    pub approvals: [u64; 3],
}

impl Metrics {
    /// Counts one request for `method` (`None`: unknown or unreadable) that took `seconds`.
    pub fn request(&self, method: Option<&str>, ok: bool, seconds: f64) {
        let i = method.and_then(|m| Method::NAMES.iter().position(|n| *n == m)).unwrap_or(Method::NAMES.len());
        let s = &self.methods[i];
        if ok { &s.ok } else { &s.error }.fetch_add(1, Ordering::Relaxed);
        let bucket = LATENCY_BUCKETS.iter().position(|b| seconds <= *b).unwrap_or(LATENCY_BUCKETS.len());
        s.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        s.sum_us.fetch_add((seconds * 1e6) as u64, Ordering::Relaxed);
    }

    /// Counts a failed authentication.
    pub fn auth_failed(&self) {
        self.auth_failures.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a call refused by its credential's grant.
    pub fn forbidden(&self) {
        self.forbidden.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts an open connection until the gauge is dropped.
    pub fn connection(self: &Arc<Self>) -> ConnectionGauge {
        self.connections.fetch_add(1, Ordering::Relaxed);
        self.connections_accepted.fetch_add(1, Ordering::Relaxed);
        ConnectionGauge(Arc::clone(self))
    }

    /// Counts `n` more (or, negative, fewer) bytes of request bodies buffered or reserved.
    pub fn body_bytes(&self, n: i64) {
        self.body_bytes.fetch_add(n, Ordering::Relaxed);
    }

    /// The Prometheus text exposition (format 0.0.4) of these counters and `snapshot`.
    pub fn render(&self, snapshot: &Snapshot) -> String {
        let mut out = String::with_capacity(8192);
        let mut family = |name: &str, kind: &str, help: &str| {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        };
        family("openagents_turns_total", "counter", "Turns by outcome (submitted counts every turn started).");
        for (outcome, n) in snapshot.turns {
            let _ = writeln!(out, "openagents_turns_total{{outcome=\"{outcome}\"}} {n}");
        }
        let mut simple = |name: &str, kind: &str, help: &str, value: String| {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}");
        };
        simple("openagents_turn_running", "gauge", "1 while a turn runs.", u8::from(snapshot.running).to_string());
        simple("openagents_events_published_total", "counter", "Events published to subscribers.", snapshot.events_published.to_string());
        simple("openagents_subscribers", "gauge", "Open event subscriptions.", snapshot.subscribers.to_string());
        simple("openagents_lagged_total", "counter", "Lagged notices sent to subscribers that fell behind.", snapshot.lagged.to_string());
        simple("openagents_gaps_total", "counter", "Gap notices sent to subscribers resuming from a point no longer held.", snapshot.gaps.to_string());
        simple("openagents_store_errors_total", "counter", "Writes to the store that failed (their events were delivered without being written).", snapshot.store_errors.to_string());
        simple("openagents_connections", "gauge", "Open network connections (HTTP and WebSocket).", self.connections.load(Ordering::Relaxed).to_string());
        // Not `openagents_connections_total`: in OpenMetrics a counter `X_total` is the family `X`,
        // which the gauge above already is.
        simple("openagents_connections_accepted_total", "counter", "Network connections accepted.", self.connections_accepted.load(Ordering::Relaxed).to_string());
        simple("openagents_request_body_bytes", "gauge", "Bytes of HTTP request bodies held (or reserved for their declared length) now.", self.body_bytes.load(Ordering::Relaxed).to_string());
        simple("openagents_auth_failures_total", "counter", "Requests refused for a missing or unknown token.", self.auth_failures.load(Ordering::Relaxed).to_string());
        simple("openagents_forbidden_total", "counter", "Calls refused by the credential's grant.", self.forbidden.load(Ordering::Relaxed).to_string());
        simple("openagents_approvals_requested_total", "counter", "Approval requests from the agent.", snapshot.approvals[0].to_string());
        let _ = writeln!(out, "# HELP openagents_approvals_resolved_total Approval requests by outcome.\n# TYPE openagents_approvals_resolved_total counter");
        let _ = writeln!(out, "openagents_approvals_resolved_total{{outcome=\"approved\"}} {}", snapshot.approvals[1]);
        let _ = writeln!(out, "openagents_approvals_resolved_total{{outcome=\"denied\"}} {}", snapshot.approvals[2]);
        let name = |i: usize| Method::NAMES.get(i).copied().unwrap_or("unknown");
        let _ = writeln!(out, "# HELP openagents_requests_total JSON-RPC requests by method and outcome.\n# TYPE openagents_requests_total counter");
        for (i, s) in self.methods.iter().enumerate() {
            let _ = writeln!(out, "openagents_requests_total{{method=\"{}\",outcome=\"ok\"}} {}", name(i), s.ok.load(Ordering::Relaxed));
            let _ = writeln!(out, "openagents_requests_total{{method=\"{}\",outcome=\"error\"}} {}", name(i), s.error.load(Ordering::Relaxed));
        }
        let _ = writeln!(out, "# HELP openagents_request_duration_seconds How long JSON-RPC requests took, by method.\n# TYPE openagents_request_duration_seconds histogram");
        for (i, s) in self.methods.iter().enumerate() {
            let mut cumulative = 0;
            for (b, count) in s.buckets.iter().enumerate() {
                cumulative += count.load(Ordering::Relaxed);
                let le = LATENCY_BUCKETS.get(b).map_or_else(|| "+Inf".to_owned(), |v| v.to_string());
                let _ = writeln!(out, "openagents_request_duration_seconds_bucket{{method=\"{}\",le=\"{le}\"}} {cumulative}", name(i));
            }
            let _ = writeln!(out, "openagents_request_duration_seconds_sum{{method=\"{}\"}} {}", name(i), s.sum_us.load(Ordering::Relaxed) as f64 / 1e6);
            let _ = writeln!(out, "openagents_request_duration_seconds_count{{method=\"{}\"}} {cumulative}", name(i));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot() -> Snapshot {
        Snapshot { turns: [("submitted", 0), ("completed", 0), ("failed", 0), ("interrupted", 0)], events_published: 0, subscribers: 0, lagged: 0, gaps: 0, store_errors: 0, running: false, approvals: [0; 3] }
    }

    #[test]
    fn no_two_families_share_a_name_in_openmetrics_form() {
        // OpenMetrics names a counter's family without its `_total` suffix: a counter `X_total`
        // beside a gauge `X` is one family declared twice, which its parsers refuse.
        let text = Metrics::default().render(&snapshot());
        let mut families = std::collections::BTreeMap::new();
        for line in text.lines() {
            let Some(rest) = line.strip_prefix("# TYPE ") else { continue };
            let (name, kind) = rest.split_once(' ').expect("# TYPE name kind");
            let family = if kind == "counter" { name.strip_suffix("_total").unwrap_or(name) } else { name };
            if let Some(other) = families.insert(family.to_owned(), name.to_owned()) {
                panic!("`{name}` and `{other}` are both the OpenMetrics family `{family}`");
            }
        }
        assert!(families.contains_key("openagents_connections_accepted"), "{text}");
    }

    #[test]
    fn a_request_lands_in_its_bucket_and_the_counts_are_cumulative() {
        let m = Metrics::default();
        m.request(Some("status"), true, 0.003);
        m.request(Some("status"), false, 0.2);
        m.request(Some("no-such"), false, 1000.0);
        let text = m.render(&snapshot());
        assert!(text.contains("openagents_request_duration_seconds_bucket{method=\"status\",le=\"0.0025\"} 0\n"), "{text}");
        assert!(text.contains("openagents_request_duration_seconds_bucket{method=\"status\",le=\"0.005\"} 1\n"), "{text}");
        assert!(text.contains("openagents_request_duration_seconds_bucket{method=\"status\",le=\"+Inf\"} 2\n"), "{text}");
        assert!(text.contains("openagents_requests_total{method=\"status\",outcome=\"error\"} 1\n"), "{text}");
        assert!(text.contains("openagents_request_duration_seconds_bucket{method=\"unknown\",le=\"300\"} 0\n"), "{text}");
        assert!(text.contains("openagents_request_duration_seconds_count{method=\"unknown\"} 1\n"), "{text}");
    }
}
