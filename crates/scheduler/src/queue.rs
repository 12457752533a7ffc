//! The scheduling queue (upstream `PriorityQueue`): pods waiting for a node.
//!
//! - **active**: ready to schedule, highest priority first, then first come first served;
//! - **backoff**: failed recently, waiting 1 s doubling up to 10 s per attempt;
//! - **unschedulable**: fit nowhere; they wait for a change in their cluster that could help
//!   the plugins that rejected them (a node added or changed, a pod deleted...), or for the
//!   five-minute flush.
//!
//! Events are per cluster: a node added to cluster `a` never wakes pods of cluster `b`, so the
//! work an event causes does not grow with the number of clusters. A pod whose cluster changed
//! while it was being scheduled goes to backoff rather than unschedulable (upstream's move
//! request cycle), so no event is lost in the window. Heap entries are invalidated lazily by a
//! sequence number, so updates and deletions are O(1) and never search the heaps.

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::framework::PluginSet;
use crate::podinfo::{PodInfo, PodKey};

/// The first backoff (upstream `podInitialBackoffDuration`).
pub const INITIAL_BACKOFF: Duration = Duration::from_secs(1);
/// The longest backoff (upstream `podMaxBackoffDuration`).
pub const MAX_BACKOFF: Duration = Duration::from_secs(10);
/// How long a pod stays unschedulable without any event before it is retried anyway
/// (upstream `podMaxInUnschedulablePodsDuration`).
pub const MAX_UNSCHEDULABLE: Duration = Duration::from_secs(5 * 60);

/// A pod in the queue and its scheduling history.
#[derive(Debug, Clone)]
pub struct QueuedPod {
    pub info: Arc<PodInfo>,
    pub attempts: u32,
    /// The plugins that rejected the pod last time.
    pub unschedulable_plugins: PluginSet,
    pub last_failure: Option<Instant>,
    /// The scheduling cycle that popped the pod (while in flight).
    pub cycle: u64,
}

impl QueuedPod {
    fn backoff_until(&self) -> Option<Instant> {
        let failed = self.last_failure?;
        let exp = self.attempts.saturating_sub(1).min(16);
        let d = INITIAL_BACKOFF.saturating_mul(1 << exp).min(MAX_BACKOFF);
        Some(failed + d)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    Active(u64),
    Backoff(u64),
    Unschedulable(Instant),
    InFlight,
}

struct Entry {
    pod: QueuedPod,
    place: Place,
    /// Deleted while in flight: dropped when its cycle reports back.
    deleted: bool,
}

/// A cluster's unschedulable pods, and every plugin that rejected any of them (possibly
/// more than the pods still there): an event for other plugins skips the cluster at once.
#[derive(Default)]
struct Waiting {
    keys: HashSet<PodKey>,
    plugins: PluginSet,
}

#[derive(PartialEq, Eq)]
struct ActiveItem {
    priority: i32,
    seq: u64,
    key: PodKey,
}

impl Ord for ActiveItem {
    fn cmp(&self, other: &Self) -> Ordering {
        self.priority
            .cmp(&other.priority)
            .then_with(|| other.seq.cmp(&self.seq))
    }
}

impl PartialOrd for ActiveItem {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// The queue's state (callers wrap it in a lock; see [`crate::scheduler`]).
#[derive(Default)]
pub struct Queue {
    entries: HashMap<PodKey, Entry>,
    active: BinaryHeap<ActiveItem>,
    backoff: BinaryHeap<Reverse<(Instant, u64, PodKey)>>,
    unschedulable: HashMap<Arc<str>, Waiting>,
    /// Per cluster with pods in flight: how many, and the cycle of the last move request.
    in_flight: HashMap<Arc<str>, (usize, u64)>,
    seq: u64,
    cycle: u64,
}

impl Queue {
    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    fn push_active(&mut self, key: PodKey, mut pod: QueuedPod) {
        let seq = self.next_seq();
        self.active.push(ActiveItem {
            priority: pod.info.priority,
            seq,
            key: key.clone(),
        });
        pod.cycle = 0;
        self.entries.insert(
            key,
            Entry {
                pod,
                place: Place::Active(seq),
                deleted: false,
            },
        );
    }

    fn push_backoff(&mut self, key: PodKey, pod: QueuedPod, until: Instant) {
        let seq = self.next_seq();
        self.backoff.push(Reverse((until, seq, key.clone())));
        self.entries.insert(
            key,
            Entry {
                pod,
                place: Place::Backoff(seq),
                deleted: false,
            },
        );
    }

    /// Active if its backoff is over, backoff otherwise.
    fn push_ready(&mut self, key: PodKey, pod: QueuedPod, now: Instant) {
        match pod.backoff_until().filter(|u| *u > now) {
            Some(until) => self.push_backoff(key, pod, until),
            None => self.push_active(key, pod),
        }
    }

    fn take(&mut self, key: &PodKey) -> Option<Entry> {
        let e = self.entries.remove(key)?;
        if let Place::Unschedulable(_) = e.place
            && let Some(w) = self.unschedulable.get_mut(&key.cluster)
        {
            w.keys.remove(key);
            if w.keys.is_empty() {
                self.unschedulable.remove(&key.cluster);
            }
        }
        Some(e)
    }

    /// Adds a new pending pod, or updates one already queued. An update that changes what
    /// scheduling looks at retries an unschedulable pod.
    pub fn upsert(&mut self, info: Arc<PodInfo>, now: Instant) {
        let key = info.key.clone();
        match self.entries.get_mut(&key) {
            None => self.push_active(
                key,
                QueuedPod {
                    info,
                    attempts: 0,
                    unschedulable_plugins: PluginSet::default(),
                    last_failure: None,
                    cycle: 0,
                },
            ),
            Some(e) => match e.place {
                Place::InFlight | Place::Backoff(_) => {
                    e.pod.info = info;
                    e.deleted = false;
                }
                Place::Active(_) => {
                    let reprioritized = e.pod.info.priority != info.priority;
                    e.pod.info = info;
                    if reprioritized && let Some(e) = self.take(&key) {
                        self.push_active(key, e.pod);
                    }
                }
                Place::Unschedulable(_) => {
                    let changed = !e.pod.info.same_scheduling_inputs(&info);
                    e.pod.info = info;
                    if changed && let Some(e) = self.take(&key) {
                        self.push_ready(key, e.pod, now);
                    }
                }
            },
        }
    }

    /// Forgets a pod (deleted, bound elsewhere, no longer ours).
    pub fn delete(&mut self, key: &PodKey) {
        if let Some(mut e) = self.take(key)
            && e.place == Place::InFlight
        {
            // Keep the in-flight count right: the cycle still reports back.
            e.deleted = true;
            self.entries.insert(key.clone(), e);
        }
    }

    /// Forgets every pod of a cluster (its pods are no longer this scheduler's to place).
    pub fn delete_cluster(&mut self, cluster: &str) {
        let keys: Vec<PodKey> = self
            .entries
            .keys()
            .filter(|k| &*k.cluster == cluster)
            .cloned()
            .collect();
        for k in keys {
            self.delete(&k);
        }
    }

    /// Takes the next pod to schedule: the first active one, or when none is active the one
    /// whose backoff ends first (upstream 1.33's `SchedulerPopFromBackoffQ`: backoff keeps a
    /// failing pod from starving others, not an idle scheduler from working).
    pub fn pop(&mut self) -> Option<QueuedPod> {
        loop {
            let key = if let Some(item) = self.active.pop() {
                let valid = self
                    .entries
                    .get(&item.key)
                    .is_some_and(|e| e.place == Place::Active(item.seq));
                if !valid {
                    continue;
                }
                item.key
            } else if let Some(Reverse((_, seq, key))) = self.backoff.pop() {
                let valid = self
                    .entries
                    .get(&key)
                    .is_some_and(|e| e.place == Place::Backoff(seq));
                if !valid {
                    continue;
                }
                key
            } else {
                return None;
            };
            self.cycle += 1;
            let cycle = self.cycle;
            let e = self.entries.get_mut(&key)?;
            e.place = Place::InFlight;
            e.pod.attempts += 1;
            e.pod.cycle = cycle;
            let pod = e.pod.clone();
            self.in_flight
                .entry(key.cluster.clone())
                .or_insert((0, 0))
                .0 += 1;
            return Some(pod);
        }
    }

    fn finish(&mut self, key: &PodKey) -> Option<(QueuedPod, u64)> {
        let e = self.entries.remove(key)?;
        let mut move_cycle = 0;
        if let Some(f) = self.in_flight.get_mut(&key.cluster) {
            f.0 -= 1;
            move_cycle = f.1;
            if f.0 == 0 {
                self.in_flight.remove(&key.cluster);
            }
        }
        // A pod deleted while in flight is dropped.
        (!e.deleted).then_some((e.pod, move_cycle))
    }

    /// The pod was bound (or handed to the binder for good): it leaves the queue.
    pub fn done(&mut self, key: &PodKey) {
        self.finish(key);
    }

    /// The pod fits nowhere: it waits for an event helping `plugins`, unless its cluster
    /// changed during the cycle (then it backs off and retries).
    pub fn unschedulable(&mut self, key: &PodKey, plugins: PluginSet, now: Instant) {
        let Some((mut pod, move_cycle)) = self.finish(key) else {
            return;
        };
        pod.unschedulable_plugins = plugins;
        pod.last_failure = Some(now);
        if move_cycle >= pod.cycle || plugins.is_empty() {
            let until = pod.backoff_until().unwrap_or(now);
            self.push_backoff(key.clone(), pod, until);
        } else {
            let w = self.unschedulable.entry(key.cluster.clone()).or_default();
            w.keys.insert(key.clone());
            w.plugins.0 |= plugins.0;
            self.entries.insert(
                key.clone(),
                Entry {
                    pod,
                    place: Place::Unschedulable(now),
                    deleted: false,
                },
            );
        }
    }

    /// Scheduling or binding failed with an error: the pod backs off and retries.
    pub fn retry(&mut self, key: &PodKey, now: Instant) {
        self.unschedulable(key, PluginSet::default(), now);
    }

    /// Something changed in `cluster` that may help pods rejected by `plugins`.
    pub fn move_for_event(&mut self, cluster: &str, plugins: PluginSet, now: Instant) {
        if let Some(f) = self.in_flight.get_mut(cluster) {
            f.1 = self.cycle;
        }
        let Some(w) = self.unschedulable.get_mut(cluster) else {
            return;
        };
        if !w.plugins.intersects(plugins) {
            return;
        }
        let mut keys = Vec::new();
        let mut remaining = PluginSet::default();
        for k in &w.keys {
            let Some(e) = self.entries.get(k) else {
                continue;
            };
            if e.pod.unschedulable_plugins.intersects(plugins) {
                keys.push(k.clone());
            } else {
                remaining.0 |= e.pod.unschedulable_plugins.0;
            }
        }
        w.plugins = remaining;
        for key in keys {
            if let Some(e) = self.take(&key) {
                self.push_ready(key, e.pod, now);
            }
        }
    }

    /// Moves pods whose backoff is over to active; returns when the next backoff ends.
    pub fn flush_backoff(&mut self, now: Instant) -> Option<Instant> {
        while let Some(Reverse((until, seq, key))) = self.backoff.peek().cloned() {
            if until > now {
                break;
            }
            self.backoff.pop();
            let valid = self
                .entries
                .get(&key)
                .is_some_and(|e| e.place == Place::Backoff(seq));
            if valid && let Some(e) = self.take(&key) {
                self.push_active(key, e.pod);
            }
        }
        self.backoff.peek().map(|Reverse((until, _, _))| *until)
    }

    /// Retries pods unschedulable for longer than [`MAX_UNSCHEDULABLE`] without any event.
    pub fn flush_unschedulable(&mut self, now: Instant) {
        let stale: Vec<PodKey> = self
            .unschedulable
            .values()
            .flat_map(|w| &w.keys)
            .filter(|k| {
                self.entries.get(*k).is_some_and(|e| {
                    matches!(e.place, Place::Unschedulable(since) if now.duration_since(since) >= MAX_UNSCHEDULABLE)
                })
            })
            .cloned()
            .collect();
        for key in stale {
            if let Some(e) = self.take(&key) {
                self.push_ready(key, e.pod, now);
            }
        }
    }

    /// Whether a pod can be popped now.
    /// Whether [`Queue::pop`] may have a pod (active, or backing off).
    pub fn has_active(&self) -> bool {
        !self.active.is_empty() || !self.backoff.is_empty()
    }

    /// Whether the pod is queued (in any sub-queue or in flight).
    pub fn contains(&self, key: &PodKey) -> bool {
        self.entries.contains_key(key)
    }

    /// How many pods are queued, in flight included.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// How many pods wait as unschedulable.
    pub fn unschedulable_len(&self) -> usize {
        self.unschedulable.values().map(|w| w.keys.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::Plugin;
    use serde_json::json;

    fn pod(cluster: &str, name: &str, priority: i32) -> Arc<PodInfo> {
        let p = json!({"metadata": {"name": name, "namespace": "d"},
            "spec": {"priority": priority, "containers": [{"name": "c"}]}});
        Arc::new(PodInfo::new(
            &Arc::from(cluster),
            &serde_json::from_value(p).unwrap(),
        ))
    }

    fn fit() -> PluginSet {
        PluginSet::of(&[Plugin::NodeResourcesFit])
    }

    #[test]
    fn higher_priority_pops_first_then_first_come_first_served() {
        let mut q = Queue::default();
        let now = Instant::now();
        q.upsert(pod("a", "low", 0), now);
        q.upsert(pod("a", "first", 10), now);
        q.upsert(pod("a", "second", 10), now);
        let order: Vec<String> =
            std::iter::from_fn(|| q.pop().map(|p| p.info.key.name.clone())).collect();
        assert_eq!(order, vec!["first", "second", "low"]);
    }

    #[test]
    fn unschedulable_pods_wait_for_an_event_of_their_own_cluster() {
        let mut q = Queue::default();
        let t0 = Instant::now();
        q.upsert(pod("a", "p", 0), t0);
        q.upsert(pod("b", "r", 0), t0);
        let p = q.pop().unwrap();
        let r = q.pop().unwrap();
        q.unschedulable(&p.info.key, fit(), t0);
        q.unschedulable(&r.info.key, fit(), t0);
        assert_eq!(q.unschedulable_len(), 2);
        q.move_for_event("b", PluginSet::of(&[Plugin::TaintToleration]), t0);
        assert_eq!(q.unschedulable_len(), 2, "an unrelated plugin helps nobody");
        q.move_for_event("b", fit(), t0);
        assert_eq!(q.unschedulable_len(), 1, "only cluster b's pod moves");
        // Nothing else is active: the pod in backoff is taken at once.
        assert_eq!(q.pop().unwrap().info.key.name, "r");
    }

    #[test]
    fn each_event_moves_only_the_pods_its_plugins_can_help() {
        let mut q = Queue::default();
        let t0 = Instant::now();
        q.upsert(pod("a", "x", 0), t0);
        q.upsert(pod("a", "y", 0), t0);
        let x = q.pop().unwrap();
        let y = q.pop().unwrap();
        let taint = PluginSet::of(&[Plugin::TaintToleration]);
        q.unschedulable(&x.info.key, fit(), t0);
        q.unschedulable(&y.info.key, taint, t0);
        q.move_for_event("a", taint, t0);
        assert_eq!(q.unschedulable_len(), 1);
        q.move_for_event("a", taint, t0);
        assert_eq!(q.unschedulable_len(), 1, "x waits for room, not for taints");
        q.move_for_event("a", PluginSet::ALL, t0);
        assert_eq!(q.unschedulable_len(), 0);
    }

    #[test]
    fn an_active_pod_goes_before_one_in_backoff_and_backoff_goes_by_its_end() {
        let mut q = Queue::default();
        let t0 = Instant::now();
        q.upsert(pod("a", "p", 0), t0);
        q.upsert(pod("a", "r", 0), t0);
        let p = q.pop().unwrap();
        let r = q.pop().unwrap();
        // p fails twice (a longer backoff), r once; both back off after an in-flight event.
        q.move_for_event("a", fit(), t0);
        q.unschedulable(&p.info.key, fit(), t0);
        q.move_for_event("a", fit(), t0);
        q.unschedulable(&r.info.key, fit(), t0 + Duration::from_millis(10));
        q.upsert(pod("a", "new", 0), t0);
        assert_eq!(q.pop().unwrap().info.key.name, "new", "active first");
        let first = q.pop().unwrap().info.key.name.clone();
        let second = q.pop().unwrap().info.key.name.clone();
        assert_eq!([first.as_str(), second.as_str()], ["p", "r"]);
        assert!(q.pop().is_none());
        assert!(!q.has_active());
    }

    #[test]
    fn an_event_during_the_cycle_sends_the_pod_to_backoff_not_unschedulable() {
        let mut q = Queue::default();
        let t0 = Instant::now();
        q.upsert(pod("a", "p", 0), t0);
        let p = q.pop().unwrap();
        q.move_for_event("a", fit(), t0);
        q.unschedulable(&p.info.key, fit(), t0);
        assert_eq!(q.unschedulable_len(), 0);
        assert!(q.contains(&p.info.key));
        let next = q.flush_backoff(t0).unwrap();
        assert_eq!(next, t0 + INITIAL_BACKOFF);
    }

    #[test]
    fn backoff_doubles_per_attempt_up_to_the_maximum() {
        let t0 = Instant::now();
        let mut qp = QueuedPod {
            info: pod("a", "p", 0),
            attempts: 1,
            unschedulable_plugins: PluginSet::default(),
            last_failure: Some(t0),
            cycle: 0,
        };
        assert_eq!(qp.backoff_until(), Some(t0 + Duration::from_secs(1)));
        qp.attempts = 3;
        assert_eq!(qp.backoff_until(), Some(t0 + Duration::from_secs(4)));
        qp.attempts = 30;
        assert_eq!(qp.backoff_until(), Some(t0 + MAX_BACKOFF));
    }

    #[test]
    fn a_pod_deleted_in_flight_is_dropped_when_its_cycle_ends() {
        let mut q = Queue::default();
        let t0 = Instant::now();
        q.upsert(pod("a", "p", 0), t0);
        let p = q.pop().unwrap();
        q.delete(&p.info.key);
        q.unschedulable(&p.info.key, fit(), t0);
        assert!(q.is_empty());
    }

    #[test]
    fn unschedulable_pods_are_retried_after_five_minutes_or_when_their_spec_changes() {
        let mut q = Queue::default();
        let t0 = Instant::now();
        q.upsert(pod("a", "p", 0), t0);
        q.upsert(pod("a", "r", 0), t0);
        for _ in 0..2 {
            let p = q.pop().unwrap();
            q.unschedulable(&p.info.key, fit(), t0);
        }
        q.upsert(pod("a", "r", 5), t0 + Duration::from_secs(2));
        assert_eq!(q.pop().unwrap().info.key.name, "r");
        q.flush_unschedulable(t0 + MAX_UNSCHEDULABLE);
        assert_eq!(q.pop().unwrap().info.key.name, "p");
    }
}
