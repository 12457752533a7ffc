//! The `kube-system/kube-dns` Service every cluster has, and the EndpointSlices through which
//! node agents publish their DNS servers behind it.
//!
//! Pods find cluster DNS at the `kube-dns` Service's cluster IP (kubelet `clusterDNS`,
//! `dnsPolicy: ClusterFirst`). In Matryoshka the servers are not pods: each node agent runs
//! one for its cluster (see the crate docs). So the Service has no selector; each agent
//! publishes one EndpointSlice `kube-dns-<node>` with its server's address and `nodeName`,
//! owned by its Node (the garbage collector removes it with the Node), and the Service has
//! `internalTrafficPolicy: Local`: the Service rules send a pod's queries to the server on
//! its own node, as NodeLocal DNSCache does, with no hop to another node.
//!
//! Where this belongs: the Service is part of a cluster's addons, created when the cluster
//! is provisioned (the platform's tenant-cluster provisioning, next to the kubeconfigs, or
//! the API server's bootstrap seed); [`ensure_service`] is that step. [`publish_node`] and
//! [`withdraw_node`] are the node agent's, once its server has synced and when it stops.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};

use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort, EndpointSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{Api, DeleteParams, PostParams};

use crate::convert::SERVICE_NAME_LABEL;
use crate::error::Result;

/// The Service's namespace.
pub const NAMESPACE: &str = "kube-system";
/// The Service's name (kept from kube-dns for compatibility, as CoreDNS keeps it).
pub const NAME: &str = "kube-dns";
/// The conventional cluster DNS address: the tenth of the default service range
/// `10.96.0.0/12` (kubeadm's choice; the seed's tenants, on `10.95.0.0/16`, use 10.95.0.10).
pub const DEFAULT_CLUSTER_IP: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 96, 0, 10));
/// The DNS port.
pub const PORT: u16 = 53;
/// `endpointslice.kubernetes.io/managed-by` of the node slices (the EndpointSlice
/// controller leaves slices of other managers alone).
pub const MANAGED_BY: &str = "dns.matryoshka.dev";
const MANAGED_BY_LABEL: &str = "endpointslice.kubernetes.io/managed-by";

fn labels() -> BTreeMap<String, String> {
    BTreeMap::from([
        ("k8s-app".to_string(), "kube-dns".to_string()),
        (
            "kubernetes.io/cluster-service".to_string(),
            "true".to_string(),
        ),
    ])
}

/// The `kube-dns` Service with `cluster_ip`: ports 53/UDP `dns` and 53/TCP `dns-tcp`, no
/// selector, `internalTrafficPolicy: Local`.
pub fn service(cluster_ip: IpAddr) -> Service {
    let port = |name: &str, protocol: &str| ServicePort {
        name: Some(name.into()),
        port: PORT.into(),
        protocol: Some(protocol.into()),
        target_port: Some(IntOrString::Int(PORT.into())),
        ..ServicePort::default()
    };
    let family = if cluster_ip.is_ipv4() { "IPv4" } else { "IPv6" };
    Service {
        metadata: ObjectMeta {
            name: Some(NAME.into()),
            namespace: Some(NAMESPACE.into()),
            labels: Some(labels()),
            ..ObjectMeta::default()
        },
        spec: Some(ServiceSpec {
            type_: Some("ClusterIP".into()),
            cluster_ip: Some(cluster_ip.to_string()),
            cluster_ips: Some(vec![cluster_ip.to_string()]),
            ip_families: Some(vec![family.into()]),
            ip_family_policy: Some("SingleStack".into()),
            internal_traffic_policy: Some("Local".into()),
            ports: Some(vec![port("dns", "UDP"), port("dns-tcp", "TCP")]),
            ..ServiceSpec::default()
        }),
        status: None,
    }
}

/// Creates the `kube-dns` Service unless the cluster has one; returns the Service in place
/// (an existing one is left as it is: its cluster IP cannot change).
///
/// Nodes starting together race to create it. The loser gets a conflict on the name, or
/// (the address is reserved before the name is checked, as kube-apiserver also does) a 422
/// for the already allocated IP while the winner's Service is not stored yet: it reads the
/// Service again, a few times over two seconds, before it tries once more.
pub async fn ensure_service(client: &kube::Client, cluster_ip: IpAddr) -> Result<Service> {
    let api: Api<Service> = Api::namespaced(client.clone(), NAMESPACE);
    let mut last = None;
    for _ in 0..3 {
        if let Some(s) = api.get_opt(NAME).await? {
            return Ok(s);
        }
        match api
            .create(&PostParams::default(), &service(cluster_ip))
            .await
        {
            Ok(s) => return Ok(s),
            Err(kube::Error::Api(e)) if e.code == 409 || e.code == 422 => {
                for _ in 0..20 {
                    if let Some(s) = api.get_opt(NAME).await? {
                        return Ok(s);
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
                last = Some(e);
            }
            Err(e) => return Err(e.into()),
        }
    }
    Err(kube::Error::Api(last.expect("set by the loop's only way round")).into())
}

/// The name of a node's slice.
pub fn slice_name(node: &str) -> String {
    format!("{NAME}-{node}")
}

/// The EndpointSlice publishing `node`'s DNS server at `addr`:`port`, owned by the Node
/// (uid `node_uid`).
pub fn node_slice(
    node: &str,
    node_uid: &str,
    addr: IpAddr,
    port: u16,
    ready: bool,
) -> EndpointSlice {
    let mut labels = BTreeMap::from([
        (SERVICE_NAME_LABEL.to_string(), NAME.to_string()),
        (MANAGED_BY_LABEL.to_string(), MANAGED_BY.to_string()),
    ]);
    labels.insert("k8s-app".into(), "kube-dns".into());
    let port = |name: &str, protocol: &str| EndpointPort {
        name: Some(name.into()),
        port: Some(port.into()),
        protocol: Some(protocol.into()),
        ..EndpointPort::default()
    };
    EndpointSlice {
        metadata: ObjectMeta {
            name: Some(slice_name(node)),
            namespace: Some(NAMESPACE.into()),
            labels: Some(labels),
            owner_references: Some(vec![OwnerReference {
                api_version: "v1".into(),
                kind: "Node".into(),
                name: node.into(),
                uid: node_uid.into(),
                ..OwnerReference::default()
            }]),
            ..ObjectMeta::default()
        },
        address_type: if addr.is_ipv4() { "IPv4" } else { "IPv6" }.into(),
        endpoints: vec![Endpoint {
            addresses: vec![addr.to_string()],
            conditions: Some(EndpointConditions {
                ready: Some(ready),
                serving: Some(ready),
                terminating: Some(false),
            }),
            node_name: Some(node.into()),
            ..Endpoint::default()
        }],
        ports: Some(vec![port("dns", "UDP"), port("dns-tcp", "TCP")]),
    }
}

/// Publishes (creates or replaces) `node`'s slice.
pub async fn publish_node(
    client: &kube::Client,
    node: &str,
    node_uid: &str,
    addr: IpAddr,
    port: u16,
) -> Result<EndpointSlice> {
    let api: Api<EndpointSlice> = Api::namespaced(client.clone(), NAMESPACE);
    let mut want = node_slice(node, node_uid, addr, port, true);
    let name = slice_name(node);
    loop {
        match api.get_opt(&name).await? {
            None => match api.create(&PostParams::default(), &want).await {
                Err(kube::Error::Api(e)) if e.code == 409 => continue,
                r => return Ok(r?),
            },
            Some(have) => {
                want.metadata.resource_version = have.metadata.resource_version;
                match api.replace(&name, &PostParams::default(), &want).await {
                    Err(kube::Error::Api(e)) if e.code == 409 => continue,
                    r => return Ok(r?),
                }
            }
        }
    }
}

/// Removes `node`'s slice (when its server stops); absent is fine.
pub async fn withdraw_node(client: &kube::Client, node: &str) -> Result<()> {
    let api: Api<EndpointSlice> = Api::namespaced(client.clone(), NAMESPACE);
    match api
        .delete(&slice_name(node), &DeleteParams::default())
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(e.into()),
    }
}
