//! One scheduling cycle (upstream `schedulePod`): find the nodes that fit, score them, pick
//! the best, and assume the pod there.
//!
//! Only enough nodes are filtered to find `numFeasibleNodesToFind` of them (upstream's
//! adaptive `percentageOfNodesToScore`: 50% minus 1% per 125 nodes, at least 5%, at least 100
//! nodes), starting where the previous cycle of the cluster stopped, so every node gets its
//! turn. Filters stop at the first rejection. A pod nominated to a node by an earlier
//! preemption tries that node first. Ties between the best nodes are broken at random
//! (reservoir sampling). A pod that fits nowhere gets a [`FitError`] and, when it may preempt,
//! a preemption attempt (see [`crate::preemption`]).

use std::sync::Arc;

use rand::Rng;

use crate::cache::{Cache, ClusterState};
use crate::framework::{Diagnosis, FitError, Plugin, PluginSet};
use crate::nodeinfo::NodeInfo;
use crate::plugins::CycleState;
use crate::podinfo::PodInfo;
use crate::preemption::{self, Preemption};

/// Below this many nodes, every node is filtered (upstream `minFeasibleNodesToFind`).
pub const MIN_FEASIBLE_NODES_TO_FIND: usize = 100;
/// The smallest adaptive percentage (upstream `minFeasibleNodesPercentageToFind`).
pub const MIN_FEASIBLE_NODES_PERCENTAGE: usize = 5;

/// The message when a cluster has no node at all (upstream `ErrNoNodesAvailable`).
pub const NO_NODES: &str = "no nodes available to schedule pods";

/// How many feasible nodes are enough for a cluster of `all` nodes.
pub fn num_feasible_nodes_to_find(all: usize) -> usize {
    if all < MIN_FEASIBLE_NODES_TO_FIND {
        return all;
    }
    let percentage = 50usize
        .saturating_sub(all / 125)
        .max(MIN_FEASIBLE_NODES_PERCENTAGE);
    (all * percentage / 100).max(MIN_FEASIBLE_NODES_TO_FIND)
}

/// How a cycle ended.
#[derive(Debug)]
pub enum Outcome {
    /// The pod is assumed on `node`; bind it.
    Bind {
        node: Arc<str>,
        evaluated: usize,
        feasible: usize,
    },
    /// The pod fits nowhere now.
    Unschedulable {
        message: String,
        plugins: PluginSet,
        /// A successful preemption: where the pod is nominated and whom to evict.
        preemption: Option<Preemption>,
        /// Whether the pod's nomination is cleared (no preemption candidate anywhere).
        clear_nomination: bool,
    },
}

/// Nominated pods on `node` that go before `pod` (same or higher priority).
pub fn nominated_before(cluster: &ClusterState, pod: &PodInfo, node: &str) -> Vec<Arc<PodInfo>> {
    cluster
        .nominated
        .get(node)
        .map(|ps| {
            ps.iter()
                .filter(|p| p.priority >= pod.priority && p.key != pod.key)
                .cloned()
                .collect()
        })
        .unwrap_or_default()
}

/// Runs one cycle for `pod` and, on success, assumes it in the cache.
pub fn schedule_one(cache: &mut Cache, pod: &Arc<PodInfo>, rng: &mut impl Rng) -> Outcome {
    let cluster_name = pod.key.cluster.clone();
    let decision = match cache.cluster(&cluster_name) {
        Some(c) if c.live_nodes > 0 => decide(c, pod, rng),
        _ => Decision::Fail(Outcome::Unschedulable {
            message: NO_NODES.into(),
            plugins: PluginSet::of(&[Plugin::NoNodes]),
            preemption: None,
            clear_nomination: true,
        }),
    };
    match decision {
        Decision::Fail(outcome) => {
            if let Outcome::Unschedulable {
                preemption,
                clear_nomination,
                ..
            } = &outcome
            {
                if let Some(p) = preemption {
                    cache.set_nominated(pod, Some(&p.node));
                    for cleared in &p.cleared_nominations {
                        cache.set_nominated(cleared, None);
                    }
                } else if *clear_nomination && !pod.nominated_node_name.is_empty() {
                    cache.set_nominated(pod, None);
                }
            }
            outcome
        }
        Decision::Pick {
            node,
            next_start,
            evaluated,
            feasible,
        } => {
            let c = cache.cluster_mut(&cluster_name);
            c.next_start = next_start;
            if !pod.nominated_node_name.is_empty() {
                cache.set_nominated(pod, None);
            }
            cache.assume(pod.clone(), &node);
            Outcome::Bind {
                node,
                evaluated,
                feasible,
            }
        }
    }
}

enum Decision {
    Pick {
        node: Arc<str>,
        next_start: usize,
        evaluated: usize,
        feasible: usize,
    },
    Fail(Outcome),
}

fn decide(cluster: &ClusterState, pod: &Arc<PodInfo>, rng: &mut impl Rng) -> Decision {
    let mut diagnosis = Diagnosis::default();
    let state = match CycleState::new(pod, cluster) {
        Ok(s) => Some(s),
        Err(status) => {
            diagnosis.plugins.insert(status.plugin);
            diagnosis.pre_filter = Some(status);
            None
        }
    };
    let mut feasible: Vec<&NodeInfo> = Vec::new();
    let mut next_start = cluster.next_start;
    let mut evaluated = 0;
    if let Some(state) = &state {
        let filter = |n: &NodeInfo| {
            if cluster.nominated.is_empty() {
                state.filter(n)
            } else {
                state.filter_with(n, &nominated_before(cluster, pod, &n.name))
            }
        };
        // A node nominated by an earlier preemption is tried first.
        if let Some(n) = cluster
            .node(&pod.nominated_node_name)
            .filter(|n| n.node.is_some())
            && filter(n).is_ok()
        {
            feasible.push(n);
        }
        if feasible.is_empty() {
            let len = cluster.nodes.len();
            let want = num_feasible_nodes_to_find(cluster.live_nodes);
            let start = if len == 0 {
                0
            } else {
                cluster.next_start % len
            };
            let mut visited = 0;
            for k in 0..len {
                if feasible.len() >= want {
                    break;
                }
                visited += 1;
                let n = &cluster.nodes[(start + k) % len];
                if n.node.is_none() {
                    continue;
                }
                evaluated += 1;
                match filter(n) {
                    Ok(()) => feasible.push(n),
                    Err(s) => diagnosis.reject(n.name.clone(), s),
                }
            }
            next_start = if len == 0 { 0 } else { (start + visited) % len };
        }
    }
    if feasible.is_empty() {
        let mut fit = FitError {
            num_all_nodes: cluster.live_nodes,
            diagnosis,
            post_filter: None,
        };
        let plugins = fit.diagnosis.plugins;
        let result = preemption::preempt(cluster, pod, state.as_ref(), &fit.diagnosis, rng);
        let (preemption, clear_nomination) = match result {
            Ok(p) => (Some(p), false),
            Err(no) => {
                fit.post_filter = Some(format!("preemption: {}", no.message));
                (None, no.clear_nomination)
            }
        };
        return Decision::Fail(Outcome::Unschedulable {
            message: fit.message(),
            plugins,
            preemption,
            clear_nomination,
        });
    }
    let evaluated_feasible = feasible.len();
    let node = if feasible.len() == 1 {
        feasible[0].name.clone()
    } else {
        let scores = state
            .as_ref()
            .map(|s| s.score(&feasible))
            .unwrap_or_else(|| vec![0; feasible.len()]);
        select_host(&feasible, &scores, rng)
    };
    Decision::Pick {
        node,
        next_start,
        evaluated: evaluated.max(1),
        feasible: evaluated_feasible,
    }
}

/// The highest-scoring node, ties broken uniformly at random.
fn select_host(feasible: &[&NodeInfo], scores: &[i64], rng: &mut impl Rng) -> Arc<str> {
    let mut best = 0;
    let mut ties = 0u32;
    for (i, s) in scores.iter().enumerate() {
        if i == 0 || *s > scores[best] {
            best = i;
            ties = 1;
        } else if *s == scores[best] {
            ties += 1;
            if rng.random_range(0..ties) == 0 {
                best = i;
            }
        }
    }
    feasible[best].name.clone()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{CLUSTER, cache, pod};
    use rand::SeedableRng;
    use serde_json::json;

    #[test]
    fn a_nominated_node_is_tried_first_and_the_pod_is_assumed_there() {
        let mut c = cache(&[("n1", "4", json!({})), ("n2", "4", json!({}))], &[]);
        let p = pod("p", "1", json!({"status": {"nominatedNodeName": "n2"}}));
        let mut rng = rand::rngs::SmallRng::seed_from_u64(3);
        match schedule_one(&mut c, &p, &mut rng) {
            Outcome::Bind {
                node, evaluated, ..
            } => {
                assert_eq!(&*node, "n2");
                assert_eq!(evaluated, 1);
            }
            other => panic!("{other:?}"),
        }
        assert!(c.is_assumed(&p.key));
        assert_eq!(
            c.cluster(CLUSTER)
                .unwrap()
                .node("n2")
                .unwrap()
                .requested
                .milli_cpu,
            1000
        );
    }

    #[test]
    fn assumed_pods_fill_nodes_until_nothing_fits() {
        let mut c = cache(&[("n1", "1", json!({})), ("n2", "1", json!({}))], &[]);
        let mut rng = rand::rngs::SmallRng::seed_from_u64(3);
        for i in 0..2 {
            let p = pod(&format!("p{i}"), "1", json!({}));
            assert!(matches!(
                schedule_one(&mut c, &p, &mut rng),
                Outcome::Bind { .. }
            ));
        }
        let p = pod("late", "1", json!({}));
        match schedule_one(&mut c, &p, &mut rng) {
            Outcome::Unschedulable { message, .. } => assert_eq!(
                message,
                "0/2 nodes are available: 2 Insufficient cpu. preemption: 0/2 nodes are available: \
                 2 No preemption victims found for incoming pod."
            ),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_cluster_without_nodes_says_so() {
        let mut c = cache(&[], &[]);
        let mut rng = rand::rngs::SmallRng::seed_from_u64(3);
        match schedule_one(&mut c, &pod("p", "1", json!({})), &mut rng) {
            Outcome::Unschedulable { message, .. } => assert_eq!(message, NO_NODES),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn small_clusters_filter_every_node() {
        assert_eq!(num_feasible_nodes_to_find(3), 3);
        assert_eq!(num_feasible_nodes_to_find(99), 99);
    }

    #[test]
    fn large_clusters_filter_an_adaptive_share_of_at_least_one_hundred() {
        assert_eq!(num_feasible_nodes_to_find(100), 100);
        // 1,000 nodes: 50 - 8 = 42%.
        assert_eq!(num_feasible_nodes_to_find(1000), 420);
        // 5,000 nodes: 50 - 40 = 10%.
        assert_eq!(num_feasible_nodes_to_find(5000), 500);
        // 10,000 nodes: the floor of 5%.
        assert_eq!(num_feasible_nodes_to_find(10000), 500);
        assert_eq!(num_feasible_nodes_to_find(150), 100);
    }
}
