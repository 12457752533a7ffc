//! Server-side apply and managed-fields tracking for ordinary writes.
//!
//! [`apply`] is structured-merge-diff's `Updater.Apply` wrapped the way the upstream API
//! server wraps it: merge the configuration into the live object, prune what the applier
//! stopped applying (unless someone else owns it), detect conflicts with other managers,
//! strip server-owned metadata from the applier's set, let `kubectl` upgrade from client-side
//! apply through its last-applied annotation, and keep that annotation in sync.
//! [`update_managed_fields`] is `Updater.Update` for POST/PUT/PATCH: the writer gains what it
//! changed, everyone else loses it.

use serde_json::{Map, Value};

use super::conflict::{ApplyConflict, ApplyError, Conflict};
use super::fieldset::FieldSet;
use super::managed::{
    ManagedFieldsEntry, ManagerId, Managers, Owned, cap_update_managers, decode, encode,
    set_object_managed_fields,
};
use super::path::FieldPath;
use super::typed::{
    compare, drop_nulls, ensure_named_fields_are_members, merge, remove_items, to_field_set,
};
use super::value::values_equal;
use crate::gofmt::marshal as go_json;
use crate::schema::{Schema, Type};

/// The annotation client-side `kubectl apply` keeps its last configuration in.
pub const LAST_APPLIED_ANNOTATION: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// The manager upstream credits with the fields of an untracked object on its first apply.
pub const BEFORE_FIRST_APPLY: &str = "before-first-apply";

/// Struct fields that are values (not pointers) in the Go types, so they exist, empty, in the
/// zero object a create is compared against. Upstream's managed fields show them without `.`.
const VALUE_STRUCTS: &[&str] = &[
    "metadata",
    "spec",
    "status",
    "template",
    "strategy",
    "updateStrategy",
];

/// The fields a write to `subresource` must not track (upstream's reset fields): `status` on
/// the main resource of a kind with a status subresource, `spec` on `/status`.
pub fn reset_fields(has_status_subresource: bool, subresource: Option<&str>) -> FieldSet {
    match subresource {
        None if has_status_subresource => FieldSet::from_paths([FieldPath::fields(&["status"])]),
        Some("status") => FieldSet::from_paths([FieldPath::fields(&["spec"])]),
        _ => FieldSet::new(),
    }
}

/// Server-owned paths upstream strips from the writing manager's set.
fn strip_set() -> FieldSet {
    let mut s = FieldSet::from_paths([
        FieldPath::fields(&["apiVersion"]),
        FieldPath::fields(&["kind"]),
        FieldPath::fields(&["metadata"]),
    ]);
    for f in [
        "name",
        "namespace",
        "creationTimestamp",
        "selfLink",
        "uid",
        "clusterName",
        "generation",
        "managedFields",
        "resourceVersion",
    ] {
        s.insert(&FieldPath::fields(&["metadata", f]).0);
    }
    s
}

fn strip_meta(managers: &mut Managers, id: &ManagerId) {
    if let Some(owned) = managers.get_mut(id) {
        owned.set = owned.set.difference(&strip_set());
        if owned.set.is_empty() {
            managers.remove(id);
        }
    }
}

fn without_managed_fields(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
    }
    v
}

/// Applies `applied` (a full intent) for `manager` to `live` (`None` creates).
///
/// Returns the new object, with `metadata.managedFields` written, and the entries. `reset` lists
/// fields this endpoint does not track ([`reset_fields`]). On a no-op apply the object is the
/// live one and the applier's timestamp is kept.
#[allow(clippy::too_many_arguments)]
pub fn apply(
    live: Option<&Value>,
    applied: &Value,
    schema: &Schema,
    managed: &[ManagedFieldsEntry],
    manager: &str,
    api_version: &str,
    subresource: Option<&str>,
    force: bool,
    now: &str,
    reset: &FieldSet,
) -> Result<(Value, Vec<ManagedFieldsEntry>), ApplyError> {
    if applied
        .pointer("/metadata/managedFields")
        .is_some_and(|v| !v.is_null())
    {
        return Err(ApplyError::BadRequest(
            "metadata.managedFields must be nil".into(),
        ));
    }
    if let Some(v) = applied.get("apiVersion").and_then(Value::as_str)
        && v != api_version
    {
        return Err(ApplyError::BadRequest(format!(
            "Incorrect version specified in apply patch. Specified patch version: {v}, expected: {api_version}"
        )));
    }
    let mut managers = decode(managed)
        .map_err(|e| ApplyError::Invalid(format!("failed to decode managed fields: {e}")))?;
    let live = live
        .map(without_managed_fields)
        .unwrap_or_else(|| Value::Object(Map::new()));
    if managers.is_empty() {
        // An object nobody tracked yet: its current fields belong to `before-first-apply`.
        let entries = update_managed_fields(
            None,
            &live,
            schema,
            &[],
            BEFORE_FIRST_APPLY,
            api_version,
            subresource,
            now,
            reset,
        );
        managers = decode(&entries).map_err(ApplyError::Invalid)?;
    }
    let me = ManagerId::apply(manager, subresource);
    let ctx = Ctx {
        schema,
        api_version,
        reset,
    };
    let outcome = match ctx.apply(&live, applied, managers.clone(), &me, force) {
        Err(ApplyError::Conflict(c)) if manager == "kubectl" => {
            match allowed_from_last_applied(&live, schema, api_version) {
                Some(allowed) => {
                    let remaining: Vec<Conflict> = c
                        .conflicts
                        .iter()
                        .filter(|x| !allowed.has(&x.path.0))
                        .cloned()
                        .collect();
                    if remaining.is_empty() {
                        ctx.apply(&live, applied, managers, &me, true)
                    } else {
                        Err(ApplyError::Conflict(ApplyConflict::new(remaining)))
                    }
                }
                None => Err(ApplyError::Conflict(c)),
            }
        }
        other => other,
    };
    let (new, mut managers) = outcome?;
    let changed = !values_equal(&live, &new);
    if changed && let Some(owned) = managers.get_mut(&me) {
        owned.time = Some(now.to_string());
    }
    strip_meta(&mut managers, &me);
    let mut object = if changed { new } else { live };
    if manager == "kubectl" && has_last_applied(&object) {
        set_last_applied(&mut object, build_last_applied(applied));
    }
    let entries = encode(&managers);
    set_object_managed_fields(&mut object, &entries);
    Ok((object, entries))
}

/// Records the managed fields of a non-apply write (create, update, patch) by `manager`.
///
/// `old` is the live object (`None` on create), `new` the object about to be stored and
/// `managed` the entries that apply to it (the caller picks the live or the request's entries,
/// as upstream's `decodeLiveOrNew` does). The manager gains ownership of every field it
/// changed or set; other managers lose those fields. As upstream, an existing object that has
/// no managed fields stays untracked, and unreadable entries or objects reset tracking.
#[allow(clippy::too_many_arguments)]
pub fn update_managed_fields(
    old: Option<&Value>,
    new: &Value,
    schema: &Schema,
    managed: &[ManagedFieldsEntry],
    manager: &str,
    api_version: &str,
    subresource: Option<&str>,
    now: &str,
    reset: &FieldSet,
) -> Vec<ManagedFieldsEntry> {
    let Ok(mut managers) = decode(managed) else {
        return Vec::new();
    };
    if old.is_some() && managers.is_empty() {
        return Vec::new();
    }
    // The objects are compared as they are (no copies without their managedFields): the
    // comparison skips equal subtrees, and whatever it finds under managedFields is dropped.
    let zero;
    let old = match old {
        Some(o) => o,
        None => {
            zero = zero_object(Some(schema), new);
            &zero
        }
    };
    let Ok(mut cmp) = compare(schema, old, new) else {
        return Vec::new();
    };
    cmp.exclude(reset);
    cmp.exclude(&FieldSet::from_paths([FieldPath::fields(&[
        "metadata",
        "managedFields",
    ])]));
    let touched = cmp.modified.union(&cmp.added);
    for owned in managers.values_mut() {
        owned.set = owned
            .set
            .difference(&touched.intersection(&owned.set))
            .difference(&cmp.removed);
    }
    managers.retain(|_, o| !o.set.is_empty());
    let current = touched.recursive_difference(reset);
    let me = ManagerId::update(manager, api_version, subresource);
    if !current.is_empty() {
        let set = match managers.get(&me) {
            Some(prev) => current.union(&prev.set),
            None => current,
        };
        managers.insert(
            me.clone(),
            Owned {
                set,
                api_version: api_version.into(),
                time: Some(now.into()),
            },
        );
    }
    strip_meta(&mut managers, &me);
    cap_update_managers(&mut managers);
    encode(&managers)
}

/// The empty object a create is compared against. For a built-in kind (a schema whose
/// definition is an `io.k8s.` type) it is shaped like the Go zero value: value structs present
/// and empty, required lists and maps present as `null` (Go writes fields without
/// `omitempty`), so that managed fields show `.` only where upstream's do. Custom resources
/// start from `{}`, so their `spec` is owned as a whole too (`"f:spec":{".":{},...}`).
fn zero_object(schema: Option<&Schema>, new: &Value) -> Value {
    let go_typed = schema
        .and_then(|s| s.definition.as_deref())
        .is_some_and(|d| d.starts_with("io.k8s."));
    if go_typed {
        zero_value(schema, new)
    } else {
        Value::Object(Map::new())
    }
}

fn zero_value(schema: Option<&Schema>, new: &Value) -> Value {
    let mut out = Map::new();
    if let (Some(s), Value::Object(m)) = (schema, new) {
        for (name, child) in &s.properties {
            let Some(v) = m.get(name) else {
                continue;
            };
            let is_struct = child.ty == Type::Object && !child.properties.is_empty();
            if is_struct && VALUE_STRUCTS.contains(&name.as_str()) && v.is_object() {
                out.insert(name.clone(), zero_value(Some(child), v));
            } else if s.required.contains(name) && (v.is_array() || v.is_object()) {
                out.insert(name.clone(), Value::Null);
            }
        }
    }
    Value::Object(out)
}

struct Ctx<'a> {
    schema: &'a Schema,
    api_version: &'a str,
    reset: &'a FieldSet,
}

impl Ctx<'_> {
    /// structured-merge-diff `Updater.Apply`.
    fn apply(
        &self,
        live: &Value,
        config: &Value,
        mut managers: Managers,
        me: &ManagerId,
        force: bool,
    ) -> Result<(Value, Managers), ApplyError> {
        // The applied configuration is the client's: a configuration that does not fit the
        // schema is its error (400), where upstream answers 500.
        let set = to_field_set(self.schema, config, false).map_err(|e| {
            ApplyError::BadRequest(format!("failed to create typed patch object: {e}"))
        })?;
        to_field_set(self.schema, live, true)
            .map_err(|e| ApplyError::Invalid(format!("failed to create typed live object: {e}")))?;
        let mut merged = merge(self.schema, live, config)
            .map_err(|e| ApplyError::Invalid(format!("failed to merge config: {e}")))?;
        drop_nulls(&mut merged);
        let last = managers.get(me).cloned();
        managers.insert(
            me.clone(),
            Owned {
                set: set.recursive_difference(self.reset),
                api_version: self.api_version.into(),
                time: last.as_ref().and_then(|l| l.time.clone()),
            },
        );
        let new = match &last {
            Some(l) if !l.set.is_empty() => self.prune(&merged, &managers, &l.set),
            _ => merged,
        };
        let managers = self.update(live, &new, managers, me, force)?;
        Ok((new, managers))
    }

    fn ensured(&self, s: &FieldSet) -> FieldSet {
        ensure_named_fields_are_members(s, self.schema)
    }

    fn set_of(&self, v: &Value) -> FieldSet {
        self.ensured(&to_field_set(self.schema, v, true).unwrap_or_default())
    }

    /// Removes what the applier applied last time and not this time, unless anyone owns it.
    fn prune(&self, merged: &Value, managers: &Managers, last: &FieldSet) -> Value {
        let last = self.ensured(last);
        let pruned = remove_items(self.schema, merged, &last);
        let managed = managers
            .values()
            .fold(FieldSet::new(), |acc, o| acc.union(&o.set));
        let keep = self.set_of(&pruned).union(&self.ensured(&managed));
        let pruned = remove_items(self.schema, merged, &self.set_of(merged).difference(&keep));
        let dangling = self
            .set_of(merged)
            .difference(&self.set_of(&pruned))
            .intersection(&last);
        remove_items(self.schema, merged, &dangling)
    }

    /// structured-merge-diff `Updater.update`: conflicts and ownership transfer.
    fn update(
        &self,
        live: &Value,
        new: &Value,
        mut managers: Managers,
        me: &ManagerId,
        force: bool,
    ) -> Result<Managers, ApplyError> {
        let mut cmp = compare(self.schema, live, new)
            .map_err(|e| ApplyError::Invalid(format!("failed to compare objects: {e}")))?;
        cmp.exclude(self.reset);
        let touched = cmp.modified.union(&cmp.added);
        let mut conflicts = Vec::new();
        let mut taken: Vec<(ManagerId, FieldSet)> = Vec::new();
        for (id, owned) in &managers {
            if id == me {
                continue;
            }
            let c = owned.set.intersection(&touched);
            if !c.is_empty() {
                conflicts.extend(
                    c.paths()
                        .into_iter()
                        .map(|p| Conflict::new(id, &owned.api_version, p)),
                );
                taken.push((id.clone(), c));
            }
        }
        if !force && !conflicts.is_empty() {
            return Err(ApplyError::Conflict(ApplyConflict::new(conflicts)));
        }
        for (id, c) in taken {
            if let Some(o) = managers.get_mut(&id) {
                o.set = o.set.difference(&c);
            }
        }
        if !cmp.removed.is_empty() {
            for (id, o) in managers.iter_mut() {
                if id != me {
                    o.set = o.set.difference(&cmp.removed);
                }
            }
        }
        managers.retain(|_, o| !o.set.is_empty());
        Ok(managers)
    }
}

fn last_applied(obj: &Value) -> Option<&str> {
    obj.pointer("/metadata/annotations")
        .and_then(|a| a.get(LAST_APPLIED_ANNOTATION))
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

fn has_last_applied(obj: &Value) -> bool {
    last_applied(obj).is_some()
}

/// Fields whose live value still equals the client-side last-applied configuration: `kubectl`
/// may take them over without a conflict (upstream `lastAppliedManager`).
fn allowed_from_last_applied(live: &Value, schema: &Schema, api_version: &str) -> Option<FieldSet> {
    let last: Value = serde_json::from_str(last_applied(live)?).ok()?;
    if last.get("apiVersion").and_then(Value::as_str) != Some(api_version) {
        return None;
    }
    let set = to_field_set(schema, &last, false).ok()?;
    let cmp = compare(schema, &last, live).ok()?;
    Some(
        set.difference(&cmp.modified)
            .difference(&cmp.added)
            .difference(&cmp.removed),
    )
}

/// The annotation value upstream writes: the applied object without the annotation itself,
/// encoded like Go's JSON encoder (with its trailing newline).
fn build_last_applied(applied: &Value) -> String {
    let mut obj = applied.clone();
    if let Some(a) = obj
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    {
        a.remove(LAST_APPLIED_ANNOTATION);
    }
    format!("{}\n", go_json(&obj))
}

fn set_last_applied(obj: &mut Value, value: String) {
    if let Some(a) = obj
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    {
        a.insert(LAST_APPLIED_ANNOTATION.into(), Value::String(value));
    }
}

#[cfg(test)]
#[path = "updater_tests.rs"]
mod tests;
