//! StatefulSets against a real in-process API server, with no kubelet: the tests mark pods
//! Running and Ready through their status. Ordered creation waiting for readiness, claims from
//! volume claim templates, ordered scale-down, Parallel management, a rolling update (with a
//! partition) to a new ControllerRevision, OnDelete, and the status `kubectl rollout status`
//! reads.

mod common;

use common::{Harness, kubelet, mark_ready, wait_for, wait_list};
use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

const CLUSTER: &str = "tenant-a";

fn set(name: &str, replicas: i32, extra: Value) -> StatefulSet {
    let mut spec = json!({
        "replicas": replicas,
        "serviceName": name,
        "selector": {"matchLabels": {"app": name}},
        "template": {
            "metadata": {"labels": {"app": name}},
            "spec": {"containers": [{"name": "c", "image": "nginx:1"}]},
        },
    });
    for (k, v) in extra.as_object().unwrap() {
        spec[k] = v.clone();
    }
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap()
}

fn names(pods: &[Pod]) -> Vec<String> {
    let mut n: Vec<String> = pods
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(|p| p.name_any())
        .collect();
    n.sort();
    n
}

/// What `kubectl rollout status sts/<name>` waits for.
fn rolled_out(s: Option<&StatefulSet>) -> bool {
    let Some(s) = s else { return false };
    let Some(st) = &s.status else { return false };
    let replicas = s.spec.as_ref().and_then(|sp| sp.replicas).unwrap_or(1);
    st.observed_generation >= s.metadata.generation
        && st.ready_replicas.unwrap_or(0) >= replicas
        && st.update_revision == st.current_revision
}

#[tokio::test]
async fn ordered_ready_creates_each_pod_after_the_previous_is_ready_with_its_claims() {
    let h = Harness::start(&[CLUSTER]).await;
    let sets: Api<StatefulSet> = h.api(CLUSTER, "default");
    let pods: Api<Pod> = h.api(CLUSTER, "default");
    let pvcs: Api<PersistentVolumeClaim> = h.api(CLUSTER, "default");
    let extra = json!({"volumeClaimTemplates": [{"metadata": {"name": "data"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]});
    sets.create(&PostParams::default(), &set("db", 3, extra))
        .await
        .unwrap();
    for i in 0..3 {
        let name = format!("db-{i}");
        let listed = wait_list(&pods, &format!("{name} created"), |ps| {
            names(ps).contains(&name)
        })
        .await;
        // Nothing beyond the pod that is not ready yet.
        assert_eq!(names(&listed).len(), i + 1, "{:?}", names(&listed));
        let pod = listed.into_iter().find(|p| p.name_any() == name).unwrap();
        let l = pod.labels();
        assert_eq!(l["statefulset.kubernetes.io/pod-name"], name);
        assert_eq!(l["apps.kubernetes.io/pod-index"], i.to_string());
        assert!(l["controller-revision-hash"].starts_with("db-"));
        let spec = pod.spec.clone().unwrap();
        assert_eq!(spec.hostname.as_deref(), Some(name.as_str()));
        assert_eq!(spec.subdomain.as_deref(), Some("db"));
        let claim = format!("data-db-{i}");
        let vol = spec
            .volumes
            .unwrap()
            .into_iter()
            .find(|v| v.name == "data")
            .unwrap();
        assert_eq!(vol.persistent_volume_claim.unwrap().claim_name, claim);
        assert!(pvcs.get(&claim).await.is_ok());
        mark_ready(&pods, pod).await.unwrap();
    }
    let s = wait_for(&sets, "db", "the set rolled out", rolled_out)
        .await
        .unwrap();
    let st = s.status.unwrap();
    assert_eq!(
        (st.replicas, st.current_replicas, st.updated_replicas),
        (3, Some(3), Some(3))
    );
    assert_eq!(st.available_replicas, Some(3));
    let revs: Api<ControllerRevision> = h.api(CLUSTER, "default");
    let rev = revs
        .get(st.update_revision.as_deref().unwrap())
        .await
        .unwrap();
    assert_eq!(rev.revision, 1);

    // Scale down: highest ordinal first; the claims stay (Retain).
    sets.patch(
        "db",
        &PatchParams::default(),
        &Patch::Merge(&json!({"spec": {"replicas": 1}})),
    )
    .await
    .unwrap();
    wait_list(&pods, "db-2 removed first", |ps| {
        names(ps) == ["db-0", "db-1"] || names(ps) == ["db-0"]
    })
    .await;
    wait_list(&pods, "one pod left", |ps| names(ps) == ["db-0"]).await;
    assert_eq!(pvcs.list(&Default::default()).await.unwrap().items.len(), 3);
    h.stop().await;
}

#[tokio::test]
async fn parallel_management_creates_every_pod_at_once_with_events_in_its_cluster() {
    let h = Harness::start(&[CLUSTER]).await;
    let sets: Api<StatefulSet> = h.api(CLUSTER, "default");
    let pods: Api<Pod> = h.api(CLUSTER, "default");
    sets.create(
        &PostParams::default(),
        &set("par", 3, json!({"podManagementPolicy": "Parallel"})),
    )
    .await
    .unwrap();
    wait_list(&pods, "three pods without readiness", |ps| {
        names(ps) == ["par-0", "par-1", "par-2"]
    })
    .await;
    // Regression: its Events went to the root cluster (objects of a cross-cluster informer
    // carry no cluster annotation); they belong to the set's own cluster.
    let events: Api<k8s_openapi::api::core::v1::Event> = h.api(CLUSTER, "default");
    wait_list(
        &events,
        "the set's SuccessfulCreate Events in its cluster",
        |es| {
            es.iter()
                .filter(|e| {
                    e.reason.as_deref() == Some("SuccessfulCreate")
                        && e.involved_object.name.as_deref() == Some("par")
                })
                .count()
                == 3
        },
    )
    .await;
    h.stop().await;
}

#[tokio::test]
async fn a_rolling_update_replaces_pods_from_the_highest_ordinal_down_to_the_partition() {
    let h = Harness::start(&[CLUSTER]).await;
    let sets: Api<StatefulSet> = h.api(CLUSTER, "default");
    let pods: Api<Pod> = h.api(CLUSTER, "default");
    let k = kubelet(pods.clone());
    sets.create(&PostParams::default(), &set("web", 3, json!({})))
        .await
        .unwrap();
    let first = wait_for(&sets, "web", "the set rolled out", rolled_out)
        .await
        .unwrap();
    let rev1 = first.status.unwrap().update_revision.unwrap();

    // Partition 2: only web-2 is updated.
    let patch = json!({"spec": {
        "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 2}},
        "template": {"spec": {"containers": [{"name": "c", "image": "nginx:2"}]}},
    }});
    sets.patch("web", &PatchParams::default(), &Patch::Strategic(&patch))
        .await
        .unwrap();
    let partial = wait_for(&sets, "web", "the partitioned update", |s| {
        s.and_then(|s| s.status.as_ref()).is_some_and(|st| {
            st.updated_replicas == Some(1)
                && st.ready_replicas == Some(3)
                && st.update_revision.as_deref() != Some(rev1.as_str())
        })
    })
    .await
    .unwrap();
    let st = partial.status.unwrap();
    let rev2 = st.update_revision.unwrap();
    assert_eq!(st.current_revision.as_deref(), Some(rev1.as_str()));
    let listed = pods.list(&Default::default()).await.unwrap().items;
    let rev_of = |n: &str| {
        listed.iter().find(|p| p.name_any() == n).unwrap().labels()["controller-revision-hash"]
            .clone()
    };
    assert_eq!(rev_of("web-2"), rev2);
    assert_eq!(rev_of("web-0"), rev1);

    // Partition 0: the rest follow and the current revision becomes the update revision.
    let patch = json!({"spec": {"updateStrategy": {"rollingUpdate": {"partition": 0}}}});
    sets.patch("web", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    let done = wait_for(&sets, "web", "the update rolled out", |s| {
        rolled_out(s)
            && s.unwrap()
                .status
                .as_ref()
                .unwrap()
                .current_revision
                .as_deref()
                == Some(rev2.as_str())
    })
    .await
    .unwrap();
    assert_eq!(done.status.unwrap().updated_replicas, Some(3));
    let listed = pods.list(&Default::default()).await.unwrap().items;
    assert!(
        listed
            .iter()
            .all(|p| p.labels()["controller-revision-hash"] == rev2)
    );
    k.abort();
    h.stop().await;
}

#[tokio::test]
async fn on_delete_updates_a_pod_only_when_it_is_deleted() {
    let h = Harness::start(&[CLUSTER]).await;
    let sets: Api<StatefulSet> = h.api(CLUSTER, "default");
    let pods: Api<Pod> = h.api(CLUSTER, "default");
    let k = kubelet(pods.clone());
    sets.create(
        &PostParams::default(),
        &set("od", 2, json!({"updateStrategy": {"type": "OnDelete"}})),
    )
    .await
    .unwrap();
    let first = wait_for(&sets, "od", "the set rolled out", rolled_out)
        .await
        .unwrap();
    let rev1 = first.status.unwrap().update_revision.unwrap();
    let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "nginx:2"}]}}}});
    sets.patch("od", &PatchParams::default(), &Patch::Strategic(&patch))
        .await
        .unwrap();
    let s = wait_for(&sets, "od", "the new revision", |s| {
        s.and_then(|s| s.status.as_ref())
            .is_some_and(|st| st.update_revision.as_deref() != Some(rev1.as_str()))
    })
    .await
    .unwrap();
    let st = s.status.unwrap();
    assert_eq!(st.updated_replicas, Some(0));
    let rev2 = st.update_revision.unwrap();
    let old = pods.get("od-1").await.unwrap();
    pods.delete("od-1", &DeleteParams::default()).await.unwrap();
    let p = wait_for(&pods, "od-1", "od-1 recreated at the new revision", |p| {
        p.is_some_and(|p| p.uid() != old.uid() && p.labels()["controller-revision-hash"] == rev2)
    })
    .await
    .unwrap();
    assert_eq!(p.labels()["apps.kubernetes.io/pod-index"], "1");
    assert_eq!(
        pods.get("od-0").await.unwrap().labels()["controller-revision-hash"],
        rev1
    );
    k.abort();
    h.stop().await;
}
