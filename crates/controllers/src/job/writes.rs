//! The Job controller's writes to pods and Jobs: deleting pods, removing the tracking
//! finalizer (remembering which pods no longer carry it until the informer catches up),
//! releasing a deleted Job's pods, and replacing a Job's status.

use std::sync::Arc;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

use super::pods::TRACKING_FINALIZER;
use super::{JobController, has_tracking_finalizer};
use crate::podutil;
use runtime::error::{Error, Result};
use runtime::informer::ObjectKey;

fn uid(pod: &Pod) -> String {
    pod.metadata.uid.clone().unwrap_or_default()
}

impl JobController {
    /// Deletes pods; how many were deleted.
    pub(super) async fn delete_pods(
        &self,
        key: &ObjectKey,
        api: &Api<Pod>,
        pods: Vec<&Arc<Pod>>,
    ) -> Result<usize> {
        if pods.is_empty() {
            return Ok(0);
        }
        self.expectations
            .expect_deletions(key, pods.iter().map(|p| uid(p)));
        let dp = DeleteParams::default();
        let results = futures::future::join_all(
            pods.iter()
                .map(|p| api.delete(p.metadata.name.as_deref().unwrap_or_default(), &dp)),
        )
        .await;
        let mut n = 0;
        for (p, r) in pods.iter().zip(results) {
            match r {
                Ok(_) => n += 1,
                Err(kube::Error::Api(s)) if s.code == 404 => {
                    self.expectations.deletion_observed(key, &uid(p));
                }
                Err(e) => {
                    self.expectations.deletion_observed(key, &uid(p));
                    return Err(Error::Kube(e));
                }
            }
        }
        Ok(n)
    }

    /// Removes the tracking finalizer; whether the pod no longer carries it.
    pub(super) async fn remove_finalizer(&self, api: &Api<Pod>, pod: &Pod) -> Result<bool> {
        let rest: Vec<&String> = pod
            .metadata
            .finalizers
            .as_deref()
            .unwrap_or_default()
            .iter()
            .filter(|f| *f != TRACKING_FINALIZER)
            .collect();
        let patch = json!({"metadata": {
            "finalizers": rest,
            "uid": pod.metadata.uid,
            "resourceVersion": pod.metadata.resource_version,
        }});
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        match api
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {
                self.finalized.lock().insert(uid(pod));
                Ok(true)
            }
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(true),
            Err(e) => Err(e.into()),
        }
    }

    /// A deleted Job's pods keep no tracking finalizer (upstream `handleOrphanPod`).
    pub(super) async fn release_orphans(&self, key: &ObjectKey, api: &Api<Pod>) -> Result<()> {
        for pod in self.pods.list_namespace(&key.cluster, &key.namespace) {
            let owned = podutil::controller_ref(&pod.metadata)
                .is_some_and(|r| r.kind == "Job" && r.name == key.name);
            if owned && has_tracking_finalizer(&pod) {
                self.remove_finalizer(api, &pod).await?;
            }
        }
        Ok(())
    }
}

/// Replaces the status (optimistic on the Job's resourceVersion); `None` when the Job is gone.
pub(super) async fn write_status(api: &Api<Job>, job: &Job) -> Result<Option<Job>> {
    let name = job.metadata.name.as_deref().unwrap_or_default();
    match api.replace_status(name, &PostParams::default(), job).await {
        Ok(j) => Ok(Some(j)),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(None),
        Err(e) => Err(e.into()),
    }
}
