//! Bodies built with k8s-pb's prost types (an encoder independent of ours) decode to the JSON
//! kube-apiserver would store: special forms, maps, bytes, and Go's zero-value rule.

mod common;

use std::collections::BTreeMap;

use common::{envelope, s};
use k8s_pb::api::apps::v1 as apps;
use k8s_pb::api::core::v1 as core;
use k8s_pb::apimachinery::pkg::api::resource::Quantity;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_pb::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::json;

fn quantity(v: &str) -> Quantity {
    Quantity { string: s(v) }
}

fn int_or_string_str(v: &str) -> IntOrString {
    IntOrString {
        r#type: Some(1),
        int_val: Some(0),
        str_val: s(v),
    }
}

fn int_or_string_int(v: i32) -> IntOrString {
    IntOrString {
        r#type: Some(0),
        int_val: Some(v),
        str_val: s(""),
    }
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn deployment() -> apps::Deployment {
    let container = core::Container {
        name: s("web"),
        image: s("nginx:1.27"),
        ports: vec![core::ContainerPort {
            name: s("http"),
            container_port: Some(8080),
            protocol: s("TCP"),
            host_port: Some(0),
            host_ip: s(""),
        }],
        resources: Some(core::ResourceRequirements {
            limits: [
                ("cpu".to_string(), quantity("500m")),
                ("memory".to_string(), quantity("128Mi")),
            ]
            .into(),
            requests: [("cpu".to_string(), quantity("250m"))].into(),
            ..Default::default()
        }),
        image_pull_policy: s(""),
        stdin: Some(false),
        tty: Some(false),
        ..Default::default()
    };
    apps::Deployment {
        metadata: Some(meta::ObjectMeta {
            name: s("web"),
            namespace: s("default"),
            generate_name: s(""),
            generation: Some(0),
            labels: labels(&[("app", "web")]),
            creation_timestamp: Some(meta::Time::default()),
            ..Default::default()
        }),
        spec: Some(apps::DeploymentSpec {
            replicas: Some(0),
            selector: Some(meta::LabelSelector {
                match_labels: labels(&[("app", "web")]),
                ..Default::default()
            }),
            template: Some(core::PodTemplateSpec {
                metadata: Some(meta::ObjectMeta {
                    labels: labels(&[("app", "web")]),
                    ..Default::default()
                }),
                spec: Some(core::PodSpec {
                    containers: vec![container],
                    ..Default::default()
                }),
            }),
            strategy: Some(apps::DeploymentStrategy {
                r#type: s("RollingUpdate"),
                rolling_update: Some(apps::RollingUpdateDeployment {
                    max_surge: Some(int_or_string_str("25%")),
                    max_unavailable: Some(int_or_string_int(1)),
                }),
            }),
            min_ready_seconds: Some(0),
            revision_history_limit: Some(0),
            paused: Some(false),
            progress_deadline_seconds: None,
        }),
        status: Some(apps::DeploymentStatus::default()),
    }
}

#[test]
fn deployment_decodes_with_quantities_int_or_string_and_go_zero_rules() {
    let body = envelope("apps/v1", "Deployment", &deployment());
    let json = pbcodec::decode(&body).expect("decodes");
    assert_eq!(
        json,
        json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"}},
            "spec": {
                // pointers keep their zero; omitempty non-pointers (minReadySeconds, paused) drop it
                "replicas": 0,
                "revisionHistoryLimit": 0,
                "selector": {"matchLabels": {"app": "web"}},
                "strategy": {
                    "type": "RollingUpdate",
                    "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1}
                },
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{
                        "name": "web",
                        "image": "nginx:1.27",
                        "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
                        "resources": {
                            "limits": {"cpu": "500m", "memory": "128Mi"},
                            "requests": {"cpu": "250m"}
                        }
                    }]}
                }
            },
            "status": {}
        })
    );
}

#[test]
fn secret_bytes_become_base64_and_pointer_false_is_kept() {
    let secret = core::Secret {
        metadata: Some(meta::ObjectMeta {
            name: s("creds"),
            ..Default::default()
        }),
        immutable: Some(false),
        data: [
            ("password".to_string(), b"s3cr3t".to_vec()),
            ("binary".to_string(), vec![0, 255, 1]),
            ("empty".to_string(), vec![]),
        ]
        .into(),
        string_data: BTreeMap::new(),
        r#type: s("Opaque"),
    };
    let json = pbcodec::decode(&envelope("v1", "Secret", &secret)).expect("decodes");
    assert_eq!(
        json,
        json!({
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "creds"},
            "immutable": false,
            "type": "Opaque",
            "data": {"password": "czNjcjN0", "binary": "AP8B", "empty": ""}
        })
    );
}

#[test]
fn pod_times_probes_and_inlined_structs_decode_like_go() {
    let pod = core::Pod {
        metadata: Some(meta::ObjectMeta {
            name: s("p"),
            creation_timestamp: Some(meta::Time {
                seconds: Some(1_714_564_800),
                nanos: Some(0),
            }),
            deletion_timestamp: Some(meta::Time {
                seconds: Some(1_714_568_400),
                nanos: Some(0),
            }),
            deletion_grace_period_seconds: Some(0),
            ..Default::default()
        }),
        spec: Some(core::PodSpec {
            containers: vec![core::Container {
                name: s("app"),
                readiness_probe: Some(core::Probe {
                    handler: Some(core::ProbeHandler {
                        http_get: Some(core::HttpGetAction {
                            path: s("/healthz"),
                            port: Some(int_or_string_str("http")),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }),
                    initial_delay_seconds: Some(0),
                    period_seconds: Some(10),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            volumes: vec![core::Volume {
                name: s("cfg"),
                volume_source: Some(core::VolumeSource {
                    config_map: Some(core::ConfigMapVolumeSource {
                        local_object_reference: Some(core::LocalObjectReference {
                            name: s("settings"),
                        }),
                        default_mode: Some(420),
                        optional: Some(false),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
            }],
            security_context: Some(core::PodSecurityContext {
                run_as_user: Some(0),
                run_as_non_root: Some(false),
                ..Default::default()
            }),
            automount_service_account_token: Some(false),
            termination_grace_period_seconds: Some(0),
            host_network: Some(false),
            ..Default::default()
        }),
        status: Some(core::PodStatus {
            phase: s("Running"),
            start_time: Some(meta::Time {
                seconds: Some(1_714_564_801),
                nanos: Some(5),
            }),
            conditions: vec![core::PodCondition {
                r#type: s("Ready"),
                status: s("True"),
                last_probe_time: Some(meta::Time::default()),
                last_transition_time: Some(meta::Time {
                    seconds: Some(1_714_564_802),
                    nanos: Some(0),
                }),
                ..Default::default()
            }],
            ..Default::default()
        }),
    };
    let json = pbcodec::decode(&envelope("v1", "Pod", &pod)).expect("decodes");
    assert_eq!(
        json,
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "p",
                "creationTimestamp": "2024-05-01T12:00:00Z",
                "deletionTimestamp": "2024-05-01T13:00:00Z",
                "deletionGracePeriodSeconds": 0
            },
            "spec": {
                "containers": [{
                    "name": "app",
                    "readinessProbe": {
                        "httpGet": {"path": "/healthz", "port": "http"},
                        "periodSeconds": 10
                    }
                }],
                "volumes": [{
                    "name": "cfg",
                    "configMap": {"name": "settings", "defaultMode": 420, "optional": false}
                }],
                "securityContext": {"runAsUser": 0, "runAsNonRoot": false},
                "automountServiceAccountToken": false,
                "terminationGracePeriodSeconds": 0
            },
            "status": {
                "phase": "Running",
                "startTime": "2024-05-01T12:00:01Z",
                "conditions": [{
                    "type": "Ready",
                    "status": "True",
                    "lastTransitionTime": "2024-05-01T12:00:02Z"
                }]
            }
        })
    );
}

#[test]
fn delete_options_keep_an_explicit_zero_grace_period_under_any_group_version() {
    let options = meta::DeleteOptions {
        grace_period_seconds: Some(0),
        preconditions: Some(meta::Preconditions {
            uid: s("u-1"),
            resource_version: None,
        }),
        orphan_dependents: None,
        propagation_policy: s("Foreground"),
        dry_run: vec!["All".to_string()],
        ignore_store_read_error_with_cluster_breaking_potential: None,
    };
    for api_version in ["v1", "apps/v1", "meta.k8s.io/v1"] {
        let json =
            pbcodec::decode(&envelope(api_version, "DeleteOptions", &options)).expect("decodes");
        assert_eq!(
            json,
            json!({
                "apiVersion": api_version,
                "kind": "DeleteOptions",
                "gracePeriodSeconds": 0,
                "preconditions": {"uid": "u-1"},
                "propagationPolicy": "Foreground",
                "dryRun": ["All"]
            })
        );
    }
}

#[test]
fn lease_micro_times_keep_microseconds() {
    use k8s_pb::api::coordination::v1 as coordination;
    let lease = coordination::Lease {
        metadata: Some(meta::ObjectMeta {
            name: s("leader"),
            ..Default::default()
        }),
        spec: Some(coordination::LeaseSpec {
            holder_identity: s("node-a"),
            lease_duration_seconds: Some(15),
            renew_time: Some(meta::MicroTime {
                seconds: Some(1_714_564_800),
                nanos: Some(123_456_789),
            }),
            lease_transitions: Some(0),
            ..Default::default()
        }),
    };
    let json =
        pbcodec::decode(&envelope("coordination.k8s.io/v1", "Lease", &lease)).expect("decodes");
    assert_eq!(
        json["spec"],
        json!({
            "holderIdentity": "node-a",
            "leaseDurationSeconds": 15,
            "renewTime": "2024-05-01T12:00:00.123456Z",
            "leaseTransitions": 0
        })
    );
}

#[test]
fn eviction_scale_and_status_decode() {
    use k8s_pb::api::autoscaling::v1 as autoscaling;
    use k8s_pb::api::policy::v1 as policy;
    let eviction = policy::Eviction {
        metadata: Some(meta::ObjectMeta {
            name: s("p"),
            namespace: s("ns"),
            ..Default::default()
        }),
        delete_options: Some(meta::DeleteOptions {
            grace_period_seconds: Some(30),
            ..Default::default()
        }),
    };
    let json = pbcodec::decode(&envelope("policy/v1", "Eviction", &eviction)).expect("decodes");
    assert_eq!(json["deleteOptions"], json!({"gracePeriodSeconds": 30}));

    let scale = autoscaling::Scale {
        metadata: Some(meta::ObjectMeta {
            name: s("web"),
            ..Default::default()
        }),
        spec: Some(autoscaling::ScaleSpec { replicas: Some(0) }),
        status: Some(autoscaling::ScaleStatus {
            replicas: Some(0),
            selector: s(""),
        }),
    };
    let json = pbcodec::decode(&envelope("autoscaling/v1", "Scale", &scale)).expect("decodes");
    // ScaleSpec.replicas is a non-pointer omitempty int32; ScaleStatus.replicas has no omitempty.
    assert_eq!(json["spec"], json!({}));
    assert_eq!(json["status"], json!({"replicas": 0}));

    let status = meta::Status {
        status: s("Failure"),
        message: s("nope"),
        reason: s("NotFound"),
        code: Some(404),
        details: Some(meta::StatusDetails {
            name: s("x"),
            kind: s("pods"),
            ..Default::default()
        }),
        ..Default::default()
    };
    let json = pbcodec::decode(&envelope("v1", "Status", &status)).expect("decodes");
    assert_eq!(
        json,
        json!({
            "apiVersion": "v1", "kind": "Status", "status": "Failure", "message": "nope",
            "reason": "NotFound", "code": 404, "details": {"name": "x", "kind": "pods"}
        })
    );
}

#[test]
fn lists_decode_with_their_items() {
    let list = apps::DeploymentList {
        metadata: Some(meta::ListMeta {
            resource_version: s("42"),
            r#continue: s(""),
            ..Default::default()
        }),
        items: vec![deployment(), deployment()],
    };
    let json = pbcodec::decode(&envelope("apps/v1", "DeploymentList", &list)).expect("decodes");
    assert_eq!(json["metadata"], json!({"resourceVersion": "42"}));
    assert_eq!(json["items"].as_array().map(Vec::len), Some(2));
    assert_eq!(
        json["items"][1]["spec"]["strategy"]["rollingUpdate"]["maxSurge"],
        "25%"
    );

    let generic = core::List {
        metadata: Some(meta::ListMeta::default()),
        items: vec![k8s_pb::apimachinery::pkg::runtime::RawExtension {
            raw: Some(
                br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}"#.to_vec(),
            ),
        }],
    };
    let json = pbcodec::decode(&envelope("v1", "List", &generic)).expect("decodes");
    assert_eq!(
        json["items"],
        json!([{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}])
    );
}
