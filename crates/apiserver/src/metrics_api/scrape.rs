//! Resource usage of a cluster's nodes and containers, scraped from the kubelets'
//! `/stats/summary?only_cpu_and_memory=true` on demand, with metrics-server's semantics.
//!
//! metrics-server scrapes every node each `--metric-resolution` (15 s) and keeps the last two
//! points of every node and container; CPU usage is the growth of cumulative CPU time between
//! them over their time difference (the reported `window`), memory the working set of the
//! last. Here a cluster is scraped when a request finds its points older than the
//! resolution (concurrent requests share one scrape), so a client asking at least every 15 s
//! gets exactly that. When only one point is recent enough (the first request, or one after
//! a long pause: points more than [`MAX_WINDOW`] apart are not paired) the kubelet's own
//! rate (`usageNanoCores`) is used with the resolution as window.
//!
//! Bounded: at most [`MAX_CONCURRENT`] kubelets are asked at once, each within
//! [`SCRAPE_TIMEOUT`] (metrics-server's `--kubelet-request-timeout`), summaries up to
//! [`MAX_SUMMARY`] bytes, points kept for at most [`MAX_CLUSTERS`] clusters.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use http_body_util::{BodyExt, Limited};
use jiff::Timestamp;
use parking_lot::Mutex;
use registry::cache::Filter;
use serde_json::Value;

use crate::server::ApiServer;

/// metrics-server's `--metric-resolution`.
pub const RESOLUTION: Duration = Duration::from_secs(15);
/// metrics-server's `--kubelet-request-timeout`.
pub const SCRAPE_TIMEOUT: Duration = Duration::from_secs(10);
/// Kubelets asked at once.
pub const MAX_CONCURRENT: usize = 16;
/// The largest summary read.
pub const MAX_SUMMARY: usize = 16 << 20;
/// Clusters whose points are kept (the least recently asked go first).
pub const MAX_CLUSTERS: usize = 4096;
/// Two points further apart than this are not used for a rate.
pub const MAX_WINDOW: Duration = Duration::from_secs(60);

/// One measurement of a node or container.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// When the node or container started (cumulative CPU was zero then).
    pub start: Option<Timestamp>,
    /// When CPU was measured.
    pub at: Timestamp,
    /// Cumulative CPU time, core-nanoseconds.
    pub cpu: u64,
    /// The kubelet's own rate, nanocores.
    pub rate: Option<u64>,
    /// Working set, bytes.
    pub memory: u64,
}

/// The last two points.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Pair {
    pub last: Option<Point>,
    pub prev: Option<Point>,
}

/// What a node or container used.
#[derive(Debug, Clone, PartialEq)]
pub struct Usage {
    pub timestamp: Timestamp,
    pub window: Duration,
    pub cpu_nanocores: u64,
    pub memory_bytes: u64,
}

impl Pair {
    /// Records a new point, keeping metrics-server's invariant (prev older than last).
    pub fn record(&mut self, p: Point) {
        match &self.last {
            Some(last) if p.at > last.at => {
                self.prev = self.last.take();
                self.last = Some(p);
            }
            Some(_) => {}
            None => self.last = Some(p),
        }
    }

    /// The usage the two points give, else the kubelet's rate.
    pub fn usage(&self) -> Option<Usage> {
        let last = self.last.as_ref()?;
        if let Some(prev) = &self.prev {
            let window = last.at.duration_since(prev.at);
            let restarted = match (last.start, prev.start) {
                (Some(a), Some(b)) => a < b,
                _ => false,
            };
            if let Ok(window) = Duration::try_from(window)
                && !window.is_zero()
                && window <= MAX_WINDOW
                && !restarted
                && last.cpu >= prev.cpu
            {
                let rate = (last.cpu - prev.cpu) as f64 / window.as_secs_f64();
                return Some(Usage {
                    timestamp: last.at,
                    window,
                    cpu_nanocores: rate as u64,
                    memory_bytes: last.memory,
                });
            }
        }
        last.rate.map(|rate| Usage {
            timestamp: last.at,
            window: RESOLUTION,
            cpu_nanocores: rate,
            memory_bytes: last.memory,
        })
    }
}

/// A container of a pod: namespace, pod, container.
pub type ContainerKey = (String, String, String);

/// A cluster's points.
#[derive(Debug, Default)]
pub struct Points {
    pub scraped: Option<Instant>,
    pub nodes: HashMap<String, Pair>,
    pub containers: HashMap<ContainerKey, Pair>,
}

struct ClusterPoints {
    /// Owned guards are handed out: a request keeps reading even if the cluster is forgotten.
    points: Arc<tokio::sync::Mutex<Points>>,
    used: AtomicU64,
}

/// Usage per cluster.
#[derive(Default)]
pub struct Scraper {
    clusters: Mutex<HashMap<String, Arc<ClusterPoints>>>,
    clock: AtomicU64,
}

fn time(v: Option<&Value>) -> Option<Timestamp> {
    v.and_then(Value::as_str).and_then(|s| s.parse().ok())
}

fn point(stats: &Value, start: Option<&Value>) -> Option<Point> {
    let cpu = stats.get("cpu")?;
    let memory = stats.get("memory")?;
    Some(Point {
        start: time(start),
        at: time(cpu.get("time"))?,
        cpu: cpu.get("usageCoreNanoSeconds")?.as_u64()?,
        rate: cpu.get("usageNanoCores").and_then(Value::as_u64),
        memory: memory.get("workingSetBytes")?.as_u64()?,
    })
}

/// The points of one summary: the node's, and each container's.
pub fn decode(summary: &Value) -> (Option<Point>, Vec<(ContainerKey, Point)>) {
    let node = summary
        .get("node")
        .and_then(|n| point(n, n.get("startTime")));
    let mut containers = Vec::new();
    for pod in summary
        .get("pods")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let ns = pod
            .pointer("/podRef/namespace")
            .and_then(Value::as_str)
            .unwrap_or("");
        let name = pod
            .pointer("/podRef/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        for c in pod
            .get("containers")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let cname = c.get("name").and_then(Value::as_str).unwrap_or("");
            if let Some(p) = point(c, c.get("startTime")) {
                containers.push(((ns.to_string(), name.to_string(), cname.to_string()), p));
            }
        }
    }
    (node, containers)
}

impl Scraper {
    fn cluster(&self, cluster: &str) -> Arc<ClusterPoints> {
        let tick = self.clock.fetch_add(1, Ordering::Relaxed);
        let mut clusters = self.clusters.lock();
        if let Some(c) = clusters.get(cluster) {
            c.used.store(tick, Ordering::Relaxed);
            return c.clone();
        }
        if clusters.len() >= MAX_CLUSTERS
            && let Some(oldest) = clusters
                .iter()
                .min_by_key(|(_, c)| c.used.load(Ordering::Relaxed))
                .map(|(k, _)| k.clone())
        {
            clusters.remove(&oldest);
        }
        let c = Arc::new(ClusterPoints {
            points: Arc::new(tokio::sync::Mutex::new(Points::default())),
            used: AtomicU64::new(tick),
        });
        clusters.insert(cluster.to_string(), c.clone());
        c
    }

    /// The cluster's points, scraped first if they are older than the resolution.
    pub async fn points(
        &self,
        server: &Arc<ApiServer>,
        cluster: &str,
    ) -> tokio::sync::OwnedMutexGuard<Points> {
        let mut points = self.cluster(cluster).points.clone().lock_owned().await;
        if points.scraped.is_none_or(|t| t.elapsed() >= RESOLUTION) {
            scrape(server, cluster, &mut points).await;
            points.scraped = Some(Instant::now());
        }
        points
    }

    /// Forgets a deleted cluster.
    /// Clusters with scraped points.
    pub fn cluster_count(&self) -> usize {
        self.clusters.lock().len()
    }

    pub fn forget(&self, cluster: &str) {
        self.clusters.lock().remove(cluster);
    }
}

/// Asks every node of the cluster for its summary and records the points.
async fn scrape(server: &Arc<ApiServer>, cluster: &str, points: &mut Points) {
    let filter = Filter {
        cluster: Some(cluster.to_string()),
        ..Filter::default()
    };
    let nodes: Vec<String> = server
        .store()
        .cache_for_reads(cluster)
        .list("", "nodes", &filter)
        .0
        .iter()
        .map(|n| n.name().to_string())
        .collect();
    let summaries: Vec<(String, Option<Value>)> = futures::stream::iter(nodes)
        .map(|node| async move {
            let summary = tokio::time::timeout(SCRAPE_TIMEOUT, summary(server, cluster, &node))
                .await
                .ok()
                .flatten();
            (node, summary)
        })
        .buffer_unordered(MAX_CONCURRENT)
        .collect()
        .await;
    let mut nodes = HashMap::new();
    let mut containers = HashMap::new();
    for (node, summary) in summaries {
        let Some(summary) = summary else { continue };
        let (node_point, container_points) = decode(&summary);
        if let Some(p) = node_point {
            let mut pair = points.nodes.remove(&node).unwrap_or_default();
            pair.record(p);
            nodes.insert(node, pair);
        }
        for (key, p) in container_points {
            let mut pair = points.containers.remove(&key).unwrap_or_default();
            pair.record(p);
            containers.insert(key, pair);
        }
    }
    // What was not in this batch is gone (a node that did not answer, a deleted pod).
    points.nodes = nodes;
    points.containers = containers;
}

async fn summary(server: &Arc<ApiServer>, cluster: &str, node: &str) -> Option<Value> {
    let location = server.kubelet.location(server, cluster, node).ok()?;
    let uri = location
        .uri("/stats/summary?only_cpu_and_memory=true")
        .ok()?;
    let answer = match server.kubelet.get(server, cluster, &uri).await {
        Ok(a) => a,
        Err(e) => {
            tracing::debug!(cluster, node, error = %e.message, "metrics: scraping a node failed");
            return None;
        }
    };
    if !answer.status().is_success() {
        tracing::debug!(cluster, node, status = %answer.status(), "metrics: a kubelet refused the summary");
        return None;
    }
    let body = Limited::new(answer.into_body(), MAX_SUMMARY)
        .collect()
        .await
        .ok()?
        .to_bytes();
    serde_json::from_slice(&body).ok()
}
