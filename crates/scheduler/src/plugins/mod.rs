//! The default plugins of kube-scheduler's profile, wired in upstream's order.
//!
//! Filters run per node in the default profile's order and stop at the first rejection (so a
//! node has the reasons of one plugin): NodeUnschedulable, NodeName, TaintToleration,
//! NodeAffinity, NodePorts, NodeResourcesFit, VolumeBinding, PodTopologySpread,
//! InterPodAffinity. Scores are weighted as the default profile weighs them: TaintToleration
//! 3, NodeAffinity 2, PodTopologySpread 2, InterPodAffinity 2, NodeResourcesFit
//! (LeastAllocated) 1, BalancedAllocation 1. A score that is the same for every node cannot
//! change the choice, so plugins with nothing to say are skipped.

pub mod fit;
pub mod interpod;
pub mod nodeaffinity;
pub mod spread;
pub mod taints;
pub mod volume;

use crate::cache::ClusterState;
use crate::framework::{Status, default_normalize};
use crate::nodeinfo::NodeInfo;
use crate::podinfo::PodInfo;

/// What PreFilter computed for one pod in one cycle.
#[derive(Clone)]
pub struct CycleState<'a> {
    pub pod: &'a PodInfo,
    pub cluster: &'a ClusterState,
    pub spread: Option<spread::FilterState>,
    pub interpod: Option<interpod::FilterState>,
    pub volumes: Option<volume::FilterState>,
}

impl<'a> CycleState<'a> {
    /// PreFilter: the per-pod work done once before looking at nodes. An error rejects the pod
    /// on every node.
    pub fn new(pod: &'a PodInfo, cluster: &'a ClusterState) -> Result<Self, Status> {
        Ok(CycleState {
            pod,
            cluster,
            volumes: volume::FilterState::new(pod, cluster)?,
            spread: spread::FilterState::new(pod, cluster),
            interpod: interpod::FilterState::new(pod, cluster),
        })
    }

    /// Runs the filters on one node (a candidate: it has a `Node`).
    pub fn filter(&self, node: &NodeInfo) -> Result<(), Status> {
        let Some(spec) = node.node.as_deref() else {
            return Err(Status::unresolvable(
                crate::framework::Plugin::NodeName,
                "node(s) not found",
            ));
        };
        let pod = self.pod;
        taints::filter_unschedulable(pod, spec)?;
        nodeaffinity::filter_node_name(pod, &node.name)?;
        taints::filter(pod, spec)?;
        nodeaffinity::filter(pod, &node.name, spec)?;
        nodeaffinity::filter_ports(pod, node)?;
        fit::filter(pod, node, &spec.allocatable)?;
        if let Some(v) = &self.volumes {
            v.filter(node)?;
        }
        if let Some(s) = &self.spread {
            s.filter(pod, node)?;
        }
        if let Some(i) = &self.interpod {
            i.filter(pod, node)?;
        }
        Ok(())
    }

    /// Runs the filters as if `extra` pods were on the node too (nominated pods of higher or
    /// equal priority; upstream `RunFilterPluginsWithNominatedPods`), then without them.
    pub fn filter_with(
        &self,
        node: &NodeInfo,
        extra: &[std::sync::Arc<PodInfo>],
    ) -> Result<(), Status> {
        if extra.is_empty() {
            return self.filter(node);
        }
        let mut with = node.clone();
        let mut state = self.clone();
        for p in extra {
            with.add_pod(p.clone());
            if let Some(s) = &mut state.spread {
                s.update(self.pod, p, &with, 1);
            }
            if let Some(i) = &mut state.interpod {
                i.update(self.pod, p, &with, self.cluster, 1);
            }
        }
        state.filter(&with)?;
        self.filter(node)
    }

    /// The total weighted score of each feasible node.
    pub fn score(&self, feasible: &[&NodeInfo]) -> Vec<i64> {
        let pod = self.pod;
        let mut total = vec![0i64; feasible.len()];
        let spec = |n: &NodeInfo| n.node.clone();
        let mut add = |scores: Vec<i64>, weight: i64| {
            for (t, s) in total.iter_mut().zip(scores) {
                *t += s * weight;
            }
        };
        let allocs: Vec<_> = feasible.iter().map(|n| spec(n)).collect();
        add(
            feasible
                .iter()
                .zip(&allocs)
                .map(|(n, s)| {
                    s.as_ref()
                        .map_or(0, |s| fit::least_allocated(pod, n, &s.allocatable))
                })
                .collect(),
            1,
        );
        if fit::balanced_applies(pod) {
            add(
                feasible
                    .iter()
                    .zip(&allocs)
                    .map(|(n, s)| {
                        s.as_ref()
                            .map_or(0, |s| fit::balanced(pod, n, &s.allocatable))
                    })
                    .collect(),
                1,
            );
        }
        let mut taint: Vec<i64> = allocs
            .iter()
            .map(|s| s.as_ref().map_or(0, |s| taints::score(pod, s)))
            .collect();
        if taint.iter().any(|s| *s > 0) {
            default_normalize(&mut taint, true);
            add(taint, 3);
        }
        if !pod.preferred_node_affinity.is_empty() {
            let mut na: Vec<i64> = feasible
                .iter()
                .zip(&allocs)
                .map(|(n, s)| {
                    s.as_ref()
                        .map_or(0, |s| nodeaffinity::score(pod, &n.name, s))
                })
                .collect();
            default_normalize(&mut na, false);
            add(na, 2);
        }
        if let Some(s) = spread::score(pod, self.cluster, feasible) {
            add(s, 2);
        }
        if let Some(s) = interpod::score(pod, self.cluster, feasible) {
            add(s, 2);
        }
        total
    }
}
