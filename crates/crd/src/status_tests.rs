//! Accepted names, conditions and stored versions.

use super::*;

const NOW: &str = "2026-01-01T00:00:00Z";
const LATER: &str = "2026-01-02T00:00:00Z";

fn widget() -> Value {
    json!({"metadata": {"name": "widgets.example.com"},
           "spec": {"group": "example.com", "scope": "Namespaced",
                    "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList",
                              "shortNames": ["wd"], "categories": ["all"]},
                    "versions": [{"name": "v1", "served": true, "storage": true}]}})
}

fn cond<'a>(status: &'a Value, t: &str) -> &'a Value {
    status["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == t)
        .unwrap()
}

#[test]
fn fresh_names_are_accepted_and_the_crd_is_established_at_once() {
    let status = established_status_at(&widget(), &|_, _| false, NOW);
    assert_eq!(
        status["acceptedNames"],
        json!({"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList",
               "shortNames": ["wd"], "categories": ["all"]})
    );
    assert_eq!(
        cond(&status, "NamesAccepted"),
        &json!({"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
                "message": "no conflicts found", "lastTransitionTime": NOW})
    );
    assert_eq!(
        cond(&status, "Established"),
        &json!({"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
                "message": "the initial names have been accepted", "lastTransitionTime": NOW})
    );
    assert_eq!(status["storedVersions"], json!(["v1"]));
}

#[test]
fn a_plural_in_use_is_refused() {
    let status = established_status_at(&widget(), &|name, _| name == "widgets", NOW);
    let c = cond(&status, "NamesAccepted");
    assert_eq!(c["status"], "False");
    assert_eq!(c["reason"], "PluralConflict");
    assert_eq!(c["message"], "\"widgets\" is already in use");
    assert_eq!(cond(&status, "Established")["reason"], "NotAccepted");
    assert!(
        status["acceptedNames"].get("plural").is_none(),
        "the conflicting name is not accepted"
    );
    assert_eq!(status["acceptedNames"]["kind"], "Widget");
}

#[test]
fn kind_short_name_and_list_kind_conflicts_have_their_reasons() {
    let kind = established_status_at(&widget(), &|_, k| k == "Widget", NOW);
    assert_eq!(cond(&kind, "NamesAccepted")["reason"], "KindConflict");
    let list = established_status_at(&widget(), &|_, k| k == "WidgetList", NOW);
    assert_eq!(cond(&list, "NamesAccepted")["reason"], "ListKindConflict");
    let short = established_status_at(&widget(), &|n, _| n == "wd", NOW);
    assert_eq!(
        cond(&short, "NamesAccepted")["reason"],
        "ShortNamesConflict"
    );
    assert_eq!(
        cond(&short, "NamesAccepted")["message"],
        "\"wd\" is already in use"
    );
}

#[test]
fn accepted_names_may_be_kept_even_if_others_use_them_later() {
    let mut crd = widget();
    crd["status"] = established_status_at(&crd, &|_, _| false, NOW);
    let again = established_status_at(&crd, &|_, _| true, LATER);
    assert_eq!(
        cond(&again, "NamesAccepted")["status"],
        "True",
        "own names are not conflicts"
    );
    assert_eq!(
        cond(&again, "Established")["lastTransitionTime"],
        NOW,
        "unchanged status keeps its time"
    );
}

#[test]
fn stored_versions_accumulate_storage_versions() {
    let mut crd = widget();
    crd["status"] = json!({"storedVersions": ["v1"]});
    crd["spec"]["versions"] = json!([{"name": "v1", "served": true, "storage": false},
                                     {"name": "v2", "served": true, "storage": true}]);
    let status = established_status_at(&crd, &|_, _| false, NOW);
    assert_eq!(status["storedVersions"], json!(["v1", "v2"]));
}

#[test]
fn names_in_group_sees_other_crds_and_built_ins() {
    let mut other = widget();
    other["metadata"]["name"] = json!("gadgets.example.com");
    other["status"] = json!({"acceptedNames": {"plural": "gadgets", "kind": "Gadget", "listKind": "GadgetList", "shortNames": ["gd"]}});
    let crds = vec![other, widget()];
    let used = names_in_group(&crds, "example.com", "widgets.example.com");
    assert!(used("gadgets", "") && used("gd", "") && used("", "GadgetList"));
    assert!(!used("widgets", "") && !used("", "Widget"));
    let apps = names_in_group(&crds, "apps", "");
    assert!(apps("deployments", "") && apps("deploy", "") && apps("", "Deployment"));
}

#[test]
fn deletion_marks_and_then_releases_the_crd() {
    let mut crd = widget();
    mark_terminating(&mut crd, NOW);
    assert_eq!(crd["metadata"]["finalizers"], json!([CLEANUP_FINALIZER]));
    set_terminating(
        &mut crd,
        "False",
        "InstanceDeletionCompleted",
        "removed all instances",
        LATER,
    );
    let t = &crd["status"]["conditions"][0];
    assert_eq!(
        (t["type"].as_str(), t["reason"].as_str()),
        (Some(TERMINATING), Some("InstanceDeletionCompleted"))
    );
    assert!(remove_cleanup_finalizer(&mut crd));
    assert_eq!(crd["metadata"]["finalizers"], json!([]));
}
