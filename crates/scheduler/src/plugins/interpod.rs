//! InterPodAffinity: pods that want (or refuse) to share a topology domain with other pods.
//!
//! PreFilter counts, per (topology key, value): the existing pods whose required
//! anti-affinity terms match the incoming pod, the existing pods matching all of the incoming
//! pod's required affinity terms, and those matching each of its anti-affinity terms. The
//! filter then rejects a node whose domain lacks a match for every affinity term
//! (unresolvable, unless no pod matches anywhere and the pod matches its own terms: the first
//! pod of a self-affine group), holds a pod the incoming pod is anti-affine to, or holds a pod
//! anti-affine to it. The score adds preferred term weights (and existing pods' required
//! affinity at weight 1) over domains, normalized between the lowest and highest node.
//! Work is skipped when neither the pod nor any pod of its cluster has affinity terms.

use std::collections::HashMap;

use crate::cache::ClusterState;
use crate::framework::{MAX_NODE_SCORE, Plugin, Status};
use crate::nodeinfo::NodeInfo;
use crate::podinfo::{AffinityTerm, PodInfo};

type Pair = (String, String);

fn pair(term: &AffinityTerm, node: &NodeInfo) -> Option<Pair> {
    node.labels()
        .get(&term.topology_key)
        .map(|v| (term.topology_key.clone(), v.clone()))
}

fn term_matches(term: &AffinityTerm, pod: &PodInfo, cluster: &ClusterState) -> bool {
    term.matches(pod, cluster.namespace_labels(&pod.key.namespace))
}

/// PreFilter's counts.
#[derive(Debug, Clone, Default)]
pub struct FilterState {
    existing_anti: HashMap<Pair, i64>,
    affinity: HashMap<Pair, i64>,
    anti: HashMap<Pair, i64>,
    /// The incoming pod matches all its own affinity terms.
    self_affine: bool,
}

impl FilterState {
    /// The counts; `None` when neither the pod nor its cluster has required terms.
    pub fn new(pod: &PodInfo, cluster: &ClusterState) -> Option<FilterState> {
        let terms = pod.affinity.as_deref();
        let has_required =
            terms.is_some_and(|a| !a.required.is_empty() || !a.required_anti.is_empty());
        if !has_required && cluster.pods_with_required_anti_affinity == 0 {
            return None;
        }
        let mut s = FilterState {
            self_affine: terms
                .is_some_and(|a| a.required.iter().all(|t| term_matches(t, pod, cluster))),
            ..Default::default()
        };
        for node in &cluster.nodes {
            if node.pods_with_required_anti_affinity == 0 && !has_required {
                continue;
            }
            for other in &node.pods {
                s.count(pod, other, node, cluster, 1);
            }
        }
        Some(s)
    }

    fn count(
        &mut self,
        pod: &PodInfo,
        other: &PodInfo,
        node: &NodeInfo,
        cluster: &ClusterState,
        delta: i64,
    ) {
        if let Some(a) = other.affinity.as_deref() {
            for t in &a.required_anti {
                if term_matches(t, pod, cluster)
                    && let Some(p) = pair(t, node)
                {
                    *self.existing_anti.entry(p).or_insert(0) += delta;
                }
            }
        }
        let Some(a) = pod.affinity.as_deref() else {
            return;
        };
        if !a.required.is_empty() && a.required.iter().all(|t| term_matches(t, other, cluster)) {
            for t in &a.required {
                if let Some(p) = pair(t, node) {
                    *self.affinity.entry(p).or_insert(0) += delta;
                }
            }
        }
        for t in &a.required_anti {
            if term_matches(t, other, cluster)
                && let Some(p) = pair(t, node)
            {
                *self.anti.entry(p).or_insert(0) += delta;
            }
        }
    }

    /// Adjusts the counts for `other` appearing on (1) or leaving (-1) `node`.
    pub fn update(
        &mut self,
        pod: &PodInfo,
        other: &PodInfo,
        node: &NodeInfo,
        cluster: &ClusterState,
        delta: i64,
    ) {
        self.count(pod, other, node, cluster, delta);
        for m in [&mut self.existing_anti, &mut self.affinity, &mut self.anti] {
            m.retain(|_, v| *v > 0);
        }
    }

    /// The filter.
    pub fn filter(&self, pod: &PodInfo, node: &NodeInfo) -> Result<(), Status> {
        if let Some(a) = pod.affinity.as_deref() {
            let mut all_exist = true;
            for t in &a.required {
                match pair(t, node) {
                    None => return Err(affinity_error()),
                    Some(p) if self.affinity.get(&p).copied().unwrap_or(0) <= 0 => {
                        all_exist = false
                    }
                    Some(_) => {}
                }
            }
            if !(all_exist || self.affinity.is_empty() && self.self_affine) {
                return Err(affinity_error());
            }
            for t in &a.required_anti {
                if pair(t, node).is_some_and(|p| self.anti.get(&p).copied().unwrap_or(0) > 0) {
                    return Err(Status::unschedulable(
                        Plugin::InterPodAffinity,
                        "node(s) didn't match pod anti-affinity rules",
                    ));
                }
            }
        }
        if !self.existing_anti.is_empty()
            && node.labels().iter().any(|(k, v)| {
                self.existing_anti
                    .get(&(k.clone(), v.clone()))
                    .is_some_and(|c| *c > 0)
            })
        {
            return Err(Status::unschedulable(
                Plugin::InterPodAffinity,
                "node(s) didn't satisfy existing pods anti-affinity rules",
            ));
        }
        Ok(())
    }
}

fn affinity_error() -> Status {
    Status::unresolvable(
        Plugin::InterPodAffinity,
        "node(s) didn't match pod affinity rules",
    )
}

/// The normalized scores for `feasible` nodes; `None` when nothing contributes.
pub fn score(pod: &PodInfo, cluster: &ClusterState, feasible: &[&NodeInfo]) -> Option<Vec<i64>> {
    let own = pod.affinity.as_deref();
    let has_preferred =
        own.is_some_and(|a| !a.preferred.is_empty() || !a.preferred_anti.is_empty());
    if !has_preferred && cluster.pods_with_affinity == 0 {
        return None;
    }
    let mut topo: HashMap<Pair, i64> = HashMap::new();
    let mut add = |term: &AffinityTerm, target: &PodInfo, node: &NodeInfo, sign: i64| {
        if term_matches(term, target, cluster)
            && let Some(p) = pair(term, node)
        {
            *topo.entry(p).or_insert(0) += sign * term.weight;
        }
    };
    for node in &cluster.nodes {
        if node.labels().is_empty() || (!has_preferred && node.pods_with_affinity == 0) {
            continue;
        }
        for other in &node.pods {
            if let Some(a) = own {
                a.preferred.iter().for_each(|t| add(t, other, node, 1));
                a.preferred_anti
                    .iter()
                    .for_each(|t| add(t, other, node, -1));
            }
            if let Some(a) = other.affinity.as_deref() {
                a.required.iter().for_each(|t| add(t, pod, node, 1));
                a.preferred.iter().for_each(|t| add(t, pod, node, 1));
                a.preferred_anti.iter().for_each(|t| add(t, pod, node, -1));
            }
        }
    }
    if topo.is_empty() {
        return None;
    }
    let raw: Vec<i64> = feasible
        .iter()
        .map(|n| {
            n.labels()
                .iter()
                .filter_map(|(k, v)| topo.get(&(k.clone(), v.clone())))
                .sum()
        })
        .collect();
    let min = raw.iter().copied().min().unwrap_or(0);
    let max = raw.iter().copied().max().unwrap_or(0);
    Some(
        raw.iter()
            .map(|s| {
                if max > min {
                    (MAX_NODE_SCORE as f64 * ((s - min) as f64 / (max - min) as f64)) as i64
                } else {
                    0
                }
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::Code;
    use crate::testutil::{CLUSTER, cache, pod};
    use serde_json::json;

    fn term(app: &str, key: &str) -> serde_json::Value {
        json!([{"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key}])
    }

    #[test]
    fn an_existing_pods_anti_affinity_keeps_matching_pods_off_its_domain() {
        let loner = pod(
            "loner",
            "100m",
            json!({"metadata": {"labels": {"app": "loner"}}, "spec": {
            "nodeName": "n1",
            "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": term("web", "zone")}}}}),
        );
        let c = cache(
            &[
                ("n1", "8", json!({"zone": "a"})),
                ("n2", "8", json!({"zone": "b"})),
            ],
            &[loner],
        );
        let cl = c.cluster(CLUSTER).unwrap();
        let web = pod(
            "web",
            "100m",
            json!({"metadata": {"labels": {"app": "web"}}}),
        );
        let s = FilterState::new(&web, cl).unwrap();
        let e = s.filter(&web, cl.node("n1").unwrap()).unwrap_err();
        assert_eq!(
            e.reasons,
            vec!["node(s) didn't satisfy existing pods anti-affinity rules"]
        );
        assert!(s.filter(&web, cl.node("n2").unwrap()).is_ok());
        let other = pod(
            "other",
            "100m",
            json!({"metadata": {"labels": {"app": "api"}}}),
        );
        assert!(
            FilterState::new(&other, cl)
                .unwrap()
                .filter(&other, cl.node("n1").unwrap())
                .is_ok()
        );
    }

    #[test]
    fn required_affinity_needs_a_matching_pod_in_the_domain_except_for_the_first_of_a_group() {
        let db = pod(
            "db",
            "100m",
            json!({"metadata": {"labels": {"app": "db"}}, "spec": {"nodeName": "n1"}}),
        );
        let c = cache(
            &[
                ("n1", "8", json!({"zone": "a"})),
                ("n2", "8", json!({"zone": "a"})),
                ("n3", "8", json!({"zone": "b"})),
            ],
            &[db],
        );
        let cl = c.cluster(CLUSTER).unwrap();
        let app = pod(
            "app",
            "100m",
            json!({"spec": {"affinity": {"podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": term("db", "zone")}}}}),
        );
        let s = FilterState::new(&app, cl).unwrap();
        assert!(
            s.filter(&app, cl.node("n2").unwrap()).is_ok(),
            "same zone as the db"
        );
        let e = s.filter(&app, cl.node("n3").unwrap()).unwrap_err();
        assert_eq!(e.code, Code::UnschedulableAndUnresolvable);
        let first = pod(
            "first",
            "100m",
            json!({"metadata": {"labels": {"app": "cache"}}, "spec": {"affinity": {
            "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": term("cache", "zone")}}}}),
        );
        let s = FilterState::new(&first, cl).unwrap();
        assert!(
            s.filter(&first, cl.node("n3").unwrap()).is_ok(),
            "no cache pod anywhere yet"
        );
    }

    #[test]
    fn preferred_affinity_scores_the_domain_of_matching_pods_highest() {
        let db = pod(
            "db",
            "100m",
            json!({"metadata": {"labels": {"app": "db"}}, "spec": {"nodeName": "n1"}}),
        );
        let c = cache(
            &[
                ("n1", "8", json!({"zone": "a"})),
                ("n2", "8", json!({"zone": "b"})),
            ],
            &[db],
        );
        let cl = c.cluster(CLUSTER).unwrap();
        let app = pod(
            "app",
            "100m",
            json!({"spec": {"affinity": {"podAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 50, "podAffinityTerm": {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "zone"}}]}}}}),
        );
        let feasible = [cl.node("n1").unwrap(), cl.node("n2").unwrap()];
        assert_eq!(score(&app, cl, &feasible).unwrap(), vec![MAX_NODE_SCORE, 0]);
    }
}
