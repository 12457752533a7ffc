//! Patches and field ownership: JSON patch, merge patch, strategic merge patch, server-side
//! apply, and the `managedFields` bookkeeping of every write.

use apimachinery::apply::{self, ManagedFieldsEntry};
use apimachinery::meta;
use apimachinery::patch;
use apimachinery::schema::{Schema, SchemaRef};
use apimachinery::status::ApiError;
use registry::ResourceDef;
use registry::store::Location;
use serde_json::Value;

/// The patch types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchKind {
    Json,
    Merge,
    Strategic,
    Apply,
}

/// RFC 7386 merge patch.
pub fn merge_patch(target: &Value, p: &Value) -> Value {
    patch::merge_patch(target, p)
}

fn schema(res: &ResourceDef) -> SchemaRef {
    res.schema.clone().unwrap_or_else(Schema::any)
}

/// Applies a patch of `kind` to the current object (or creates from an apply patch).
#[allow(clippy::too_many_arguments)]
pub fn apply(
    res: &ResourceDef,
    kind: PatchKind,
    cur: Option<&Value>,
    body: &Value,
    manager: &str,
    subresource: Option<&str>,
    force: bool,
    loc: &Location<'_>,
) -> Result<Value, ApiError> {
    let schema = schema(res);
    let now = registry::store::now();
    let reset = apply::reset_fields(res.has_status(), subresource);
    if kind == PatchKind::Apply {
        if !body.is_object() {
            return Err(ApiError::bad_request("the apply patch must be an object"));
        }
        let mut applied = body.clone();
        if meta::name(&applied).is_empty() {
            meta::set(&mut applied, "name", loc.name);
        } else if meta::name(&applied) != loc.name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({}) does not match the name on the URL ({})",
                meta::name(&applied),
                loc.name
            )));
        }
        if cur.is_none() && subresource.is_some() {
            return Err(ApiError::not_found(&res.plural, &res.group, loc.name));
        }
        let managed = cur
            .map(|c| ManagedFieldsEntry::list_from_object(c).unwrap_or_default())
            .unwrap_or_default();
        let (merged, _) = apply::apply(
            cur,
            &applied,
            &schema,
            &managed,
            manager,
            &res.api_version(),
            subresource,
            force,
            &now,
            &reset,
        )
        .map_err(|e| e.to_api_error())?;
        let mut merged = merged;
        if let Some(c) = cur {
            // The current resourceVersion makes the write a compare-and-swap; an applied one
            // is the client's precondition.
            let rv = match meta::resource_version(body) {
                "" => meta::resource_version(c).to_string(),
                sent => sent.to_string(),
            };
            meta::set(&mut merged, "resourceVersion", rv);
        }
        return Ok(merged);
    }
    let Some(cur) = cur else {
        return Err(ApiError::not_found(&res.plural, &res.group, loc.name));
    };
    let mut new = match kind {
        PatchKind::Json => patch::json_patch(cur, body).map_err(|e| e.to_api_error())?,
        PatchKind::Merge => {
            if !body.is_object() {
                return Err(ApiError::bad_request(
                    "the merge patch must be a JSON object",
                ));
            }
            patch::merge_patch(cur, body)
        }
        PatchKind::Strategic => {
            if !body.is_object() {
                return Err(ApiError::bad_request(
                    "the strategic merge patch must be a JSON object",
                ));
            }
            patch::strategic_merge_patch(cur, body, &schema).map_err(|e| e.to_api_error())?
        }
        PatchKind::Apply => unreachable!("handled above"),
    };
    // A resourceVersion the patch did not change is no precondition: the write is retried on
    // conflicts, as upstream does. One the patch set (and so differs once the object moved on)
    // stays a precondition.
    if meta::resource_version(&new) == meta::resource_version(cur) {
        meta::remove(&mut new, "resourceVersion");
    }
    track_update(res, Some(cur), &mut new, manager, subresource);
    Ok(new)
}

/// Records field ownership of a non-apply write (`operation: Update`).
pub fn track_update(
    res: &ResourceDef,
    old: Option<&Value>,
    new: &mut Value,
    manager: &str,
    subresource: Option<&str>,
) {
    let schema = schema(res);
    let managed = apply::entries_for_update(old, new, subresource.is_some());
    let reset = apply::reset_fields(res.has_status(), subresource);
    let now = registry::store::now();
    let entries = apply::update_managed_fields(
        old,
        new,
        &schema,
        &managed,
        manager,
        &res.api_version(),
        subresource,
        &now,
        &reset,
    );
    apply::set_object_managed_fields(new, &entries);
}
