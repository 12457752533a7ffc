//! The CronJob controller (upstream `pkg/controller/cronjob`, the v2 controller): creates a Job
//! at each scheduled time and keeps the CronJob's status and history.
//!
//! Each sync: the active list is reconciled with the Jobs the CronJob owns (finished ones leave
//! it and set `lastSuccessfulTime`, vanished ones are dropped); the most recent scheduled time
//! not after now (on the injected clock) is found from `lastScheduleTime` or the creation time,
//! bounded by `startingDeadlineSeconds`; a time already handled, too late, or forbidden by
//! `concurrencyPolicy: Forbid` creates nothing, `Replace` deletes the active Jobs first. Jobs
//! are named `<cronjob>-<scheduled minutes since the epoch>` and annotated with the scheduled
//! time, so a second sync for the same time finds the first one's Job. Finished Jobs beyond
//! the history limits are deleted oldest first; the CronJob is queued again for its next time.
//! Without `spec.timeZone`, schedules are read in UTC (upstream uses the controller manager's
//! local zone, UTC in its images).

mod sync;

use std::sync::Arc;

use k8s_openapi::api::batch::v1::{CronJob, Job};

use crate::clock::SharedClock;
use crate::podutil;
use runtime::client::ClusterClients;
use runtime::error::Result;
use runtime::informer::{ObjectKey, Store};
use runtime::queue::Queue;
use runtime::shared::Informers;

/// The annotation holding the time a Job was scheduled for (RFC 3339 in the CronJob's zone).
pub const SCHEDULED_TIMESTAMP: &str = "batch.kubernetes.io/cronjob-scheduled-timestamp";

/// The CronJob controller.
pub struct CronJobController {
    clients: ClusterClients,
    events: runtime::events::Recorder,
    cronjobs: Store<CronJob>,
    jobs: Store<Job>,
    queue: Arc<Queue<ObjectKey>>,
    clock: SharedClock,
}

impl CronJobController {
    pub fn new(informers: &Informers, clock: SharedClock) -> Result<Arc<Self>> {
        let queue: Arc<Queue<ObjectKey>> = Queue::new();
        let cj_inf = informers.get::<CronJob>()?;
        let jobs_inf = informers.get::<Job>()?;
        let q = queue.clone();
        cj_inf.on_change(move |c| q.add(c.key().clone()));
        let q = queue.clone();
        jobs_inf.on_change(move |c| {
            let job = c.object();
            if let Some(r) = podutil::controller_ref(&job.metadata)
                && r.kind == "CronJob"
                && r.api_version.starts_with("batch/")
            {
                let k = c.key();
                q.add(ObjectKey::new(&k.cluster, &k.namespace, &r.name));
            }
        });
        let cronjobs = cj_inf.store();
        let (q, s) = (queue.clone(), cronjobs.clone());
        clock.on_jump(Arc::new(move || {
            s.keys().into_iter().for_each(|k| q.add(k))
        }));
        Ok(Arc::new(CronJobController {
            events: runtime::events::Recorder::start(
                informers.clients().clone(),
                "cronjob-controller",
            ),
            clients: informers.clients().clone(),
            cronjobs,
            jobs: jobs_inf.store(),
            queue,
            clock,
        }))
    }

    pub fn queue(&self) -> Arc<Queue<ObjectKey>> {
        self.queue.clone()
    }
}
