//! Object meta validation: paths and upstream messages on create and update, and name
//! generation.

use super::*;
use serde_json::json;

const SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const NAME_PART_MSG: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

fn create(meta: Value, namespaced: bool) -> Vec<String> {
    validate_object_meta(
        &meta,
        namespaced,
        NameRule::DnsSubdomain,
        &Path::new("metadata"),
    )
    .iter()
    .map(FieldError::message)
    .collect()
}

fn update(new: Value, old: Value) -> Vec<String> {
    validate_object_meta_update(&new, &old, &Path::new("metadata"))
        .iter()
        .map(FieldError::message)
        .collect()
}

#[test]
fn a_complete_valid_object_meta_has_no_errors() {
    let meta = json!({
        "name": "web",
        "namespace": "default",
        "generation": 3,
        "labels": {"app": "web", "example.com/tier": ""},
        "annotations": {"Example.com/Note": "anything at all"},
        "finalizers": ["example.com/cleanup", "foregroundDeletion"],
        "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-1", "uid": "u1", "controller": true},
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "c", "uid": "u2", "controller": false}
        ],
        "managedFields": [{"manager": "kubectl", "operation": "Apply", "fieldsType": "FieldsV1"}]
    });
    assert_eq!(create(meta, true), Vec::<String>::new());
}

#[test]
fn names_are_required_and_checked_against_the_rule() {
    assert_eq!(
        create(json!({"namespace": "default"}), true),
        ["metadata.name: Required value: name or generateName is required"]
    );
    assert_eq!(
        create(json!({"name": "Web_1", "namespace": "default"}), true),
        [format!(
            "metadata.name: Invalid value: \"Web_1\": {SUBDOMAIN_MSG}"
        )]
    );
    assert_eq!(
        create(json!({"name": "web-x1b2c", "generateName": "web-"}), false),
        Vec::<String>::new()
    );
    assert_eq!(
        create(json!({"name": "x", "generateName": "Web-"}), false),
        [format!(
            "metadata.generateName: Invalid value: \"Web-\": {SUBDOMAIN_MSG}"
        )]
    );
    let label_rule = validate_object_meta(
        &json!({"name": "a.b"}),
        false,
        NameRule::DnsLabel,
        &Path::new("metadata"),
    );
    assert_eq!(
        label_rule.aggregate_message(),
        "metadata.name: Invalid value: \"a.b\": must not contain dots"
    );
}

#[test]
fn namespace_is_required_exactly_when_namespaced() {
    assert_eq!(
        create(json!({"name": "a"}), true),
        ["metadata.namespace: Required value"]
    );
    assert_eq!(
        create(json!({"name": "a", "namespace": "a.b"}), true),
        ["metadata.namespace: Invalid value: \"a.b\": must not contain dots"]
    );
    assert_eq!(
        create(json!({"name": "a", "namespace": "default"}), false),
        ["metadata.namespace: Forbidden: not allowed on this type"]
    );
}

#[test]
fn generation_labels_and_annotations_are_validated() {
    let big = "x".repeat(TOTAL_ANNOTATION_SIZE_LIMIT);
    let errs = create(
        json!({
            "name": "a",
            "generation": -1,
            "labels": {"a b": "ok", "k": "-v"},
            "annotations": {"A_b/c": "", "Foo": "", "z": big}
        }),
        false,
    );
    assert_eq!(
        errs,
        [
            "metadata.generation: Invalid value: -1: must be greater than or equal to 0".to_string(),
            format!("metadata.labels: Invalid value: \"a b\": {NAME_PART_MSG}"),
            "metadata.labels: Invalid value: \"-v\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')".to_string(),
            format!("metadata.annotations: Invalid value: \"A_b/c\": prefix part {SUBDOMAIN_MSG}"),
            "metadata.annotations: Too long: may not be more than 262144 bytes".to_string(),
        ]
    );
}

#[test]
fn annotations_exactly_at_the_limit_are_accepted() {
    let value = "x".repeat(TOTAL_ANNOTATION_SIZE_LIMIT - 1);
    assert!(create(json!({"name": "a", "annotations": {"k": value}}), false).is_empty());
}

#[test]
fn finalizers_must_be_qualified_and_not_contradict() {
    assert_eq!(
        create(json!({"name": "a", "finalizers": ["bad finalizer"]}), false),
        [format!(
            "metadata.finalizers: Invalid value: \"bad finalizer\": {NAME_PART_MSG}"
        )]
    );
    assert_eq!(
        create(
            json!({"name": "a", "finalizers": ["orphan", "foregroundDeletion"]}),
            false
        ),
        [
            "metadata.finalizers: Invalid value: [\"orphan\",\"foregroundDeletion\"]: finalizer orphan and foregroundDeletion cannot be both set"
        ]
    );
}

#[test]
fn owner_references_need_identity_and_one_controller() {
    assert_eq!(
        create(json!({"name": "a", "ownerReferences": [{}]}), false),
        [
            "metadata.ownerReferences.apiVersion: Invalid value: \"\": version must not be empty",
            "metadata.ownerReferences.kind: Invalid value: \"\": must not be empty",
            "metadata.ownerReferences.name: Invalid value: \"\": must not be empty",
            "metadata.ownerReferences.uid: Invalid value: \"\": must not be empty",
        ]
    );
    assert_eq!(
        create(
            json!({"name": "a", "ownerReferences": [{"apiVersion": "a/b/c", "kind": "K", "name": "n", "uid": "u"}]}),
            false
        ),
        [
            "metadata.ownerReferences.apiVersion: Invalid value: \"a/b/c\": version must not be empty"
        ]
    );
    let two = json!({"name": "a", "ownerReferences": [
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "a", "uid": "1", "controller": true},
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "b", "uid": "2", "controller": true}
    ]});
    let errs = validate_object_meta(&two, false, NameRule::DnsSubdomain, &Path::new("metadata"));
    assert_eq!(errs.len(), 1);
    let e = errs.iter().next().expect("one error");
    assert_eq!(e.field, "metadata.ownerReferences");
    assert_eq!(
        e.detail,
        "Only one reference can have Controller set to true. Found \"true\" in references for ReplicaSet/a and ReplicaSet/b"
    );
    let event = json!({"name": "a", "ownerReferences": [{"apiVersion": "v1", "kind": "Event", "name": "e", "uid": "1"}]});
    let errs = validate_object_meta(
        &event,
        false,
        NameRule::DnsSubdomain,
        &Path::new("metadata"),
    );
    assert_eq!(
        errs.iter().map(|e| e.detail.as_str()).collect::<Vec<_>>(),
        ["/v1, Kind=Event is disallowed from being an owner"]
    );
}

#[test]
fn managed_fields_entries_are_checked() {
    let long = "m".repeat(FIELD_MANAGER_MAX_LENGTH + 1);
    assert_eq!(
        create(
            json!({"name": "a", "managedFields": [
                {"manager": "kube\u{7}ctl", "operation": "Patch", "fieldsType": "FieldsV2"},
                {"manager": long, "operation": "Update", "subresource": "s".repeat(257)}
            ]}),
            false
        ),
        [
            "metadata.managedFields[0].operation: Invalid value: \"Patch\": must be `Apply` or `Update`",
            "metadata.managedFields[0].fieldsType: Invalid value: \"FieldsV2\": must be `FieldsV1`",
            "metadata.managedFields[0].manager: Invalid value: \"kube\\actl\": invalid character U+0007 (at position 4)",
            "metadata.managedFields[1].manager: Too long: may not be more than 128 bytes",
            "metadata.managedFields[1].subresource: Too long: may not be more than 256 bytes",
        ]
    );
}

#[test]
fn wrong_json_types_are_reported_not_trusted() {
    let errs = create(
        json!({"name": 5, "labels": [], "ownerReferences": {}, "finalizers": [1], "generation": "x"}),
        false,
    );
    assert_eq!(errs.len(), 6, "{errs:?}");
    assert!(
        errs.iter()
            .any(|e| e.starts_with("metadata.name: Invalid value: 5: must be of type string"))
    );
    assert_eq!(create(json!("meta"), false).len(), 1);
}

#[test]
fn updates_keep_identity_fields_immutable() {
    let old = json!({
        "name": "a", "namespace": "ns", "uid": "u1", "resourceVersion": "5", "generation": 2,
        "creationTimestamp": "2026-01-01T00:00:00Z"
    });
    assert!(update(old.clone(), old.clone()).is_empty());
    let new = json!({
        "name": "b", "namespace": "ns2", "uid": "u2", "generation": 1,
        "creationTimestamp": "2026-01-02T00:00:00Z", "deletionGracePeriodSeconds": 30
    });
    assert_eq!(
        update(new, old),
        [
            "metadata.resourceVersion: Invalid value: \"\": must be specified for an update",
            "metadata.generation: Invalid value: 1: must not be decremented",
            "metadata.name: Invalid value: \"b\": field is immutable",
            "metadata.namespace: Invalid value: \"ns2\": field is immutable",
            "metadata.uid: Invalid value: \"u2\": field is immutable",
            "metadata.creationTimestamp: Invalid value: \"2026-01-02T00:00:00Z\": field is immutable",
            "metadata.deletionGracePeriodSeconds: Invalid value: 30: field is immutable",
        ]
    );
}

#[test]
fn no_finalizer_may_be_added_once_deletion_started() {
    let old = json!({"name": "a", "resourceVersion": "1", "deletionTimestamp": "2026-01-01T00:00:00Z", "finalizers": ["a"]});
    let mut new = old.clone();
    new["finalizers"] = json!(["a", "c", "b"]);
    assert_eq!(
        update(new, old.clone()),
        [
            "metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{\"b\", \"c\"}"
        ]
    );
    let mut removed = old.clone();
    removed["finalizers"] = json!([]);
    assert!(update(removed, old).is_empty());
}

#[test]
fn generated_suffixes_use_the_upstream_alphabet_without_bias() {
    let mut bytes = [250u8, 0, 1, 26, 243, 27, 4].into_iter();
    let suffix = generate_name_suffix(|| bytes.next().unwrap_or(0));
    // 250 and 243 are past 9 * 27 = 243 and are redrawn; 27 wraps to 'b'.
    assert_eq!(suffix, "bc9bg");
    let mut n = 0u8;
    let s = generate_name_suffix(|| {
        n = n.wrapping_add(37);
        n
    });
    assert_eq!(s.len(), NAME_SUFFIX_LENGTH);
    assert!(s.bytes().all(|b| NAME_SUFFIX_ALPHABET.contains(&b)));
}

#[test]
fn generated_names_cut_long_prefixes_to_fit_a_label() {
    let name = generate_name(&"a".repeat(80), || 0);
    assert_eq!(name.len(), 63);
    assert_eq!(name, format!("{}bbbbb", "a".repeat(58)));
    assert_eq!(generate_name("web-", || 3), "web-fffff");
    assert_eq!(generate_name(&"é".repeat(40), || 0).len(), 58 + 5);
}
