//! Unknown fields (detection for `fieldValidation`, pruning) and JSON types of built-in
//! objects, driven by the resource's schema.

use apimachinery::status::ApiError;
use registry::ResourceDef;
use serde_json::Value;

/// Refuses (400, as upstream's decoder) a built-in object holding a value of the wrong JSON
/// type, before anything else runs: stored, it would break every typed client listing the
/// resource. Custom resources are checked by their CRD's schema validation (422).
pub fn check_types(res: &ResourceDef, obj: &Value) -> Result<(), ApiError> {
    if res.custom {
        return Ok(());
    }
    let Some(schema) = &res.schema else {
        return Ok(());
    };
    match openapi::type_mismatch(obj, schema) {
        None => Ok(()),
        Some(m) => Err(ApiError::bad_request(format!(
            "{kind} in version \"{version}\" cannot be handled as a {kind}: {m}",
            kind = res.kind,
            version = res.version,
        ))),
    }
}

/// Upstream-style paths of fields the resource's schema does not know.
pub fn unknown(res: &ResourceDef, obj: &Value) -> Vec<String> {
    match &res.schema {
        Some(s) => openapi::unknown_fields(obj, s),
        None => Vec::new(),
    }
}

/// Removes unknown fields from custom resources (built-in objects keep what they are sent
/// when validation is not strict, as upstream's decoder drops them silently).
pub fn prune(res: &ResourceDef, obj: &mut Value) {
    if let Some(s) = &res.schema {
        openapi::prune(obj, s);
    }
}
