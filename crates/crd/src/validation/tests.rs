//! CRD validation: one passing and one failing case per rule, with upstream's exact messages.

use super::*;
use crate::default_crd;

fn widget_schema() -> Value {
    json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "size": {"type": "string"}, "replicas": {"type": "integer"}}}}})
}

fn crd_with(versions: Value) -> Value {
    let mut c = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"plural": "widgets", "kind": "Widget", "shortNames": ["wd"], "categories": ["all"]},
                 "versions": versions}});
    default_crd(&mut c);
    c
}

fn crd(schema: Value) -> Value {
    crd_with(
        json!([{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": schema}}]),
    )
}

fn msgs(c: &Value) -> Vec<String> {
    validate_crd(c).iter().map(FieldError::message).collect()
}

#[test]
fn a_simple_crd_is_valid() {
    assert_eq!(msgs(&crd(widget_schema())), Vec::<String>::new());
}

#[test]
fn the_name_must_be_plural_dot_group() {
    let mut c = crd(widget_schema());
    c["metadata"]["name"] = json!("gadgets.example.com");
    assert_eq!(
        msgs(&c),
        vec![
            "metadata.name: Invalid value: \"gadgets.example.com\": must be spec.names.plural+\".\"+spec.group"
        ]
    );
}

#[test]
fn the_group_needs_a_dot_and_the_scope_a_known_value() {
    let mut c = crd(widget_schema());
    c["metadata"]["name"] = json!("widgets.example");
    c["spec"]["group"] = json!("example");
    c["spec"]["scope"] = json!("Global");
    assert_eq!(
        msgs(&c),
        vec![
            "spec.group: Invalid value: \"example\": should be a domain with at least one dot",
            "spec.scope: Unsupported value: \"Global\": supported values: \"Cluster\", \"Namespaced\"",
        ]
    );
}

#[test]
fn exactly_one_storage_version_with_unique_dns_1035_names() {
    let s = json!({"openAPIV3Schema": widget_schema()});
    let c = crd_with(json!([
        {"name": "v1", "served": true, "storage": true, "schema": s},
        {"name": "v1", "served": true, "storage": true, "schema": s},
        {"name": "V2", "served": true, "storage": false, "schema": s}]));
    let m = msgs(&c);
    assert!(m.contains(&"spec.versions[2].name: Invalid value: \"V2\": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')".to_string()), "{m:#?}");
    assert!(
        m.iter()
            .any(|e| e.starts_with("spec.versions: Invalid value: ")
                && e.ends_with(": must contain unique version names")),
        "{m:#?}"
    );
    assert!(
        m.iter()
            .any(|e| e.ends_with(": must have exactly one version marked as storage version")),
        "{m:#?}"
    );
}

#[test]
fn names_must_be_dns_labels_and_list_kind_differ_from_kind() {
    let mut c = crd(widget_schema());
    c["spec"]["names"]["shortNames"] = json!(["w_d"]);
    c["spec"]["names"]["listKind"] = json!("Widget");
    let m = msgs(&c);
    assert!(
        m[0].starts_with(
            "spec.names.shortNames[0]: Invalid value: \"w_d\": a DNS-1035 label must consist of"
        ),
        "{m:#?}"
    );
    assert_eq!(
        m[1],
        "spec.names.listKind: Invalid value: \"Widget\": kind and listKind may not be the same"
    );
}

#[test]
fn a_missing_schema_is_required_per_version() {
    let c = crd_with(json!([{"name": "v1", "served": true, "storage": true}]));
    assert_eq!(
        msgs(&c),
        vec!["spec.versions[0].schema.openAPIV3Schema: Required value"]
    );
}

#[test]
fn single_version_schema_errors_are_reported_at_spec_validation() {
    let c = crd(
        json!({"type": "object", "properties": {"spec": {"properties": {"a": {"type": "string"}}}}}),
    );
    assert_eq!(
        msgs(&c),
        vec![
            "spec.validation.openAPIV3Schema.properties[spec].type: Required value: must not be empty for specified object fields"
        ]
    );
}

#[test]
fn per_version_schema_errors_are_reported_at_the_version() {
    let c = crd_with(json!([
        {"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": widget_schema()}},
        {"name": "v2", "served": true, "storage": false, "schema": {"openAPIV3Schema":
            {"type": "object", "properties": {"spec": {"properties": {"a": {"type": "string"}}}}}}}]));
    assert_eq!(
        msgs(&c),
        vec![
            "spec.versions[1].schema.openAPIV3Schema.properties[spec].type: Required value: must not be empty for specified object fields"
        ]
    );
}

#[test]
fn with_a_status_subresource_the_root_may_only_have_some_fields() {
    let mut schema = widget_schema();
    schema["anyOf"] = json!([{"required": ["spec"]}]);
    let mut c = crd(schema);
    c["spec"]["versions"][0]["subresources"] = json!({"status": {}});
    let m = msgs(&c);
    assert_eq!(m.len(), 1, "{m:#?}");
    assert!(m[0].starts_with("spec.validation.openAPIV3Schema: Invalid value: \"object\": only [Description Type Format Title Maximum"), "{m:#?}");
    assert!(m[0].ends_with(
        "fields are allowed at the root of the schema if the status subresource is enabled"
    ));
}

#[test]
fn the_root_may_not_be_nullable() {
    let mut schema = widget_schema();
    schema["nullable"] = json!(true);
    assert_eq!(
        msgs(&crd(schema)),
        vec![
            "spec.validation.openAPIV3Schema.nullable: Forbidden: nullable cannot be true at the root"
        ]
    );
}

#[test]
fn top_level_metadata_may_not_have_defaults() {
    let schema =
        json!({"type": "object", "properties": {"metadata": {"type": "object", "default": {}}}});
    assert_eq!(
        msgs(&crd(schema)),
        vec![
            "spec.validation.openAPIV3Schema.properties[metadata].default: Forbidden: must not be set in top-level metadata"
        ]
    );
}

#[test]
fn invalid_defaults_are_refused() {
    let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "size": {"type": "string", "enum": ["S", "M"], "default": "XL"}}}}});
    assert_eq!(
        msgs(&crd(schema)),
        vec![
            "spec.validation.openAPIV3Schema.properties[spec].properties[size].default: Unsupported value: \"XL\": supported values: \"S\", \"M\""
        ]
    );
}

#[test]
fn unique_items_and_additional_properties_with_properties_are_forbidden() {
    let schema = json!({"type": "object", "properties": {"spec": {"type": "object",
        "properties": {"a": {"type": "string"}}, "additionalProperties": {"type": "string"}},
        "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": true}}});
    assert_eq!(
        msgs(&crd(schema)),
        vec![
            "spec.validation.openAPIV3Schema.properties[spec].additionalProperties: Forbidden: additionalProperties and properties are mutual exclusive",
            "spec.validation.openAPIV3Schema.properties[tags].uniqueItems: Forbidden: uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
        ]
    );
}

#[test]
fn printer_columns_need_a_known_type_and_a_json_path() {
    let mut c = crd(widget_schema());
    c["spec"]["versions"][0]["additionalPrinterColumns"] = json!([
        {"name": "Size", "type": "string", "jsonPath": ".spec.size"},
        {"name": "Bad", "type": "text", "format": "percent", "jsonPath": "spec.size"},
        {"name": "", "type": "string", "jsonPath": ".spec[0"}]);
    assert_eq!(
        msgs(&c),
        vec![
            "spec.additionalPrinterColumns[1].type: Invalid value: \"text\": must be one of boolean,date,integer,number,string",
            "spec.additionalPrinterColumns[1].format: Invalid value: \"percent\": must be one of byte,date,date-time,double,float,int32,int64,password",
            "spec.additionalPrinterColumns[1].JSONPath: Invalid value: \"spec.size\": must be a simple json path starting with .",
            "spec.additionalPrinterColumns[2].name: Required value",
            "spec.additionalPrinterColumns[2].JSONPath: Invalid value: \".spec[0\": must be a valid JSONPath: invalid JSONPath \".spec[0\": unterminated array",
        ]
    );
}

#[test]
fn scale_paths_must_be_under_spec_and_status() {
    let mut c = crd(widget_schema());
    c["spec"]["versions"][0]["subresources"] = json!({"scale": {
        "specReplicasPath": ".status.replicas", "statusReplicasPath": "", "labelSelectorPath": ".metadata.labels"}});
    assert_eq!(
        msgs(&c),
        vec![
            "spec.subresources.scale.specReplicasPath: Invalid value: \".status.replicas\": should be a json path under .spec",
            "spec.subresources.scale.statusReplicasPath: Required value",
            "spec.subresources.scale.labelSelectorPath: Invalid value: \".metadata.labels\": should be a json path under either .spec or .status",
        ]
    );
    c["spec"]["versions"][0]["subresources"] = json!({"scale": {
        "specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas", "labelSelectorPath": ".status.selector"}});
    assert!(msgs(&c).is_empty());
}

#[test]
fn selectable_fields_must_name_scalar_fields_outside_metadata() {
    let mut c = crd(json!({"type": "object", "properties": {
        "metadata": {"type": "object"},
        "spec": {"type": "object", "properties": {
            "color": {"type": "string", "enum": ["red"]}, "n": {"type": "integer"}, "on": {"type": "boolean"},
            "sub": {"type": "object"}}}}}));
    c["spec"]["versions"][0]["selectableFields"] = json!([
        {"jsonPath": ".spec.color"}, {"jsonPath": ".spec.n"}, {"jsonPath": ".spec.on"},
        {"jsonPath": ".spec.sub"}, {"jsonPath": ".spec.nope"}, {"jsonPath": ".spec.color"}, {"jsonPath": ""}]);
    assert_eq!(
        msgs(&c),
        vec![
            "spec.selectableFields[3].jsonPath: Invalid value: \".spec.sub\": must point to a field of type string, boolean or integer. Enum string fields and strings with formats are allowed.",
            "spec.selectableFields[4].jsonPath: Invalid value: \".spec.nope\": is an invalid path: does not refer to a valid field",
            "spec.selectableFields[5].jsonPath: Duplicate value: \".spec.color\"",
            "spec.selectableFields[6].jsonPath: Required value",
        ]
    );
}

#[test]
fn more_than_eight_selectable_fields_are_too_many() {
    let props: serde_json::Map<String, Value> = (0..9)
        .map(|i| (format!("f{i}"), json!({"type": "string"})))
        .collect();
    let mut c = crd(
        json!({"type": "object", "properties": {"spec": {"type": "object", "properties": props}}}),
    );
    c["spec"]["versions"][0]["selectableFields"] = json!(
        (0..9)
            .map(|i| json!({"jsonPath": format!(".spec.f{i}")}))
            .collect::<Vec<_>>()
    );
    assert_eq!(
        msgs(&c),
        vec!["spec.selectableFields: Too many: 9: must have at most 8 items"]
    );
}

#[test]
fn webhook_conversion_is_validated_and_none_may_not_configure_a_webhook() {
    let mut c = crd(widget_schema());
    c["spec"]["conversion"] = json!({"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"],
        "clientConfig": {"service": {"name": "conv", "namespace": "system", "path": "/convert"}}}});
    default_crd(&mut c);
    assert!(msgs(&c).is_empty(), "{:#?}", msgs(&c));
    c["spec"]["conversion"] = json!({"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v3"],
        "clientConfig": {"url": "http://conv.example.com/x?y=1"}}});
    assert_eq!(
        msgs(&c),
        vec![
            "spec.conversion.webhookClientConfig.url: Invalid value: \"http\": 'https' is the only allowed URL scheme; desired format: https://host[/path]",
            "spec.conversion.webhookClientConfig.url: Invalid value: \"y=1\": query parameters are not permitted in the URL",
            "spec.conversion.conversionReviewVersions: Invalid value: [\"v3\"]: must include at least one of v1, v1beta1",
        ]
    );
    c["spec"]["conversion"] =
        json!({"strategy": "None", "webhook": {"conversionReviewVersions": ["v1"]}});
    assert_eq!(
        msgs(&c),
        vec![
            "spec.conversion.conversionReviewVersions: Forbidden: should not be set when strategy is not set to Webhook"
        ]
    );
}

#[test]
fn preserve_unknown_fields_must_be_false() {
    let mut c = crd(widget_schema());
    c["spec"]["preserveUnknownFields"] = json!(true);
    assert_eq!(
        msgs(&c),
        vec![
            "spec.preserveUnknownFields: Invalid value: true: cannot set to true, set x-kubernetes-preserve-unknown-fields to true in spec.versions[*].schema instead"
        ]
    );
}

#[test]
fn stored_versions_must_include_the_storage_version_and_exist() {
    let mut c = crd(widget_schema());
    c["status"]["storedVersions"] = json!(["v0"]);
    assert_eq!(
        msgs(&c),
        vec![
            "status.storedVersions: Invalid value: [\"v0\"]: must have the storage version v1",
            "status.storedVersions[0]: Invalid value: \"v0\": missing from spec.versions; v0 was previously a storage version, and must remain in spec.versions until a storage migration ensures no data remains persisted in v0 and removes v0 from status.storedVersions",
        ]
    );
}

#[test]
fn a_deprecation_warning_needs_a_deprecated_version() {
    let mut c = crd(widget_schema());
    c["spec"]["versions"][0]["deprecationWarning"] = json!("old");
    assert_eq!(
        msgs(&c),
        vec![
            "spec.versions[0].deprecationWarning: Invalid value: \"old\": can only be set for deprecated versions"
        ]
    );
    c["spec"]["versions"][0]["deprecated"] = json!(true);
    assert!(msgs(&c).is_empty());
}

#[test]
fn protected_groups_need_an_approval_annotation() {
    let mut c = crd(widget_schema());
    c["metadata"]["name"] = json!("widgets.x.k8s.io");
    c["spec"]["group"] = json!("x.k8s.io");
    assert_eq!(
        msgs(&c),
        vec![
            "metadata.annotations[api-approved.kubernetes.io]: Required value: protected groups must have approval annotation \"api-approved.kubernetes.io\", see https://github.com/kubernetes/enhancements/pull/1111"
        ]
    );
    c["metadata"]["annotations"] =
        json!({"api-approved.kubernetes.io": "https://github.com/kubernetes/kubernetes/pull/1"});
    assert!(msgs(&c).is_empty());
}

#[test]
fn cel_rules_are_compiled_and_checked() {
    let schema = json!({"type": "object", "properties": {"spec": {"type": "object",
        "properties": {"a": {"type": "integer"}, "items": {"type": "array", "maxItems": 10, "items": {"type": "object",
            "properties": {"v": {"type": "string", "maxLength": 64}},
            "x-kubernetes-validations": [{"rule": "self.v == oldSelf.v"}]}}},
        "x-kubernetes-validations": [
            {"rule": "self.a > 0", "message": "a must be positive"},
            {"rule": "self.a >", "message": "broken"},
            {"rule": "self.a > 0", "optionalOldSelf": true},
            {"rule": "self.a > 0", "reason": "FieldValueWrong"},
            {"rule": "self.a > 0", "fieldPath": ".nope"}]}}});
    let m = msgs(&crd(schema));
    assert_eq!(m.len(), 3, "{m:#?}");
    assert_eq!(
        m[0],
        "spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[3].reason: Unsupported value: \"FieldValueWrong\": supported values: \"FieldValueDuplicate\", \"FieldValueForbidden\", \"FieldValueInvalid\", \"FieldValueRequired\""
    );
    assert_eq!(
        m[1],
        "spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[4].fieldPath: Invalid value: \".nope\": must be a valid path"
    );
    assert!(
        m[2].contains("oldSelf cannot be used"),
        "a child without schema errors still compiles its rules"
    );
    let schema = json!({"type": "object", "properties": {"spec": {"type": "object",
        "properties": {"a": {"type": "integer"}, "items": {"type": "array", "maxItems": 10, "items": {"type": "object",
            "properties": {"v": {"type": "string", "maxLength": 64}},
            "x-kubernetes-validations": [{"rule": "self.v == oldSelf.v"}]}}},
        "x-kubernetes-validations": [
            {"rule": "self.a > 0", "message": "a must be positive"},
            {"rule": "self.a >", "message": "broken"},
            {"rule": "self.a > 0", "optionalOldSelf": true}]}}});
    let m = msgs(&crd(schema));
    assert_eq!(m.len(), 3, "{m:#?}");
    assert_eq!(
        m[0],
        "spec.validation.openAPIV3Schema.properties[spec].properties[items].items.x-kubernetes-validations[0].rule: Invalid value: \"self.v == oldSelf.v\": oldSelf cannot be used on the uncorrelatable portion of the schema within spec.validation.openAPIV3Schema.properties[spec].properties[items]"
    );
    assert!(m[1].starts_with("spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[1].rule: Invalid value: \"object\": compilation failed: ERROR: <input>:1:"), "{}", m[1]);
    assert_eq!(
        m[2],
        "spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[2].optionalOldSelf: Invalid value: true: may not be set if oldSelf is not used in rule"
    );
}

#[test]
fn map_lists_need_keys_that_are_required_scalar_properties() {
    let schema = json!({"type": "object", "properties": {"ports": {"type": "array",
        "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["port", "missing"],
        "items": {"type": "object", "required": ["port"], "properties": {
            "port": {"type": "integer"}, "protocol": {"type": "string"}}}},
        "tags": {"type": "string", "x-kubernetes-list-type": "set"}}});
    assert_eq!(
        msgs(&crd(schema)),
        vec![
            "spec.validation.openAPIV3Schema.properties[ports].x-kubernetes-list-map-keys: Invalid value: [\"port\",\"missing\"]: entries must all be names of item properties",
            "spec.validation.openAPIV3Schema.properties[tags].type: Invalid value: \"string\": must be array if x-kubernetes-list-type is specified",
        ]
    );
}

#[test]
fn updates_may_not_change_group_plural_or_established_scope() {
    let mut old = crd(widget_schema());
    old["metadata"]["resourceVersion"] = json!("5");
    old["status"]["conditions"] = json!([{"type": "Established", "status": "True"}]);
    let mut new = old.clone();
    new["spec"]["scope"] = json!("Cluster");
    new["spec"]["names"]["kind"] = json!("Gadget");
    let m: Vec<String> = validate_crd_update(&new, &old)
        .iter()
        .map(FieldError::message)
        .collect();
    assert_eq!(
        m,
        vec![
            "spec.scope: Invalid value: \"Cluster\": field is immutable",
            "spec.names.kind: Invalid value: \"Gadget\": field is immutable",
        ]
    );
    old["status"]["conditions"] = json!([]);
    assert!(
        validate_crd_update(&new, &old).is_empty(),
        "not established yet: scope and kind may change"
    );
}
