//! What the scheduler knows about a pod: the scheduling-relevant parts of a `v1.Pod`, parsed
//! once (upstream `PodInfo`).
//!
//! Requests become integers, selectors and affinity terms are parsed, host ports and claims
//! are listed. The cache keeps one of these per assigned pod instead of the whole object, so
//! memory per pod stays small at 100,000 pods.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use k8s_openapi::api::core::v1 as core;
use k8s_openapi::jiff::Timestamp;

use crate::resource::{NonZero, Resource, pod_requests};
use crate::selector::{LabelSelector, Labels, NodeSelector};

/// The scheduler a pod must name (or leave empty) to be scheduled here.
pub const DEFAULT_SCHEDULER: &str = "default-scheduler";

/// Where a pod lives: cluster, namespace and name.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PodKey {
    pub cluster: Arc<str>,
    pub namespace: String,
    pub name: String,
}

impl fmt::Display for PodKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}/{}", self.cluster, self.namespace, self.name)
    }
}

/// A pod (anti-)affinity term, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AffinityTerm {
    /// Namespaces named by the term (the pod's own when neither namespaces nor a selector is
    /// given).
    pub namespaces: Vec<String>,
    /// The namespace selector, when given.
    pub namespace_selector: Option<LabelSelector>,
    pub selector: LabelSelector,
    pub topology_key: String,
    /// The weight of a preferred term (1 for required ones).
    pub weight: i64,
}

impl AffinityTerm {
    fn parse(owner_ns: &str, t: &core::PodAffinityTerm, weight: i64) -> Self {
        let namespaces = t.namespaces.clone().unwrap_or_default();
        let namespace_selector = t
            .namespace_selector
            .as_ref()
            .map(|s| LabelSelector::parse(Some(s)));
        AffinityTerm {
            namespaces: if namespaces.is_empty() && namespace_selector.is_none() {
                vec![owner_ns.to_string()]
            } else {
                namespaces
            },
            namespace_selector,
            selector: LabelSelector::parse(t.label_selector.as_ref()),
            topology_key: t.topology_key.clone(),
            weight,
        }
    }

    /// Whether `pod` (whose namespace has `ns_labels`) is selected by the term.
    pub fn matches(&self, pod: &PodInfo, ns_labels: Option<&Labels>) -> bool {
        let in_namespace = self.namespaces.contains(&pod.key.namespace)
            || self
                .namespace_selector
                .as_ref()
                .is_some_and(|s| ns_labels.is_some_and(|l| s.matches(l)));
        in_namespace && self.selector.matches(&pod.labels)
    }
}

/// A pod's inter-pod affinity, parsed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodAffinity {
    pub required: Vec<AffinityTerm>,
    pub required_anti: Vec<AffinityTerm>,
    pub preferred: Vec<AffinityTerm>,
    pub preferred_anti: Vec<AffinityTerm>,
}

/// A topology spread constraint, parsed (`matchLabelKeys` merged into the selector).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpreadConstraint {
    pub max_skew: i64,
    pub topology_key: String,
    /// `whenUnsatisfiable: DoNotSchedule` (a filter); otherwise `ScheduleAnyway` (a score).
    pub hard: bool,
    pub selector: LabelSelector,
    pub min_domains: i64,
    /// `nodeAffinityPolicy: Honor` (the default).
    pub honor_node_affinity: bool,
    /// `nodeTaintsPolicy: Honor` (default `Ignore`).
    pub honor_node_taints: bool,
}

/// A host port a container asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPort {
    pub ip: String,
    pub protocol: String,
    pub port: i32,
}

impl HostPort {
    /// Whether two host ports collide (same protocol and port, and the same IP or a wildcard).
    pub fn conflicts(&self, other: &HostPort) -> bool {
        self.port == other.port
            && self.protocol == other.protocol
            && (self.ip == other.ip || self.ip == "0.0.0.0" || other.ip == "0.0.0.0")
    }
}

/// The scheduling-relevant view of a pod.
#[derive(Debug, Clone, PartialEq)]
pub struct PodInfo {
    pub key: PodKey,
    pub uid: String,
    pub resource_version: String,
    pub labels: Labels,
    pub scheduler_name: String,
    pub node_name: String,
    pub nominated_node_name: String,
    pub priority: i32,
    pub preempt_never: bool,
    /// `spec.priorityClassName`, and whether the priority still has to come from it.
    pub priority_class: String,
    pub priority_unresolved: bool,
    /// `spec.preemptionPolicy`, when set.
    preemption_policy: Option<String>,
    pub gated: bool,
    pub terminating: bool,
    pub terminal: bool,
    /// The pod carries `DisruptionTarget=True` with reason `PreemptionByScheduler`.
    pub preempted: bool,
    pub requests: Resource,
    pub non_zero: NonZero,
    pub node_selector: Labels,
    pub required_node_affinity: Option<NodeSelector>,
    /// Preferred node affinity terms with their weights.
    pub preferred_node_affinity: Vec<(i64, crate::selector::NodeSelectorTerm)>,
    pub tolerations: Vec<core::Toleration>,
    pub host_ports: Vec<HostPort>,
    pub spread: Vec<SpreadConstraint>,
    pub affinity: Option<Box<PodAffinity>>,
    pub claims: Vec<String>,
    /// When the pod started (or was created): older pods are more important victims.
    pub start_time: Option<Timestamp>,
    /// The current `PodScheduled` condition: status, reason, message.
    pub scheduled_condition: Option<(String, String, String)>,
}

/// How a pod's priority is resolved when `spec.priority` is unset.
pub trait PriorityLookup {
    /// The value and preemption policy of a PriorityClass (`None`: no such class), or of the
    /// global default class when `name` is empty.
    fn priority_class(&self, name: &str) -> Option<(i32, Option<String>)>;
}

impl PodInfo {
    /// Parses a pod of `cluster`. A pod without `spec.priority` gets its priority from its
    /// PriorityClass in [`PodInfo::resolve_priority`].
    pub fn new(cluster: &Arc<str>, pod: &core::Pod) -> PodInfo {
        let md = &pod.metadata;
        let empty = core::PodSpec::default();
        let spec = pod.spec.as_ref().unwrap_or(&empty);
        let status = pod.status.as_ref();
        let namespace = md.namespace.clone().unwrap_or_default();
        let name = md.name.clone().unwrap_or_default();
        let labels = md.labels.clone().unwrap_or_default();
        let policy = spec.preemption_policy.clone();
        let (requests, non_zero) = pod_requests(spec);
        let affinity = spec.affinity.as_ref();
        let node_affinity = affinity.and_then(|a| a.node_affinity.as_ref());
        let pod_affinity = parse_pod_affinity(&namespace, affinity);
        let conditions = status.and_then(|s| s.conditions.as_ref());
        let condition = |ty: &str| conditions.and_then(|cs| cs.iter().find(|c| c.type_ == ty));
        PodInfo {
            key: PodKey {
                cluster: cluster.clone(),
                namespace: namespace.clone(),
                name: name.clone(),
            },
            uid: md.uid.clone().unwrap_or_default(),
            resource_version: md.resource_version.clone().unwrap_or_default(),
            scheduler_name: spec.scheduler_name.clone().unwrap_or_default(),
            node_name: spec.node_name.clone().unwrap_or_default(),
            nominated_node_name: status
                .and_then(|s| s.nominated_node_name.clone())
                .unwrap_or_default(),
            priority: spec.priority.unwrap_or(0),
            preempt_never: policy.as_deref() == Some("Never"),
            priority_class: spec.priority_class_name.clone().unwrap_or_default(),
            priority_unresolved: spec.priority.is_none(),
            preemption_policy: policy,
            gated: spec
                .scheduling_gates
                .as_ref()
                .is_some_and(|g| !g.is_empty()),
            terminating: md.deletion_timestamp.is_some(),
            terminal: matches!(
                status.and_then(|s| s.phase.as_deref()),
                Some("Succeeded" | "Failed")
            ),
            preempted: condition("DisruptionTarget").is_some_and(|c| {
                c.status == "True" && c.reason.as_deref() == Some("PreemptionByScheduler")
            }),
            requests,
            non_zero,
            node_selector: spec.node_selector.clone().unwrap_or_default(),
            required_node_affinity: node_affinity
                .and_then(|n| {
                    n.required_during_scheduling_ignored_during_execution
                        .as_ref()
                })
                .map(NodeSelector::parse),
            preferred_node_affinity: node_affinity
                .and_then(|n| {
                    n.preferred_during_scheduling_ignored_during_execution
                        .as_ref()
                })
                .map(|ts| {
                    ts.iter()
                        .map(|t| {
                            (
                                i64::from(t.weight),
                                crate::selector::NodeSelectorTerm::parse(&t.preference),
                            )
                        })
                        .collect()
                })
                .unwrap_or_default(),
            tolerations: spec.tolerations.clone().unwrap_or_default(),
            host_ports: host_ports(spec),
            spread: spread_constraints(spec, &labels),
            affinity: pod_affinity.map(Box::new),
            claims: claims(&name, spec),
            start_time: status
                .and_then(|s| s.start_time.as_ref())
                .or(md.creation_timestamp.as_ref())
                .map(|t| t.0),
            scheduled_condition: condition("PodScheduled").map(|c| {
                (
                    c.status.clone(),
                    c.reason.clone().unwrap_or_default(),
                    c.message.clone().unwrap_or_default(),
                )
            }),
            labels,
        }
    }

    /// Takes the priority (and default preemption policy) from the pod's PriorityClass, or the
    /// global default class, when the pod has no `spec.priority` (the Priority admission
    /// plugin's job upstream).
    pub fn resolve_priority(&mut self, classes: &dyn PriorityLookup) {
        if !self.priority_unresolved {
            return;
        }
        let (value, class_policy) = classes
            .priority_class(&self.priority_class)
            .or_else(|| builtin_priority(&self.priority_class).map(|v| (v, None)))
            .unwrap_or((0, None));
        self.priority = value;
        let policy = self.preemption_policy.clone().or(class_policy);
        self.preempt_never = policy.as_deref() == Some("Never");
    }

    /// Whether this scheduler is responsible for the pod (upstream `responsibleForPod`).
    pub fn ours(&self) -> bool {
        self.scheduler_name.is_empty() || self.scheduler_name == DEFAULT_SCHEDULER
    }

    /// Whether the pod has pod affinity or anti-affinity of any kind.
    pub fn has_affinity(&self) -> bool {
        self.affinity.is_some()
    }

    /// Whether the pod has required anti-affinity terms.
    pub fn has_required_anti_affinity(&self) -> bool {
        self.affinity
            .as_ref()
            .is_some_and(|a| !a.required_anti.is_empty())
    }

    /// Whether an update changed what scheduling looks at (not status, version, nomination).
    pub fn same_scheduling_inputs(&self, other: &PodInfo) -> bool {
        self.labels == other.labels
            && self.priority == other.priority
            && self.gated == other.gated
            && self.requests == other.requests
            && self.node_selector == other.node_selector
            && self.required_node_affinity == other.required_node_affinity
            && self.preferred_node_affinity == other.preferred_node_affinity
            && self.tolerations == other.tolerations
            && self.host_ports == other.host_ports
            && self.spread == other.spread
            && self.affinity == other.affinity
            && self.claims == other.claims
    }
}

/// The values of the system classes every upstream cluster has, when no object says
/// otherwise.
fn builtin_priority(class: &str) -> Option<i32> {
    match class {
        "system-cluster-critical" => Some(2_000_000_000),
        "system-node-critical" => Some(2_000_001_000),
        _ => None,
    }
}

fn parse_pod_affinity(ns: &str, affinity: Option<&core::Affinity>) -> Option<PodAffinity> {
    let a = affinity?;
    let aff = a.pod_affinity.as_ref();
    let anti = a.pod_anti_affinity.as_ref();
    let required = |terms: Option<&Vec<core::PodAffinityTerm>>| -> Vec<AffinityTerm> {
        terms
            .into_iter()
            .flatten()
            .map(|t| AffinityTerm::parse(ns, t, 1))
            .collect()
    };
    let preferred = |terms: Option<&Vec<core::WeightedPodAffinityTerm>>| -> Vec<AffinityTerm> {
        terms
            .into_iter()
            .flatten()
            .map(|t| AffinityTerm::parse(ns, &t.pod_affinity_term, i64::from(t.weight)))
            .collect()
    };
    let p = PodAffinity {
        required: required(aff.and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .as_ref()
        })),
        required_anti: required(anti.and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .as_ref()
        })),
        preferred: preferred(aff.and_then(|a| {
            a.preferred_during_scheduling_ignored_during_execution
                .as_ref()
        })),
        preferred_anti: preferred(anti.and_then(|a| {
            a.preferred_during_scheduling_ignored_during_execution
                .as_ref()
        })),
    };
    let empty = p.required.is_empty()
        && p.required_anti.is_empty()
        && p.preferred.is_empty()
        && p.preferred_anti.is_empty();
    (!empty).then_some(p)
}

fn host_ports(spec: &core::PodSpec) -> Vec<HostPort> {
    let sidecars = spec
        .init_containers
        .iter()
        .flatten()
        .filter(|c| c.restart_policy.as_deref() == Some("Always"));
    spec.containers
        .iter()
        .chain(sidecars)
        .flat_map(|c| c.ports.iter().flatten())
        .filter_map(|p| {
            let port = p.host_port.filter(|hp| *hp > 0)?;
            Some(HostPort {
                ip: p
                    .host_ip
                    .clone()
                    .filter(|ip| !ip.is_empty())
                    .unwrap_or_else(|| "0.0.0.0".into()),
                protocol: p.protocol.clone().unwrap_or_else(|| "TCP".into()),
                port,
            })
        })
        .collect()
}

fn spread_constraints(
    spec: &core::PodSpec,
    labels: &BTreeMap<String, String>,
) -> Vec<SpreadConstraint> {
    spec.topology_spread_constraints
        .iter()
        .flatten()
        .map(|c| {
            let mut selector = LabelSelector::parse(c.label_selector.as_ref());
            if c.label_selector.is_some() {
                for key in c.match_label_keys.iter().flatten() {
                    if let Some(v) = labels.get(key) {
                        selector.require(key, v);
                    }
                }
            }
            SpreadConstraint {
                max_skew: i64::from(c.max_skew),
                topology_key: c.topology_key.clone(),
                hard: c.when_unsatisfiable == "DoNotSchedule",
                selector,
                min_domains: i64::from(c.min_domains.unwrap_or(1)),
                honor_node_affinity: c.node_affinity_policy.as_deref() != Some("Ignore"),
                honor_node_taints: c.node_taints_policy.as_deref() == Some("Honor"),
            }
        })
        .collect()
}

fn claims(pod_name: &str, spec: &core::PodSpec) -> Vec<String> {
    spec.volumes
        .iter()
        .flatten()
        .filter_map(|v| {
            if let Some(c) = &v.persistent_volume_claim {
                Some(c.claim_name.clone())
            } else {
                v.ephemeral
                    .as_ref()
                    .map(|_| format!("{pod_name}-{}", v.name))
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    struct Classes;
    impl PriorityLookup for Classes {
        fn priority_class(&self, name: &str) -> Option<(i32, Option<String>)> {
            (name == "high").then(|| (1000, Some("Never".to_string())))
        }
    }

    fn pod(v: serde_json::Value) -> PodInfo {
        let mut p = PodInfo::new(&Arc::from("a"), &serde_json::from_value(v).unwrap());
        p.resolve_priority(&Classes);
        p
    }

    #[test]
    fn priority_comes_from_the_class_when_the_pod_has_none() {
        let p = pod(
            json!({"metadata": {"name": "p", "namespace": "d"}, "spec": {
            "priorityClassName": "high", "containers": [{"name": "c"}]}}),
        );
        assert_eq!(p.priority, 1000);
        assert!(p.preempt_never);
        let q = pod(
            json!({"metadata": {"name": "q", "namespace": "d"}, "spec": {
            "priorityClassName": "high", "priority": 7, "containers": [{"name": "c"}]}}),
        );
        assert_eq!(q.priority, 7);
        assert!(!q.preempt_never);
        let critical = pod(
            json!({"metadata": {"name": "c", "namespace": "d"}, "spec": {
            "priorityClassName": "system-node-critical", "containers": [{"name": "c"}]}}),
        );
        assert_eq!(critical.priority, 2_000_001_000);
    }

    #[test]
    fn host_ports_default_to_the_wildcard_ip_and_tcp() {
        let p = pod(
            json!({"metadata": {"name": "p", "namespace": "d"}, "spec": {"containers": [
                {"name": "c", "ports": [{"containerPort": 80, "hostPort": 8080}, {"containerPort": 9}]}
            ]}}),
        );
        assert_eq!(
            p.host_ports,
            vec![HostPort {
                ip: "0.0.0.0".into(),
                protocol: "TCP".into(),
                port: 8080
            }]
        );
        let other = HostPort {
            ip: "10.0.0.1".into(),
            protocol: "TCP".into(),
            port: 8080,
        };
        assert!(p.host_ports[0].conflicts(&other));
        let udp = HostPort {
            ip: "10.0.0.1".into(),
            protocol: "UDP".into(),
            port: 8080,
        };
        assert!(!other.conflicts(&udp));
    }

    #[test]
    fn affinity_terms_default_to_the_pods_namespace_and_claims_include_ephemeral_volumes() {
        let p = pod(
            json!({"metadata": {"name": "p", "namespace": "d"}, "spec": {
                "containers": [{"name": "c"}],
                "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}
                ]}},
                "volumes": [
                    {"name": "data", "persistentVolumeClaim": {"claimName": "pvc1"}},
                    {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}
                ]
            }}),
        );
        let a = p.affinity.as_ref().unwrap();
        assert_eq!(a.required_anti[0].namespaces, vec!["d".to_string()]);
        assert!(p.has_required_anti_affinity());
        assert_eq!(p.claims, vec!["pvc1".to_string(), "p-scratch".to_string()]);
    }
}
