//! What a set of virtual nodes is configured with: heartbeat and pod pacing, the address
//! pools, and the template each node is made from.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Taint;

use crate::net::Ipv4Cidr;
use crate::pod::lifecycle::Pacing;
use crate::sizing::SizingInput;

/// The field manager of every write the agent makes.
pub const FIELD_MANAGER: &str = "virtual-kubelet";

/// Intervals of the agent. The defaults are upstream kubelet's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Timing {
    /// `spec.leaseDurationSeconds` of the node Lease (kubelet `nodeLeaseDurationSeconds`: 40).
    pub lease_duration_seconds: i32,
    /// How often the Lease is renewed: a quarter of its duration, 10 s, as the kubelet does.
    pub lease_renew_interval: Duration,
    /// How often the node status is re-posted while nothing changes (kubelet
    /// `nodeStatusReportFrequency`: 5 min).
    pub status_report_interval: Duration,
    /// From "ContainerCreating" to running.
    pub container_start_delay: Duration,
    /// How long containers of pods that do not restart run before they complete.
    pub run_duration: Duration,
    /// The wait before a failed write is tried again.
    pub retry_interval: Duration,
}

impl Default for Timing {
    fn default() -> Self {
        Timing {
            lease_duration_seconds: 40,
            lease_renew_interval: Duration::from_secs(10),
            status_report_interval: Duration::from_secs(300),
            container_start_delay: Duration::ZERO,
            run_duration: Duration::from_secs(1),
            retry_interval: Duration::from_secs(1),
        }
    }
}

impl Timing {
    /// The pod pacing part.
    pub fn pacing(&self) -> Pacing {
        Pacing {
            start_delay: self.container_start_delay,
            run_duration: self.run_duration,
        }
    }
}

/// Where node and pod addresses come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Network {
    /// Pod subnets of nodes are carved from this (the cluster CIDR). The default
    /// `10.244.0.0/14` gives node N the subnet `10.244.N.0/24` for the first 256 nodes and
    /// room for 1024.
    pub cluster_cidr: Ipv4Cidr,
    /// The prefix length of each node's pod subnet (upstream `--node-cidr-mask-size`: 24).
    pub node_cidr_mask: u8,
    /// Node InternalIPs: node slot N gets host N + 2 of this network.
    pub node_network: Ipv4Cidr,
}

impl Default for Network {
    fn default() -> Self {
        Network {
            cluster_cidr: Ipv4Cidr::new(std::net::Ipv4Addr::new(10, 244, 0, 0), 14)
                .expect("a valid network"),
            node_cidr_mask: 24,
            node_network: Ipv4Cidr::new(std::net::Ipv4Addr::new(172, 18, 0, 0), 16)
                .expect("a valid network"),
        }
    }
}

/// Options of a set of virtual nodes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Options {
    pub timing: Timing,
    pub network: Network,
    /// How many pod status writes and deletes may be in flight at once.
    pub max_in_flight: Option<usize>,
}

/// Default of [`Options::max_in_flight`].
pub const DEFAULT_MAX_IN_FLIGHT: usize = 64;

/// What a virtual node is made from (a node group's worker shape).
#[derive(Debug, Clone, PartialEq)]
pub struct NodeTemplate {
    /// Instance type, resources, kubelet overrides, disk and GPUs.
    pub sizing: SizingInput,
    /// Each role `r` becomes the label `node-role.kubernetes.io/r: ""`.
    pub roles: Vec<String>,
    /// More labels (they win over the computed ones).
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
}

impl NodeTemplate {
    /// A template of instance type `instance_type` with `roles`.
    pub fn new(instance_type: &str, roles: &[&str]) -> Self {
        NodeTemplate {
            sizing: SizingInput::instance_type(instance_type),
            roles: roles.iter().map(|r| r.to_string()).collect(),
            labels: BTreeMap::new(),
            taints: Vec::new(),
        }
    }
}

impl Default for NodeTemplate {
    /// A `u1.medium` worker with no roles (the chart's default instance type).
    fn default() -> Self {
        NodeTemplate::new("u1.medium", &[])
    }
}
