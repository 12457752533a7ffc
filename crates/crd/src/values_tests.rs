//! Tests of custom resource value validation: one passing and one failing value per keyword,
//! with upstream's exact messages.

use super::*;
use crate::openapi_errors::to_field_errors;
use serde_json::json;

fn errors(schema: Value, obj: Value) -> Vec<String> {
    errors_update(schema, obj, None)
}

fn errors_update(schema: Value, obj: Value, old: Option<Value>) -> Vec<String> {
    let node = Node::compile(&json!({"type": "object", "properties": {"spec": schema}}));
    let mut out = Vec::new();
    validate(
        &node,
        &json!({"spec": obj}),
        old.map(|o| json!({"spec": o})).as_ref(),
        &mut out,
    );
    to_field_errors(None, out)
        .iter()
        .map(|e| e.message())
        .collect()
}

fn field(schema: Value) -> Value {
    json!({"type": "object", "properties": {"x": schema}})
}

#[test]
fn type_mismatches_name_the_expected_and_found_types() {
    let s = json!({"type": "object", "properties": {"replicas": {"type": "integer"}}});
    assert!(errors(s.clone(), json!({"replicas": 3})).is_empty());
    assert!(
        errors(s.clone(), json!({"replicas": 3.0})).is_empty(),
        "an integral float is an integer"
    );
    assert_eq!(
        errors(s, json!({"replicas": "3"})),
        vec![
            "spec.replicas: Invalid value: \"string\": spec.replicas in body must be of type integer: \"string\""
        ]
    );
}

#[test]
fn null_is_refused_unless_nullable() {
    let s = field(json!({"type": "string"}));
    assert_eq!(
        errors(s, json!({"x": null})),
        vec!["spec.x: Invalid value: \"null\": spec.x in body must be of type string: \"null\""]
    );
    assert!(
        errors(
            field(json!({"type": "string", "nullable": true})),
            json!({"x": null})
        )
        .is_empty()
    );
}

#[test]
fn int_or_string_accepts_both_and_nothing_else() {
    let s = field(
        json!({"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]}),
    );
    assert!(errors(s.clone(), json!({"x": 80})).is_empty());
    assert!(errors(s.clone(), json!({"x": "http"})).is_empty());
    let errs = errors(s, json!({"x": true}));
    assert_eq!(
        errs[0],
        "spec.x: Invalid value: \"boolean\": spec.x in body must be of type integer,string: \"boolean\""
    );
    assert_eq!(
        errs[1],
        "<nil>: Invalid value: \"\": \"spec.x\" must validate at least one schema (anyOf)"
    );
}

#[test]
fn enum_failures_are_unsupported_values() {
    let s = field(json!({"type": "string", "enum": ["S", "M"]}));
    assert!(errors(s.clone(), json!({"x": "M"})).is_empty());
    assert_eq!(
        errors(s, json!({"x": "XL"})),
        vec!["spec.x: Unsupported value: \"XL\": supported values: \"S\", \"M\""]
    );
    let n = field(json!({"type": "integer", "enum": [1, 2]}));
    assert!(errors(n.clone(), json!({"x": 2})).is_empty());
    assert_eq!(
        errors(n, json!({"x": 3})),
        vec!["spec.x: Unsupported value: 3: supported values: \"1\", \"2\""]
    );
}

#[test]
fn integer_bounds_and_exclusive_bounds() {
    let s = field(json!({"type": "integer", "minimum": 1, "maximum": 10}));
    assert!(errors(s.clone(), json!({"x": 10})).is_empty());
    assert_eq!(
        errors(s.clone(), json!({"x": 11})),
        vec!["spec.x: Invalid value: 11: spec.x in body should be less than or equal to 10"]
    );
    assert_eq!(
        errors(s, json!({"x": 0})),
        vec!["spec.x: Invalid value: 0: spec.x in body should be greater than or equal to 1"]
    );
    let e = field(
        json!({"type": "integer", "minimum": 1, "exclusiveMinimum": true, "maximum": 10, "exclusiveMaximum": true}),
    );
    assert!(errors(e.clone(), json!({"x": 5})).is_empty());
    assert_eq!(
        errors(e.clone(), json!({"x": 10})),
        vec!["spec.x: Invalid value: 10: spec.x in body should be less than 10"]
    );
    assert_eq!(
        errors(e, json!({"x": 1})),
        vec!["spec.x: Invalid value: 1: spec.x in body should be greater than 1"]
    );
}

#[test]
fn number_bounds_print_floats_like_go() {
    let s = field(json!({"type": "number", "maximum": 1.5}));
    assert!(errors(s.clone(), json!({"x": 1.25})).is_empty());
    assert_eq!(
        errors(s, json!({"x": 2.5})),
        vec!["spec.x: Invalid value: 2.5: spec.x in body should be less than or equal to 1.5"]
    );
}

#[test]
fn multiple_of_checks_integers_and_floats() {
    let s = field(json!({"type": "integer", "multipleOf": 5}));
    assert!(errors(s.clone(), json!({"x": 15})).is_empty());
    assert_eq!(
        errors(s, json!({"x": 7})),
        vec!["spec.x: Invalid value: 7: spec.x in body should be a multiple of 5"]
    );
    let f = field(json!({"type": "number", "multipleOf": 0.5}));
    assert!(errors(f.clone(), json!({"x": 1.5})).is_empty());
    assert_eq!(
        errors(f, json!({"x": 1.3})),
        vec!["spec.x: Invalid value: 1.3: spec.x in body should be a multiple of 0.5"]
    );
}

#[test]
fn int32_values_out_of_range_are_reported_at_the_root() {
    let s = field(json!({"type": "integer", "format": "int32"}));
    assert!(errors(s.clone(), json!({"x": 2147483647})).is_empty());
    assert_eq!(
        errors(s, json!({"x": 2147483648i64})),
        vec![
            "<nil>: Invalid value: \"\": Checked value must be of type integer with format int32 in spec.x"
        ]
    );
}

#[test]
fn string_lengths_and_patterns() {
    let s = field(json!({"type": "string", "minLength": 1, "maxLength": 3, "pattern": "^[a-z]+$"}));
    assert!(errors(s.clone(), json!({"x": "abc"})).is_empty());
    assert_eq!(
        errors(s.clone(), json!({"x": ""})),
        vec!["spec.x: Invalid value: \"\": spec.x in body should be at least 1 chars long"]
    );
    assert_eq!(
        errors(s.clone(), json!({"x": "abcd"})),
        vec!["spec.x: Too long: may not be more than 3 bytes"]
    );
    assert_eq!(
        errors(s, json!({"x": "AB"})),
        vec!["spec.x: Invalid value: \"AB\": spec.x in body should match '^[a-z]+$'"]
    );
}

#[test]
fn formats_are_type_errors_with_the_format_name() {
    for (format, good, bad) in [
        ("date-time", "2024-05-01T10:00:00Z", "yesterday"),
        ("date", "2024-05-01", "2024-13-01"),
        ("uuid", "6ba7b810-9dad-11d1-80b4-00c04fd430c8", "nope"),
        ("email", "a@b.example", "a-at-b"),
        ("hostname", "web.example.com", "-bad-"),
        ("ipv4", "192.168.0.1", "fd00::1"),
        ("ipv6", "fd00::1", "192.168.0.1"),
        ("cidr", "10.0.0.0/24", "10.0.0.0"),
        ("byte", "aGk=", "***"),
    ] {
        let s = field(json!({"type": "string", "format": format}));
        assert!(
            errors(s.clone(), json!({"x": good})).is_empty(),
            "{format} {good}"
        );
        assert_eq!(
            errors(s, json!({"x": bad})),
            vec![format!(
                "spec.x: Invalid value: \"{bad}\": spec.x in body must be of type {format}: \"{bad}\""
            )],
        );
    }
}

#[test]
fn int64_and_double_formats_accept_plain_numbers() {
    assert!(
        errors(
            field(json!({"type": "integer", "format": "int64"})),
            json!({"x": 5})
        )
        .is_empty()
    );
    assert!(
        errors(
            field(json!({"type": "number", "format": "double"})),
            json!({"x": 5})
        )
        .is_empty()
    );
    assert!(
        errors(
            field(json!({"type": "number", "format": "float"})),
            json!({"x": 0.5})
        )
        .is_empty()
    );
}

#[test]
fn array_sizes_and_unique_items() {
    let s =
        field(json!({"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 2}));
    assert!(errors(s.clone(), json!({"x": ["a"]})).is_empty());
    assert_eq!(
        errors(s.clone(), json!({"x": []})),
        vec!["spec.x: Invalid value: 0: spec.x in body should have at least 1 items"]
    );
    assert_eq!(
        errors(s, json!({"x": ["a", "b", "c"]})),
        vec!["spec.x: Too many: 3: must have at most 2 items"]
    );
    let u = field(json!({"type": "array", "items": {"type": "string"}, "uniqueItems": true}));
    assert_eq!(
        errors(u, json!({"x": ["a", "a"]})),
        vec!["spec.x: Invalid value: \"\": spec.x in body shouldn't contain duplicates"]
    );
}

#[test]
fn items_are_validated_with_their_index() {
    let s = field(json!({"type": "array", "items": {"type": "integer"}}));
    assert_eq!(
        errors(s, json!({"x": [1, "two"]})),
        vec![
            "spec.x[1]: Invalid value: \"string\": spec.x[1] in body must be of type integer: \"string\""
        ]
    );
}

#[test]
fn object_property_counts_required_and_map_values() {
    let s = field(
        json!({"type": "object", "additionalProperties": {"type": "string"}, "minProperties": 1, "maxProperties": 2}),
    );
    assert!(errors(s.clone(), json!({"x": {"a": "1"}})).is_empty());
    assert_eq!(
        errors(s.clone(), json!({"x": {}})),
        vec!["spec.x: Invalid value: 0: spec.x in body should have at least 1 properties"]
    );
    assert_eq!(
        errors(s.clone(), json!({"x": {"a": "1", "b": "2", "c": "3"}})),
        vec!["spec.x: Too many: 3: must have at most 2 items"]
    );
    assert_eq!(
        errors(s, json!({"x": {"a": 1}})),
        vec![
            "spec.x.a: Invalid value: \"integer\": spec.x.a in body must be of type string: \"integer\""
        ]
    );
    let r =
        json!({"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}});
    assert!(errors(r.clone(), json!({"name": "n"})).is_empty());
    assert_eq!(errors(r, json!({})), vec!["spec.name: Required value"]);
}

#[test]
fn junctors_report_their_summary_at_the_root() {
    let one = field(
        json!({"type": "object", "oneOf": [{"required": ["a"]}, {"required": ["b"]}],
                           "properties": {"a": {"type": "string"}, "b": {"type": "string"}}}),
    );
    assert!(errors(one.clone(), json!({"x": {"a": "1"}})).is_empty());
    assert_eq!(
        errors(one, json!({"x": {"a": "1", "b": "2"}})),
        vec![
            "<nil>: Invalid value: \"\": \"spec.x\" must validate one and only one schema (oneOf). Found 2 valid alternatives"
        ]
    );
    let not = field(json!({"type": "string", "not": {"enum": ["forbidden"]}}));
    assert!(errors(not.clone(), json!({"x": "ok"})).is_empty());
    assert_eq!(
        errors(not, json!({"x": "forbidden"})),
        vec!["<nil>: Invalid value: \"\": \"spec.x\" must not validate the schema (not)"]
    );
    let all = field(json!({"type": "string", "allOf": [{"minLength": 2}, {"maxLength": 3}]}));
    assert!(errors(all.clone(), json!({"x": "ab"})).is_empty());
    assert_eq!(
        errors(all, json!({"x": "a"})),
        vec![
            "spec.x: Invalid value: \"a\": spec.x in body should be at least 2 chars long",
            "<nil>: Invalid value: \"\": \"spec.x\" must validate all the schemas (allOf)",
        ]
    );
}

#[test]
fn additional_properties_false_forbids_every_key() {
    let s = field(json!({"type": "object", "additionalProperties": false}));
    assert!(errors(s.clone(), json!({"x": {}})).is_empty());
    assert_eq!(
        errors(s, json!({"x": {"k": 1}})),
        vec!["spec.x: Invalid value: \"k\": spec.x.k in body is a forbidden property"]
    );
}

#[test]
fn ratcheting_keeps_unchanged_invalid_values_and_checks_changed_ones() {
    let s = json!({"type": "object", "properties": {
        "a": {"type": "string", "maxLength": 2},
        "b": {"type": "string", "maxLength": 2}}});
    let old = json!({"a": "too long", "b": "ok"});
    assert!(
        errors_update(
            s.clone(),
            json!({"a": "too long", "b": "no"}),
            Some(old.clone())
        )
        .is_empty()
    );
    assert_eq!(
        errors_update(
            s.clone(),
            json!({"a": "too long", "b": "longer"}),
            Some(old.clone())
        ),
        vec!["spec.b: Too long: may not be more than 2 bytes"]
    );
    assert_eq!(
        errors_update(s, json!({"a": "still too long"}), Some(old)),
        vec!["spec.a: Too long: may not be more than 2 bytes"]
    );
}

#[test]
fn ratcheting_correlates_map_list_items_by_key() {
    let s = json!({"type": "object", "properties": {"ports": {"type": "array",
        "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
        "items": {"type": "object", "properties": {
            "name": {"type": "string"}, "port": {"type": "integer", "maximum": 100}}}}}});
    let old = json!({"ports": [{"name": "a", "port": 500}]});
    let reordered = json!({"ports": [{"name": "b", "port": 1}, {"name": "a", "port": 500}]});
    assert!(errors_update(s.clone(), reordered, Some(old.clone())).is_empty());
    assert_eq!(
        errors_update(s, json!({"ports": [{"name": "c", "port": 500}]}), Some(old)),
        vec![
            "spec.ports[0].port: Invalid value: 500: spec.ports[0].port in body should be less than or equal to 100"
        ]
    );
}
