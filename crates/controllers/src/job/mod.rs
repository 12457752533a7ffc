//! The Job controller (upstream `pkg/controller/job`): runs a Job's pods to completion and
//! reports its status.
//!
//! Pods are tracked with the `batch.kubernetes.io/job-tracking` finalizer, as upstream does
//! since 1.26: a finished pod's uid is first written to `status.uncountedTerminatedPods`, then
//! its finalizer is removed, then it moves into `succeeded`/`failed` (so no pod is counted
//! twice or lost if the controller stops in between). The Job ends like upstream 1.31+: a
//! `FailureTarget` (`BackoffLimitExceeded`, `DeadlineExceeded`, `PodFailurePolicy`) or
//! `SuccessCriteriaMet` condition first, the remaining pods are deleted, and `Failed` or
//! `Complete` (with `completionTime`) once none is left. Failed pods are replaced after
//! upstream's exponential back-off (10 s doubling, at most 10 min) measured on the injected
//! clock. A pod being deleted counts as failed (upstream waits for the kubelet to mark it
//! Failed; virtual nodes may not).
//!
//! [`sync`] holds the reconcile, [`pods`] pod construction and indexes, [`policy`] the pod
//! failure policy and conditions.

pub mod pods;
pub mod policy;
mod sync;
mod writes;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use parking_lot::Mutex;

use crate::clock::SharedClock;
use crate::expectations::Expectations;
use crate::podutil;
use runtime::client::ClusterClients;
use runtime::error::Result;
use runtime::informer::{Change, ObjectKey, Store};
use runtime::queue::Queue;
use runtime::shared::Informers;

pub use pods::{COMPLETION_INDEX, TRACKING_FINALIZER};

/// Consecutive pod failures of a Job since its last success (upstream's backoff record).
#[derive(Debug, Clone, Copy)]
struct Backoff {
    failures: u32,
    last: Timestamp,
}

/// The Job controller.
pub struct JobController {
    clients: ClusterClients,
    events: runtime::events::Recorder,
    jobs: Store<Job>,
    pods: Store<Pod>,
    expectations: Arc<Expectations>,
    queue: Arc<Queue<ObjectKey>>,
    clock: SharedClock,
    /// Pods (by uid) whose finalizer this controller removed, until the informer shows it:
    /// a stale pod must not be counted again.
    finalized: Arc<Mutex<HashSet<String>>>,
    backoff: Mutex<HashMap<ObjectKey, Backoff>>,
}

fn owner_key(pod_key: &ObjectKey, pod: &Pod) -> Option<ObjectKey> {
    let r = podutil::controller_ref(&pod.metadata)?;
    (r.kind == "Job" && r.api_version.starts_with("batch/"))
        .then(|| ObjectKey::new(&pod_key.cluster, &pod_key.namespace, &r.name))
}

fn has_tracking_finalizer(pod: &Pod) -> bool {
    pod.metadata
        .finalizers
        .as_deref()
        .unwrap_or_default()
        .iter()
        .any(|f| f == TRACKING_FINALIZER)
}

impl JobController {
    pub fn new(informers: &Informers, clock: SharedClock) -> Result<Arc<Self>> {
        let queue: Arc<Queue<ObjectKey>> = Queue::new();
        let expectations = Arc::new(Expectations::default());
        let finalized: Arc<Mutex<HashSet<String>>> = Arc::default();
        let jobs_inf = informers.get::<Job>()?;
        let pods_inf = informers.get::<Pod>()?;
        let jobs = jobs_inf.store();
        let (q, e) = (queue.clone(), expectations.clone());
        jobs_inf.on_change(move |c| {
            if let Change::Deleted(k, _) = c {
                e.forget(k);
            }
            q.add(c.key().clone());
        });
        let (q, e, s, f) = (
            queue.clone(),
            expectations.clone(),
            jobs.clone(),
            finalized.clone(),
        );
        pods_inf.on_change(move |c| {
            let (key, pod) = (c.key(), c.object());
            let uid = pod.metadata.uid.clone().unwrap_or_default();
            if matches!(c, Change::Deleted(..)) || !has_tracking_finalizer(pod) {
                f.lock().remove(&uid);
            }
            let Some(owner) = owner_key(key, pod) else {
                // An orphan may be adopted by a Job whose selector matches it.
                let labels = podutil::labels(&pod.metadata);
                for job in s.list_namespace(&key.cluster, &key.namespace) {
                    let sel = job.spec.as_ref().and_then(|s| s.selector.as_ref());
                    if podutil::selector_matches(sel, &labels) {
                        let name = job.metadata.name.as_deref().unwrap_or_default();
                        q.add(ObjectKey::new(&key.cluster, &key.namespace, name));
                    }
                }
                return;
            };
            match c {
                Change::Added(..) if pod.metadata.deletion_timestamp.is_none() => {
                    e.creation_observed(&owner)
                }
                Change::Added(..) | Change::Deleted(..) => e.deletion_observed(&owner, &uid),
                Change::Updated { new, .. } if new.metadata.deletion_timestamp.is_some() => {
                    e.deletion_observed(&owner, &uid)
                }
                Change::Updated { .. } => {}
            }
            q.add(owner);
        });
        let (q, s) = (queue.clone(), jobs.clone());
        clock.on_jump(Arc::new(move || {
            s.keys().into_iter().for_each(|k| q.add(k))
        }));
        Ok(Arc::new(JobController {
            events: runtime::events::Recorder::start(informers.clients().clone(), "job-controller"),
            clients: informers.clients().clone(),
            jobs,
            pods: pods_inf.store(),
            expectations,
            queue,
            clock,
            finalized,
            backoff: Mutex::new(HashMap::new()),
        }))
    }

    pub fn queue(&self) -> Arc<Queue<ObjectKey>> {
        self.queue.clone()
    }
}
