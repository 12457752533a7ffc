//! CustomResourceDefinitions (schema special forms), reviews and token requests built with k8s-pb.

mod common;

use common::{envelope, s};
use k8s_pb::apiextensions_apiserver::pkg::apis::apiextensions::v1 as ext;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use serde_json::json;

fn json_raw(text: &str) -> ext::Json {
    ext::Json {
        raw: Some(text.as_bytes().to_vec()),
    }
}

fn string_schema() -> ext::JsonSchemaProps {
    ext::JsonSchemaProps {
        r#type: s("string"),
        ..Default::default()
    }
}

fn crd() -> ext::CustomResourceDefinition {
    let spec_schema = ext::JsonSchemaProps {
        r#type: s("object"),
        properties: [
            (
                "replicas".to_string(),
                ext::JsonSchemaProps {
                    r#type: s("integer"),
                    minimum: Some(0.0),
                    maximum: Some(10.0),
                    multiple_of: Some(0.5),
                    default: Some(json_raw("1")),
                    exclusive_maximum: Some(false),
                    ..Default::default()
                },
            ),
            (
                "mode".to_string(),
                ext::JsonSchemaProps {
                    r#type: s("string"),
                    r#enum: vec![json_raw("\"fast\""), json_raw("\"slow\"")],
                    ..Default::default()
                },
            ),
            (
                "tags".to_string(),
                ext::JsonSchemaProps {
                    r#type: s("array"),
                    items: Some(Box::new(ext::JsonSchemaPropsOrArray {
                        schema: Some(Box::new(string_schema())),
                        j_son_schemas: vec![],
                    })),
                    x_kubernetes_list_type: s("set"),
                    ..Default::default()
                },
            ),
            (
                "labels".to_string(),
                ext::JsonSchemaProps {
                    r#type: s("object"),
                    additional_properties: Some(Box::new(ext::JsonSchemaPropsOrBool {
                        allows: Some(true),
                        schema: Some(Box::new(string_schema())),
                    })),
                    ..Default::default()
                },
            ),
            (
                "closed".to_string(),
                ext::JsonSchemaProps {
                    r#type: s("object"),
                    additional_properties: Some(Box::new(ext::JsonSchemaPropsOrBool {
                        allows: Some(false),
                        schema: None,
                    })),
                    ..Default::default()
                },
            ),
            (
                "raw".to_string(),
                ext::JsonSchemaProps {
                    x_kubernetes_preserve_unknown_fields: Some(true),
                    ..Default::default()
                },
            ),
        ]
        .into(),
        required: vec!["mode".to_string()],
        x_kubernetes_validations: vec![ext::ValidationRule {
            rule: s("self.replicas <= 10"),
            message: s("too many"),
            ..Default::default()
        }],
        ..Default::default()
    };
    ext::CustomResourceDefinition {
        metadata: Some(meta::ObjectMeta {
            name: s("widgets.example.com"),
            ..Default::default()
        }),
        spec: Some(ext::CustomResourceDefinitionSpec {
            group: s("example.com"),
            names: Some(ext::CustomResourceDefinitionNames {
                plural: s("widgets"),
                singular: s("widget"),
                kind: s("Widget"),
                list_kind: s("WidgetList"),
                short_names: vec!["wd".to_string()],
                categories: vec![],
            }),
            scope: s("Namespaced"),
            versions: vec![ext::CustomResourceDefinitionVersion {
                name: s("v1"),
                served: Some(true),
                storage: Some(true),
                deprecated: Some(false),
                schema: Some(ext::CustomResourceValidation {
                    open_apiv3_schema: Some(ext::JsonSchemaProps {
                        r#type: s("object"),
                        properties: [("spec".to_string(), spec_schema)].into(),
                        ..Default::default()
                    }),
                }),
                subresources: Some(ext::CustomResourceSubresources {
                    status: Some(ext::CustomResourceSubresourceStatus {}),
                    scale: Some(ext::CustomResourceSubresourceScale {
                        spec_replicas_path: s(".spec.replicas"),
                        status_replicas_path: s(".status.replicas"),
                        label_selector_path: None,
                    }),
                }),
                ..Default::default()
            }],
            conversion: None,
            preserve_unknown_fields: None,
        }),
        status: None,
    }
}

#[test]
fn crd_schemas_decode_to_their_go_json_forms() {
    let body = envelope(
        "apiextensions.k8s.io/v1",
        "CustomResourceDefinition",
        &crd(),
    );
    let json = pbcodec::decode(&body).expect("decodes");
    let version = &json["spec"]["versions"][0];
    assert_eq!(version["served"], true);
    assert_eq!(version["storage"], true);
    assert_eq!(
        version.get("deprecated"),
        None,
        "omitempty bool false is dropped"
    );
    assert_eq!(
        version["subresources"],
        json!({"status": {}, "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}})
    );
    assert_eq!(
        version["schema"]["openAPIV3Schema"]["properties"]["spec"],
        json!({
            "type": "object",
            "required": ["mode"],
            "x-kubernetes-validations": [{"rule": "self.replicas <= 10", "message": "too many"}],
            "properties": {
                "replicas": {"type": "integer", "minimum": 0, "maximum": 10, "multipleOf": 0.5, "default": 1},
                "mode": {"type": "string", "enum": ["fast", "slow"]},
                "tags": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "closed": {"type": "object", "additionalProperties": false},
                "raw": {"x-kubernetes-preserve-unknown-fields": true}
            }
        })
    );
    assert_eq!(json["spec"]["names"]["shortNames"], json!(["wd"]));
}

#[test]
fn crd_survives_encode_then_decode() {
    let body = envelope(
        "apiextensions.k8s.io/v1",
        "CustomResourceDefinition",
        &crd(),
    );
    let json = pbcodec::decode(&body).expect("decodes");
    let again = pbcodec::decode(&pbcodec::encode(&json).expect("encodes")).expect("decodes");
    assert_eq!(again, json);
}

#[test]
fn schema_arrays_of_schemas_decode_as_arrays() {
    let props = ext::JsonSchemaProps {
        items: Some(Box::new(ext::JsonSchemaPropsOrArray {
            schema: None,
            j_son_schemas: vec![
                string_schema(),
                ext::JsonSchemaProps {
                    r#type: s("integer"),
                    ..Default::default()
                },
            ],
        })),
        dependencies: [(
            "a".to_string(),
            ext::JsonSchemaPropsOrStringArray {
                schema: None,
                property: vec!["b".to_string(), "c".to_string()],
            },
        )]
        .into(),
        ..Default::default()
    };
    let validation = ext::CustomResourceValidation {
        open_apiv3_schema: Some(props),
    };
    let version = ext::CustomResourceDefinitionVersion {
        name: s("v1"),
        schema: Some(validation),
        ..Default::default()
    };
    let crd = ext::CustomResourceDefinition {
        spec: Some(ext::CustomResourceDefinitionSpec {
            versions: vec![version],
            ..Default::default()
        }),
        ..Default::default()
    };
    let json = pbcodec::decode(&envelope(
        "apiextensions.k8s.io/v1",
        "CustomResourceDefinition",
        &crd,
    ))
    .expect("decodes");
    assert_eq!(
        json["spec"]["versions"][0]["schema"]["openAPIV3Schema"],
        json!({"items": [{"type": "string"}, {"type": "integer"}], "dependencies": {"a": ["b", "c"]}})
    );
}

#[test]
fn self_subject_access_review_and_token_request_decode() {
    use k8s_pb::api::authentication::v1 as authn;
    use k8s_pb::api::authorization::v1 as authz;
    let review = authz::SelfSubjectAccessReview {
        metadata: Some(meta::ObjectMeta::default()),
        spec: Some(authz::SelfSubjectAccessReviewSpec {
            resource_attributes: Some(authz::ResourceAttributes {
                namespace: s("default"),
                verb: s("list"),
                group: s(""),
                resource: s("pods"),
                ..Default::default()
            }),
            non_resource_attributes: None,
        }),
        status: Some(authz::SubjectAccessReviewStatus {
            allowed: Some(false),
            denied: Some(false),
            ..Default::default()
        }),
    };
    let json = pbcodec::decode(&envelope(
        "authorization.k8s.io/v1",
        "SelfSubjectAccessReview",
        &review,
    ))
    .expect("decodes");
    assert_eq!(
        json,
        json!({
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "metadata": {},
            "spec": {"resourceAttributes": {"namespace": "default", "verb": "list", "resource": "pods"}},
            "status": {"allowed": false}
        })
    );

    let token = authn::TokenRequest {
        metadata: Some(meta::ObjectMeta {
            name: s("default"),
            ..Default::default()
        }),
        spec: Some(authn::TokenRequestSpec {
            audiences: vec!["https://kubernetes.default.svc".to_string()],
            expiration_seconds: Some(3600),
            bound_object_ref: Some(authn::BoundObjectReference {
                kind: s("Pod"),
                api_version: s("v1"),
                name: s("p"),
                u_id: s("1234"),
            }),
        }),
        status: Some(authn::TokenRequestStatus {
            token: s(""),
            expiration_timestamp: Some(meta::Time::default()),
        }),
    };
    let json = pbcodec::decode(&envelope(
        "authentication.k8s.io/v1",
        "TokenRequest",
        &token,
    ))
    .expect("decodes");
    assert_eq!(
        json["spec"],
        json!({
            "audiences": ["https://kubernetes.default.svc"],
            "expirationSeconds": 3600,
            "boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "p", "uid": "1234"}
        })
    );
    assert_eq!(json["status"], json!({"token": ""}));
}
