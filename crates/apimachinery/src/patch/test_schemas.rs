//! Hand-written schemas for the patch and apply tests: a Pod-like and a Deployment-like kind
//! carrying the patch strategies, merge keys, list types and map types the engines must honour.
//! The real built-in schemas are built elsewhere (crate `openapi`); these only have to be
//! shaped like them.

use std::sync::Arc;

use serde_json::json;

use crate::schema::{ListType, MapType, PatchStrategy, Schema, SchemaRef, Type};

fn scalar(ty: Type) -> SchemaRef {
    Arc::new(Schema {
        ty,
        ..Schema::default()
    })
}

pub(crate) fn string() -> SchemaRef {
    scalar(Type::String)
}

pub(crate) fn int() -> SchemaRef {
    scalar(Type::Integer)
}

fn boolean() -> SchemaRef {
    scalar(Type::Boolean)
}

pub(crate) fn obj(props: &[(&str, SchemaRef)]) -> SchemaRef {
    Arc::new(Schema {
        ty: Type::Object,
        properties: props
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect(),
        ..Schema::default()
    })
}

fn map_of(values: SchemaRef) -> SchemaRef {
    Arc::new(Schema {
        ty: Type::Object,
        additional_properties: Some(values),
        ..Schema::default()
    })
}

fn atomic_map_of(values: SchemaRef) -> SchemaRef {
    Arc::new(Schema {
        ty: Type::Object,
        additional_properties: Some(values),
        map_type: MapType::Atomic,
        ..Schema::default()
    })
}

fn atomic_list(items: SchemaRef) -> SchemaRef {
    Arc::new(Schema {
        ty: Type::Array,
        items: Some(items),
        ..Schema::default()
    })
}

/// A list with `patchStrategy: merge` and a merge key but no list type (most built-ins).
fn merge_list(items: SchemaRef, key: &str) -> SchemaRef {
    Arc::new(Schema {
        ty: Type::Array,
        items: Some(items),
        patch_strategy: vec![PatchStrategy::Merge],
        patch_merge_key: Some(key.into()),
        ..Schema::default()
    })
}

fn with_default(s: SchemaRef, default: serde_json::Value) -> SchemaRef {
    let mut s = (*s).clone();
    s.default = Some(default);
    Arc::new(s)
}

pub(crate) fn object_meta() -> SchemaRef {
    let owner_ref = obj(&[
        ("apiVersion", string()),
        ("kind", string()),
        ("name", string()),
        ("uid", string()),
        ("controller", boolean()),
    ]);
    obj(&[
        ("name", string()),
        ("namespace", string()),
        ("uid", string()),
        ("resourceVersion", string()),
        ("generation", int()),
        ("creationTimestamp", string()),
        ("labels", map_of(string())),
        ("annotations", map_of(string())),
        (
            "finalizers",
            Arc::new(Schema {
                ty: Type::Array,
                items: Some(string()),
                patch_strategy: vec![PatchStrategy::Merge],
                list_type: ListType::Set,
                ..Schema::default()
            }),
        ),
        ("ownerReferences", merge_list(owner_ref, "uid")),
        ("managedFields", atomic_list(Schema::any())),
    ])
}

fn container() -> SchemaRef {
    let port = obj(&[
        ("name", string()),
        ("containerPort", int()),
        ("protocol", with_default(string(), json!("TCP"))),
    ]);
    let ports = Arc::new(Schema {
        ty: Type::Array,
        items: Some(port),
        patch_strategy: vec![PatchStrategy::Merge],
        patch_merge_key: Some("containerPort".into()),
        list_type: ListType::Map(vec!["containerPort".into(), "protocol".into()]),
        ..Schema::default()
    });
    let env = obj(&[
        ("name", string()),
        ("value", string()),
        (
            "valueFrom",
            obj(&[("fieldRef", obj(&[("fieldPath", string())]))]),
        ),
    ]);
    obj(&[
        ("name", string()),
        ("image", string()),
        ("imagePullPolicy", string()),
        ("command", atomic_list(string())),
        ("args", atomic_list(string())),
        ("ports", ports),
        ("env", merge_list(env, "name")),
        (
            "resources",
            obj(&[("limits", map_of(string())), ("requests", map_of(string()))]),
        ),
        (
            "volumeMounts",
            merge_list(
                obj(&[("name", string()), ("mountPath", string())]),
                "mountPath",
            ),
        ),
    ])
}

fn pod_spec() -> SchemaRef {
    let mut spec = (*pod_spec_fields()).clone();
    spec.required = vec!["containers".into()];
    Arc::new(spec)
}

fn pod_spec_fields() -> SchemaRef {
    let volume = obj(&[
        ("name", string()),
        (
            "emptyDir",
            obj(&[("medium", string()), ("sizeLimit", string())]),
        ),
        ("hostPath", obj(&[("path", string()), ("type", string())])),
        ("configMap", obj(&[("name", string())])),
    ]);
    let volumes = Arc::new(Schema {
        ty: Type::Array,
        items: Some(volume),
        patch_strategy: vec![PatchStrategy::Merge, PatchStrategy::RetainKeys],
        patch_merge_key: Some("name".into()),
        ..Schema::default()
    });
    let tags = Arc::new(Schema {
        ty: Type::Array,
        items: Some(string()),
        list_type: ListType::Set,
        ..Schema::default()
    });
    obj(&[
        ("containers", merge_list(container(), "name")),
        ("initContainers", merge_list(container(), "name")),
        ("volumes", volumes),
        ("nodeSelector", atomic_map_of(string())),
        (
            "tolerations",
            atomic_list(obj(&[("key", string()), ("operator", string())])),
        ),
        ("restartPolicy", string()),
        ("hostNetwork", boolean()),
        ("tags", tags),
    ])
}

fn top(definition: &str, spec: SchemaRef, status: SchemaRef) -> SchemaRef {
    let mut s = (*obj(&[
        ("apiVersion", string()),
        ("kind", string()),
        ("metadata", object_meta()),
        ("spec", spec),
        ("status", status),
    ]))
    .clone();
    s.definition = Some(definition.into());
    Arc::new(s)
}

/// A custom-resource-like kind: no Go type behind it.
pub(crate) fn custom_resource() -> SchemaRef {
    obj(&[
        ("apiVersion", string()),
        ("kind", string()),
        ("metadata", object_meta()),
        ("spec", obj(&[("cronSpec", string()), ("image", string())])),
    ])
}

/// A Pod-like kind.
pub(crate) fn pod() -> SchemaRef {
    let condition = obj(&[("type", string()), ("status", string())]);
    top(
        "io.k8s.api.core.v1.Pod",
        pod_spec(),
        obj(&[
            ("phase", string()),
            ("conditions", merge_list(condition, "type")),
        ]),
    )
}

/// A Deployment-like kind.
pub(crate) fn deployment() -> SchemaRef {
    let selector = Arc::new(Schema {
        ty: Type::Object,
        properties: [("matchLabels".to_string(), map_of(string()))]
            .into_iter()
            .collect(),
        map_type: MapType::Atomic,
        ..Schema::default()
    });
    let int_or_string = scalar(Type::IntOrString);
    top(
        "io.k8s.api.apps.v1.Deployment",
        obj(&[
            ("replicas", int()),
            ("paused", boolean()),
            ("selector", selector),
            (
                "template",
                obj(&[("metadata", object_meta()), ("spec", pod_spec())]),
            ),
            (
                "strategy",
                obj(&[
                    ("type", string()),
                    (
                        "rollingUpdate",
                        obj(&[
                            ("maxSurge", int_or_string.clone()),
                            ("maxUnavailable", int_or_string),
                        ]),
                    ),
                ]),
            ),
        ]),
        obj(&[("replicas", int()), ("readyReplicas", int())]),
    )
}
