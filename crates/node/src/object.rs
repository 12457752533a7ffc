//! The Node and Lease objects of a virtual node, built from its identity, size and the
//! time: labels, pod CIDR, addresses, capacity and allocatable, conditions, node info and the
//! heartbeat Lease. Pure; the agent writes what these return.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{
    DaemonEndpoint, Node, NodeAddress, NodeCondition, NodeDaemonEndpoints, NodeSpec, NodeStatus,
    NodeSystemInfo, Taint,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, OwnerReference, Time};

use crate::net::Ipv4Cidr;
use crate::sizing::NodeSizing;

/// The container runtime a virtual node reports.
pub const RUNTIME_VERSION: &str = "virtual://0.1";
/// The namespace of node heartbeat Leases.
pub const LEASE_NAMESPACE: &str = "kube-node-lease";
/// The kubelet's port, reported in `daemonEndpoints`.
pub const KUBELET_PORT: i32 = 10250;
/// The label marking virtual nodes (`type: virtual`, as KWOK's nodes carry `type: kwok`).
pub const TYPE_LABEL: &str = "type";

/// Who a virtual node is.
#[derive(Debug, Clone, PartialEq)]
pub struct Identity {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    pub pod_cidr: Ipv4Cidr,
    pub internal_ip: Ipv4Addr,
    /// The cluster's `gitVersion` (`v1.33.0`).
    pub kubelet_version: String,
    pub machine_id: String,
    pub boot_id: String,
}

/// The labels of a virtual node: hostname, OS and architecture (also the `beta.` ones the
/// kubelet still sets), instance type, a `node-role.kubernetes.io/<role>` per role, `gpu: on`
/// with GPUs, `type: virtual`, then `extra` (which may override).
pub fn labels(
    name: &str,
    sizing: &NodeSizing,
    roles: &[String],
    extra: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut l = BTreeMap::new();
    let mut put = |k: &str, v: &str| {
        l.insert(k.to_string(), v.to_string());
    };
    put("kubernetes.io/hostname", name);
    put("kubernetes.io/os", "linux");
    put("kubernetes.io/arch", "amd64");
    put("beta.kubernetes.io/os", "linux");
    put("beta.kubernetes.io/arch", "amd64");
    let instance_type = sizing.instance_type.map_or("virtual", |t| t.name);
    put("node.kubernetes.io/instance-type", instance_type);
    put("beta.kubernetes.io/instance-type", instance_type);
    put(TYPE_LABEL, "virtual");
    if !sizing.gpus.is_empty() {
        put("gpu", "on");
    }
    for r in roles {
        put(&format!("node-role.kubernetes.io/{r}"), "");
    }
    l.extend(extra.iter().map(|(k, v)| (k.clone(), v.clone())));
    l
}

/// The Node to register (metadata and spec; status is written through `/status`).
pub fn node(id: &Identity) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(id.name.clone()),
            labels: Some(id.labels.clone()),
            annotations: Some(BTreeMap::from([(
                "node.alpha.kubernetes.io/ttl".to_string(),
                "0".to_string(),
            )])),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec {
            pod_cidr: Some(id.pod_cidr.to_string()),
            pod_cidrs: Some(vec![id.pod_cidr.to_string()]),
            provider_id: Some(format!("virtual://{}", id.name)),
            taints: (!id.taints.is_empty()).then(|| id.taints.clone()),
            ..NodeSpec::default()
        }),
        status: None,
    }
}

fn quantities(m: BTreeMap<String, String>) -> BTreeMap<String, Quantity> {
    m.into_iter().map(|(k, v)| (k, Quantity(v))).collect()
}

fn condition(
    ty: &str,
    status: &str,
    reason: &str,
    message: &str,
    now: &Time,
    since: &Time,
) -> NodeCondition {
    NodeCondition {
        type_: ty.to_string(),
        status: status.to_string(),
        reason: Some(reason.to_string()),
        message: Some(message.to_string()),
        last_heartbeat_time: Some(now.clone()),
        last_transition_time: Some(since.clone()),
    }
}

/// The node's status: capacity and allocatable from `sizing`, Ready and the three pressure
/// conditions (heartbeat `now`, ready since `since`), addresses, daemon endpoints, node info.
/// `None` when the size is unknown.
pub fn status(id: &Identity, sizing: &NodeSizing, now: &Time, since: &Time) -> Option<NodeStatus> {
    let capacity = sizing.capacity().ok()?;
    let allocatable = sizing.allocatable().ok()?;
    Some(NodeStatus {
        capacity: Some(quantities(capacity)),
        allocatable: Some(quantities(allocatable)),
        conditions: Some(vec![
            condition(
                "MemoryPressure",
                "False",
                "KubeletHasSufficientMemory",
                "kubelet has sufficient memory available",
                now,
                since,
            ),
            condition(
                "DiskPressure",
                "False",
                "KubeletHasNoDiskPressure",
                "kubelet has no disk pressure",
                now,
                since,
            ),
            condition(
                "PIDPressure",
                "False",
                "KubeletHasSufficientPID",
                "kubelet has sufficient PID available",
                now,
                since,
            ),
            condition(
                "Ready",
                "True",
                "KubeletReady",
                "kubelet is posting ready status",
                now,
                since,
            ),
        ]),
        addresses: Some(vec![
            NodeAddress {
                type_: "InternalIP".to_string(),
                address: id.internal_ip.to_string(),
            },
            NodeAddress {
                type_: "Hostname".to_string(),
                address: id.name.clone(),
            },
        ]),
        daemon_endpoints: Some(NodeDaemonEndpoints {
            kubelet_endpoint: Some(DaemonEndpoint { port: KUBELET_PORT }),
        }),
        node_info: Some(NodeSystemInfo {
            architecture: "amd64".to_string(),
            boot_id: id.boot_id.clone(),
            container_runtime_version: RUNTIME_VERSION.to_string(),
            kernel_version: "virtual".to_string(),
            kube_proxy_version: String::new(),
            kubelet_version: id.kubelet_version.clone(),
            machine_id: id.machine_id.clone(),
            operating_system: "linux".to_string(),
            os_image: "Matryoshka virtual node".to_string(),
            system_uuid: id.machine_id.clone(),
            swap: None,
        }),
        ..NodeStatus::default()
    })
}

/// The node's heartbeat Lease, owned by the Node (uid `node_uid`) so it goes with it.
pub fn lease(name: &str, node_uid: Option<&str>, duration_seconds: i32, now: MicroTime) -> Lease {
    Lease {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(LEASE_NAMESPACE.to_string()),
            owner_references: node_uid.map(|uid| {
                vec![OwnerReference {
                    api_version: "v1".to_string(),
                    kind: "Node".to_string(),
                    name: name.to_string(),
                    uid: uid.to_string(),
                    ..OwnerReference::default()
                }]
            }),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(name.to_string()),
            lease_duration_seconds: Some(duration_seconds),
            renew_time: Some(now),
            ..LeaseSpec::default()
        }),
    }
}

#[cfg(test)]
mod tests {
    use apimachinery::field::Path;
    use k8s_openapi::jiff::Timestamp;

    use super::*;
    use crate::sizing::{SizingInput, resolve};

    fn sizing(t: &str) -> NodeSizing {
        resolve(&SizingInput::instance_type(t), &Path::new("x")).expect("valid")
    }

    fn identity(s: &NodeSizing) -> Identity {
        Identity {
            name: "vn-0".into(),
            labels: labels(
                "vn-0",
                s,
                &["worker".into(), "ingress-nginx".into()],
                &BTreeMap::new(),
            ),
            taints: vec![],
            pod_cidr: "10.244.3.0/24".parse().expect("cidr"),
            internal_ip: Ipv4Addr::new(172, 18, 0, 5),
            kubelet_version: "v1.33.0".into(),
            machine_id: "m".into(),
            boot_id: "b".into(),
        }
    }

    #[test]
    fn labels_name_the_host_platform_type_and_roles() {
        let s = sizing("u1.large");
        let l = identity(&s).labels;
        assert_eq!(l["kubernetes.io/hostname"], "vn-0");
        assert_eq!(l["kubernetes.io/os"], "linux");
        assert_eq!(l["kubernetes.io/arch"], "amd64");
        assert_eq!(l["node.kubernetes.io/instance-type"], "u1.large");
        assert_eq!(l["node-role.kubernetes.io/worker"], "");
        assert_eq!(l["node-role.kubernetes.io/ingress-nginx"], "");
        assert_eq!(l["type"], "virtual");
        assert!(!l.contains_key("gpu"));
        assert_eq!(
            labels("g", &sizing("gn1.xlarge"), &[], &BTreeMap::new())["gpu"],
            "on"
        );
    }

    #[test]
    fn extra_labels_are_added_last() {
        let extra = BTreeMap::from([("type".to_string(), "kwok".to_string())]);
        assert_eq!(
            labels("n", &sizing("u1.small"), &[], &extra)["type"],
            "kwok"
        );
    }

    #[test]
    fn the_node_spec_carries_its_pod_cidr() {
        let s = sizing("u1.medium");
        let n = node(&identity(&s));
        let spec = n.spec.expect("spec");
        assert_eq!(spec.pod_cidr.as_deref(), Some("10.244.3.0/24"));
        assert_eq!(spec.pod_cidrs, Some(vec!["10.244.3.0/24".to_string()]));
        assert!(spec.taints.is_none());
        assert!(n.status.is_none());
    }

    #[test]
    fn the_status_is_ready_with_allocatable_from_sizing() {
        let s = sizing("u1.medium");
        let now = Time(Timestamp::from_second(1_700_000_000).expect("ts"));
        let since = Time(Timestamp::from_second(1_600_000_000).expect("ts"));
        let st = status(&identity(&s), &s, &now, &since).expect("known size");
        let alloc = st.allocatable.expect("allocatable");
        assert_eq!(alloc["memory"].0, "3297Mi");
        assert_eq!(alloc["cpu"].0, "900m");
        assert_eq!(alloc["pods"].0, "110");
        assert_eq!(
            st.capacity.expect("capacity")["ephemeral-storage"].0,
            "20Gi"
        );
        let conds = st.conditions.expect("conditions");
        let ready = conds.iter().find(|c| c.type_ == "Ready").expect("Ready");
        assert_eq!(ready.status, "True");
        assert_eq!(ready.reason.as_deref(), Some("KubeletReady"));
        assert_eq!(ready.last_heartbeat_time, Some(now.clone()));
        assert_eq!(ready.last_transition_time, Some(since));
        for ty in ["MemoryPressure", "DiskPressure", "PIDPressure"] {
            let c = conds.iter().find(|c| c.type_ == ty).expect(ty);
            assert_eq!(c.status, "False", "{ty}");
        }
        let addrs = st.addresses.expect("addresses");
        assert_eq!(addrs[0].type_, "InternalIP");
        assert_eq!(addrs[0].address, "172.18.0.5");
        let info = st.node_info.expect("nodeInfo");
        assert_eq!(info.kubelet_version, "v1.33.0");
        assert_eq!(info.container_runtime_version, "virtual://0.1");
        assert_eq!(
            (info.operating_system.as_str(), info.architecture.as_str()),
            ("linux", "amd64")
        );
        assert_eq!(
            st.daemon_endpoints
                .and_then(|d| d.kubelet_endpoint)
                .map(|e| e.port),
            Some(10250)
        );
    }

    #[test]
    fn a_node_of_unknown_size_has_no_status() {
        let s = resolve(&SizingInput::default(), &Path::new("x")).expect("valid");
        let now = Time(Timestamp::UNIX_EPOCH);
        assert!(status(&identity(&s), &s, &now, &now).is_none());
    }

    #[test]
    fn the_lease_is_held_by_and_owned_by_its_node() {
        let l = lease("vn-0", Some("uid-1"), 40, MicroTime(Timestamp::UNIX_EPOCH));
        assert_eq!(l.metadata.namespace.as_deref(), Some("kube-node-lease"));
        let owner = &l.metadata.owner_references.expect("owner")[0];
        assert_eq!((owner.kind.as_str(), owner.uid.as_str()), ("Node", "uid-1"));
        let spec = l.spec.expect("spec");
        assert_eq!(spec.holder_identity.as_deref(), Some("vn-0"));
        assert_eq!(spec.lease_duration_seconds, Some(40));
    }
}
