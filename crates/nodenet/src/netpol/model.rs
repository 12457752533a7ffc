//! NetworkPolicy semantics, without I/O: Pods, Namespaces and NetworkPolicies reduced to
//! what enforcement needs, and [`compile`], which turns them into the allow-lists of this
//! node's pods.
//!
//! The rules (`networking.k8s.io/v1`): a pod is isolated for ingress (egress) once a policy
//! of its namespace selects it and lists `Ingress` (`Egress`) in `policyTypes` — which
//! defaults to `Ingress`, plus `Egress` when the policy has egress rules. What an isolated
//! pod may receive (send) is the union of every selecting policy's rules; a rule allows a
//! peer (any peer when `from`/`to` is empty) on a port (any port when `ports` is empty). A
//! peer is pods by `podSelector` in the policy's namespace, all pods of namespaces by
//! `namespaceSelector`, the pods matching both when one peer has both, or an `ipBlock`
//! minus its `except`s. A named port is resolved against the destination pod's container
//! ports: for ingress the selected pod's, for egress each peer pod's (a named port never
//! matches an `ipBlock`). `endPort` makes a port a range.
//!
//! A rule's peers depend only on the policy, so they are computed once per policy rule and
//! shared by every pod the policy selects.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;

use apimachinery::field::Path;
use apimachinery::labels::{Selector, label_selector_from_json};
use ipnet::Ipv4Net;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::api::networking::v1::{
    NetworkPolicy, NetworkPolicyIngressRule, NetworkPolicyPeer, NetworkPolicyPort,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::proxy::names::hash_and_truncate;
use crate::proxy::service::Protocol;

/// The label every namespace carries with its own name.
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// A container port with a name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamedPort {
    pub name: String,
    pub protocol: Protocol,
    pub port: u16,
}

/// A pod as policies see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodInfo {
    pub namespace: String,
    pub name: String,
    pub labels: BTreeMap<String, String>,
    /// The pod's IPv4 address; none until it has one, and none for host-network or
    /// finished pods (their address is the node's, or someone else's soon).
    pub ip: Option<Ipv4Addr>,
    pub node: Option<String>,
    pub ports: Vec<NamedPort>,
}

impl PodInfo {
    pub fn from_pod(p: &Pod) -> PodInfo {
        let spec = p.spec.as_ref();
        let status = p.status.as_ref();
        let host_network = spec.and_then(|s| s.host_network).unwrap_or(false);
        let finished = matches!(
            status.and_then(|s| s.phase.as_deref()),
            Some("Succeeded" | "Failed")
        );
        let ip = status
            .into_iter()
            .flat_map(|s| {
                s.pod_ips
                    .iter()
                    .flatten()
                    .map(|i| i.ip.clone())
                    .chain(s.pod_ip.clone())
            })
            .filter_map(|i| i.parse::<Ipv4Addr>().ok())
            .next()
            .filter(|_| !host_network && !finished);
        let ports = spec
            .into_iter()
            .flat_map(|s| {
                s.containers
                    .iter()
                    .chain(s.init_containers.iter().flatten())
            })
            .flat_map(|c| c.ports.iter().flatten())
            .filter_map(|p| {
                Some(NamedPort {
                    name: p.name.clone()?,
                    protocol: Protocol::parse(p.protocol.as_deref())?,
                    port: u16::try_from(p.container_port).ok()?,
                })
            })
            .collect();
        PodInfo {
            namespace: p.metadata.namespace.clone().unwrap_or_default(),
            name: p.metadata.name.clone().unwrap_or_default(),
            labels: p.metadata.labels.clone().unwrap_or_default(),
            ip,
            node: spec.and_then(|s| s.node_name.clone()),
            ports,
        }
    }

    fn named_port(&self, name: &str, protocol: Protocol) -> Option<u16> {
        self.ports
            .iter()
            .find(|p| p.name == name && p.protocol == protocol)
            .map(|p| p.port)
    }
}

/// A namespace's labels (with its name label, which the API server always sets).
pub fn namespace_labels(ns: &Namespace) -> BTreeMap<String, String> {
    let mut l = ns.metadata.labels.clone().unwrap_or_default();
    if let Some(n) = &ns.metadata.name {
        l.entry(NAMESPACE_NAME_LABEL.into()).or_insert(n.clone());
    }
    l
}

/// Which namespaces a pod peer looks in.
#[derive(Debug, Clone)]
pub enum Namespaces {
    /// The policy's own.
    Same,
    Matching(Selector),
}

/// A peer of a rule.
#[derive(Debug, Clone)]
pub enum Peer {
    Pods {
        namespaces: Namespaces,
        pods: Selector,
    },
    Block {
        cidr: Ipv4Net,
        except: Vec<Ipv4Net>,
    },
}

/// A port of a rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PortRef {
    /// Every port of the protocol.
    All,
    Range(u16, u16),
    Named(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortSpec {
    pub protocol: Protocol,
    pub port: PortRef,
}

/// One ingress or egress rule.
#[derive(Debug, Clone)]
pub struct Rule {
    /// `None`: every peer.
    pub peers: Option<Vec<Peer>>,
    /// `None`: every port.
    pub ports: Option<Vec<PortSpec>>,
}

/// A NetworkPolicy reduced.
#[derive(Debug, Clone)]
pub struct Policy {
    pub namespace: String,
    pub name: String,
    pub selector: Selector,
    /// The ingress rules when the policy isolates for ingress.
    pub ingress: Option<Vec<Rule>>,
    pub egress: Option<Vec<Rule>>,
}

fn selector(s: Option<&LabelSelector>, everything_if_absent: bool) -> Selector {
    let Some(s) = s else {
        return if everything_if_absent {
            Selector::everything()
        } else {
            Selector::nothing()
        };
    };
    let json = serde_json::to_value(s).unwrap_or_default();
    label_selector_from_json(&json, &Path::new("selector")).unwrap_or_else(|e| {
        tracing::warn!(errors = ?e.iter().map(|e| e.message()).collect::<Vec<_>>(), "an invalid label selector matches nothing");
        Selector::nothing()
    })
}

fn peer(p: &NetworkPolicyPeer) -> Option<Peer> {
    if let Some(b) = &p.ip_block {
        let cidr = b.cidr.parse::<Ipv4Net>().ok()?.trunc();
        let except = b
            .except
            .iter()
            .flatten()
            .filter_map(|e| e.parse::<Ipv4Net>().ok())
            .map(|e| e.trunc())
            .collect();
        return Some(Peer::Block { cidr, except });
    }
    let namespaces = match &p.namespace_selector {
        Some(ns) => Namespaces::Matching(selector(Some(ns), true)),
        None => Namespaces::Same,
    };
    if p.namespace_selector.is_none() && p.pod_selector.is_none() {
        return None;
    }
    Some(Peer::Pods {
        namespaces,
        pods: selector(p.pod_selector.as_ref(), true),
    })
}

fn port(p: &NetworkPolicyPort) -> Option<PortSpec> {
    let protocol = Protocol::parse(p.protocol.as_deref())?;
    let port = match &p.port {
        None => PortRef::All,
        Some(IntOrString::Int(n)) => {
            let from = u16::try_from(*n).ok()?;
            let to = p
                .end_port
                .and_then(|e| u16::try_from(e).ok())
                .unwrap_or(from)
                .max(from);
            PortRef::Range(from, to)
        }
        Some(IntOrString::String(s)) => match s.parse::<u16>() {
            Ok(n) => PortRef::Range(n, n),
            Err(_) => PortRef::Named(s.clone()),
        },
    };
    Some(PortSpec { protocol, port })
}

fn rule(peers: Option<&Vec<NetworkPolicyPeer>>, ports: Option<&Vec<NetworkPolicyPort>>) -> Rule {
    Rule {
        peers: peers
            .filter(|p| !p.is_empty())
            .map(|p| p.iter().filter_map(peer).collect()),
        ports: ports
            .filter(|p| !p.is_empty())
            .map(|p| p.iter().filter_map(port).collect()),
    }
}

impl Policy {
    pub fn from_policy(np: &NetworkPolicy) -> Policy {
        let spec = np.spec.clone().unwrap_or_default();
        let has_egress = spec.egress.as_ref().is_some_and(|e| !e.is_empty());
        let types: Vec<String> = match &spec.policy_types {
            Some(t) if !t.is_empty() => t.clone(),
            _ if has_egress => vec!["Ingress".into(), "Egress".into()],
            _ => vec!["Ingress".into()],
        };
        let ingress = types.iter().any(|t| t == "Ingress").then(|| {
            spec.ingress
                .iter()
                .flatten()
                .map(|r: &NetworkPolicyIngressRule| rule(r.from.as_ref(), r.ports.as_ref()))
                .collect()
        });
        let egress = types.iter().any(|t| t == "Egress").then(|| {
            spec.egress
                .iter()
                .flatten()
                .map(|r| rule(r.to.as_ref(), r.ports.as_ref()))
                .collect()
        });
        Policy {
            namespace: np.metadata.namespace.clone().unwrap_or_default(),
            name: np.metadata.name.clone().unwrap_or_default(),
            selector: selector(spec.pod_selector.as_ref(), true),
            ingress,
            egress,
        }
    }

    pub fn selects(&self, pod: &PodInfo) -> bool {
        pod.namespace == self.namespace && self.selector.matches(&pod.labels)
    }
}

/// Traffic direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Direction {
    Ingress,
    Egress,
}

impl Direction {
    pub fn name(self) -> &'static str {
        match self {
            Direction::Ingress => "ingress",
            Direction::Egress => "egress",
        }
    }

    /// The address field naming the peer.
    fn peer_field(self) -> &'static str {
        match self {
            Direction::Ingress => "ip saddr",
            Direction::Egress => "ip daddr",
        }
    }
}

/// Everything the node's table must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Desired {
    /// Peer address sets (`ipv4_addr`, intervals): name → elements.
    pub peer_sets: BTreeMap<String, BTreeSet<String>>,
    /// Named-port sets (`ipv4_addr . inet_proto . inet_service`): name → elements.
    pub port_sets: BTreeMap<String, BTreeSet<String>>,
    /// Per-pod chains: name → rules.
    pub chains: BTreeMap<String, Vec<String>>,
    /// Isolated pods' addresses → their chains.
    pub ingress: BTreeMap<Ipv4Addr, String>,
    pub egress: BTreeMap<Ipv4Addr, String>,
}

/// The cluster's objects, as the controller holds them.
#[derive(Debug, Default)]
pub struct Cluster {
    pub pods: BTreeMap<(String, String), PodInfo>,
    pub namespaces: BTreeMap<String, BTreeMap<String, String>>,
    pub policies: BTreeMap<(String, String), Policy>,
}

/// Non-overlapping address ranges in canonical form.
fn ranges(mut v: Vec<(u32, u32)>) -> BTreeSet<String> {
    v.sort_unstable();
    let mut merged: Vec<(u32, u32)> = Vec::new();
    for (a, b) in v {
        match merged.last_mut() {
            Some(last) if a <= last.1.saturating_add(1) => last.1 = last.1.max(b),
            _ => merged.push((a, b)),
        }
    }
    merged
        .into_iter()
        .map(|(a, b)| {
            if a == b {
                Ipv4Addr::from(a).to_string()
            } else {
                format!("{}-{}", Ipv4Addr::from(a), Ipv4Addr::from(b))
            }
        })
        .collect()
}

fn subtract(range: (u32, u32), holes: &[(u32, u32)]) -> Vec<(u32, u32)> {
    let mut out = vec![range];
    for &(ha, hb) in holes {
        let mut next = Vec::new();
        for (a, b) in out {
            if hb < a || ha > b {
                next.push((a, b));
                continue;
            }
            if ha > a {
                next.push((a, ha - 1));
            }
            if hb < b {
                next.push((hb + 1, b));
            }
        }
        out = next;
    }
    out
}

fn net_range(n: &Ipv4Net) -> (u32, u32) {
    (u32::from(n.network()), u32::from(n.broadcast()))
}

impl Cluster {
    fn namespace_matches(&self, ns: &str, which: &Namespaces, policy_ns: &str) -> bool {
        match which {
            Namespaces::Same => ns == policy_ns,
            Namespaces::Matching(sel) => self
                .namespaces
                .get(ns)
                .is_some_and(|labels| sel.matches(labels)),
        }
    }

    /// The pods a rule's pod peers match.
    fn peer_pods<'a>(
        &'a self,
        policy: &'a Policy,
        peers: &'a [Peer],
    ) -> impl Iterator<Item = &'a PodInfo> {
        self.pods.values().filter(move |p| {
            p.ip.is_some()
                && peers.iter().any(|peer| match peer {
                    Peer::Pods { namespaces, pods } => {
                        self.namespace_matches(&p.namespace, namespaces, &policy.namespace)
                            && pods.matches(&p.labels)
                    }
                    Peer::Block { .. } => false,
                })
        })
    }

    fn peer_set(&self, policy: &Policy, peers: &[Peer]) -> BTreeSet<String> {
        let mut v: Vec<(u32, u32)> = self
            .peer_pods(policy, peers)
            .filter_map(|p| p.ip)
            .map(|ip| (u32::from(ip), u32::from(ip)))
            .collect();
        for peer in peers {
            if let Peer::Block { cidr, except } = peer {
                let holes: Vec<(u32, u32)> = except.iter().map(net_range).collect();
                v.extend(subtract(net_range(cidr), &holes));
            }
        }
        ranges(v)
    }
}

/// The table's contents for the pods of `node`.
pub fn compile(cluster: &Cluster, node: &str) -> Desired {
    let mut d = Desired::default();
    let local: Vec<&PodInfo> = cluster
        .pods
        .values()
        .filter(|p| p.node.as_deref() == Some(node) && p.ip.is_some())
        .collect();
    for pod in local {
        let Some(ip) = pod.ip else { continue };
        for dir in [Direction::Ingress, Direction::Egress] {
            let selecting: Vec<&Policy> = cluster
                .policies
                .values()
                .filter(|p| p.selects(pod))
                .filter(|p| match dir {
                    Direction::Ingress => p.ingress.is_some(),
                    Direction::Egress => p.egress.is_some(),
                })
                .collect();
            if selecting.is_empty() {
                continue;
            }
            let chain = format!(
                "{}-{}",
                dir.name(),
                hash_and_truncate(&format!("{}/{}", pod.namespace, pod.name))
            );
            let mut rules = Vec::new();
            for policy in selecting {
                let list = match dir {
                    Direction::Ingress => policy.ingress.as_deref(),
                    Direction::Egress => policy.egress.as_deref(),
                }
                .unwrap_or_default();
                for (i, rule) in list.iter().enumerate() {
                    rules.extend(rule_lines(cluster, &mut d, policy, dir, i, rule, pod));
                }
            }
            rules.push("drop".into());
            d.chains.insert(chain.clone(), rules);
            match dir {
                Direction::Ingress => d.ingress.insert(ip, chain),
                Direction::Egress => d.egress.insert(ip, chain),
            };
        }
    }
    d
}

/// The rules (each ending in `return`: allowed) of rule `i` of `policy` for `pod`.
fn rule_lines(
    cluster: &Cluster,
    d: &mut Desired,
    policy: &Policy,
    dir: Direction,
    i: usize,
    rule: &Rule,
    pod: &PodInfo,
) -> Vec<String> {
    let base = hash_and_truncate(&format!(
        "{}/{}/{}/{i}",
        policy.namespace,
        policy.name,
        dir.name()
    ));
    let peer_match = rule.peers.as_ref().map(|peers| {
        let name = format!("peers-{base}");
        d.peer_sets
            .entry(name.clone())
            .or_insert_with(|| cluster.peer_set(policy, peers));
        format!("{} @{name} ", dir.peer_field())
    });
    let pm = peer_match.clone().unwrap_or_default();
    let Some(ports) = &rule.ports else {
        return vec![format!("{pm}return")];
    };
    let mut out = Vec::new();
    // Numeric ports (and, for ingress, named ports of the pod itself), by protocol.
    let mut by_proto: BTreeMap<Protocol, (bool, Vec<(u16, u16)>)> = BTreeMap::new();
    let mut named_egress = false;
    for p in ports {
        let entry = by_proto.entry(p.protocol).or_default();
        match &p.port {
            PortRef::All => entry.0 = true,
            PortRef::Range(a, b) => entry.1.push((*a, *b)),
            PortRef::Named(n) => match dir {
                Direction::Ingress => {
                    if let Some(port) = pod.named_port(n, p.protocol) {
                        entry.1.push((port, port));
                    }
                }
                Direction::Egress => named_egress = true,
            },
        }
    }
    for (proto, (all, list)) in by_proto {
        let proto = proto.nft();
        if all {
            out.push(format!("{pm}meta l4proto {proto} return"));
        } else if !list.is_empty() {
            let items: Vec<String> = list
                .iter()
                .map(|(a, b)| {
                    if a == b {
                        a.to_string()
                    } else {
                        format!("{a}-{b}")
                    }
                })
                .collect();
            out.push(format!(
                "{pm}meta l4proto {proto} th dport {{ {} }} return",
                items.join(", ")
            ));
        }
    }
    if named_egress {
        let name = format!("ports-{base}");
        let mut elements = BTreeSet::new();
        let all_peers;
        let pods: Box<dyn Iterator<Item = &PodInfo>> = match &rule.peers {
            Some(peers) => Box::new(cluster.peer_pods(policy, peers)),
            None => {
                all_peers = cluster.pods.values().filter(|p| p.ip.is_some());
                Box::new(all_peers)
            }
        };
        for q in pods {
            let Some(qip) = q.ip else { continue };
            for p in ports {
                if let PortRef::Named(n) = &p.port
                    && let Some(port) = q.named_port(n, p.protocol)
                {
                    elements.insert(format!("{qip} . {} . {port}", p.protocol.nft()));
                }
            }
        }
        d.port_sets.insert(name.clone(), elements);
        out.push(format!("ip daddr . meta l4proto . th dport @{name} return"));
    }
    out
}

#[cfg(test)]
#[path = "model_tests.rs"]
mod tests;
