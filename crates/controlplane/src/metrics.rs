//! `/metrics`: Prometheus text with upstream's metric names —
//! `apiserver_request_total{verb,resource,code}` and `apiserver_request_duration_seconds`.
//!
//! Labels never carry a cluster name: metrics must not reveal which clusters exist.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

/// Histogram buckets of request durations (seconds), upstream's set.
const BUCKETS: &[f64] = &[
    0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0,
    10.0, 15.0, 20.0, 30.0, 45.0, 60.0,
];

#[derive(Default)]
struct Histogram {
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

impl Histogram {
    fn observe(&mut self, secs: f64) {
        if self.counts.is_empty() {
            self.counts = vec![0; BUCKETS.len()];
        }
        for (i, b) in BUCKETS.iter().enumerate() {
            if secs <= *b {
                self.counts[i] += 1;
            }
        }
        self.sum += secs;
        self.count += 1;
    }

    /// The `_bucket`, `_sum` and `_count` lines of `name` with `labels` (`k="v",...`).
    fn render(&self, out: &mut String, name: &str, labels: &str) {
        for (i, b) in BUCKETS.iter().enumerate() {
            let _ = writeln!(
                out,
                "{name}_bucket{{{labels},le=\"{b}\"}} {}",
                self.counts.get(i).copied().unwrap_or(0)
            );
        }
        let _ = writeln!(out, "{name}_bucket{{{labels},le=\"+Inf\"}} {}", self.count);
        let _ = writeln!(out, "{name}_sum{{{labels}}} {}", self.sum);
        let _ = writeln!(out, "{name}_count{{{labels}}} {}", self.count);
    }
}

#[derive(Default)]
struct Inner {
    requests: BTreeMap<(String, String, u16), u64>,
    durations: BTreeMap<(String, String), Histogram>,
    /// Admission webhook calls by (type, operation, rejected).
    webhooks: BTreeMap<(&'static str, &'static str, bool), Histogram>,
}

/// Text a component adds to the root cluster's `/metrics` (the platform's usage counters).
pub type Collector = Arc<dyn Fn() -> String + Send + Sync>;

/// Request and admission metrics (the API server observes requests; admission its webhooks),
/// and the collectors of the root cluster's own metrics.
#[derive(Default)]
pub struct Metrics {
    inner: Mutex<Inner>,
    root: Mutex<Vec<Collector>>,
}

impl Metrics {
    pub fn observe(&self, verb: &str, resource: &str, code: u16, took: Duration) {
        let mut m = self.inner.lock();
        *m.requests
            .entry((verb.to_string(), resource.to_string(), code))
            .or_default() += 1;
        // Watches last as long as the client wants: upstream leaves them out of the histogram.
        if verb == "WATCH" {
            return;
        }
        m.durations
            .entry((verb.to_string(), resource.to_string()))
            .or_default()
            .observe(took.as_secs_f64());
    }

    /// One admission webhook call (upstream's
    /// `apiserver_admission_webhook_admission_duration_seconds`, without the webhook's name:
    /// names are tenants' data and metrics never tell one cluster about another).
    pub fn observe_webhook(
        &self,
        kind: &'static str,
        operation: &'static str,
        rejected: bool,
        took: Duration,
    ) {
        self.inner
            .lock()
            .webhooks
            .entry((kind, operation, rejected))
            .or_default()
            .observe(took.as_secs_f64());
    }

    /// Adds `c`'s text to what the root cluster's `/metrics` shows (never a tenant
    /// cluster's: such metrics name tenants).
    pub fn add_root_collector(&self, c: Collector) {
        self.root.lock().push(c);
    }

    /// The exposition of a cluster's `/metrics`: [`Metrics::render`], and for the root
    /// cluster what its collectors add.
    pub fn render_for(&self, root: bool) -> String {
        let mut out = self.render();
        if root {
            let collectors: Vec<Collector> = self.root.lock().clone();
            for c in collectors {
                out.push_str(&c());
            }
        }
        out
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        let m = self.inner.lock();
        let mut out = String::new();
        out.push_str("# HELP apiserver_request_total Counter of apiserver requests broken out for each verb, dry run value, group, version, resource, scope, component, and HTTP response code.\n");
        out.push_str("# TYPE apiserver_request_total counter\n");
        for ((verb, resource, code), n) in &m.requests {
            let _ = writeln!(
                out,
                "apiserver_request_total{{code=\"{code}\",resource=\"{resource}\",verb=\"{verb}\"}} {n}"
            );
        }
        out.push_str("# HELP apiserver_request_duration_seconds Response latency distribution in seconds for each verb, dry run value, group, version, resource, subresource, scope and component.\n");
        out.push_str("# TYPE apiserver_request_duration_seconds histogram\n");
        for ((verb, resource), h) in &m.durations {
            h.render(
                &mut out,
                "apiserver_request_duration_seconds",
                &format!("resource=\"{resource}\",verb=\"{verb}\""),
            );
        }
        out.push_str("# HELP apiserver_admission_webhook_admission_duration_seconds Admission webhook latency histogram in seconds, identified by type and broken out for each operation and whether it was rejected.\n");
        out.push_str("# TYPE apiserver_admission_webhook_admission_duration_seconds histogram\n");
        for ((kind, operation, rejected), h) in &m.webhooks {
            h.render(
                &mut out,
                "apiserver_admission_webhook_admission_duration_seconds",
                &format!("operation=\"{operation}\",rejected=\"{rejected}\",type=\"{kind}\""),
            );
        }
        out
    }
}
