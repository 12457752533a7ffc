//! The TTL-after-finished controller (upstream `pkg/controller/ttlafterfinished`): deletes a
//! finished Job `spec.ttlSecondsAfterFinished` after its Complete or Failed condition turned
//! True, in the foreground so its pods go first.
//!
//! Expiry is measured on the injected clock; before deleting, the Job is read afresh and the
//! deletion carries its uid as a precondition, so a TTL that was changed or a Job that was
//! re-created is never deleted by a stale decision.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{DeleteParams, Preconditions, PropagationPolicy};

use crate::clock::{SharedClock, until};
use crate::job::policy::finished_at;
use runtime::error::{Result, ignore_not_found};
use runtime::informer::{ObjectKey, Store};
use runtime::queue::{Action, Queue};
use runtime::shared::Informers;

/// The TTL-after-finished controller.
pub struct TtlAfterFinishedController {
    clients: runtime::client::ClusterClients,
    jobs: Store<Job>,
    queue: Arc<Queue<ObjectKey>>,
    clock: SharedClock,
}

/// When a finished Job with a TTL expires.
pub fn expires_at(job: &Job) -> Option<Timestamp> {
    let ttl = job.spec.as_ref()?.ttl_seconds_after_finished?;
    let done = finished_at(job)?;
    Timestamp::from_second(done.as_second().saturating_add(i64::from(ttl))).ok()
}

impl TtlAfterFinishedController {
    pub fn new(informers: &Informers, clock: SharedClock) -> Result<Arc<Self>> {
        let queue: Arc<Queue<ObjectKey>> = Queue::new();
        let inf = informers.get::<Job>()?;
        let jobs = inf.store();
        let q = queue.clone();
        inf.on_change(move |c| {
            if c.object().metadata.deletion_timestamp.is_none() && expires_at(c.object()).is_some()
            {
                q.add(c.key().clone());
            }
        });
        let (q, s) = (queue.clone(), jobs.clone());
        clock.on_jump(Arc::new(move || {
            for k in s.keys() {
                if s.get(&k).is_some_and(|j| expires_at(&j).is_some()) {
                    q.add(k);
                }
            }
        }));
        Ok(Arc::new(TtlAfterFinishedController {
            clients: informers.clients().clone(),
            jobs,
            queue,
            clock,
        }))
    }

    pub fn queue(&self) -> Arc<Queue<ObjectKey>> {
        self.queue.clone()
    }

    /// Deletes the Job if it expired, or comes back when it will.
    pub async fn reconcile(&self, key: ObjectKey) -> Result<Action> {
        let Some(job) = self.jobs.get(&key) else {
            return Ok(Action::AwaitChange);
        };
        if job.metadata.deletion_timestamp.is_some() {
            return Ok(Action::AwaitChange);
        }
        let Some(at) = expires_at(&job) else {
            return Ok(Action::AwaitChange);
        };
        let now = self.clock.now();
        if at > now {
            return Ok(Action::RequeueAfter(
                until(now, at) + Duration::from_millis(50),
            ));
        }
        let api: Api<Job> = Api::namespaced(self.clients.cluster(&key.cluster)?, &key.namespace);
        // The informer may lag: decide again on the Job as it is now.
        let Some(fresh) = ignore_not_found(api.get(&key.name).await)? else {
            return Ok(Action::AwaitChange);
        };
        if fresh.metadata.deletion_timestamp.is_some() || expires_at(&fresh).is_none_or(|t| t > now)
        {
            return Ok(Action::AwaitChange);
        }
        let dp = DeleteParams {
            propagation_policy: Some(PropagationPolicy::Foreground),
            preconditions: Some(Preconditions {
                uid: fresh.metadata.uid.clone(),
                resource_version: None,
            }),
            ..Default::default()
        };
        ignore_not_found(api.delete(&key.name, &dp).await.map(|_| ()))?;
        Ok(Action::AwaitChange)
    }
}
