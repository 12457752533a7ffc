//! PodTopologySpread: spread matching pods evenly across topology domains (zones, hosts...).
//!
//! PreFilter counts, for each `DoNotSchedule` constraint, the pods of the pod's namespace
//! matching the constraint's selector in every domain of the eligible nodes (nodes with all
//! the constraints' topology keys that pass the pod's node affinity unless
//! `nodeAffinityPolicy: Ignore`, and tolerate its taints when `nodeTaintsPolicy: Honor`).
//! A node is rejected when `count(domain) + self-match - global minimum > maxSkew` (the global
//! minimum is 0 while fewer than `minDomains` domains exist), or when it lacks a topology key
//! (unresolvable). `ScheduleAnyway` constraints score: fewer matching pods in the node's
//! domain is better, each constraint weighted by `ln(domains + 2)` (upstream's formula).
//! The cluster-level default constraints upstream applies to pods without any are not.

use std::collections::HashMap;

use crate::cache::ClusterState;
use crate::framework::{MAX_NODE_SCORE, Plugin, Status};
use crate::nodeinfo::NodeInfo;
use crate::podinfo::{PodInfo, SpreadConstraint};

/// The hostname label: each node is its own domain.
pub const HOSTNAME: &str = "kubernetes.io/hostname";

/// How many pods on `node` count for a constraint of `pod`.
fn count_matching(node: &NodeInfo, c: &SpreadConstraint, pod: &PodInfo) -> i64 {
    node.pods
        .iter()
        .filter(|p| {
            !p.terminating && p.key.namespace == pod.key.namespace && c.selector.matches(&p.labels)
        })
        .count() as i64
}

fn has_keys<'a>(
    node: &NodeInfo,
    mut constraints: impl Iterator<Item = &'a SpreadConstraint>,
) -> bool {
    let labels = node.labels();
    constraints.all(|c| labels.contains_key(&c.topology_key))
}

/// Whether a node is counted for a constraint (node inclusion policies).
fn included(pod: &PodInfo, node: &NodeInfo, c: &SpreadConstraint) -> bool {
    let Some(spec) = &node.node else {
        return false;
    };
    if c.honor_node_affinity && !super::nodeaffinity::required_matches(pod, &node.name, spec) {
        return false;
    }
    if c.honor_node_taints && super::taints::filter(pod, spec).is_err() {
        return false;
    }
    true
}

/// PreFilter's counts for the hard constraints.
#[derive(Debug, Clone)]
pub struct FilterState {
    constraints: Vec<SpreadConstraint>,
    counts: Vec<HashMap<String, i64>>,
    min: Vec<i64>,
}

impl FilterState {
    /// Counts matching pods per domain; `None` when the pod has no hard constraint.
    pub fn new(pod: &PodInfo, cluster: &ClusterState) -> Option<FilterState> {
        let constraints: Vec<SpreadConstraint> =
            pod.spread.iter().filter(|c| c.hard).cloned().collect();
        if constraints.is_empty() {
            return None;
        }
        let mut counts = vec![HashMap::new(); constraints.len()];
        for node in cluster.nodes.iter().filter(|n| n.node.is_some()) {
            if !has_keys(node, constraints.iter()) {
                continue;
            }
            for (i, c) in constraints.iter().enumerate() {
                if !included(pod, node, c) {
                    continue;
                }
                let value = node.labels()[&c.topology_key].clone();
                *counts[i].entry(value).or_insert(0) += count_matching(node, c, pod);
            }
        }
        let mut s = FilterState {
            min: vec![0; constraints.len()],
            constraints,
            counts,
        };
        s.recompute_min();
        Some(s)
    }

    fn recompute_min(&mut self) {
        for (i, c) in self.constraints.iter().enumerate() {
            let domains = &self.counts[i];
            self.min[i] = if (domains.len() as i64) < c.min_domains {
                0
            } else {
                domains
                    .values()
                    .copied()
                    .min()
                    .unwrap_or(i64::from(i32::MAX))
            };
        }
    }

    /// Adjusts the counts for `other` appearing on (`delta` 1) or leaving (-1) `node`
    /// (preemption's what-if).
    pub fn update(&mut self, pod: &PodInfo, other: &PodInfo, node: &NodeInfo, delta: i64) {
        if other.key.namespace != pod.key.namespace || !has_keys(node, self.constraints.iter()) {
            return;
        }
        for (i, c) in self.constraints.iter().enumerate() {
            if !c.selector.matches(&other.labels) || !included(pod, node, c) {
                continue;
            }
            let value = node.labels()[&c.topology_key].clone();
            *self.counts[i].entry(value).or_insert(0) += delta;
        }
        self.recompute_min();
    }

    /// The filter.
    pub fn filter(&self, pod: &PodInfo, node: &NodeInfo) -> Result<(), Status> {
        let labels = node.labels();
        for (i, c) in self.constraints.iter().enumerate() {
            let Some(value) = labels.get(&c.topology_key) else {
                return Err(Status::unresolvable(
                    Plugin::PodTopologySpread,
                    "node(s) didn't match pod topology spread constraints (missing required label)",
                ));
            };
            let self_match = i64::from(c.selector.matches(&pod.labels));
            let count = self.counts[i].get(value).copied().unwrap_or(0);
            if count + self_match - self.min[i] > c.max_skew {
                return Err(Status::unschedulable(
                    Plugin::PodTopologySpread,
                    "node(s) didn't match pod topology spread constraints",
                ));
            }
        }
        Ok(())
    }
}

/// The normalized scores of the soft constraints for `feasible` nodes; `None` when the pod
/// has none.
pub fn score(pod: &PodInfo, cluster: &ClusterState, feasible: &[&NodeInfo]) -> Option<Vec<i64>> {
    let soft: Vec<&SpreadConstraint> = pod.spread.iter().filter(|c| !c.hard).collect();
    if soft.is_empty() {
        return None;
    }
    let ignored: Vec<bool> = feasible
        .iter()
        .map(|n| !has_keys(n, soft.iter().copied()))
        .collect();
    let scored = ignored.iter().filter(|i| !**i).count();
    let mut pair_counts: Vec<HashMap<String, i64>> = vec![HashMap::new(); soft.len()];
    for (n, _) in feasible.iter().zip(&ignored).filter(|(_, i)| !**i) {
        for (i, c) in soft.iter().enumerate() {
            if c.topology_key != HOSTNAME {
                pair_counts[i]
                    .entry(n.labels()[&c.topology_key].clone())
                    .or_insert(0);
            }
        }
    }
    let weights: Vec<f64> = soft
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let size = if c.topology_key == HOSTNAME {
                scored
            } else {
                pair_counts[i].len()
            };
            ((size + 2) as f64).ln()
        })
        .collect();
    for node in cluster.nodes.iter().filter(|n| n.node.is_some()) {
        if !has_keys(node, soft.iter().copied()) {
            continue;
        }
        for (i, c) in soft.iter().enumerate() {
            if c.topology_key == HOSTNAME || !included(pod, node, c) {
                continue;
            }
            if let Some(cnt) = pair_counts[i].get_mut(&node.labels()[&c.topology_key]) {
                *cnt += count_matching(node, c, pod);
            }
        }
    }
    let raw: Vec<i64> = feasible
        .iter()
        .map(|n| {
            let labels = n.labels();
            let mut s = 0.0;
            for (i, c) in soft.iter().enumerate() {
                let Some(value) = labels.get(&c.topology_key) else {
                    continue;
                };
                let cnt = if c.topology_key == HOSTNAME {
                    count_matching(n, c, pod)
                } else {
                    pair_counts[i].get(value).copied().unwrap_or(0)
                };
                s += cnt as f64 * weights[i] + (c.max_skew - 1) as f64;
            }
            s.round() as i64
        })
        .collect();
    let considered = raw
        .iter()
        .zip(&ignored)
        .filter(|(_, i)| !**i)
        .map(|(s, _)| *s);
    let min = considered.clone().min().unwrap_or(0);
    let max = considered.max().unwrap_or(0);
    Some(
        raw.iter()
            .zip(&ignored)
            .map(|(s, ignored)| match (*ignored, max) {
                (true, _) => 0,
                (false, 0) => MAX_NODE_SCORE,
                (false, _) => MAX_NODE_SCORE * (max + min - s) / max,
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{CLUSTER, cache, pod};
    use serde_json::json;

    fn web(name: &str, node: &str, constraint: serde_json::Value) -> std::sync::Arc<PodInfo> {
        pod(
            name,
            "100m",
            json!({"metadata": {"labels": {"app": "web"}},
            "spec": {"nodeName": node, "topologySpreadConstraints": [constraint]}}),
        )
    }

    fn hard(extra: serde_json::Value) -> serde_json::Value {
        let mut c = json!({"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "web"}}});
        c.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        c
    }

    #[test]
    fn a_domain_over_the_skew_is_rejected_and_a_node_without_the_key_is_unresolvable() {
        let existing = [
            web("w1", "a1", hard(json!({}))),
            web("w2", "a1", hard(json!({}))),
        ];
        let c = cache(
            &[
                ("a1", "8", json!({"zone": "a"})),
                ("b1", "8", json!({"zone": "b"})),
                ("x", "8", json!({})),
            ],
            &existing,
        );
        let cl = c.cluster(CLUSTER).unwrap();
        let incoming = web("new", "", hard(json!({})));
        let s = FilterState::new(&incoming, cl).unwrap();
        let e = s.filter(&incoming, cl.node("a1").unwrap()).unwrap_err();
        assert_eq!(e.code, crate::framework::Code::Unschedulable);
        assert!(s.filter(&incoming, cl.node("b1").unwrap()).is_ok());
        let e = s.filter(&incoming, cl.node("x").unwrap()).unwrap_err();
        assert_eq!(e.code, crate::framework::Code::UnschedulableAndUnresolvable);
        assert!(e.reasons[0].ends_with("(missing required label)"));
    }

    #[test]
    fn too_few_domains_make_the_global_minimum_zero() {
        let c = cache(
            &[("a1", "8", json!({"zone": "a"}))],
            &[web("w1", "a1", hard(json!({})))],
        );
        let cl = c.cluster(CLUSTER).unwrap();
        let plain = web("new", "", hard(json!({})));
        assert!(
            FilterState::new(&plain, cl)
                .unwrap()
                .filter(&plain, cl.node("a1").unwrap())
                .is_ok()
        );
        let two = web("new", "", hard(json!({"minDomains": 2})));
        assert!(
            FilterState::new(&two, cl)
                .unwrap()
                .filter(&two, cl.node("a1").unwrap())
                .is_err()
        );
    }

    #[test]
    fn a_soft_constraint_scores_the_emptier_zone_higher() {
        let soft = json!({"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": {"app": "web"}}});
        let c = cache(
            &[
                ("a1", "8", json!({"zone": "a"})),
                ("b1", "8", json!({"zone": "b"})),
            ],
            &[web("w1", "a1", soft.clone()), web("w2", "a1", soft.clone())],
        );
        let cl = c.cluster(CLUSTER).unwrap();
        let incoming = web("new", "", soft);
        assert!(
            FilterState::new(&incoming, cl).is_none(),
            "soft constraints do not filter"
        );
        let feasible = [cl.node("a1").unwrap(), cl.node("b1").unwrap()];
        let scores = score(&incoming, cl, &feasible).unwrap();
        assert!(scores[1] > scores[0], "{scores:?}");
        assert_eq!(scores[1], MAX_NODE_SCORE);
    }
}
