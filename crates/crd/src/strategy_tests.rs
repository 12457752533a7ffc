//! A test CRD that uses every schema feature, served through `resource_defs`, with a passing
//! and a failing object per feature and upstream's exact messages.

use super::*;
use std::sync::Arc;

use registry::{Printer, ResourceDef};
use serde_json::json;

fn schema() -> Value {
    json!({"type": "object", "properties": {
        "spec": {"type": "object", "required": ["name"],
            "x-kubernetes-validations": [
                {"rule": "!has(self.minReplicas) || !has(self.replicas) || self.replicas >= self.minReplicas",
                 "message": "replicas must be at least minReplicas", "fieldPath": ".replicas"},
                {"rule": "self.name == oldSelf.name", "message": "name is immutable"},
                {"rule": "!has(self.mode) || self.mode != 'legacy'",
                 "messageExpression": "'mode ' + self.mode + ' is retired'", "reason": "FieldValueForbidden"},
                {"rule": "!has(self.tags) || self.tags.all(t, t != 'forbidden')"}
            ],
            "properties": {
                "name": {"type": "string", "minLength": 1, "maxLength": 10, "pattern": "^[a-z]+$"},
                "size": {"type": "string", "enum": ["S", "M", "L"], "default": "M"},
                "replicas": {"type": "integer", "format": "int32", "minimum": 0, "maximum": 10},
                "minReplicas": {"type": "integer"},
                "ratio": {"type": "number", "minimum": 0, "exclusiveMinimum": true, "maximum": 1,
                          "exclusiveMaximum": true, "multipleOf": 0.25},
                "port": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]},
                "created": {"type": "string", "format": "date-time"},
                "owner": {"type": "string", "format": "email"},
                "address": {"type": "string", "format": "ipv4"},
                "note": {"type": "string", "nullable": true},
                "paused": {"type": "boolean"},
                "mode": {"type": "string"},
                "tags": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set", "maxItems": 3},
                "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                          "items": {"type": "object", "required": ["name"], "properties": {
                              "name": {"type": "string"}, "port": {"type": "integer", "maximum": 1000}}}},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}, "maxProperties": 2,
                           "x-kubernetes-map-type": "granular"},
                "selector": {"type": "object", "x-kubernetes-map-type": "atomic", "properties": {"app": {"type": "string"}}},
                "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "template": {"type": "object", "x-kubernetes-embedded-resource": true,
                             "x-kubernetes-preserve-unknown-fields": true},
                "strategy": {"type": "object", "default": {}, "properties": {
                    "type": {"type": "string", "default": "Rolling"}}},
                "immutableKey": {"type": "string", "x-kubernetes-validations": [
                    {"rule": "self == oldSelf", "message": "immutableKey is immutable"}]},
                "window": {"type": "string", "x-kubernetes-validations": [
                    {"rule": "!oldSelf.hasValue() || size(self) >= size(oldSelf.value())",
                     "optionalOldSelf": true, "message": "window may only grow"}]},
                "color": {"type": "string"}
            }},
        "status": {"type": "object", "properties": {
            "replicas": {"type": "integer"}, "selector": {"type": "string"}}}
    }})
}

fn widget_crd() -> Value {
    let versions = json!([
        {"name": "v1beta1", "served": true, "storage": false, "deprecated": true,
         "schema": {"openAPIV3Schema": schema()},
         "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas",
                          "statusReplicasPath": ".status.replicas", "labelSelectorPath": ".status.selector"}},
         "selectableFields": [{"jsonPath": ".spec.color"}, {"jsonPath": ".spec.replicas"}]},
        {"name": "v1", "served": true, "storage": true,
         "schema": {"openAPIV3Schema": schema()},
         "additionalPrinterColumns": [{"name": "Size", "type": "string", "jsonPath": ".spec.size"}],
         "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas",
                          "statusReplicasPath": ".status.replicas", "labelSelectorPath": ".status.selector"}},
         "selectableFields": [{"jsonPath": ".spec.color"}, {"jsonPath": ".spec.replicas"}]}
    ]);
    let mut c = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"plural": "widgets", "kind": "Widget", "shortNames": ["wd"], "categories": ["all"]},
                 "versions": versions}});
    crate::default_crd(&mut c);
    c
}

fn def(version: &str) -> ResourceDef {
    crate::resource_defs(&widget_crd())
        .into_iter()
        .find(|d| d.version == version)
        .unwrap()
}

fn strategy() -> CustomStrategy {
    let s = schema();
    CustomStrategy::new(
        "example.com",
        "v1",
        "v1",
        Some(&s),
        Some(ScalePaths {
            spec_replicas: ".spec.replicas".into(),
            status_replicas: ".status.replicas".into(),
            label_selector: Some(".status.selector".into()),
        }),
        &[json!({"jsonPath": ".spec.color"})],
    )
}

fn valid() -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Widget",
           "metadata": {"name": "w", "namespace": "default"},
           "spec": {"name": "alpha", "replicas": 3, "minReplicas": 1, "ratio": 0.5, "port": 8080,
                    "created": "2026-01-01T00:00:00Z", "owner": "ops@example.com", "address": "10.0.0.1",
                    "note": null, "tags": ["a", "b"], "ports": [{"name": "http", "port": 80}],
                    "labels": {"a": "1"}, "selector": {"app": "w"}, "extra": {"anything": [1, {"x": true}]},
                    "template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}},
                    "immutableKey": "k", "window": "abc", "color": "blue"},
           "status": {"replicas": 2, "selector": "app=w"}})
}

/// Messages for `spec` merged into the valid object.
fn create_errors(spec: Value) -> Vec<String> {
    let s = strategy();
    let mut obj = valid();
    if let (Some(o), Some(p)) = (obj["spec"].as_object_mut(), spec.as_object()) {
        for (k, v) in p {
            o.insert(k.clone(), v.clone());
        }
    }
    Strategy::default(&s, &mut obj);
    Strategy::validate(&s, &obj)
        .iter()
        .map(|e| e.message())
        .collect()
}

fn update_errors(old_spec: Value, new_spec: Value) -> Validated {
    let s = strategy();
    let mut old = valid();
    let mut new = valid();
    for (obj, spec) in [(&mut old, old_spec), (&mut new, new_spec)] {
        if let (Some(o), Some(p)) = (obj["spec"].as_object_mut(), spec.as_object()) {
            for (k, v) in p {
                o.insert(k.clone(), v.clone());
            }
        }
        Strategy::default(&s, obj);
    }
    s.validate_object(&new, Some(&old))
}

const BLOCKED: &str = "<nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation";

#[test]
fn a_valid_object_passes_and_gets_its_defaults() {
    let s = strategy();
    let mut obj = valid();
    Strategy::default(&s, &mut obj);
    let errs = Strategy::validate(&s, &obj);
    assert!(errs.is_empty(), "{}", errs.aggregate_message());
    assert_eq!(obj["spec"]["size"], "M");
    assert_eq!(obj["spec"]["strategy"], json!({"type": "Rolling"}));
    assert_eq!(obj["spec"]["note"], Value::Null, "nullable null is kept");
}

#[test]
fn a_wrong_type_blocks_the_rules() {
    assert_eq!(
        create_errors(json!({"replicas": "3"})),
        vec![
            "spec.replicas: Invalid value: \"string\": spec.replicas in body must be of type integer: \"string\"",
            ".spec.replicas: Invalid value: 0: .spec.replicas accessor error: 3 is of the type string, expected int64",
            BLOCKED,
        ]
    );
}

#[test]
fn enum_values_are_enforced() {
    assert_eq!(
        create_errors(json!({"size": "XL"})),
        vec![
            "spec.size: Unsupported value: \"XL\": supported values: \"S\", \"M\", \"L\"",
            BLOCKED
        ]
    );
}

#[test]
fn bounds_exclusive_bounds_and_multiples_are_enforced() {
    assert_eq!(
        create_errors(json!({"replicas": 11})),
        vec![
            "spec.replicas: Invalid value: 11: spec.replicas in body should be less than or equal to 10"
        ]
    );
    assert_eq!(
        create_errors(json!({"ratio": 1.0})),
        vec!["spec.ratio: Invalid value: 1: spec.ratio in body should be less than 1"]
    );
    // As upstream (kube-openapi): an integer value meets a fractional multipleOf truncated
    // to an integer factor.
    assert_eq!(
        create_errors(json!({"ratio": 1})),
        vec![
            "spec.ratio: Invalid value: 0: factor MultipleOf declared for spec.ratio must be positive: 0",
            "spec.ratio: Invalid value: 1: spec.ratio in body should be less than 1",
        ]
    );
    assert_eq!(
        create_errors(json!({"ratio": 0.3})),
        vec!["spec.ratio: Invalid value: 0.3: spec.ratio in body should be a multiple of 0.25"]
    );
}

#[test]
fn string_length_and_pattern_are_enforced() {
    assert_eq!(
        create_errors(json!({"name": ""})),
        vec!["spec.name: Invalid value: \"\": spec.name in body should be at least 1 chars long"]
    );
    assert_eq!(
        create_errors(json!({"name": "Alpha"})),
        vec!["spec.name: Invalid value: \"Alpha\": spec.name in body should match '^[a-z]+$'"]
    );
    assert_eq!(
        create_errors(json!({"name": "abcdefghijk"})),
        vec![
            "spec.name: Too long: may not be more than 10 bytes",
            BLOCKED
        ]
    );
}

#[test]
fn formats_are_enforced() {
    assert_eq!(
        create_errors(json!({"created": "yesterday", "owner": "nobody", "address": "::1"})),
        vec![
            "spec.address: Invalid value: \"::1\": spec.address in body must be of type ipv4: \"::1\"",
            "spec.created: Invalid value: \"yesterday\": spec.created in body must be of type date-time: \"yesterday\"",
            "spec.owner: Invalid value: \"nobody\": spec.owner in body must be of type email: \"nobody\"",
            BLOCKED,
        ]
    );
}

#[test]
fn null_is_pruned_unless_nullable_and_required_fields_are_required() {
    assert!(
        create_errors(json!({"paused": null})).is_empty(),
        "a non-nullable null without default is dropped"
    );
    let s = strategy();
    let mut obj = valid();
    obj["spec"].as_object_mut().unwrap().remove("name");
    Strategy::default(&s, &mut obj);
    let msgs: Vec<String> = Strategy::validate(&s, &obj)
        .iter()
        .map(|e| e.message())
        .collect();
    assert_eq!(msgs, vec!["spec.name: Required value", BLOCKED]);
}

#[test]
fn int_or_string_takes_either() {
    assert!(create_errors(json!({"port": "http"})).is_empty());
    assert_eq!(
        create_errors(json!({"port": 1.5})),
        vec![
            "spec.port: Invalid value: \"number\": spec.port in body must be of type integer,string: \"number\"",
            "<nil>: Invalid value: \"\": \"spec.port\" must validate at least one schema (anyOf)",
            "spec.port: Invalid value: \"number\": spec.port in body must be of type integer: \"number\"",
            "<nil>: Invalid value: \"\": Checked value must be of type integer (default format) in spec.port",
            BLOCKED,
        ]
    );
}

#[test]
fn set_and_map_lists_refuse_duplicates() {
    assert_eq!(
        create_errors(json!({"tags": ["a", "a"]})),
        vec!["spec.tags[1]: Duplicate value: \"a\""]
    );
    assert_eq!(
        create_errors(json!({"ports": [{"name": "a", "port": 1}, {"name": "a", "port": 2}]})),
        vec!["spec.ports[1]: Duplicate value: \"object\""]
    );
    assert_eq!(
        create_errors(json!({"tags": ["a", "b", "c", "d"]})),
        vec!["spec.tags: Too many: 4: must have at most 3 items", BLOCKED]
    );
}

#[test]
fn map_sizes_preserved_fields_and_embedded_resources() {
    assert_eq!(
        create_errors(json!({"labels": {"a": "1", "b": "2", "c": "3"}})),
        vec![
            "spec.labels: Too many: 3: must have at most 2 items",
            BLOCKED
        ]
    );
    assert!(create_errors(json!({"extra": {"deep": {"er": [1, 2]}}})).is_empty());
    assert_eq!(
        create_errors(json!({"template": {"apiVersion": "v1", "metadata": {"name": "p"}}})),
        vec!["spec.template.kind: Required value", BLOCKED]
    );
}

#[test]
fn cel_rules_report_message_field_path_and_reason() {
    assert_eq!(
        create_errors(json!({"replicas": 1, "minReplicas": 2})),
        vec!["spec.replicas: Invalid value: replicas must be at least minReplicas"]
    );
    assert_eq!(
        create_errors(json!({"mode": "legacy"})),
        vec!["spec: Forbidden: mode legacy is retired"]
    );
    assert!(create_errors(json!({"mode": "modern"})).is_empty());
    assert_eq!(
        create_errors(json!({"tags": ["forbidden"]})),
        vec![
            "spec: Invalid value: failed rule: !has(self.tags) || self.tags.all(t, t != 'forbidden')"
        ]
    );
}

#[test]
fn transition_rules_compare_with_the_old_object() {
    assert!(
        update_errors(json!({}), json!({"replicas": 4}))
            .errors
            .is_empty()
    );
    let v = update_errors(
        json!({"immutableKey": "k"}),
        json!({"immutableKey": "changed"}),
    );
    let msgs: Vec<String> = v.errors.iter().map(|e| e.message()).collect();
    assert_eq!(
        msgs,
        vec!["spec.immutableKey: Invalid value: \"changed\": immutableKey is immutable"]
    );
    let v = update_errors(json!({"name": "alpha"}), json!({"name": "beta"}));
    let msgs: Vec<String> = v.errors.iter().map(|e| e.message()).collect();
    assert_eq!(msgs, vec!["spec: Invalid value: name is immutable"]);
}

#[test]
fn optional_old_self_rules_run_on_create_too() {
    assert!(
        create_errors(json!({"window": "x"})).is_empty(),
        "no old value: oldSelf is none"
    );
    let v = update_errors(json!({"window": "abcd"}), json!({"window": "ab"}));
    let msgs: Vec<String> = v.errors.iter().map(|e| e.message()).collect();
    assert_eq!(
        msgs,
        vec!["spec.window: Invalid value: \"ab\": window may only grow"]
    );
    assert!(
        update_errors(json!({"window": "ab"}), json!({"window": "abcd"}))
            .errors
            .is_empty()
    );
}

#[test]
fn ratcheting_lets_unchanged_invalid_values_through() {
    let v = update_errors(
        json!({"replicas": 20, "ratio": 0.3}),
        json!({"replicas": 20, "ratio": 0.3, "color": "red"}),
    );
    assert!(v.errors.is_empty(), "{:?}", v.errors);
    let v = update_errors(json!({"replicas": 20}), json!({"replicas": 30}));
    let msgs: Vec<String> = v.errors.iter().map(|e| e.message()).collect();
    assert_eq!(
        msgs,
        vec![
            "spec.replicas: Invalid value: 30: spec.replicas in body should be less than or equal to 10"
        ]
    );
    // A rule failing on an unchanged node only warns; on a changed node it is an error.
    let s = strategy();
    let mut old = valid();
    old["spec"]["tags"] = json!(["forbidden"]);
    let mut new = old.clone();
    new["status"]["replicas"] = json!(5);
    let v = s.validate_object(&new, Some(&old));
    assert!(v.errors.is_empty(), "{:?}", v.errors);
    assert_eq!(
        v.warnings,
        vec![
            "spec: Invalid value: failed rule: !has(self.tags) || self.tags.all(t, t != 'forbidden')"
        ]
    );
    new["spec"]["color"] = json!("red");
    let v = s.validate_object(&new, Some(&old));
    assert_eq!(
        v.errors.aggregate_message(),
        "spec: Invalid value: failed rule: !has(self.tags) || self.tags.all(t, t != 'forbidden')"
    );
}

#[test]
fn scale_fields_must_be_non_negative() {
    let s = strategy();
    let mut obj = valid();
    obj["status"]["replicas"] = json!(-1);
    assert_eq!(
        Strategy::validate(&s, &obj).aggregate_message(),
        ".status.replicas: Invalid value: -1: should be a non-negative integer"
    );
}

#[test]
fn selectable_fields_are_served_as_field_selectors() {
    let d = def("v1");
    assert_eq!(d.strategy.field_names(), &["spec.color", "spec.replicas"]);
    let obj = valid();
    assert_eq!(
        d.strategy.field(&obj, "spec.color").as_deref(),
        Some("blue")
    );
    assert_eq!(
        d.strategy.field(&obj, "spec.replicas").as_deref(),
        Some("3")
    );
    assert_eq!(
        d.strategy.field(&json!({}), "spec.color").as_deref(),
        Some("")
    );
    assert_eq!(d.strategy.field(&obj, "spec.nope"), None);
}

#[test]
fn every_served_version_is_a_resource_with_upstream_metadata() {
    let defs = crate::resource_defs(&widget_crd());
    assert_eq!(defs.len(), 2);
    let beta = &defs[0];
    assert_eq!(
        (
            beta.group.as_str(),
            beta.version.as_str(),
            beta.kind.as_str()
        ),
        ("example.com", "v1beta1", "Widget")
    );
    assert_eq!(
        (beta.list_kind.as_str(), beta.singular.as_str()),
        ("WidgetList", "widget")
    );
    assert!(beta.namespaced && beta.custom);
    assert_eq!(beta.short_names, vec!["wd"]);
    assert_eq!(beta.categories, vec!["all"]);
    assert_eq!(
        beta.verbs,
        vec![
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "create",
            "update",
            "watch"
        ]
    );
    assert_eq!(
        beta.deprecation_warning.as_deref(),
        Some("example.com/v1beta1 Widget is deprecated; use example.com/v1 Widget")
    );
    let subs: Vec<(&str, &str)> = beta
        .subresources
        .iter()
        .map(|s| (s.name.as_str(), s.kind.as_str()))
        .collect();
    assert_eq!(subs, vec![("status", "Widget"), ("scale", "Scale")]);
    assert_eq!(beta.subresource("scale").unwrap().group, "autoscaling");
    assert_eq!(
        beta.scale.as_ref().unwrap().label_selector.as_deref(),
        Some(".status.selector")
    );
    assert!(
        matches!(&beta.printer, Printer::Custom(Value::Null)),
        "no columns: printers add Age"
    );
    let v1 = &defs[1];
    assert!(v1.deprecation_warning.is_none());
    assert!(matches!(&v1.printer, Printer::Custom(cols) if cols[0]["name"] == "Size"));
    let schema = v1.schema.as_ref().unwrap();
    assert_eq!(schema.gvk[0].version, "v1");
    assert!(
        schema.field("metadata").unwrap().field("labels").is_some(),
        "metadata is ObjectMeta"
    );
    assert!(
        schema
            .field("spec")
            .unwrap()
            .field("extra")
            .unwrap()
            .preserve_unknown_fields
    );
}

#[test]
fn writes_are_stored_at_the_storage_version_and_read_back_at_the_request_version() {
    let beta = def("v1beta1");
    let mut obj = valid();
    obj["apiVersion"] = json!("example.com/v1beta1");
    beta.strategy.prepare_for_create(&mut obj);
    assert_eq!(obj["apiVersion"], "example.com/v1", "stored at v1");
    let s = CustomStrategy::new("example.com", "v1beta1", "v1", Some(&schema()), None, &[]);
    let mut stored = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
                            "spec": {"name": "a", "paused": null}});
    s.read(&mut stored);
    assert_eq!(stored["apiVersion"], "example.com/v1beta1");
    assert_eq!(stored["spec"]["size"], "M", "defaults apply on read");
    assert!(stored["spec"].get("paused").is_none());
}

#[test]
fn custom_resources_need_a_resource_version_on_update_and_warn_about_odd_finalizers() {
    let s = strategy();
    assert!(!s.allow_unconditional_update());
    let obj = json!({"metadata": {"finalizers": ["cleanup", "example.com/cleanup", "orphan"]}});
    assert_eq!(
        s.warnings(&obj),
        vec![
            "metadata.finalizers: \"cleanup\": prefer a domain-qualified finalizer name to avoid accidental conflicts with other finalizer writers"
        ]
    );
}

#[test]
fn the_test_crd_itself_is_valid() {
    let c = widget_crd();
    let errs = crate::validate_crd(&c);
    assert!(errs.is_empty(), "{}", errs.aggregate_message());
}

#[test]
fn the_served_schema_prunes_unknown_fields_and_keeps_preserved_ones() {
    let d = def("v1");
    let mut obj = valid();
    obj["spec"]["unknown"] = json!(1);
    obj["spec"]["extra"]["free"] = json!({"form": true});
    obj["spec"]["template"]["spec"] = json!({"containers": []});
    obj["metadata"]["bogus"] = json!(1);
    let removed = openapi::prune(&mut obj, d.schema.as_ref().unwrap());
    assert_eq!(removed, vec!["metadata.bogus", "spec.unknown"]);
    assert_eq!(obj["spec"]["extra"]["free"], json!({"form": true}));
    assert_eq!(obj["spec"]["template"]["spec"], json!({"containers": []}));
    assert_eq!(obj["apiVersion"], "example.com/v1");
}

#[test]
fn served_versions_share_the_strategy_with_the_resource_definition() {
    let served = crate::served_versions(&widget_crd());
    let (d, s) = &served[0];
    assert_eq!(s.version(), "v1beta1");
    assert_eq!(s.storage_version(), "v1");
    let as_dyn: Arc<dyn Strategy> = s.clone();
    assert!(Arc::ptr_eq(&d.strategy, &as_dyn), "one strategy object");
}
