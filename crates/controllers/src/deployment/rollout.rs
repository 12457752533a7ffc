//! Finding, creating, scaling and cleaning up a Deployment's ReplicaSets: the rolling and
//! recreate rollouts, proportional scaling, and revision history cleanup (upstream `sync.go`,
//! `rolling.go`, `recreate.go`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, ReplicaSetSpec};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

use super::status::{self, Reason};
use super::util::{self, POD_TEMPLATE_HASH};
use crate::podutil;
use runtime::error::{Error, Result};

/// One sync of one Deployment: the (defaulted) Deployment as last written, and its cluster's
/// APIs in its namespace.
pub struct Sync {
    pub d: Deployment,
    pub deployments: Api<Deployment>,
    pub sets: Api<ReplicaSet>,
    /// The earliest time the Deployment must be looked at again.
    pub requeue: Option<Duration>,
    /// The Deployment's cluster and the recorder of its events (`ScalingReplicaSet`).
    pub cluster: runtime::informer::ClusterName,
    pub events: runtime::events::Recorder,
}

fn name(meta: &ObjectMeta) -> String {
    meta.name.clone().unwrap_or_default()
}

fn active(sets: &[ReplicaSet]) -> Vec<&ReplicaSet> {
    sets.iter().filter(|r| util::rs_replicas(r) > 0).collect()
}

impl Sync {
    /// A Normal event on the Deployment.
    fn event(&self, reason: &str, message: String) {
        self.events.record(
            &self.cluster,
            runtime::events::reference(&self.d),
            runtime::events::NORMAL,
            reason,
            message,
        );
    }

    fn uid(&self) -> String {
        self.d.metadata.uid.clone().unwrap_or_default()
    }

    /// Whether the Deployment, read afresh (not from the informer, which may lag), still exists
    /// and is not being deleted (upstream `RecheckDeletionTimestamp`). Checked before adopting
    /// or creating anything, so nothing is attached to an owner the garbage collector is
    /// already taking apart.
    async fn recheck_alive(&self) -> Result<bool> {
        let fresh =
            runtime::error::ignore_not_found(self.deployments.get(&name(&self.d.metadata)).await)?;
        Ok(fresh.is_some_and(|f| {
            f.metadata.uid == self.d.metadata.uid && f.metadata.deletion_timestamp.is_none()
        }))
    }

    /// Adopts orphan ReplicaSets matching the selector and releases owned ones that stopped
    /// matching; the sets owned afterwards.
    pub async fn claim(&mut self, candidates: Vec<Arc<ReplicaSet>>) -> Result<Vec<ReplicaSet>> {
        let uid = self.uid();
        let selector = self.d.spec.as_ref().map(|s| s.selector.clone());
        let deleting = self.d.metadata.deletion_timestamp.is_some();
        let mut owned = Vec::new();
        let mut alive: Option<bool> = None;
        for rs in candidates {
            let matches =
                podutil::selector_matches(selector.as_ref(), &podutil::labels(&rs.metadata));
            let mut refs = rs.metadata.owner_references.clone().unwrap_or_default();
            match podutil::controller_ref(&rs.metadata) {
                Some(r) if r.uid == uid => {
                    if matches || deleting {
                        owned.push((*rs).clone());
                        continue;
                    }
                    refs.retain(|r| r.uid != uid);
                }
                None if matches && !deleting && rs.metadata.deletion_timestamp.is_none() => {
                    if alive.is_none() {
                        alive = Some(self.recheck_alive().await?);
                    }
                    if alive == Some(false) {
                        continue;
                    }
                    refs.push(podutil::new_controller_ref(
                        &self.d.metadata,
                        "apps/v1",
                        "Deployment",
                    ));
                }
                _ => continue,
            }
            let patch = json!({"metadata": {
                "ownerReferences": refs,
                "uid": rs.metadata.uid,
                "resourceVersion": rs.metadata.resource_version,
            }});
            match self
                .sets
                .patch(
                    &name(&rs.metadata),
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await
            {
                Ok(updated) if matches => owned.push(updated),
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(owned)
    }

    /// The new ReplicaSet (the oldest whose template equals the Deployment's) and the others.
    pub fn find_sets(&self, rs_list: &[ReplicaSet]) -> (Option<ReplicaSet>, Vec<ReplicaSet>) {
        let mut sorted = rs_list.to_vec();
        util::sort_by_creation(&mut sorted);
        let template = self
            .d
            .spec
            .as_ref()
            .map(|s| s.template.clone())
            .unwrap_or_default();
        let idx = sorted.iter().position(|rs| {
            rs.spec
                .as_ref()
                .and_then(|s| s.template.as_ref())
                .is_some_and(|t| util::equal_ignore_hash(t, &template))
        });
        match idx {
            Some(i) => {
                let new_rs = sorted.remove(i);
                (Some(new_rs), sorted)
            }
            None => (None, sorted),
        }
    }

    /// Records `revision` on the Deployment through `/status`, as upstream's controller does:
    /// the status strategy takes the annotation without a new generation, so a fresh
    /// Deployment stays at generation 1 through its first rollout.
    async fn set_deployment_revision(&mut self, revision: &str) -> Result<()> {
        let current = self
            .d
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(util::REVISION));
        if current.map(String::as_str) == Some(revision) {
            return Ok(());
        }
        let patch = json!({"metadata": {"annotations": {util::REVISION: revision}}});
        let updated = self
            .deployments
            .patch_status(
                &name(&self.d.metadata),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await?;
        self.d.metadata = updated.metadata;
        Ok(())
    }

    /// Upstream `getAllReplicaSetsAndSyncRevision`: the new set (created when `create` and
    /// missing) with its revision and annotations brought up to date, and the old sets.
    pub async fn all_sets(
        &mut self,
        rs_list: &[ReplicaSet],
        create: bool,
    ) -> Result<(Option<ReplicaSet>, Vec<ReplicaSet>)> {
        let (existing, old) = self.find_sets(rs_list);
        let new_revision = util::max_revision(old.iter()) + 1;
        if let Some(mut rs) = existing {
            let mut copy = rs.clone();
            let annotations_changed =
                util::set_new_rs_annotations(&self.d, &mut copy, new_revision, true);
            let min_ready = self.d.spec.as_ref().and_then(|s| s.min_ready_seconds);
            let spec = copy.spec.get_or_insert_with(ReplicaSetSpec::default);
            let min_ready_changed = spec.min_ready_seconds != min_ready;
            if annotations_changed || min_ready_changed {
                spec.min_ready_seconds = min_ready;
                rs = self
                    .sets
                    .replace(&name(&copy.metadata), &PostParams::default(), &copy)
                    .await?;
            }
            let revision = rs
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(util::REVISION))
                .cloned()
                .unwrap_or_default();
            self.set_deployment_revision(&revision).await?;
            if status::has_progress_deadline(&self.d)
                && status::condition(&self.d, "Progressing").is_none()
            {
                let msg = format!("Found new replica set {:?}", name(&rs.metadata));
                let st = self.d.status.get_or_insert_with(Default::default);
                status::set_condition(
                    st,
                    status::new_condition("Progressing", "True", Reason::FoundNewReplicaSet, msg),
                );
                self.update_status().await?;
            }
            return Ok((Some(rs), old));
        }
        if !create || !self.recheck_alive().await? {
            return Ok((None, old));
        }
        let mut template = self
            .d
            .spec
            .as_ref()
            .map(|s| s.template.clone())
            .unwrap_or_default();
        let collisions = self.d.status.as_ref().and_then(|s| s.collision_count);
        let hash = util::template_hash(&template, collisions);
        let tm = template.metadata.get_or_insert_with(Default::default);
        tm.labels
            .get_or_insert_with(BTreeMap::new)
            .insert(POD_TEMPLATE_HASH.into(), hash.clone());
        let labels = tm.labels.clone();
        let mut selector = self
            .d
            .spec
            .as_ref()
            .map(|s| s.selector.clone())
            .unwrap_or_default();
        selector
            .match_labels
            .get_or_insert_with(BTreeMap::new)
            .insert(POD_TEMPLATE_HASH.into(), hash.clone());
        let d_name = name(&self.d.metadata);
        let mut new_rs = ReplicaSet {
            metadata: ObjectMeta {
                name: Some(format!("{d_name}-{hash}")),
                owner_references: Some(vec![podutil::new_controller_ref(
                    &self.d.metadata,
                    "apps/v1",
                    "Deployment",
                )]),
                labels,
                ..Default::default()
            },
            spec: Some(ReplicaSetSpec {
                replicas: Some(0),
                min_ready_seconds: self.d.spec.as_ref().and_then(|s| s.min_ready_seconds),
                selector,
                template: Some(template),
            }),
            status: None,
        };
        let all: Vec<&ReplicaSet> = old.iter().chain(std::iter::once(&new_rs)).collect();
        let count = util::new_rs_new_replicas(&self.d, &all, &new_rs);
        if let Some(s) = new_rs.spec.as_mut() {
            s.replicas = Some(count);
        }
        util::set_new_rs_annotations(&self.d, &mut new_rs, new_revision, false);
        let created = match self.sets.create(&PostParams::default(), &new_rs).await {
            Ok(rs) => {
                if count > 0 {
                    self.event(
                        "ScalingReplicaSet",
                        format!(
                            "Scaled up replica set {} from 0 to {count}",
                            name(&rs.metadata)
                        ),
                    );
                }
                rs
            }
            Err(kube::Error::Api(s)) if s.code == 409 => {
                // Same name: ours with the same template is fine; anything else is a hash
                // collision, resolved by counting it into the next hash.
                let existing = self.sets.get(&name(&new_rs.metadata)).await?;
                let ours = podutil::controller_ref(&existing.metadata)
                    .is_some_and(|r| r.uid == self.uid());
                let same = existing
                    .spec
                    .as_ref()
                    .and_then(|s| s.template.as_ref())
                    .zip(self.d.spec.as_ref().map(|s| &s.template))
                    .is_some_and(|(a, b)| util::equal_ignore_hash(a, b));
                if !(ours && same) {
                    let st = self.d.status.get_or_insert_with(Default::default);
                    st.collision_count = Some(st.collision_count.unwrap_or(0) + 1);
                    self.update_status().await?;
                    return Err(Error::Retry(format!(
                        "hash collision on replica set {:?}",
                        name(&new_rs.metadata)
                    )));
                }
                existing
            }
            Err(kube::Error::Api(s)) if s.code == 403 => {
                return Err(Error::Retry(s.message.clone()));
            }
            Err(e) => {
                if status::has_progress_deadline(&self.d) {
                    let msg = format!(
                        "Failed to create new replica set {:?}: {e}",
                        name(&new_rs.metadata)
                    );
                    let st = self.d.status.get_or_insert_with(Default::default);
                    status::set_condition(
                        st,
                        status::new_condition(
                            "Progressing",
                            "False",
                            Reason::ReplicaSetCreateError,
                            msg,
                        ),
                    );
                    let _ = self.update_status().await;
                }
                return Err(e.into());
            }
        };
        self.set_deployment_revision(&new_revision.to_string())
            .await?;
        if status::has_progress_deadline(&self.d) {
            let msg = format!("Created new replica set {:?}", name(&created.metadata));
            let st = self.d.status.get_or_insert_with(Default::default);
            status::set_condition(
                st,
                status::new_condition("Progressing", "True", Reason::NewReplicaSetCreated, msg),
            );
            self.update_status().await?;
        }
        Ok((Some(created), old))
    }

    /// Whether an active set was sized for a different replica count (a scale, not a rollout).
    pub fn is_scaling_event(&self, rs_list: &[ReplicaSet]) -> bool {
        let want = util::replicas(&self.d).to_string();
        active(rs_list).iter().any(|rs| {
            rs.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(util::DESIRED_REPLICAS))
                .is_some_and(|v| *v != want)
        })
    }

    /// Sets a ReplicaSet's size and replica annotations; whether the size changed.
    pub async fn scale_rs(&mut self, rs: &mut ReplicaSet, size: i32) -> Result<bool> {
        let size_changed = util::rs_replicas(rs) != size;
        let mut copy = rs.clone();
        let ann_changed = util::set_replicas_annotations(
            &mut copy,
            util::replicas(&self.d),
            util::replicas(&self.d) + util::max_surge(&self.d),
        );
        if !size_changed && !ann_changed {
            return Ok(false);
        }
        let from = util::rs_replicas(rs);
        copy.spec.get_or_insert_with(Default::default).replicas = Some(size);
        *rs = self
            .sets
            .replace(&name(&copy.metadata), &PostParams::default(), &copy)
            .await?;
        if size_changed {
            let direction = if from < size { "up" } else { "down" };
            self.event(
                "ScalingReplicaSet",
                format!(
                    "Scaled {direction} replica set {} from {from} to {size}",
                    name(&rs.metadata)
                ),
            );
        }
        Ok(size_changed)
    }

    /// A scaling event or a paused Deployment: resize, clean up when paused, report status.
    pub async fn sync(&mut self, rs_list: &[ReplicaSet]) -> Result<()> {
        let (mut new_rs, mut old) = self.all_sets(rs_list, false).await?;
        self.scale(new_rs.as_mut(), &mut old).await?;
        if self.d.spec.as_ref().and_then(|s| s.paused).unwrap_or(false) {
            self.cleanup(&old).await?;
        }
        self.sync_status(new_rs.as_ref(), &old).await
    }

    /// Upstream `scale`: the one active (or newest) set takes the full size; otherwise the
    /// surplus or deficit is spread over the active sets in proportion to their size.
    async fn scale(
        &mut self,
        new_rs: Option<&mut ReplicaSet>,
        old: &mut [ReplicaSet],
    ) -> Result<()> {
        let want = util::replicas(&self.d);
        let mut all: Vec<&mut ReplicaSet> = old.iter_mut().collect();
        let new_idx = new_rs.map(|n| {
            all.push(n);
            all.len() - 1
        });
        let active_count = all.iter().filter(|r| util::rs_replicas(r) > 0).count();
        if active_count <= 1 {
            let target = match all.iter().position(|r| util::rs_replicas(r) > 0) {
                Some(i) => Some(i),
                None => new_idx.or_else(|| {
                    // The newest old set.
                    (0..all.len())
                        .max_by_key(|i| all[*i].metadata.creation_timestamp.as_ref().map(|t| t.0))
                }),
            };
            if let Some(i) = target
                && util::rs_replicas(all[i]) != want
            {
                self.scale_rs(all[i], want).await?;
            }
            return Ok(());
        }
        if let Some(i) = new_idx
            && util::rs_replicas(all[i]) == want
            && all[i]
                .status
                .as_ref()
                .and_then(|s| s.available_replicas)
                .unwrap_or(0)
                == want
        {
            for (j, rs) in all.iter_mut().enumerate() {
                if j != i && util::rs_replicas(rs) > 0 {
                    self.scale_rs(rs, 0).await?;
                }
            }
            return Ok(());
        }
        if !util::is_rolling(&self.d) {
            return Ok(());
        }
        let mut act: Vec<&mut ReplicaSet> = all
            .into_iter()
            .filter(|r| util::rs_replicas(r) > 0)
            .collect();
        let total = act.iter().map(|r| util::rs_replicas(r)).sum::<i32>();
        let allowed = if want > 0 {
            want + util::max_surge(&self.d)
        } else {
            0
        };
        let to_add = allowed - total;
        let created = |r: &ReplicaSet| r.metadata.creation_timestamp.as_ref().map(|t| t.0);
        if to_add > 0 {
            // Larger first; newer first among equals.
            act.sort_by(|a, b| {
                util::rs_replicas(b)
                    .cmp(&util::rs_replicas(a))
                    .then_with(|| created(b).cmp(&created(a)))
            });
        } else if to_add < 0 {
            // Larger first; older first among equals.
            act.sort_by(|a, b| {
                util::rs_replicas(b)
                    .cmp(&util::rs_replicas(a))
                    .then_with(|| created(a).cmp(&created(b)))
            });
        }
        let status_replicas = self.d.status.as_ref().and_then(|s| s.replicas).unwrap_or(0);
        let mut added = 0;
        let mut sizes = Vec::with_capacity(act.len());
        for rs in &act {
            let cur = util::rs_replicas(rs);
            let p = if to_add != 0 {
                proportion(
                    rs,
                    want,
                    util::max_surge(&self.d),
                    status_replicas,
                    to_add,
                    added,
                )
            } else {
                0
            };
            added += p;
            sizes.push(cur + p);
        }
        if let Some(first) = sizes.first_mut()
            && to_add != 0
        {
            *first = (*first + to_add - added).max(0);
        }
        for (rs, size) in act.into_iter().zip(sizes) {
            self.scale_rs(rs, size).await?;
        }
        Ok(())
    }

    /// RollingUpdate: grow the new set within maxSurge, shrink old sets within maxUnavailable.
    pub async fn rollout_rolling(&mut self, rs_list: &[ReplicaSet]) -> Result<()> {
        let (new_rs, mut old) = self.all_sets(rs_list, true).await?;
        let Some(mut new_rs) = new_rs else {
            return Err(Error::Retry("the new replica set is not there yet".into()));
        };
        let want = util::replicas(&self.d);
        let cur = util::rs_replicas(&new_rs);
        if cur != want {
            let target = if cur > want {
                want
            } else {
                let all: Vec<&ReplicaSet> = old.iter().chain(std::iter::once(&new_rs)).collect();
                util::new_rs_new_replicas(&self.d, &all, &new_rs)
            };
            if self.scale_rs(&mut new_rs, target).await? {
                return self.sync_rollout_status(Some(&new_rs), &old).await;
            }
        }
        if self.reconcile_old(&mut old, &new_rs).await? {
            return self.sync_rollout_status(Some(&new_rs), &old).await;
        }
        if status::deployment_complete(
            &self.d,
            self.d.status.as_ref().unwrap_or(&Default::default()),
        ) {
            self.cleanup(&old).await?;
        }
        self.sync_rollout_status(Some(&new_rs), &old).await
    }

    /// Scales old sets down as far as maxUnavailable allows, unhealthy pods first; whether
    /// anything was scaled.
    async fn reconcile_old(&mut self, old: &mut [ReplicaSet], new_rs: &ReplicaSet) -> Result<bool> {
        let old_count = util::spec_replicas(old.iter());
        if old_count == 0 {
            return Ok(false);
        }
        let all_count = old_count + util::rs_replicas(new_rs);
        let min_available = util::replicas(&self.d) - util::max_unavailable(&self.d);
        let new_unavailable = util::rs_replicas(new_rs)
            - new_rs
                .status
                .as_ref()
                .and_then(|s| s.available_replicas)
                .unwrap_or(0);
        let max_scaled_down = all_count - min_available - new_unavailable;
        if max_scaled_down <= 0 {
            return Ok(false);
        }
        util::sort_by_creation(old);
        // Unhealthy replicas first: they would block the rollout otherwise.
        let mut cleaned = 0;
        for rs in old.iter_mut() {
            if cleaned >= max_scaled_down {
                break;
            }
            let size = util::rs_replicas(rs);
            let available = rs
                .status
                .as_ref()
                .and_then(|s| s.available_replicas)
                .unwrap_or(0);
            let down = unhealthy_to_remove(size, available, max_scaled_down - cleaned);
            if down == 0 {
                continue;
            }
            self.scale_rs(rs, size - down).await?;
            cleaned += down;
        }
        // Then healthy ones, keeping minAvailable.
        let available = util::available_replicas(old.iter())
            + new_rs
                .status
                .as_ref()
                .and_then(|s| s.available_replicas)
                .unwrap_or(0);
        let mut scaled = 0;
        if available > min_available {
            let total_down = available - min_available;
            for rs in old.iter_mut() {
                if scaled >= total_down {
                    break;
                }
                let size = util::rs_replicas(rs);
                if size == 0 {
                    continue;
                }
                let down = size.min(total_down - scaled);
                self.scale_rs(rs, size - down).await?;
                scaled += down;
            }
        }
        Ok(cleaned + scaled > 0)
    }

    /// Recreate: all old pods go, then the new set is created at full size.
    pub async fn rollout_recreate(
        &mut self,
        rs_list: &[ReplicaSet],
        pods: &[Arc<Pod>],
    ) -> Result<()> {
        let (mut new_rs, mut old) = self.all_sets(rs_list, false).await?;
        let mut scaled = false;
        for rs in old.iter_mut() {
            if util::rs_replicas(rs) > 0 {
                scaled |= self.scale_rs(rs, 0).await?;
            }
        }
        if scaled {
            return self.sync_rollout_status(new_rs.as_ref(), &old).await;
        }
        let old_uids: Vec<String> = old.iter().filter_map(|r| r.metadata.uid.clone()).collect();
        let old_pods_running = util::actual_replicas(old.iter()) > 0
            || pods.iter().any(|p| {
                let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
                podutil::controller_ref(&p.metadata).is_some_and(|r| old_uids.contains(&r.uid))
                    && !matches!(phase, Some("Failed" | "Succeeded"))
            });
        if old_pods_running {
            return self.sync_rollout_status(new_rs.as_ref(), &old).await;
        }
        if new_rs.is_none() {
            (new_rs, old) = self.all_sets(rs_list, true).await?;
        }
        if let Some(rs) = new_rs.as_mut() {
            let want = util::replicas(&self.d);
            self.scale_rs(rs, want).await?;
        }
        if status::deployment_complete(
            &self.d,
            self.d.status.as_ref().unwrap_or(&Default::default()),
        ) {
            self.cleanup(&old).await?;
        }
        self.sync_rollout_status(new_rs.as_ref(), &old).await
    }

    /// Deletes the oldest empty old sets beyond revisionHistoryLimit.
    pub async fn cleanup(&mut self, old: &[ReplicaSet]) -> Result<()> {
        let Some(limit) = self.d.spec.as_ref().and_then(|s| s.revision_history_limit) else {
            return Ok(());
        };
        let mut cleanable: Vec<&ReplicaSet> = old
            .iter()
            .filter(|r| r.metadata.deletion_timestamp.is_none())
            .collect();
        let diff = cleanable.len() as i64 - i64::from(limit);
        if diff <= 0 {
            return Ok(());
        }
        cleanable.sort_by(|a, b| {
            util::revision(a).cmp(&util::revision(b)).then_with(|| {
                let t = |r: &ReplicaSet| r.metadata.creation_timestamp.as_ref().map(|t| t.0);
                t(a).cmp(&t(b))
            })
        });
        for rs in cleanable.into_iter().take(diff as usize) {
            let st = rs.status.clone().unwrap_or_default();
            if st.replicas != 0
                || util::rs_replicas(rs) != 0
                || rs.metadata.generation > st.observed_generation
            {
                continue;
            }
            match self
                .sets
                .delete(&name(&rs.metadata), &DeleteParams::default())
                .await
            {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }
}

/// How many replicas `rs` gains (or loses) in a proportional scale (upstream
/// `GetReplicaSetProportion`).
/// How many unhealthy replicas of an old set of `size` with `available` ready ones may go
/// within `budget`. A status can still count more available pods than a smaller new size
/// (the set was just scaled down): that is nothing to remove, never a negative count — which
/// scaled the old set back up past maxSurge (upstream refuses the same case with an error).
fn unhealthy_to_remove(size: i32, available: i32, budget: i32) -> i32 {
    (size - available).min(budget).max(0)
}

fn proportion(
    rs: &ReplicaSet,
    want: i32,
    surge: i32,
    status_replicas: i32,
    to_add: i32,
    added: i32,
) -> i32 {
    let size = util::rs_replicas(rs);
    if size == 0 || to_add == 0 || to_add == added {
        return 0;
    }
    let fraction = if want == 0 {
        -size
    } else {
        let before = rs
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(util::MAX_REPLICAS))
            .and_then(|v| v.parse::<i32>().ok())
            .filter(|v| *v != 0)
            .unwrap_or(status_replicas.max(1));
        let target = f64::from(size) * f64::from(want + surge) / f64::from(before);
        target.round() as i32 - size
    };
    let allowed = to_add - added;
    if to_add > 0 {
        fraction.min(allowed)
    } else {
        fraction.max(allowed)
    }
}

#[cfg(test)]
mod tests {
    use super::unhealthy_to_remove;

    #[test]
    fn only_unavailable_replicas_of_an_old_set_are_removed_within_the_budget() {
        assert_eq!(unhealthy_to_remove(3, 1, 5), 2);
        assert_eq!(unhealthy_to_remove(3, 1, 1), 1);
        assert_eq!(unhealthy_to_remove(3, 3, 5), 0);
        assert_eq!(unhealthy_to_remove(0, 0, 5), 0);
    }

    #[test]
    fn a_set_whose_status_still_counts_more_available_than_its_size_is_not_scaled_up() {
        // Regression: 1 desired, 2 still available → "down" was -1 and the set grew to 2.
        assert_eq!(unhealthy_to_remove(1, 2, 3), 0);
    }
}
