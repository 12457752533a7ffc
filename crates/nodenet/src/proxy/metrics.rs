//! The proxier's metrics with upstream's names and semantics:
//!
//! - `kubeproxy_sync_proxy_rules_duration_seconds`: how long each sync took, from taking
//!   the pending changes to the kernel having the rules (and stale conntrack entries
//!   cleared), failed syncs included; `…_sync_full_…` and `…_sync_partial_…` split it.
//! - `kubeproxy_network_programming_duration_seconds`: from a change's trigger time (the
//!   EndpointSlice's `endpoints.kubernetes.io/last-change-trigger-time`) to the end of the
//!   sync that programmed it.
//! - `kubeproxy_sync_proxy_rules_nftables_sync_failures_total`.
//!
//! Histograms keep upstream's buckets and, for benchmarks, the last samples themselves.

use std::collections::VecDeque;
use std::fmt::Write;
use std::time::Duration;

use parking_lot::Mutex;

/// How many raw samples a histogram keeps.
const SAMPLES: usize = 100_000;

/// A Prometheus histogram that also keeps its recent samples.
#[derive(Debug)]
pub struct Histogram {
    name: &'static str,
    help: &'static str,
    inner: Mutex<HistogramInner>,
}

#[derive(Debug)]
struct HistogramInner {
    bounds: Vec<f64>,
    counts: Vec<u64>,
    count: u64,
    sum: f64,
    samples: VecDeque<f64>,
}

impl Histogram {
    pub fn new(name: &'static str, help: &'static str, bounds: Vec<f64>) -> Self {
        let counts = vec![0; bounds.len()];
        Histogram {
            name,
            help,
            inner: Mutex::new(HistogramInner {
                bounds,
                counts,
                count: 0,
                sum: 0.0,
                samples: VecDeque::new(),
            }),
        }
    }

    pub fn observe(&self, d: Duration) {
        let v = d.as_secs_f64();
        let mut h = self.inner.lock();
        for (i, b) in h.bounds.clone().iter().enumerate() {
            if v <= *b {
                h.counts[i] += 1;
            }
        }
        h.count += 1;
        h.sum += v;
        if h.samples.len() == SAMPLES {
            h.samples.pop_front();
        }
        h.samples.push_back(v);
    }

    pub fn count(&self) -> u64 {
        self.inner.lock().count
    }

    /// The recent samples, in seconds, oldest first.
    pub fn samples(&self) -> Vec<f64> {
        self.inner.lock().samples.iter().copied().collect()
    }

    /// Forgets the samples (not the Prometheus counts), e.g. between benchmark phases.
    pub fn clear_samples(&self) {
        self.inner.lock().samples.clear();
    }

    fn render(&self, out: &mut String) {
        let h = self.inner.lock();
        let _ = writeln!(out, "# HELP {} {}", self.name, self.help);
        let _ = writeln!(out, "# TYPE {} histogram", self.name);
        for (b, c) in h.bounds.iter().zip(&h.counts) {
            let _ = writeln!(out, "{}_bucket{{le=\"{b}\"}} {c}", self.name);
        }
        let _ = writeln!(out, "{}_bucket{{le=\"+Inf\"}} {}", self.name, h.count);
        let _ = writeln!(out, "{}_sum {}", self.name, h.sum);
        let _ = writeln!(out, "{}_count {}", self.name, h.count);
    }
}

fn exponential(start: f64, factor: f64, n: usize) -> Vec<f64> {
    (0..n).map(|i| start * factor.powi(i as i32)).collect()
}

fn linear(start: f64, width: f64, n: usize) -> Vec<f64> {
    (0..n).map(|i| start + width * i as f64).collect()
}

/// Every metric of one proxier.
#[derive(Debug)]
pub struct Metrics {
    pub sync_duration: Histogram,
    pub sync_full_duration: Histogram,
    pub sync_partial_duration: Histogram,
    pub network_programming: Histogram,
    failures: Mutex<u64>,
}

impl Default for Metrics {
    fn default() -> Self {
        // Upstream: ExponentialBuckets(0.001, 2, 15) for syncs; for network programming
        // 0.25 s steps to 0.5 s, 1 s steps to 59 s, 5 s to 115 s, 30 s to 300 s.
        let sync = || exponential(0.001, 2.0, 15);
        let mut np = linear(0.25, 0.25, 2);
        np.extend(linear(1.0, 1.0, 59));
        np.extend(linear(60.0, 5.0, 12));
        np.extend(linear(120.0, 30.0, 7));
        Metrics {
            sync_duration: Histogram::new(
                "kubeproxy_sync_proxy_rules_duration_seconds",
                "SyncProxyRules latency in seconds",
                sync(),
            ),
            sync_full_duration: Histogram::new(
                "kubeproxy_sync_full_proxy_rules_duration_seconds",
                "SyncProxyRules latency in seconds for full resyncs",
                sync(),
            ),
            sync_partial_duration: Histogram::new(
                "kubeproxy_sync_partial_proxy_rules_duration_seconds",
                "SyncProxyRules latency in seconds for partial resyncs",
                sync(),
            ),
            network_programming: Histogram::new(
                "kubeproxy_network_programming_duration_seconds",
                "In Cluster Network Programming Latency in seconds",
                np,
            ),
            failures: Mutex::new(0),
        }
    }
}

impl Metrics {
    pub fn failed(&self) {
        *self.failures.lock() += 1;
    }

    pub fn failures(&self) -> u64 {
        *self.failures.lock()
    }

    /// The Prometheus text exposition of every metric.
    pub fn render(&self) -> String {
        let mut out = String::new();
        self.sync_duration.render(&mut out);
        self.sync_full_duration.render(&mut out);
        self.sync_partial_duration.render(&mut out);
        self.network_programming.render(&mut out);
        let name = "kubeproxy_sync_proxy_rules_nftables_sync_failures_total";
        let _ = writeln!(out, "# HELP {name} Cumulative proxy nftables sync failures");
        let _ = writeln!(out, "# TYPE {name} counter");
        let _ = writeln!(out, "{name} {}", self.failures());
        out
    }
}

/// The `q` quantile (0..=1) of `samples`, nearest rank.
pub fn quantile(samples: &[f64], q: f64) -> Option<f64> {
    if samples.is_empty() {
        return None;
    }
    let mut s = samples.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let rank = ((q * s.len() as f64).ceil() as usize).clamp(1, s.len());
    Some(s[rank - 1])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_count_into_cumulative_buckets() {
        let m = Metrics::default();
        m.sync_duration.observe(Duration::from_millis(3));
        m.sync_duration.observe(Duration::from_millis(30));
        let text = m.render();
        assert!(
            text.contains("kubeproxy_sync_proxy_rules_duration_seconds_bucket{le=\"0.004\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("kubeproxy_sync_proxy_rules_duration_seconds_bucket{le=\"0.032\"} 2"),
            "{text}"
        );
        assert!(text.contains("kubeproxy_sync_proxy_rules_duration_seconds_count 2"));
        assert!(
            text.contains("kubeproxy_network_programming_duration_seconds_bucket{le=\"300\"} 0")
        );
    }

    #[test]
    fn quantiles_use_the_nearest_rank() {
        let s: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(quantile(&s, 0.99), Some(99.0));
        assert_eq!(quantile(&s, 0.5), Some(50.0));
        assert_eq!(quantile(&[], 0.5), None);
    }
}
