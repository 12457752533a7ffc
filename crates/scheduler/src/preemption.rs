//! Default preemption (upstream `DefaultPreemption`): when a pod fits nowhere, find a node
//! where evicting lower-priority pods would make it fit.
//!
//! Only nodes whose rejection was resolvable (`Unschedulable`, not `...AndUnresolvable`) are
//! tried. On each, every lower-priority pod is removed, the filters are re-run, then pods are
//! given back from the most important down (higher priority, then older) while the pod still
//! fits; the rest are the victims. The best node has the lowest highest-victim priority, then
//! the lowest priority sum, the fewest victims, the latest-started most important victim.
//! The pod is nominated to that node, the victims are deleted, and lower-priority pods
//! nominated there lose their nomination. PodDisruptionBudgets are not consulted.
//!
//! Failures are messages for the `preemption: ` suffix: `not eligible due to
//! preemptionPolicy=Never.`, or a fit-error style count (`0/3 nodes are available: 3 No
//! preemption victims found for incoming pod.`, nodes not tried counted as `Preemption is not
//! helpful for scheduling`).

use std::cmp::Reverse;
use std::sync::Arc;

use k8s_openapi::jiff::Timestamp;
use rand::Rng;

use crate::cache::ClusterState;
use crate::framework::{Code, Diagnosis, FitError, Plugin, Status};
use crate::nodeinfo::NodeInfo;
use crate::plugins::CycleState;
use crate::podinfo::PodInfo;
use crate::schedule::nominated_before;

/// At least this many candidate nodes are dry-run (upstream `minCandidateNodesAbsolute`).
pub const MIN_CANDIDATE_NODES: usize = 100;
/// At least this share of potential nodes is dry-run (upstream `minCandidateNodesPercentage`).
pub const MIN_CANDIDATE_NODES_PERCENTAGE: usize = 10;

const NOT_HELPFUL: &str = "Preemption is not helpful for scheduling";
const NO_VICTIMS: &str = "No preemption victims found for incoming pod";

/// A successful preemption.
#[derive(Debug, Clone)]
pub struct Preemption {
    /// Where the preemptor is nominated.
    pub node: Arc<str>,
    /// The pods to evict, most important first.
    pub victims: Vec<Arc<PodInfo>>,
    /// Lower-priority pods nominated to the node that lose their nomination.
    pub cleared_nominations: Vec<Arc<PodInfo>>,
}

/// Why preemption did not happen: the message after `preemption: `, and whether the pod's
/// current nomination is cleared (no candidate anywhere) or kept (not eligible, e.g. still
/// waiting for its victims to go).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoPreemption {
    pub message: String,
    pub clear_nomination: bool,
}

fn not_eligible(message: &str) -> NoPreemption {
    NoPreemption {
        message: message.into(),
        clear_nomination: false,
    }
}

/// Tries to make room for `pod`.
pub fn preempt(
    cluster: &ClusterState,
    pod: &Arc<PodInfo>,
    state: Option<&CycleState<'_>>,
    diagnosis: &Diagnosis,
    rng: &mut impl Rng,
) -> Result<Preemption, NoPreemption> {
    if pod.preempt_never {
        return Err(not_eligible("not eligible due to preemptionPolicy=Never."));
    }
    if let Some(nominated) = cluster.node(&pod.nominated_node_name)
        && diagnosis
            .status_of(&nominated.name)
            .is_none_or(|s| s.code != Code::UnschedulableAndUnresolvable)
        && nominated
            .pods
            .iter()
            .any(|p| p.priority < pod.priority && p.terminating && p.preempted)
    {
        return Err(not_eligible(
            "not eligible due to a terminating pod on the nominated node.",
        ));
    }
    let potential: Vec<&NodeInfo> = cluster
        .nodes
        .iter()
        .filter(|n| n.node.is_some())
        .filter(|n| {
            diagnosis
                .status_of(&n.name)
                .is_some_and(|s| s.code == Code::Unschedulable)
        })
        .collect();
    let not_found = |statuses: Vec<(Arc<str>, Status)>| {
        let mut d = Diagnosis {
            absent: Some(NOT_HELPFUL.into()),
            ..Default::default()
        };
        for (n, s) in statuses {
            d.reject(n, s);
        }
        NoPreemption {
            message: FitError {
                num_all_nodes: cluster.live_nodes,
                diagnosis: d,
                post_filter: None,
            }
            .message(),
            clear_nomination: true,
        }
    };
    let Some(state) = state.filter(|_| !potential.is_empty()) else {
        return Err(not_found(Vec::new()));
    };
    let want = (potential.len() * MIN_CANDIDATE_NODES_PERCENTAGE / 100)
        .max(MIN_CANDIDATE_NODES)
        .min(potential.len());
    let offset = rng.random_range(0..potential.len());
    let mut candidates: Vec<(Arc<str>, Vec<Arc<PodInfo>>)> = Vec::new();
    let mut statuses = Vec::new();
    for k in 0..potential.len() {
        if candidates.len() >= want {
            break;
        }
        let node = potential[(offset + k) % potential.len()];
        match select_victims(state, node) {
            Ok(victims) => candidates.push((node.name.clone(), victims)),
            Err(s) => statuses.push((node.name.clone(), s)),
        }
    }
    let Some(best) = pick(&candidates) else {
        return Err(not_found(statuses));
    };
    let (node, victims) = candidates.swap_remove(best);
    let cleared_nominations = cluster
        .nominated
        .get(&node)
        .map(|ps| {
            ps.iter()
                .filter(|p| p.priority < pod.priority)
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    Ok(Preemption {
        node,
        victims,
        cleared_nominations,
    })
}

/// The fewest, least important pods to evict from `node` so the pod fits (upstream
/// `SelectVictimsOnNode`).
fn select_victims(state: &CycleState<'_>, node: &NodeInfo) -> Result<Vec<Arc<PodInfo>>, Status> {
    let pod = state.pod;
    let mut potential: Vec<Arc<PodInfo>> = node
        .pods
        .iter()
        .filter(|p| p.priority < pod.priority)
        .cloned()
        .collect();
    if potential.is_empty() {
        return Err(Status::unresolvable(Plugin::NodeResourcesFit, NO_VICTIMS));
    }
    let mut what_if = node.clone();
    let mut st = state.clone();
    let remove = |n: &mut NodeInfo, st: &mut CycleState<'_>, p: &PodInfo| {
        n.remove_pod(&p.key.namespace, &p.key.name);
        if let Some(s) = &mut st.spread {
            s.update(pod, p, n, -1);
        }
        if let Some(i) = &mut st.interpod {
            i.update(pod, p, n, state.cluster, -1);
        }
    };
    for p in &potential {
        remove(&mut what_if, &mut st, p);
    }
    let nominated = nominated_before(state.cluster, pod, &node.name);
    st.filter_with(&what_if, &nominated)?;
    // Most important first: higher priority, then started earlier.
    potential.sort_by_key(|p| (Reverse(p.priority), p.start_time.unwrap_or(Timestamp::MAX)));
    let mut victims = Vec::new();
    for p in potential {
        what_if.add_pod(p.clone());
        if let Some(s) = &mut st.spread {
            s.update(pod, &p, &what_if, 1);
        }
        if let Some(i) = &mut st.interpod {
            i.update(pod, &p, &what_if, state.cluster, 1);
        }
        if st.filter_with(&what_if, &nominated).is_err() {
            remove(&mut what_if, &mut st, &p);
            victims.push(p);
        }
    }
    Ok(victims)
}

/// The best candidate (upstream `pickOneNodeForPreemption`, without PDB violations).
fn pick(candidates: &[(Arc<str>, Vec<Arc<PodInfo>>)]) -> Option<usize> {
    let key = |victims: &Vec<Arc<PodInfo>>| {
        let highest = victims.iter().map(|p| p.priority).max().unwrap_or(i32::MIN);
        let sum: i64 = victims
            .iter()
            .map(|p| i64::from(p.priority) + i64::from(i32::MAX) + 1)
            .sum();
        let earliest_of_highest = victims
            .iter()
            .filter(|p| p.priority == highest)
            .filter_map(|p| p.start_time)
            .min()
            .unwrap_or(Timestamp::MAX);
        (highest, sum, victims.len(), Reverse(earliest_of_highest))
    };
    candidates
        .iter()
        .enumerate()
        .min_by_key(|(i, (_, v))| (key(v), *i))
        .map(|(i, _)| i)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::Plugin;
    use crate::testutil::{CLUSTER, cache, pod};
    use rand::SeedableRng;
    use serde_json::json;

    fn prio(name: &str, node: &str, cpu: &str, priority: i32) -> Arc<PodInfo> {
        pod(
            name,
            cpu,
            json!({"spec": {"nodeName": node, "priority": priority}}),
        )
    }

    fn insufficient(nodes: &[&str]) -> Diagnosis {
        let mut d = Diagnosis::default();
        for n in nodes {
            d.reject(
                Arc::from(*n),
                Status::unschedulable(Plugin::NodeResourcesFit, "Insufficient cpu"),
            );
        }
        d
    }

    #[test]
    fn the_least_important_pods_are_evicted_and_the_rest_reprieved() {
        let c = cache(
            &[("n1", "2", json!({}))],
            &[prio("low", "n1", "1", 1), prio("mid", "n1", "1", 5)],
        );
        let cl = c.cluster(CLUSTER).unwrap();
        let p = pod("p", "1", json!({"spec": {"priority": 10}}));
        let state = CycleState::new(&p, cl).unwrap();
        let mut rng = rand::rngs::SmallRng::seed_from_u64(1);
        let done = preempt(cl, &p, Some(&state), &insufficient(&["n1"]), &mut rng).unwrap();
        assert_eq!(&*done.node, "n1");
        let victims: Vec<&str> = done.victims.iter().map(|v| v.key.name.as_str()).collect();
        assert_eq!(victims, vec!["low"]);
    }

    #[test]
    fn the_node_with_the_least_important_victims_is_chosen() {
        let c = cache(
            &[("n1", "1", json!({})), ("n2", "1", json!({}))],
            &[
                prio("important", "n1", "1", 50),
                prio("cheap", "n2", "1", 5),
            ],
        );
        let cl = c.cluster(CLUSTER).unwrap();
        let p = pod("p", "1", json!({"spec": {"priority": 100}}));
        let state = CycleState::new(&p, cl).unwrap();
        let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
        let done = preempt(cl, &p, Some(&state), &insufficient(&["n1", "n2"]), &mut rng).unwrap();
        assert_eq!(&*done.node, "n2");
    }

    #[test]
    fn without_lower_priority_pods_there_are_no_victims_and_never_means_never() {
        let c = cache(&[("n1", "1", json!({}))], &[prio("peer", "n1", "1", 10)]);
        let cl = c.cluster(CLUSTER).unwrap();
        let p = pod("p", "1", json!({"spec": {"priority": 10}}));
        let state = CycleState::new(&p, cl).unwrap();
        let mut rng = rand::rngs::SmallRng::seed_from_u64(1);
        let no = preempt(cl, &p, Some(&state), &insufficient(&["n1"]), &mut rng).unwrap_err();
        assert_eq!(
            no.message,
            "0/1 nodes are available: 1 No preemption victims found for incoming pod."
        );
        assert!(no.clear_nomination);
        let polite = pod(
            "q",
            "1",
            json!({"spec": {"priority": 100, "preemptionPolicy": "Never"}}),
        );
        let no = preempt(cl, &polite, Some(&state), &insufficient(&["n1"]), &mut rng).unwrap_err();
        assert_eq!(no.message, "not eligible due to preemptionPolicy=Never.");
        assert!(!no.clear_nomination);
    }
}
