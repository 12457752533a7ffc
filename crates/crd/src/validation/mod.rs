//! Validation of CustomResourceDefinitions (upstream `apiextensions/validation`), with
//! upstream's paths and messages.
//!
//! Validate after [`crate::default_crd`], as the server does (defaulting happens when the
//! request is decoded): `status.storedVersions` and `spec.names.listKind` come from there.
//!
//! Error paths follow upstream's internal form ([`crate::spec::Internal`]): per-version fields
//! identical in all versions are reported at the spec (`spec.validation.openAPIV3Schema...`).
//!
//! `spec.conversion.strategy: Webhook` is validated like upstream and accepted, but this
//! server only converts with `None` semantics (apiVersion rewriting); a webhook is never
//! called.

mod conversion;
mod defaults;
mod meta;
mod schema;
mod structural;
mod version;

use apimachinery::field::{ErrorList, FieldError, Path};
use apimachinery::objectmeta::{FIELD_IMMUTABLE, validate_object_meta_update};
use apimachinery::validation::is_dns1123_subdomain;
use serde_json::{Value, json};

pub use schema::Options as SchemaOptions;
pub use version::MAX_SELECTABLE_FIELDS;

use crate::spec::{Crd, Internal, version_schema};
use conversion::{conversion, conversion_review_versions};
use meta::{dns1035_join, metadata, name_matches, names, rest};

/// Options that relax validation on update when the old CRD already broke a rule, so an
/// existing CRD never becomes impossible to update.
#[derive(Debug, Clone, Copy)]
struct Opts {
    schema: SchemaOptions,
    require_open_api_schema: bool,
    require_pruned_defaults: bool,
    require_recognized_conversion_review_version: bool,
    names_immutable: bool,
}

impl Default for Opts {
    fn default() -> Self {
        Opts {
            schema: SchemaOptions::default(),
            require_open_api_schema: true,
            require_pruned_defaults: true,
            require_recognized_conversion_review_version: true,
            names_immutable: false,
        }
    }
}

/// Validates a new CRD (upstream `ValidateCustomResourceDefinition`).
pub fn validate_crd(crd: &Value) -> ErrorList {
    let c = Crd(crd);
    let mut errs = metadata(crd, c);
    errs.extend(spec(c, Opts::default(), None));
    errs.extend(rest(c, None));
    errs
}

/// Validates an update of a CRD (upstream `ValidateCustomResourceDefinitionUpdate`).
pub fn validate_crd_update(new: &Value, old: &Value) -> ErrorList {
    let (c, o) = (Crd(new), Crd(old));
    let mut errs = validate_object_meta_update(
        new.get("metadata").unwrap_or(&Value::Null),
        old.get("metadata").unwrap_or(&Value::Null),
        &Path::new("metadata"),
    );
    errs.extend(spec_and_status_update(c, o));
    errs
}

/// Everything but metadata, for the CRD strategy (the generic store checks metadata).
pub(crate) fn validate_crd_without_metadata(crd: &Value) -> ErrorList {
    let c = Crd(crd);
    let mut errs = name_matches(c);
    errs.extend(spec(c, Opts::default(), None));
    errs.extend(rest(c, None));
    errs
}

/// [`validate_crd_update`] without the metadata update checks.
pub(crate) fn spec_and_status_update(c: Crd<'_>, o: Crd<'_>) -> ErrorList {
    let old_schemas: Vec<&Value> = o.versions().iter().filter_map(version_schema).collect();
    let any_old = |pred: &dyn Fn(&Value) -> bool| old_schemas.iter().any(|s| pred(s));
    let opts = Opts {
        schema: SchemaOptions {
            require_valid_property_type: !any_old(&|s| {
                has_node(s, &|m| {
                    m.get("type").and_then(Value::as_str).is_some_and(|t| {
                        !t.is_empty()
                            && !["array", "boolean", "integer", "number", "object", "string"]
                                .contains(&t)
                    })
                })
            }),
            require_atomic_set_type: !any_old(&|s| has_node(s, &non_atomic_set)),
            require_map_list_keys_map_set_validation: !any_old(&|s| {
                has_node(s, &|m| {
                    let mut e = Vec::new();
                    schema::map_list_keys(m, &Path::default(), &mut e);
                    !e.is_empty()
                })
            }),
            cel: true,
        },
        require_open_api_schema: o.versions().iter().all(|v| version_schema(v).is_some()),
        require_pruned_defaults: true,
        require_recognized_conversion_review_version: {
            let old_versions = conversion_review_versions(o);
            old_versions.is_empty() || old_versions.iter().any(|v| v == "v1" || v == "v1beta1")
        },
        names_immutable: o.condition_true("Established"),
    };
    let mut errs = spec(c, opts, Some(o));
    if opts.names_immutable {
        errs.extend(immutable(json!(c.scope()), json!(o.scope()), "spec.scope"));
        errs.extend(immutable(
            json!(c.kind()),
            json!(o.kind()),
            "spec.names.kind",
        ));
    }
    errs.extend(immutable(json!(c.group()), json!(o.group()), "spec.group"));
    errs.extend(immutable(
        json!(c.plural()),
        json!(o.plural()),
        "spec.names.plural",
    ));
    errs.extend(rest(c, Some(o)));
    errs
}

fn immutable(new: Value, old: Value, path: &str) -> ErrorList {
    let mut errs = ErrorList::new();
    if new != old {
        errs.push(FieldError::invalid(path, new, FIELD_IMMUTABLE));
    }
    errs
}

fn has_node(schema: &Value, pred: &dyn Fn(&serde_json::Map<String, Value>) -> bool) -> bool {
    match schema {
        Value::Object(m) => pred(m) || m.values().any(|v| has_node(v, pred)),
        Value::Array(a) => a.iter().any(|v| has_node(v, pred)),
        _ => false,
    }
}

fn non_atomic_set(m: &serde_json::Map<String, Value>) -> bool {
    if m.get("x-kubernetes-list-type").and_then(Value::as_str) != Some("set") {
        return false;
    }
    let Some(is) = m.get("items").and_then(Value::as_object) else {
        return false;
    };
    match is.get("type").and_then(Value::as_str) {
        Some("array") => is
            .get("x-kubernetes-list-type")
            .and_then(Value::as_str)
            .is_some_and(|t| t != "atomic"),
        Some("object") => is.get("x-kubernetes-map-type").and_then(Value::as_str) != Some("atomic"),
        _ => false,
    }
}

/// Upstream `validateCustomResourceDefinitionSpec`.
fn spec(c: Crd<'_>, opts: Opts, old: Option<Crd<'_>>) -> ErrorList {
    let mut errs = ErrorList::new();
    let sp = Path::new("spec");
    let group = c.group();
    if group.is_empty() {
        errs.push(FieldError::required(sp.child("group"), ""));
    } else if !is_dns1123_subdomain(group).is_empty() {
        errs.push(FieldError::invalid(
            sp.child("group"),
            json!(group),
            is_dns1123_subdomain(group).join(","),
        ));
    } else if !group.contains('.') {
        errs.push(FieldError::invalid(
            sp.child("group"),
            json!(group),
            "should be a domain with at least one dot",
        ));
    }
    match c.scope() {
        "" => errs.push(FieldError::required(sp.child("scope"), "")),
        "Cluster" | "Namespaced" => {}
        other => errs.push(FieldError::not_supported(
            sp.child("scope"),
            json!(other),
            &["Cluster", "Namespaced"],
        )),
    }
    let internal = Internal::of(c);
    let versions = c.versions();
    let top_schema = internal.schema.spec.and_then(|s| s.get("openAPIV3Schema"));
    if opts.require_open_api_schema && top_schema.is_none() {
        for (i, v) in versions.iter().enumerate() {
            if version_schema(v).is_none() {
                errs.push(FieldError::required(
                    sp.child("versions")
                        .index(i)
                        .child("schema")
                        .child("openAPIV3Schema"),
                    "",
                ));
            }
        }
    }
    let mut storage = 0;
    let mut seen: Vec<&str> = Vec::new();
    let mut unique = true;
    for (i, v) in versions.iter().enumerate() {
        let vp = sp.child("versions").index(i);
        let name = v.get("name").and_then(Value::as_str).unwrap_or_default();
        if v.get("storage") == Some(&json!(true)) {
            storage += 1;
        }
        if seen.contains(&name) {
            unique = false;
        } else {
            seen.push(name);
        }
        if let Some(e) = dns1035_join(name) {
            errs.push(FieldError::invalid(vp.child("name"), json!(name), e));
        }
        errs.extend(version::deprecation_warning(v, &vp));
        let status_enabled = internal
            .subresources_for(v)
            .is_some_and(|s| s.get("status").is_some_and(|s| !s.is_null()));
        if !internal.schema.lifted {
            errs.extend(version::validation(
                v.get("schema"),
                status_enabled,
                opts.schema,
                opts.require_pruned_defaults,
                &vp.child("schema"),
            ));
        }
        if !internal.subresources.lifted {
            errs.extend(version::subresources(
                v.get("subresources"),
                &vp.child("subresources"),
            ));
        }
        if !internal.columns.lifted {
            for (j, col) in v
                .get("additionalPrinterColumns")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .enumerate()
            {
                errs.extend(version::column(
                    col,
                    &vp.child("additionalPrinterColumns").index(j),
                ));
            }
        }
        if !internal.selectable.lifted
            && let Some(fields) = v
                .get("selectableFields")
                .and_then(Value::as_array)
                .filter(|a| !a.is_empty())
        {
            match version_schema(v) {
                None => errs.push(FieldError::invalid(
                    vp.child("selectableFields"),
                    json!(""),
                    "may only be set when `version.schema.openAPIV3Schema` is not included",
                )),
                Some(schema) => {
                    let allow = old.and_then(|o| o.version(name)).is_some_and(|ov| {
                        too_many_unchanged(ov.get("selectableFields"), Some(&v["selectableFields"]))
                    });
                    errs.extend(version::selectable_fields(
                        fields,
                        &crate::schema::Node::compile(schema),
                        &vp.child("selectableFields"),
                        allow,
                    ));
                }
            }
        }
    }
    if !unique {
        errs.push(FieldError::invalid(
            sp.child("versions"),
            json!(versions),
            "must contain unique version names",
        ));
    }
    if storage != 1 {
        errs.push(FieldError::invalid(
            sp.child("versions"),
            json!(versions),
            "must have exactly one version marked as storage version",
        ));
    }
    if let Some(first) = versions
        .first()
        .and_then(|v| v.get("name"))
        .and_then(Value::as_str)
        && let Some(e) = dns1035_join(first)
    {
        errs.push(FieldError::invalid(sp.child("version"), json!(first), e));
    }
    for key in ["plural", "singular", "kind", "listKind"] {
        if c.name_field(key).is_empty() {
            errs.push(FieldError::required(sp.child("names").child(key), ""));
        }
    }
    errs.extend(names(c.names(), &sp.child("names")));
    if internal.schema.lifted {
        errs.extend(version::validation(
            internal.schema.spec,
            internal.any_status(c),
            opts.schema,
            opts.require_pruned_defaults,
            &sp.child("validation"),
        ));
    }
    if internal.subresources.lifted {
        errs.extend(version::subresources(
            internal.subresources.spec,
            &sp.child("subresources"),
        ));
    }
    if internal.columns.lifted {
        for (j, col) in internal
            .columns
            .spec
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            errs.extend(version::column(
                col,
                &sp.child("additionalPrinterColumns").index(j),
            ));
        }
    }
    if internal.selectable.lifted
        && let Some(fields) = internal
            .selectable
            .spec
            .and_then(Value::as_array)
            .filter(|a| !a.is_empty())
    {
        match top_schema {
            None => errs.push(FieldError::invalid(
                sp.child("selectableFields"),
                json!(""),
                "may only be set when validations.schema is included",
            )),
            Some(schema) => {
                let allow = old.is_some_and(|o| {
                    let oi = Internal::of(o);
                    oi.selectable.lifted
                        && too_many_unchanged(
                            oi.selectable.spec,
                            Some(&Value::Array(fields.clone())),
                        )
                });
                errs.extend(version::selectable_fields(
                    fields,
                    &crate::schema::Node::compile(schema),
                    &sp.child("selectableFields"),
                    allow,
                ));
            }
        }
    }
    if c.conversion_strategy() != "None" && c.preserve_unknown_fields() {
        errs.push(FieldError::invalid(
            sp.child("conversion").child("strategy"),
            json!(c.conversion_strategy()),
            "must be None if spec.preserveUnknownFields is true",
        ));
    }
    errs.extend(conversion(
        c,
        opts.require_recognized_conversion_review_version,
        &sp.child("conversion"),
    ));
    errs
}

/// An old list of more than [`MAX_SELECTABLE_FIELDS`] selectable fields stays allowed while
/// unchanged.
fn too_many_unchanged(old: Option<&Value>, new: Option<&Value>) -> bool {
    old.and_then(Value::as_array)
        .is_some_and(|o| o.len() > MAX_SELECTABLE_FIELDS)
        && old == new
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
