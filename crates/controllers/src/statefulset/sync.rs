//! One StatefulSet sync (upstream `StatefulSetControl.UpdateStatefulSet`): revisions, then
//! one pass over the ordinals creating, replacing and removing pods, then the rolling update,
//! then the status.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet, StatefulSetStatus};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, PodTemplateSpec};
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

use super::StatefulSetController;
use super::pods::{claims, new_pod, ordinal, pod_owner_ref, pod_revision};
use crate::claim::{Claimer, recheck_alive};
use crate::history::{self, REVISION_HASH_LABEL};
use crate::podutil;
use runtime::error::{Result, ignore_not_found};
use runtime::informer::ObjectKey;
use runtime::queue::Action;

fn name(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> &str {
    meta.name.as_deref().unwrap_or_default()
}

fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or_default()
}

fn running_and_ready(pod: &Pod) -> bool {
    phase(pod) == "Running" && podutil::is_ready(pod)
}

fn terminating(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
}

impl StatefulSetController {
    /// Syncs one StatefulSet.
    pub async fn reconcile(&self, key: ObjectKey) -> Result<Action> {
        let Some(set) = self.sets.get(&key) else {
            return Ok(Action::AwaitChange);
        };
        let client = self.clients.cluster(&key.cluster)?;
        let pods_api: Api<Pod> = Api::namespaced(client.clone(), &key.namespace);
        let revs_api: Api<ControllerRevision> = Api::namespaced(client.clone(), &key.namespace);
        let pvc_api: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &key.namespace);
        let sets_api: Api<StatefulSet> = Api::namespaced(client, &key.namespace);
        let spec = set.spec.clone().unwrap_or_default();
        let set_name = key.name.clone();
        let claimer = Claimer {
            owner: &set.metadata,
            api_version: "apps/v1",
            kind: "StatefulSet",
            selector: Some(&spec.selector),
            adopt_finalizer: None,
        };
        let uid = set.metadata.uid.as_deref().unwrap_or_default();
        let revs = self
            .revisions
            .claim_candidates(&key.cluster, &key.namespace, uid);
        let revs = claimer
            .claim(
                &revs_api,
                revs,
                |_| true,
                async || recheck_alive(&sets_api, &set.metadata).await,
            )
            .await?;
        let pods = self
            .pods
            .claim_candidates(&key.cluster, &key.namespace, uid);
        let member = |p: &Pod| ordinal(&set_name, name(&p.metadata)).is_some();
        let pods = claimer
            .claim(&pods_api, pods, member, async || {
                recheck_alive(&sets_api, &set.metadata).await
            })
            .await?;
        if set.metadata.deletion_timestamp.is_some() {
            return Ok(Action::AwaitChange);
        }

        // Revisions: the template's (update) and the one the pods ran before (current).
        let old = set.status.clone().unwrap_or_default();
        let mut collisions = old.collision_count.unwrap_or(0);
        let owned: Vec<ControllerRevision> = revs.iter().map(|r| (**r).clone()).collect();
        let (sorted, update) = history::ensure(
            &revs_api,
            &set.metadata,
            "apps/v1",
            "StatefulSet",
            &spec.template,
            REVISION_HASH_LABEL,
            owned,
            &mut collisions,
        )
        .await?;
        let update_name = name(&update.metadata).to_string();
        let current = old
            .current_revision
            .as_ref()
            .and_then(|c| sorted.iter().find(|r| name(&r.metadata) == c))
            .unwrap_or(&update)
            .clone();
        let current_name = name(&current.metadata).to_string();
        let current_template =
            history::revision_template(&current).unwrap_or_else(|| spec.template.clone());

        // Pods by ordinal, and the condemned beyond the range.
        let replicas = spec.replicas.unwrap_or(1).max(0);
        let start = spec
            .ordinals
            .as_ref()
            .and_then(|o| o.start)
            .unwrap_or(0)
            .max(0);
        let mut slots: BTreeMap<i32, Arc<Pod>> = BTreeMap::new();
        let mut condemned: Vec<Arc<Pod>> = Vec::new();
        for p in &pods {
            let Some(o) = ordinal(&set_name, name(&p.metadata)) else {
                continue;
            };
            if (start..start + replicas).contains(&o) {
                slots.insert(o, p.clone());
            } else {
                condemned.push(p.clone());
            }
        }
        condemned.sort_by_key(|p| std::cmp::Reverse(ordinal(&set_name, name(&p.metadata))));
        let monotonic = spec.pod_management_policy.as_deref() != Some("Parallel");
        let strategy = spec.update_strategy.clone().unwrap_or_default();
        let rolling = strategy.type_.as_deref() != Some("OnDelete");
        let partition = strategy.rolling_update.as_ref().and_then(|r| r.partition);

        let mut blocked = false;
        for o in start..start + replicas {
            let pod = slots.get(&o);
            match pod {
                None => {
                    let use_current = rolling
                        && current_name != update_name
                        && match partition {
                            None => o < old.current_replicas.unwrap_or(0),
                            Some(p) => o < p,
                        };
                    let (template, rev): (&PodTemplateSpec, &str) = if use_current {
                        (&current_template, &current_name)
                    } else {
                        (&spec.template, &update_name)
                    };
                    self.create_pod(
                        key.cluster.as_str(),
                        &set,
                        &pods_api,
                        &pvc_api,
                        template,
                        rev,
                        o,
                    )
                    .await?;
                    blocked = true;
                }
                Some(p) if matches!(phase(p), "Failed" | "Succeeded") && !terminating(p) => {
                    self.delete_pod(key.cluster.as_str(), &set, &pods_api, p)
                        .await?;
                    blocked = true;
                }
                Some(p) if terminating(p) || !running_and_ready(p) => blocked = true,
                Some(_) => {}
            }
            if blocked && monotonic {
                break;
            }
        }
        let all_ready = !blocked && slots.values().all(|p| running_and_ready(p));
        for p in &condemned {
            if terminating(p) {
                if monotonic {
                    break;
                }
                continue;
            }
            if monotonic && !all_ready {
                break;
            }
            self.condemn(key.cluster.as_str(), &set, &pods_api, &pvc_api, p)
                .await?;
            if monotonic {
                break;
            }
        }

        // The rolling update: the highest old pod at or above the partition, when all are ready.
        if rolling && all_ready && condemned.is_empty() {
            let floor = partition.unwrap_or(0).max(start);
            if let Some(p) = slots
                .range(floor..)
                .rev()
                .map(|(_, p)| p)
                .find(|p| pod_revision(p) != Some(update_name.as_str()))
            {
                self.delete_pod(key.cluster.as_str(), &set, &pods_api, p)
                    .await?;
            }
        }

        // Status.
        let now = Timestamp::now();
        let mrs = spec.min_ready_seconds.unwrap_or(0);
        let live: Vec<&Arc<Pod>> = pods.iter().filter(|p| !terminating(p)).collect();
        let count = |f: &dyn Fn(&Pod) -> bool| live.iter().filter(|p| f(p)).count() as i32;
        let mut status = StatefulSetStatus {
            replicas: live.len() as i32,
            ready_replicas: Some(count(&|p| running_and_ready(p))),
            available_replicas: Some(count(&|p| {
                running_and_ready(p) && podutil::is_available(p, mrs, now)
            })),
            current_replicas: Some(count(&|p| pod_revision(p) == Some(current_name.as_str()))),
            updated_replicas: Some(count(&|p| pod_revision(p) == Some(update_name.as_str()))),
            current_revision: Some(current_name.clone()),
            update_revision: Some(update_name.clone()),
            observed_generation: set.metadata.generation,
            collision_count: Some(collisions),
            conditions: old.conditions.clone(),
        };
        if status.updated_replicas == Some(status.replicas)
            && status.ready_replicas == Some(status.replicas)
            && status.replicas == replicas
        {
            status.current_replicas = status.updated_replicas;
            status.current_revision = status.update_revision.clone();
        }
        let limit = spec.revision_history_limit.unwrap_or(10);
        let live_revs = [current_name.as_str(), update_name.as_str()];
        let in_use: Vec<&str> = pods
            .iter()
            .filter_map(|p| pod_revision(p))
            .chain(live_revs)
            .collect();
        history::truncate(&revs_api, &sorted, &in_use, limit).await?;
        if set.status.as_ref() != Some(&status) {
            let mut next = (*set).clone();
            next.status = Some(status);
            match sets_api
                .replace_status(&key.name, &PostParams::default(), &next)
                .await
            {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => return Ok(Action::AwaitChange),
                Err(e) => return Err(e.into()),
            }
        }
        if mrs > 0
            && pods
                .iter()
                .any(|p| running_and_ready(p) && !podutil::is_available(p, mrs, now))
        {
            return Ok(Action::RequeueAfter(Duration::from_secs(mrs as u64)));
        }
        Ok(Action::AwaitChange)
    }

    /// Creates the claims (those missing) and the pod at `ordinal`.
    #[allow(clippy::too_many_arguments)]
    async fn create_pod(
        &self,
        cluster: &str,
        set: &StatefulSet,
        pods: &Api<Pod>,
        pvcs: &Api<PersistentVolumeClaim>,
        template: &PodTemplateSpec,
        revision: &str,
        ordinal: i32,
    ) -> Result<()> {
        let pod = new_pod(set, template, revision, ordinal);
        let (set_name, pod_name) = (name(&set.metadata), name(&pod.metadata));
        for claim in claims(set, ordinal) {
            match pvcs.create(&PostParams::default(), &claim).await {
                Ok(c) => self.events.about(
                    cluster,
                    set,
                    runtime::events::NORMAL,
                    "SuccessfulCreate",
                    format!(
                        "create Claim {} Pod {pod_name} in StatefulSet {set_name} success",
                        name(&c.metadata)
                    ),
                ),
                Err(kube::Error::Api(s)) if s.code == 409 => {}
                Err(e) => return Err(e.into()),
            }
        }
        match pods.create(&PostParams::default(), &pod).await {
            Ok(_) => {
                self.events.about(
                    cluster,
                    set,
                    runtime::events::NORMAL,
                    "SuccessfulCreate",
                    format!("create Pod {pod_name} in StatefulSet {set_name} successful"),
                );
                Ok(())
            }
            Err(kube::Error::Api(s)) if s.code == 409 || s.code == 403 => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Deletes a pod beyond the range; with `whenScaled: Delete` its claims follow it.
    async fn condemn(
        &self,
        cluster: &str,
        set: &StatefulSet,
        pods: &Api<Pod>,
        pvcs: &Api<PersistentVolumeClaim>,
        pod: &Pod,
    ) -> Result<()> {
        let when_scaled = set
            .spec
            .as_ref()
            .and_then(|s| s.persistent_volume_claim_retention_policy.as_ref())
            .and_then(|p| p.when_scaled.as_deref());
        if when_scaled == Some("Delete")
            && let Some(o) = ordinal(name(&set.metadata), name(&pod.metadata))
        {
            for c in claims(set, o) {
                let cname = name(&c.metadata).to_string();
                let Some(existing) = ignore_not_found(pvcs.get(&cname).await)? else {
                    continue;
                };
                let mut refs = existing
                    .metadata
                    .owner_references
                    .clone()
                    .unwrap_or_default();
                if refs
                    .iter()
                    .any(|r| Some(&r.uid) == pod.metadata.uid.as_ref())
                {
                    continue;
                }
                refs.push(pod_owner_ref(pod));
                let patch = json!({"metadata": {"ownerReferences": refs,
                    "resourceVersion": existing.metadata.resource_version}});
                pvcs.patch(&cname, &PatchParams::default(), &Patch::Merge(&patch))
                    .await?;
            }
        }
        self.delete_pod(cluster, set, pods, pod).await
    }

    /// Deletes one of the set's pods (gone already is fine), with upstream's event.
    async fn delete_pod(
        &self,
        cluster: &str,
        set: &StatefulSet,
        pods: &Api<Pod>,
        pod: &Pod,
    ) -> Result<()> {
        let pod_name = name(&pod.metadata);
        if ignore_not_found(pods.delete(pod_name, &DeleteParams::default()).await)?.is_some() {
            self.events.about(
                cluster,
                set,
                runtime::events::NORMAL,
                "SuccessfulDelete",
                format!(
                    "delete Pod {pod_name} in StatefulSet {} successful",
                    name(&set.metadata)
                ),
            );
        }
        Ok(())
    }
}
