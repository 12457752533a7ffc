//! `encode` writes bodies that k8s-pb (an independent decoder) reads back field for field, and
//! `decode(encode(json)) == json` for normalized JSON.

mod common;

use common::raw_of;
use k8s_pb::api::apps::v1 as apps;
use k8s_pb::api::core::v1 as core;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use prost::Message as _;
use serde_json::json;

fn deployment_json() -> serde_json::Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "web",
            "namespace": "default",
            "labels": {"app": "web"},
            "creationTimestamp": "2024-05-01T12:00:00Z",
            "managedFields": [{
                "manager": "kubectl",
                "operation": "Update",
                "apiVersion": "apps/v1",
                "time": "2024-05-01T12:00:00Z",
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:spec": {"f:replicas": {}}}
            }]
        },
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": "web"}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{
                    "name": "web",
                    "image": "nginx",
                    "ports": [{"containerPort": 80, "protocol": "TCP"}],
                    "resources": {"limits": {"cpu": "500m"}},
                    "livenessProbe": {"tcpSocket": {"port": 80}, "periodSeconds": 5}
                }]}
            }
        },
        "status": {"replicas": 2, "conditions": [{
            "type": "Available", "status": "True", "lastUpdateTime": "2024-05-01T12:00:05Z"
        }]}
    })
}

#[test]
fn encoded_deployment_reads_back_with_k8s_pb() {
    let body = pbcodec::encode(&deployment_json()).expect("encodes");
    let d = apps::Deployment::decode(raw_of(&body).as_slice()).expect("k8s-pb decodes our bytes");
    let metadata = d.metadata.expect("metadata");
    assert_eq!(metadata.name.as_deref(), Some("web"));
    assert_eq!(
        metadata.creation_timestamp.and_then(|t| t.seconds),
        Some(1_714_564_800)
    );
    let managed = &metadata.managed_fields[0];
    assert_eq!(
        managed.fields_v1.as_ref().and_then(|f| f.raw.clone()),
        Some(br#"{"f:spec":{"f:replicas":{}}}"#.to_vec())
    );
    let spec = d.spec.expect("spec");
    assert_eq!(spec.replicas, Some(0));
    let rolling = spec
        .strategy
        .and_then(|s| s.rolling_update)
        .expect("rollingUpdate");
    let surge = rolling.max_surge.expect("maxSurge");
    assert_eq!(
        (surge.r#type, surge.str_val.as_deref()),
        (Some(1), Some("25%"))
    );
    assert_eq!(rolling.max_unavailable.and_then(|m| m.int_val), Some(1));
    let container: core::Container = spec
        .template
        .and_then(|t| t.spec)
        .expect("pod spec")
        .containers
        .remove(0);
    assert_eq!(
        container.resources.expect("resources").limits["cpu"]
            .string
            .as_deref(),
        Some("500m")
    );
    let probe = container.liveness_probe.expect("probe");
    assert_eq!(probe.period_seconds, Some(5));
    let port = probe
        .handler
        .and_then(|h| h.tcp_socket)
        .and_then(|t| t.port)
        .expect("inlined handler");
    assert_eq!(port.int_val, Some(80));
    let status = d.status.expect("status");
    assert_eq!(status.replicas, Some(2));
    assert_eq!(
        status.conditions[0]
            .last_update_time
            .as_ref()
            .and_then(|t| t.seconds),
        Some(1_714_564_805)
    );
}

#[test]
fn normalized_json_round_trips() {
    let json = deployment_json();
    let back = pbcodec::decode(&pbcodec::encode(&json).expect("encodes")).expect("decodes");
    assert_eq!(back, json);
}

#[test]
fn secret_base64_and_meta_kinds_round_trip() {
    let secret = json!({
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
        "data": {"k": "AP8B"}, "type": "Opaque", "immutable": false
    });
    let body = pbcodec::encode(&secret).expect("encodes");
    let decoded = core::Secret::decode(raw_of(&body).as_slice()).expect("k8s-pb decodes");
    assert_eq!(decoded.data["k"], vec![0, 255, 1]);
    assert_eq!(pbcodec::decode(&body).expect("decodes"), secret);

    let delete = json!({
        "apiVersion": "v1", "kind": "DeleteOptions",
        "gracePeriodSeconds": 0, "propagationPolicy": "Background"
    });
    let body = pbcodec::encode(&delete).expect("encodes");
    let decoded = meta::DeleteOptions::decode(raw_of(&body).as_slice()).expect("k8s-pb decodes");
    assert_eq!(decoded.grace_period_seconds, Some(0));
    assert_eq!(pbcodec::decode(&body).expect("decodes"), delete);
}

#[test]
fn micro_time_and_lease_round_trip() {
    let lease = json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l"},
        "spec": {"holderIdentity": "a", "renewTime": "2024-05-01T12:00:00.123456Z", "leaseDurationSeconds": 15}
    });
    let body = pbcodec::encode(&lease).expect("encodes");
    assert_eq!(pbcodec::decode(&body).expect("decodes"), lease);
}

#[test]
fn encode_rejects_what_it_cannot_represent() {
    let unknown_field =
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "bogus": 1});
    assert!(matches!(
        pbcodec::encode(&unknown_field),
        Err(pbcodec::PbError::UnknownJsonField { ref path, .. }) if path == "bogus"
    ));
    let wrong_type =
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"replicas": "three"}});
    assert!(matches!(
        pbcodec::encode(&wrong_type),
        Err(pbcodec::PbError::InvalidValue { ref path, .. }) if path == "spec.replicas"
    ));
    let custom = json!({"apiVersion": "example.com/v1", "kind": "Widget"});
    assert!(matches!(
        pbcodec::encode(&custom),
        Err(pbcodec::PbError::UnknownKind { .. })
    ));
    assert!(!pbcodec::supports("example.com/v1", "Widget"));
    assert!(pbcodec::supports("apps/v1", "Deployment"));
    let bad_time =
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"creationTimestamp": "noon"}});
    assert!(pbcodec::encode(&bad_time).is_err());
    let out_of_range = json!({"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"replicas": 4_294_967_296_u64}});
    assert!(pbcodec::encode(&out_of_range).is_err());
}
