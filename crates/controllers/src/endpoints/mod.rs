//! The endpoints of Services: which pods back a service and how (upstream
//! `pkg/controller/util/endpoint` and `endpointslice/util`), shared by the two controllers
//! that publish them — [`slices`] (EndpointSlices, what kube-proxy and DNS read) and
//! [`legacy`] (the `v1 Endpoints` object `kubectl describe svc` and old clients read).
//!
//! A pod backs a service when the service has a selector that matches the pod's labels, the
//! pod has an IP and has not finished. Its conditions follow upstream: `serving` is the pod's
//! readiness, `terminating` its deletion, and `ready` is serving and not terminating — unless
//! the service publishes not-ready addresses, which makes every backing pod ready. Each
//! service port's `targetPort` is resolved per pod: a number as is, a name through the pod's
//! container ports of the same protocol (a pod without that named port lacks that port).

pub mod legacy;
pub mod slices;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, Service, ServicePort};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use std::sync::Arc;

use crate::podutil;
use runtime::informer::{Change, Informer, ObjectKey, Store};
use runtime::queue::Queue;

/// The label naming the service of an EndpointSlice.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";
/// The label saying who manages an EndpointSlice.
pub const MANAGED_BY_LABEL: &str = "endpointslice.kubernetes.io/managed-by";
/// This controller's value of [`MANAGED_BY_LABEL`].
pub const MANAGED_BY: &str = "endpointslice-controller.k8s.io";
/// The label marking objects of headless services.
pub const HEADLESS_LABEL: &str = "service.kubernetes.io/headless";
/// The node label naming its zone.
pub const ZONE_LABEL: &str = "topology.kubernetes.io/zone";

/// A service port resolved for one pod: what the endpoint offers.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ResolvedPort {
    pub name: String,
    pub port: i32,
    pub protocol: String,
    pub app_protocol: Option<String>,
}

/// How a backing pod serves a service.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Conditions {
    pub ready: bool,
    pub serving: bool,
    pub terminating: bool,
}

/// The service's selector, when it has a non-empty one (services without one are managed by
/// hand, as upstream leaves them).
pub fn selector(svc: &Service) -> Option<&BTreeMap<String, String>> {
    svc.spec
        .as_ref()?
        .selector
        .as_ref()
        .filter(|s| !s.is_empty())
}

/// Whether the service's endpoints are published by the controllers.
pub fn managed(svc: &Service) -> bool {
    let ty = svc.spec.as_ref().and_then(|s| s.type_.as_deref());
    selector(svc).is_some()
        && ty != Some("ExternalName")
        && svc.metadata.deletion_timestamp.is_none()
}

/// Whether `svc`'s selector matches the pod.
pub fn selects(svc: &Service, pod: &Pod) -> bool {
    let Some(sel) = selector(svc) else {
        return false;
    };
    let labels = pod.metadata.labels.as_ref();
    sel.iter()
        .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
}

/// The pod's (first) IP.
pub fn pod_ip(pod: &Pod) -> Option<&str> {
    let st = pod.status.as_ref()?;
    st.pod_ip
        .as_deref()
        .filter(|s| !s.is_empty())
        .or_else(|| st.pod_ips.as_ref()?.first().map(|p| p.ip.as_str()))
        .filter(|s| !s.is_empty())
}

/// Upstream `ShouldPodBeInEndpoints`: an IP, not finished, and not terminating unless
/// `include_terminating`.
pub fn backs(pod: &Pod, include_terminating: bool) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    if matches!(phase, Some("Succeeded" | "Failed")) || pod_ip(pod).is_none() {
        return false;
    }
    include_terminating || pod.metadata.deletion_timestamp.is_none()
}

fn publishes_not_ready(svc: &Service) -> bool {
    svc.spec
        .as_ref()
        .and_then(|s| s.publish_not_ready_addresses)
        .unwrap_or(false)
}

/// The pod's conditions as an endpoint of `svc`.
pub fn conditions(svc: &Service, pod: &Pod) -> Conditions {
    let serving = podutil::is_ready(pod);
    let terminating = pod.metadata.deletion_timestamp.is_some();
    Conditions {
        ready: publishes_not_ready(svc) || (serving && !terminating),
        serving,
        terminating,
    }
}

/// Upstream `FindPort`: the container port a service port reaches on this pod.
fn find_port(pod: &Pod, sp: &ServicePort) -> Option<i32> {
    match &sp.target_port {
        None => Some(sp.port),
        Some(IntOrString::Int(n)) if *n == 0 => Some(sp.port),
        Some(IntOrString::Int(n)) => Some(*n),
        Some(IntOrString::String(name)) => {
            let protocol = sp.protocol.as_deref().unwrap_or("TCP");
            let spec = pod.spec.as_ref()?;
            spec.containers
                .iter()
                .flat_map(|c| c.ports.iter().flatten())
                .find(|p| {
                    p.name.as_deref() == Some(name.as_str())
                        && p.protocol.as_deref().unwrap_or("TCP") == protocol
                })
                .map(|p| p.container_port)
        }
    }
}

/// The service's ports as the pod offers them, in the service's order.
pub fn resolve_ports(svc: &Service, pod: &Pod) -> Vec<ResolvedPort> {
    let ports = svc.spec.as_ref().and_then(|s| s.ports.as_ref());
    ports
        .into_iter()
        .flatten()
        .filter_map(|sp| {
            Some(ResolvedPort {
                name: sp.name.clone().unwrap_or_default(),
                port: find_port(pod, sp)?,
                protocol: sp.protocol.clone().unwrap_or_else(|| "TCP".into()),
                app_protocol: sp.app_protocol.clone(),
            })
        })
        .collect()
}

/// Upstream `ShouldSetHostname`: the pod's hostname when its subdomain is the service.
pub fn hostname(svc: &Service, pod: &Pod) -> Option<String> {
    let spec = pod.spec.as_ref()?;
    let host = spec.hostname.as_deref().filter(|h| !h.is_empty())?;
    (spec.subdomain.as_deref() == svc.metadata.name.as_deref()
        && pod.metadata.namespace == svc.metadata.namespace)
        .then(|| host.to_string())
}

/// Whether the service is headless (`clusterIP: None`).
pub fn headless(svc: &Service) -> bool {
    svc.spec.as_ref().and_then(|s| s.cluster_ip.as_deref()) == Some("None")
}

/// Queues the services that select a pod, before or after its change (both endpoint
/// controllers follow pods this way).
pub fn on_pod_change(
    pods: &Informer<Pod>,
    services: &Store<Service>,
    queue: &Arc<Queue<ObjectKey>>,
) {
    let (q, s) = (queue.clone(), services.clone());
    pods.on_change(move |c| {
        let pods: Vec<&Pod> = match c {
            Change::Updated { old, new, .. } => vec![&***old, &***new],
            other => vec![&**other.object()],
        };
        for k in services_selecting(&s, c.key(), &pods) {
            q.add(k);
        }
    });
}

/// The managed services of the pod's namespace that select it (before or after a change).
pub fn services_selecting(
    services: &Store<Service>,
    key: &ObjectKey,
    pods: &[&Pod],
) -> Vec<ObjectKey> {
    services
        .list_namespace(&key.cluster, &key.namespace)
        .iter()
        .filter(|s| pods.iter().any(|p| selects(s, p)))
        .map(|s| {
            ObjectKey::new(
                &key.cluster,
                &key.namespace,
                s.metadata.name.as_deref().unwrap_or_default(),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests;
