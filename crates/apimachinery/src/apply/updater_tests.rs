//! Scenario tests for server-side apply and managed-fields tracking of ordinary writes.

use serde_json::{Value, json};

use super::*;
use crate::apply::managed::Operation;
use crate::patch::test_schemas::deployment;

const T1: &str = "2026-11-30T10:00:00Z";
const T2: &str = "2026-11-30T11:00:00Z";

fn cfg(replicas: i64, labels: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
           "metadata": {"name": "web", "namespace": "default", "labels": labels},
           "spec": {"replicas": replicas,
                    "template": {"spec": {"containers": [{"name": "c", "image": "nginx"}]}}}})
}

fn managed_of(obj: Option<&Value>) -> Vec<ManagedFieldsEntry> {
    obj.map(|o| ManagedFieldsEntry::list_from_object(o).unwrap())
        .unwrap_or_default()
}

fn apply_at(
    live: Option<&Value>,
    config: &Value,
    manager: &str,
    force: bool,
    now: &str,
) -> Result<Value, ApplyError> {
    apply(
        live,
        config,
        &deployment(),
        &managed_of(live),
        manager,
        "apps/v1",
        None,
        force,
        now,
        &reset_fields(true, None),
    )
    .map(|(obj, entries)| {
        assert_eq!(ManagedFieldsEntry::list_from_object(&obj).unwrap(), entries);
        obj
    })
}

fn apply_as(
    live: Option<&Value>,
    config: &Value,
    manager: &str,
    force: bool,
) -> Result<Value, ApplyError> {
    apply_at(live, config, manager, force, T1)
}

fn update_as(old: Option<&Value>, new: &Value, manager: &str) -> Value {
    let entries = update_managed_fields(
        old,
        new,
        &deployment(),
        &managed_of(old),
        manager,
        "apps/v1",
        None,
        T2,
        &reset_fields(true, None),
    );
    let mut obj = new.clone();
    set_object_managed_fields(&mut obj, &entries);
    obj
}

fn entry(obj: &Value, manager: &str) -> Option<ManagedFieldsEntry> {
    managed_of(Some(obj))
        .into_iter()
        .find(|e| e.manager == manager)
}

fn owned(obj: &Value, manager: &str) -> Value {
    entry(obj, manager)
        .and_then(|e| e.fields_v1)
        .unwrap_or(Value::Null)
}

fn without_managed(obj: &Value) -> Value {
    let mut o = obj.clone();
    o["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("managedFields");
    o
}

#[test]
fn apply_creates_the_object_and_records_one_apply_entry() {
    let c = cfg(1, json!({"app": "web"}));
    let obj = apply_as(None, &c, "kubectl", false).unwrap();
    assert_eq!(without_managed(&obj), c);
    let e = entry(&obj, "kubectl").unwrap();
    assert_eq!(e.operation, Operation::Apply);
    assert_eq!(e.api_version, "apps/v1");
    assert_eq!(e.time.as_deref(), Some(T1));
    assert_eq!(e.fields_type, "FieldsV1");
    assert_eq!(
        e.fields_v1.unwrap(),
        json!({"f:metadata": {"f:labels": {"f:app": {}}},
               "f:spec": {"f:replicas": {}, "f:template": {"f:spec": {"f:containers": {
                   "k:{\"name\":\"c\"}": {".": {}, "f:image": {}, "f:name": {}}}}}}})
    );
}

#[test]
fn reapplying_a_change_updates_the_field_and_the_time() {
    let obj = apply_as(None, &cfg(1, json!({"app": "web"})), "kubectl", false).unwrap();
    let obj = apply_at(
        Some(&obj),
        &cfg(3, json!({"app": "web"})),
        "kubectl",
        false,
        T2,
    )
    .unwrap();
    assert_eq!(obj["spec"]["replicas"], 3);
    assert_eq!(managed_of(Some(&obj)).len(), 1);
    assert_eq!(entry(&obj, "kubectl").unwrap().time.as_deref(), Some(T2));
}

#[test]
fn a_no_op_apply_keeps_the_live_object_and_its_time() {
    let obj = apply_as(None, &cfg(1, json!({"app": "web"})), "kubectl", false).unwrap();
    let again = apply_at(
        Some(&obj),
        &cfg(1, json!({"app": "web"})),
        "kubectl",
        false,
        T2,
    )
    .unwrap();
    assert_eq!(again, obj);
}

#[test]
fn fields_the_applier_stops_applying_are_removed() {
    let obj = apply_as(
        None,
        &cfg(1, json!({"app": "web", "tier": "fe"})),
        "kubectl",
        false,
    )
    .unwrap();
    let obj = apply_as(Some(&obj), &cfg(1, json!({"app": "web"})), "kubectl", false).unwrap();
    assert_eq!(obj["metadata"]["labels"], json!({"app": "web"}));
    assert_eq!(
        owned(&obj, "kubectl")["f:metadata"],
        json!({"f:labels": {"f:app": {}}})
    );
}

#[test]
fn a_dropped_field_another_manager_owns_stays() {
    let obj = apply_as(
        None,
        &cfg(1, json!({"app": "web", "tier": "fe"})),
        "a",
        false,
    )
    .unwrap();
    let obj = apply_as(Some(&obj), &cfg(1, json!({"tier": "fe"})), "b", false).unwrap();
    let obj = apply_as(Some(&obj), &cfg(1, json!({"app": "web"})), "a", false).unwrap();
    assert_eq!(
        obj["metadata"]["labels"],
        json!({"app": "web", "tier": "fe"})
    );
    assert_eq!(
        owned(&obj, "b")["f:metadata"],
        json!({"f:labels": {"f:tier": {}}})
    );
}

#[test]
fn equal_values_are_shared_ownership_not_a_conflict() {
    let obj = apply_as(None, &cfg(2, json!({"app": "web"})), "a", false).unwrap();
    let obj = apply_as(Some(&obj), &cfg(2, json!({"app": "web"})), "b", false).unwrap();
    assert_eq!(owned(&obj, "a")["f:spec"]["f:replicas"], json!({}));
    assert_eq!(owned(&obj, "b")["f:spec"]["f:replicas"], json!({}));
}

#[test]
fn a_different_value_owned_by_an_updater_conflicts_with_upstream_wording() {
    let created = update_as(
        None,
        &cfg(1, json!({"app": "web"})),
        "kubectl-client-side-apply",
    );
    let err = apply_as(Some(&created), &cfg(2, json!({"app": "web"})), "ssa", false).unwrap_err();
    let ApplyError::Conflict(c) = &err else {
        panic!("expected a conflict, got {err:?}");
    };
    assert_eq!(
        c.message(),
        "Apply failed with 1 conflict: conflict with \"kubectl-client-side-apply\" using apps/v1: .spec.replicas"
    );
    let status = err.to_api_error().to_status();
    assert_eq!(status["code"], 409);
    assert_eq!(status["reason"], "Conflict");
    assert_eq!(
        status["details"]["causes"],
        json!([{"reason": "FieldManagerConflict",
                "message": "conflict with \"kubectl-client-side-apply\" using apps/v1",
                "field": ".spec.replicas"}])
    );
}

#[test]
fn several_conflicts_are_listed_per_manager() {
    let created = update_as(None, &cfg(1, json!({"app": "web"})), "a-updater");
    let mut changed = created.clone();
    changed["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx:2");
    let changed = update_as(Some(&created), &changed, "b-updater");
    let mut intent = cfg(5, json!({"app": "other"}));
    intent["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx:3");
    let err = apply_as(Some(&changed), &intent, "ssa", false).unwrap_err();
    assert_eq!(
        err.to_string(),
        "Apply failed with 3 conflicts: conflicts with \"a-updater\" using apps/v1:\n\
         - .metadata.labels.app\n\
         - .spec.replicas\n\
         conflicts with \"b-updater\" using apps/v1:\n\
         - .spec.template.spec.containers[name=\"c\"].image"
    );
    assert_eq!(err.to_api_error().causes.len(), 3);
}

#[test]
fn force_takes_ownership_from_the_other_manager() {
    let created = update_as(
        None,
        &cfg(1, json!({"app": "web"})),
        "kubectl-client-side-apply",
    );
    let obj = apply_as(Some(&created), &cfg(2, json!({"app": "web"})), "ssa", true).unwrap();
    assert_eq!(obj["spec"]["replicas"], 2);
    assert_eq!(owned(&obj, "ssa")["f:spec"]["f:replicas"], json!({}));
    assert!(
        owned(&obj, "kubectl-client-side-apply")["f:spec"]
            .get("f:replicas")
            .is_none()
    );
    assert!(
        owned(&obj, "kubectl-client-side-apply")["f:metadata"]["f:labels"]
            .get("f:app")
            .is_some()
    );
}

#[test]
fn kubectl_takes_over_client_side_apply_fields_that_match_the_last_applied_configuration() {
    let mut first = cfg(1, json!({"app": "web"}));
    let last = format!("{}\n", serde_json::to_string(&first).unwrap());
    first["metadata"]["annotations"] = json!({LAST_APPLIED_ANNOTATION: last});
    let created = update_as(None, &first, "kubectl-client-side-apply");

    // The user edits replicas in the file and switches to server-side apply: no conflict.
    let obj = apply_as(
        Some(&created),
        &cfg(4, json!({"app": "web"})),
        "kubectl",
        false,
    )
    .unwrap();
    assert_eq!(obj["spec"]["replicas"], 4);
    let annotation = obj["metadata"]["annotations"][LAST_APPLIED_ANNOTATION]
        .as_str()
        .unwrap();
    assert!(annotation.ends_with('\n'));
    assert_eq!(
        serde_json::from_str::<Value>(annotation).unwrap(),
        cfg(4, json!({"app": "web"}))
    );

    // Another writer changes replicas; kubectl's next apply now conflicts with it...
    let mut scaled = obj.clone();
    scaled["spec"]["replicas"] = json!(7);
    let scaled = update_as(Some(&obj), &scaled, "kube-controller-manager");
    let err = apply_as(
        Some(&scaled),
        &cfg(5, json!({"app": "web"})),
        "kubectl",
        false,
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "Apply failed with 1 conflict: conflict with \"kube-controller-manager\" using apps/v1: .spec.replicas"
    );
    // ...unless forced.
    let forced = apply_as(
        Some(&scaled),
        &cfg(5, json!({"app": "web"})),
        "kubectl",
        true,
    )
    .unwrap();
    assert_eq!(forced["spec"]["replicas"], 5);
    assert!(entry(&forced, "kube-controller-manager").is_none());
}

#[test]
fn a_manager_other_than_kubectl_gets_no_last_applied_pass() {
    let mut first = cfg(1, json!({"app": "web"}));
    let last = format!("{}\n", serde_json::to_string(&first).unwrap());
    first["metadata"]["annotations"] = json!({LAST_APPLIED_ANNOTATION: last});
    let created = update_as(None, &first, "kubectl-client-side-apply");
    let err = apply_as(
        Some(&created),
        &cfg(4, json!({"app": "web"})),
        "helm",
        false,
    )
    .unwrap_err();
    assert!(matches!(err, ApplyError::Conflict(_)));
}

#[test]
fn an_update_on_create_owns_every_field_it_set_except_server_owned_ones() {
    let mut obj = cfg(1, json!({"app": "web"}));
    obj["metadata"]["uid"] = json!("u-1");
    obj["metadata"]["resourceVersion"] = json!("5");
    obj["metadata"]["creationTimestamp"] = json!(T1);
    obj["metadata"]["generation"] = json!(1);
    obj["status"] = json!({"replicas": 0});
    let created = update_as(None, &obj, "kubectl-create");
    let e = entry(&created, "kubectl-create").unwrap();
    assert_eq!(e.operation, Operation::Update);
    assert_eq!(e.time.as_deref(), Some(T2));
    assert_eq!(
        e.fields_v1.unwrap(),
        json!({"f:metadata": {"f:labels": {".": {}, "f:app": {}}},
               "f:spec": {"f:replicas": {}, "f:template": {"f:spec": {"f:containers": {
                   "k:{\"name\":\"c\"}": {".": {}, "f:image": {}, "f:name": {}}}}}}})
    );
}

#[test]
fn an_update_moves_ownership_of_changed_fields_to_the_writer() {
    let created = update_as(None, &cfg(1, json!({"app": "web"})), "creator");
    let mut scaled = created.clone();
    scaled["spec"]["replicas"] = json!(3);
    let scaled = update_as(Some(&created), &scaled, "scaler");
    assert_eq!(
        owned(&scaled, "scaler"),
        json!({"f:spec": {"f:replicas": {}}})
    );
    assert!(
        owned(&scaled, "creator")["f:spec"]
            .get("f:replicas")
            .is_none()
    );
    assert_eq!(
        owned(&scaled, "creator")["f:metadata"],
        json!({"f:labels": {".": {}, "f:app": {}}})
    );
    // The same writer again keeps one entry holding both changes.
    let mut relabeled = scaled.clone();
    relabeled["metadata"]["labels"]["tier"] = json!("fe");
    let relabeled = update_as(Some(&scaled), &relabeled, "scaler");
    assert_eq!(
        owned(&relabeled, "scaler"),
        json!({"f:metadata": {"f:labels": {"f:tier": {}}}, "f:spec": {"f:replicas": {}}})
    );
    assert_eq!(managed_of(Some(&relabeled)).len(), 2);
}

#[test]
fn an_update_that_removes_a_field_takes_it_from_its_owner() {
    let created = update_as(
        None,
        &cfg(1, json!({"app": "web", "tier": "fe"})),
        "creator",
    );
    let mut changed = created.clone();
    changed["metadata"]["labels"]
        .as_object_mut()
        .unwrap()
        .remove("tier");
    let changed = update_as(Some(&created), &changed, "editor");
    assert_eq!(
        owned(&changed, "creator")["f:metadata"],
        json!({"f:labels": {".": {}, "f:app": {}}})
    );
    assert!(entry(&changed, "editor").is_none(), "removing owns nothing");
}

#[test]
fn an_existing_object_without_managed_fields_stays_untracked() {
    let live = cfg(1, json!({"app": "web"}));
    let entries = update_managed_fields(
        Some(&live),
        &cfg(2, json!({"app": "web"})),
        &deployment(),
        &[],
        "m",
        "apps/v1",
        None,
        T1,
        &FieldSet::new(),
    );
    assert!(entries.is_empty());
}

#[test]
fn status_writes_record_the_subresource_and_ignore_spec() {
    let created = update_as(None, &cfg(1, json!({"app": "web"})), "creator");
    let mut new = created.clone();
    new["status"] = json!({"readyReplicas": 1});
    new["spec"]["replicas"] = json!(9);
    let entries = update_managed_fields(
        Some(&created),
        &new,
        &deployment(),
        &managed_of(Some(&created)),
        "kubelet",
        "apps/v1",
        Some("status"),
        T2,
        &reset_fields(true, Some("status")),
    );
    let e = entries.iter().find(|e| e.manager == "kubelet").unwrap();
    assert_eq!(e.subresource, "status");
    assert_eq!(
        e.fields_v1,
        Some(json!({"f:status": {".": {}, "f:readyReplicas": {}}}))
    );
    let creator = entries.iter().find(|e| e.manager == "creator").unwrap();
    assert!(
        creator.fields_v1.as_ref().unwrap()["f:spec"]
            .get("f:replicas")
            .is_some()
    );
}

#[test]
fn apply_to_the_main_resource_does_not_own_status() {
    let mut c = cfg(1, json!({"app": "web"}));
    c["status"] = json!({"replicas": 3});
    let obj = apply_as(None, &c, "kubectl", false).unwrap();
    assert!(owned(&obj, "kubectl").get("f:status").is_none());
}

#[test]
fn sets_merge_across_appliers_and_prune_per_applier() {
    let schema = crate::patch::test_schemas::pod();
    let pod = |tags: Value| {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                                    "spec": {"tags": tags}})
    };
    let run = |live: Option<&Value>, c: &Value, m: &str| {
        apply(
            live,
            c,
            &schema,
            &managed_of(live),
            m,
            "v1",
            None,
            false,
            T1,
            &FieldSet::new(),
        )
        .unwrap()
        .0
    };
    let obj = run(None, &pod(json!(["a", "x"])), "a");
    let obj = run(Some(&obj), &pod(json!(["b"])), "b");
    assert_eq!(obj["spec"]["tags"], json!(["a", "x", "b"]));
    let obj = run(Some(&obj), &pod(json!(["x"])), "a");
    assert_eq!(obj["spec"]["tags"], json!(["x", "b"]));
    assert_eq!(owned(&obj, "b")["f:spec"]["f:tags"], json!({"v:\"b\"": {}}));
}

#[test]
fn apply_rejects_managed_fields_and_other_versions_in_the_configuration() {
    let mut c = cfg(1, json!({}));
    c["metadata"]["managedFields"] = json!([]);
    let err = apply_as(None, &c, "m", false).unwrap_err();
    assert_eq!(
        err,
        ApplyError::BadRequest("metadata.managedFields must be nil".into())
    );
    let mut c = cfg(1, json!({}));
    c["apiVersion"] = json!("apps/v1beta1");
    let err = apply_as(None, &c, "m", false).unwrap_err();
    assert_eq!(
        err.to_string(),
        "Incorrect version specified in apply patch. Specified patch version: apps/v1beta1, expected: apps/v1"
    );
    assert_eq!(err.to_api_error().code, 400);
}

#[test]
fn apply_rejects_list_items_without_keys() {
    let mut c = cfg(1, json!({}));
    c["spec"]["template"]["spec"]["containers"] = json!([{"image": "x"}]);
    let err = apply_as(None, &c, "m", false).unwrap_err();
    assert!(matches!(err, ApplyError::BadRequest(_)));
    assert!(
        err.to_string().contains("omits key field \"name\""),
        "{err}"
    );
    assert_eq!(err.to_api_error().code, 400);
}

#[test]
fn entries_sort_apply_first_then_by_time() {
    let created = update_as(None, &cfg(1, json!({"app": "web"})), "zz-updater");
    let obj = apply_as(
        Some(&created),
        &cfg(1, json!({"app": "web", "x": "y"})),
        "kubectl",
        false,
    )
    .unwrap();
    let names: Vec<String> = managed_of(Some(&obj))
        .into_iter()
        .map(|e| e.manager)
        .collect();
    assert_eq!(names, ["kubectl", "zz-updater"]);
}

#[test]
fn the_first_apply_to_an_untracked_object_credits_its_fields_to_before_first_apply() {
    let live = cfg(1, json!({"app": "web"}));
    let err = apply_as(Some(&live), &cfg(2, json!({"app": "web"})), "ssa", false).unwrap_err();
    assert_eq!(
        err.to_string(),
        "Apply failed with 1 conflict: conflict with \"before-first-apply\" using apps/v1: .spec.replicas"
    );
    let obj = apply_as(
        Some(&live),
        &cfg(1, json!({"app": "web", "x": "y"})),
        "ssa",
        false,
    )
    .unwrap();
    let names: Vec<String> = managed_of(Some(&obj))
        .into_iter()
        .map(|e| e.manager)
        .collect();
    assert_eq!(names, ["ssa", BEFORE_FIRST_APPLY]);
}

#[test]
fn a_conflict_with_another_applier_names_it_without_a_version() {
    let obj = apply_as(None, &cfg(1, json!({"app": "web"})), "a", false).unwrap();
    let err = apply_as(Some(&obj), &cfg(2, json!({"app": "web"})), "b", false).unwrap_err();
    assert_eq!(
        err.to_string(),
        "Apply failed with 1 conflict: conflict with \"a\": .spec.replicas"
    );
}

#[test]
fn a_custom_resource_created_by_an_update_owns_its_spec_as_a_whole() {
    let cr = json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab",
                    "metadata": {"name": "c", "annotations": {"a": "b"}},
                    "spec": {"cronSpec": "* * * * *", "image": "img"}});
    let entries = update_managed_fields(
        None,
        &cr,
        &crate::patch::test_schemas::custom_resource(),
        &[],
        "kubectl-create",
        "stable.example.com/v1",
        None,
        T1,
        &FieldSet::new(),
    );
    assert_eq!(
        entries[0].fields_v1,
        Some(
            json!({"f:metadata": {"f:annotations": {".": {}, "f:a": {}}},
                    "f:spec": {".": {}, "f:cronSpec": {}, "f:image": {}}})
        )
    );
}
