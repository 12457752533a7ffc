//! The vocabulary of a scheduling cycle: plugin statuses, the per-node diagnosis of a failed
//! cycle and its message (upstream `framework.Status`, `Diagnosis`, `FitError`).
//!
//! The message format is kube-scheduler 1.33's: `0/N nodes are available: ` then the PreFilter
//! message, or the per-node reasons counted and sorted as strings (`3 Insufficient cpu, 1
//! node(s) were unschedulable`), each part ending in `.`, then the PostFilter (preemption)
//! message after a space: `0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes
//! are available: 3 No preemption victims found for incoming pod.`

use std::borrow::Cow;
use std::collections::BTreeMap;

/// The highest score a plugin gives a node.
pub const MAX_NODE_SCORE: i64 = 100;

/// Why a node was rejected.
pub type Reason = Cow<'static, str>;

/// A plugin, as a bit (a pod remembers which plugins rejected it, so only events that can
/// help those plugins requeue it: upstream's queueing hints, coarsely).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u16)]
pub enum Plugin {
    NodeUnschedulable = 1,
    NodeName = 1 << 1,
    TaintToleration = 1 << 2,
    NodeAffinity = 1 << 3,
    NodePorts = 1 << 4,
    NodeResourcesFit = 1 << 5,
    VolumeBinding = 1 << 6,
    PodTopologySpread = 1 << 7,
    InterPodAffinity = 1 << 8,
    /// No node exists at all.
    NoNodes = 1 << 9,
}

/// A set of plugins.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PluginSet(pub u16);

impl PluginSet {
    /// Every plugin.
    pub const ALL: PluginSet = PluginSet(u16::MAX);

    pub fn of(plugins: &[Plugin]) -> PluginSet {
        PluginSet(plugins.iter().fold(0, |acc, p| acc | *p as u16))
    }

    pub fn insert(&mut self, p: Plugin) {
        self.0 |= p as u16;
    }

    pub fn intersects(self, other: PluginSet) -> bool {
        self.0 & other.0 != 0
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
}

/// How bad a rejection is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    /// Removing pods (preemption) could make the node fit.
    Unschedulable,
    /// Nothing done to the node's pods would help.
    UnschedulableAndUnresolvable,
}

/// A rejection: its code, the plugin and the reasons (one or more).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    pub code: Code,
    pub plugin: Plugin,
    pub reasons: Vec<Reason>,
}

impl Status {
    pub fn new(code: Code, plugin: Plugin, reason: impl Into<Reason>) -> Status {
        Status {
            code,
            plugin,
            reasons: vec![reason.into()],
        }
    }

    pub fn unschedulable(plugin: Plugin, reason: impl Into<Reason>) -> Status {
        Status::new(Code::Unschedulable, plugin, reason)
    }

    pub fn unresolvable(plugin: Plugin, reason: impl Into<Reason>) -> Status {
        Status::new(Code::UnschedulableAndUnresolvable, plugin, reason)
    }
}

/// Why a pod fits nowhere: the status of every node that was tried, or a PreFilter rejection
/// that applies to every node.
#[derive(Debug, Clone, Default)]
pub struct Diagnosis {
    /// Rejections of nodes, by node name.
    pub node_statuses: Vec<(std::sync::Arc<str>, Status)>,
    /// A PreFilter rejection (then every node has this status).
    pub pre_filter: Option<Status>,
    /// The plugins that rejected the pod.
    pub plugins: PluginSet,
    /// The status of nodes absent from `node_statuses` (preemption's "not helpful").
    pub absent: Option<Reason>,
}

impl Diagnosis {
    /// Records a node's rejection.
    pub fn reject(&mut self, node: std::sync::Arc<str>, status: Status) {
        self.plugins.insert(status.plugin);
        self.node_statuses.push((node, status));
    }

    /// The status of a node (the PreFilter's when it rejected every node).
    pub fn status_of(&self, node: &str) -> Option<&Status> {
        self.pre_filter.as_ref().or_else(|| {
            self.node_statuses
                .iter()
                .find(|(n, _)| &**n == node)
                .map(|(_, s)| s)
        })
    }
}

/// A failed cycle: how many nodes there were and why none fit.
#[derive(Debug, Clone, Default)]
pub struct FitError {
    pub num_all_nodes: usize,
    pub diagnosis: Diagnosis,
    /// The PostFilter (preemption) message, already prefixed with `preemption: `.
    pub post_filter: Option<String>,
}

impl FitError {
    /// The message of the `PodScheduled` condition and the `FailedScheduling` event.
    pub fn message(&self) -> String {
        let mut msg = format!("0/{} nodes are available:", self.num_all_nodes);
        if let Some(pf) = &self.diagnosis.pre_filter {
            msg.push_str(&format!(" {}.", pf.reasons.join(", ")));
        } else {
            let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
            for (_, s) in &self.diagnosis.node_statuses {
                for r in &s.reasons {
                    *counts.entry(r).or_default() += 1;
                }
            }
            let explicit = self.diagnosis.node_statuses.len();
            if let Some(absent) = &self.diagnosis.absent
                && explicit < self.num_all_nodes
            {
                *counts.entry(absent).or_default() += self.num_all_nodes - explicit;
            }
            // Upstream sorts the formatted "<count> <reason>" strings, not the reasons.
            let mut parts: Vec<String> = counts.iter().map(|(r, n)| format!("{n} {r}")).collect();
            parts.sort();
            if !parts.is_empty() {
                msg.push_str(&format!(" {}.", parts.join(", ")));
            }
        }
        if let Some(pf) = &self.post_filter {
            msg.push(' ');
            msg.push_str(pf);
        }
        msg
    }
}

/// Upstream `DefaultNormalizeScore`: scales scores to 0..=100 by the maximum, reversed when
/// fewer is better.
pub fn default_normalize(scores: &mut [i64], reverse: bool) {
    let max = scores.iter().copied().max().unwrap_or(0);
    if max == 0 {
        if reverse {
            scores.iter_mut().for_each(|s| *s = MAX_NODE_SCORE);
        }
        return;
    }
    for s in scores.iter_mut() {
        let v = MAX_NODE_SCORE * *s / max;
        *s = if reverse { MAX_NODE_SCORE - v } else { v };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn fit_error(nodes: &[(&str, Status)], total: usize) -> FitError {
        let mut d = Diagnosis::default();
        for (n, s) in nodes {
            d.reject(Arc::from(*n), s.clone());
        }
        FitError {
            num_all_nodes: total,
            diagnosis: d,
            post_filter: None,
        }
    }

    #[test]
    fn reasons_are_counted_and_sorted_as_formatted_strings() {
        let cpu = Status {
            code: Code::Unschedulable,
            plugin: Plugin::NodeResourcesFit,
            reasons: vec!["Insufficient cpu".into(), "Insufficient memory".into()],
        };
        let taint = Status::unresolvable(
            Plugin::TaintToleration,
            "node(s) had untolerated taint {dedicated: gpu}",
        );
        let mut e = fit_error(&[("a", cpu.clone()), ("b", cpu), ("c", taint)], 3);
        e.post_filter = Some(
            "preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod."
                .into(),
        );
        assert_eq!(
            e.message(),
            "0/3 nodes are available: 1 node(s) had untolerated taint {dedicated: gpu}, \
             2 Insufficient cpu, 2 Insufficient memory. preemption: 0/3 nodes are available: \
             3 No preemption victims found for incoming pod."
        );
    }

    #[test]
    fn a_prefilter_rejection_replaces_the_node_reasons() {
        let mut e = fit_error(&[], 3);
        e.diagnosis.pre_filter = Some(Status::unresolvable(
            Plugin::VolumeBinding,
            "persistentvolumeclaim \"data\" not found",
        ));
        assert_eq!(
            e.message(),
            "0/3 nodes are available: persistentvolumeclaim \"data\" not found."
        );
    }

    #[test]
    fn absent_nodes_count_with_the_absent_reason() {
        let mut e = fit_error(&[], 4);
        e.diagnosis.absent = Some("Preemption is not helpful for scheduling".into());
        assert_eq!(
            e.message(),
            "0/4 nodes are available: 4 Preemption is not helpful for scheduling."
        );
    }

    #[test]
    fn default_normalize_scales_and_reverses() {
        let mut s = vec![0, 5, 10];
        default_normalize(&mut s, false);
        assert_eq!(s, vec![0, 50, 100]);
        let mut r = vec![0, 1, 2];
        default_normalize(&mut r, true);
        assert_eq!(r, vec![100, 50, 0]);
        let mut z = vec![0, 0];
        default_normalize(&mut z, true);
        assert_eq!(z, vec![100, 100]);
    }

    #[test]
    fn plugin_sets_intersect_by_bits() {
        let s = PluginSet::of(&[Plugin::NodeResourcesFit, Plugin::NodePorts]);
        assert!(s.intersects(PluginSet::of(&[Plugin::NodePorts])));
        assert!(!s.intersects(PluginSet::of(&[Plugin::TaintToleration])));
        assert!(PluginSet::ALL.intersects(s));
    }
}
