//! What the agent knows about a pod and its node when it builds a container's configuration:
//! the input of [`super::env`], [`super::volumes`], [`super::dns`] and [`super::security`].

use std::collections::BTreeMap;
use std::net::IpAddr;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// A pod as the agent is about to run it.
#[derive(Debug, Clone, Copy)]
pub struct PodContext<'a> {
    /// The pod as the API has it (spec, metadata, the last status the agent saw).
    pub pod: &'a Pod,
    /// The node's name (`spec.nodeName`).
    pub node_name: &'a str,
    /// The pod's IPs from its sandbox, primary first (the node's for host-network pods);
    /// empty before the sandbox exists.
    pub pod_ips: &'a [IpAddr],
    /// The node's IPs (`status.hostIPs`), primary first.
    pub host_ips: &'a [IpAddr],
    /// The node's allocatable resources: `resourceFieldRef`s of unset limits report these.
    pub node_allocatable: &'a BTreeMap<String, Quantity>,
    /// The cluster's DNS domain (`cluster.local`).
    pub cluster_domain: &'a str,
}

impl<'a> PodContext<'a> {
    /// The pod's UID ("" if it has none).
    pub fn uid(&self) -> &'a str {
        self.pod.metadata.uid.as_deref().unwrap_or("")
    }

    pub fn namespace(&self) -> &'a str {
        self.pod.metadata.namespace.as_deref().unwrap_or("default")
    }

    pub fn name(&self) -> &'a str {
        self.pod.metadata.name.as_deref().unwrap_or("")
    }
}
