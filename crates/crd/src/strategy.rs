//! [`CustomStrategy`]: the [`registry::Strategy`] of one served version of a custom resource —
//! upstream's `customResourceStrategy` semantics plugged into the generic store.
//!
//! - `default`: drops `null`s that are neither nullable nor defaulted, then applies the
//!   schema's defaults;
//! - `prepare_for_create`/`prepare_for_update`: rewrite `apiVersion` to the storage version
//!   (conversion `None`; see [`crate::convert`]);
//! - `validate`/`validate_update`: structural-schema validation with ratcheting on update,
//!   the scale subresource's fields, embedded resources, set/map list uniqueness, and the CEL
//!   rules (skipped, with upstream's notice, when a blocking error was found);
//! - `field_names`/`field`: the CRD's `selectableFields`;
//! - updates need a `resourceVersion` (upstream `AllowUnconditionalUpdate` is false for CRs).
//!
//! Metadata, `status` vs spec, generation and finalizers are the generic store's.

use std::collections::HashSet;
use std::sync::{Arc, LazyLock, Mutex};

use apimachinery::field::{ErrorKind, ErrorList, FieldError};
use apimachinery::schema::SchemaRef;
use apimachinery::validation::is_qualified_name;
use registry::{ScalePaths, Strategy};
use serde_json::Value;

use crate::cel;
use crate::convert::set_api_version;
use crate::defaulting;
use crate::embedded;
use crate::gofmt;
use crate::listtype;
use crate::openapi_errors::to_field_errors;
use crate::scale;
use crate::schema::Node;
use crate::values;

/// Field names live as long as the process: `Strategy::field_names` hands out
/// `&'static str`. Each distinct name is leaked once, however often CRDs are re-registered.
static FIELD_NAMES: LazyLock<Mutex<HashSet<&'static str>>> = LazyLock::new(Default::default);

fn intern(s: &str) -> &'static str {
    let mut set = FIELD_NAMES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(found) = set.get(s) {
        return found;
    }
    let leaked: &'static str = Box::leak(s.to_string().into_boxed_str());
    set.insert(leaked);
    leaked
}

/// What validating a custom resource found.
#[derive(Debug, Default)]
pub struct Validated {
    pub errors: ErrorList,
    /// Errors ratcheting turned into warnings (unchanged, already invalid values).
    pub warnings: Vec<String>,
}

/// The strategy of one served version of a custom resource.
pub struct CustomStrategy {
    group: String,
    version: String,
    storage_version: String,
    schema: Arc<Node>,
    structural: Option<SchemaRef>,
    scale: Option<ScalePaths>,
    /// `(field name, path steps)` of the selectable fields.
    selectable: Vec<(&'static str, Vec<String>)>,
    field_names: Vec<&'static str>,
    /// Versions are converted outside (a conversion webhook through the resource's
    /// `Converter`): writes keep the request's `apiVersion` for it to see.
    converted_outside: bool,
}

impl std::fmt::Debug for CustomStrategy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CustomStrategy({}/{})", self.group, self.version)
    }
}

impl CustomStrategy {
    /// A strategy for `group/version`, stored at `storage_version`, with the version's
    /// `openAPIV3Schema` (`None`: accept anything), its scale paths and `selectableFields`.
    pub fn new(
        group: &str,
        version: &str,
        storage_version: &str,
        schema: Option<&Value>,
        scale: Option<ScalePaths>,
        selectable_fields: &[Value],
    ) -> CustomStrategy {
        let node = match schema {
            Some(s) => Node::compile(s),
            None => {
                Node::compile(&serde_json::json!({"x-kubernetes-preserve-unknown-fields": true}))
            }
        };
        let selectable: Vec<(&'static str, Vec<String>)> = selectable_fields
            .iter()
            .filter_map(|f| f.get("jsonPath").and_then(Value::as_str))
            .map(|jp| {
                let name = jp.trim_start_matches('.');
                (intern(name), name.split('.').map(str::to_string).collect())
            })
            .collect();
        CustomStrategy {
            group: group.to_string(),
            version: version.to_string(),
            storage_version: storage_version.to_string(),
            field_names: selectable.iter().map(|(n, _)| *n).collect(),
            schema: Arc::new(node),
            structural: schema.map(crate::serve::structural_schema),
            scale,
            selectable,
            converted_outside: false,
        }
    }

    /// This strategy for a CRD whose versions a webhook converts.
    pub fn converted_outside(mut self) -> Self {
        self.converted_outside = true;
        self
    }

    /// The compiled schema.
    pub fn schema(&self) -> &Node {
        &self.schema
    }

    /// The served version.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// The storage version.
    pub fn storage_version(&self) -> &str {
        &self.storage_version
    }

    /// Prepares a stored object for a client of this version: `apiVersion` rewritten to this
    /// version, `null`s pruned, this version's defaults applied (upstream defaults on read).
    pub fn read(&self, obj: &mut Value) {
        set_api_version(obj, &self.group, &self.version);
        self.default(obj);
    }

    /// Removes fields this version's schema does not know (`openapi::prune`); returns the
    /// removed paths. The server prunes request bodies; this is the same for callers that
    /// hold a strategy.
    pub fn prune(&self, obj: &mut Value) -> Vec<String> {
        match &self.structural {
            Some(s) => openapi::prune(obj, s),
            None => Vec::new(),
        }
    }

    /// Full validation of a custom resource (without ObjectMeta, which the store checks);
    /// `old` on update enables ratcheting and transition rules.
    pub fn validate_object(&self, obj: &Value, old: Option<&Value>) -> Validated {
        let mut failures = Vec::new();
        values::validate(&self.schema, obj, old, &mut failures);
        let mut errors = to_field_errors(None, failures);
        if let Some(s) = &self.scale {
            errors.extend(scale::validate(obj, s));
        }
        errors.extend(embedded::validate(&self.schema, obj));
        let old_lists_ok = old.is_none_or(|o| listtype::validate(&self.schema, o).is_empty());
        if old_lists_ok {
            errors.extend(listtype::validate(&self.schema, obj));
        }
        let mut warnings = Vec::new();
        if self.schema.has_rules() {
            let blocking = errors.iter().any(|e| {
                matches!(
                    e.kind,
                    ErrorKind::NotSupported
                        | ErrorKind::Required
                        | ErrorKind::TooLong
                        | ErrorKind::TooMany
                        | ErrorKind::TypeInvalid
                )
            });
            if blocking {
                errors.push(FieldError::invalid(
                    "<nil>",
                    Value::Null,
                    "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation",
                ));
            } else {
                let outcome = cel::validate(&self.schema, obj, old);
                errors.extend(outcome.errors);
                warnings = outcome.warnings;
            }
        }
        Validated { errors, warnings }
    }
}

const STANDARD_FINALIZERS: &[&str] = &["orphan", "foregroundDeletion", "kubernetes"];

/// Upstream `validateKubeFinalizerName` warnings.
fn finalizer_warnings(obj: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for f in apimachinery::meta::finalizers(obj) {
        for msg in is_qualified_name(&f) {
            out.push(format!("metadata.finalizers: {}: {msg}", gofmt::quote(&f)));
        }
        if !f.contains('/') && !STANDARD_FINALIZERS.contains(&f.as_str()) {
            let advice = if f.contains('.') {
                "prefer a domain-qualified finalizer name including a path (/) to avoid accidental conflicts with other finalizer writers"
            } else {
                "prefer a domain-qualified finalizer name to avoid accidental conflicts with other finalizer writers"
            };
            out.push(format!(
                "metadata.finalizers: {}: {advice}",
                gofmt::quote(&f)
            ));
        }
    }
    out
}

impl Strategy for CustomStrategy {
    fn read(&self, obj: &mut Value) {
        CustomStrategy::read(self, obj);
    }

    fn has_read(&self) -> bool {
        true
    }

    fn default(&self, obj: &mut Value) {
        defaulting::prune_nulls(obj, Some(&self.schema));
        if self.schema.has_defaults() {
            defaulting::default(obj, &self.schema);
        }
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        if !self.converted_outside {
            set_api_version(obj, &self.group, &self.storage_version);
        }
    }

    fn prepare_for_update(&self, new: &mut Value, _old: &Value) {
        if !self.converted_outside {
            set_api_version(new, &self.group, &self.storage_version);
        }
    }

    fn validate(&self, obj: &Value) -> ErrorList {
        self.validate_object(obj, None).errors
    }

    fn validate_update(&self, new: &Value, old: &Value) -> ErrorList {
        self.validate_object(new, Some(old)).errors
    }

    fn field_names(&self) -> &[&'static str] {
        &self.field_names
    }

    fn field(&self, obj: &Value, name: &str) -> Option<String> {
        let (_, steps) = self.selectable.iter().find(|(n, _)| *n == name)?;
        let mut cur = obj;
        for s in steps {
            match cur.get(s) {
                Some(v) => cur = v,
                None => return Some(String::new()),
            }
        }
        Some(if cur.is_null() {
            String::new()
        } else {
            gofmt::sprint(cur)
        })
    }

    fn warnings(&self, obj: &Value) -> Vec<String> {
        finalizer_warnings(obj)
    }

    fn allow_unconditional_update(&self) -> bool {
        false
    }
}

#[cfg(test)]
#[path = "strategy_tests.rs"]
mod tests;
