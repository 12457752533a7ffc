//! `bench proxy`: Service rule programming at 1,000 Services × 10 endpoints.
//!
//! An in-process API server holds the Services and their EndpointSlices; the proxier
//! (`nodenet::proxy`, the node network's setting `min_sync_period` 50 ms) runs on a thread
//! inside a network namespace of its own, programming the real kernel through `nft`. Three
//! figures:
//!
//! 1. **cold start**: from the proxier's start (watches not yet listed) to every rule in
//!    place, and the full sync's own duration (`sync_proxy_rules_duration_seconds` of it);
//! 2. **one change at a time**: an EndpointSlice update every 100 ms, each replacing one
//!    endpoint of a random Service; latency is upstream's `network_programming_duration`:
//!    from the slice's `endpoints.kubernetes.io/last-change-trigger-time` (set to the moment
//!    of the write) to the end of the sync that programmed it, so the API write, the watch
//!    and the queueing are all in it; plus the partial syncs' own durations;
//! 3. **churn**: 50 updates per second for 5 s, without waiting; the same latency, and how
//!    many syncs carried them (the batching).
//!
//! Peers (published, kube-proxy nftables mode): the partial-sync PR (kubernetes#126013)
//! measured 141 ms to program one new Service in a 10,000-Service cluster; the 100-node
//! GCE performance job (kubernetes#124272) measured NetworkProgrammingLatency p50 1.52 s,
//! p99 6.8 s (end to end, controllers included); the SIG Scalability SLO is p99 ≤ 30 s.

use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, PostParams};
use nodenet::podnet::Netns;
use nodenet::proxy::metrics::quantile;
use nodenet::proxy::{Metrics, Proxier, ProxyConfig, Status};
use tokio::sync::{oneshot, watch};

use crate::report::{Better, header, line};
use crate::setup;

const NS: &str = "bench";
/// Upstream's one-new-Service-at-10,000 figure with partial syncs (ms).
const PEER_PARTIAL_MS: f64 = 141.0;
/// Upstream's 100-node performance job, NetworkProgrammingLatency p99 (ms).
const PEER_NPL_P99_MS: f64 = 6_815.0;
const TARGET_P99_MS: f64 = 100.0;

fn endpoint_ip(service: usize, k: usize, generation: usize) -> Ipv4Addr {
    let n = (service * 16 + k) as u32 + (generation as u32) * 0x10_0000;
    Ipv4Addr::from(0x0af4_0000u32 + n)
}

fn slice(
    service: usize,
    generation: usize,
    endpoints: usize,
    trigger: Option<String>,
) -> EndpointSlice {
    let eps: Vec<serde_json::Value> = (0..endpoints)
        .map(|k| {
            let g = if k == 0 { generation } else { 0 };
            serde_json::json!({"addresses": [endpoint_ip(service, k, g).to_string()],
                               "nodeName": format!("node-{}", k % 3),
                               "conditions": {"ready": true}})
        })
        .collect();
    let mut meta = serde_json::json!({
        "name": format!("svc-{service}-x"), "namespace": NS,
        "labels": {"kubernetes.io/service-name": format!("svc-{service}")},
    });
    if let Some(t) = trigger {
        meta["annotations"] =
            serde_json::json!({"endpoints.kubernetes.io/last-change-trigger-time": t});
    }
    serde_json::from_value(serde_json::json!({
        "metadata": meta,
        "addressType": "IPv4",
        "endpoints": eps,
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
    }))
    .expect("a slice")
}

async fn populate(client: &kube::Client, services: usize, endpoints: usize) -> anyhow::Result<()> {
    let ns: Namespace = serde_json::from_value(serde_json::json!({"metadata": {"name": NS}}))?;
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await?;
    let svcs: Api<Service> = Api::namespaced(client.clone(), NS);
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), NS);
    let results: Vec<anyhow::Result<()>> = futures::stream::iter(0..services)
        .map(|i| {
            let (svcs, slices) = (svcs.clone(), slices.clone());
            async move {
                let svc: Service = serde_json::from_value(serde_json::json!({
                    "metadata": {"name": format!("svc-{i}"), "namespace": NS},
                    "spec": {"ports": [{"name": "http", "port": 80, "targetPort": 8080}]},
                }))?;
                svcs.create(&PostParams::default(), &svc).await?;
                slices
                    .create(&PostParams::default(), &slice(i, 0, endpoints, None))
                    .await?;
                Ok(())
            }
        })
        .buffer_unordered(32)
        .collect()
        .await;
    results.into_iter().collect()
}

/// Replaces endpoint 0 of service `i` (a new address), stamped with the write's time.
async fn change(
    slices: &Api<EndpointSlice>,
    i: usize,
    generation: usize,
    endpoints: usize,
) -> anyhow::Result<()> {
    let name = format!("svc-{i}-x");
    let old = slices.get(&name).await?;
    let mut new = slice(
        i,
        generation,
        endpoints,
        Some(jiff::Timestamp::now().to_string()),
    );
    new.metadata.resource_version = old.metadata.resource_version;
    slices.replace(&name, &PostParams::default(), &new).await?;
    Ok(())
}

/// Waits until `metrics` has observed `count` programmed changes.
async fn programmed(
    metrics: &Metrics,
    status: &mut watch::Receiver<Status>,
    count: u64,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(60);
    while metrics.network_programming.count() < count {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            bail!("changes were not programmed within 60 s");
        }
        let _ = tokio::time::timeout(left, status.changed()).await;
    }
    Ok(())
}

fn ms(s: f64) -> f64 {
    s * 1000.0
}

pub async fn run(quick: bool) -> anyhow::Result<()> {
    let services = if quick { 200 } else { 1000 };
    let endpoints = 10;
    let changes = if quick { 50 } else { 200 };
    let (server, _data) = setup::server().await?;
    let client = setup::clients(&server).cluster("root")?;
    let t = Instant::now();
    populate(&client, services, endpoints).await?;
    println!(
        "created {services} Services × {endpoints} endpoints through the API in {:.1} s",
        t.elapsed().as_secs_f64()
    );

    let netns = Netns::create(&format!("bench-proxy-{}", std::process::id())).await?;
    let (started_tx, started_rx) = oneshot::channel::<(Arc<Metrics>, watch::Receiver<Status>)>();
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let proxier_client = client.clone();
    let start = Instant::now();
    let task = netns.spawn(move || async move {
        let mut config = ProxyConfig::new(
            "node-0",
            vec!["10.99.0.2".parse().expect("an address")],
            vec!["10.244.0.0/16".parse().expect("a network")],
        );
        config.min_sync_period = Duration::from_millis(50);
        let p = Proxier::start(proxier_client, config);
        let _ = started_tx.send((p.metrics().clone(), p.status()));
        let _ = stop_rx.await;
        p.shutdown().await
    })?;
    let (metrics, mut status) = started_rx.await.context("the proxier did not start")?;
    status
        .wait_for(|s| s.syncs > 0)
        .await
        .context("the proxier stopped")?;
    let cold = start.elapsed();
    let full = metrics
        .sync_full_duration
        .samples()
        .first()
        .copied()
        .unwrap_or_default();
    let chains = netns.exec("nft", &["list", "chains", "ip"]).await?;
    let chain_count = chains
        .stdout
        .lines()
        .filter(|l| l.trim_start().starts_with("chain "))
        .count();
    if chain_count < services * (1 + endpoints) {
        bail!("only {chain_count} chains after the first sync");
    }
    println!(
        "first sync: {chain_count} chains; cold start {:.0} ms (full sync itself {:.0} ms)",
        ms(cold.as_secs_f64()),
        ms(full)
    );

    // One change at a time, 10 per second.
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), NS);
    metrics.network_programming.clear_samples();
    metrics.sync_partial_duration.clear_samples();
    let mut done = metrics.network_programming.count();
    for k in 0..changes {
        let i = (k * 7919) % services;
        change(&slices, i, k + 1, endpoints).await?;
        done += 1;
        programmed(&metrics, &mut status, done).await?;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let npl = metrics.network_programming.samples();
    let partial = metrics.sync_partial_duration.samples();
    let q = |v: &[f64], p| ms(quantile(v, p).unwrap_or_default());

    // Churn: 50 per second, not waiting.
    metrics.network_programming.clear_samples();
    let syncs_before = status.borrow().syncs;
    let churn = if quick { 50 } else { 250 };
    let mut tick = tokio::time::interval(Duration::from_millis(20));
    for k in 0..churn {
        tick.tick().await;
        let i = (k * 104_729 + 13) % services;
        change(&slices, i, changes + k + 1, endpoints).await?;
    }
    programmed(&metrics, &mut status, done + churn as u64).await?;
    let churn_npl = metrics.network_programming.samples();
    let churn_syncs = status.borrow().syncs - syncs_before;

    let _ = stop_tx.send(());
    task.join().await??;
    netns.delete().await?;

    println!();
    println!(
        "{changes} single EndpointSlice changes: network programming p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms; partial sync p50 {:.1} ms, p99 {:.1} ms",
        q(&npl, 0.5),
        q(&npl, 0.99),
        q(&npl, 1.0),
        q(&partial, 0.5),
        q(&partial, 0.99)
    );
    println!(
        "{churn} changes at 50/s: network programming p50 {:.1} ms, p99 {:.1} ms in {churn_syncs} syncs",
        q(&churn_npl, 0.5),
        q(&churn_npl, 0.99)
    );
    println!();
    header("matryoshka", "kube-proxy");
    line(
        "one change programmed, p99 (ms)",
        q(&npl, 0.99),
        PEER_PARTIAL_MS,
        "ms",
        Better::Lower,
    );
    line(
        "network programming p99 under churn (ms)",
        q(&churn_npl, 0.99),
        PEER_NPL_P99_MS,
        "ms",
        Better::Lower,
    );
    let met = q(&npl, 0.99) <= TARGET_P99_MS;
    println!(
        "target ≤ {TARGET_P99_MS:.0} ms p99 per EndpointSlice change: {}",
        if met { "met" } else { "MISSED" }
    );
    Ok(())
}
