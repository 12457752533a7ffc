//! Node checks of CRD schemas.

use super::*;

fn msgs(schema: Value) -> Vec<String> {
    validate(&schema, &Path::new("s"), Options::default())
        .iter()
        .map(FieldError::message)
        .collect()
}

#[test]
fn unsupported_keywords_are_forbidden() {
    assert_eq!(
        msgs(
            json!({"type": "object", "$ref": "#/x", "patternProperties": {"a": {}}, "properties": {
            "n": {"type": "null"}}})
        ),
        vec![
            "s.patternProperties: Forbidden: patternProperties is not supported",
            "s.$ref: Forbidden: $ref is not supported",
            "s.properties[n].type: Unsupported value: \"null\": supported values: \"array\", \"boolean\", \"integer\", \"number\", \"object\", \"string\"",
            "s.properties[n].type: Forbidden: type cannot be set to null, use nullable as an alternative",
        ]
    );
}

#[test]
fn set_items_must_be_atomic_and_map_list_keys_required_or_defaulted() {
    assert_eq!(
        msgs(json!({"type": "object", "properties": {
            "s": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "object"}},
            "m": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["k"],
                  "items": {"type": "object", "properties": {"k": {"type": "string", "nullable": true}}}}}})),
        vec![
            "s.properties[m].items.properties[k].default: Required value: this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property",
            "s.properties[m].items.properties[k].nullable: Forbidden: this property is in x-kubernetes-list-map-keys, so it cannot be nullable",
            "s.properties[s].items.x-kubernetes-map-type: Invalid value: null: must be atomic as item of a list with x-kubernetes-list-type=set",
        ]
    );
}

#[test]
fn map_type_must_be_known_and_on_objects() {
    assert_eq!(
        msgs(
            json!({"type": "object", "properties": {"a": {"type": "string", "x-kubernetes-map-type": "fancy"}}})
        ),
        vec![
            "s.properties[a].type: Invalid value: \"string\": must be object if x-kubernetes-map-type is specified",
            "s.properties[a].x-kubernetes-map-type: Unsupported value: \"fancy\": supported values: \"atomic\", \"granular\"",
        ]
    );
}

#[test]
fn rule_text_fields_are_checked_before_compiling() {
    assert_eq!(
        msgs(json!({"type": "object", "x-kubernetes-validations": [
            {"rule": " "}, {"rule": "true", "message": "a\nb"}, {"rule": "true\n&& true"},
            {"rule": "true", "messageExpression": " "}]})),
        vec![
            "s.x-kubernetes-validations[0].rule: Required value: rule is not specified",
            "s.x-kubernetes-validations[1].message: Invalid value: \"a\\nb\": must not contain line breaks",
            "s.x-kubernetes-validations[2].message: Required value: message must be specified if rule contains line breaks",
            "s.x-kubernetes-validations[3].messageExpression: Required value: messageExpression must be non-empty if specified",
        ]
    );
}

#[test]
fn a_valid_rule_set_passes() {
    assert!(msgs(json!({"type": "object", "properties": {"a": {"type": "integer"}},
        "x-kubernetes-validations": [
            {"rule": "self.a > 0", "message": "m", "fieldPath": ".a", "reason": "FieldValueForbidden"},
            {"rule": "self.a == oldSelf.a", "optionalOldSelf": true, "messageExpression": "'a is ' + string(self.a)"}]}))
    .is_empty());
}
