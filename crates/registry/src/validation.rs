//! Generic object validation the store applies to every resource: `metadata` of new objects
//! and what an update may not change (upstream's ObjectMeta validation).

use apimachinery::field::{ErrorList, Path};
use apimachinery::{meta, objectmeta};
use rand::Rng;
use serde_json::{Value, json};

use crate::resource::ResourceDef;

fn metadata(obj: &Value) -> Value {
    obj.get("metadata").cloned().unwrap_or_else(|| json!({}))
}

/// Validates `metadata` of an object.
pub fn object_meta(res: &ResourceDef, obj: &Value) -> ErrorList {
    objectmeta::validate_object_meta(
        &metadata(obj),
        res.namespaced,
        res.strategy.name_rule(),
        &Path::new("metadata"),
    )
}

/// What an update may not change in `metadata` (the store carries server-owned fields over
/// before this runs, so only client-owned contradictions remain).
pub fn object_meta_update(new: &Value, old: &Value) -> ErrorList {
    let mut new_meta = metadata(new);
    let old_meta = metadata(old);
    // The store checks resourceVersion itself; give the validator the value it expects.
    new_meta["resourceVersion"] = json!(if meta::resource_version(old).is_empty() {
        "1"
    } else {
        meta::resource_version(old)
    });
    objectmeta::validate_object_meta_update(&new_meta, &old_meta, &Path::new("metadata"))
}

/// Five characters from upstream's generateName alphabet (no vowels, no confusable digits).
pub fn random_suffix() -> String {
    let mut rng = rand::rng();
    objectmeta::generate_name_suffix(|| rng.random::<u8>())
}
