//! Scheduling throughput: pods bound per second with 1,000 nodes in one cluster, against the
//! in-process API server (embedded store, in-memory transport, no node agent).
//!
//! Three figures:
//! - **algorithm**: scheduling cycles alone (filters, scores, assume) on a cache of the same
//!   nodes, no API — the ceiling the rest is measured against;
//! - **preloaded**: every pod exists before the scheduler starts; time from start (initial
//!   list included) until every pod is bound;
//! - **streaming**: the scheduler runs first and pods are created while it schedules; time
//!   from the first create until every pod is bound.
//!
//! Each is printed as pods/s and as a ratio of the 1,000 pods/s target (kube-scheduler does
//! "~100s/s", NORTH-STAR §8). The machine is shared, so the CPU time the process used is
//! printed too, with the rate two idle cores would reach at that cost (the streaming figure
//! includes creating the pods, which is most of its cost). Usage:
//! `cargo bench -p scheduler --bench throughput -- [--nodes 1000] [--pods 10000] [--no-events]
//! [--only algorithm|preloaded|streaming]`.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, Patch, PatchParams, PostParams};
use scheduler::cache::Cache;
use scheduler::client::{ClusterClients, ROOT};
use scheduler::nodeinfo::NodeSpec;
use scheduler::podinfo::PodInfo;
use scheduler::{Options, Scheduler};
use serde_json::json;

const TARGET: f64 = 1000.0;
const CREATE_CONCURRENCY: usize = 64;

struct Args {
    nodes: usize,
    pods: usize,
    events: bool,
    /// Run only this figure (`algorithm`, `preloaded` or `streaming`).
    only: Option<String>,
}

fn args() -> Args {
    let mut a = Args {
        nodes: 1000,
        pods: 10_000,
        events: true,
        only: None,
    };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let mut it = argv.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--nodes" => a.nodes = it.next().and_then(|v| v.parse().ok()).unwrap_or(a.nodes),
            "--pods" => a.pods = it.next().and_then(|v| v.parse().ok()).unwrap_or(a.pods),
            "--no-events" => a.events = false,
            "--only" => a.only = it.next().cloned(),
            _ => {}
        }
    }
    a
}

fn node_json(i: usize) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": format!("node-{i}"),
        "labels": {"kubernetes.io/hostname": format!("node-{i}"), "zone": format!("zone-{}", i % 10)}}})
}

fn node_status() -> serde_json::Value {
    json!({"status": {"allocatable": {"cpu": "32", "memory": "256Gi", "pods": "110"},
        "capacity": {"cpu": "32", "memory": "256Gi", "pods": "110"}}})
}

fn pod_json(i: usize) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("pod-{i}"), "namespace": "default", "labels": {"app": "bench"}},
        "spec": {"containers": [{"name": "c", "image": "pause",
            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}]}})
}

async fn create_nodes(client: kube::Client, n: usize) {
    let api: Api<Node> = Api::all(client);
    futures::stream::iter(0..n)
        .for_each_concurrent(CREATE_CONCURRENCY, |i| {
            let api = api.clone();
            async move {
                let node: Node = serde_json::from_value(node_json(i)).unwrap();
                api.create(&PostParams::default(), &node)
                    .await
                    .expect("node");
                api.patch_status(
                    &format!("node-{i}"),
                    &PatchParams::default(),
                    &Patch::Merge(&node_status()),
                )
                .await
                .expect("node status");
            }
        })
        .await;
}

async fn create_pods(client: kube::Client, range: std::ops::Range<usize>) {
    let api: Api<Pod> = Api::namespaced(client, "default");
    futures::stream::iter(range)
        .for_each_concurrent(CREATE_CONCURRENCY, |i| {
            let api = api.clone();
            async move {
                let pod: Pod = serde_json::from_value(pod_json(i)).unwrap();
                api.create(&PostParams::default(), &pod).await.expect("pod");
            }
        })
        .await;
}

async fn wait_bound(s: &Scheduler, n: u64) {
    let stats = &s.shared().stats;
    while stats.bound.load(Ordering::Relaxed) < n {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// CPU time this process has used (user + system), from `/proc/self/stat` (clock ticks of
/// 10 ms, Linux's `USER_HZ`).
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after_name = stat.rsplit_once(')').map(|(_, rest)| rest).unwrap_or("");
    let fields: Vec<u64> = after_name
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|f| f.parse().ok())
        .collect();
    Duration::from_millis(fields.iter().sum::<u64>() * 10)
}

/// Wall time and CPU time of a phase, and how many cores it can use.
struct Took {
    wall: Duration,
    cpu: Duration,
    cores: f64,
}

fn report(name: &str, pods: usize, took: Took) {
    let rate = pods as f64 / took.wall.as_secs_f64();
    // The machine is shared: CPU time says what two idle cores would do.
    let cpu_rate = pods as f64 / (took.cpu.as_secs_f64() / took.cores).max(1e-9);
    println!(
        "{name:<10} {pods:>7} pods in {:>8.2?}  {rate:>7.0} pods/s ({:.2}x the {TARGET:.0} pods/s target)  \
         cpu {:>7.2?} = {:>4.0} us/pod, {cpu_rate:>6.0} pods/s on 2 idle cores ({:.2}x)",
        took.wall,
        rate / TARGET,
        took.cpu,
        took.cpu.as_secs_f64() * 1e6 / pods as f64,
        cpu_rate / TARGET,
    );
}

fn algorithm(nodes: usize, pods: usize) -> Took {
    let mut cache = Cache::default();
    let cluster: Arc<str> = Arc::from(ROOT);
    for i in 0..nodes {
        let mut n: Node = serde_json::from_value(node_json(i)).unwrap();
        let s: Node = serde_json::from_value(node_status()).unwrap();
        n.status = s.status;
        cache.upsert_node(&cluster, &format!("node-{i}"), NodeSpec::new(&n));
    }
    let infos: Vec<Arc<PodInfo>> = (0..pods)
        .map(|i| {
            Arc::new(PodInfo::new(
                &cluster,
                &serde_json::from_value(pod_json(i)).unwrap(),
            ))
        })
        .collect();
    let mut rng = <rand::rngs::SmallRng as rand::SeedableRng>::seed_from_u64(1);
    let started = Instant::now();
    let cpu = cpu_time();
    for p in &infos {
        match scheduler::schedule::schedule_one(&mut cache, p, &mut rng) {
            scheduler::schedule::Outcome::Bind { .. } => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    // One thread: a second core would not help.
    Took {
        wall: started.elapsed(),
        cpu: cpu_time() - cpu,
        cores: 1.0,
    }
}

async fn server() -> (Arc<apiserver::ApiServer>, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = storage::embedded::EmbeddedStore::open(dir.path()).expect("store");
    (
        apiserver::server::start(Arc::new(store))
            .await
            .expect("server"),
        dir,
    )
}

async fn preloaded(a: &Args, options: Options) -> Took {
    let (server, _dir) = server().await;
    let clients = ClusterClients::in_memory(apiserver::local::LocalService::system(server));
    create_nodes(clients.cluster(ROOT).unwrap(), a.nodes).await;
    let t = Instant::now();
    create_pods(clients.cluster(ROOT).unwrap(), 0..a.pods).await;
    eprintln!("  created {} pods in {:.2?}", a.pods, t.elapsed());
    let started = Instant::now();
    let cpu = cpu_time();
    let s = Scheduler::start(clients, options).expect("scheduler");
    wait_bound(&s, a.pods as u64).await;
    let took = Took {
        wall: started.elapsed(),
        cpu: cpu_time() - cpu,
        cores: 2.0,
    };
    s.stop();
    took
}

async fn streaming(a: &Args, options: Options) -> Took {
    let (server, _dir) = server().await;
    let clients = ClusterClients::in_memory(apiserver::local::LocalService::system(server));
    create_nodes(clients.cluster(ROOT).unwrap(), a.nodes).await;
    let s = Scheduler::start(clients.clone(), options).expect("scheduler");
    s.synced().await;
    let started = Instant::now();
    let cpu = cpu_time();
    create_pods(clients.cluster(ROOT).unwrap(), 0..a.pods).await;
    eprintln!("  created {} pods in {:.2?}", a.pods, started.elapsed());
    wait_bound(&s, a.pods as u64).await;
    let took = Took {
        wall: started.elapsed(),
        cpu: cpu_time() - cpu,
        cores: 2.0,
    };
    s.stop();
    took
}

fn main() {
    let a = args();
    let options = Options {
        scheduled_events: a.events,
        ..Options::default()
    };
    println!(
        "scheduler throughput: {} nodes, {} pods, one cluster, Scheduled events {}",
        a.nodes,
        a.pods,
        if a.events { "on" } else { "off" }
    );
    let run = |name: &str| a.only.as_deref().is_none_or(|o| o == name);
    if run("algorithm") {
        report("algorithm", a.pods, algorithm(a.nodes, a.pods));
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    if run("preloaded") {
        let took = rt.block_on(preloaded(&a, options.clone()));
        report("preloaded", a.pods, took);
    }
    if run("streaming") {
        let took = rt.block_on(streaming(&a, options));
        report("streaming", a.pods, took);
    }
}
