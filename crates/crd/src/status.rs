//! The status the server keeps on a CRD: accepted names, `NamesAccepted` and `Established`
//! conditions, stored versions (upstream's naming and establishing controllers, folded into
//! one pure function), and the deletion helpers (`Terminating`, the cleanup finalizer).
//!
//! A requested name another resource of the group already uses is refused: that part of
//! `acceptedNames` keeps its previous value and `NamesAccepted` is `False` with upstream's
//! reason (`PluralConflict`, `SingularConflict`, `ShortNamesConflict`, `KindConflict`,
//! `ListKindConflict`). Once the names are accepted the CRD is `Established` at once
//! (upstream waits a moment for HA API servers; one process needs no wait).

use apimachinery::builtin;
use serde_json::{Map, Value, json};

use crate::spec::Crd;

/// The finalizer that holds a deleted CRD until its custom resources are gone.
pub const CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";
/// The condition types of a CRD.
pub const NAMES_ACCEPTED: &str = "NamesAccepted";
pub const ESTABLISHED: &str = "Established";
pub const TERMINATING: &str = "Terminating";

/// The status of `crd` with names, conditions and stored versions brought up to date.
/// `names_in_use(name, "")` says whether another resource of the CRD's group already uses a
/// resource name (plural, singular or short name); `names_in_use("", kind)` the same for a
/// kind or list kind. [`names_in_group`] builds it from a cluster's CRDs.
pub fn established_status(crd: &Value, names_in_use: &dyn Fn(&str, &str) -> bool) -> Value {
    established_status_at(crd, names_in_use, &registry::store::now())
}

/// [`established_status`] at a given time (RFC 3339), for tests.
pub fn established_status_at(
    crd: &Value,
    names_in_use: &dyn Fn(&str, &str) -> bool,
    now: &str,
) -> Value {
    let c = Crd(crd);
    let mut status = c.status().as_object().cloned().unwrap_or_default();
    let accepted = status
        .get("acceptedNames")
        .cloned()
        .unwrap_or_else(|| json!({}));
    let acc = |k: &str| {
        accepted
            .get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let resource_used = |n: &str| names_in_use(n, "");
    let kind_used = |k: &str| names_in_use("", k);
    let fresh =
        |requested: &str, accepted: &str, used: &dyn Fn(&str) -> bool| -> Result<(), String> {
            if requested == accepted || !used(requested) {
                Ok(())
            } else {
                Err(format!("{requested:?} is already in use"))
            }
        };
    let mut names = accepted.as_object().cloned().unwrap_or_default();
    let mut conflict: Option<(&str, String)> = None;
    let check = |names: &mut Map<String, Value>,
                 field: &str,
                 requested: String,
                 used: &dyn Fn(&str) -> bool,
                 reason: &'static str| {
        match fresh(&requested, &acc(field), used) {
            Ok(()) => {
                names.insert(field.into(), json!(requested));
                None
            }
            Err(e) => Some((reason, e)),
        }
    };
    let plural = check(
        &mut names,
        "plural",
        c.plural().to_string(),
        &resource_used,
        "PluralConflict",
    );
    let singular = check(
        &mut names,
        "singular",
        c.singular(),
        &resource_used,
        "SingularConflict",
    );
    conflict = singular.or(plural).or(conflict);
    let requested_short = c.short_names();
    let accepted_short = Crd::string_list(accepted.get("shortNames").unwrap_or(&Value::Null));
    if requested_short != accepted_short {
        let errs: Vec<String> = requested_short
            .iter()
            .filter(|s| !accepted_short.contains(s))
            .filter_map(|s| fresh(s, "", &resource_used).err())
            .collect();
        if errs.is_empty() {
            if requested_short.is_empty() {
                names.remove("shortNames");
            } else {
                names.insert("shortNames".into(), json!(requested_short));
            }
        } else {
            let msg = if errs.len() == 1 {
                errs[0].clone()
            } else {
                format!("[{}]", errs.join(", "))
            };
            conflict = Some(("ShortNamesConflict", msg));
        }
    }
    let kind = check(
        &mut names,
        "kind",
        c.kind().to_string(),
        &kind_used,
        "KindConflict",
    );
    let list_kind = check(
        &mut names,
        "listKind",
        c.list_kind(),
        &kind_used,
        "ListKindConflict",
    );
    conflict = list_kind.or(kind).or(conflict);
    let categories = c.categories();
    if categories.is_empty() {
        names.remove("categories");
    } else {
        names.insert("categories".into(), json!(categories));
    }
    status.insert("acceptedNames".into(), Value::Object(names));

    let names_accepted = match &conflict {
        None => condition(NAMES_ACCEPTED, "True", "NoConflicts", "no conflicts found"),
        Some((reason, msg)) => condition(NAMES_ACCEPTED, "False", reason, msg),
    };
    let established = if conflict.is_none() {
        condition(
            ESTABLISHED,
            "True",
            "InitialNamesAccepted",
            "the initial names have been accepted",
        )
    } else {
        match find_condition(&status, ESTABLISHED) {
            Some(old) => old.clone(),
            None => condition(
                ESTABLISHED,
                "False",
                "NotAccepted",
                "not all names are accepted",
            ),
        }
    };
    set_condition(&mut status, names_accepted, now);
    set_condition(&mut status, established, now);

    let mut stored = Crd::string_list(status.get("storedVersions").unwrap_or(&Value::Null));
    if let Some(storage) = c.storage_version()
        && !stored.iter().any(|s| s == storage)
    {
        stored.push(storage.to_string());
    }
    status.insert("storedVersions".into(), json!(stored));
    Value::Object(status)
}

fn condition(ty: &str, status: &str, reason: &str, message: &str) -> Value {
    json!({"type": ty, "status": status, "reason": reason, "message": message})
}

fn find_condition<'a>(status: &'a Map<String, Value>, ty: &str) -> Option<&'a Value> {
    status
        .get("conditions")?
        .as_array()?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(ty))
}

/// Upstream `SetCRDCondition`: replaces the condition of the same type, keeping its
/// `lastTransitionTime` unless the status changed.
fn set_condition(status: &mut Map<String, Value>, mut cond: Value, now: &str) {
    let ty = cond
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let conditions = status.entry("conditions").or_insert_with(|| json!([]));
    if !conditions.is_array() {
        *conditions = json!([]);
    }
    let Some(list) = conditions.as_array_mut() else {
        return;
    };
    match list
        .iter_mut()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(ty.as_str()))
    {
        Some(existing) => {
            let same = existing.get("status") == cond.get("status");
            let time = existing
                .get("lastTransitionTime")
                .filter(|t| same && !t.is_null())
                .cloned();
            cond["lastTransitionTime"] = time.unwrap_or_else(|| json!(now));
            *existing = cond;
        }
        None => {
            cond["lastTransitionTime"] = json!(now);
            list.push(cond);
        }
    }
}

/// Names used in `group` by the cluster's other CRDs (their accepted names) and by built-in
/// resources, as the callback [`established_status`] takes.
pub fn names_in_group<'a>(
    crds: &'a [Value],
    group: &'a str,
    except: &'a str,
) -> impl Fn(&str, &str) -> bool + 'a {
    move |name: &str, kind: &str| {
        let builtin = builtin::RESOURCES
            .iter()
            .filter(|r| r.group == group)
            .any(|r| {
                if kind.is_empty() {
                    r.plural == name || r.singular == name || r.short_names.contains(&name)
                } else {
                    r.kind == kind || format!("{}List", r.kind) == kind
                }
            });
        builtin
            || crds
                .iter()
                .filter(|c| Crd(c).group() == group && Crd(c).name() != except)
                .any(|c| {
                    let a = Crd(c)
                        .status()
                        .get("acceptedNames")
                        .cloned()
                        .unwrap_or_default();
                    let f = |k: &str| {
                        a.get(k)
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_string()
                    };
                    if kind.is_empty() {
                        f("plural") == name
                            || f("singular") == name
                            || Crd::string_list(a.get("shortNames").unwrap_or(&Value::Null))
                                .iter()
                                .any(|s| s == name)
                    } else {
                        f("kind") == kind || f("listKind") == kind
                    }
                })
    }
}

/// Whether a CRD is established (its resources may be served).
pub fn is_established(crd: &Value) -> bool {
    Crd(crd).condition_true(ESTABLISHED)
}

/// Marks a CRD whose deletion began (upstream's CRD `Delete`): adds [`CLEANUP_FINALIZER`]
/// and `Terminating=True` (`InstanceDeletionPending`).
pub fn mark_terminating(crd: &mut Value, now: &str) {
    if let Some(meta) = crd.get_mut("metadata").and_then(Value::as_object_mut) {
        let fins = meta.entry("finalizers").or_insert_with(|| json!([]));
        if let Some(list) = fins.as_array_mut()
            && !list.iter().any(|f| f == CLEANUP_FINALIZER)
        {
            list.push(json!(CLEANUP_FINALIZER));
        }
    }
    set_terminating(
        crd,
        "True",
        "InstanceDeletionPending",
        "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon",
        now,
    );
}

/// Sets the `Terminating` condition. The cleanup controller reports
/// `True/InstanceDeletionInProgress` ("CustomResource deletion is in progress") while it
/// deletes, then `False/InstanceDeletionCompleted` ("removed all instances") before removing
/// [`CLEANUP_FINALIZER`] with [`remove_cleanup_finalizer`].
pub fn set_terminating(crd: &mut Value, status: &str, reason: &str, message: &str, now: &str) {
    let Some(obj) = crd.as_object_mut() else {
        return;
    };
    let st = obj.entry("status").or_insert_with(|| json!({}));
    if let Some(st) = st.as_object_mut() {
        set_condition(st, condition(TERMINATING, status, reason, message), now);
    }
}

/// Removes [`CLEANUP_FINALIZER`]; returns whether it was there.
pub fn remove_cleanup_finalizer(crd: &mut Value) -> bool {
    let Some(list) = crd
        .pointer_mut("/metadata/finalizers")
        .and_then(Value::as_array_mut)
    else {
        return false;
    };
    let before = list.len();
    list.retain(|f| f != CLEANUP_FINALIZER);
    before != list.len()
}

#[cfg(test)]
#[path = "status_tests.rs"]
mod tests;
