//! Garbage, truncated, wrong-kind and hostile bodies give errors, never panics.

mod common;

use common::{envelope, envelope_raw, s};
use k8s_pb::api::apps::v1 as apps;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use pbcodec::{PbError, decode};
use prost::Message as _;

fn captured_deployment() -> Vec<u8> {
    let path = format!(
        "{}/tests/captured/kubectl-1.33-deployments.pb",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(path).expect("captured body")
}

#[test]
fn bodies_without_the_magic_are_rejected() {
    assert_eq!(decode(b""), Err(PbError::NoMagic));
    assert_eq!(decode(b"{\"kind\":\"Pod\"}"), Err(PbError::NoMagic));
    assert_eq!(decode(b"k8s"), Err(PbError::NoMagic));
}

#[test]
fn every_truncation_of_a_real_body_is_an_error_or_a_prefix_of_it() {
    let body = captured_deployment();
    for len in 4..body.len() {
        // Cutting inside the raw object always breaks a length. Cutting exactly between the
        // envelope's fields leaves a valid, shorter envelope: after typeMeta (byte 27: an
        // envelope without raw, an empty Deployment) or after raw.
        if let Ok(value) = decode(&body[..len]) {
            assert!(
                len == 27 || len >= body.len() - 4,
                "truncation at {len} decoded: {value}"
            );
        }
    }
    assert!(matches!(
        decode(&body[..40]),
        Err(PbError::Malformed { .. })
    ));
}

#[test]
fn unknown_kinds_and_empty_type_meta_are_rejected() {
    let d = apps::Deployment::default();
    assert!(matches!(
        decode(&envelope("apps/v1", "Nope", &d)),
        Err(PbError::UnknownKind { ref kind, .. }) if kind == "Nope"
    ));
    assert!(matches!(
        decode(&envelope("", "", &d)),
        Err(PbError::UnknownKind { .. })
    ));
    assert!(matches!(
        decode(&envelope("example.com/v1", "Widget", &d)),
        Err(PbError::UnknownKind { .. })
    ));
}

#[test]
fn a_body_of_the_wrong_kind_is_rejected() {
    // A Deployment's bytes labelled as a Namespace: NamespaceSpec's field 1 is a list of
    // strings, and DeploymentSpec's field 1 (replicas) is a varint, so decoding fails.
    let deployment = apps::Deployment {
        metadata: Some(meta::ObjectMeta {
            name: s("web"),
            ..Default::default()
        }),
        spec: Some(apps::DeploymentSpec {
            replicas: Some(3),
            ..Default::default()
        }),
        status: None,
    };
    let err = decode(&envelope("v1", "Namespace", &deployment)).expect_err("wrong kind");
    assert!(
        matches!(err, PbError::Malformed { ref path, .. } if path == "spec.finalizers[0]"),
        "{err:?}"
    );
}

#[test]
fn unknown_fields_are_errors() {
    let mut raw = meta::Status {
        code: Some(1),
        ..Default::default()
    }
    .encode_to_vec();
    raw.extend([0xf8, 0x06, 0x01]); // field 111, varint 1
    assert!(matches!(
        decode(&envelope_raw("v1", "Status", raw)),
        Err(PbError::UnknownField { tag: 111, .. })
    ));
}

#[test]
fn wrong_wire_types_are_errors() {
    // Status.code (field 6, int32) sent length-delimited.
    let raw = vec![0x32, 0x01, 0x00];
    assert!(matches!(
        decode(&envelope_raw("v1", "Status", raw)),
        Err(PbError::Malformed { .. })
    ));
}

#[test]
fn compressed_or_foreign_envelopes_are_unsupported() {
    let mut body = b"k8s\0".to_vec();
    body.extend([0x1a, 0x04]);
    body.extend(b"gzip");
    assert!(matches!(
        decode(&body),
        Err(PbError::Unsupported {
            what: "contentEncoding",
            ..
        })
    ));
}

#[test]
fn nesting_beyond_the_limit_is_an_error() {
    use k8s_pb::apiextensions_apiserver::pkg::apis::apiextensions::v1 as ext;
    let mut schema = ext::JsonSchemaProps::default();
    for _ in 0..pbcodec::MAX_DEPTH {
        schema = ext::JsonSchemaProps {
            not: Some(Box::new(schema)),
            ..Default::default()
        };
    }
    let crd = ext::CustomResourceDefinition {
        spec: Some(ext::CustomResourceDefinitionSpec {
            versions: vec![ext::CustomResourceDefinitionVersion {
                schema: Some(ext::CustomResourceValidation {
                    open_apiv3_schema: Some(schema),
                }),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    };
    let body = envelope("apiextensions.k8s.io/v1", "CustomResourceDefinition", &crd);
    assert_eq!(decode(&body), Err(PbError::TooDeep(pbcodec::MAX_DEPTH)));
}

#[test]
fn random_bytes_after_the_magic_never_panic() {
    // A fixed linear congruential generator: reproducible, no dependency.
    let mut state: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move || {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (state >> 33) as u8
    };
    let base = captured_deployment();
    let mut errors = 0;
    for round in 0..3000 {
        let mut body = base.clone();
        // Flip a few bytes of the real body, or make up a random one.
        if round % 2 == 0 {
            for _ in 0..3 {
                let at = 4 + usize::from(next()) * (body.len() - 4) / 256;
                body[at] = next();
            }
        } else {
            body.truncate(4);
            let len = usize::from(next());
            body.extend((0..len).map(|_| next()));
        }
        if decode(&body).is_err() {
            errors += 1;
        }
    }
    assert!(
        errors > 1500,
        "only {errors} of 3000 corrupted bodies were rejected"
    );
}
