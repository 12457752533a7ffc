//! One DaemonSet sync (upstream `syncDaemonSet`, `manage`, `rollingUpdate`,
//! `updateDaemonSetStatus`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet, DaemonSetStatus};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{DeleteParams, PostParams};

use super::placement::{add_default_tolerations, fit, pin_to_node, target_node};
use super::{DaemonSetController, TEMPLATE_GENERATION};
use crate::claim::{Claimer, recheck_alive};
use crate::history::{self, CONTROLLER_REVISION_HASH};
use crate::podutil;
use runtime::error::{Error, Result};
use runtime::informer::ObjectKey;
use runtime::queue::Action;

/// A percentage or number of `total`, rounded up (upstream rounds both limits up).
pub fn scaled(v: Option<&IntOrString>, total: i32, default: i32) -> i32 {
    match v {
        None => default,
        Some(IntOrString::Int(i)) => *i,
        Some(IntOrString::String(s)) => {
            let p: i64 = s.trim_end_matches('%').parse().unwrap_or(0);
            ((p * i64::from(total) + 99) / 100) as i32
        }
    }
}

fn hash_of(pod: &Pod) -> Option<&str> {
    pod.metadata
        .labels
        .as_ref()?
        .get(CONTROLLER_REVISION_HASH)
        .map(String::as_str)
}

/// What one node has and wants.
struct NodeState {
    run: bool,
    keep: bool,
    pods: Vec<Arc<Pod>>,
}

impl DaemonSetController {
    /// Syncs one DaemonSet.
    pub async fn reconcile(&self, key: ObjectKey) -> Result<Action> {
        let Some(ds) = self.sets.get(&key) else {
            self.expectations.forget(&key);
            return Ok(Action::AwaitChange);
        };
        let client = self.clients.cluster(&key.cluster)?;
        let pods_api: Api<Pod> = Api::namespaced(client.clone(), &key.namespace);
        let revs_api: Api<ControllerRevision> = Api::namespaced(client.clone(), &key.namespace);
        let ds_api: Api<DaemonSet> = Api::namespaced(client, &key.namespace);
        let spec = ds.spec.clone().unwrap_or_default();
        let claimer = Claimer {
            owner: &ds.metadata,
            api_version: "apps/v1",
            kind: "DaemonSet",
            selector: Some(&spec.selector),
            adopt_finalizer: None,
        };
        let uid = ds.metadata.uid.as_deref().unwrap_or_default();
        let revs = self
            .revisions
            .claim_candidates(&key.cluster, &key.namespace, uid);
        let revs = claimer
            .claim(
                &revs_api,
                revs,
                |_| true,
                async || recheck_alive(&ds_api, &ds.metadata).await,
            )
            .await?;
        let pods = self
            .pods
            .claim_candidates(&key.cluster, &key.namespace, uid);
        let pods = claimer
            .claim(
                &pods_api,
                pods,
                |_| true,
                async || recheck_alive(&ds_api, &ds.metadata).await,
            )
            .await?;
        if ds.metadata.deletion_timestamp.is_some() {
            return Ok(Action::AwaitChange);
        }
        let old = ds.status.clone().unwrap_or_default();
        let mut collisions = old.collision_count.unwrap_or(0);
        let owned: Vec<ControllerRevision> = revs.iter().map(|r| (**r).clone()).collect();
        let (sorted, update) = history::ensure(
            &revs_api,
            &ds.metadata,
            "apps/v1",
            "DaemonSet",
            &spec.template,
            CONTROLLER_REVISION_HASH,
            owned,
            &mut collisions,
        )
        .await?;
        let hash = update
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(CONTROLLER_REVISION_HASH))
            .cloned()
            .unwrap_or_default();

        // Nodes and the pods on them.
        let mut template_spec = spec.template.spec.clone().unwrap_or_default();
        add_default_tolerations(&mut template_spec);
        let mut nodes: BTreeMap<String, NodeState> = BTreeMap::new();
        for (_, node) in self.nodes.list_cluster(&key.cluster) {
            let (run, keep) = fit(&node, &template_spec);
            let name = node.metadata.name.clone().unwrap_or_default();
            nodes.insert(
                name,
                NodeState {
                    run,
                    keep,
                    pods: Vec::new(),
                },
            );
        }
        let mut stray: Vec<Arc<Pod>> = Vec::new();
        for p in &pods {
            match target_node(p).and_then(|n| nodes.get_mut(&n)) {
                Some(state) => state.pods.push(p.clone()),
                None if p.metadata.deletion_timestamp.is_none() => stray.push(p.clone()),
                None => {}
            }
        }

        let now = Timestamp::now();
        let mrs = spec.min_ready_seconds.unwrap_or(0);
        let available = |p: &Pod| podutil::is_active(p) && podutil::is_available(p, mrs, now);
        let mut create: Vec<String> = Vec::new();
        let mut delete: Vec<Arc<Pod>> = stray;
        let strategy = spec.update_strategy.clone().unwrap_or_default();
        let rolling = strategy.type_.as_deref() != Some("OnDelete");
        let desired = nodes.values().filter(|s| s.run).count() as i32;
        let ru = strategy.rolling_update.clone().unwrap_or_default();
        let max_surge = if rolling {
            scaled(ru.max_surge.as_ref(), desired, 0)
        } else {
            0
        };
        let mut max_unavailable = scaled(ru.max_unavailable.as_ref(), desired, 1);
        if max_surge == 0 && max_unavailable == 0 {
            max_unavailable = 1;
        }
        for (name, s) in &nodes {
            let live: Vec<&Arc<Pod>> = s
                .pods
                .iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .collect();
            if !s.keep {
                delete.extend(live.into_iter().cloned());
                continue;
            }
            let (failed, mut ok): (Vec<&Arc<Pod>>, Vec<&Arc<Pod>>) =
                live.into_iter().partition(|p| !podutil::is_active(p));
            delete.extend(failed.into_iter().cloned());
            if ok.is_empty() {
                if s.run {
                    create.push(name.clone());
                }
                continue;
            }
            // Duplicates: keep the oldest, or an old and a new one while surging.
            ok.sort_by_key(|p| p.metadata.creation_timestamp.as_ref().map(|t| t.0));
            let mut kept_old = false;
            let mut kept_new = false;
            for p in ok {
                let new = hash_of(p) == Some(hash.as_str());
                let keep = if max_surge > 0 {
                    if new {
                        !std::mem::replace(&mut kept_new, true)
                    } else {
                        !std::mem::replace(&mut kept_old, true)
                    }
                } else {
                    !std::mem::replace(&mut kept_old, true)
                };
                if !keep {
                    delete.push(p.clone());
                }
            }
        }

        // The rolling update, once nothing else is pending.
        if rolling && create.is_empty() && delete.is_empty() && self.expectations.satisfied(&key) {
            let mut unavailable = 0;
            let mut surging = 0;
            let mut old_ready: Vec<Arc<Pod>> = Vec::new();
            for s in nodes.values().filter(|s| s.run) {
                let live: Vec<&Arc<Pod>> = s
                    .pods
                    .iter()
                    .filter(|p| p.metadata.deletion_timestamp.is_none())
                    .collect();
                let new: Vec<&&Arc<Pod>> = live
                    .iter()
                    .filter(|p| hash_of(p) == Some(hash.as_str()))
                    .collect();
                let old_pods: Vec<&&Arc<Pod>> = live
                    .iter()
                    .filter(|p| hash_of(p) != Some(hash.as_str()))
                    .collect();
                if !live.iter().any(|p| available(p)) {
                    unavailable += 1;
                }
                if old_pods.is_empty() {
                    continue;
                }
                if max_surge > 0 {
                    if new.iter().any(|p| available(p)) {
                        delete.extend(old_pods.into_iter().map(|p| (*p).clone()));
                    } else if new.is_empty() {
                        old_ready.push((*old_pods[0]).clone());
                    } else {
                        surging += 1;
                    }
                } else if !old_pods.iter().any(|p| available(p)) {
                    // Already unavailable: replacing it costs nothing.
                    delete.extend(old_pods.into_iter().map(|p| (*p).clone()));
                } else {
                    old_ready.extend(old_pods.into_iter().map(|p| (*p).clone()));
                }
            }
            if max_surge > 0 {
                let room = (max_surge - surging).max(0) as usize;
                for p in old_ready.into_iter().take(room) {
                    if let Some(n) = target_node(&p) {
                        create.push(n);
                    }
                }
            } else {
                let room = (max_unavailable - unavailable).max(0) as usize;
                delete.extend(old_ready.into_iter().take(room));
            }
        }

        if self.expectations.satisfied(&key) {
            self.apply(&key, &ds, &pods_api, &create, &delete, &hash)
                .await?;
        }

        // Status, counted per node as upstream.
        let mut status = DaemonSetStatus {
            observed_generation: ds.metadata.generation,
            collision_count: Some(collisions),
            conditions: old.conditions.clone(),
            ..Default::default()
        };
        for s in nodes.values() {
            let live: Vec<&Arc<Pod>> = s
                .pods
                .iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .collect();
            if !s.run {
                if !live.is_empty() {
                    status.number_misscheduled += 1;
                }
                continue;
            }
            status.desired_number_scheduled += 1;
            if live.is_empty() {
                continue;
            }
            status.current_number_scheduled += 1;
            let newest = live
                .iter()
                .find(|p| hash_of(p) == Some(hash.as_str()))
                .unwrap_or(&live[0]);
            if podutil::is_ready(newest) {
                status.number_ready += 1;
            }
            if hash_of(newest) == Some(hash.as_str()) {
                *status.updated_number_scheduled.get_or_insert(0) += 1;
            }
            if available(newest) {
                *status.number_available.get_or_insert(0) += 1;
            }
        }
        let avail = status.number_available.unwrap_or(0);
        status.number_available = Some(avail);
        status.updated_number_scheduled = Some(status.updated_number_scheduled.unwrap_or(0));
        status.number_unavailable = Some((status.desired_number_scheduled - avail).max(0));
        let limit = spec.revision_history_limit.unwrap_or(10);
        let live_revs: Vec<String> = pods
            .iter()
            .filter_map(|p| {
                hash_of(p).map(|h| {
                    history::revision_name(ds.metadata.name.as_deref().unwrap_or_default(), h)
                })
            })
            .chain([update.metadata.name.clone().unwrap_or_default()])
            .collect();
        let live_refs: Vec<&str> = live_revs.iter().map(String::as_str).collect();
        history::truncate(&revs_api, &sorted, &live_refs, limit).await?;
        if ds.status.as_ref() != Some(&status) {
            let mut next = (*ds).clone();
            next.status = Some(status);
            match ds_api
                .replace_status(&key.name, &PostParams::default(), &next)
                .await
            {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => return Ok(Action::AwaitChange),
                Err(e) => return Err(e.into()),
            }
        }
        let waiting = nodes
            .values()
            .flat_map(|s| &s.pods)
            .any(|p| podutil::is_ready(p) && !available(p));
        if mrs > 0 && waiting {
            return Ok(Action::RequeueAfter(Duration::from_secs(mrs as u64)));
        }
        Ok(Action::AwaitChange)
    }

    /// Creates a pod on each node of `create` and deletes `delete`.
    async fn apply(
        &self,
        key: &ObjectKey,
        ds: &DaemonSet,
        api: &Api<Pod>,
        create: &[String],
        delete: &[Arc<Pod>],
        hash: &str,
    ) -> Result<()> {
        let mut failure = None;
        if !create.is_empty() {
            self.expectations.expect_creations(key, create.len());
            let pods: Vec<Pod> = create.iter().map(|n| new_pod(ds, n, hash)).collect();
            let pp = PostParams::default();
            let results = futures::future::join_all(pods.iter().map(|p| api.create(&pp, p))).await;
            for r in results {
                match r {
                    Ok(p) => podutil::record_pod_event(
                        &self.events,
                        &key.cluster,
                        ds,
                        true,
                        p.metadata.name.as_deref().unwrap_or_default(),
                    ),
                    Err(e) => {
                        self.expectations.creation_observed(key);
                        if !matches!(&e, kube::Error::Api(s) if s.code == 403) {
                            failure = Some(e);
                        }
                    }
                }
            }
        }
        if !delete.is_empty() {
            self.expectations.expect_deletions(
                key,
                delete
                    .iter()
                    .map(|p| p.metadata.uid.clone().unwrap_or_default()),
            );
            let dp = DeleteParams::default();
            let results = futures::future::join_all(
                delete
                    .iter()
                    .map(|p| api.delete(p.metadata.name.as_deref().unwrap_or_default(), &dp)),
            )
            .await;
            for (p, r) in delete.iter().zip(results) {
                let name = p.metadata.name.as_deref().unwrap_or_default();
                match r {
                    Ok(_) => podutil::record_pod_event(&self.events, &key.cluster, ds, false, name),
                    Err(e) => {
                        self.expectations
                            .deletion_observed(key, p.metadata.uid.as_deref().unwrap_or_default());
                        if !matches!(&e, kube::Error::Api(s) if s.code == 404) {
                            failure = Some(e);
                        }
                    }
                }
            }
        }
        match failure {
            Some(e) => Err(Error::Kube(e)),
            None => Ok(()),
        }
    }
}

/// A daemon pod for `node`.
pub fn new_pod(ds: &DaemonSet, node: &str, hash: &str) -> Pod {
    let template = ds
        .spec
        .as_ref()
        .map(|s| s.template.clone())
        .unwrap_or_default();
    let tm = template.metadata.unwrap_or_default();
    let mut labels = tm.labels.unwrap_or_default();
    labels.insert(CONTROLLER_REVISION_HASH.into(), hash.to_string());
    if let Some(g) = ds.metadata.generation {
        labels.insert(TEMPLATE_GENERATION.into(), g.to_string());
    }
    let mut spec = template.spec.unwrap_or_default();
    add_default_tolerations(&mut spec);
    pin_to_node(&mut spec, node);
    Pod {
        metadata: ObjectMeta {
            generate_name: Some(format!(
                "{}-",
                ds.metadata.name.as_deref().unwrap_or_default()
            )),
            labels: Some(labels),
            annotations: tm.annotations,
            finalizers: tm.finalizers,
            owner_references: Some(vec![podutil::new_controller_ref(
                &ds.metadata,
                "apps/v1",
                "DaemonSet",
            )]),
            ..Default::default()
        },
        spec: Some(spec),
        status: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_scale_percentages_of_the_desired_nodes_rounding_up() {
        assert_eq!(scaled(None, 10, 1), 1);
        assert_eq!(scaled(Some(&IntOrString::Int(3)), 10, 1), 3);
        assert_eq!(scaled(Some(&IntOrString::String("25%".into())), 10, 1), 3);
        assert_eq!(scaled(Some(&IntOrString::String("0%".into())), 10, 1), 0);
    }
}
