//! Tests over every printer at once: coverage of the served catalogue, column invariants, and
//! robustness against objects of any shape (nothing a client stores may panic a printer).

use serde_json::{Value, json};

use super::{PRINTERS, lookup};
use crate::kinds::testutil::now;

/// Served kinds upstream has no printer for: they get the default `Name`/`Created At` table.
const DEFAULT_TABLE: &[(&str, &str)] = &[
    ("", "Binding"),
    ("", "LimitRange"),
    ("authentication.k8s.io", "SelfSubjectReview"),
    ("authentication.k8s.io", "TokenReview"),
    ("authorization.k8s.io", "LocalSubjectAccessReview"),
    ("authorization.k8s.io", "SelfSubjectAccessReview"),
    ("authorization.k8s.io", "SelfSubjectRulesReview"),
    ("authorization.k8s.io", "SubjectAccessReview"),
    ("rbac.authorization.k8s.io", "ClusterRole"),
    ("rbac.authorization.k8s.io", "Role"),
];

#[test]
fn every_served_kind_with_an_upstream_printer_has_one() {
    for r in apimachinery::builtin::RESOURCES {
        let expect_default = DEFAULT_TABLE.contains(&(r.group, r.kind));
        assert_eq!(
            lookup(r.group, r.kind).is_none(),
            expect_default,
            "{}/{} printer presence",
            r.group,
            r.kind
        );
    }
}

#[test]
fn every_printer_starts_with_name_and_uses_known_types() {
    for (group, kind, p) in PRINTERS {
        let first = &p.columns[0];
        let is_event = *kind == "Event";
        assert!(
            is_event || first.name == "Name",
            "{group}/{kind} starts with Name"
        );
        assert!(
            p.columns.iter().any(|c| c.name == "Name"),
            "{group}/{kind} has a Name column"
        );
        for c in p.columns {
            assert!(
                ["string", "integer", "number", "boolean", "date"].contains(&c.type_),
                "{group}/{kind} column {} type {}",
                c.name,
                c.type_
            );
            assert!(c.priority == 0 || c.priority == 1);
            assert!(!c.description.is_empty());
        }
    }
}

/// Realistic objects of several kinds; every printer is run on every one of them.
fn samples() -> Vec<Value> {
    vec![
        json!({"metadata": {"name": "p", "creationTimestamp": "2024-05-01T11:00:00Z",
            "deletionTimestamp": "2024-05-01T11:59:00Z", "labels": {"a": "b"},
            "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "r", "controller": true}]},
            "spec": {"containers": [{"name": "c", "image": "i"}], "initContainers": [{"name": "i", "restartPolicy": "Always"}],
                "readinessGates": [{"conditionType": "x"}], "nodeName": "n"},
            "status": {"phase": "Running", "podIPs": [{"ip": "1.2.3.4"}], "conditions": [{"type": "Ready", "status": "True"}],
                "initContainerStatuses": [{"name": "i", "started": true, "ready": true, "restartCount": 1,
                    "state": {"terminated": {"exitCode": 1}}, "lastState": {"terminated": {"finishedAt": "2024-05-01T11:00:00Z"}}}],
                "containerStatuses": [{"name": "c", "ready": true, "restartCount": 2, "state": {"running": {}}}]}}),
        json!({"metadata": {"name": "s"}, "spec": {"type": "LoadBalancer", "clusterIPs": ["10.0.0.1"], "externalIPs": ["1.1.1.1"],
            "ports": [{"port": 80, "nodePort": 30000, "protocol": "TCP"}], "selector": {"a": "b"},
            "externalName": "x", "replicas": 2, "selector2": {"matchLabels": {"a": "b"}},
            "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "i"}], "nodeSelector": {"k": "v"}}},
            "jobTemplate": {"spec": {"template": {"spec": {"containers": []}}, "selector": {"matchExpressions": [{"key": "k", "operator": "In", "values": ["v"]}]}}},
            "completions": 2, "parallelism": 3, "schedule": "* * * * *", "timeZone": "UTC",
            "tls": [{}], "rules": [{"host": "h"}], "ingressClassName": "c",
            "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"averageValue": "1"}}},
                {"type": "Pods", "pods": {"target": {"averageValue": "2"}}}, {"type": "Bogus"}],
            "scaleTargetRef": {"kind": "Deployment", "name": "d"}, "minAvailable": 1, "maxUnavailable": "10%",
            "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "claimRef": {"namespace": "n", "name": "c"},
            "volumeName": "v", "storageClassName": "s", "paramRef": {"selector": {"matchLabels": {"a": "b"}}},
            "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"}, "validations": [{}], "drivers": [{}],
            "tokenRequests": [{"audience": "a"}], "parameters": {"kind": "K", "name": "n"},
            "podSelector": {"matchLabels": {"a": "b"}}, "signerName": "s", "expirationSeconds": 3600},
            "status": {"loadBalancer": {"ingress": [{"ip": "2.2.2.2"}]}, "replicas": 1, "readyReplicas": 1,
                "conditions": [{"type": "Complete", "status": "True"}], "startTime": "2024-05-01T11:00:00Z",
                "completionTime": "2024-05-01T11:30:00Z", "active": [{}], "lastScheduleTime": "2024-05-01T11:00:00Z",
                "currentMetrics": [{"type": "Resource", "resource": {"current": {"averageValue": "1"}}}],
                "hard": {"cpu": "1", "limits.memory": "1Gi"}, "used": {"cpu": "0"}, "capacity": {"storage": "1Gi"},
                "addresses": [{"type": "InternalIP", "address": "1.1.1.1"}], "nodeInfo": {"kubeletVersion": "v1"}}}),
        json!({"metadata": {"name": "e"}, "involvedObject": {"kind": "Pod", "name": "p"}, "regarding": {"kind": "Pod"},
            "series": {"count": 2, "lastObservedTime": "2024-05-01T11:00:00.000000Z"}, "eventTime": "bogus",
            "subsets": [{"addresses": [{"ip": "fd00::1"}], "ports": [{"port": 1}]}], "endpoints": [{"addresses": ["a"]}],
            "ports": [{"name": "p"}], "webhooks": [{}], "data": {"a": "b"}, "secrets": [{}], "revision": 3,
            "value": 10, "handler": "h", "provisioner": "p", "capacity": "1Gi"}),
    ]
}

/// Every variant of `v` with one node replaced by a value of another type.
fn mutations(v: &Value) -> Vec<Value> {
    let replacements = [
        Value::Null,
        json!("x"),
        json!(-7),
        json!(i64::MAX),
        json!(1.5),
        json!(true),
        json!([]),
        json!({}),
        json!([{"k": 1}]),
    ];
    let mut out: Vec<Value> = replacements.to_vec();
    match v {
        Value::Object(m) => {
            for (k, child) in m {
                for mutated in mutations(child) {
                    let mut copy = m.clone();
                    copy.insert(k.clone(), mutated);
                    out.push(Value::Object(copy));
                }
            }
        }
        Value::Array(a) => {
            for (i, child) in a.iter().enumerate() {
                for mutated in mutations(child) {
                    let mut copy = a.clone();
                    copy[i] = mutated;
                    out.push(Value::Array(copy));
                }
            }
        }
        _ => {}
    }
    out
}

#[test]
fn printers_survive_objects_of_any_shape() {
    let mut rows = 0usize;
    for sample in samples() {
        for obj in mutations(&sample) {
            for (group, kind, p) in PRINTERS {
                let row = (p.row)(&obj, now());
                assert_eq!(row.cells.len(), p.columns.len(), "{group}/{kind}");
                rows += 1;
            }
        }
    }
    assert!(rows > 10_000, "exercised {rows} rows");
}

#[test]
fn custom_columns_survive_objects_of_any_shape() {
    let printer = crate::Printer::for_custom_resource(&json!([
        {"name": "A", "type": "string", "jsonPath": ".spec.containers[*].name"},
        {"name": "B", "type": "integer", "jsonPath": ".status.replicas"},
        {"name": "C", "type": "date", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].lastTransitionTime"},
        {"name": "D", "type": "number", "jsonPath": "..restartCount"},
        {"name": "E", "type": "boolean", "jsonPath": ".spec.containers[-1:]"}
    ]));
    for sample in samples() {
        for obj in mutations(&sample) {
            assert_eq!(printer.row_at(&obj, now()).cells.len(), 6);
        }
    }
}
