//! Tests for strategic merge patch, one directive or list behaviour each.

use serde_json::{Value, json};

use super::*;
use crate::patch::test_schemas::{deployment, pod};

fn smp(doc: Value, patch: Value) -> Value {
    strategic_merge_patch(&doc, &patch, &pod()).unwrap()
}

#[test]
fn containers_merge_by_name_keeping_live_fields() {
    let out = smp(
        json!({"spec": {"containers": [
            {"name": "a", "image": "a:1", "imagePullPolicy": "Always"},
            {"name": "b", "image": "b:1"}]}}),
        json!({"spec": {"containers": [{"name": "a", "image": "a:2"}]}}),
    );
    assert_eq!(
        out,
        json!({"spec": {"containers": [
            {"name": "a", "image": "a:2", "imagePullPolicy": "Always"},
            {"name": "b", "image": "b:1"}]}})
    );
}

#[test]
fn a_new_list_item_goes_before_server_only_items_without_an_order() {
    let out = smp(
        json!({"spec": {"containers": [{"name": "a"}, {"name": "b"}]}}),
        json!({"spec": {"containers": [{"name": "c", "image": "c"}]}}),
    );
    assert_eq!(
        out["spec"]["containers"],
        json!([{"name": "c", "image": "c"}, {"name": "a"}, {"name": "b"}])
    );
}

#[test]
fn set_element_order_orders_the_merged_list_and_interleaves_server_only_items() {
    let out = smp(
        json!({"spec": {"containers": [
            {"name": "1", "image": "x"}, {"name": "3"}, {"name": "4"}, {"name": "2"}, {"name": "9"}]}}),
        json!({"spec": {
            "$setElementOrder/containers": [{"name": "4"}, {"name": "2"}, {"name": "3"}, {"name": "1"}]}}),
    );
    let names: Vec<&str> = out["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["4", "2", "3", "1", "9"]);
    assert_eq!(out["spec"]["containers"][3]["image"], "x");
}

#[test]
fn set_element_order_places_a_new_scalar_between_live_ones() {
    let out = smp(
        json!({"metadata": {"finalizers": ["a", "b", "d"]}}),
        json!({"metadata": {"$setElementOrder/finalizers": ["a", "b", "c"], "finalizers": ["c"]}}),
    );
    assert_eq!(out["metadata"]["finalizers"], json!(["a", "b", "c", "d"]));
}

#[test]
fn set_element_order_that_contradicts_the_patch_list_is_rejected() {
    let err = strategic_merge_patch(
        &json!({"spec": {"containers": [{"name": "a"}]}}),
        &json!({"spec": {"$setElementOrder/containers": [{"name": "a"}],
                          "containers": [{"name": "b"}]}}),
        &pod(),
    )
    .unwrap_err();
    assert!(
        err.to_string().starts_with("The order in patch list:"),
        "{err}"
    );
}

#[test]
fn finalizers_merge_as_a_set_without_duplicates() {
    let out = smp(
        json!({"metadata": {"finalizers": ["a", "b"]}}),
        json!({"metadata": {"finalizers": ["b", "c"]}}),
    );
    assert_eq!(out["metadata"]["finalizers"], json!(["a", "b", "c"]));
}

#[test]
fn delete_from_primitive_list_removes_the_named_values() {
    let out = smp(
        json!({"metadata": {"finalizers": ["a", "b", "c"]}}),
        json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["b", "z"]}}),
    );
    assert_eq!(out["metadata"]["finalizers"], json!(["a", "c"]));
    let untouched = smp(
        json!({"metadata": {}}),
        json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["b"]}}),
    );
    assert_eq!(untouched, json!({"metadata": {}}));
}

#[test]
fn owner_references_merge_by_uid() {
    let out = smp(
        json!({"metadata": {"ownerReferences": [{"uid": "1", "name": "a"}, {"uid": "2", "name": "b"}]}}),
        json!({"metadata": {"ownerReferences": [{"uid": "2", "controller": true}]}}),
    );
    assert_eq!(
        out["metadata"]["ownerReferences"],
        json!([{"uid": "1", "name": "a"}, {"uid": "2", "name": "b", "controller": true}])
    );
}

#[test]
fn labels_and_annotations_merge_and_null_deletes() {
    let out = smp(
        json!({"metadata": {"labels": {"a": "1", "b": "2"}, "annotations": {"x": "y"}}}),
        json!({"metadata": {"labels": {"a": null, "c": "3"}, "annotations": null}}),
    );
    assert_eq!(out, json!({"metadata": {"labels": {"b": "2", "c": "3"}}}));
}

#[test]
fn lists_without_merge_strategy_are_replaced() {
    let out = smp(
        json!({"spec": {"containers": [{"name": "a", "command": ["x", "y"]}],
                         "tolerations": [{"key": "k"}]}}),
        json!({"spec": {"containers": [{"name": "a", "command": ["z"]}],
                         "tolerations": [{"key": "j"}]}}),
    );
    assert_eq!(out["spec"]["containers"][0]["command"], json!(["z"]));
    assert_eq!(out["spec"]["tolerations"], json!([{"key": "j"}]));
}

#[test]
fn patch_delete_in_a_list_item_removes_it_by_key() {
    let out = smp(
        json!({"spec": {"containers": [{"name": "a"}, {"name": "b"}]}}),
        json!({"spec": {"containers": [{"name": "a", "$patch": "delete"}]}}),
    );
    assert_eq!(out["spec"]["containers"], json!([{"name": "b"}]));
}

#[test]
fn patch_replace_in_a_list_replaces_the_whole_list() {
    let out = smp(
        json!({"spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b"}]}}),
        json!({"spec": {"containers": [{"$patch": "replace"}, {"name": "c"}]}}),
    );
    assert_eq!(out["spec"]["containers"], json!([{"name": "c"}]));
}

#[test]
fn patch_replace_in_a_map_replaces_the_map() {
    let out = smp(
        json!({"metadata": {"labels": {"a": "1", "b": "2"}}}),
        json!({"metadata": {"labels": {"$patch": "replace", "c": "3"}}}),
    );
    assert_eq!(out["metadata"]["labels"], json!({"c": "3"}));
}

#[test]
fn patch_delete_in_a_map_empties_it() {
    let out = smp(
        json!({"metadata": {"labels": {"a": "1"}}}),
        json!({"metadata": {"labels": {"$patch": "delete"}}}),
    );
    assert_eq!(out["metadata"]["labels"], json!({}));
}

#[test]
fn patch_merge_in_a_map_is_the_default_merge() {
    let out = smp(
        json!({"metadata": {"labels": {"a": "1"}}}),
        json!({"metadata": {"labels": {"$patch": "merge", "b": "2"}}}),
    );
    assert_eq!(out["metadata"]["labels"], json!({"a": "1", "b": "2"}));
}

#[test]
fn unknown_patch_directive_is_an_error() {
    let err = strategic_merge_patch(
        &json!({"metadata": {"labels": {}}}),
        &json!({"metadata": {"labels": {"$patch": "frob"}}}),
        &pod(),
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "unknown patch type: frob in map: map[$patch:frob]"
    );
}

#[test]
fn retain_keys_clears_fields_not_listed() {
    let out = smp(
        json!({"spec": {"volumes": [{"name": "v", "emptyDir": {"medium": "Memory"}}]}}),
        json!({"spec": {"volumes": [
            {"name": "v", "$retainKeys": ["hostPath", "name"], "hostPath": {"path": "/x"}}]}}),
    );
    assert_eq!(
        out["spec"]["volumes"],
        json!([{"name": "v", "hostPath": {"path": "/x"}}])
    );
}

#[test]
fn retain_keys_must_list_every_patched_field() {
    let err = strategic_merge_patch(
        &json!({"spec": {"volumes": [{"name": "v"}]}}),
        &json!({"spec": {"volumes": [{"name": "v", "$retainKeys": ["name"], "hostPath": {"path": "/x"}}]}}),
        &pod(),
    )
    .unwrap_err();
    assert_eq!(
        err,
        PatchError::BadRequest("invalid patch format of retainKeys".into())
    );
    assert_eq!(err.to_api_error().code, 400);
}

#[test]
fn list_items_without_the_merge_key_are_rejected() {
    let err = strategic_merge_patch(
        &json!({"spec": {"containers": [{"name": "a"}]}}),
        &json!({"spec": {"containers": [{"image": "x"}]}}),
        &pod(),
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "map: map[image:x] does not contain declared merge key: name"
    );
}

#[test]
fn fields_unknown_to_the_schema_merge_like_merge_patch() {
    let out = smp(
        json!({"spec": {"extra": {"a": 1, "l": [1, 2]}}}),
        json!({"spec": {"extra": {"b": 2, "l": [3], "a": null}}}),
    );
    assert_eq!(out["spec"]["extra"], json!({"b": 2, "l": [3]}));
}

#[test]
fn nested_merge_lists_merge_at_every_level() {
    let out = strategic_merge_patch(
        &json!({"spec": {"template": {"spec": {"containers": [
            {"name": "c", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]}]}}}}),
        &json!({"spec": {"template": {"spec": {"containers": [
            {"name": "c", "env": [{"name": "B", "value": "3"}, {"name": "A", "$patch": "delete"}]}]}}}}),
        &deployment(),
    )
    .unwrap();
    assert_eq!(
        out["spec"]["template"]["spec"]["containers"][0]["env"],
        json!([{"name": "B", "value": "3"}])
    );
}

#[test]
fn new_content_loses_nulls_and_directives() {
    let out = smp(
        json!({}),
        json!({"spec": {"containers": [{"name": "a", "image": null}],
                         "volumes": [{"name": "v", "$retainKeys": ["name"]}]}}),
    );
    assert_eq!(
        out,
        json!({"spec": {"containers": [{"name": "a"}], "volumes": [{"name": "v"}]}})
    );
}

#[test]
fn rollout_restart_patch_adds_a_template_annotation() {
    let out = strategic_merge_patch(
        &json!({"spec": {"replicas": 2, "template": {"metadata": {"labels": {"app": "w"}}}}}),
        &json!({"spec": {"template": {"metadata": {"annotations": {
            "kubectl.kubernetes.io/restartedAt": "2026-01-01T00:00:00Z"}}}}}),
        &deployment(),
    )
    .unwrap();
    assert_eq!(
        out["spec"]["template"]["metadata"],
        json!({"labels": {"app": "w"},
               "annotations": {"kubectl.kubernetes.io/restartedAt": "2026-01-01T00:00:00Z"}})
    );
    assert_eq!(out["spec"]["replicas"], 2);
}

#[test]
fn a_patch_that_is_not_an_object_is_a_bad_request() {
    let err = strategic_merge_patch(&json!({}), &json!([1]), &pod()).unwrap_err();
    assert_eq!(err.to_api_error().code, 400);
}

fn names_after_order(live: &[&str], order: &[&str]) -> Vec<String> {
    let containers: Vec<Value> = live.iter().map(|n| json!({"name": n})).collect();
    let order: Vec<Value> = order.iter().map(|n| json!({"name": n})).collect();
    let out = smp(
        json!({"spec": {"containers": containers}}),
        json!({"spec": {"$setElementOrder/containers": order}}),
    );
    out["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn server_only_items_stay_after_the_live_item_they_followed() {
    assert_eq!(
        names_after_order(&["1", "2", "9", "3", "4"], &["2", "1", "4", "3"]),
        ["2", "1", "9", "4", "3"]
    );
    assert_eq!(
        names_after_order(&["1", "2", "7", "9", "8", "3", "4"], &["2", "1", "4", "3"]),
        ["2", "1", "7", "9", "8", "4", "3"]
    );
}
