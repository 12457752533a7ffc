//! What an update may change in a pod's spec (upstream `ValidatePodUpdate`): container
//! images, a shrinking `activeDeadlineSeconds`, added tolerations, removed scheduling gates —
//! and, here, the node name while it is unset, because `pods/binding` is served through the
//! main resource.
//!
//! Everything else is refused with upstream's `pod updates may not change fields other than
//! ...` message followed by a diff. Upstream prints a `cmp.Diff` of the internal Go types;
//! this prints the changed top-level fields as JSON in the same `-`/`+` shape.

use apimachinery::field::{ErrorList, FieldError, Path};
use serde_json::{Map, Value, json};

use crate::builtins::gofmt;
use crate::builtins::util::{arr_at, i64_at, str_at};

/// Upstream `updatablePodSpecFields`, joined as its message joins them.
pub(crate) const UPDATABLE_FIELDS: &str = "`spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";

/// Upstream `ValidatePodUpdate`, the spec part.
pub(crate) fn validate_pod_update(errs: &mut ErrorList, new: &Value, old: &Value) {
    let sp = Path::new("spec");
    for list in ["containers", "initContainers"] {
        let n = arr_at(new, &format!("/{list}"));
        let o = arr_at(old, &format!("/{list}"));
        if n.len() != o.len() {
            errs.push(FieldError::forbidden(
                sp.child(list),
                "pod updates may not add or remove containers",
            ));
            return;
        }
        for (i, c) in n.iter().enumerate() {
            let image = str_at(c, "/image");
            if image.is_empty() {
                errs.push(FieldError::required(
                    sp.child(list).index(i).child("image"),
                    "",
                ));
            }
        }
    }
    let ads = sp.child("activeDeadlineSeconds");
    match (
        i64_at(new, "/activeDeadlineSeconds"),
        i64_at(old, "/activeDeadlineSeconds"),
    ) {
        (Some(n), _) if !(0..=i64::from(i32::MAX)).contains(&n) => {
            errs.push(FieldError::invalid(
                &ads,
                json!(n),
                crate::builtins::util::range_error(0, i64::from(i32::MAX)),
            ));
            return;
        }
        (Some(n), Some(o)) if o < n => {
            errs.push(FieldError::invalid(
                &ads,
                json!(n),
                "must be less than or equal to previous value",
            ));
            return;
        }
        (None, Some(_)) => errs.push(FieldError::invalid(
            &ads,
            json!("null"),
            "must not update from a positive integer to nil value",
        )),
        _ => {}
    }
    only_added_tolerations(errs, new, old, &sp.child("tolerations"));
    only_deleted_gates(errs, new, old, &sp.child("schedulingGates"));
    if new == old {
        return;
    }
    let munged = munge(new, old);
    if munged != *old {
        errs.push(FieldError::forbidden(
            &sp,
            format!(
                "pod updates may not change fields other than {UPDATABLE_FIELDS}\n{}",
                gofmt::struct_diff("core.PodSpec", old, &munged)
            ),
        ));
    }
}

/// The new spec with every field an update may change set back to the old value.
fn munge(new: &Value, old: &Value) -> Value {
    let mut m = new.clone();
    for list in ["containers", "initContainers"] {
        if let Some(cs) = m.get_mut(list).and_then(Value::as_array_mut) {
            for (i, c) in cs.iter_mut().enumerate() {
                if let (Some(obj), Some(img)) = (
                    c.as_object_mut(),
                    old.pointer(&format!("/{list}/{i}/image")),
                ) {
                    obj.insert("image".into(), img.clone());
                }
            }
        }
    }
    let Some(map) = m.as_object_mut() else {
        return m;
    };
    for field in ["activeDeadlineSeconds", "schedulingGates", "tolerations"] {
        restore(map, old, field);
    }
    // `pods/binding` sets the node of an unscheduled pod through an update.
    if str_at(old, "/nodeName").is_empty() {
        restore(map, old, "nodeName");
    }
    let old_grace = i64_at(old, "/terminationGracePeriodSeconds");
    if old_grace.is_some_and(|g| g < 0) && i64_at(new, "/terminationGracePeriodSeconds") == Some(1)
    {
        restore(map, old, "terminationGracePeriodSeconds");
    }
    m
}

fn restore(map: &mut Map<String, Value>, old: &Value, field: &str) {
    match old.get(field) {
        Some(v) => {
            map.insert(field.into(), v.clone());
        }
        None => {
            map.remove(field);
        }
    }
}

/// Upstream `validateOnlyAddedTolerations` (existing tolerations may only change their
/// `tolerationSeconds`).
fn only_added_tolerations(errs: &mut ErrorList, new: &Value, old: &Value, p: &Path) {
    let strip = |t: &Value| {
        let mut t = t.clone();
        if let Some(m) = t.as_object_mut() {
            m.remove("tolerationSeconds");
        }
        t
    };
    let new_list: Vec<Value> = arr_at(new, "/tolerations").iter().map(strip).collect();
    for o in arr_at(old, "/tolerations") {
        if !new_list.contains(&strip(o)) {
            errs.push(FieldError::forbidden(
                p,
                "existing toleration can not be modified except its tolerationSeconds",
            ));
            return;
        }
    }
}

/// Upstream `validateOnlyDeletedSchedulingGates`.
fn only_deleted_gates(errs: &mut ErrorList, new: &Value, old: &Value, p: &Path) {
    let old_names: Vec<&str> = arr_at(old, "/schedulingGates")
        .iter()
        .map(|g| str_at(g, "/name"))
        .collect();
    for (i, g) in arr_at(new, "/schedulingGates").iter().enumerate() {
        let name = str_at(g, "/name");
        if !old_names.contains(&name) {
            errs.push(FieldError::forbidden(
                p.index(i).child("name"),
                format!("only deletion is allowed, but found new scheduling gate '{name}'"),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> Value {
        json!({
            "containers": [{"name": "c", "image": "nginx:1"}],
            "dnsPolicy": "ClusterFirst",
            "tolerations": [{"key": "a", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}],
        })
    }

    fn messages(new: &Value, old: &Value) -> Vec<String> {
        let mut errs = ErrorList::new();
        validate_pod_update(&mut errs, new, old);
        errs.iter().map(FieldError::message).collect()
    }

    #[test]
    fn images_tolerations_and_binding_may_change() {
        let old = spec();
        let mut new = spec();
        new["containers"][0]["image"] = json!("nginx:2");
        new["tolerations"][0]["tolerationSeconds"] = json!(60);
        if let Some(t) = new["tolerations"].as_array_mut() {
            t.push(json!({"key": "b", "operator": "Exists"}));
        }
        new["nodeName"] = json!("node-1");
        assert!(messages(&new, &old).is_empty());
    }

    #[test]
    fn other_spec_changes_are_forbidden_with_upstream_wording() {
        let old = spec();
        let mut new = spec();
        new["dnsPolicy"] = json!("Default");
        let msgs = messages(&new, &old);
        assert_eq!(msgs.len(), 1);
        assert!(msgs[0].starts_with(&format!(
            "spec: Forbidden: pod updates may not change fields other than {UPDATABLE_FIELDS}\n"
        )));
        assert!(msgs[0].contains("- \tDnsPolicy: \"ClusterFirst\""));
        assert!(msgs[0].contains("+ \tDnsPolicy: \"Default\""));
    }

    #[test]
    fn removing_containers_or_changing_tolerations_is_refused() {
        let old = spec();
        let mut new = spec();
        new["containers"] = json!([]);
        assert_eq!(
            messages(&new, &old),
            vec!["spec.containers: Forbidden: pod updates may not add or remove containers"]
        );
        let mut new = spec();
        new["tolerations"][0]["key"] = json!("z");
        assert_eq!(
            messages(&new, &old)[0],
            "spec.tolerations: Forbidden: existing toleration can not be modified except its tolerationSeconds"
        );
    }

    #[test]
    fn moving_a_scheduled_pod_is_refused() {
        let mut old = spec();
        old["nodeName"] = json!("a");
        let mut new = old.clone();
        new["nodeName"] = json!("b");
        assert_eq!(messages(&new, &old).len(), 1);
    }
}
