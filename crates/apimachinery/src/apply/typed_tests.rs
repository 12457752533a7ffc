//! Tests for the schema-driven walks: field sets, comparison, merge and removal.

use serde_json::{Value, json};

use super::*;
use crate::patch::test_schemas::{deployment, pod};

fn fields(v: &Value) -> Value {
    to_field_set(&pod(), v, false).unwrap().to_fields_v1()
}

#[test]
fn field_set_uses_keys_for_list_maps_values_for_sets_and_leaves_for_atomics() {
    let got = fields(&json!({
        "metadata": {"labels": {"app": "a"}, "finalizers": ["f"]},
        "spec": {
            "containers": [{"name": "c", "image": "i", "command": ["x"],
                            "ports": [{"containerPort": 80}]}],
            "nodeSelector": {"disk": "ssd"},
            "tags": ["t"]
        }
    }));
    assert_eq!(
        got,
        json!({
            "f:metadata": {"f:labels": {"f:app": {}}, "f:finalizers": {"v:\"f\"": {}}},
            "f:spec": {
                "f:containers": {"k:{\"name\":\"c\"}": {
                    ".": {}, "f:name": {}, "f:image": {}, "f:command": {},
                    "f:ports": {"k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}}}
                }},
                "f:nodeSelector": {},
                "f:tags": {"v:\"t\"": {}}
            }
        })
    );
}

#[test]
fn empty_structs_and_unknown_fields_are_members() {
    let got = fields(&json!({"spec": {"volumes": [{"name": "v", "emptyDir": {}}],
                                       "extra": {"deep": {"x": 1}}}}));
    assert_eq!(
        got,
        json!({"f:spec": {
            "f:volumes": {"k:{\"name\":\"v\"}": {".": {}, "f:name": {}, "f:emptyDir": {}}},
            "f:extra": {".": {}, "f:deep": {".": {}, "f:x": {}}}
        }})
    );
}

#[test]
fn list_items_without_their_key_are_errors_with_the_path() {
    let err = to_field_set(
        &pod(),
        &json!({"spec": {"containers": [{"image": "x"}]}}),
        false,
    )
    .unwrap_err();
    assert_eq!(
        err,
        ".spec.containers: element 0: associative list with keys has an element that omits key field \"name\" (and doesn't have default value)"
    );
    let dup = to_field_set(
        &pod(),
        &json!({"spec": {"containers": [{"name": "a"}, {"name": "a"}]}}),
        false,
    )
    .unwrap_err();
    assert_eq!(
        dup,
        ".spec.containers: duplicate entries for key [name=\"a\"]"
    );
    assert!(
        to_field_set(
            &pod(),
            &json!({"spec": {"containers": [{"name": "a"}, {"name": "a"}]}}),
            true
        )
        .is_ok()
    );
}

#[test]
fn compare_reports_added_modified_and_removed_paths() {
    let old = json!({"spec": {"replicas": 1, "paused": true,
                              "template": {"spec": {"containers": [{"name": "c", "image": "a"}]}}}});
    let new = json!({"spec": {"replicas": 2,
                              "template": {"spec": {"containers": [{"name": "c", "image": "b"}, {"name": "d"}]}}}});
    let c = compare(&deployment(), &old, &new).unwrap();
    assert_eq!(
        c.modified.to_fields_v1(),
        json!({"f:spec": {"f:replicas": {},
        "f:template": {"f:spec": {"f:containers": {"k:{\"name\":\"c\"}": {"f:image": {}}}}}}})
    );
    assert_eq!(
        c.removed.to_fields_v1(),
        json!({"f:spec": {"f:paused": {}}})
    );
    assert_eq!(
        c.added.to_fields_v1(),
        json!({"f:spec": {"f:template": {"f:spec": {"f:containers": {
        "k:{\"name\":\"d\"}": {".": {}, "f:name": {}}}}}}})
    );
}

#[test]
fn compare_marks_a_new_map_itself_as_added() {
    let c = compare(
        &pod(),
        &json!({"metadata": {}}),
        &json!({"metadata": {"labels": {"a": "1"}}}),
    )
    .unwrap();
    assert_eq!(
        c.added.to_fields_v1(),
        json!({"f:metadata": {"f:labels": {".": {}, "f:a": {}}}})
    );
}

#[test]
fn merge_keeps_live_items_and_follows_the_applied_order() {
    let live = json!({"spec": {"containers": [{"name": "a", "image": "1"}, {"name": "x"}, {"name": "b"}]}});
    let cfg = json!({"spec": {"containers": [{"name": "b", "image": "2"}, {"name": "a"}]}});
    let out = merge(&pod(), &live, &cfg).unwrap();
    assert_eq!(
        out["spec"]["containers"],
        json!([{"name": "x"}, {"name": "b", "image": "2"}, {"name": "a", "image": "1"}])
    );
}

#[test]
fn merge_replaces_atomic_lists_and_maps_and_unions_sets() {
    let live = json!({"metadata": {"finalizers": ["a"]},
                      "spec": {"nodeSelector": {"x": "1", "y": "2"}, "tolerations": [{"key": "k"}],
                               "containers": [{"name": "c", "command": ["a", "b"]}]}});
    let cfg = json!({"metadata": {"finalizers": ["b"]},
                     "spec": {"nodeSelector": {"z": "3"}, "tolerations": [],
                              "containers": [{"name": "c", "command": ["z"]}]}});
    let out = merge(&pod(), &live, &cfg).unwrap();
    assert_eq!(out["metadata"]["finalizers"], json!(["a", "b"]));
    assert_eq!(out["spec"]["nodeSelector"], json!({"z": "3"}));
    assert_eq!(out["spec"]["tolerations"], json!([]));
    assert_eq!(out["spec"]["containers"][0]["command"], json!(["z"]));
}

#[test]
fn remove_items_drops_members_and_emptied_parents() {
    let v = json!({"metadata": {"labels": {"a": "1"}},
                   "spec": {"containers": [{"name": "c", "image": "i"}, {"name": "d"}]}});
    let set = FieldSet::from_fields_v1(&json!({
        "f:metadata": {"f:labels": {"f:a": {}}},
        "f:spec": {"f:containers": {"k:{\"name\":\"c\"}": {}}}
    }))
    .unwrap();
    assert_eq!(
        remove_items(&pod(), &v, &set),
        json!({"spec": {"containers": [{"name": "d"}]}})
    );
}

#[test]
fn ensure_named_fields_adds_struct_fields_but_not_map_keys() {
    let set = FieldSet::from_fields_v1(&json!({"f:metadata": {"f:labels": {"f:a": {}}}})).unwrap();
    let got = ensure_named_fields_are_members(&set, &pod()).to_fields_v1();
    assert_eq!(
        got,
        json!({"f:metadata": {".": {}, "f:labels": {".": {}, "f:a": {}}}})
    );
}
