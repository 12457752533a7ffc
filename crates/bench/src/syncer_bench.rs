//! The syncer benchmark (issue 19), against `matryoshka up` processes whose root cluster has
//! virtual nodes (pods "start" at once, so what is measured is the path through the API
//! servers, the tenant's controllers, the syncer and the host's scheduler, which places the
//! host pods; the syncer then binds the tenant pods where it put them):
//!
//! - **time to Running**: from a Deployment of 10 replicas created in a shared tenant
//!   cluster to all 10 tenant pods Running (their host pods made, run and their status
//!   synced back), p50 of 10, against the same Deployment created in the root cluster
//!   directly (the pods' own start on the same nodes). Target: < 2 s beyond the pods' own
//!   start.
//! - **memory and CPU per synced pod**: N shared clusters (default 100) with a Deployment of
//!   10 replicas each, all Running; the platform's RSS and CPU time with the syncer against
//!   the same platform and workload with `--no-syncer` (the tenant pods then stay Pending,
//!   unplaced) —
//!   an upper bound of the syncer's own memory, since it also counts what sync makes in the
//!   API server — and against `--no-syncer` where the benchmark itself makes what the syncer
//!   would have made (the host pods, Running on the host's nodes, and the host's nodes in
//!   every tenant cluster): the difference to that is the syncer's own memory (its informer
//!   stores, queues, per-cluster servers). Peer: vcluster's syncer, 46–52 MiB per tenant
//!   cluster (peers.md §2.11, loft-sh/vcluster PR #571). Target: < 20 KiB of syncer memory
//!   per synced object.

use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, PostParams,
};
use serde_json::{Value, json};

use crate::process_platform::ProcessPlatform;
use crate::report::{Better, Samples, header, line};

const NS: &str = "tenant-root";
const REPLICAS: usize = 10;
const VCLUSTER_SYNCER_MIB: f64 = 46.0;

fn clusters_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("platform.matryoshka.dev", "v1alpha1", "TenantCluster"),
        "tenantclusters",
    )
}

fn deployment(name: &str) -> anyhow::Result<Deployment> {
    Ok(serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "replicas": REPLICAS,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "main", "image": "docker.io/matryoshka/mtest:1"}]},
            },
        },
    }))?)
}

/// Runs `f` on every item, eight at once; the first error is the result.
async fn each_of<T, Fut>(
    items: impl IntoIterator<Item = T>,
    f: impl FnMut(T) -> Fut,
) -> anyhow::Result<()>
where
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    futures::stream::iter(items)
        .map(f)
        .buffer_unordered(8)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(())
}

/// Creates `count` shared TenantClusters and waits until they are Ready.
async fn shared_clusters(p: &ProcessPlatform, names: &[String]) -> anyhow::Result<()> {
    let api: Api<DynamicObject> = Api::namespaced_with(p.root.clone(), NS, &clusters_resource());
    each_of(names.iter().cloned(), |name| {
        let api = api.clone();
        async move {
            let obj: DynamicObject = serde_json::from_value(json!({
                "apiVersion": "platform.matryoshka.dev/v1alpha1", "kind": "TenantCluster",
                "metadata": {"name": name, "namespace": NS},
                "spec": {"workers": {"mode": "shared"}},
            }))?;
            api.create(&PostParams::default(), &obj).await?;
            anyhow::Ok(())
        }
    })
    .await?;
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let list = api.list(&Default::default()).await?;
        let ready = list
            .items
            .iter()
            .filter(|c| {
                c.data
                    .pointer("/status/conditions")
                    .and_then(Value::as_array)
                    .is_some_and(|cs| {
                        cs.iter()
                            .any(|c| c["type"] == "Ready" && c["status"] == "True")
                    })
            })
            .count();
        if ready >= names.len() {
            return Ok(());
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "{ready} of {} clusters Ready after 600 s:\n{}",
            names.len(),
            p.diagnostics()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Waits until `want` pods matching `selector` in `ns` are Running.
async fn running(
    client: &kube::Client,
    ns: &str,
    selector: &str,
    want: usize,
    limit: Duration,
) -> anyhow::Result<()> {
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    let deadline = Instant::now() + limit;
    loop {
        let pods = api.list(&ListParams::default().labels(selector)).await?;
        let n = pods
            .items
            .iter()
            .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
            .count();
        if n >= want {
            return Ok(());
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "{n} of {want} pods ({selector}) Running"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Time from creating a Deployment of 10 to its 10 pods Running, in `ns` of `client` (with
/// when all 10 pods existed and were bound to nodes, on stderr).
async fn deploy_time(client: &kube::Client, ns: &str, name: &str) -> anyhow::Result<Duration> {
    let api: Api<Deployment> = Api::namespaced(client.clone(), ns);
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let started = Instant::now();
    api.create(&PostParams::default(), &deployment(name)?)
        .await?;
    let (mut made, mut bound) = (None, None);
    let deadline = started + Duration::from_secs(120);
    loop {
        let list = pods
            .list(&ListParams::default().labels(&format!("app={name}")))
            .await?;
        let n = |f: &dyn Fn(&Pod) -> bool| list.items.iter().filter(|p| f(p)).count();
        if made.is_none() && n(&|_| true) >= REPLICAS {
            made = Some(started.elapsed());
        }
        if bound.is_none()
            && n(&|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some()) >= REPLICAS
        {
            bound = Some(started.elapsed());
        }
        if n(&|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")) >= REPLICAS
        {
            break;
        }
        anyhow::ensure!(Instant::now() < deadline, "{name}: pods not Running");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let took = started.elapsed();
    eprintln!(
        "    {name}: made {:.0} ms, bound {:.0} ms, Running {:.0} ms",
        made.unwrap_or_default().as_secs_f64() * 1000.0,
        bound.unwrap_or_default().as_secs_f64() * 1000.0,
        took.as_secs_f64() * 1000.0
    );
    api.delete(name, &DeleteParams::default()).await?;
    Ok(took)
}

/// VmRSS of process `pid`, in bytes.
fn rss_of(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .map(|kb| kb * 1024)
        .unwrap_or(0)
}

/// CPU seconds (user + system) process `pid` has used.
fn cpu_of(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let num = |i: usize| f.get(i).and_then(|x| x.parse::<u64>().ok()).unwrap_or(0);
    (num(11) + num(12)) as f64 / 100.0
}

/// Ten virtual nodes: room for the 1,000 pods of 100 clusters (110 pods each).
const ROOT_NODES: &[&str] = &["--node", "virtual", "--virtual-nodes", "10"];
const ROOT_NODE_COUNT: usize = 10;

/// Without the syncer, what it would make: each tenant pod's host pod (placed by the root's
/// scheduler on a root node, so it runs), the root's nodes in every tenant cluster, marked
/// mirrored, and what comes back: each tenant pod bound to its host pod's node with its host
/// pod's status, and the host's Events about it copied into the tenant cluster.
async fn make_what_the_syncer_makes(
    p: &ProcessPlatform,
    names: &[String],
    clients: &[kube::Client],
) -> anyhow::Result<()> {
    use k8s_openapi::api::core::v1::Node;
    let nodes: Vec<Node> = Api::<Node>::all(p.root.clone())
        .list(&ListParams::default())
        .await?
        .items;
    let host_pods: Api<Pod> = Api::namespaced(p.root.clone(), NS);
    let mut work = Vec::new();
    for (cluster, client) in names.iter().zip(clients) {
        for i in 0..REPLICAS {
            work.push((cluster.clone(), client.clone(), i));
        }
    }
    each_of(work, |(cluster, client, i)| {
        let host_pods = host_pods.clone();
        let nodes = nodes.clone();
        async move {
            let pod: Pod = serde_json::from_value(json!({
                "metadata": {"name": format!("web-{i}-x-default-x-{cluster}"),
                    "labels": {"vcluster.loft.sh/managed-by": cluster, "app": "web"},
                    "annotations": {"vcluster.loft.sh/object-name": format!("web-{i}"),
                        "vcluster.loft.sh/object-namespace": "default"}},
                "spec": {"automountServiceAccountToken": false,
                    "containers": [{"name": "main", "image": "docker.io/matryoshka/mtest:1"}]},
            }))?;
            host_pods.create(&PostParams::default(), &pod).await?;
            // Its cluster's copy of host node i (one per pod: ten per cluster).
            let host = &nodes[i % nodes.len()];
            let mut copy: Node = serde_json::from_value(json!({
                "metadata": {"name": host.metadata.name, "labels": host.metadata.labels,
                    "annotations": {"node.matryoshka.dev/mirrored-from-host": "true"}},
                "spec": {"providerID": host.spec.as_ref().and_then(|s| s.provider_id.clone())},
            }))?;
            let api: Api<Node> = Api::all(client);
            let made = api.create(&PostParams::default(), &copy).await?;
            copy.status = host.status.clone();
            copy.metadata.resource_version = made.metadata.resource_version;
            api.replace_status(
                made.metadata.name.as_deref().unwrap_or_default(),
                &PostParams::default(),
                &copy,
            )
            .await?;
            anyhow::Ok(())
        }
    })
    .await?;
    running(
        &p.root,
        NS,
        "vcluster.loft.sh/managed-by,app=web",
        names.len() * REPLICAS,
        Duration::from_secs(900),
    )
    .await?;
    // What comes back to each tenant pod: its node, its status, the Events about it.
    let host_list = host_pods
        .list(&ListParams::default().labels("vcluster.loft.sh/managed-by,app=web"))
        .await?
        .items;
    let events: Vec<k8s_openapi::api::core::v1::Event> = Api::namespaced(p.root.clone(), NS)
        .list(&ListParams::default())
        .await?
        .items;
    let mut work = Vec::new();
    for (cluster, client) in names.iter().zip(clients) {
        let tenant_pods: Api<Pod> = Api::namespaced(client.clone(), "default");
        let mut tenants = tenant_pods
            .list(&ListParams::default().labels("app=web"))
            .await?
            .items;
        tenants.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        for (i, tenant) in tenants.into_iter().enumerate() {
            let host_name = format!("web-{i}-x-default-x-{cluster}");
            let Some(host) = host_list
                .iter()
                .find(|h| h.metadata.name.as_deref() == Some(host_name.as_str()))
            else {
                anyhow::bail!("no host pod {host_name}");
            };
            let about: Vec<_> = events
                .iter()
                .filter(|e| e.involved_object.name.as_deref() == Some(host_name.as_str()))
                .cloned()
                .collect();
            work.push((client.clone(), tenant, host.clone(), about));
        }
    }
    each_of(work, |(client, tenant, host, about)| async move {
        let name = tenant.metadata.name.clone().unwrap_or_default();
        let api: Api<Pod> = Api::namespaced(client.clone(), "default");
        let node = host.spec.as_ref().and_then(|s| s.node_name.clone());
        let binding = json!({"apiVersion": "v1", "kind": "Binding",
                "metadata": {"name": name},
                "target": {"apiVersion": "v1", "kind": "Node", "name": node}});
        api.create_subresource::<Value, Value>("binding", &name, &PostParams::default(), &binding)
            .await?;
        let status = json!({"status": host.status});
        api.patch_status(
            &name,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&status),
        )
        .await?;
        let tenant_events: Api<k8s_openapi::api::core::v1::Event> =
            Api::namespaced(client, "default");
        for (j, e) in about.into_iter().enumerate() {
            let mut copy = e;
            copy.metadata = kube::api::ObjectMeta {
                name: Some(format!("{name}.{j}")),
                namespace: Some("default".into()),
                ..Default::default()
            };
            copy.involved_object.name = Some(name.clone());
            copy.involved_object.namespace = Some("default".into());
            copy.involved_object.uid = tenant.metadata.uid.clone();
            copy.involved_object.resource_version = None;
            tenant_events.create(&PostParams::default(), &copy).await?;
        }
        anyhow::Ok(())
    })
    .await?;
    Ok(())
}

pub async fn run(quick: bool, clusters: Option<usize>) -> anyhow::Result<()> {
    let rounds = if quick { 3 } else { 10 };
    let clusters = clusters.unwrap_or(if quick { 10 } else { 100 });
    header("syncer (shared clusters)", "peer");

    // 1. Time to Running.
    let p = ProcessPlatform::start(ROOT_NODES).await?;
    shared_clusters(&p, &["lat".to_string()]).await?;
    let tenant = p.tenant_cluster_client(NS, "lat").await?;
    let (mut shared, mut direct) = (Vec::new(), Vec::new());
    for i in 0..rounds {
        shared.push(deploy_time(&tenant, "default", &format!("web-{i}")).await?);
        direct.push(deploy_time(&p.root, "default", &format!("web-{i}")).await?);
    }
    let (s50, d50) = (
        Samples(shared).percentile(0.5),
        Samples(direct).percentile(0.5),
    );
    line(
        "deployment of 10 to all Running, p50 (vs root)",
        s50.as_secs_f64() * 1000.0,
        d50.as_secs_f64() * 1000.0,
        "ms",
        Better::Lower,
    );
    println!(
        "  beyond the pods' own start: {:.0} ms (target < 2000 ms)",
        (s50.as_secs_f64() - d50.as_secs_f64()) * 1000.0
    );
    p.stop().await;

    // 2. Memory and CPU per synced pod: the same workload with the syncer, without it, and
    // without it but with what it makes made by the benchmark.
    let names: Vec<String> = (0..clusters).map(|i| format!("s{i:03}")).collect();
    let mut cost = Vec::new();
    for (with_syncer, stand_in) in [(true, false), (false, false), (false, true)] {
        let mut flags = ROOT_NODES.to_vec();
        if !with_syncer {
            flags.push("--no-syncer");
        }
        let p = ProcessPlatform::start(&flags).await?;
        let pid = p.pid().ok_or_else(|| anyhow::anyhow!("no pid"))?;
        shared_clusters(&p, &names).await?;
        tokio::time::sleep(Duration::from_secs(5)).await;
        let (rss0, cpu0) = (rss_of(pid), cpu_of(pid));
        let started = Instant::now();
        let mut clients = Vec::new();
        for n in &names {
            clients.push(p.tenant_cluster_client(NS, n).await?);
        }
        each_of(clients.iter().cloned(), |c| async move {
            Api::<Deployment>::namespaced(c, "default")
                .create(&PostParams::default(), &deployment("web")?)
                .await?;
            anyhow::Ok(())
        })
        .await?;
        if with_syncer {
            // Every host pod Running, then every tenant pod.
            running(
                &p.root,
                NS,
                "vcluster.loft.sh/managed-by,app=web",
                clusters * REPLICAS,
                Duration::from_secs(900),
            )
            .await?;
            for c in &clients {
                running(c, "default", "app=web", REPLICAS, Duration::from_secs(300)).await?;
            }
        } else {
            // Every tenant pod made (Pending: nothing places or runs them).
            for c in &clients {
                let api: Api<Pod> = Api::namespaced(c.clone(), "default");
                let deadline = Instant::now() + Duration::from_secs(300);
                while api
                    .list(&ListParams::default().labels("app=web"))
                    .await?
                    .items
                    .len()
                    < REPLICAS
                {
                    anyhow::ensure!(Instant::now() < deadline, "tenant pods not made");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
            if stand_in {
                make_what_the_syncer_makes(&p, &names, &clients).await?;
            }
        }
        let synced_in = started.elapsed();
        tokio::time::sleep(Duration::from_secs(10)).await;
        let (rss1, cpu1) = (rss_of(pid), cpu_of(pid));
        eprintln!(
            "  {}: {clusters} clusters × {REPLICAS} pods in {:.1} s; RSS {:.0} → {:.0} MiB; CPU {:.1} s",
            match (with_syncer, stand_in) {
                (true, _) => "with the syncer",
                (false, false) => "without",
                (false, true) => "without, its objects made by the benchmark",
            },
            synced_in.as_secs_f64(),
            rss0 as f64 / 1048576.0,
            rss1 as f64 / 1048576.0,
            cpu1 - cpu0
        );
        cost.push((rss1.saturating_sub(rss0) as f64, cpu1 - cpu0));
        p.stop().await;
    }
    let pods = (clusters * REPLICAS) as f64;
    let own_per_pod = (cost[0].0 - cost[2].0).max(0.0) / pods;
    // Per synced object: each pod, its host pod's status coming back, and the host nodes
    // mirrored into its cluster (10 per cluster of 10 pods).
    let objects = pods + (clusters * ROOT_NODE_COUNT) as f64;
    line(
        "syncer's own memory per synced pod",
        own_per_pod / 1024.0,
        VCLUSTER_SYNCER_MIB * 1024.0 / REPLICAS as f64,
        "KiB",
        Better::Lower,
    );
    println!(
        "  per synced object (pods and mirrored nodes): {:.1} KiB; target < 20 KiB",
        (cost[0].0 - cost[2].0).max(0.0) / objects / 1024.0
    );
    let mem_per_pod = (cost[0].0 - cost[1].0).max(0.0) / pods;
    let cpu_per_pod = (cost[0].1 - cost[1].1).max(0.0) / pods;
    line(
        "syncer memory per synced pod (upper bound)",
        mem_per_pod / 1024.0,
        VCLUSTER_SYNCER_MIB * 1024.0 / REPLICAS as f64,
        "KiB",
        Better::Lower,
    );
    println!(
        "  peer: one vcluster syncer ({VCLUSTER_SYNCER_MIB} MiB) per cluster of {REPLICAS} pods; target < 20 KiB per synced object"
    );
    println!(
        "  syncer CPU per synced pod (to Running, with less without): {:.1} ms",
        cpu_per_pod * 1000.0
    );
    Ok(())
}
