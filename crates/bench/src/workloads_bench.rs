//! The workloads benchmark: the whole control plane in one process — API server (embedded
//! store), controllers, scheduler and virtual nodes over the in-memory transport.
//!
//! 1. One cluster with many virtual nodes (1,000) and Deployments of 100 replicas (100,000
//!    pods): scheduling throughput (pods bound per second from the first create), the time
//!    until every pod is Running, and the peak RSS. The peer figure is the 1,000 pods/s target
//!    (NORTH-STAR §8; kube-scheduler manages about a hundred a second on such clusters).
//! 2. Many logical clusters (1,000), each with 3 virtual nodes and a 3-replica Deployment:
//!    RSS growth per cluster.
//!
//! Usage: `cargo run --release -p bench -- workloads [--nodes N] [--pods P] [--clusters C] [--quick]`.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use apiserver::ApiServer;
use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, PostParams};
use registry::cache::{EventType, Filter, Start, WatchItem};
use serde_json::{Value, json};

use crate::clusters_bench::rss_bytes;

/// The scheduling-throughput target (pods/s).
const TARGET_PODS_PER_S: f64 = 1000.0;

pub struct Args {
    pub nodes: usize,
    pub pods: usize,
    pub clusters: usize,
}

/// Peak resident set size of this process (`VmHWM`), in bytes.
fn peak_rss_bytes() -> u64 {
    crate::clusters_bench::proc_status_bytes("VmHWM")
}

fn mib(b: u64) -> f64 {
    b as f64 / (1024.0 * 1024.0)
}

fn client(server: &Arc<ApiServer>, cluster: &str) -> kube::Client {
    crate::setup::clients(server)
        .cluster(cluster)
        .expect("an in-process client")
}

fn deployment(name: &str, replicas: usize) -> Deployment {
    serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "app", "image": "registry.example/app:1",
                    "resources": {"requests": {"cpu": "5m", "memory": "8Mi"}}}]},
            },
        },
    }))
    .expect("deployment")
}

/// Counts pods of every cluster that are bound and that run, following a cross-cluster watch
/// of the watch cache (in process: no serialization, and the cost is per event, not per pod
/// and poll).
struct Progress {
    bound: AtomicUsize,
    running: AtomicUsize,
}

fn watch_pods(server: &Arc<ApiServer>) -> anyhow::Result<Arc<Progress>> {
    let progress = Arc::new(Progress {
        bound: AtomicUsize::new(0),
        running: AtomicUsize::new(0),
    });
    let p = progress.clone();
    let mut watch = server.store().shared_cache().watch(
        "",
        "pods",
        Filter::default(),
        Start::Current { end_marker: false },
        false,
    )?;
    tokio::spawn(async move {
        // (bound, running) of each pod by UID.
        let mut pods: HashMap<String, (bool, bool)> = HashMap::new();
        let (mut bound, mut running) = (0usize, 0usize);
        while let Some(item) = watch.rx.recv().await {
            let WatchItem::Event(ty, obj) = item else {
                continue;
            };
            let pods_strategy = &registry::builtins::PodStrategy;
            let uid = obj.uid().to_string();
            let now = match ty {
                EventType::Deleted => (false, false),
                _ => (
                    obj.field(pods_strategy, "spec.nodeName")
                        .is_some_and(|n| !n.is_empty()),
                    obj.field(pods_strategy, "status.phase").as_deref() == Some("Running"),
                ),
            };
            let was = if ty == EventType::Deleted {
                pods.remove(&uid).unwrap_or_default()
            } else {
                pods.insert(uid, now).unwrap_or_default()
            };
            bound = bound + usize::from(now.0) - usize::from(was.0);
            running = running + usize::from(now.1) - usize::from(was.1);
            p.bound.store(bound, Ordering::Relaxed);
            p.running.store(running, Ordering::Relaxed);
        }
        eprintln!("the progress watch ended");
    });
    Ok(progress)
}

/// Waits until `what` holds, printing progress every ten seconds.
async fn until(progress: &Progress, what: impl Fn(&Progress) -> bool, limit: Duration) -> bool {
    let start = Instant::now();
    let mut report = start + Duration::from_secs(10);
    while !what(progress) {
        if start.elapsed() > limit {
            return false;
        }
        if Instant::now() > report {
            report += Duration::from_secs(10);
            eprintln!(
                "  {:>5.0} s: {} bound, {} running, RSS {:.0} MiB",
                start.elapsed().as_secs_f64(),
                progress.bound.load(Ordering::Relaxed),
                progress.running.load(Ordering::Relaxed),
                mib(rss_bytes())
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    true
}

fn node_options() -> node::Options {
    let mut o = node::Options::default();
    // Quiet heartbeats: the figures are about pods.
    o.timing.status_report_interval = Duration::from_secs(600);
    o
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    let (server, _data) = crate::setup::server().await?;
    let background = crate::setup::Background::control_plane(&server);
    let progress = watch_pods(&server)?;
    let rss_start = rss_bytes();

    // Part 1: one cluster, many nodes and pods.
    println!(
        "workloads benchmark: {} virtual nodes, {} pods in Deployments of 100 (in process)",
        args.nodes, args.pods
    );
    let root = client(&server, "root");
    let nodes = node::VirtualNodes::start(root.clone(), node_options()).await?;
    let t = Instant::now();
    nodes
        .add_many(
            "vn-",
            args.nodes,
            &node::NodeTemplate::new("u1.2xlarge", &["worker"]),
        )
        .await?;
    println!(
        "{} nodes registered in {:.1} s",
        args.nodes,
        t.elapsed().as_secs_f64()
    );
    let deployments: Api<Deployment> = Api::namespaced(root.clone(), "default");
    let count = args.pods.div_ceil(100);
    let started = Instant::now();
    futures::stream::iter(0..count)
        .map(|i| {
            let api = deployments.clone();
            let replicas = (args.pods - i * 100).min(100);
            async move {
                api.create(
                    &PostParams::default(),
                    &deployment(&format!("d{i}"), replicas),
                )
                .await
            }
        })
        .buffer_unordered(16)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<Result<Vec<_>, _>>()?;
    let limit = Duration::from_secs(1800);
    let pods = args.pods;
    anyhow::ensure!(
        until(
            &progress,
            |p| p.bound.load(Ordering::Relaxed) >= pods,
            limit
        )
        .await,
        "only {} of {pods} pods were bound",
        progress.bound.load(Ordering::Relaxed)
    );
    let all_bound = started.elapsed();
    anyhow::ensure!(
        until(
            &progress,
            |p| p.running.load(Ordering::Relaxed) >= pods,
            limit
        )
        .await,
        "only {} of {pods} pods ran",
        progress.running.load(Ordering::Relaxed)
    );
    let all_running = started.elapsed();
    let peak = peak_rss_bytes();
    let rate = pods as f64 / all_bound.as_secs_f64();
    println!();
    println!(
        "scheduling throughput             {rate:.0} pods/s ({pods} pods bound {:.1} s after the first create); target {TARGET_PODS_PER_S:.0} ⇒ ours÷target {:.2}x",
        all_bound.as_secs_f64(),
        rate / TARGET_PODS_PER_S
    );
    println!(
        "time until all pods Running       {:.1} s",
        all_running.as_secs_f64()
    );
    println!(
        "peak RSS                          {:.0} MiB (target < 8192 MiB ⇒ ours÷target {:.2}x)",
        mib(peak),
        mib(peak) / 8192.0
    );
    nodes.shutdown().await;

    // Part 2: many logical clusters, each with 3 nodes and a 3-replica Deployment.
    if args.clusters > 0 {
        let rss_before = rss_bytes();
        let base_running = progress.running.load(Ordering::Relaxed);
        let started = Instant::now();
        let agents: Vec<_> = futures::stream::iter(0..args.clusters)
            .map(|i| {
                let server = server.clone();
                async move { small_cluster(&server, &format!("w-{i}")).await }
            })
            .buffer_unordered(8)
            .collect::<Vec<_>>()
            .await
            .into_iter()
            .collect::<anyhow::Result<Vec<_>>>()?;
        let want = base_running + 3 * args.clusters;
        anyhow::ensure!(
            until(
                &progress,
                |p| p.running.load(Ordering::Relaxed) >= want,
                limit
            )
            .await,
            "only {} of {} pods of the small clusters ran",
            progress.running.load(Ordering::Relaxed) - base_running,
            3 * args.clusters
        );
        let elapsed = started.elapsed();
        tokio::time::sleep(Duration::from_secs(2)).await;
        let rss_after = rss_bytes();
        println!(
            "{} logical clusters with 3 nodes and 3 running pods each, in {:.1} s",
            args.clusters,
            elapsed.as_secs_f64()
        );
        println!(
            "RSS per such cluster              {:.2} MiB (RSS {:.0} → {:.0} MiB; start {:.0} MiB); vcluster ~450 MiB ⇒ ours÷vcluster {:.4}x",
            mib(rss_after.saturating_sub(rss_before)) / args.clusters as f64,
            mib(rss_before),
            mib(rss_after),
            mib(rss_start),
            mib(rss_after.saturating_sub(rss_before)) / args.clusters as f64 / 450.0
        );
        for a in agents {
            a.shutdown().await;
        }
    }
    background.stop().await;
    Ok(())
}

/// A logical cluster with 3 virtual nodes and a 3-replica Deployment; returns its nodes.
/// One step of setting a small cluster up, named in the error if it takes over a minute (a
/// request that is never answered must show where, not hang the run).
async fn step<T>(
    cluster: &str,
    what: &str,
    f: impl std::future::Future<Output = T>,
) -> anyhow::Result<T> {
    tokio::time::timeout(Duration::from_secs(60), f)
        .await
        .map_err(|_| anyhow::anyhow!("{cluster}: could not {what} within a minute"))
}

async fn small_cluster(server: &Arc<ApiServer>, name: &str) -> anyhow::Result<node::VirtualNodes> {
    let root = client(server, "root");
    let lcs: Api<kube::api::DynamicObject> = Api::all_with(
        root,
        &kube::api::ApiResource {
            group: "core.matryoshka.dev".into(),
            version: "v1alpha1".into(),
            api_version: "core.matryoshka.dev/v1alpha1".into(),
            kind: "LogicalCluster".into(),
            plural: "logicalclusters".into(),
        },
    );
    let lc: kube::api::DynamicObject = serde_json::from_value(json!({
        "apiVersion": "core.matryoshka.dev/v1alpha1", "kind": "LogicalCluster",
        "metadata": {"name": name},
    }))?;
    step(
        name,
        "create its LogicalCluster",
        lcs.create(&PostParams::default(), &lc),
    )
    .await??;
    let ready =
        kube::runtime::wait::await_condition(lcs, name, |o: Option<&kube::api::DynamicObject>| {
            o.and_then(|o| o.data.pointer("/status/phase"))
                .and_then(Value::as_str)
                == Some("Ready")
        });
    tokio::time::timeout(Duration::from_secs(120), ready).await??;
    let c = client(server, name);
    let nodes = step(
        name,
        "start its virtual nodes",
        node::VirtualNodes::start(c.clone(), node_options()),
    )
    .await??;
    let template = node::NodeTemplate::new("u1.medium", &["worker"]);
    step(
        name,
        "register 3 nodes",
        nodes.add_many("node-", 3, &template),
    )
    .await??;
    let api: Api<Deployment> = Api::namespaced(c, "default");
    step(
        name,
        "create its Deployment",
        api.create(&PostParams::default(), &deployment("app", 3)),
    )
    .await??;
    Ok(nodes)
}
