//! Pod printer cases: the statuses `kubectl get pods` shows for real pods.

use serde_json::{Value, json};

use super::POD;
use crate::kinds::testutil::{ago, cells, default_names, names};

fn pod(status: Value) -> Value {
    json!({
        "metadata": {"name": "web-1", "namespace": "default", "creationTimestamp": ago(300)},
        "spec": {"containers": [{"name": "app", "image": "nginx"}], "nodeName": "kind-worker"},
        "status": status
    })
}

fn status_and_ready(p: &Value) -> (String, String, String) {
    let c = cells(&POD, p);
    let s = |i: usize| c[i].as_str().unwrap().to_string();
    (s(1), s(2), s(3))
}

#[test]
fn pod_columns_match_kubectl_get_pods() {
    assert_eq!(
        default_names(&POD),
        ["Name", "Ready", "Status", "Restarts", "Age"]
    );
    assert_eq!(
        names(&POD)[5..],
        ["IP", "Node", "Nominated Node", "Readiness Gates"]
    );
}

#[test]
fn running_pod_prints_every_cell() {
    let p = pod(json!({
        "phase": "Running",
        "podIP": "10.244.0.5",
        "podIPs": [{"ip": "10.244.0.5"}, {"ip": "fd00::5"}],
        "conditions": [{"type": "Ready", "status": "True"}],
        "containerStatuses": [{"name": "app", "ready": true, "restartCount": 0, "state": {"running": {}}}]
    }));
    assert_eq!(
        cells(&POD, &p),
        vec![
            json!("web-1"),
            json!("1/1"),
            json!("Running"),
            json!("0"),
            json!("5m"),
            json!("10.244.0.5"),
            json!("kind-worker"),
            json!("<none>"),
            json!("<none>")
        ]
    );
}

#[test]
fn crash_looping_container_shows_reason_and_last_restart() {
    let p = pod(json!({
        "phase": "Running",
        "containerStatuses": [{
            "name": "app", "ready": false, "restartCount": 3,
            "state": {"waiting": {"reason": "CrashLoopBackOff"}},
            "lastState": {"terminated": {"exitCode": 1, "reason": "Error", "finishedAt": ago(65)}}
        }]
    }));
    assert_eq!(
        status_and_ready(&p),
        (
            "0/1".into(),
            "CrashLoopBackOff".into(),
            "3 (65s ago)".into()
        )
    );
}

#[test]
fn pending_pod_shows_container_creating() {
    let p = pod(json!({
        "phase": "Pending",
        "containerStatuses": [{"name": "app", "ready": false, "restartCount": 0,
            "state": {"waiting": {"reason": "ContainerCreating"}}}]
    }));
    assert_eq!(
        status_and_ready(&p),
        ("0/1".into(), "ContainerCreating".into(), "0".into())
    );
}

#[test]
fn succeeded_pod_is_completed_with_a_row_condition() {
    let p = pod(json!({
        "phase": "Succeeded",
        "containerStatuses": [{"name": "app", "ready": false, "restartCount": 0,
            "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]
    }));
    let row = (POD.row)(&p, crate::kinds::testutil::now());
    assert_eq!(row.cells[2], json!("Completed"));
    assert_eq!(
        row.conditions,
        vec![
            json!({"type": "Completed", "status": "True", "reason": "Succeeded",
            "message": "The pod has completed successfully."})
        ]
    );
}

#[test]
fn evicted_pod_shows_the_status_reason() {
    let p = pod(json!({"phase": "Failed", "reason": "Evicted", "message": "low on memory"}));
    let row = (POD.row)(&p, crate::kinds::testutil::now());
    assert_eq!(row.cells[2], json!("Evicted"));
    assert_eq!(row.conditions[0]["reason"], json!("Failed"));
}

#[test]
fn init_containers_drive_the_status_while_initializing() {
    let mut p = pod(json!({
        "phase": "Pending",
        "initContainerStatuses": [
            {"name": "migrate", "restartCount": 0, "state": {"terminated": {"exitCode": 0}}},
            {"name": "wait", "restartCount": 2, "state": {"running": {}}}
        ],
        "containerStatuses": [{"name": "app", "restartCount": 0,
            "state": {"waiting": {"reason": "PodInitializing"}}}]
    }));
    p["spec"]["initContainers"] = json!([{"name": "migrate"}, {"name": "wait"}]);
    assert_eq!(
        status_and_ready(&p),
        ("0/1".into(), "Init:1/2".into(), "2".into())
    );

    p["status"]["initContainerStatuses"][1]["state"] =
        json!({"waiting": {"reason": "CrashLoopBackOff"}});
    assert_eq!(status_and_ready(&p).1, "Init:CrashLoopBackOff");

    p["status"]["initContainerStatuses"][1]["state"] =
        json!({"terminated": {"exitCode": 1, "reason": "Error"}});
    assert_eq!(status_and_ready(&p).1, "Init:Error");

    p["status"]["initContainerStatuses"][1]["state"] = json!({"terminated": {"exitCode": 2}});
    assert_eq!(status_and_ready(&p).1, "Init:ExitCode:2");

    p["status"]["initContainerStatuses"][1]["state"] =
        json!({"terminated": {"exitCode": 137, "signal": 9}});
    assert_eq!(status_and_ready(&p).1, "Init:Signal:9");
}

#[test]
fn sidecars_count_toward_ready_and_restarts() {
    let mut p = pod(json!({
        "phase": "Running",
        "conditions": [{"type": "Initialized", "status": "True"}, {"type": "Ready", "status": "True"}],
        "initContainerStatuses": [{
            "name": "proxy", "started": true, "ready": true, "restartCount": 1,
            "state": {"running": {}},
            "lastState": {"terminated": {"exitCode": 1, "finishedAt": ago(600)}}
        }],
        "containerStatuses": [{"name": "app", "ready": true, "restartCount": 0, "state": {"running": {}}}]
    }));
    p["spec"]["initContainers"] = json!([{"name": "proxy", "restartPolicy": "Always"}]);
    assert_eq!(
        status_and_ready(&p),
        ("2/2".into(), "Running".into(), "1 (10m ago)".into())
    );
}

#[test]
fn completed_container_beside_a_running_one_reads_not_ready() {
    let mut p = pod(json!({
        "phase": "Running",
        "conditions": [{"type": "Ready", "status": "False"}],
        "containerStatuses": [
            {"name": "app", "ready": true, "restartCount": 0, "state": {"running": {}}},
            {"name": "job", "ready": false, "restartCount": 0,
                "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}
        ]
    }));
    p["spec"]["containers"] = json!([{"name": "app"}, {"name": "job"}]);
    assert_eq!(
        status_and_ready(&p),
        ("1/2".into(), "NotReady".into(), "0".into())
    );
    p["status"]["conditions"][0]["status"] = json!("True");
    assert_eq!(status_and_ready(&p).1, "Running");
}

#[test]
fn deleting_pod_is_terminating_unless_its_node_is_lost() {
    let mut p = pod(json!({"phase": "Running"}));
    p["metadata"]["deletionTimestamp"] = json!(ago(5));
    assert_eq!(status_and_ready(&p).1, "Terminating");
    p["status"]["reason"] = json!("NodeLost");
    assert_eq!(status_and_ready(&p).1, "Unknown");
    let mut done = pod(json!({"phase": "Succeeded"}));
    done["metadata"]["deletionTimestamp"] = json!(ago(5));
    assert_eq!(status_and_ready(&done).1, "Succeeded");
}

#[test]
fn scheduling_gated_pod_says_so() {
    let p = pod(json!({
        "phase": "Pending",
        "conditions": [{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]
    }));
    assert_eq!(status_and_ready(&p).1, "SchedulingGated");
}

#[test]
fn readiness_gates_and_nominated_node_show_in_wide_cells() {
    let mut p = pod(json!({
        "phase": "Pending",
        "nominatedNodeName": "node-b",
        "conditions": [{"type": "example.com/lb", "status": "True"}, {"type": "example.com/dns", "status": "False"}]
    }));
    p["spec"]["readinessGates"] =
        json!([{"conditionType": "example.com/lb"}, {"conditionType": "example.com/dns"}]);
    p["spec"].as_object_mut().unwrap().remove("nodeName");
    let c = cells(&POD, &p);
    assert_eq!(
        c[5..],
        [
            json!("<none>"),
            json!("<none>"),
            json!("node-b"),
            json!("1/2")
        ]
    );
}
