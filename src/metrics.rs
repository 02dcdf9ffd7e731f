//! The process's Prometheus metrics: one registry, filled by the engine where things happen
//! (commits, compactions, writes, reads, object-store requests) and by the server (requests,
//! statements, subscriptions), and rendered as OpenMetrics text by `[metrics] listen`
//! (`GET /metrics`).
//!
//! Metrics are process-wide, as Prometheus scrapes a process; recording is a few atomic adds and
//! costs nothing when no one scrapes.

use std::sync::OnceLock;
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

/// One label: `[(name, value)]`.
pub type Label = [(&'static str, &'static str); 1];
type Hist = fn() -> Histogram;

/// Every metric tidelake exports.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    /// Commits that published a snapshot, by kind (APPEND, COMPACT, OVERWRITE).
    pub commits: Family<Label, Counter>,
    /// Time from the first attempt to the published snapshot.
    pub commit_seconds: Histogram,
    /// Attempts that lost the race for a snapshot id (or hit a storage error) and were retried.
    pub commit_retries: Counter,
    /// Commits refused by a conflict (a compaction whose inputs were replaced; retries exhausted).
    pub commit_conflicts: Counter,
    pub rows_written: Counter,
    pub bytes_written: Counter,
    pub rows_read: Counter,
    pub bytes_read: Counter,
    /// Maintenance operations that succeeded, by operation (`expire_snapshots`, `rollback`, ...),
    /// whichever door asked.
    pub maintenance: Family<Label, Counter>,
    /// Compactions run (their outputs written), and how long each took.
    pub compactions: Counter,
    pub compaction_seconds: Histogram,
    /// Lookup files compactions used, `kept` (on local disk, mapped) or `built` from the data
    /// file: see `table::lookup`.
    pub lookup_files: Family<Label, Counter>,
    /// The most sorted runs in one bucket, among the buckets the latest write or compaction
    /// touched (what a write stall is decided on).
    pub sorted_runs_max: Gauge,
    /// Writes that waited for compaction because a bucket had too many sorted runs.
    pub write_stalls: Counter,
    /// Changelog subscriptions open now.
    pub subscriptions: Gauge,
    /// The largest lag, in snapshots, of an open subscription behind its table's latest snapshot.
    pub subscription_lag_snapshots: Gauge,
    /// Statements running now.
    pub active_statements: Gauge,
    /// Queries answered by a primary-key lookup, without planning (`sql::point`).
    pub point_queries: Counter,
    /// Streaming writes open now.
    pub write_streams: Gauge,
    /// Commits of streaming writes acknowledged, the rows in them, and the time from the commit
    /// decision to the ack (spilling the buffers, publishing the snapshots).
    pub stream_acks: Counter,
    pub stream_rows: Counter,
    pub stream_ack_seconds: Histogram,
    /// Finished RPCs by gRPC status code name (`OK`, `NOT_FOUND`, ...).
    pub requests: Family<Label, Counter>,
    /// Object-store requests by kind (get, put, head, list, delete, copy) and their latency.
    pub store_requests: Family<Label, Counter>,
    pub store_seconds: Family<Label, Histogram, Hist>,
    /// The current lag of each open subscription, by subscription (the gauge shows the largest).
    lags: std::sync::Mutex<std::collections::HashMap<u64, i64>>,
    next_lag: std::sync::atomic::AtomicU64,
}

fn latency() -> Histogram {
    // 0.5 ms to ~16 s.
    Histogram::new(exponential_buckets(0.0005, 2.0, 16))
}

impl Metrics {
    fn new() -> Self {
        let m = Self {
            registry: Registry::default(),
            commits: Family::default(),
            commit_seconds: latency(),
            commit_retries: Counter::default(),
            commit_conflicts: Counter::default(),
            rows_written: Counter::default(),
            bytes_written: Counter::default(),
            rows_read: Counter::default(),
            bytes_read: Counter::default(),
            maintenance: Family::default(),
            compactions: Counter::default(),
            compaction_seconds: latency(),
            lookup_files: Family::default(),
            sorted_runs_max: Gauge::default(),
            write_stalls: Counter::default(),
            subscriptions: Gauge::default(),
            subscription_lag_snapshots: Gauge::default(),
            active_statements: Gauge::default(),
            point_queries: Counter::default(),
            write_streams: Gauge::default(),
            stream_acks: Counter::default(),
            stream_rows: Counter::default(),
            stream_ack_seconds: latency(),
            requests: Family::default(),
            store_requests: Family::default(),
            store_seconds: Family::new_with_constructor(latency as Hist),
            lags: Default::default(),
            next_lag: Default::default(),
        };
        let mut r = Registry::with_prefix("tidelake");
        r.register(
            "commits",
            "Commits that published a snapshot, by kind",
            m.commits.clone(),
        );
        r.register(
            "maintenance_operations",
            "Maintenance operations that succeeded, by operation",
            m.maintenance.clone(),
        );
        r.register(
            "commit_duration_seconds",
            "Commit latency, first attempt to published snapshot",
            m.commit_seconds.clone(),
        );
        r.register(
            "commit_retries",
            "Commit attempts retried after losing a snapshot id or a storage error",
            m.commit_retries.clone(),
        );
        r.register(
            "commit_conflicts",
            "Commits refused by a conflict",
            m.commit_conflicts.clone(),
        );
        r.register(
            "rows_written",
            "Rows written to data files",
            m.rows_written.clone(),
        );
        r.register(
            "bytes_written",
            "Bytes of data files written",
            m.bytes_written.clone(),
        );
        r.register(
            "rows_read",
            "Rows read from data files",
            m.rows_read.clone(),
        );
        r.register(
            "bytes_read",
            "Bytes of data files read",
            m.bytes_read.clone(),
        );
        r.register(
            "compactions",
            "Compactions run (outputs written)",
            m.compactions.clone(),
        );
        r.register(
            "compaction_duration_seconds",
            "Compaction time, reading inputs to writing outputs",
            m.compaction_seconds.clone(),
        );
        r.register(
            "lookup_files",
            "Lookup files compactions used, by source (kept, built)",
            m.lookup_files.clone(),
        );
        r.register(
            "sorted_runs_max",
            "Most sorted runs in one bucket among those the latest write or compaction touched",
            m.sorted_runs_max.clone(),
        );
        r.register(
            "write_stalls",
            "Writes that waited for compaction",
            m.write_stalls.clone(),
        );
        r.register(
            "subscriptions",
            "Changelog subscriptions open",
            m.subscriptions.clone(),
        );
        r.register(
            "subscription_lag_snapshots",
            "Largest lag of an open subscription, in snapshots",
            m.subscription_lag_snapshots.clone(),
        );
        r.register(
            "active_statements",
            "Statements running",
            m.active_statements.clone(),
        );
        r.register(
            "point_queries",
            "Queries answered by a primary-key lookup without planning",
            m.point_queries.clone(),
        );
        r.register(
            "write_streams",
            "Streaming writes open",
            m.write_streams.clone(),
        );
        r.register(
            "stream_acks",
            "Commits of streaming writes acknowledged",
            m.stream_acks.clone(),
        );
        r.register(
            "stream_rows",
            "Rows of streaming writes acknowledged",
            m.stream_rows.clone(),
        );
        r.register(
            "stream_ack_duration_seconds",
            "Streaming write commit latency, commit decision to acknowledgement",
            m.stream_ack_seconds.clone(),
        );
        r.register(
            "requests",
            "Finished RPCs by gRPC status code",
            m.requests.clone(),
        );
        r.register(
            "object_store_requests",
            "Object-store requests by kind",
            m.store_requests.clone(),
        );
        r.register(
            "object_store_request_duration_seconds",
            "Object-store request latency by kind",
            m.store_seconds.clone(),
        );
        Self { registry: r, ..m }
    }

    /// The OpenMetrics text of every metric.
    pub fn render(&self) -> String {
        let max_lag = self
            .lags
            .lock()
            .map(|l| l.values().copied().max().unwrap_or(0))
            .unwrap_or(0);
        self.subscription_lag_snapshots.set(max_lag);
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }

    /// Records one object-store request of kind `op` that took `took`.
    pub fn store_request(&self, op: &'static str, took: Duration) {
        self.store_requests.get_or_create(&[("op", op)]).inc();
        self.store_seconds
            .get_or_create(&[("op", op)])
            .observe(took.as_secs_f64());
    }
}

/// The process's metrics.
pub fn metrics() -> &'static Metrics {
    static METRICS: OnceLock<Metrics> = OnceLock::new();
    METRICS.get_or_init(Metrics::new)
}

/// One open subscription's lag, in snapshots behind its table's latest; forgotten when dropped.
#[derive(Debug)]
pub struct Lag(u64);

impl Lag {
    pub fn new() -> Self {
        let m = metrics();
        let id = m
            .next_lag
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if let Ok(mut l) = m.lags.lock() {
            l.insert(id, 0);
        }
        Self(id)
    }

    pub fn set(&self, snapshots: i64) {
        if let Ok(mut l) = metrics().lags.lock() {
            l.insert(self.0, snapshots.max(0));
        }
    }
}

impl Default for Lag {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for Lag {
    fn drop(&mut self) {
        if let Ok(mut l) = metrics().lags.lock() {
            l.remove(&self.0);
        }
    }
}

/// Holds a gauge up by one while alive (a running statement, an open subscription).
#[derive(Debug)]
pub struct GaugeGuard(&'static Gauge);

impl GaugeGuard {
    pub fn new(gauge: &'static Gauge) -> Self {
        gauge.inc();
        Self(gauge)
    }
}

impl Drop for GaugeGuard {
    fn drop(&mut self) {
        self.0.dec();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_names_every_family_with_its_labels() {
        let m = Metrics::new();
        m.commits.get_or_create(&[("kind", "APPEND")]).inc();
        m.store_request("get", Duration::from_millis(3));
        m.sorted_runs_max.set(4);
        let text = m.render();
        assert!(
            text.contains("tidelake_commits_total{kind=\"APPEND\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("tidelake_object_store_requests_total{op=\"get\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("tidelake_object_store_request_duration_seconds_bucket{le="),
            "{text}"
        );
        assert!(text.contains("tidelake_sorted_runs_max 4"), "{text}");
        assert!(text.ends_with("# EOF\n"), "{text}");
    }
}
