//! Label and node selectors and tolerations, parsed once and matched many times: the one
//! implementation the scheduler, the DaemonSet controller, the node lifecycle controller and
//! the workload controllers share (upstream `k8s.io/component-helpers/scheduling/corev1` and
//! `metav1.LabelSelectorAsSelector`).
//!
//! [`LabelSelector`] is `metav1.LabelSelector` (matchLabels and In/NotIn/Exists/DoesNotExist
//! expressions) as used by pod affinity terms and topology spread constraints.
//! [`NodeSelector`] is `v1.NodeSelector`: terms ORed, each term's label expressions
//! (In/NotIn/Exists/DoesNotExist/Gt/Lt) and field expressions (`metadata.name` In/NotIn) ANDed;
//! a term with no expressions matches nothing, as upstream. A selector that fails to parse
//! matches nothing (upstream treats parse errors as no match).

use std::collections::BTreeMap;

use apimachinery::field::Path;
use apimachinery::labels::{Operator, Requirement, Selector};
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;

/// Labels of an object.
pub type Labels = BTreeMap<String, String>;

/// One requirement from its API form (upstream `labels.NewRequirement`, key and values
/// validated); `None` when invalid. `Gt`/`Lt` only where `numeric` (node selectors).
fn requirement(key: &str, operator: &str, values: &[String], numeric: bool) -> Option<Requirement> {
    let op = match operator {
        "In" => Operator::In,
        "NotIn" => Operator::NotIn,
        "Exists" => Operator::Exists,
        "DoesNotExist" => Operator::DoesNotExist,
        "Gt" if numeric => Operator::GreaterThan,
        "Lt" if numeric => Operator::LessThan,
        _ => return None,
    };
    Requirement::new(key, op, values.to_vec(), &Path::new("")).ok()
}

/// A parsed `metav1.LabelSelector` (upstream `LabelSelectorAsSelector`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelSelector(Selector);

impl LabelSelector {
    /// A selector matching everything (an empty selector).
    pub fn everything() -> Self {
        LabelSelector(Selector::everything())
    }

    /// A selector matching nothing (an absent selector where absence means none).
    pub fn nothing() -> Self {
        LabelSelector(Selector::nothing())
    }

    /// Parses a selector; `None` (absent) and an invalid one match nothing.
    pub fn parse(s: Option<&meta::LabelSelector>) -> Self {
        let Some(s) = s else {
            return Self::nothing();
        };
        let mut reqs = Vec::new();
        for (k, v) in s.match_labels.iter().flatten() {
            match requirement(k, "In", std::slice::from_ref(v), false) {
                Some(r) => reqs.push(r),
                None => return Self::nothing(),
            }
        }
        for e in s.match_expressions.iter().flatten() {
            let values = e.values.clone().unwrap_or_default();
            match requirement(&e.key, &e.operator, &values, false) {
                Some(r) => reqs.push(r),
                None => return Self::nothing(),
            }
        }
        LabelSelector(Selector::everything().with_requirements(reqs))
    }

    /// Adds `key In (value)` (matchLabelKeys of topology spread constraints).
    pub fn require(&mut self, key: &str, value: &str) {
        if let Some(r) = requirement(key, "In", &[value.to_string()], false) {
            let sel = std::mem::take(&mut self.0);
            self.0 = sel.with_requirements([r]);
        } else {
            self.0 = Selector::nothing();
        }
    }

    pub fn matches(&self, labels: &Labels) -> bool {
        self.0.matches(labels)
    }

    /// Whether the selector is empty (matches everything).
    pub fn is_everything(&self) -> bool {
        self.0.is_empty()
    }
}

/// One parsed node selector term.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSelectorTerm {
    labels: Vec<Requirement>,
    /// `metadata.name` requirements.
    fields: Vec<Requirement>,
    valid: bool,
}

impl NodeSelectorTerm {
    pub fn parse(t: &core::NodeSelectorTerm) -> Self {
        let mut term = NodeSelectorTerm {
            labels: Vec::new(),
            fields: Vec::new(),
            valid: true,
        };
        for e in t.match_expressions.iter().flatten() {
            let values = e.values.clone().unwrap_or_default();
            match requirement(&e.key, &e.operator, &values, true) {
                Some(r) => term.labels.push(r),
                None => term.valid = false,
            }
        }
        for e in t.match_fields.iter().flatten() {
            let values = e.values.clone().unwrap_or_default();
            let ok_op = matches!(e.operator.as_str(), "In" | "NotIn") && values.len() == 1;
            if ok_op && e.key == "metadata.name" {
                let op = if e.operator == "In" {
                    Operator::In
                } else {
                    Operator::NotIn
                };
                // Node names, not label values: taken as given.
                term.fields
                    .push(Requirement::unchecked("metadata.name", op, values));
            } else {
                term.valid = false;
            }
        }
        term
    }

    /// Whether the term matches a node's labels and name. An empty term matches nothing.
    pub fn matches(&self, labels: &Labels, node_name: &str) -> bool {
        if !self.valid || (self.labels.is_empty() && self.fields.is_empty()) {
            return false;
        }
        self.labels.iter().all(|r| r.matches(labels))
            && self
                .fields
                .iter()
                .all(|r| r.matches(&NodeFields(node_name)))
    }
}

/// A node's selectable fields (`metadata.name`), looked up like labels.
struct NodeFields<'a>(&'a str);

impl apimachinery::labels::Labels for NodeFields<'_> {
    fn label(&self, key: &str) -> Option<&str> {
        (key == "metadata.name").then_some(self.0)
    }
}

/// A parsed `v1.NodeSelector` (terms ORed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSelector {
    terms: Vec<NodeSelectorTerm>,
}

impl NodeSelector {
    pub fn parse(s: &core::NodeSelector) -> Self {
        NodeSelector {
            terms: s
                .node_selector_terms
                .iter()
                .map(NodeSelectorTerm::parse)
                .collect(),
        }
    }

    pub fn matches(&self, labels: &Labels, node_name: &str) -> bool {
        self.terms.iter().any(|t| t.matches(labels, node_name))
    }
}

/// Whether every `key: value` of a pod's `nodeSelector` is among the node's labels.
pub fn map_matches(selector: &Labels, labels: &Labels) -> bool {
    selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

/// Whether a pod spec's `nodeSelector` and required node affinity admit a node (upstream
/// `nodeaffinity.GetRequiredNodeAffinity(pod).Match(node)`).
pub fn node_admits(spec: &core::PodSpec, node_name: &str, labels: &Labels) -> bool {
    let selector_ok = spec
        .node_selector
        .as_ref()
        .is_none_or(|s| map_matches(s, labels));
    selector_ok
        && spec
            .affinity
            .as_ref()
            .and_then(|a| a.node_affinity.as_ref())
            .and_then(|na| {
                na.required_during_scheduling_ignored_during_execution
                    .as_ref()
            })
            .is_none_or(|req| NodeSelector::parse(req).matches(labels, node_name))
}

/// Whether a toleration tolerates a taint (upstream `Toleration.ToleratesTaint`): the effect
/// matches or is empty, the key matches or is empty, and `Exists` tolerates any value while
/// `Equal` (or an empty operator) needs the same value.
pub fn tolerates(t: &core::Toleration, taint: &core::Taint) -> bool {
    let effect = t.effect.as_deref().unwrap_or("");
    if !effect.is_empty() && effect != taint.effect {
        return false;
    }
    let key = t.key.as_deref().unwrap_or("");
    if !key.is_empty() && key != taint.key {
        return false;
    }
    match t.operator.as_deref().unwrap_or("") {
        "Exists" => true,
        "Equal" | "" => t.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or(""),
        _ => false,
    }
}

/// Whether any of the tolerations tolerates the taint (upstream `TolerationsTolerateTaint`).
pub fn tolerated(tolerations: &[core::Toleration], taint: &core::Taint) -> bool {
    tolerations.iter().any(|t| tolerates(t, taint))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labels(v: serde_json::Value) -> Labels {
        serde_json::from_value(v).unwrap()
    }

    fn node_selector(v: serde_json::Value) -> NodeSelector {
        NodeSelector::parse(&serde_json::from_value(v).unwrap())
    }

    #[test]
    fn node_selector_terms_are_ored_and_expressions_anded() {
        let s = node_selector(json!({"nodeSelectorTerms": [
            {"matchExpressions": [
                {"key": "zone", "operator": "In", "values": ["a", "b"]},
                {"key": "gpu", "operator": "DoesNotExist"}
            ]},
            {"matchExpressions": [{"key": "cores", "operator": "Gt", "values": ["8"]}]}
        ]}));
        assert!(s.matches(&labels(json!({"zone": "a"})), "n"));
        assert!(!s.matches(&labels(json!({"zone": "a", "gpu": "1"})), "n"));
        assert!(s.matches(&labels(json!({"cores": "16"})), "n"));
        assert!(!s.matches(&labels(json!({"cores": "8"})), "n"));
        assert!(!s.matches(&labels(json!({"cores": "many"})), "n"));
    }

    #[test]
    fn match_fields_select_the_node_by_name_and_empty_terms_match_nothing() {
        let s = node_selector(json!({"nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}
        ]}));
        assert!(s.matches(&Labels::new(), "n1"));
        assert!(!s.matches(&Labels::new(), "n2"));
        let empty = node_selector(json!({"nodeSelectorTerms": [{}]}));
        assert!(!empty.matches(&Labels::new(), "n1"));
    }

    #[test]
    fn not_in_and_lt_follow_upstream_semantics() {
        let s = node_selector(json!({"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "tier", "operator": "NotIn", "values": ["db"]},
            {"key": "load", "operator": "Lt", "values": ["5"]}
        ]}]}));
        assert!(s.matches(&labels(json!({"load": "3"})), "n"));
        assert!(!s.matches(&labels(json!({"tier": "db", "load": "3"})), "n"));
        assert!(!s.matches(&labels(json!({"load": "7"})), "n"));
    }

    #[test]
    fn label_selectors_treat_absent_as_nothing_and_empty_as_everything() {
        assert!(!LabelSelector::parse(None).matches(&Labels::new()));
        let empty: meta::LabelSelector = serde_json::from_value(json!({})).unwrap();
        assert!(LabelSelector::parse(Some(&empty)).matches(&Labels::new()));
        let s: meta::LabelSelector = serde_json::from_value(json!({
            "matchLabels": {"app": "web"},
            "matchExpressions": [{"key": "track", "operator": "NotIn", "values": ["canary"]}]
        }))
        .unwrap();
        let s = LabelSelector::parse(Some(&s));
        assert!(s.matches(&labels(json!({"app": "web"}))));
        assert!(!s.matches(&labels(json!({"app": "web", "track": "canary"}))));
        let bad: meta::LabelSelector = serde_json::from_value(
            json!({"matchExpressions": [{"key": "k", "operator": "Gt", "values": ["1"]}]}),
        )
        .unwrap();
        assert!(!LabelSelector::parse(Some(&bad)).matches(&labels(json!({"k": "2"}))));
    }

    fn toleration(v: serde_json::Value) -> core::Toleration {
        serde_json::from_value(v).unwrap()
    }

    fn taint(v: serde_json::Value) -> core::Taint {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn tolerations_tolerate_taints_as_upstream_tolerates_taint() {
        let gpu = taint(json!({"key": "gpu", "value": "a100", "effect": "NoSchedule"}));
        // (toleration, tolerates) — upstream's TestTolerationToleratesTaint cases.
        for (t, want) in [
            (
                json!({"key": "gpu", "operator": "Equal", "value": "a100", "effect": "NoSchedule"}),
                true,
            ),
            (json!({"key": "gpu", "value": "a100"}), true),
            (
                json!({"key": "gpu", "operator": "Equal", "value": "v100"}),
                false,
            ),
            (json!({"key": "gpu", "operator": "Exists"}), true),
            (
                json!({"key": "gpu", "operator": "Exists", "effect": "NoExecute"}),
                false,
            ),
            (json!({"operator": "Exists"}), true),
            (json!({"operator": "Exists", "effect": "NoSchedule"}), true),
            (json!({"key": "cpu", "operator": "Exists"}), false),
            (json!({"key": "gpu", "operator": "Sometimes"}), false),
        ] {
            assert_eq!(tolerates(&toleration(t.clone()), &gpu), want, "{t}");
        }
        let valueless = taint(json!({"key": "dedicated", "effect": "NoSchedule"}));
        assert!(tolerates(
            &toleration(json!({"key": "dedicated"})),
            &valueless
        ));
        assert!(tolerated(
            &[
                toleration(json!({"key": "x", "operator": "Exists"})),
                toleration(json!({"key": "gpu", "operator": "Exists"}))
            ],
            &gpu
        ));
        assert!(!tolerated(&[], &gpu));
    }

    #[test]
    fn node_selector_and_required_affinity_both_admit_a_node() {
        let spec: core::PodSpec = serde_json::from_value(json!({
            "containers": [],
            "nodeSelector": {"disk": "ssd"},
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}}
        }))
        .unwrap();
        assert!(node_admits(
            &spec,
            "n1",
            &labels(json!({"disk": "ssd", "zone": "a"}))
        ));
        assert!(!node_admits(
            &spec,
            "n1",
            &labels(json!({"disk": "ssd", "zone": "b"}))
        ));
        assert!(!node_admits(&spec, "n1", &labels(json!({"zone": "a"}))));
        let free = core::PodSpec::default();
        assert!(node_admits(&free, "n1", &Labels::new()));
    }
}
