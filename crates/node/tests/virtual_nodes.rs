//! Virtual nodes against the in-process API server: registration, heartbeats, the pod
//! lifecycle, graceful deletion, stopping a node, logical clusters and the cost of many nodes.

mod support;

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, ListParams, PostParams, WatchEvent, WatchParams};
use kube::core::{DynamicObject, GroupVersionKind};
use kube::discovery::ApiResource;
use node::net::Ipv4Cidr;
use node::{NodeTemplate, VirtualNodes};
use serde_json::json;
use support::{Env, create, fast, in_phase, phase, pod, until};

fn ready(n: Option<&Node>) -> bool {
    n.and_then(|n| n.status.as_ref()?.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn renew_time(l: &Lease) -> String {
    l.spec
        .as_ref()
        .and_then(|s| s.renew_time.as_ref())
        .map(|t| t.0.to_string())
        .unwrap_or_default()
}

/// Waits for `n` more renewals of a Lease, by watching it.
async fn renewals(api: &Api<Lease>, name: &str, n: usize) -> Lease {
    let mut last = api.get(name).await.expect("lease");
    for _ in 0..n {
        let before = renew_time(&last);
        last = until(api, name, move |l: Option<&Lease>| {
            l.is_some_and(|l| renew_time(l) != before)
        })
        .await;
    }
    last
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_register_ready_with_the_allocatable_of_their_instance_type() {
    let env = Env::start().await;
    let vns = VirtualNodes::start(env.client.clone(), fast())
        .await
        .expect("start");
    let template = NodeTemplate::new("u1.medium", &["worker", "ingress-nginx"]);
    let added = vns
        .add_many("vn-", 2, &template)
        .await
        .expect("nodes added");
    assert_eq!(added.len(), 2);
    let nodes: Api<Node> = Api::all(env.client.clone());
    let n0 = until(&nodes, "vn-0", ready).await;
    let n1 = until(&nodes, "vn-1", ready).await;

    let labels = n0.metadata.labels.clone().expect("labels");
    assert_eq!(labels["kubernetes.io/hostname"], "vn-0");
    assert_eq!(labels["kubernetes.io/os"], "linux");
    assert_eq!(labels["kubernetes.io/arch"], "amd64");
    assert_eq!(labels["node.kubernetes.io/instance-type"], "u1.medium");
    assert_eq!(labels["node-role.kubernetes.io/worker"], "");
    assert_eq!(labels["node-role.kubernetes.io/ingress-nginx"], "");
    assert_eq!(labels["type"], "virtual");

    let status = n0.status.clone().expect("status");
    let alloc = status.allocatable.expect("allocatable");
    assert_eq!(alloc["memory"].0, "3297Mi");
    assert_eq!(alloc["cpu"].0, "900m");
    assert_eq!(alloc["pods"].0, "110");
    let cap = status.capacity.expect("capacity");
    assert_eq!(
        (cap["cpu"].0.as_str(), cap["memory"].0.as_str()),
        ("1", "4Gi")
    );
    assert_eq!(cap["ephemeral-storage"].0, "20Gi");
    let info = status.node_info.expect("nodeInfo");
    assert_eq!(info.kubelet_version, "v1.33.0");
    assert_eq!(info.container_runtime_version, "virtual://0.1");
    let conds = status.conditions.expect("conditions");
    for ty in ["MemoryPressure", "DiskPressure", "PIDPressure"] {
        assert!(
            conds.iter().any(|c| c.type_ == ty && c.status == "False"),
            "{ty}"
        );
    }
    assert!(
        conds
            .iter()
            .any(|c| c.type_ == "Ready" && c.reason.as_deref() == Some("KubeletReady"))
    );

    let cidr0 = n0.spec.as_ref().and_then(|s| s.pod_cidr.clone());
    let cidr1 = n1.spec.as_ref().and_then(|s| s.pod_cidr.clone());
    assert_eq!(cidr0.as_deref(), Some("10.244.0.0/24"));
    assert_eq!(cidr1.as_deref(), Some("10.244.1.0/24"));
    assert_eq!(
        n0.spec.and_then(|s| s.pod_cidrs),
        Some(vec!["10.244.0.0/24".to_string()])
    );
    let ip0 = &status.addresses.expect("addresses")[0];
    assert_eq!(
        (ip0.type_.as_str(), ip0.address.as_str()),
        ("InternalIP", "172.18.0.2")
    );
    assert_ne!(added[0].internal_ip(), added[1].internal_ip());
    vns.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_are_held_by_their_node_and_renewed() {
    let env = Env::start().await;
    let vns = VirtualNodes::start(env.client.clone(), fast())
        .await
        .expect("start");
    vns.add("vn-0", &NodeTemplate::default())
        .await
        .expect("node");
    let leases: Api<Lease> = Api::namespaced(env.client.clone(), "kube-node-lease");
    let lease = renewals(&leases, "vn-0", 3).await;
    let spec = lease.spec.clone().expect("spec");
    assert_eq!(spec.holder_identity.as_deref(), Some("vn-0"));
    assert_eq!(spec.lease_duration_seconds, Some(40));
    let nodes: Api<Node> = Api::all(env.client.clone());
    let node = nodes.get("vn-0").await.expect("node");
    let owner = &lease.metadata.owner_references.expect("owned")[0];
    assert_eq!(owner.kind, "Node");
    assert_eq!(Some(&owner.uid), node.metadata.uid.as_ref());
    // The agent counts a renewal when its patch returns, which may be just after the watch
    // above saw it: await the count rather than read it once.
    let agent = vns.get("vn-0").expect("here");
    tokio::time::timeout(Duration::from_secs(10), async {
        while agent.lease_renewals() < 3 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the agent counted the three renewals the watch saw");
    vns.shutdown().await;
}

fn heartbeat(n: &Node) -> Option<String> {
    n.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")?
        .last_heartbeat_time
        .as_ref()
        .map(|t| t.0.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_node_status_is_reported_again_with_a_new_heartbeat_time() {
    let env = Env::start().await;
    let vns = VirtualNodes::start(env.client.clone(), fast())
        .await
        .expect("start");
    let vn = vns
        .add("vn-0", &NodeTemplate::default())
        .await
        .expect("node");
    let nodes: Api<Node> = Api::all(env.client.clone());
    let first = heartbeat(&until(&nodes, "vn-0", ready).await);
    // Heartbeat times have second precision: a later report shows a later second.
    let later = until(&nodes, "vn-0", move |n: Option<&Node>| {
        n.is_some_and(|n| heartbeat(n) != first && ready(Some(n)))
    })
    .await;
    assert!(heartbeat(&later).is_some());
    // The agent counts a report once its write has returned, which can be after the watch
    // has shown the new heartbeat: await the count.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while vn.status_reports() < 2 && std::time::Instant::now() < deadline {
        tokio::task::yield_now().await;
    }
    assert!(vn.status_reports() >= 2);
    vns.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_node_stops_renewing_its_lease_and_leaves_its_pods_alone() {
    let env = Env::start().await;
    let vns = VirtualNodes::start(env.client.clone(), fast())
        .await
        .expect("start");
    let [a, _b] = <[_; 2]>::try_from(
        vns.add_many("vn-", 2, &NodeTemplate::default())
            .await
            .expect("nodes"),
    )
    .unwrap_or_else(|_| panic!("two nodes"));
    let leases: Api<Lease> = Api::namespaced(env.client.clone(), "kube-node-lease");
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), "default");
    renewals(&leases, "vn-0", 1).await;

    a.stop();
    assert!(!a.is_running());
    // A renewal already under way may still land; once the other node has renewed, it has.
    renewals(&leases, "vn-1", 1).await;
    let frozen = renew_time(&leases.get("vn-0").await.expect("lease"));
    // A pod bound to the stopped node is not started.
    create(&pods, &pod("waiting", Some("vn-0"))).await;
    // The other node renews three more times meanwhile; the stopped one not once.
    renewals(&leases, "vn-1", 3).await;
    assert_eq!(
        renew_time(&leases.get("vn-0").await.expect("lease")),
        frozen
    );
    let waiting = pods.get("waiting").await.expect("pod");
    assert_eq!(phase(Some(&waiting)).as_deref(), Some("Pending"));
    assert!(waiting.status.and_then(|s| s.container_statuses).is_none());

    a.start();
    renewals(&leases, "vn-0", 1).await;
    until(&pods, "waiting", in_phase("Running")).await;
    vns.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_node_object_is_registered_again() {
    let env = Env::start().await;
    let vns = VirtualNodes::start(env.client.clone(), fast())
        .await
        .expect("start");
    let vn = vns
        .add("vn-0", &NodeTemplate::default())
        .await
        .expect("node");
    let nodes: Api<Node> = Api::all(env.client.clone());
    let first = nodes.get("vn-0").await.expect("node").metadata.uid;
    nodes
        .delete("vn-0", &DeleteParams::default())
        .await
        .expect("deleted");
    let again = until(&nodes, "vn-0", move |n: Option<&Node>| {
        n.is_some_and(|n| n.metadata.uid != first) && ready(n)
    })
    .await;
    assert_eq!(
        again.spec.and_then(|s| s.pod_cidr),
        Some(vn.pod_cidr().to_string())
    );
    vns.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_agent_takes_its_nodes_and_pods_back() {
    let env = Env::start().await;
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), "default");
    let first = VirtualNodes::start(env.client.clone(), fast())
        .await
        .expect("start");
    first
        .add_many("vn-", 2, &NodeTemplate::default())
        .await
        .expect("nodes");
    create(&pods, &pod("web", Some("vn-1"))).await;
    let ip = until(&pods, "web", in_phase("Running"))
        .await
        .status
        .and_then(|s| s.pod_ip);
    first.shutdown().await;
    drop(first);

    let second = VirtualNodes::start(env.client.clone(), fast())
        .await
        .expect("start");
    // Added in the other order: each node keeps the subnet it already has.
    let vn1 = second
        .add("vn-1", &NodeTemplate::default())
        .await
        .expect("vn-1");
    let vn0 = second
        .add("vn-0", &NodeTemplate::default())
        .await
        .expect("vn-0");
    assert_eq!(vn0.pod_cidr().to_string(), "10.244.0.0/24");
    assert_eq!(vn1.pod_cidr().to_string(), "10.244.1.0/24");
    // The running pod keeps its IP, and a new one gets another.
    create(&pods, &pod("api", Some("vn-1"))).await;
    let api_ip = until(&pods, "api", in_phase("Running"))
        .await
        .status
        .and_then(|s| s.pod_ip);
    assert_ne!(api_ip, ip);
    assert_eq!(vn1.pod_ips_in_use(), 2);
    // A node added in a fresh process avoids the subnets existing nodes hold.
    let vn2 = second
        .add("vn-2", &NodeTemplate::default())
        .await
        .expect("vn-2");
    assert_eq!(vn2.pod_cidr().to_string(), "10.244.2.0/24");
    second.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn virtual_nodes_join_a_logical_cluster_and_only_it() {
    let env = Env::start().await;
    let gvk = GroupVersionKind::gvk("core.matryoshka.dev", "v1alpha1", "LogicalCluster");
    let lcs: Api<DynamicObject> = Api::all_with(env.client.clone(), &ApiResource::from_gvk(&gvk));
    let lc: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "core.matryoshka.dev/v1alpha1",
        "kind": "LogicalCluster",
        "metadata": {"name": "tenant-a"},
    }))
    .expect("object");
    lcs.create(&PostParams::default(), &lc)
        .await
        .expect("cluster");
    // Wait for the cluster to be served, watching its LogicalCluster.
    let is_ready = |o: &DynamicObject| {
        o.data.pointer("/status/phase").and_then(|p| p.as_str()) == Some("Ready")
    };
    let current = lcs.get("tenant-a").await.expect("cluster");
    if !is_ready(&current) {
        let rv = current
            .metadata
            .resource_version
            .clone()
            .unwrap_or_default();
        let wp = WatchParams::default().fields("metadata.name=tenant-a");
        let mut events = lcs.watch(&wp, &rv).await.expect("watch").boxed();
        let ready = async {
            while let Some(ev) = events.next().await {
                if let Ok(WatchEvent::Added(o) | WatchEvent::Modified(o)) = ev
                    && is_ready(&o)
                {
                    return;
                }
            }
            panic!("the watch ended before the cluster was ready");
        };
        tokio::time::timeout(support::WAIT, ready)
            .await
            .expect("cluster ready in time");
    }

    let tenant = env.cluster("tenant-a");
    let vns = VirtualNodes::start(tenant.clone(), fast())
        .await
        .expect("start");
    vns.add("tenant-node", &NodeTemplate::new("u1.large", &[]))
        .await
        .expect("node");
    let tenant_nodes: Api<Node> = Api::all(tenant.clone());
    let n = until(&tenant_nodes, "tenant-node", ready).await;
    assert_eq!(
        n.status.and_then(|s| s.allocatable).expect("allocatable")["memory"].0,
        "6800Mi"
    );
    let tenant_pods: Api<Pod> = Api::namespaced(tenant, "default");
    create(&tenant_pods, &pod("web", Some("tenant-node"))).await;
    until(&tenant_pods, "web", in_phase("Running")).await;

    let root_nodes: Api<Node> = Api::all(env.client.clone());
    assert!(
        root_nodes
            .list(&ListParams::default())
            .await
            .expect("list")
            .items
            .is_empty()
    );
    vns.shutdown().await;
}

/// One watch over a namespace's pods, kept open so that waiting adds no watches.
struct PodEvents {
    events: futures::stream::BoxStream<'static, kube::Result<WatchEvent<Pod>>>,
}

impl PodEvents {
    async fn open(api: &Api<Pod>) -> PodEvents {
        let rv = api
            .list(&ListParams::default())
            .await
            .expect("list")
            .metadata
            .resource_version
            .unwrap_or_default();
        let events = api
            .watch(&WatchParams::default(), &rv)
            .await
            .expect("watch")
            .boxed();
        PodEvents { events }
    }

    async fn until_running(&mut self, name: &str) {
        let wait = async {
            while let Some(ev) = self.events.next().await {
                if let Ok(WatchEvent::Added(p) | WatchEvent::Modified(p)) = ev
                    && p.metadata.name.as_deref() == Some(name)
                    && phase(Some(&p)).as_deref() == Some("Running")
                {
                    return;
                }
            }
            panic!("the pod watch ended");
        };
        tokio::time::timeout(support::WAIT, wait)
            .await
            .unwrap_or_else(|_| panic!("{name} did not run in time"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_nodes_cost_one_pod_watch() {
    let env = Env::start().await;
    let before = env.server.store().shared_cache().watcher_count();
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), "default");
    let mut events = PodEvents::open(&pods).await;
    let vns = VirtualNodes::start(env.client.clone(), support::fast_but_quiet())
        .await
        .expect("start");
    vns.add("vn-0", &NodeTemplate::default())
        .await
        .expect("first node");
    // The agent's pod watch is up once a pod on the first node runs.
    create(&pods, &pod("first", Some("vn-0"))).await;
    events.until_running("first").await;
    let watches = env.server.store().shared_cache().watcher_count();
    assert_eq!(watches, before + 2, "the test's watch and the agent's one");

    let template = NodeTemplate::new("u1.small", &["worker"]);
    for i in 1..200 {
        vns.add(&format!("vn-{i}"), &template).await.expect("node");
    }
    assert_eq!(vns.len(), 200);
    assert_eq!(env.server.store().shared_cache().watcher_count(), watches);

    let nodes: Api<Node> = Api::all(env.client.clone());
    let list = nodes.list(&ListParams::default()).await.expect("nodes");
    assert_eq!(list.items.len(), 200);
    assert!(list.items.iter().all(|n| ready(Some(n))));
    let mut cidrs: Vec<Ipv4Cidr> = list
        .items
        .iter()
        .filter_map(|n| n.spec.as_ref()?.pod_cidr.as_deref()?.parse().ok())
        .collect();
    cidrs.sort_by_key(|c| u32::from(c.network()));
    cidrs.dedup();
    assert_eq!(cidrs.len(), 200, "every node has its own subnet");

    // Pods on the last nodes run too, through the same watch.
    for i in [150, 199] {
        let name = format!("late-{i}");
        create(&pods, &pod(&name, Some(&format!("vn-{i}")))).await;
        events.until_running(&name).await;
    }
    assert_eq!(env.server.store().shared_cache().watcher_count(), watches);
    vns.shutdown().await;
}

/// Regression: the pod driver subscribed to shutdown inside its task, so a shutdown sent
/// before the task first ran was no change to it and `shutdown()` waited for it for ever (the
/// workloads benchmark hung with no nodes). On one thread the task has not run yet here.
#[tokio::test(flavor = "current_thread")]
async fn a_shutdown_right_after_start_returns() {
    let env = Env::start().await;
    let vns = VirtualNodes::start(env.client.clone(), fast())
        .await
        .expect("start");
    tokio::time::timeout(std::time::Duration::from_secs(10), vns.shutdown())
        .await
        .expect("shutdown returns");
}
