//! The garbage collector's dependency graph (upstream `graph.go` and `graph_builder.go`): one
//! node per observed object of every watched resource in every cluster, edges from owners to
//! dependents by uid, and the rules that turn an observed change into work.
//!
//! Owners and dependents are always in the same logical cluster, so edges are keyed by
//! (cluster, uid). A dependent may name an owner that was never observed (or is gone): the
//! edge is kept in the dependents index all the same, and the dependent is queued to check
//! whether its owner exists. Pure data: no I/O, unit-tested.

use runtime::informer::ClusterName;
use std::collections::{HashMap, HashSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

/// The finalizer asking for dependents to be deleted before the owner.
pub const FOREGROUND: &str = "foregroundDeletion";
/// The finalizer asking for dependents to be orphaned before the owner is deleted.
pub const ORPHAN: &str = "orphan";

/// (cluster, uid): a node's identity in the graph.
pub type Uid = (ClusterName, String);

/// What an object is and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub cluster: ClusterName,
    pub api_version: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

/// What the graph knows of an object.
#[derive(Debug, Clone)]
pub struct Node {
    pub identity: Identity,
    pub owners: Vec<OwnerReference>,
    /// deletionTimestamp is set.
    pub being_deleted: bool,
    /// Being deleted with the foregroundDeletion finalizer.
    pub deleting_dependents: bool,
    /// Being deleted with the orphan finalizer.
    pub orphaning: bool,
}

/// Work the garbage collector must do.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Work {
    /// Check whether the object should be deleted (its owners are gone or going), or finish
    /// a foreground deletion.
    AttemptToDelete(ClusterName, String),
    /// Remove the object's dependents' references to it, then its orphan finalizer.
    AttemptToOrphan(ClusterName, String),
}

/// The dependency graph.
#[derive(Debug, Default)]
pub struct Graph {
    nodes: HashMap<Uid, Node>,
    /// Owner → dependents, including owners never observed.
    dependents: HashMap<Uid, HashSet<String>>,
}

/// The group of an `apiVersion` (`apps/v1` → `apps`, `v1` → core).
pub fn group_of(api_version: &str) -> &str {
    api_version.rsplit_once('/').map(|(g, _)| g).unwrap_or("")
}

fn delete_work(id: &Uid) -> Work {
    Work::AttemptToDelete(id.0.clone(), id.1.clone())
}

impl Graph {
    pub fn get(&self, cluster: &str, uid: &str) -> Option<&Node> {
        self.nodes
            .get(&(ClusterName::from(cluster), uid.to_string()))
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The dependents of an owner that still exist in the graph.
    pub fn dependents(&self, cluster: &str, uid: &str) -> Vec<Node> {
        self.dependents
            .get(&(ClusterName::from(cluster), uid.to_string()))
            .into_iter()
            .flatten()
            .filter_map(|d| self.get(cluster, d).cloned())
            .collect()
    }

    /// Dependents that reference the owner with `blockOwnerDeletion`.
    pub fn blocking_dependents(&self, cluster: &str, uid: &str) -> Vec<Node> {
        self.dependents(cluster, uid)
            .into_iter()
            .filter(|d| {
                d.owners
                    .iter()
                    .any(|r| r.uid == uid && r.block_owner_deletion == Some(true))
            })
            .collect()
    }

    /// Records an added or updated object; the work it causes.
    pub fn upsert(&mut self, node: Node, finalizers: &[String]) -> Vec<Work> {
        let id: Uid = (node.identity.cluster.clone(), node.identity.uid.clone());
        let mut work = Vec::new();
        let mut node = node;
        node.deleting_dependents = node.being_deleted && finalizers.iter().any(|f| f == FOREGROUND);
        node.orphaning = node.being_deleted && finalizers.iter().any(|f| f == ORPHAN);
        let old = self.nodes.get(&id).cloned();
        let old_owners: Vec<OwnerReference> =
            old.as_ref().map(|o| o.owners.clone()).unwrap_or_default();
        // Edges.
        for r in &old_owners {
            if !node.owners.iter().any(|n| n.uid == r.uid) {
                let owner = (id.0.clone(), r.uid.clone());
                if let Some(set) = self.dependents.get_mut(&owner) {
                    set.remove(&id.1);
                    if set.is_empty() {
                        self.dependents.remove(&owner);
                    }
                }
                // An owner waiting for its dependents may be done now.
                if self
                    .nodes
                    .get(&owner)
                    .is_some_and(|o| o.deleting_dependents)
                {
                    work.push(delete_work(&owner));
                }
            }
        }
        for r in &node.owners {
            let owner = (id.0.clone(), r.uid.clone());
            self.dependents
                .entry(owner.clone())
                .or_default()
                .insert(id.1.clone());
            let changed_block = old_owners
                .iter()
                .find(|o| o.uid == r.uid)
                .is_none_or(|o| o.block_owner_deletion != r.block_owner_deletion);
            if changed_block
                && self
                    .nodes
                    .get(&owner)
                    .is_some_and(|o| o.deleting_dependents)
            {
                work.push(delete_work(&owner));
            }
        }
        // The dependent itself: check its owners when they are new to it, absent or going.
        let owners_changed = old.is_none()
            || old_owners.len() != node.owners.len()
            || old_owners
                .iter()
                .zip(&node.owners)
                .any(|(a, b)| a.uid != b.uid);
        let owner_missing_or_going = node.owners.iter().any(|r| {
            self.nodes
                .get(&(id.0.clone(), r.uid.clone()))
                .is_none_or(|o| o.being_deleted)
        });
        if !node.owners.is_empty() && (owners_changed || owner_missing_or_going) {
            work.push(delete_work(&id));
        }
        let started_foreground =
            node.deleting_dependents && !old.as_ref().is_some_and(|o| o.deleting_dependents);
        if node.deleting_dependents {
            work.push(delete_work(&id));
        }
        if started_foreground
            || (node.being_deleted && !old.as_ref().is_some_and(|o| o.being_deleted))
        {
            // Dependents of an owner going away must look at it again.
            for d in self.dependents.get(&id).into_iter().flatten() {
                work.push(delete_work(&(id.0.clone(), d.clone())));
            }
        }
        if node.orphaning {
            work.push(Work::AttemptToOrphan(id.0.clone(), id.1.clone()));
        }
        self.nodes.insert(id, node);
        work.sort();
        work.dedup();
        work
    }

    /// Work for the dependents in `cluster` of owners of `group`/`kind`: that kind just became
    /// known (a CRD was established), so owners that could not be looked up can be now.
    pub fn dependents_of_kind(&self, cluster: &str, group: &str, kind: &str) -> Vec<Work> {
        let mut work: Vec<Work> = self
            .nodes
            .iter()
            .filter(|((c, _), n)| {
                c == cluster
                    && n.owners
                        .iter()
                        .any(|r| r.kind == kind && group_of(&r.api_version) == group)
            })
            .map(|(id, _)| delete_work(id))
            .collect();
        work.sort();
        work
    }

    /// Forgets every object of `group`/`kind` in `cluster` (its resource is no longer served
    /// there); the work their removal causes.
    pub fn remove_kind(&mut self, cluster: &str, group: &str, kind: &str) -> Vec<Work> {
        let gone: Vec<String> = self
            .nodes
            .iter()
            .filter(|((c, _), n)| {
                c == cluster
                    && n.identity.kind == kind
                    && group_of(&n.identity.api_version) == group
            })
            .map(|((_, uid), _)| uid.clone())
            .collect();
        let mut work: Vec<Work> = gone
            .iter()
            .flat_map(|uid| self.remove(cluster, uid))
            .collect();
        work.sort();
        work.dedup();
        work
    }

    /// Records a deleted object; the work it causes.
    pub fn remove(&mut self, cluster: &str, uid: &str) -> Vec<Work> {
        let id: Uid = (ClusterName::from(cluster), uid.to_string());
        let mut work = Vec::new();
        if let Some(node) = self.nodes.remove(&id) {
            for r in &node.owners {
                let owner = (id.0.clone(), r.uid.clone());
                if let Some(set) = self.dependents.get_mut(&owner) {
                    set.remove(uid);
                    if set.is_empty() {
                        self.dependents.remove(&owner);
                    }
                }
                if self
                    .nodes
                    .get(&owner)
                    .is_some_and(|o| o.deleting_dependents)
                {
                    work.push(delete_work(&owner));
                }
            }
        }
        // Its dependents lost their owner.
        for d in self.dependents.get(&id).into_iter().flatten() {
            work.push(delete_work(&(id.0.clone(), d.clone())));
        }
        work.sort();
        work.dedup();
        work
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(uid: &str, owners: &[(&str, bool)], deleting: bool) -> Node {
        Node {
            identity: Identity {
                cluster: "c".into(),
                api_version: "v1".into(),
                kind: "Pod".into(),
                namespace: "ns".into(),
                name: uid.into(),
                uid: uid.into(),
            },
            owners: owners
                .iter()
                .map(|(u, block)| OwnerReference {
                    uid: (*u).into(),
                    block_owner_deletion: Some(*block),
                    ..Default::default()
                })
                .collect(),
            being_deleted: deleting,
            deleting_dependents: false,
            orphaning: false,
        }
    }

    fn del(uid: &str) -> Work {
        Work::AttemptToDelete("c".into(), uid.into())
    }

    #[test]
    fn a_dependent_of_an_unseen_owner_is_checked() {
        let mut g = Graph::default();
        assert_eq!(
            g.upsert(node("pod", &[("rs", true)], false), &[]),
            vec![del("pod")]
        );
        assert!(g.upsert(node("rs", &[], false), &[]).is_empty());
        assert!(
            g.upsert(node("pod", &[("rs", true)], false), &[])
                .is_empty(),
            "an unchanged dependent of a present owner causes no work"
        );
    }

    #[test]
    fn deleting_an_owner_queues_its_dependents() {
        let mut g = Graph::default();
        g.upsert(node("rs", &[], false), &[]);
        g.upsert(node("pod", &[("rs", true)], false), &[]);
        assert_eq!(g.remove("c", "rs"), vec![del("pod")]);
    }

    #[test]
    fn foreground_deletion_waits_for_blocking_dependents_only() {
        let mut g = Graph::default();
        g.upsert(node("rs", &[], false), &[]);
        g.upsert(node("a", &[("rs", true)], false), &[]);
        g.upsert(node("b", &[("rs", false)], false), &[]);
        let work = g.upsert(node("rs", &[], true), &[FOREGROUND.to_string()]);
        assert_eq!(work, vec![del("a"), del("b"), del("rs")]);
        let blocking: Vec<String> = g
            .blocking_dependents("c", "rs")
            .into_iter()
            .map(|n| n.identity.uid)
            .collect();
        assert_eq!(blocking, vec!["a".to_string()]);
        assert_eq!(
            g.remove("c", "a"),
            vec![del("rs")],
            "the owner is looked at again"
        );
    }

    #[test]
    fn an_orphan_finalizer_queues_orphaning() {
        let mut g = Graph::default();
        let work = g.upsert(node("d", &[], true), &[ORPHAN.to_string()]);
        assert_eq!(work, vec![Work::AttemptToOrphan("c".into(), "d".into())]);
    }

    #[test]
    fn clusters_do_not_share_uids() {
        let mut g = Graph::default();
        g.upsert(node("x", &[], false), &[]);
        assert!(g.get("c", "x").is_some());
        assert!(g.get("other", "x").is_none());
    }

    #[test]
    fn a_kind_becoming_known_requeues_its_dependents_and_a_kind_going_away_forgets_its_objects() {
        let mut g = Graph::default();
        let mut owner = node("widget", &[], false);
        owner.identity.api_version = "example.com/v1".into();
        owner.identity.kind = "Widget".into();
        g.upsert(owner, &[]);
        let mut child = node("child", &[("widget", false)], false);
        child.owners[0].api_version = "example.com/v1".into();
        child.owners[0].kind = "Widget".into();
        g.upsert(child, &[]);
        g.upsert(node("other", &[("x", false)], false), &[]);
        assert_eq!(
            g.dependents_of_kind("c", "example.com", "Widget"),
            vec![Work::AttemptToDelete("c".into(), "child".into())]
        );
        assert!(
            g.dependents_of_kind("elsewhere", "example.com", "Widget")
                .is_empty()
        );
        let work = g.remove_kind("c", "example.com", "Widget");
        assert!(g.get("c", "widget").is_none());
        assert!(work.contains(&Work::AttemptToDelete("c".into(), "child".into())));
    }
}
