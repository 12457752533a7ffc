//! Workload controller printers: Deployment, ReplicaSet, StatefulSet, DaemonSet,
//! ControllerRevision, plus the core ReplicationController and PodTemplate.
//!
//! Replica counts are cells of type integer except the `ready/desired` pairs; a missing
//! `spec.replicas` prints as 1, its upstream default.

use serde_json::Value;

use super::Printer;
use crate::column::{AGE, CONTAINERS, Def, IMAGES, NAME, Row, SELECTOR, cells, i, s};
use crate::format::{self, container_cells};
use crate::meta;
use crate::time::Instant;
use crate::value::{at, int_or_zero, list, map, opt_int, str_or_empty};

/// `spec.replicas`, defaulted to 1 as upstream's defaulting does.
fn desired(obj: &Value) -> i64 {
    opt_int(obj, &["spec", "replicas"]).unwrap_or(1)
}

fn template_containers(obj: &Value) -> (String, String) {
    container_cells(list(obj, &["spec", "template", "spec", "containers"]))
}

const UP_TO_DATE: Def = s("Up-to-date", "Replicas updated to the latest pod template.");
const AVAILABLE: Def = s("Available", "Replicas ready for at least minReadySeconds.");

pub(crate) const DEPLOYMENT: Printer = Printer {
    columns: &[
        NAME,
        s("Ready", "Ready replicas out of desired replicas."),
        UP_TO_DATE,
        AVAILABLE,
        AGE,
        CONTAINERS,
        IMAGES,
        SELECTOR,
    ],
    row: deployment,
};

fn deployment(obj: &Value, now: Instant) -> Row {
    let (names, images) = template_containers(obj);
    Row::new(cells![
        meta::name(obj),
        format!(
            "{}/{}",
            int_or_zero(obj, &["status", "readyReplicas"]),
            desired(obj)
        ),
        int_or_zero(obj, &["status", "updatedReplicas"]),
        int_or_zero(obj, &["status", "availableReplicas"]),
        meta::age(obj, now),
        names,
        images,
        format::selector_or_invalid(at(obj, &["spec", "selector"])),
    ])
}

const REPLICA_COLUMNS: &[Def] = &[
    NAME,
    i("Desired", "Number of replicas the controller should run."),
    i("Current", "Number of replicas the controller has created."),
    i("Ready", "Number of replicas that are ready."),
    AGE,
    CONTAINERS,
    IMAGES,
    SELECTOR,
];

pub(crate) const REPLICA_SET: Printer = Printer {
    columns: REPLICA_COLUMNS,
    row: replica_set,
};

fn replica_set(obj: &Value, now: Instant) -> Row {
    let (names, images) = template_containers(obj);
    Row::new(cells![
        meta::name(obj),
        desired(obj),
        int_or_zero(obj, &["status", "replicas"]),
        int_or_zero(obj, &["status", "readyReplicas"]),
        meta::age(obj, now),
        names,
        images,
        format::label_selector(at(obj, &["spec", "selector"])),
    ])
}

pub(crate) const REPLICATION_CONTROLLER: Printer = Printer {
    columns: REPLICA_COLUMNS,
    row: replication_controller,
};

fn replication_controller(obj: &Value, now: Instant) -> Row {
    let (names, images) = template_containers(obj);
    Row::new(cells![
        meta::name(obj),
        desired(obj),
        int_or_zero(obj, &["status", "replicas"]),
        int_or_zero(obj, &["status", "readyReplicas"]),
        meta::age(obj, now),
        names,
        images,
        format::labels(map(obj, &["spec", "selector"])),
    ])
}

pub(crate) const STATEFUL_SET: Printer = Printer {
    columns: &[
        NAME,
        s("Ready", "Ready replicas out of desired replicas."),
        AGE,
        CONTAINERS,
        IMAGES,
    ],
    row: stateful_set,
};

fn stateful_set(obj: &Value, now: Instant) -> Row {
    let (names, images) = template_containers(obj);
    Row::new(cells![
        meta::name(obj),
        format!(
            "{}/{}",
            int_or_zero(obj, &["status", "readyReplicas"]),
            desired(obj)
        ),
        meta::age(obj, now),
        names,
        images,
    ])
}

pub(crate) const DAEMON_SET: Printer = Printer {
    columns: &[
        NAME,
        i("Desired", "Nodes that should run the daemon pod."),
        i(
            "Current",
            "Nodes running at least one daemon pod that should.",
        ),
        i("Ready", "Nodes whose daemon pod is ready."),
        i(
            "Up-to-date",
            "Nodes running the latest daemon pod template.",
        ),
        i("Available", "Nodes whose daemon pod is available."),
        s(
            "Node Selector",
            "Node labels the daemon pods are restricted to.",
        ),
        AGE,
        CONTAINERS,
        IMAGES,
        SELECTOR,
    ],
    row: daemon_set,
};

fn daemon_set(obj: &Value, now: Instant) -> Row {
    let (names, images) = template_containers(obj);
    let status = |field: &str| int_or_zero(obj, &["status", field]);
    Row::new(cells![
        meta::name(obj),
        status("desiredNumberScheduled"),
        status("currentNumberScheduled"),
        status("numberReady"),
        status("updatedNumberScheduled"),
        status("numberAvailable"),
        format::labels(map(obj, &["spec", "template", "spec", "nodeSelector"])),
        meta::age(obj, now),
        names,
        images,
        format::label_selector(at(obj, &["spec", "selector"])),
    ])
}

pub(crate) const CONTROLLER_REVISION: Printer = Printer {
    columns: &[
        NAME,
        s("Controller", "The controller that owns this revision."),
        s("Revision", "The revision number."),
        AGE,
    ],
    row: controller_revision,
};

fn controller_revision(obj: &Value, now: Instant) -> Row {
    let controller = list(obj, &["metadata", "ownerReferences"])
        .iter()
        .find(|r| at(r, &["controller"]).and_then(Value::as_bool) == Some(true));
    let controller_name = match controller {
        None => "<none>".to_string(),
        Some(r) => {
            let api_version = str_or_empty(r, &["apiVersion"]);
            let group = match api_version.split('/').collect::<Vec<_>>().as_slice() {
                [group, _version] => *group,
                _ => "",
            };
            let kind = str_or_empty(r, &["kind"]);
            let name = str_or_empty(r, &["name"]);
            match (group, kind) {
                ("", "") => name.to_string(),
                ("", kind) => format!("{}/{name}", kind.to_lowercase()),
                (group, kind) => format!("{}.{}/{name}", kind.to_lowercase(), group.to_lowercase()),
            }
        }
    };
    Row::new(cells![
        meta::name(obj),
        controller_name,
        int_or_zero(obj, &["revision"]),
        meta::age(obj, now),
    ])
}

pub(crate) const POD_TEMPLATE: Printer = Printer {
    columns: &[
        NAME,
        s("Containers", "Names of the containers in the template."),
        s("Images", "Images of the containers in the template."),
        s(
            "Pod Labels",
            "Labels of the pods created from the template.",
        ),
    ],
    row: pod_template,
};

fn pod_template(obj: &Value, _now: Instant) -> Row {
    let (names, images) = container_cells(list(obj, &["template", "spec", "containers"]));
    Row::new(cells![
        meta::name(obj),
        names,
        images,
        format::labels(map(obj, &["template", "metadata", "labels"])),
    ])
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::kinds::testutil::{ago, cells, default_names};

    fn template() -> Value {
        json!({"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [
            {"name": "nginx", "image": "nginx:1.27"}, {"name": "sidecar", "image": "envoy:v1"}
        ]}})
    }

    #[test]
    fn deployment_prints_ready_pair_counts_and_wide_selector() {
        let d = json!({
            "metadata": {"name": "web", "creationTimestamp": ago(86_400 * 3 + 3600 * 4)},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}, "template": template()},
            "status": {"replicas": 3, "readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2}
        });
        assert_eq!(
            default_names(&DEPLOYMENT),
            ["Name", "Ready", "Up-to-date", "Available", "Age"]
        );
        assert_eq!(
            cells(&DEPLOYMENT, &d),
            vec![
                json!("web"),
                json!("2/3"),
                json!(3),
                json!(2),
                json!("3d4h"),
                json!("nginx,sidecar"),
                json!("nginx:1.27,envoy:v1"),
                json!("app=web")
            ]
        );
    }

    #[test]
    fn deployment_without_status_reads_zero_of_default_replicas() {
        let d = json!({"metadata": {"name": "new"}, "spec": {"template": template()}});
        let c = cells(&DEPLOYMENT, &d);
        assert_eq!(
            c[1..5],
            [json!("0/1"), json!(0), json!(0), json!("<unknown>")]
        );
        assert_eq!(c[7], json!(""));
    }

    #[test]
    fn replica_set_and_replication_controller_print_integers() {
        let rs = json!({
            "metadata": {"name": "web-7d9f", "creationTimestamp": ago(45)},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web", "pod-template-hash": "7d9f"}},
                "template": template()},
            "status": {"replicas": 2, "readyReplicas": 1}
        });
        assert_eq!(
            cells(&REPLICA_SET, &rs),
            vec![
                json!("web-7d9f"),
                json!(2),
                json!(2),
                json!(1),
                json!("45s"),
                json!("nginx,sidecar"),
                json!("nginx:1.27,envoy:v1"),
                json!("app=web,pod-template-hash=7d9f")
            ]
        );
        let rc = json!({"metadata": {"name": "old"}, "spec": {"replicas": 0, "selector": {"app": "old"}}});
        assert_eq!(
            cells(&REPLICATION_CONTROLLER, &rc)[1..4],
            [json!(0), json!(0), json!(0)]
        );
        assert_eq!(cells(&REPLICATION_CONTROLLER, &rc)[7], json!("app=old"));
    }

    #[test]
    fn stateful_set_and_daemon_set_print_like_kubectl() {
        let sts = json!({"metadata": {"name": "db", "creationTimestamp": ago(7200)},
            "spec": {"replicas": 3, "template": template()}, "status": {"readyReplicas": 3}});
        assert_eq!(
            cells(&STATEFUL_SET, &sts)[..3],
            [json!("db"), json!("3/3"), json!("120m")]
        );
        let ds = json!({
            "metadata": {"name": "kube-proxy", "creationTimestamp": ago(600)},
            "spec": {"selector": {"matchLabels": {"k8s-app": "kube-proxy"}}, "template": {"spec": {
                "nodeSelector": {"kubernetes.io/os": "linux"}, "containers": [{"name": "kube-proxy", "image": "kube-proxy:v1.33"}]}}},
            "status": {"desiredNumberScheduled": 3, "currentNumberScheduled": 3, "numberReady": 2,
                "updatedNumberScheduled": 3, "numberAvailable": 2}
        });
        assert_eq!(
            cells(&DAEMON_SET, &ds),
            vec![
                json!("kube-proxy"),
                json!(3),
                json!(3),
                json!(2),
                json!(3),
                json!(2),
                json!("kubernetes.io/os=linux"),
                json!("10m"),
                json!("kube-proxy"),
                json!("kube-proxy:v1.33"),
                json!("k8s-app=kube-proxy")
            ]
        );
    }

    #[test]
    fn controller_revision_names_its_controller_with_group() {
        let cr = json!({
            "metadata": {"name": "web-5c7f", "creationTimestamp": ago(60), "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web", "controller": true}]},
            "revision": 2
        });
        assert_eq!(
            cells(&CONTROLLER_REVISION, &cr),
            vec![
                json!("web-5c7f"),
                json!("statefulset.apps/web"),
                json!(2),
                json!("60s")
            ]
        );
        let orphan = json!({"metadata": {"name": "x"}, "revision": 1});
        assert_eq!(cells(&CONTROLLER_REVISION, &orphan)[1], json!("<none>"));
    }

    #[test]
    fn pod_template_lists_containers_and_labels() {
        let pt = json!({"metadata": {"name": "tpl"}, "template": template()});
        assert_eq!(
            cells(&POD_TEMPLATE, &pt),
            vec![
                json!("tpl"),
                json!("nginx,sidecar"),
                json!("nginx:1.27,envoy:v1"),
                json!("app=web")
            ]
        );
    }
}
