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

mod defaults;
mod schema;
mod structural;
mod version;

use apimachinery::field::{ErrorList, FieldError, Path};
use apimachinery::objectmeta::{
    FIELD_IMMUTABLE, validate_object_meta, validate_object_meta_update,
};
use apimachinery::validation::{NameRule, is_dns1035_label, is_dns1123_subdomain};
use serde_json::{Value, json};

pub use schema::Options as SchemaOptions;
pub use version::MAX_SELECTABLE_FIELDS;

use crate::spec::{Crd, Internal, version_schema};

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

fn metadata(crd: &Value, c: Crd<'_>) -> ErrorList {
    let meta = crd.get("metadata").cloned().unwrap_or_else(|| json!({}));
    let errs = validate_object_meta(&meta, false, NameRule::DnsSubdomain, &Path::new("metadata"));
    // Upstream's name function adds its message after the DNS ones for metadata.name.
    let extra = name_matches(c);
    let mut out: Vec<FieldError> = errs.into_vec();
    let at = out
        .iter()
        .rposition(|e| e.field == "metadata.name" || e.field == "metadata.generateName")
        .map(|i| i + 1)
        .unwrap_or(0);
    for (i, e) in extra.into_iter().enumerate() {
        out.insert(at + i, e);
    }
    ErrorList::from(out)
}

/// `metadata.name` must be `<plural>.<group>`.
fn name_matches(c: Crd<'_>) -> ErrorList {
    let mut errs = ErrorList::new();
    let name = c.name();
    if !name.is_empty() && name != format!("{}.{}", c.plural(), c.group()) {
        errs.push(FieldError::invalid(
            "metadata.name",
            json!(name),
            r#"must be spec.names.plural+"."+spec.group"#,
        ));
    }
    errs
}

/// Status names, stored versions, API approval and preserveUnknownFields.
fn rest(c: Crd<'_>, old: Option<Crd<'_>>) -> ErrorList {
    let mut errs = names(
        c.status().get("acceptedNames").unwrap_or(&Value::Null),
        &Path::new("status.acceptedNames"),
    );
    errs.extend(stored_versions(c));
    errs.extend(api_approval(c, old));
    let old_preserves = old.is_some_and(|o| o.preserve_unknown_fields());
    if !old_preserves && c.preserve_unknown_fields() {
        errs.push(FieldError::invalid(
            "spec.preserveUnknownFields",
            json!(true),
            "cannot set to true, set x-kubernetes-preserve-unknown-fields to true in spec.versions[*].schema instead",
        ));
    }
    errs
}

fn dns1035_join(v: &str) -> Option<String> {
    let e = is_dns1035_label(v);
    (!e.is_empty()).then(|| e.join(","))
}

/// Upstream `ValidateCustomResourceDefinitionNames` (spec names or accepted names).
fn names(n: &Value, path: &Path) -> ErrorList {
    let mut errs = ErrorList::new();
    let f = |k: &str| n.get(k).and_then(Value::as_str).unwrap_or_default();
    for key in ["plural", "singular"] {
        if !f(key).is_empty()
            && let Some(e) = dns1035_join(f(key))
        {
            errs.push(FieldError::invalid(path.child(key), json!(f(key)), e));
        }
    }
    for key in ["kind", "listKind"] {
        if !f(key).is_empty()
            && let Some(e) = dns1035_join(&f(key).to_lowercase())
        {
            errs.push(FieldError::invalid(
                path.child(key),
                json!(f(key)),
                format!("may have mixed case, but should otherwise match: {e}"),
            ));
        }
    }
    for (i, s) in Crd::string_list(n.get("shortNames").unwrap_or(&Value::Null))
        .iter()
        .enumerate()
    {
        if let Some(e) = dns1035_join(s) {
            errs.push(FieldError::invalid(
                path.child("shortNames").index(i),
                json!(s),
                e,
            ));
        }
    }
    if !f("kind").is_empty() && f("kind") == f("listKind") {
        errs.push(FieldError::invalid(
            path.child("listKind"),
            json!(f("listKind")),
            "kind and listKind may not be the same",
        ));
    }
    for (i, s) in Crd::string_list(n.get("categories").unwrap_or(&Value::Null))
        .iter()
        .enumerate()
    {
        if let Some(e) = dns1035_join(s) {
            errs.push(FieldError::invalid(
                path.child("categories").index(i),
                json!(s),
                e,
            ));
        }
    }
    errs
}

/// Upstream `ValidateCustomResourceDefinitionStoredVersions`.
fn stored_versions(c: Crd<'_>) -> ErrorList {
    let mut errs = ErrorList::new();
    let path = Path::new("status.storedVersions");
    let stored = Crd::string_list(c.status().get("storedVersions").unwrap_or(&Value::Null));
    if stored.is_empty() {
        errs.push(FieldError::invalid(
            path,
            json!(stored),
            "must have at least one stored version",
        ));
        return errs;
    }
    let names: Vec<&str> = c
        .versions()
        .iter()
        .filter_map(|v| v.get("name").and_then(Value::as_str))
        .collect();
    for v in c.versions() {
        let name = v.get("name").and_then(Value::as_str).unwrap_or_default();
        if v.get("storage") == Some(&json!(true)) && !stored.iter().any(|s| s == name) {
            errs.push(FieldError::invalid(
                path.clone(),
                json!(stored),
                format!("must have the storage version {name}"),
            ));
        }
    }
    for (i, s) in stored.iter().enumerate() {
        if !names.contains(&s.as_str()) {
            errs.push(FieldError::invalid(
                path.index(i),
                json!(s),
                format!("missing from spec.versions; {s} was previously a storage version, and must remain in spec.versions until a storage migration ensures no data remains persisted in {s} and removes {s} from status.storedVersions"),
            ));
        }
    }
    errs
}

const APPROVAL: &str = "api-approved.kubernetes.io";

/// The API approval state of `k8s.io`/`kubernetes.io` groups: (state, reason).
fn approval(c: Crd<'_>) -> (&'static str, String) {
    let v =
        c.0.pointer("/metadata/annotations")
            .and_then(|a| a.get(APPROVAL))
            .and_then(Value::as_str)
            .unwrap_or_default();
    if v.is_empty() {
        return (
            "missing",
            format!(
                "protected groups must have approval annotation {APPROVAL:?}, see https://github.com/kubernetes/enhancements/pull/1111"
            ),
        );
    }
    if v.starts_with("unapproved") {
        return ("bypassed", format!("not approved: {v:?}"));
    }
    let url_ok = v.split_once("://").is_some_and(|(scheme, rest)| {
        !scheme.is_empty() && !rest.is_empty() && !rest.starts_with('/')
    });
    if url_ok {
        return ("approved", format!("approved in {v}"));
    }
    (
        "invalid",
        format!(
            "protected groups must have approval annotation {APPROVAL:?} with either a URL or a reason starting with \"unapproved\", see https://github.com/kubernetes/enhancements/pull/1111"
        ),
    )
}

fn api_approval(c: Crd<'_>, old: Option<Crd<'_>>) -> ErrorList {
    let mut errs = ErrorList::new();
    let g = c.group();
    let protected = g == "k8s.io"
        || g.ends_with(".k8s.io")
        || g == "kubernetes.io"
        || g.ends_with(".kubernetes.io");
    if !protected {
        return errs;
    }
    let (state, reason) = approval(c);
    if old.is_some_and(|o| approval(o).0 == state) {
        return errs;
    }
    let path = Path::new("metadata.annotations").key(APPROVAL);
    let value =
        c.0.pointer("/metadata/annotations")
            .and_then(|a| a.get(APPROVAL))
            .cloned()
            .unwrap_or(json!(""));
    match state {
        "missing" => errs.push(FieldError::required(path, reason)),
        "invalid" => errs.push(FieldError::invalid(path, value, reason)),
        _ => {}
    }
    errs
}

fn conversion_review_versions(c: Crd<'_>) -> Vec<String> {
    Crd::string_list(
        c.spec()
            .pointer("/conversion/webhook/conversionReviewVersions")
            .unwrap_or(&Value::Null),
    )
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

/// Upstream `validateCustomResourceConversion` (v1's `webhook.clientConfig` and
/// `webhook.conversionReviewVersions` are the internal `webhookClientConfig` and
/// `conversionReviewVersions`).
fn conversion(c: Crd<'_>, require_recognized: bool, path: &Path) -> ErrorList {
    let mut errs = ErrorList::new();
    let Some(conv) = c.spec().get("conversion").filter(|v| !v.is_null()) else {
        return errs;
    };
    let strategy = conv
        .get("strategy")
        .and_then(Value::as_str)
        .unwrap_or_default();
    match strategy {
        "" => errs.push(FieldError::required(path.child("strategy"), "")),
        "None" | "Webhook" => {}
        other => errs.push(FieldError::not_supported(
            path.child("strategy"),
            json!(other),
            &["None", "Webhook"],
        )),
    }
    let client = conv
        .pointer("/webhook/clientConfig")
        .filter(|v| !v.is_null());
    let review = Crd::string_list(
        conv.pointer("/webhook/conversionReviewVersions")
            .unwrap_or(&Value::Null),
    );
    let cc_path = path.child("webhookClientConfig");
    if strategy == "Webhook" {
        match client {
            None => errs.push(FieldError::required(
                cc_path,
                "required when strategy is set to Webhook",
            )),
            Some(cc) => {
                let url = cc.get("url").and_then(Value::as_str);
                let service = cc.get("service").filter(|v| !v.is_null());
                match (url, service) {
                    (Some(u), None) => errs.extend(webhook_url(u, &cc_path.child("url"))),
                    (None, Some(s)) => errs.extend(webhook_service(s, &cc_path.child("service"))),
                    _ => errs.push(FieldError::required(
                        cc_path,
                        "exactly one of url or service is required",
                    )),
                }
            }
        }
        let rp = path.child("conversionReviewVersions");
        if review.is_empty() {
            errs.push(FieldError::required(rp, ""));
        } else {
            let mut seen: Vec<&str> = Vec::new();
            for (i, v) in review.iter().enumerate() {
                if seen.contains(&v.as_str()) {
                    errs.push(FieldError::invalid(
                        rp.index(i),
                        json!(v),
                        "duplicate version",
                    ));
                    continue;
                }
                seen.push(v);
                for e in is_dns1035_label(v) {
                    errs.push(FieldError::invalid(rp.index(i), json!(v), e));
                }
            }
            if require_recognized && !review.iter().any(|v| v == "v1" || v == "v1beta1") {
                errs.push(FieldError::invalid(
                    rp,
                    json!(review),
                    "must include at least one of v1, v1beta1",
                ));
            }
        }
    } else {
        if client.is_some() {
            errs.push(FieldError::forbidden(
                cc_path,
                "should not be set when strategy is not set to Webhook",
            ));
        }
        if !review.is_empty() {
            errs.push(FieldError::forbidden(
                path.child("conversionReviewVersions"),
                "should not be set when strategy is not set to Webhook",
            ));
        }
    }
    errs
}

/// Upstream `webhook.ValidateWebhookURL` with https required.
fn webhook_url(url: &str, path: &Path) -> ErrorList {
    let mut errs = ErrorList::new();
    const FORM: &str = "; desired format: https://host[/path]";
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let (rest, fragment) = rest.split_once('#').unwrap_or((rest, ""));
    let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
    let authority = if scheme.is_empty() {
        ""
    } else {
        rest.split('/').next().unwrap_or_default()
    };
    let (user, host) = match authority.rsplit_once('@') {
        Some((u, h)) => (Some(u), h),
        None => (None, authority),
    };
    if scheme != "https" {
        errs.push(FieldError::invalid(
            path.clone(),
            json!(scheme),
            format!("'https' is the only allowed URL scheme{FORM}"),
        ));
    }
    if host.is_empty() {
        errs.push(FieldError::invalid(
            path.clone(),
            json!(host),
            format!("host must be specified{FORM}"),
        ));
    }
    if let Some(u) = user {
        errs.push(FieldError::invalid(
            path.clone(),
            json!(u),
            "user information is not permitted in the URL",
        ));
    }
    if !fragment.is_empty() {
        errs.push(FieldError::invalid(
            path.clone(),
            json!(fragment),
            "fragments are not permitted in the URL",
        ));
    }
    if !query.is_empty() {
        errs.push(FieldError::invalid(
            path.clone(),
            json!(query),
            "query parameters are not permitted in the URL",
        ));
    }
    errs
}

/// Upstream `webhook.ValidateWebhookService`, called the way the CRD validation calls it —
/// with name and namespace swapped, so a missing name is reported at `namespace`.
fn webhook_service(s: &Value, path: &Path) -> ErrorList {
    let mut errs = ErrorList::new();
    let f = |k: &str| s.get(k).and_then(Value::as_str).unwrap_or_default();
    let (namespace_arg, name_arg) = (f("name"), f("namespace"));
    if name_arg.is_empty() {
        errs.push(FieldError::required(path.child("name"), ""));
    }
    if namespace_arg.is_empty() {
        errs.push(FieldError::required(path.child("namespace"), ""));
    }
    let port = s.get("port").and_then(Value::as_i64).unwrap_or(443);
    if !(1..=65535).contains(&port) {
        errs.push(FieldError::invalid(
            path.child("port"),
            json!(port),
            "port is not valid: must be between 1 and 65535, inclusive",
        ));
    }
    let Some(url_path) = s.get("path").and_then(Value::as_str) else {
        return errs;
    };
    if url_path.is_empty() || url_path == "/" {
        return errs;
    }
    if url_path == "//" {
        errs.push(FieldError::invalid(
            path.child("path"),
            json!(url_path),
            "segment[0] may not be empty",
        ));
        return errs;
    }
    if !url_path.starts_with('/') {
        errs.push(FieldError::invalid(
            path.child("path"),
            json!(url_path),
            "must start with a '/'",
        ));
    }
    let check = url_path.get(1..).unwrap_or_default();
    let check = check.strip_suffix('/').unwrap_or(check);
    for (i, step) in check.split('/').enumerate() {
        if step.is_empty() {
            errs.push(FieldError::invalid(
                path.child("path"),
                json!(url_path),
                format!("segment[{i}] may not be empty"),
            ));
            continue;
        }
        for e in is_dns1123_subdomain(step) {
            errs.push(FieldError::invalid(
                path.child("path"),
                json!(url_path),
                format!("segment[{i}]: {e}"),
            ));
        }
    }
    errs
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
