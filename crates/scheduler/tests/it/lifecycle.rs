//! A pod's life with the scheduler: the failure report (condition and event), retry when the
//! cluster changes, and priority preemption.

use k8s_openapi::api::core::v1::{Event, Pod};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::json;

use crate::common::Harness;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_that_fits_nowhere_gets_pod_scheduled_false_and_a_failed_scheduling_event() {
    let h = Harness::start(&["a"]).await;
    h.node("a", "small", "1", "1Gi", json!({})).await;
    h.pod("a", "huge", "4", json!({})).await;
    let message = h.unschedulable("a", "huge").await;
    let expected = "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are \
                    available: 1 No preemption victims found for incoming pod.";
    assert_eq!(message, expected);
    let event = h.event("a", "huge", "FailedScheduling").await;
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    assert_eq!(event.message.as_deref(), Some(expected));
    assert_eq!(
        event.reporting_component.as_deref(),
        Some("default-scheduler")
    );
    assert_eq!(
        event.source.and_then(|s| s.component).as_deref(),
        Some("default-scheduler")
    );
    assert_eq!(event.involved_object.kind.as_deref(), Some("Pod"));
    // `kubectl get events` lists core/v1 events of the namespace: it is there.
    let listed = Api::<Event>::namespaced(h.client("a"), "default")
        .list(&ListParams::default())
        .await
        .unwrap();
    assert!(
        listed
            .items
            .iter()
            .any(|e| e.reason.as_deref() == Some("FailedScheduling"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unschedulable_pod_is_retried_when_a_node_is_added() {
    let h = Harness::start(&[]).await;
    h.pod("root", "waiting", "2", json!({})).await;
    assert_eq!(
        h.unschedulable("root", "waiting").await,
        "no nodes available to schedule pods"
    );
    h.node("root", "small", "1", "4Gi", json!({})).await;
    let msg = h
        .wait_pod("root", "waiting", |p| {
            crate::common::scheduled_condition(p)
                .is_some_and(|(_, m)| m.contains("Insufficient cpu"))
        })
        .await;
    assert!(msg.spec.unwrap().node_name.is_none());
    h.node("root", "big", "4", "4Gi", json!({})).await;
    assert_eq!(h.bound("root", "waiting").await, "big");
    let scheduled = h.event("root", "waiting", "Scheduled").await;
    assert_eq!(
        scheduled.message.as_deref(),
        Some("Successfully assigned default/waiting to big")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_pod_makes_room_for_an_unschedulable_one() {
    let h = Harness::start(&[]).await;
    h.node("root", "only", "1", "4Gi", json!({})).await;
    h.pod("root", "holder", "800m", json!({})).await;
    h.bound("root", "holder").await;
    h.pod("root", "next", "800m", json!({})).await;
    h.unschedulable("root", "next").await;
    h.pods("root")
        .delete("holder", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    assert_eq!(h.bound("root", "next").await, "only");
}

async fn priority_class(h: &Harness, name: &str, value: i32, policy: Option<&str>) {
    let mut pc = json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
        "metadata": {"name": name}, "value": value});
    if let Some(p) = policy {
        pc["preemptionPolicy"] = json!(p);
    }
    let pc: PriorityClass = serde_json::from_value(pc).unwrap();
    Api::<PriorityClass>::all(h.client("root"))
        .create(&PostParams::default(), &pc)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_higher_priority_pod_preempts_a_lower_priority_one() {
    let h = Harness::start(&[]).await;
    priority_class(&h, "low", 10, None).await;
    priority_class(&h, "high", 1000, None).await;
    priority_class(&h, "polite", 1000, Some("Never")).await;
    h.node("root", "only", "1", "4Gi", json!({})).await;
    h.pod(
        "root",
        "victim",
        "800m",
        json!({"spec": {"priorityClassName": "low"}}),
    )
    .await;
    h.bound("root", "victim").await;

    h.pod(
        "root",
        "polite",
        "800m",
        json!({"spec": {"priorityClassName": "polite"}}),
    )
    .await;
    assert_eq!(
        h.unschedulable("root", "polite").await,
        "0/1 nodes are available: 1 Insufficient cpu. preemption: not eligible due to \
         preemptionPolicy=Never."
    );

    h.pod(
        "root",
        "preemptor",
        "800m",
        json!({"spec": {"priorityClassName": "high"}}),
    )
    .await;
    let nominated = h
        .wait_pod("root", "preemptor", |p: &Pod| {
            p.status
                .as_ref()
                .and_then(|s| s.nominated_node_name.as_deref())
                == Some("only")
        })
        .await;
    assert!(nominated.spec.unwrap().node_name.is_none());
    // The victim is marked and deleted; without a node agent it may linger as terminating,
    // so finish its deletion as a kubelet would.
    if let Some(victim) = h.gone_or_terminating("root", "victim").await {
        let marked = victim.status.and_then(|s| s.conditions).unwrap_or_default();
        assert!(marked.iter().any(|c| c.type_ == "DisruptionTarget"
            && c.reason.as_deref() == Some("PreemptionByScheduler")));
        let _ = h
            .pods("root")
            .delete("victim", &DeleteParams::default().grace_period(0))
            .await;
    }
    let preempted = h.event("root", "victim", "Preempted").await;
    assert!(preempted.message.unwrap().ends_with("on node only"));
    assert_eq!(h.bound("root", "preemptor").await, "only");
    // The polite pod of the same priority never preempted anybody and still waits.
    let polite = h.pods("root").get("polite").await.unwrap();
    assert!(polite.spec.unwrap().node_name.is_none());
}
