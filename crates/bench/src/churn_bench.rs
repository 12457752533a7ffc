//! The churn soak: cycles of creating logical clusters and deleting them again in one process,
//! with the controllers and the scheduler running. After each deletion it prints the resident
//! memory and the server's per-cluster state (trust, OpenAPI documents, custom-resource
//! catalogues, kubelet connections, metrics scrapes, cached objects), which must return to
//! what it was before the clusters existed. Target (issue 17): RSS flat within 10 % after the
//! second cycle.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::clusters_bench::{call, post_cluster, rss_bytes};
use apiserver::ApiServer;

/// Creates `count` logical clusters, `parallel` at a time, and waits until each is Ready.
async fn create_all(server: &Arc<ApiServer>, prefix: &str, count: usize) -> anyhow::Result<()> {
    for i in 0..count {
        post_cluster(server, &format!("{prefix}-{i}")).await?;
    }
    wait("every cluster Ready", || {
        (0..count).all(|i| {
            server
                .store()
                .shared_cache()
                .get(
                    "core.matryoshka.dev",
                    "logicalclusters",
                    "root",
                    "",
                    &format!("{prefix}-{i}"),
                )
                .is_some_and(|o| {
                    o.value().pointer("/status/phase").and_then(|p| p.as_str()) == Some("Ready")
                })
        })
    })
    .await
}

/// Deletes the clusters and waits until they are gone.
async fn delete_all(server: &Arc<ApiServer>, prefix: &str, count: usize) -> anyhow::Result<()> {
    for i in 0..count {
        let (code, body) = call(
            server,
            "DELETE",
            &format!("/apis/core.matryoshka.dev/v1alpha1/logicalclusters/{prefix}-{i}"),
            None,
        )
        .await;
        anyhow::ensure!(
            code == 200 || code == 202,
            "delete: {code} {}",
            String::from_utf8_lossy(&body)
        );
    }
    wait("every cluster gone", || {
        server
            .store()
            .shared_cache()
            .count("core.matryoshka.dev", "logicalclusters", "root")
            == 0
    })
    .await
}

/// How long the TenantCluster soak keeps Events after their last write.
const EVENT_TTL: Duration = Duration::from_secs(10);

/// What the objects of a TenantCluster that never became Ready say: its Cluster API objects
/// in the root cluster and the Nodes of its logical cluster.
fn explain(server: &Arc<ApiServer>, name: &str, logical: Option<&str>) {
    let release = format!("kubernetes-{name}");
    let cache = &server.store().shared_cache();
    for (group, plural) in [
        ("cluster.x-k8s.io", "clusters"),
        ("cluster.x-k8s.io", "machinedeployments"),
        ("cluster.x-k8s.io", "machinesets"),
        ("cluster.x-k8s.io", "machines"),
        ("infrastructure.matryoshka.dev", "matryoshkamachines"),
    ] {
        let (items, _) = cache.list(group, plural, &registry::cache::Filter::default());
        for o in items.iter().filter(|o| o.name().starts_with(&release)) {
            let v = o.value();
            eprintln!(
                "  {plural}/{}: deleting {} finalizers {} spec.replicas {} status {}",
                o.name(),
                v["metadata"]["deletionTimestamp"],
                v["metadata"]["finalizers"],
                v["spec"]["replicas"],
                v["status"]
            );
        }
    }
    if let Some(lc) = logical {
        let (nodes, _) = cache.list(
            "",
            "nodes",
            &registry::cache::Filter {
                cluster: Some(lc.to_string()),
                ..Default::default()
            },
        );
        for n in nodes.iter() {
            eprintln!("  node {}: {}", n.name(), n.value()["status"]["conditions"]);
        }
        eprintln!("  {} nodes in {lc}", nodes.len());
    }
}

async fn wait(what: &str, check: impl Fn() -> bool) -> anyhow::Result<()> {
    wait_for(what, Duration::from_secs(300), check).await
}

async fn wait_for(what: &str, within: Duration, check: impl Fn() -> bool) -> anyhow::Result<()> {
    let deadline = Instant::now() + within;
    while !check() {
        anyhow::ensure!(Instant::now() < deadline, "{what} within {within:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

fn mib(b: u64) -> f64 {
    b as f64 / 1048576.0
}

fn state_line(state: &BTreeMap<&'static str, usize>) -> String {
    state
        .iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

pub async fn run(
    quick: bool,
    cycles: Option<usize>,
    count: Option<usize>,
    server_only: bool,
    pause: Option<u64>,
) -> anyhow::Result<()> {
    let cycles = cycles.unwrap_or(if quick { 4 } else { 20 });
    let count = count.unwrap_or(100);
    let (server, _data) = crate::setup::server().await?;
    let background = (!server_only).then(|| crate::setup::Background::control_plane(&server));
    println!(
        "churn soak: {cycles} cycles of creating {count} logical clusters and deleting them, {}",
        if server_only {
            "the API server alone (--server-only)"
        } else {
            "controllers and scheduler running"
        }
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = server.per_cluster_state();
    let rss0 = rss_bytes();
    println!(
        "before                 RSS {:>7.1} MiB   {}",
        mib(rss0),
        state_line(&before)
    );
    let mut after_each = Vec::new();
    for cycle in 0..cycles {
        let started = Instant::now();
        let prefix = format!("churn{cycle}");
        create_all(&server, &prefix, count).await?;
        let peak = rss_bytes();
        delete_all(&server, &prefix, count).await?;
        // Let deletions settle (namespace and garbage collection, cache history, compaction).
        tokio::time::sleep(Duration::from_secs(3)).await;
        let rss = rss_bytes();
        let state = server.per_cluster_state();
        println!(
            "cycle {:>2} ({:>5.1} s)   RSS {:>7.1} MiB (with {count} clusters {:>7.1} MiB)   {}",
            cycle + 1,
            started.elapsed().as_secs_f64(),
            mib(rss),
            mib(peak),
            state_line(&state)
        );
        after_each.push(rss);
        if let Some(p) = pause {
            // Past the watch cache's window and tick: freed memory is reused by the next cycle.
            tokio::time::sleep(Duration::from_secs(p)).await;
            println!("  after a {p} s pause RSS {:>7.1} MiB", mib(rss_bytes()));
        }
        anyhow::ensure!(
            state == before,
            "per-cluster state after cycle {}: {} (before: {})",
            cycle + 1,
            state_line(&state),
            state_line(&before)
        );
    }
    // The watch cache keeps 75 s of events for watch resumption and trims on its minute tick:
    // once that has passed, what the clusters left behind should be gone.
    if !quick {
        tokio::time::sleep(Duration::from_secs(140)).await;
        let rss = rss_bytes();
        println!(
            "settled (140 s later)  RSS {:>7.1} MiB   {}",
            mib(rss),
            state_line(&server.per_cluster_state())
        );
    }
    if after_each.len() >= 2 {
        let base = after_each[1] as f64;
        let last = *after_each.last().expect("a cycle") as f64;
        let growth = (last - base) / base * 100.0;
        println!(
            "RSS after the last deletion vs after the second: {:+.1} % (target within ±10 %)",
            growth
        );
    }
    if let Some(b) = background {
        b.stop().await;
    }
    Ok(())
}

/// How many TenantClusters of the root tenant are in the watch cache, and how many of them
/// are Ready.
fn tenant_clusters(server: &Arc<ApiServer>) -> (usize, usize) {
    let (items, _) = server.store().shared_cache().list(
        "platform.matryoshka.dev",
        "tenantclusters",
        &registry::cache::Filter::default(),
    );
    let ready = items
        .iter()
        .filter(|o| {
            o.value()
                .pointer("/status/conditions")
                .and_then(|c| c.as_array())
                .is_some_and(|cs| {
                    cs.iter()
                        .any(|c| c["type"] == "Ready" && c["status"] == "True")
                })
        })
        .count();
    (items.len(), ready)
}

/// The soak of issue 17 with the platform: cycles of creating `count` TenantClusters (one
/// `u1.medium` virtual machine each: a logical cluster, its kubeconfig Secret, Cluster API
/// objects, a Node) through the API and deleting them, with the platform, the machine
/// controllers, the controllers and the scheduler running; RSS and the server's per-cluster
/// state after each deletion. Usage records are kept one second after their end here (the
/// platform keeps them 400 days by default: retained data, not a leak), and the root cluster's
/// Events are left out of the state (they expire after an hour, as upstream's).
pub async fn run_tenant_clusters(
    quick: bool,
    cycles: Option<usize>,
    count: Option<usize>,
) -> anyhow::Result<()> {
    let cycles = cycles.unwrap_or(if quick { 3 } else { 20 });
    let count = count.unwrap_or(if quick { 20 } else { 100 });
    // Events are retained data, kept an hour after their last write by default; kept
    // `EVENT_TTL` here (10 s) so that the soak's steady state is reached within its run.
    let mut config = apiserver::server::fresh_config()?;
    config.event_ttl = EVENT_TTL;
    let (server, store, _data) = crate::setup::server_and_store(config).await?;
    let mut background = crate::setup::Background::control_plane(&server);
    let clients = crate::setup::platform_with(
        &server,
        &mut background,
        platform::Options {
            usage_retention: Duration::from_secs(1),
            ..Default::default()
        },
    )
    .await?;
    let api: kube::Api<kube::api::DynamicObject> = kube::Api::namespaced_with(
        clients.cluster("root")?,
        "tenant-root",
        &kube::api::ApiResource {
            group: "platform.matryoshka.dev".into(),
            version: "v1alpha1".into(),
            api_version: "platform.matryoshka.dev/v1alpha1".into(),
            kind: "TenantCluster".into(),
            plural: "tenantclusters".into(),
        },
    );
    println!(
        "churn soak: {cycles} cycles of creating {count} TenantClusters (one u1.medium virtual machine each) and deleting them, platform, machines, controllers and scheduler running"
    );
    let state = |server: &Arc<ApiServer>| {
        let mut s = server.per_cluster_state();
        s.remove("cached objects");
        s
    };
    let objects = |server: &Arc<ApiServer>| {
        let cache = &server.store().shared_cache();
        cache.object_count() - cache.count("", "events", "root")
    };
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = state(&server);
    let objects_before = objects(&server);
    println!(
        "before                 RSS {:>7.1} MiB   objects {objects_before}   {}",
        mib(rss_bytes()),
        state_line(&before)
    );
    let mut after_each = Vec::new();
    for cycle in 0..cycles {
        let started = Instant::now();
        for i in 0..count {
            let obj: kube::api::DynamicObject = serde_json::from_value(serde_json::json!({
                "apiVersion": "platform.matryoshka.dev/v1alpha1", "kind": "TenantCluster",
                "metadata": {"name": format!("soak{cycle}-{i}"), "namespace": "tenant-root"},
                "spec": {"nodeGroups": {"md0": {"minReplicas": 1, "maxReplicas": 1, "instanceType": "u1.medium"}}},
            }))?;
            api.create(&kube::api::PostParams::default(), &obj).await?;
        }
        if let Err(e) = wait_for(
            "every TenantCluster Ready",
            Duration::from_secs(120),
            || tenant_clusters(&server) == (count, count),
        )
        .await
        {
            // What the ones left behind say.
            let (items, _) = server.store().shared_cache().list(
                "platform.matryoshka.dev",
                "tenantclusters",
                &registry::cache::Filter::default(),
            );
            for o in items.iter().take(200) {
                let v = o.value();
                let ready = v
                    .pointer("/status/conditions")
                    .and_then(|c| c.as_array())
                    .is_some_and(|cs| {
                        cs.iter()
                            .any(|c| c["type"] == "Ready" && c["status"] == "True")
                    });
                if !ready {
                    eprintln!("not Ready: {} {}", o.name(), v["status"]);
                    explain(&server, o.name(), v["status"]["logicalCluster"].as_str());
                }
            }
            return Err(e);
        }
        let peak = rss_bytes();
        for i in 0..count {
            api.delete(&format!("soak{cycle}-{i}"), &Default::default())
                .await?;
        }
        wait("every TenantCluster gone", || {
            tenant_clusters(&server).0 == 0
                && server.store().shared_cache().count(
                    "core.matryoshka.dev",
                    "logicalclusters",
                    "root",
                ) == 0
        })
        .await?;
        // Settle: garbage collection, the machines' records (1 s retention), the cache.
        let settle = Instant::now() + Duration::from_secs(30);
        while objects(&server) != objects_before && Instant::now() < settle {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
        let rss = rss_bytes();
        let now_state = state(&server);
        let (history, revisions) = store.history_size();
        println!(
            "cycle {:>2} ({:>5.1} s)   RSS {:>7.1} MiB (with {count} clusters {:>7.1} MiB)   store history {:>5.1} MiB ({revisions} revisions)   objects {} (and {} Events)   {}",
            cycle + 1,
            started.elapsed().as_secs_f64(),
            mib(rss),
            mib(peak),
            mib(history),
            objects(&server),
            server.store().shared_cache().count("", "events", "root"),
            state_line(&now_state)
        );
        after_each.push(rss);
        anyhow::ensure!(
            now_state == before,
            "per-cluster state after cycle {}: {} (before: {})",
            cycle + 1,
            state_line(&now_state),
            state_line(&before)
        );
    }
    if after_each.len() >= 2 {
        let base = after_each[1] as f64;
        let last = *after_each.last().expect("a cycle") as f64;
        println!(
            "RSS after the last deletion vs after the second: {:+.1} % (target within ±10 %)",
            (last - base) / base * 100.0
        );
    }
    background.stop().await;
    Ok(())
}
