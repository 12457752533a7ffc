//! `/metrics/resource`: the kubelet's resource metrics (upstream's
//! `resourceMetricsCollector`) in the Prometheus text format, from the CPU and memory part of
//! the stats summary: cumulative CPU in core-seconds and the memory working set for the node,
//! every pod and every container, container start times, and the scrape-error gauges.
//!
//! As Prometheus' Go client writes them: families sorted by name, `[STABLE]`/`[ALPHA]` in
//! the help text, labels sorted by name, samples with the millisecond timestamp of their
//! measurement.

use std::collections::BTreeMap;
use std::fmt::Write;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::kubelet::stats::Summary;

/// The content type Prometheus' text exposition uses.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

struct Family {
    help: &'static str,
    kind: &'static str,
    samples: Vec<String>,
}

fn families() -> BTreeMap<&'static str, Family> {
    let f = |help, kind| Family {
        help,
        kind,
        samples: Vec::new(),
    };
    BTreeMap::from([
        (
            "container_cpu_usage_seconds_total",
            f(
                "[STABLE] Cumulative cpu time consumed by the container in core-seconds",
                "counter",
            ),
        ),
        (
            "container_memory_working_set_bytes",
            f(
                "[STABLE] Current working set of the container in bytes",
                "gauge",
            ),
        ),
        (
            "container_start_time_seconds",
            f(
                "[STABLE] Start time of the container since unix epoch in seconds",
                "gauge",
            ),
        ),
        (
            "node_cpu_usage_seconds_total",
            f(
                "[STABLE] Cumulative cpu time consumed by the node in core-seconds",
                "counter",
            ),
        ),
        (
            "node_memory_working_set_bytes",
            f("[STABLE] Current working set of the node in bytes", "gauge"),
        ),
        (
            "pod_cpu_usage_seconds_total",
            f(
                "[STABLE] Cumulative cpu time consumed by the pod in core-seconds",
                "counter",
            ),
        ),
        (
            "pod_memory_working_set_bytes",
            f("[STABLE] Current working set of the pod in bytes", "gauge"),
        ),
        (
            "resource_scrape_error",
            f(
                "[STABLE] 1 if there was an error while getting container metrics, 0 otherwise",
                "gauge",
            ),
        ),
        (
            "scrape_error",
            f(
                "[ALPHA] (Deprecated since 1.29.0) 1 if there was an error while getting container metrics, 0 otherwise",
                "gauge",
            ),
        ),
    ])
}

/// A label value escaped as the text format wants (`\`, `"`, newline).
fn escape(v: &str) -> String {
    v.replace('\\', r"\\")
        .replace('"', "\\\"")
        .replace('\n', r"\n")
}

fn millis(t: &Option<Time>) -> Option<i64> {
    t.as_ref().map(|t| t.0.as_millisecond())
}

/// Go's `strconv.FormatFloat(v, 'g', -1, 64)` for the values we print: integers without a
/// fraction, others in the shortest round-trip form, large ones in exponent form.
fn float(v: f64) -> String {
    if v == v.trunc() && v.abs() < 1e21 {
        format!("{}", v as i64)
    } else if v.abs() >= 1e21 || (v != 0.0 && v.abs() < 1e-4) {
        let s = format!("{v:e}");
        // Rust writes `1.5e-5`; Go writes `1.5e-05`.
        match s.split_once('e') {
            Some((m, e)) => {
                let (sign, digits) = match e.strip_prefix('-') {
                    Some(d) => ("-", d),
                    None => ("+", e),
                };
                format!("{m}e{sign}{digits:0>2}")
            }
            None => s,
        }
    } else {
        format!("{v}")
    }
}

fn sample(name: &str, labels: &[(&str, &str)], value: f64, at: Option<i64>) -> String {
    let mut s = String::from(name);
    let mut labels = labels.to_vec();
    labels.sort_by_key(|(k, _)| *k);
    if !labels.is_empty() {
        s.push('{');
        let parts: Vec<String> = labels
            .iter()
            .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
            .collect();
        s.push_str(&parts.join(","));
        s.push('}');
    }
    let _ = write!(s, " {}", float(value));
    if let Some(ms) = at {
        let _ = write!(s, " {ms}");
    }
    s
}

/// Renders the resource metrics of `summary`, or only the error gauges when it failed.
pub fn render(summary: Result<&Summary, ()>) -> String {
    let mut fams = families();
    let mut push = |name: &'static str, line: String| {
        if let Some(f) = fams.get_mut(name) {
            f.samples.push(line);
        }
    };
    let error = if summary.is_err() { 1.0 } else { 0.0 };
    push(
        "resource_scrape_error",
        sample("resource_scrape_error", &[], error, None),
    );
    push("scrape_error", sample("scrape_error", &[], error, None));
    if let Ok(s) = summary {
        let node = &s.node;
        if let Some(cpu) = &node.cpu
            && let Some(ns) = cpu.usage_core_nano_seconds
        {
            let line = sample(
                "node_cpu_usage_seconds_total",
                &[],
                ns as f64 / 1e9,
                millis(&cpu.time),
            );
            push("node_cpu_usage_seconds_total", line);
        }
        if let Some(mem) = &node.memory
            && let Some(ws) = mem.working_set_bytes
        {
            let line = sample(
                "node_memory_working_set_bytes",
                &[],
                ws as f64,
                millis(&mem.time),
            );
            push("node_memory_working_set_bytes", line);
        }
        let mut pods: Vec<_> = s.pods.iter().collect();
        pods.sort_by(|a, b| {
            (&a.pod_ref.namespace, &a.pod_ref.name).cmp(&(&b.pod_ref.namespace, &b.pod_ref.name))
        });
        for pod in pods {
            let (pname, pns) = (pod.pod_ref.name.as_str(), pod.pod_ref.namespace.as_str());
            let mut containers: Vec<_> = pod.containers.iter().collect();
            containers.sort_by(|a, b| a.name.cmp(&b.name));
            for c in containers {
                let labels = [
                    ("container", c.name.as_str()),
                    ("pod", pname),
                    ("namespace", pns),
                ];
                if let Some(start) = &c.start_time
                    && start.0.as_second() > 0
                {
                    let secs = start.0.as_nanosecond() as f64 / 1e9;
                    push(
                        "container_start_time_seconds",
                        sample("container_start_time_seconds", &labels, secs, None),
                    );
                }
                if let Some(cpu) = &c.cpu
                    && let Some(ns) = cpu.usage_core_nano_seconds
                {
                    let line = sample(
                        "container_cpu_usage_seconds_total",
                        &labels,
                        ns as f64 / 1e9,
                        millis(&cpu.time),
                    );
                    push("container_cpu_usage_seconds_total", line);
                }
                if let Some(mem) = &c.memory
                    && let Some(ws) = mem.working_set_bytes
                {
                    let line = sample(
                        "container_memory_working_set_bytes",
                        &labels,
                        ws as f64,
                        millis(&mem.time),
                    );
                    push("container_memory_working_set_bytes", line);
                }
            }
            let labels = [("pod", pname), ("namespace", pns)];
            if let Some(cpu) = &pod.cpu
                && let Some(ns) = cpu.usage_core_nano_seconds
            {
                let line = sample(
                    "pod_cpu_usage_seconds_total",
                    &labels,
                    ns as f64 / 1e9,
                    millis(&cpu.time),
                );
                push("pod_cpu_usage_seconds_total", line);
            }
            if let Some(mem) = &pod.memory
                && let Some(ws) = mem.working_set_bytes
            {
                let line = sample(
                    "pod_memory_working_set_bytes",
                    &labels,
                    ws as f64,
                    millis(&mem.time),
                );
                push("pod_memory_working_set_bytes", line);
            }
        }
    }
    let mut out = String::new();
    for (name, f) in fams {
        if f.samples.is_empty() {
            continue;
        }
        let _ = writeln!(out, "# HELP {name} {}", f.help);
        let _ = writeln!(out, "# TYPE {name} {}", f.kind);
        for s in f.samples {
            out.push_str(&s);
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubelet::stats::{
        ContainerStats, CpuStats, MemoryStats, NodeStats, PodReference, PodStats,
    };

    fn time(s: &str) -> Option<Time> {
        Some(Time(s.parse().unwrap()))
    }

    #[test]
    fn the_summary_renders_with_upstreams_names_labels_and_timestamps() {
        let at = time("2024-01-01T00:00:10Z");
        let summary = Summary {
            node: NodeStats {
                node_name: "n".into(),
                cpu: Some(CpuStats {
                    time: at.clone(),
                    usage_nano_cores: Some(5),
                    usage_core_nano_seconds: Some(1_500_000_000),
                }),
                memory: Some(MemoryStats {
                    time: at.clone(),
                    working_set_bytes: Some(1024),
                    ..Default::default()
                }),
                ..Default::default()
            },
            pods: vec![PodStats {
                pod_ref: PodReference {
                    name: "p".into(),
                    namespace: "default".into(),
                    uid: "u".into(),
                },
                containers: vec![ContainerStats {
                    name: "c\"1".into(),
                    start_time: time("2024-01-01T00:00:00.5Z"),
                    cpu: Some(CpuStats {
                        time: at.clone(),
                        usage_nano_cores: None,
                        usage_core_nano_seconds: Some(250_000_000),
                    }),
                    ..Default::default()
                }],
                memory: Some(MemoryStats {
                    time: at.clone(),
                    working_set_bytes: Some(2048),
                    ..Default::default()
                }),
                ..Default::default()
            }],
        };
        let text = render(Ok(&summary));
        let expected = "\
# HELP container_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the container in core-seconds
# TYPE container_cpu_usage_seconds_total counter
container_cpu_usage_seconds_total{container=\"c\\\"1\",namespace=\"default\",pod=\"p\"} 0.25 1704067210000
# HELP container_start_time_seconds [STABLE] Start time of the container since unix epoch in seconds
# TYPE container_start_time_seconds gauge
container_start_time_seconds{container=\"c\\\"1\",namespace=\"default\",pod=\"p\"} 1704067200.5
# HELP node_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the node in core-seconds
# TYPE node_cpu_usage_seconds_total counter
node_cpu_usage_seconds_total 1.5 1704067210000
# HELP node_memory_working_set_bytes [STABLE] Current working set of the node in bytes
# TYPE node_memory_working_set_bytes gauge
node_memory_working_set_bytes 1024 1704067210000
# HELP pod_memory_working_set_bytes [STABLE] Current working set of the pod in bytes
# TYPE pod_memory_working_set_bytes gauge
pod_memory_working_set_bytes{namespace=\"default\",pod=\"p\"} 2048 1704067210000
# HELP resource_scrape_error [STABLE] 1 if there was an error while getting container metrics, 0 otherwise
# TYPE resource_scrape_error gauge
resource_scrape_error 0
# HELP scrape_error [ALPHA] (Deprecated since 1.29.0) 1 if there was an error while getting container metrics, 0 otherwise
# TYPE scrape_error gauge
scrape_error 0
";
        assert_eq!(text, expected);
    }

    #[test]
    fn a_failed_summary_reports_only_the_error_gauges() {
        let text = render(Err(()));
        assert!(text.contains("resource_scrape_error 1\n"), "{text}");
        assert!(!text.contains("node_cpu"), "{text}");
    }

    #[test]
    fn floats_print_as_go_does() {
        assert_eq!(float(3.0), "3");
        assert_eq!(float(0.25), "0.25");
        assert_eq!(float(1.5e-5), "1.5e-05");
    }
}
