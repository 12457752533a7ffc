//! The Node of a CRI agent: registration (created, or reconciled when it exists, as the
//! kubelet does on 409), its pod subnet, and the heartbeats — the Lease renewed every 10 s
//! and the status computed every 10 s, posted when it changed and at least every 5 minutes.
//!
//! The status is the kubelet's: capacity from the machine (or the configured instance type
//! or resources) and allocatable after reservations and the hard eviction threshold
//! ([`crate::sizing`]), the four conditions with upstream's reasons (Ready follows the
//! runtime's `RuntimeReady` and `NetworkReady`), `nodeInfo` (the runtime's version from
//! CRI), addresses, the images the runtime has, and the kubelet API port.

use std::collections::BTreeMap;
use std::sync::Arc;

use apimachinery::field::Path as FieldPath;
use k8s_cri::v1 as cri;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{
    ContainerImage, DaemonEndpoint, Node, NodeAddress, NodeCondition, NodeDaemonEndpoints,
    NodeSpec, NodeStatus, NodeSystemInfo,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio::time::Instant;

use super::agent::Agent;
use super::config::KubeletConfig;
use super::events;
use super::machine::Machine;
use super::worker::FIELD_MANAGER;
use crate::error::{Error, Result, status_code};
use crate::net::Ipv4Cidr;
use crate::object::{self, LEASE_NAMESPACE};
use crate::sizing::{self, NodeSizing, SizingInput};

/// `nodeStatusMaxImages`.
const MAX_IMAGES: usize = 50;

/// The node's sizing: the configured instance type or resources, else the machine's CPUs,
/// memory and disk.
pub fn sizing(config: &KubeletConfig, machine: &Machine) -> Result<NodeSizing> {
    let mut input: SizingInput = config.sizing.clone();
    if input.instance_type.is_none() && input.cpu.is_none() && input.memory.is_none() {
        input.cpu = Some(machine.cpus.to_string());
        input.memory = Some(format!("{}Ki", machine.memory_bytes / 1024));
    }
    if input.disk_size.is_none() && machine.disk_bytes > 0 {
        input.disk_size = Some(format!("{}Ki", machine.disk_bytes / 1024));
    }
    sizing::resolve(&input, &FieldPath::new("sizing"))
        .map_err(|e| Error::Sizing(e.aggregate_message()))
}

fn params() -> PatchParams {
    PatchParams {
        field_manager: Some(FIELD_MANAGER.to_string()),
        ..PatchParams::default()
    }
}

/// The Node's labels: hostname, OS and architecture (and the `beta.` ones), the instance
/// type when one sizes it, a role label per role, then the configured ones.
fn labels(config: &KubeletConfig, sizing: &NodeSizing) -> BTreeMap<String, String> {
    let mut l = BTreeMap::new();
    let name = &config.node_name;
    for (k, v) in [
        ("kubernetes.io/hostname", name.as_str()),
        ("kubernetes.io/os", "linux"),
        ("kubernetes.io/arch", "amd64"),
        ("beta.kubernetes.io/os", "linux"),
        ("beta.kubernetes.io/arch", "amd64"),
    ] {
        l.insert(k.to_string(), v.to_string());
    }
    if let Some(t) = sizing.instance_type {
        l.insert(
            "node.kubernetes.io/instance-type".into(),
            t.name.to_string(),
        );
        l.insert(
            "beta.kubernetes.io/instance-type".into(),
            t.name.to_string(),
        );
    }
    for r in &config.roles {
        l.insert(format!("node-role.kubernetes.io/{r}"), String::new());
    }
    l.extend(config.labels.clone());
    l
}

/// Registers the Node; its UID and pod subnet (the configured one, the cluster's, or a free
/// /24 of the cluster CIDR claimed here).
pub async fn register(
    client: &kube::Client,
    config: &KubeletConfig,
    sizing: &NodeSizing,
) -> Result<(String, Option<Ipv4Cidr>)> {
    let name = &config.node_name;
    let api: Api<Node> = Api::all(client.clone());
    let node = Node {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            labels: Some(labels(config, sizing)),
            annotations: Some(BTreeMap::from([
                ("node.alpha.kubernetes.io/ttl".to_string(), "0".to_string()),
                (
                    "volumes.kubernetes.io/controller-managed-attach-detach".to_string(),
                    "true".to_string(),
                ),
            ])),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec {
            pod_cidr: config.pod_cidr.map(|c| c.to_string()),
            pod_cidrs: config.pod_cidr.map(|c| vec![c.to_string()]),
            taints: (!config.taints.is_empty()).then(|| config.taints.clone()),
            provider_id: config.provider_id.clone(),
            ..NodeSpec::default()
        }),
        status: None,
    };
    let pp = PostParams {
        field_manager: Some(FIELD_MANAGER.to_string()),
        ..PostParams::default()
    };
    let node = match api.create(&pp, &node).await {
        Ok(n) => n,
        Err(e) if status_code(&e) == Some(409) => {
            let patch = json!({"metadata": {"labels": labels(config, sizing)}});
            api.patch(name, &params(), &Patch::Merge(&patch))
                .await
                .map_err(|e| Error::api(format!("updating node {name}"), e))?
        }
        Err(e) => return Err(Error::api(format!("creating node {name}"), e)),
    };
    let uid = node.metadata.uid.clone().unwrap_or_default();
    let theirs = node
        .spec
        .as_ref()
        .and_then(|s| s.pod_cidr.as_deref())
        .and_then(|c| c.parse::<Ipv4Cidr>().ok());
    if let Some(c) = theirs {
        if config.pod_cidr.is_some_and(|mine| mine != c) {
            tracing::warn!(node = %name, cidr = %c, "the node already has another pod CIDR; using it");
        }
        return Ok((uid, Some(c)));
    }
    let cidr = match config.pod_cidr {
        Some(c) => c,
        None => free_subnet(client, config).await?,
    };
    let patch = json!({"spec": {"podCIDR": cidr.to_string(), "podCIDRs": [cidr.to_string()]}});
    api.patch(name, &params(), &Patch::Merge(&patch))
        .await
        .map_err(|e| Error::api(format!("setting the pod CIDR of node {name}"), e))?;
    Ok((uid, Some(cidr)))
}

/// The lowest /`mask` of the cluster CIDR no node holds.
async fn free_subnet(client: &kube::Client, config: &KubeletConfig) -> Result<Ipv4Cidr> {
    let api: Api<Node> = Api::all(client.clone());
    let nodes = api
        .list(&ListParams::default())
        .await
        .map_err(|e| Error::api("listing nodes", e))?;
    let taken: Vec<Ipv4Cidr> = nodes
        .items
        .iter()
        .filter_map(|n| n.spec.as_ref()?.pod_cidr.as_deref()?.parse().ok())
        .collect();
    let count = config.cluster_cidr.subnet_count(config.node_cidr_mask);
    (0..count)
        .filter_map(|i| config.cluster_cidr.subnet(i, config.node_cidr_mask))
        .find(|s| !taken.contains(s))
        .ok_or_else(|| Error::PoolExhausted {
            pool: config.cluster_cidr.to_string(),
            mask: config.node_cidr_mask,
        })
}

fn quantities(m: BTreeMap<String, String>) -> BTreeMap<String, Quantity> {
    m.into_iter().map(|(k, v)| (k, Quantity(v))).collect()
}

/// What the runtime says about readiness: `None` when ready, else the Ready message.
pub fn runtime_problem(status: Option<&cri::StatusResponse>) -> Option<String> {
    let Some(s) = status.and_then(|s| s.status.as_ref()) else {
        return Some("container runtime is down".into());
    };
    let cond = |t: &str| s.conditions.iter().find(|c| c.r#type == t);
    let show = |c: &cri::RuntimeCondition| {
        format!(
            "{}={} reason:{} message:{}",
            c.r#type, c.status, c.reason, c.message
        )
    };
    let mut problems = Vec::new();
    match cond("RuntimeReady") {
        Some(c) if c.status => {}
        Some(c) => problems.push(format!("container runtime not ready: {}", show(c))),
        None => {
            problems.push("container runtime not ready: RuntimeReady condition is missing".into())
        }
    }
    match cond("NetworkReady") {
        Some(c) if c.status => {}
        Some(c) => problems.push(format!("container runtime network not ready: {}", show(c))),
        None => problems
            .push("container runtime network not ready: NetworkReady condition is missing".into()),
    }
    (!problems.is_empty()).then(|| problems.join(", "))
}

/// The images of the node's status: the largest 50, each with its digests and tags.
pub fn images(list: &[cri::Image]) -> Vec<ContainerImage> {
    let mut list: Vec<&cri::Image> = list.iter().collect();
    list.sort_by_key(|i| std::cmp::Reverse(i.size));
    list.into_iter()
        .take(MAX_IMAGES)
        .map(|i| ContainerImage {
            names: Some(
                i.repo_digests
                    .iter()
                    .chain(i.repo_tags.iter())
                    .cloned()
                    .collect(),
            ),
            size_bytes: Some(i.size as i64),
        })
        .collect()
}

/// The condition set, keeping each transition time while its status holds.
fn conditions(ready: Option<&str>, old: &[NodeCondition], now: &Time) -> Vec<NodeCondition> {
    let mk = |ty: &str, status: &str, reason: &str, message: &str| {
        let since = old
            .iter()
            .find(|o| o.type_ == ty && o.status == status)
            .and_then(|o| o.last_transition_time.clone())
            .unwrap_or_else(|| now.clone());
        NodeCondition {
            type_: ty.into(),
            status: status.into(),
            reason: Some(reason.into()),
            message: Some(message.into()),
            last_heartbeat_time: Some(now.clone()),
            last_transition_time: Some(since),
        }
    };
    vec![
        mk(
            "MemoryPressure",
            "False",
            "KubeletHasSufficientMemory",
            "kubelet has sufficient memory available",
        ),
        mk(
            "DiskPressure",
            "False",
            "KubeletHasNoDiskPressure",
            "kubelet has no disk pressure",
        ),
        mk(
            "PIDPressure",
            "False",
            "KubeletHasSufficientPID",
            "kubelet has sufficient PID available",
        ),
        match ready {
            None => mk(
                "Ready",
                "True",
                "KubeletReady",
                "kubelet is posting ready status",
            ),
            Some(msg) => mk("Ready", "False", "KubeletNotReady", msg),
        },
    ]
}

/// Everything the heartbeat needs that does not change.
pub struct NodeIdentity {
    pub machine: Machine,
    pub sizing: NodeSizing,
    pub runtime_version: String,
}

/// The node status now.
pub async fn status(agent: &Agent, id: &NodeIdentity, old: &[NodeCondition]) -> (NodeStatus, bool) {
    let now = Time(Timestamp::now());
    let runtime = agent.cri.status().await.ok();
    let problem = runtime_problem(runtime.as_ref());
    let images = agent
        .cri
        .list_images()
        .await
        .map(|l| images(&l))
        .unwrap_or_default();
    let capacity = id.sizing.capacity().map(quantities).unwrap_or_default();
    let allocatable = id.sizing.allocatable().map(quantities).unwrap_or_default();
    let facts = agent.facts();
    let mut addresses: Vec<NodeAddress> = facts
        .host_ips
        .iter()
        .map(|ip| NodeAddress {
            type_: "InternalIP".into(),
            address: ip.clone(),
        })
        .collect();
    addresses.push(NodeAddress {
        type_: "Hostname".into(),
        address: agent.config.node_name.clone(),
    });
    let m = &id.machine;
    let s = NodeStatus {
        capacity: Some(capacity),
        allocatable: Some(allocatable),
        conditions: Some(conditions(problem.as_deref(), old, &now)),
        addresses: Some(addresses),
        daemon_endpoints: Some(NodeDaemonEndpoints {
            kubelet_endpoint: Some(DaemonEndpoint {
                port: i32::from(agent.config.kubelet_port),
            }),
        }),
        node_info: Some(NodeSystemInfo {
            architecture: "amd64".into(),
            boot_id: m.boot_id.clone(),
            container_runtime_version: id.runtime_version.clone(),
            kernel_version: m.kernel_version.clone(),
            kube_proxy_version: String::new(),
            kubelet_version: agent.git_version.clone(),
            machine_id: m.machine_id.clone(),
            operating_system: "linux".into(),
            os_image: m.os_image.clone(),
            system_uuid: m.system_uuid.clone(),
            swap: None,
        }),
        images: Some(images),
        ..NodeStatus::default()
    };
    (s, problem.is_none())
}

/// Whether two statuses differ beyond heartbeat times.
fn changed(a: &NodeStatus, b: &NodeStatus) -> bool {
    let strip = |s: &NodeStatus| {
        let mut s = s.clone();
        for c in s.conditions.iter_mut().flatten() {
            c.last_heartbeat_time = None;
        }
        s
    };
    strip(a) != strip(b)
}

async fn renew_lease(agent: &Agent, node_uid: &str) -> Result<()> {
    let name = &agent.config.node_name;
    let api: Api<Lease> = Api::namespaced(agent.client.clone(), LEASE_NAMESPACE);
    let duration = agent.config.timing.lease_duration_seconds;
    let patch = json!({"spec": {
        "holderIdentity": name,
        "leaseDurationSeconds": duration,
        "renewTime": MicroTime(Timestamp::now()),
    }});
    match api.patch(name, &params(), &Patch::Merge(&patch)).await {
        Ok(_) => Ok(()),
        Err(e) if status_code(&e) == Some(404) => {
            let lease = object::lease(name, Some(node_uid), duration, MicroTime(Timestamp::now()));
            api.create(&PostParams::default(), &lease)
                .await
                .map(|_| ())
                .map_err(|e| Error::api(format!("creating the lease of node {name}"), e))
        }
        Err(e) => Err(Error::api(format!("renewing the lease of node {name}"), e)),
    }
}

/// Posts the node status; re-creates the Node if it was deleted.
async fn post(agent: &Agent, s: &NodeStatus) -> Result<()> {
    let name = &agent.config.node_name;
    let api: Api<Node> = Api::all(agent.client.clone());
    api.patch_status(name, &params(), &Patch::Merge(&json!({"status": s})))
        .await
        .map(|_| ())
        .map_err(|e| Error::api(format!("writing the status of node {name}"), e))
}

/// The heartbeat loop, until shutdown.
pub async fn run(agent: Arc<Agent>, id: NodeIdentity, node_uid: String) {
    let timing = agent.config.timing.clone();
    let mut shutdown = agent.shutdown.subscribe();
    let mut last: Option<NodeStatus> = None;
    let mut last_post = Instant::now();
    let mut was_ready: Option<bool> = None;
    let mut next_lease = Instant::now();
    let mut next_status = Instant::now();
    agent.recorder.node(
        Some(node_uid.clone()),
        events::NORMAL,
        "Starting",
        "Starting kubelet.",
    );
    loop {
        let now = Instant::now();
        if now >= next_lease {
            if let Err(e) = renew_lease(&agent, &node_uid).await {
                tracing::warn!(error = %e, "lease renewal failed");
            }
            next_lease = now + timing.lease_renew;
        }
        if now >= next_status {
            let old = last
                .as_ref()
                .and_then(|s| s.conditions.clone())
                .unwrap_or_default();
            let (s, ready) = status(&agent, &id, &old).await;
            let due = last.as_ref().is_none_or(|l| changed(l, &s))
                || last_post.elapsed() >= timing.status_report;
            if due {
                match post(&agent, &s).await {
                    Ok(()) => {
                        last = Some(s);
                        last_post = Instant::now();
                        if was_ready != Some(ready) {
                            let reason = if ready { "NodeReady" } else { "NodeNotReady" };
                            agent.recorder.node(
                                Some(node_uid.clone()),
                                events::NORMAL,
                                reason,
                                format!("Node {} status is now: {reason}", agent.config.node_name),
                            );
                            was_ready = Some(ready);
                        }
                    }
                    Err(e) => tracing::warn!(error = %e, "node status report failed"),
                }
            }
            next_status = now + timing.status_update;
        }
        let wake = next_lease.min(next_status);
        tokio::select! {
            _ = tokio::time::sleep_until(wake) => {}
            _ = shutdown.changed() => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cond(t: &str, ok: bool) -> cri::RuntimeCondition {
        cri::RuntimeCondition {
            r#type: t.into(),
            status: ok,
            reason: if ok {
                String::new()
            } else {
                "NetworkPluginNotReady".into()
            },
            message: if ok {
                String::new()
            } else {
                "Network plugin returns error: cni plugin not initialized".into()
            },
        }
    }

    #[test]
    fn a_runtime_without_network_makes_the_node_not_ready_with_upstreams_message() {
        let s = cri::StatusResponse {
            status: Some(cri::RuntimeStatus {
                conditions: vec![cond("RuntimeReady", true), cond("NetworkReady", false)],
            }),
            ..Default::default()
        };
        assert_eq!(
            runtime_problem(Some(&s)).as_deref(),
            Some(
                "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized"
            )
        );
        let ok = cri::StatusResponse {
            status: Some(cri::RuntimeStatus {
                conditions: vec![cond("RuntimeReady", true), cond("NetworkReady", true)],
            }),
            ..Default::default()
        };
        assert_eq!(runtime_problem(Some(&ok)), None);
        assert_eq!(
            runtime_problem(None).as_deref(),
            Some("container runtime is down")
        );
    }

    #[test]
    fn transition_times_hold_while_the_status_does() {
        let t0 = Time(Timestamp::from_second(1).expect("ts"));
        let t1 = Time(Timestamp::from_second(2).expect("ts"));
        let first = conditions(None, &[], &t0);
        let again = conditions(None, &first, &t1);
        let ready = again.iter().find(|c| c.type_ == "Ready").expect("ready");
        assert_eq!(ready.last_transition_time, Some(t0.clone()));
        assert_eq!(ready.last_heartbeat_time, Some(t1.clone()));
        let down = conditions(Some("x"), &again, &t1);
        let ready = down.iter().find(|c| c.type_ == "Ready").expect("ready");
        assert_eq!(
            (ready.status.as_str(), ready.reason.as_deref()),
            ("False", Some("KubeletNotReady"))
        );
        assert_eq!(ready.last_transition_time, Some(t1));
    }

    #[test]
    fn images_are_listed_largest_first_with_digests_and_tags() {
        let img = |tag: &str, size| cri::Image {
            id: format!("sha256:{tag}"),
            repo_tags: vec![tag.into()],
            repo_digests: vec![format!("{tag}@sha256:00")],
            size,
            ..Default::default()
        };
        let l = images(&[img("small", 1), img("big", 9)]);
        assert_eq!(l[0].names.as_ref().expect("names")[1], "big");
        assert_eq!(l[0].size_bytes, Some(9));
    }
}
