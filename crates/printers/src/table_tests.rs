//! Table assembly: the JSON shape kubectl decodes, row objects, headers and list metadata.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::json;

use super::*;

/// 2024-05-01T12:00:00Z.
fn now() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_714_564_800)
}

fn deployment() -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web2", "namespace": "default", "uid": "u-1", "resourceVersion": "111",
            "creationTimestamp": "2024-05-01T11:59:55Z", "labels": {"app": "web2"}},
        "spec": {"replicas": 4, "selector": {"matchLabels": {"app": "web2"}},
            "template": {"spec": {"containers": [{"name": "nginx", "image": "nginx"}]}}},
        "status": {"readyReplicas": 4, "updatedReplicas": 4, "availableReplicas": 4}
    })
}

#[test]
fn table_has_the_shape_kubectl_decodes() {
    let t = Printer::for_kind("apps", "Deployment").table(
        &[deployment()],
        now(),
        &TableOptions::default(),
        &json!({"resourceVersion": "111", "continue": "abc", "remainingItemCount": 3, "selfLink": "x"}),
    );
    assert_eq!(t["kind"], "Table");
    assert_eq!(t["apiVersion"], "meta.k8s.io/v1");
    assert_eq!(
        t["metadata"],
        json!({"resourceVersion": "111", "continue": "abc", "remainingItemCount": 3})
    );
    let names: Vec<&str> = t["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "Name",
            "Ready",
            "Up-to-date",
            "Available",
            "Age",
            "Containers",
            "Images",
            "Selector"
        ]
    );
    assert_eq!(t["columnDefinitions"][0]["format"], "name");
    assert_eq!(t["columnDefinitions"][5]["priority"], 1);
    assert_eq!(
        t["rows"][0]["cells"],
        json!(["web2", "4/4", 4, 4, "5s", "nginx", "nginx", "app=web2"])
    );
    assert!(t["rows"][0].get("conditions").is_none());
}

#[test]
fn rows_carry_partial_object_metadata_by_default() {
    let t = Printer::for_kind("apps", "Deployment").table(
        &[deployment()],
        now(),
        &TableOptions::default(),
        &json!({}),
    );
    assert_eq!(
        t["rows"][0]["object"],
        json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": deployment()["metadata"]})
    );
    assert_eq!(t["metadata"], json!({}));
}

#[test]
fn include_object_selects_none_metadata_or_the_object() {
    let p = Printer::for_kind("apps", "Deployment");
    let none = TableOptions {
        include_object: IncludeObject::None,
        ..Default::default()
    };
    assert_eq!(
        p.table(&[deployment()], now(), &none, &json!({}))["rows"][0]["object"],
        Value::Null
    );
    let whole = TableOptions {
        include_object: IncludeObject::Object,
        ..Default::default()
    };
    assert_eq!(
        p.table(&[deployment()], now(), &whole, &json!({}))["rows"][0]["object"],
        deployment()
    );
    let beta = TableOptions {
        version: MetaVersion::V1Beta1,
        ..Default::default()
    };
    let t = p.table(&[deployment()], now(), &beta, &json!({}));
    assert_eq!(t["apiVersion"], "meta.k8s.io/v1beta1");
    assert_eq!(t["rows"][0]["object"]["apiVersion"], "meta.k8s.io/v1beta1");
}

#[test]
fn include_object_parses_the_query_parameter() {
    assert_eq!(IncludeObject::parse(None), Ok(IncludeObject::Metadata));
    assert_eq!(IncludeObject::parse(Some("")), Ok(IncludeObject::Metadata));
    assert_eq!(IncludeObject::parse(Some("None")), Ok(IncludeObject::None));
    assert_eq!(
        IncludeObject::parse(Some("Object")),
        Ok(IncludeObject::Object)
    );
    let err = IncludeObject::parse(Some("all")).unwrap_err();
    assert_eq!(err.to_string(), "unrecognized includeObject value: \"all\"");
    let status = ApiError::from(err).to_status();
    assert_eq!(status["code"], 400);
    assert_eq!(status["reason"], "BadRequest");
}

#[test]
fn watch_events_after_the_first_have_null_column_definitions() {
    let t = crate::table_without_headers(
        "apps",
        "Deployment",
        &[deployment()],
        now(),
        IncludeObject::Metadata,
        &json!({"resourceVersion": "111"}),
    );
    assert_eq!(t["columnDefinitions"], Value::Null);
    assert_eq!(t["rows"].as_array().unwrap().len(), 1);
    assert_eq!(t["metadata"]["resourceVersion"], "111");
}

#[test]
fn finished_pods_carry_row_conditions() {
    let pod = json!({"metadata": {"name": "job-x"}, "spec": {"containers": [{"name": "c"}]},
        "status": {"phase": "Succeeded"}});
    let t = crate::table("", "Pod", &[pod], now(), IncludeObject::None, &json!({}));
    assert_eq!(t["rows"][0]["conditions"][0]["type"], "Completed");
    assert_eq!(t["rows"][0]["conditions"][0]["reason"], "Succeeded");
}

#[test]
fn kinds_without_a_printer_get_name_and_created_at() {
    let role = json!({"metadata": {"name": "reader", "creationTimestamp": "2024-05-01T14:00:00+02:00"}, "rules": []});
    let p = Printer::for_kind("rbac.authorization.k8s.io", "Role");
    assert!(p.is_default());
    let cols = p.columns();
    assert_eq!(
        cols.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(),
        ["Name", "Created At"]
    );
    assert_eq!(cols[1].type_, "date");
    let t = p.table(
        &[role, json!({"metadata": {"name": "no-time"}})],
        now(),
        &TableOptions::default(),
        &json!({}),
    );
    assert_eq!(
        t["rows"][0]["cells"],
        json!(["reader", "2024-05-01T12:00:00Z"])
    );
    assert_eq!(
        t["rows"][1]["cells"],
        json!(["no-time", "0001-01-01T00:00:00Z"])
    );
}

#[test]
fn empty_lists_render_rows_like_upstream() {
    let builtin = crate::table(
        "",
        "Pod",
        &[],
        now(),
        IncludeObject::Metadata,
        &json!({"resourceVersion": "7"}),
    );
    assert_eq!(builtin["rows"], json!([]));
    let default = crate::table(
        "",
        "LimitRange",
        &[],
        now(),
        IncludeObject::Metadata,
        &json!({}),
    );
    assert_eq!(default["rows"], Value::Null);
    let custom = Printer::for_custom_resource(&Value::Null).table(
        &[],
        now(),
        &TableOptions::default(),
        &json!({}),
    );
    assert_eq!(custom["rows"], json!([]));
}

#[test]
fn custom_resource_tables_use_printer_columns() {
    let apc = json!([{"name": "Size", "type": "integer", "jsonPath": ".spec.size"}]);
    let widget = json!({"metadata": {"name": "w", "creationTimestamp": "2024-05-01T11:00:00Z"}, "spec": {"size": 2}});
    let t = Printer::for_custom_resource(&apc).table(
        std::slice::from_ref(&widget),
        now(),
        &TableOptions::default(),
        &json!({}),
    );
    assert_eq!(t["columnDefinitions"][1]["name"], "Size");
    assert_eq!(t["rows"][0]["cells"], json!(["w", 2]));
    assert_eq!(
        crate::custom_row(&Value::Null, &widget, now()),
        vec![json!("w"), json!("60m")]
    );
    assert_eq!(crate::custom_columns(&apc).len(), 2);
}

#[test]
fn partial_object_metadata_always_has_a_creation_timestamp() {
    let p = partial_object_metadata(&json!({"metadata": {"name": "x"}}), MetaVersion::V1);
    assert_eq!(
        p["metadata"],
        json!({"name": "x", "creationTimestamp": null})
    );
    let p = partial_object_metadata(&json!({}), MetaVersion::V1);
    assert_eq!(p["metadata"], json!({"creationTimestamp": null}));
}

#[test]
fn meta_versions_map_to_api_versions() {
    assert_eq!(MetaVersion::from_version("v1"), Some(MetaVersion::V1));
    assert_eq!(
        MetaVersion::from_version("v1beta1").map(MetaVersion::api_version),
        Some("meta.k8s.io/v1beta1")
    );
    assert_eq!(MetaVersion::from_version("v2"), None);
}

#[test]
fn precompiled_custom_columns_become_a_printer() {
    let c = CustomColumns::new(&json!([{"name": "Bad", "type": "string", "jsonPath": ".a["}]));
    assert!(c.error().is_some());
    let p = Printer::from(c);
    assert_eq!(p.columns().len(), 1);
    assert_eq!(
        p.row(&json!({"metadata": {"name": "x"}}), now()).cells,
        vec![json!("x")]
    );
}
