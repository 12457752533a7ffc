//! Unknown fields: detection for `fieldValidation` and pruning, driven by the resource's schema.

use registry::ResourceDef;
use serde_json::Value;

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
