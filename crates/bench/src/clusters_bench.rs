//! The logical-cluster benchmark: create many logical clusters through the API and measure
//! create → Ready latency (p50/p99), resident memory per idle cluster, and whether request
//! latency on one cluster grows with the number of clusters (10 vs all).
//!
//! Requests go to the API server in process (the system identity, no socket): the figures are
//! the server's own cost. The peer figure is kcp's published 9.8 MiB per workspace.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use apiserver::server::{ApiServer, Caller};
use bytes::Bytes;
use controlplane::auth::{UserExt, UserInfo};
use http_body_util::BodyExt;
use parking_lot::Mutex;
use registry::cache::{Filter, Start, WatchItem};
use serde_json::{Value, json};
use tokio::sync::oneshot;

use crate::report::Samples;

/// kcp's published memory per logical cluster (workspace), the peer figure.
const KCP_MIB_PER_WORKSPACE: f64 = 9.8;

/// A size line of `/proc/self/status` (`VmRSS`, `VmHWM`), in bytes.
pub fn proc_status_bytes(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.strip_prefix(field).is_some_and(|r| r.starts_with(':')))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .map(|kb| kb * 1024)
        .unwrap_or(0)
}

/// Resident set size of this process, in bytes.
pub fn rss_bytes() -> u64 {
    proc_status_bytes("VmRSS")
}

/// One request to the server in process, as the system identity.
pub async fn call(
    server: &Arc<ApiServer>,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> (u16, Bytes) {
    let body = body.map(|b| Bytes::from(b.to_string())).unwrap_or_default();
    call_bytes(server, method, path, body).await
}

/// [`call`] with a body as it is.
pub async fn call_bytes(
    server: &Arc<ApiServer>,
    method: &str,
    path: &str,
    body: Bytes,
) -> (u16, Bytes) {
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json")
        .body(body)
        .expect("request");
    let resp = server
        .handle(req, Caller::Internal(UserInfo::system()))
        .await;
    let code = resp.status().as_u16();
    (
        code,
        resp.into_body()
            .collect()
            .await
            .map(|c| c.to_bytes())
            .unwrap_or_default(),
    )
}

/// Readiness notifications: one cache watch of LogicalClusters for all waiters.
type Waiters = Arc<Mutex<HashMap<String, oneshot::Sender<()>>>>;

fn watch_ready(server: &Arc<ApiServer>) -> anyhow::Result<Waiters> {
    let waiters: Waiters = Arc::new(Mutex::new(HashMap::new()));
    let filter = Filter {
        cluster: Some("root".into()),
        ..Filter::default()
    };
    let mut handle = server
        .store()
        .shared_cache()
        .watch(
            "core.matryoshka.dev",
            "logicalclusters",
            filter,
            Start::After(server.store().shared_cache().revision()),
            false,
        )
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let w = waiters.clone();
    tokio::spawn(async move {
        while let Some(item) = handle.rx.recv().await {
            if let WatchItem::Event(_, o) = item
                && o.value().pointer("/status/phase").and_then(Value::as_str) == Some("Ready")
                && let Some(tx) = w.lock().remove(o.name())
            {
                let _ = tx.send(());
            }
        }
    });
    Ok(waiters)
}

/// Creates the LogicalCluster `name` (without waiting for it to be Ready).
pub async fn post_cluster(server: &Arc<ApiServer>, name: &str) -> anyhow::Result<()> {
    let lc = json!({"apiVersion": "core.matryoshka.dev/v1alpha1", "kind": "LogicalCluster", "metadata": {"name": name}});
    let (code, body) = call(
        server,
        "POST",
        "/apis/core.matryoshka.dev/v1alpha1/logicalclusters",
        Some(lc),
    )
    .await;
    anyhow::ensure!(
        code == 201,
        "create {name}: {code} {}",
        String::from_utf8_lossy(&body)
    );
    Ok(())
}

async fn create_cluster(
    server: &Arc<ApiServer>,
    waiters: &Waiters,
    name: &str,
) -> anyhow::Result<Duration> {
    let (tx, rx) = oneshot::channel();
    waiters.lock().insert(name.to_string(), tx);
    let started = Instant::now();
    post_cluster(server, name).await?;
    tokio::time::timeout(Duration::from_secs(60), rx).await??;
    Ok(started.elapsed())
}

/// p50/p99 of a GET in one cluster.
async fn request_latency(server: &Arc<ApiServer>, cluster: &str, n: usize) -> (Duration, Duration) {
    let mut s = Samples::default();
    for _ in 0..n {
        let t = Instant::now();
        let (code, _) = call(
            server,
            "GET",
            &format!("/clusters/{cluster}/api/v1/namespaces/default/configmaps"),
            None,
        )
        .await;
        assert_eq!(code, 200);
        s.0.push(t.elapsed());
    }
    (s.percentile(0.5), s.percentile(0.99))
}

pub async fn run(quick: bool, count: Option<usize>, parallel: usize) -> anyhow::Result<()> {
    let count = count.unwrap_or(if quick { 500 } else { 10_000 });
    let (server, _data) = crate::setup::server().await?;
    let waiters = watch_ready(&server)?;
    println!(
        "logical-cluster benchmark: {count} clusters, created {parallel} at a time through the API (in process)"
    );

    // Warm up with 10 clusters; measure request latency with 10 clusters.
    for i in 0..10 {
        create_cluster(&server, &waiters, &format!("warm-{i}")).await?;
    }
    let (few50, few99) = request_latency(&server, "warm-0", 2000).await;
    let rss_before = rss_bytes();

    let started = Instant::now();
    let latencies = Arc::new(Mutex::new(Samples::default()));
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let tasks: Vec<_> = (0..parallel)
        .map(|_| {
            let server = server.clone();
            let waiters = waiters.clone();
            let latencies = latencies.clone();
            let next = next.clone();
            tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if i >= count {
                        return Ok::<_, anyhow::Error>(());
                    }
                    let d = create_cluster(&server, &waiters, &format!("c-{i}")).await?;
                    latencies.lock().0.push(d);
                }
            })
        })
        .collect();
    for t in tasks {
        t.await??;
    }
    let elapsed = started.elapsed();
    // Let background work settle (snapshots, compaction) before reading memory.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let rss_after = rss_bytes();
    let (many50, many99) = request_latency(&server, "warm-0", 2000).await;
    let lat = latencies.lock().clone();
    let per_cluster =
        (rss_after.saturating_sub(rss_before)) as f64 / count as f64 / (1024.0 * 1024.0);

    println!();
    println!(
        "clusters created                  {count} in {:.1} s ({:.0}/s)",
        elapsed.as_secs_f64(),
        count as f64 / elapsed.as_secs_f64()
    );
    println!(
        "create → Ready latency            p50 {:.1} ms, p99 {:.1} ms (target p99 < 50 ms)",
        ms(lat.percentile(0.5)),
        ms(lat.percentile(0.99))
    );
    println!(
        "memory per idle cluster           {per_cluster:.3} MiB (RSS {:.0} → {:.0} MiB); kcp {KCP_MIB_PER_WORKSPACE} MiB ⇒ ours÷kcp {:.3}x (target < 2 MiB)",
        rss_before as f64 / 1048576.0,
        rss_after as f64 / 1048576.0,
        per_cluster / KCP_MIB_PER_WORKSPACE
    );
    println!(
        "GET in one cluster, 10 clusters   p50 {:.3} ms, p99 {:.3} ms",
        ms(few50),
        ms(few99)
    );
    println!(
        "GET in one cluster, {} clusters p50 {:.3} ms, p99 {:.3} ms (ratio p50 {:.2}x)",
        count + 10,
        ms(many50),
        ms(many99),
        many50.as_secs_f64() / few50.as_secs_f64()
    );
    Ok(())
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
