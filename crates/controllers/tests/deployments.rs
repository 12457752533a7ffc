//! Deployments and ReplicaSets against a real in-process API server: rollout, a template change
//! rolled within maxSurge/maxUnavailable, `kubectl rollout undo`, scaling to zero and back,
//! pause and resume, Recreate, revision history cleanup, and a bare ReplicaSet's pods.

mod common;

use std::sync::Arc;

use common::{Harness, kubelet, wait_for, wait_list};
use futures::StreamExt;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use parking_lot::Mutex;
use serde_json::json;

const CLUSTER: &str = "tenant-a";

fn deployment(name: &str, replicas: i32, strategy: serde_json::Value) -> Deployment {
    serde_json::from_value(json!({
        "metadata": {"name": name, "annotations": {"team": "blue"}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "strategy": strategy,
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "nginx:1"}]},
            },
        },
    }))
    .unwrap()
}

fn revision<K: kube::Resource>(o: &K) -> Option<String> {
    o.meta()
        .annotations
        .as_ref()?
        .get("deployment.kubernetes.io/revision")
        .cloned()
}

fn condition(d: &Deployment, ty: &str) -> Option<(String, String, String)> {
    let c = d
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == ty)?;
    Some((
        c.status.clone(),
        c.reason.clone().unwrap_or_default(),
        c.message.clone().unwrap_or_default(),
    ))
}

/// Complete: every replica updated, ready and available, the latest generation observed.
fn complete(d: Option<&Deployment>, replicas: i32) -> bool {
    let Some(d) = d else { return false };
    let Some(s) = &d.status else { return false };
    s.observed_generation >= d.metadata.generation
        && s.updated_replicas.unwrap_or(0) == replicas
        && s.replicas.unwrap_or(0) == replicas
        && s.available_replicas.unwrap_or(0) == replicas
        && s.ready_replicas.unwrap_or(0) == replicas
        && condition(d, "Progressing").is_some_and(|c| c.1 == "NewReplicaSetAvailable")
}

async fn wait_complete(api: &Api<Deployment>, name: &str, replicas: i32) -> Deployment {
    wait_for(api, name, "the rollout to complete", |d| {
        complete(d, replicas)
    })
    .await
    .unwrap()
}

fn owned_by<'a>(sets: &'a [ReplicaSet], d: &Deployment) -> Vec<&'a ReplicaSet> {
    sets.iter()
        .filter(|rs| {
            rs.owner_references()
                .iter()
                .any(|r| Some(&r.uid) == d.metadata.uid.as_ref())
        })
        .collect()
}

/// Watches a deployment's ReplicaSets and records the largest total of desired replicas and
/// the smallest total of available ones seen after `armed` is set.
struct Monitor {
    max_desired: Arc<Mutex<i32>>,
    min_available: Arc<Mutex<i32>>,
    /// Every sizing seen (`name@resourceVersion=replicas`), to explain a failed bound.
    history: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

async fn monitor(api: Api<ReplicaSet>, prefix: &'static str) -> Monitor {
    let max_desired = Arc::new(Mutex::new(0));
    let min_available = Arc::new(Mutex::new(i32::MAX));
    let history = Arc::new(Mutex::new(Vec::new()));
    let (mx, mn, hist) = (max_desired.clone(), min_available.clone(), history.clone());
    let (listed_tx, listed) = tokio::sync::oneshot::channel();
    let mut listed_tx = Some(listed_tx);
    let task = tokio::spawn(async move {
        let mut seen = std::collections::BTreeMap::new();
        // A re-list (the watch was closed) is a new whole picture: mixing it into the old one
        // would add a set's old size to another's new one.
        let mut relisting = std::collections::BTreeMap::new();
        let mut stream = watcher::watcher(api, watcher::Config::default()).boxed();
        while let Some(Ok(ev)) = stream.next().await {
            match ev {
                watcher::Event::Apply(rs) => {
                    seen.insert(rs.name_any(), rs);
                }
                watcher::Event::Delete(rs) => {
                    seen.remove(&rs.name_any());
                }
                watcher::Event::Init => {
                    relisting.clear();
                    continue;
                }
                watcher::Event::InitApply(rs) => {
                    relisting.insert(rs.name_any(), rs);
                    continue;
                }
                watcher::Event::InitDone => {
                    seen = std::mem::take(&mut relisting);
                    if let Some(tx) = listed_tx.take() {
                        let _ = tx.send(());
                    }
                }
            }
            let ours = seen.values().filter(|r| r.name_any().starts_with(prefix));
            let (mut desired, mut available) = (0, 0);
            let mut sizes = Vec::new();
            for rs in ours {
                let size = rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0);
                sizes.push(format!(
                    "{}@{}(gen {:?})={size}",
                    rs.name_any(),
                    rs.resource_version().unwrap_or_default(),
                    rs.metadata.generation
                ));
                desired += size;
                available += rs
                    .status
                    .as_ref()
                    .and_then(|s| s.available_replicas)
                    .unwrap_or(0);
            }
            hist.lock().push(sizes.join(" "));
            let mut m = mx.lock();
            *m = (*m).max(desired);
            let mut m = mn.lock();
            *m = (*m).min(available);
        }
    });
    listed.await.expect("the monitor listed");
    Monitor {
        max_desired,
        min_available,
        history,
        task,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployment_rolls_out_rolls_a_new_image_within_surge_and_rolls_back() {
    let h = Harness::start(&[CLUSTER]).await;
    let pods: Api<Pod> = h.api(CLUSTER, "default");
    let sets: Api<ReplicaSet> = h.api(CLUSTER, "default");
    let deps: Api<Deployment> = h.api(CLUSTER, "default");
    let kubelet = kubelet(pods.clone());
    let strategy =
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}});
    deps.create(&PostParams::default(), &deployment("web", 3, strategy))
        .await
        .unwrap();
    let d = wait_complete(&deps, "web", 3).await;
    assert_eq!(revision(&d).as_deref(), Some("1"));
    // The revision annotation is written with the status: no new generation (regression:
    // generation 2 right after create, 4 after one template change).
    assert_eq!(d.metadata.generation, Some(1));
    assert_eq!(d.status.as_ref().unwrap().observed_generation, Some(1));
    let available = condition(&d, "Available").unwrap();
    assert_eq!(
        available,
        (
            "True".into(),
            "MinimumReplicasAvailable".into(),
            "Deployment has minimum availability.".into()
        )
    );

    let all = sets.list(&Default::default()).await.unwrap().items;
    let first = owned_by(&all, &d);
    assert_eq!(first.len(), 1);
    let rs1 = first[0].clone();
    let hash = rs1.labels()["pod-template-hash"].clone();
    assert_eq!(rs1.name_any(), format!("web-{hash}"));
    assert_eq!(revision(&rs1).as_deref(), Some("1"));
    assert_eq!(
        rs1.annotations()["team"],
        "blue",
        "the deployment's annotations are copied"
    );
    assert_eq!(
        rs1.annotations()["deployment.kubernetes.io/desired-replicas"],
        "3"
    );
    assert_eq!(
        rs1.annotations()["deployment.kubernetes.io/max-replicas"],
        "4"
    );
    let owner = &rs1.owner_references()[0];
    assert_eq!(
        (
            owner.kind.as_str(),
            owner.controller,
            owner.block_owner_deletion
        ),
        ("Deployment", Some(true), Some(true))
    );
    assert_eq!(
        condition(&d, "Progressing").unwrap().2,
        format!("ReplicaSet \"web-{hash}\" has successfully progressed.")
    );
    let listed = pods.list(&Default::default()).await.unwrap().items;
    assert_eq!(listed.len(), 3);
    for p in &listed {
        assert!(p.name_any().starts_with(&format!("web-{hash}-")));
        assert_eq!(
            p.metadata.generate_name.as_deref(),
            Some(format!("web-{hash}-").as_str())
        );
        assert_eq!(p.labels()["pod-template-hash"], hash);
        let r = &p.owner_references()[0];
        assert_eq!(
            (r.name.as_str(), r.controller, r.block_owner_deletion),
            (rs1.name_any().as_str(), Some(true), Some(true))
        );
    }
    let rs_status = sets.get(&rs1.name_any()).await.unwrap().status.unwrap();
    assert_eq!(
        (
            rs_status.replicas,
            rs_status.ready_replicas,
            rs_status.available_replicas,
            rs_status.fully_labeled_replicas
        ),
        (3, Some(3), Some(3), Some(3))
    );

    // `kubectl set image`: a template change rolls with at most one extra pod and none missing.
    let mon = monitor(sets.clone(), "web-").await;
    let image = json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "nginx:2"}]}}}});
    deps.patch("web", &PatchParams::default(), &Patch::Strategic(image))
        .await
        .unwrap();
    let d = wait_complete(&deps, "web", 3).await;
    assert_eq!(revision(&d).as_deref(), Some("2"));
    assert_eq!(d.metadata.generation, Some(2));
    assert_eq!(d.status.as_ref().unwrap().observed_generation, Some(2));
    let all = sets.list(&Default::default()).await.unwrap().items;
    let mine = owned_by(&all, &d);
    assert_eq!(mine.len(), 2);
    let rs2 = mine
        .iter()
        .find(|r| r.name_any() != rs1.name_any())
        .unwrap();
    assert_eq!(revision(*rs2).as_deref(), Some("2"));
    assert_eq!(rs2.spec.as_ref().unwrap().replicas, Some(3));
    let old = mine
        .iter()
        .find(|r| r.name_any() == rs1.name_any())
        .unwrap();
    assert_eq!(old.spec.as_ref().unwrap().replicas, Some(0));
    assert_eq!(
        *mon.max_desired.lock(),
        4,
        "the surge was used; sizes seen: {:#?}",
        mon.history.lock()
    );
    assert!(
        *mon.max_desired.lock() <= 4,
        "maxSurge 1 over 3 replicas: at most 4 desired, saw {}",
        mon.max_desired.lock()
    );
    assert!(
        *mon.min_available.lock() >= 3,
        "maxUnavailable 0: never fewer than 3 available, saw {}",
        mon.min_available.lock()
    );
    mon.task.abort();
    let images: Vec<String> = pods
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|p| {
            p.spec.as_ref().unwrap().containers[0]
                .image
                .clone()
                .unwrap()
        })
        .collect();
    assert_eq!(images, vec!["nginx:2"; 3]);

    // `kubectl rollout undo`: the template of revision 1 is patched back; its set is reused
    // under revision 3.
    let mut template = rs1.spec.clone().unwrap().template.unwrap();
    template
        .metadata
        .as_mut()
        .unwrap()
        .labels
        .as_mut()
        .unwrap()
        .remove("pod-template-hash");
    let undo = json!([{"op": "replace", "path": "/spec/template", "value": template}]);
    deps.patch(
        "web",
        &PatchParams::default(),
        &Patch::<()>::Json(serde_json::from_value(undo).unwrap()),
    )
    .await
    .unwrap();
    let d = wait_complete(&deps, "web", 3).await;
    assert_eq!(revision(&d).as_deref(), Some("3"));
    let back = sets.get(&rs1.name_any()).await.unwrap();
    assert_eq!(revision(&back).as_deref(), Some("3"));
    assert_eq!(
        back.annotations()["deployment.kubernetes.io/revision-history"],
        "1"
    );
    assert_eq!(back.spec.as_ref().unwrap().replicas, Some(3));
    assert_eq!(
        owned_by(&sets.list(&Default::default()).await.unwrap().items, &d).len(),
        2
    );

    // Scale to zero and back.
    deps.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 0}})),
    )
    .await
    .unwrap();
    wait_list(&pods, "every pod to go", |p| p.is_empty()).await;
    let d = wait_for(&deps, "web", "status with no replicas", |d| {
        d.and_then(|d| d.status.as_ref()).is_some_and(|s| {
            s.replicas.unwrap_or(0) == 0 && s.observed_generation >= d.unwrap().metadata.generation
        })
    })
    .await
    .unwrap();
    assert_eq!(
        sets.get(&rs1.name_any())
            .await
            .unwrap()
            .spec
            .unwrap()
            .replicas,
        Some(0)
    );
    assert_eq!(revision(&d).as_deref(), Some("3"));
    deps.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 3}})),
    )
    .await
    .unwrap();
    wait_complete(&deps, "web", 3).await;
    assert_eq!(
        sets.get(&rs1.name_any())
            .await
            .unwrap()
            .spec
            .unwrap()
            .replicas,
        Some(3)
    );

    // Pause: a template change makes no new set until resumed.
    deps.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"paused": true}})),
    )
    .await
    .unwrap();
    wait_for(&deps, "web", "the paused condition", |d| {
        d.and_then(|d| condition(d, "Progressing"))
            .is_some_and(|c| {
                c == (
                    "Unknown".into(),
                    "DeploymentPaused".into(),
                    "Deployment is paused".into(),
                )
            })
    })
    .await;
    let image = json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "nginx:3"}]}}}});
    deps.patch("web", &PatchParams::default(), &Patch::Strategic(image))
        .await
        .unwrap();
    wait_for(&deps, "web", "the paused change to be observed", |d| {
        d.is_some_and(|d| {
            d.status
                .as_ref()
                .is_some_and(|s| s.observed_generation >= d.metadata.generation)
        })
    })
    .await;
    assert_eq!(
        sets.list(&Default::default()).await.unwrap().items.len(),
        2,
        "no new set while paused"
    );
    deps.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"paused": false}})),
    )
    .await
    .unwrap();
    let d = wait_complete(&deps, "web", 3).await;
    assert_eq!(revision(&d).as_deref(), Some("4"));
    kubelet.abort();
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recreate_removes_old_pods_first_and_history_is_limited() {
    let h = Harness::start(&[CLUSTER]).await;
    let pods: Api<Pod> = h.api(CLUSTER, "default");
    let sets: Api<ReplicaSet> = h.api(CLUSTER, "default");
    let deps: Api<Deployment> = h.api(CLUSTER, "default");
    let kubelet = kubelet(pods.clone());
    let mut d = deployment("batch", 2, json!({"type": "Recreate"}));
    d.spec.as_mut().unwrap().revision_history_limit = Some(1);
    deps.create(&PostParams::default(), &d).await.unwrap();
    wait_complete(&deps, "batch", 2).await;

    // While the new set has pods, the old one must have none (watched on every change).
    let overlap = Arc::new(Mutex::new(false));
    let o = overlap.clone();
    let watch_sets = sets.clone();
    let guard = tokio::spawn(async move {
        let mut seen = std::collections::BTreeMap::new();
        let mut stream = watcher::watcher(watch_sets, watcher::Config::default()).boxed();
        while let Some(Ok(ev)) = stream.next().await {
            if let watcher::Event::Apply(rs) | watcher::Event::InitApply(rs) = ev {
                seen.insert(rs.name_any(), rs.status.map(|s| s.replicas).unwrap_or(0));
            }
            if seen.values().filter(|r| **r > 0).count() > 1 {
                *o.lock() = true;
            }
        }
    });
    for image in ["nginx:2", "nginx:3"] {
        let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": image}]}}}});
        deps.patch("batch", &PatchParams::default(), &Patch::Strategic(patch))
            .await
            .unwrap();
        wait_complete(&deps, "batch", 2).await;
    }
    guard.abort();
    assert!(!*overlap.lock(), "old and new pods never ran together");
    let left = wait_list(&sets, "history cleanup down to one old set", |s| {
        s.len() == 2
    })
    .await;
    let mut revisions: Vec<String> = left.iter().filter_map(revision).collect();
    revisions.sort();
    assert_eq!(revisions, ["2", "3"]);
    kubelet.abort();
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_set_adopts_orphans_replaces_deleted_pods_and_deletes_unready_first() {
    let h = Harness::start(&[CLUSTER]).await;
    let pods: Api<Pod> = h.api(CLUSTER, "default");
    let sets: Api<ReplicaSet> = h.api(CLUSTER, "default");
    let orphan: Pod = serde_json::from_value(json!({
        "metadata": {"name": "orphan", "labels": {"app": "db"}},
        "spec": {"containers": [{"name": "c", "image": "db"}]},
    }))
    .unwrap();
    let orphan = pods.create(&PostParams::default(), &orphan).await.unwrap();
    common::mark_ready(&pods, orphan).await.unwrap();
    let rs: ReplicaSet = serde_json::from_value(json!({
        "metadata": {"name": "db"},
        "spec": {
            "replicas": 3,
            "minReadySeconds": 0,
            "selector": {"matchLabels": {"app": "db"}},
            "template": {"metadata": {"labels": {"app": "db"}}, "spec": {"containers": [{"name": "c", "image": "db"}]}},
        },
    }))
    .unwrap();
    sets.create(&PostParams::default(), &rs).await.unwrap();
    let list = wait_list(&pods, "three pods", |p| p.len() == 3).await;
    let adopted = list.iter().find(|p| p.name_any() == "orphan").unwrap();
    assert_eq!(
        adopted.owner_references()[0].name,
        "db",
        "the orphan was adopted"
    );
    wait_for(&sets, "db", "status of three pods, one ready", |r| {
        r.and_then(|r| r.status.as_ref()).is_some_and(|s| {
            s.replicas == 3 && s.ready_replicas == Some(1) && s.available_replicas == Some(1)
        })
    })
    .await;
    // Scaling down to one keeps the ready pod: unready ones go first.
    sets.patch(
        "db",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 1}})),
    )
    .await
    .unwrap();
    let left = wait_list(&pods, "one pod", |p| p.len() == 1).await;
    assert_eq!(left[0].name_any(), "orphan");
    // A deleted pod is replaced.
    pods.delete("orphan", &Default::default()).await.unwrap();
    let again = wait_list(&pods, "a replacement", |p| {
        p.len() == 1 && p[0].name_any() != "orphan"
    })
    .await;
    assert!(again[0].name_any().starts_with("db-"));
    // A pod whose labels stop matching is released.
    let name = again[0].name_any();
    pods.patch(
        &name,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"app": "other"}}})),
    )
    .await
    .unwrap();
    let released = wait_for(&pods, &name, "the pod to be released", |p| {
        p.is_some_and(|p| p.owner_references().is_empty())
    })
    .await;
    assert!(released.is_some());
    wait_list(&pods, "a new pod for the set", |p| p.len() == 2).await;
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollout_without_progress_times_out_after_its_deadline() {
    let h = Harness::start(&[CLUSTER]).await;
    let deps: Api<Deployment> = h.api(CLUSTER, "default");
    // No kubelet: pods never become ready.
    let mut d = deployment("stuck", 2, json!({"type": "RollingUpdate"}));
    d.spec.as_mut().unwrap().progress_deadline_seconds = Some(1);
    deps.create(&PostParams::default(), &d).await.unwrap();
    let d = wait_for(&deps, "stuck", "the progress deadline to pass", |d| {
        d.and_then(|d| condition(d, "Progressing"))
            .is_some_and(|c| c.1 == "ProgressDeadlineExceeded")
    })
    .await
    .unwrap();
    let (status, _, message) = condition(&d, "Progressing").unwrap();
    assert_eq!(status, "False");
    assert!(
        message.starts_with("ReplicaSet \"stuck-")
            && message.ends_with("\" has timed out progressing."),
        "{message}"
    );
    let available = condition(&d, "Available").unwrap();
    assert_eq!(
        (available.0.as_str(), available.1.as_str()),
        ("False", "MinimumReplicasUnavailable")
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replication_controller_keeps_its_replicas_and_reports_them() {
    use k8s_openapi::api::core::v1::ReplicationController;
    let h = Harness::start(&[CLUSTER]).await;
    let pods: Api<Pod> = h.api(CLUSTER, "default");
    let rcs: Api<ReplicationController> = h.api(CLUSTER, "default");
    let _kubelet = kubelet(pods.clone());
    // No selector: the server takes the template's labels, as upstream does.
    let rc: ReplicationController = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 2,
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "web"}]}},
        },
    }))
    .unwrap();
    rcs.create(&PostParams::default(), &rc).await.unwrap();
    let list = wait_list(&pods, "two pods", |p| p.len() == 2).await;
    for p in &list {
        let owner = &p.owner_references()[0];
        assert_eq!(
            (
                owner.api_version.as_str(),
                owner.kind.as_str(),
                owner.name.as_str()
            ),
            ("v1", "ReplicationController", "web")
        );
        assert_eq!(owner.controller, Some(true));
        assert!(p.name_any().starts_with("web-"));
    }
    let rc = wait_for(&rcs, "web", "two ready replicas observed", |r| {
        r.and_then(|r| r.status.as_ref()).is_some_and(|s| {
            s.replicas == 2 && s.ready_replicas == Some(2) && s.available_replicas == Some(2)
        })
    })
    .await
    .unwrap();
    assert_eq!(
        rc.status.as_ref().unwrap().observed_generation,
        rc.metadata.generation
    );
    // Scaled through the scale subresource, as `kubectl scale rc` does.
    rcs.patch_scale(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 1}})),
    )
    .await
    .unwrap();
    wait_list(&pods, "one pod", |p| p.len() == 1).await;
    // A deleted pod is replaced.
    let left = pods.list(&Default::default()).await.unwrap().items;
    pods.delete(&left[0].name_any(), &Default::default())
        .await
        .unwrap();
    wait_list(&pods, "a replacement", |p| {
        p.len() == 1 && p[0].name_any() != left[0].name_any()
    })
    .await;
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workload_controllers_record_events_and_write_as_kube_controller_manager() {
    use k8s_openapi::api::core::v1::Event;
    let h = Harness::start(&[CLUSTER]).await;
    let pods: Api<Pod> = h.api(CLUSTER, "default");
    let deployments: Api<Deployment> = h.api(CLUSTER, "default");
    let events: Api<Event> = h.api(CLUSTER, "default");
    let _kubelet = kubelet(pods.clone());
    let d = deployment("web", 2, json!({"type": "RollingUpdate"}));
    deployments
        .create(&PostParams::default(), &d)
        .await
        .unwrap();
    let d = wait_complete(&deployments, "web", 2).await;
    assert_eq!(
        d.metadata.generation,
        Some(1),
        "a rollout leaves generation"
    );
    let found = |list: &[Event], kind: &str, reason: &str, prefix: &str| {
        list.iter().any(|e| {
            e.involved_object.kind.as_deref() == Some(kind)
                && e.reason.as_deref() == Some(reason)
                && e.message.as_deref().unwrap_or_default().starts_with(prefix)
        })
    };
    let list = wait_list(
        &events,
        "ScalingReplicaSet and SuccessfulCreate events",
        |l| {
            found(
                l,
                "Deployment",
                "ScalingReplicaSet",
                "Scaled up replica set web-",
            ) && found(l, "ReplicaSet", "SuccessfulCreate", "Created pod: web-")
        },
    )
    .await;
    let scaled = list
        .iter()
        .find(|e| e.reason.as_deref() == Some("ScalingReplicaSet"))
        .unwrap();
    assert_eq!(scaled.type_.as_deref(), Some("Normal"));
    assert_eq!(scaled.involved_object.name.as_deref(), Some("web"));
    assert_eq!(scaled.involved_object.uid, d.metadata.uid);
    assert_eq!(
        scaled.source.as_ref().and_then(|s| s.component.as_deref()),
        Some("deployment-controller")
    );
    assert!(
        scaled.message.as_deref().unwrap().ends_with("from 0 to 2"),
        "{:?}",
        scaled.message
    );
    // Pods the controllers created are managed by `kube-controller-manager`, not `unknown`.
    let pod = &pods.list(&Default::default()).await.unwrap().items[0];
    let managers: Vec<&str> = pod
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter_map(|m| m.manager.as_deref())
        .collect();
    assert!(
        managers.contains(&"kube-controller-manager"),
        "{managers:?}"
    );
    // A changed image rolls: generation 2, observed, and the old set scaled down is an event.
    deployments
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "nginx:2"}]}}}})),
        )
        .await
        .unwrap();
    let d = wait_complete(&deployments, "web", 2).await;
    assert_eq!(d.metadata.generation, Some(2));
    assert_eq!(d.status.as_ref().unwrap().observed_generation, Some(2));
    wait_list(&events, "a scale-down event", |l| {
        found(
            l,
            "Deployment",
            "ScalingReplicaSet",
            "Scaled down replica set web-",
        ) && found(l, "ReplicaSet", "SuccessfulDelete", "Deleted pod: web-")
    })
    .await;
    h.stop().await;
}
