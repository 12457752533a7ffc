//! The platform benchmark: TenantClusters with one virtual node each, created through the API
//! in process (platform controllers, controllers and scheduler running): time from create to
//! `Ready` (p50/p99), RSS per tenant cluster, and RSS after deleting them all (a leak check).
//! Peers: Kamaji's published 16 s to a ready control plane, vcluster's ~450 MiB per cluster.
//!
//! Usage: `cargo run --release -p bench -- platform [--count N] [--parallel P] [--quick]`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use apiserver::ApiServer;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, PostParams};
use parking_lot::Mutex;
use registry::cache::Filter;
use serde_json::{Value, json};

use crate::clusters_bench::rss_bytes;
use crate::report::Samples;

const KAMAJI_READY_S: f64 = 16.0;
const VCLUSTER_MIB: f64 = 450.0;
const NAMESPACE: &str = "tenant-root";

fn resource() -> ApiResource {
    ApiResource {
        group: "platform.matryoshka.dev".into(),
        version: "v1alpha1".into(),
        api_version: "platform.matryoshka.dev/v1alpha1".into(),
        kind: "TenantCluster".into(),
        plural: "tenantclusters".into(),
    }
}

fn is_ready(v: &Value) -> bool {
    v.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
}

/// When each TenantCluster was first seen Ready, polling the watch cache.
fn ready_times(server: &Arc<ApiServer>) -> Arc<Mutex<HashMap<String, Instant>>> {
    let seen: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let s = seen.clone();
    let server = server.clone();
    tokio::spawn(async move {
        loop {
            let (items, _) = server.store().shared_cache().list(
                "platform.matryoshka.dev",
                "tenantclusters",
                &Filter::default(),
            );
            let now = Instant::now();
            {
                let mut seen = s.lock();
                for o in items.iter().filter(|o| is_ready(&o.value())) {
                    seen.entry(o.name().to_string()).or_insert(now);
                }
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    });
    seen
}

pub async fn run(quick: bool, count: Option<usize>, parallel: usize) -> anyhow::Result<()> {
    let count = count.unwrap_or(if quick { 50 } else { 1000 });
    let (server, _data) = crate::setup::server().await?;
    let mut background = crate::setup::Background::control_plane(&server);
    let clients = crate::setup::platform(&server, &mut background).await?;
    println!(
        "platform benchmark: {count} TenantClusters with one u1.medium node each, {parallel} created at a time through the API (in process)"
    );
    let root = clients.cluster("root")?;
    let api: Api<DynamicObject> = Api::namespaced_with(root, NAMESPACE, &resource());
    let ready = ready_times(&server);
    let make = |name: &str| -> anyhow::Result<DynamicObject> {
        Ok(serde_json::from_value(json!({
            "apiVersion": "platform.matryoshka.dev/v1alpha1", "kind": "TenantCluster",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"nodeGroups": {"md0": {"minReplicas": 1, "maxReplicas": 1, "instanceType": "u1.medium"}}},
        }))?)
    };
    // Warm up, then take the baseline.
    let created_at: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    for i in 0..3 {
        let name = format!("warm{i}");
        created_at.lock().insert(name.clone(), Instant::now());
        api.create(&PostParams::default(), &make(&name)?).await?;
    }
    wait_all(&ready, 3, Duration::from_secs(120)).await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let rss_before = rss_bytes();

    let started = Instant::now();
    let names: Vec<String> = (0..count).map(|i| format!("tc{i}")).collect();
    let chunks: Vec<Vec<String>> = names
        .chunks(count.div_ceil(parallel.max(1)))
        .map(|c| c.to_vec())
        .collect();
    let mut tasks = Vec::new();
    for chunk in chunks {
        let api = api.clone();
        let created_at = created_at.clone();
        let ready = ready.clone();
        let objs: Vec<DynamicObject> = chunk
            .iter()
            .map(|n| make(n))
            .collect::<anyhow::Result<_>>()?;
        tasks.push(tokio::spawn(async move {
            for (name, obj) in chunk.iter().zip(objs) {
                created_at.lock().insert(name.clone(), Instant::now());
                api.create(&PostParams::default(), &obj).await?;
                // One at a time per task: wait for this one before the next.
                let deadline = Instant::now() + Duration::from_secs(120);
                while !ready.lock().contains_key(name) {
                    anyhow::ensure!(Instant::now() < deadline, "{name} not Ready in 120 s");
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
            }
            Ok::<_, anyhow::Error>(())
        }));
    }
    let progress = {
        let ready = ready.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(10)).await;
                eprintln!(
                    "  {:>5.0} s: {} Ready, RSS {:.0} MiB",
                    started.elapsed().as_secs_f64(),
                    ready.lock().len(),
                    rss_bytes() as f64 / 1048576.0
                );
            }
        })
    };
    for t in tasks {
        t.await??;
    }
    progress.abort();
    let elapsed = started.elapsed();
    let mut lat = Samples::default();
    {
        let ready = ready.lock();
        let created = created_at.lock();
        for n in &names {
            if let (Some(r), Some(c)) = (ready.get(n), created.get(n)) {
                lat.0.push(r.saturating_duration_since(*c));
            }
        }
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let rss_after = rss_bytes();
    let per = (rss_after.saturating_sub(rss_before)) as f64 / count as f64 / 1048576.0;

    // Delete them all and wait until they are gone.
    for n in &names {
        api.delete(n, &DeleteParams::default()).await?;
    }
    let deadline = Instant::now() + Duration::from_secs(600);
    let mut report = Instant::now() + Duration::from_secs(10);
    loop {
        let left = server
            .store()
            .shared_cache()
            .list(
                "platform.matryoshka.dev",
                "tenantclusters",
                &Filter::default(),
            )
            .0
            .len();
        if left <= 3 {
            break;
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "{left} TenantClusters left after 600 s"
        );
        if Instant::now() > report {
            report += Duration::from_secs(10);
            eprintln!("  deleting: {left} TenantClusters left");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let rss_deleted = rss_bytes();

    let p50 = lat.percentile(0.5).as_secs_f64() * 1e3;
    let p99 = lat.percentile(0.99).as_secs_f64() * 1e3;
    println!();
    println!(
        "tenant clusters created           {count} in {:.1} s ({:.1}/s)",
        elapsed.as_secs_f64(),
        count as f64 / elapsed.as_secs_f64()
    );
    println!(
        "create → Ready                    p50 {p50:.0} ms, p99 {p99:.0} ms (targets p50 < 100 ms, p99 < 500 ms); Kamaji {KAMAJI_READY_S} s ⇒ ours÷Kamaji p50 {:.4}x",
        p50 / 1e3 / KAMAJI_READY_S
    );
    println!(
        "RSS per tenant cluster            {per:.2} MiB (RSS {:.0} → {:.0} MiB; target < 2 MiB); vcluster {VCLUSTER_MIB} MiB ⇒ ours÷vcluster {:.4}x",
        rss_before as f64 / 1048576.0,
        rss_after as f64 / 1048576.0,
        per / VCLUSTER_MIB
    );
    println!(
        "RSS after deleting them all       {:.0} MiB (before creating: {:.0} MiB, growth kept {:.1} %)",
        rss_deleted as f64 / 1048576.0,
        rss_before as f64 / 1048576.0,
        100.0 * rss_deleted.saturating_sub(rss_before) as f64
            / rss_after.saturating_sub(rss_before).max(1) as f64
    );
    background.stop().await;
    Ok(())
}

async fn wait_all(
    ready: &Arc<Mutex<HashMap<String, Instant>>>,
    n: usize,
    limit: Duration,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + limit;
    while ready.lock().len() < n {
        anyhow::ensure!(Instant::now() < deadline, "clusters not Ready in {limit:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}
