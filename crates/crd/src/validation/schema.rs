//! Checks of every node of a CRD schema (upstream `ValidateCustomResourceDefinitionOpenAPISchema`
//! and `specStandardValidatorV3`): supported keywords and types, `uniqueItems`, properties vs
//! additionalProperties, defaults where they are not allowed (top-level `metadata`, `kind`,
//! `apiVersion`; map values of metadata), list and map types and their keys, and each
//! `x-kubernetes-validations` rule (its fields, then — when the subtree has no schema errors
//! and the schema is structural — its compilation, `oldSelf` placement and `optionalOldSelf`).

use apimachinery::field::{ErrorList, FieldError, Path};
use serde_json::{Map, Value, json};

use crate::cel::Rule;
use crate::cel::cost;
use crate::fieldpath;
use crate::schema::Node;

const OPENAPI_TYPES: &[&str] = &["array", "boolean", "integer", "number", "object", "string"];
const REASONS: &[&str] = &[
    "FieldValueDuplicate",
    "FieldValueForbidden",
    "FieldValueInvalid",
    "FieldValueRequired",
];

/// What the walk requires; relaxed on update when the old CRD already broke a rule.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    pub require_valid_property_type: bool,
    pub require_atomic_set_type: bool,
    pub require_map_list_keys_map_set_validation: bool,
    /// CEL rules are compiled (the schema is structural and its defaults valid).
    pub cel: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            require_valid_property_type: true,
            require_atomic_set_type: true,
            require_map_list_keys_map_set_validation: true,
            cel: true,
        }
    }
}

/// Per-node context (upstream's `specStandardValidator` state).
#[derive(Debug, Clone, Default)]
struct Context {
    forbid_defaults: Option<String>,
    inside_resource_meta: bool,
    uncorrelatable: Option<String>,
    /// How many nodes of this schema position one object can hold, less one: the product of
    /// the sizes of the lists and maps above it (upstream's `MaxCardinality`).
    cardinality_less_one: u64,
}

impl Context {
    fn cardinality(&self) -> u64 {
        self.cardinality_less_one.saturating_add(1)
    }

    /// The context of the items or values of the list or map `m`.
    fn under_collection(&self, m: &Map<String, Value>) -> Context {
        let n = self.cardinality().saturating_mul(cost::json_schema_size(m));
        Context {
            cardinality_less_one: n.saturating_sub(1),
            ..self.clone()
        }
    }

    fn forbidding_defaults(&self, reason: &str) -> Context {
        Context {
            forbid_defaults: Some(reason.to_string()),
            ..self.clone()
        }
    }
    fn inside_meta(&self) -> Context {
        Context {
            inside_resource_meta: true,
            ..self.clone()
        }
    }
    fn uncorrelatable_at(&self, path: &Path) -> Context {
        if self.uncorrelatable.is_some() {
            return self.clone();
        }
        Context {
            uncorrelatable: Some(path.to_string()),
            ..self.clone()
        }
    }
}

/// Schema errors, then CEL errors, as upstream orders them.
#[derive(Default)]
struct Errors {
    schema: Vec<FieldError>,
    cel: Vec<FieldError>,
    /// The estimated cost of every rule so far, each times its cardinality.
    cost: u64,
}

impl Errors {
    fn append(&mut self, other: Errors) {
        self.schema.extend(other.schema);
        self.cel.extend(other.cel);
        self.cost = self.cost.saturating_add(other.cost);
    }
}

/// Checks a version's `openAPIV3Schema` (at `path`) node by node.
pub fn validate(schema: &Value, path: &Path, opts: Options) -> ErrorList {
    let mut errs = node(schema, path, &Context::default(), true, opts, opts.cel);
    if errs.cost > cost::STATIC_CRD_LIMIT {
        errs.cel.push(FieldError::forbidden(
            path.clone(),
            cost::over_budget(
                "x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema",
                errs.cost,
                cost::STATIC_CRD_LIMIT,
            ),
        ));
    }
    let mut all = errs.schema;
    all.extend(errs.cel);
    ErrorList::from(all)
}

fn s<'a>(m: &'a Map<String, Value>, k: &str) -> &'a str {
    m.get(k).and_then(Value::as_str).unwrap_or_default()
}

fn non_empty_object(m: &Map<String, Value>, k: &str) -> bool {
    m.get(k)
        .and_then(Value::as_object)
        .is_some_and(|o| !o.is_empty())
}

fn standard(
    m: &Map<String, Value>,
    path: &Path,
    ctx: &Context,
    opts: Options,
    errs: &mut Vec<FieldError>,
) {
    let ty = s(m, "type");
    if opts.require_valid_property_type && !ty.is_empty() && !OPENAPI_TYPES.contains(&ty) {
        errs.push(FieldError::not_supported(
            path.child("type"),
            json!(ty),
            OPENAPI_TYPES,
        ));
    }
    if m.get("default").is_some_and(|d| !d.is_null())
        && let Some(reason) = &ctx.forbid_defaults
    {
        errs.push(FieldError::forbidden(
            path.child("default"),
            format!("must not be set {reason}"),
        ));
    }
    if !s(m, "id").is_empty() {
        errs.push(FieldError::forbidden(
            path.child("id"),
            "id is not supported",
        ));
    }
    if m.contains_key("additionalItems") {
        errs.push(FieldError::forbidden(
            path.child("additionalItems"),
            "additionalItems is not supported",
        ));
    }
    if non_empty_object(m, "patternProperties") {
        errs.push(FieldError::forbidden(
            path.child("patternProperties"),
            "patternProperties is not supported",
        ));
    }
    if non_empty_object(m, "definitions") {
        errs.push(FieldError::forbidden(
            path.child("definitions"),
            "definitions is not supported",
        ));
    }
    if m.contains_key("dependencies") {
        errs.push(FieldError::forbidden(
            path.child("dependencies"),
            "dependencies is not supported",
        ));
    }
    if m.contains_key("$ref") {
        errs.push(FieldError::forbidden(
            path.child("$ref"),
            "$ref is not supported",
        ));
    }
    if ty == "null" {
        errs.push(FieldError::forbidden(
            path.child("type"),
            "type cannot be set to null, use nullable as an alternative",
        ));
    }
    if m.get("items")
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty())
    {
        errs.push(FieldError::forbidden(
            path.child("items"),
            "items must be a schema object and not an array",
        ));
    }
    if ctx.inside_resource_meta && m.get("x-kubernetes-embedded-resource") == Some(&json!(true)) {
        errs.push(FieldError::forbidden(
            path.child("x-kubernetes-embedded-resource"),
            "must not be used inside of resource meta",
        ));
    }
}

fn node(v: &Value, path: &Path, ctx: &Context, is_root: bool, opts: Options, cel: bool) -> Errors {
    let mut out = Errors::default();
    let Value::Object(m) = v else { return out };
    standard(m, path, ctx, opts, &mut out.schema);
    if m.get("uniqueItems") == Some(&json!(true)) {
        out.schema.push(FieldError::forbidden(
            path.child("uniqueItems"),
            "uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
        ));
    }
    let props = m
        .get("properties")
        .and_then(Value::as_object)
        .filter(|p| !p.is_empty());
    if let Some(ap) = m.get("additionalProperties") {
        if props.is_some() && (ap == &json!(false) || ap.is_object()) {
            out.schema.push(FieldError::forbidden(
                path.child("additionalProperties"),
                "additionalProperties and properties are mutual exclusive",
            ));
        }
        let sub = if ctx.inside_resource_meta {
            ctx.forbidding_defaults("inside additionalProperties applying to object metadata")
        } else {
            ctx.clone()
        }
        .under_collection(m);
        out.append(node(
            ap,
            &path.child("additionalProperties"),
            &sub,
            false,
            opts,
            cel,
        ));
    }
    let embedded = m.get("x-kubernetes-embedded-resource") == Some(&json!(true));
    if let Some(props) = props {
        let map_type = m.get("x-kubernetes-map-type").and_then(Value::as_str);
        for (k, child) in props {
            let mut sub = ctx.clone();
            if !matches!(map_type, None | Some("granular") | Some("atomic")) {
                sub = sub.uncorrelatable_at(path);
            }
            if (is_root || embedded) && matches!(k.as_str(), "metadata" | "kind" | "apiVersion") {
                sub = sub.inside_meta();
                if is_root {
                    sub = sub.forbidding_defaults(&format!("in top-level {k}"));
                }
            }
            out.append(node(
                child,
                &path.child("properties").key(k),
                &sub,
                false,
                opts,
                cel,
            ));
        }
    }
    if let Some(not) = m.get("not") {
        out.append(node(not, &path.child("not"), ctx, false, opts, false));
    }
    for key in ["allOf", "oneOf", "anyOf"] {
        for (i, item) in m
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            out.append(node(
                item,
                &path.child(key).index(i),
                ctx,
                false,
                opts,
                false,
            ));
        }
    }
    if let Some(items) = m.get("items") {
        let sub = if m.get("x-kubernetes-list-type").and_then(Value::as_str) != Some("map") {
            ctx.uncorrelatable_at(path)
        } else {
            ctx.clone()
        }
        .under_collection(m);
        match items {
            Value::Array(list) => {
                for (i, item) in list.iter().enumerate() {
                    out.append(node(
                        item,
                        &path.child("items").index(i),
                        &sub,
                        false,
                        opts,
                        cel,
                    ));
                }
            }
            other => out.append(node(other, &path.child("items"), &sub, false, opts, cel)),
        }
    }
    if m.get("x-kubernetes-preserve-unknown-fields") == Some(&json!(false)) {
        out.schema.push(FieldError::invalid(
            path.child("x-kubernetes-preserve-unknown-fields"),
            json!(false),
            "must be true or undefined",
        ));
    }
    list_and_map_types(m, path, opts, &mut out.schema);
    rules(m, path, ctx, cel, &mut out);
    out
}

fn type_error(path: &Path, ty: &str, msg: &str) -> FieldError {
    if ty.is_empty() {
        FieldError::required(path.child("type"), msg)
    } else {
        FieldError::invalid(path.child("type"), json!(ty), msg)
    }
}

fn list_and_map_types(
    m: &Map<String, Value>,
    path: &Path,
    opts: Options,
    errs: &mut Vec<FieldError>,
) {
    let ty = s(m, "type");
    let map_type = m.get("x-kubernetes-map-type").and_then(Value::as_str);
    let list_type = m.get("x-kubernetes-list-type").and_then(Value::as_str);
    let keys: Vec<&str> = m
        .get("x-kubernetes-list-map-keys")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let items = m.get("items");
    let item = items.and_then(Value::as_object);
    if let Some(mt) = map_type {
        if ty != "object" {
            errs.push(type_error(
                path,
                ty,
                "must be object if x-kubernetes-map-type is specified",
            ));
        }
        if mt != "atomic" && mt != "granular" {
            errs.push(FieldError::not_supported(
                path.child("x-kubernetes-map-type"),
                json!(mt),
                &["atomic", "granular"],
            ));
        }
    }
    if let Some(lt) = list_type {
        if ty != "array" {
            errs.push(type_error(
                path,
                ty,
                "must be array if x-kubernetes-list-type is specified",
            ));
        } else if opts.require_atomic_set_type
            && lt == "set"
            && let Some(is) = item
        {
            match s(is, "type") {
                "array" => {
                    let inner = is.get("x-kubernetes-list-type").and_then(Value::as_str);
                    if inner.is_some_and(|t| t != "atomic") {
                        errs.push(FieldError::invalid(
                            path.child("items").child("x-kubernetes-list-type"),
                            json!(inner),
                            "must be atomic as item of a list with x-kubernetes-list-type=set",
                        ));
                    }
                }
                "object"
                    if is.get("x-kubernetes-map-type").and_then(Value::as_str)
                        != Some("atomic") =>
                {
                    errs.push(FieldError::invalid(
                        path.child("items").child("x-kubernetes-map-type"),
                        is.get("x-kubernetes-list-type")
                            .cloned()
                            .unwrap_or(Value::Null),
                        "must be atomic as item of a list with x-kubernetes-list-type=set",
                    ));
                }
                _ => {}
            }
        }
        if !matches!(lt, "atomic" | "set" | "map") {
            errs.push(FieldError::not_supported(
                path.child("x-kubernetes-list-type"),
                json!(lt),
                &["atomic", "set", "map"],
            ));
        }
    }
    if !keys.is_empty() {
        match list_type {
            None => errs.push(FieldError::required(
                path.child("x-kubernetes-list-type"),
                "must be map if x-kubernetes-list-map-keys is non-empty",
            )),
            Some(lt) if lt != "map" => errs.push(FieldError::invalid(
                path.child("x-kubernetes-list-type"),
                json!(lt),
                "must be map if x-kubernetes-list-map-keys is non-empty",
            )),
            _ => {}
        }
    }
    if list_type == Some("map") {
        if keys.is_empty() {
            errs.push(FieldError::required(
                path.child("x-kubernetes-list-map-keys"),
                "must not be empty if x-kubernetes-list-type is map",
            ));
        }
        match items {
            None => errs.push(FieldError::required(
                path.child("items"),
                "must have a schema if x-kubernetes-list-type is map",
            )),
            Some(Value::Array(_)) => errs.push(FieldError::invalid(
                path.child("items"),
                items.cloned().unwrap_or_default(),
                "must only have a single schema if x-kubernetes-list-type is map",
            )),
            _ => {}
        }
        if let Some(is) = item {
            let item_type = s(is, "type");
            if item_type != "object" {
                errs.push(FieldError::invalid(
                    path.child("items").child("type"),
                    json!(item_type),
                    "must be object if parent array's x-kubernetes-list-type is map",
                ));
            } else {
                let item_props = is.get("properties").and_then(Value::as_object);
                let mut seen = Vec::new();
                for k in &keys {
                    match item_props
                        .and_then(|p| p.get(*k))
                        .and_then(Value::as_object)
                    {
                        Some(kp) => {
                            if matches!(s(kp, "type"), "array" | "object") {
                                errs.push(FieldError::invalid(
                                    path.child("items").child("properties").key(k).child("type"),
                                    json!(item_type),
                                    "must be a scalar type if parent array's x-kubernetes-list-type is map",
                                ));
                            }
                        }
                        None => errs.push(FieldError::invalid(
                            path.child("x-kubernetes-list-map-keys"),
                            json!(keys),
                            "entries must all be names of item properties",
                        )),
                    }
                    if seen.contains(k) {
                        errs.push(FieldError::invalid(
                            path.child("x-kubernetes-list-map-keys"),
                            json!(keys),
                            "must not contain duplicate entries",
                        ));
                    }
                    seen.push(*k);
                }
            }
        }
    }
    if opts.require_map_list_keys_map_set_validation {
        map_list_keys(m, path, errs);
    }
}

/// Upstream `validateMapListKeysMapSet`.
pub(crate) fn map_list_keys(m: &Map<String, Value>, path: &Path, errs: &mut Vec<FieldError>) {
    let Some(is) = m.get("items").and_then(Value::as_object) else {
        return;
    };
    let Some(lt) = m.get("x-kubernetes-list-type").and_then(Value::as_str) else {
        return;
    };
    if lt != "set" && lt != "map" {
        return;
    }
    if is.get("nullable") == Some(&json!(true)) {
        errs.push(FieldError::forbidden(
            path.child("items").child("nullable"),
            format!("cannot be nullable when x-kubernetes-list-type is {lt}"),
        ));
    }
    if lt != "map" {
        return;
    }
    let required: Vec<&str> = is
        .get("required")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let props = is.get("properties").and_then(Value::as_object);
    for k in m
        .get("x-kubernetes-list-map-keys")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let Some(k) = k.as_str() else { continue };
        let Some(p) = props.and_then(|p| p.get(k)).and_then(Value::as_object) else {
            continue;
        };
        let key_path = path.child("items").child("properties").key(k);
        if !required.contains(&k) && p.get("default").is_none_or(Value::is_null) {
            errs.push(FieldError::required(
                key_path.child("default"),
                "this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property",
            ));
        }
        if p.get("nullable") == Some(&json!(true)) {
            errs.push(FieldError::forbidden(
                key_path.child("nullable"),
                "this property is in x-kubernetes-list-map-keys, so it cannot be nullable",
            ));
        }
    }
}

fn has_newline(s: &str) -> bool {
    s.contains('\n') || s.contains('\r')
}

fn rules(m: &Map<String, Value>, path: &Path, ctx: &Context, cel: bool, out: &mut Errors) {
    let Some(list) = m.get("x-kubernetes-validations").and_then(Value::as_array) else {
        return;
    };
    if list.is_empty() {
        return;
    }
    let schema_node = Node::compile(&Value::Object(m.clone()));
    for (i, r) in list.iter().enumerate() {
        let at = path.child("x-kubernetes-validations").index(i);
        let f = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or_default();
        let (rule, message, expr, field_path) = (
            f("rule"),
            f("message"),
            f("messageExpression"),
            f("fieldPath"),
        );
        if rule.trim().is_empty() {
            out.schema.push(FieldError::required(
                at.child("rule"),
                "rule is not specified",
            ));
        } else if !message.is_empty() && message.trim().is_empty() {
            out.schema.push(FieldError::invalid(
                at.child("message"),
                json!(message),
                "must be non-empty if specified",
            ));
        } else if has_newline(message.trim()) {
            out.schema.push(FieldError::invalid(
                at.child("message"),
                json!(message),
                "must not contain line breaks",
            ));
        } else if has_newline(rule.trim()) && message.trim().is_empty() {
            out.schema.push(FieldError::required(
                at.child("message"),
                "message must be specified if rule contains line breaks",
            ));
        }
        if !expr.is_empty() && expr.trim().is_empty() {
            out.schema.push(FieldError::required(
                at.child("messageExpression"),
                "messageExpression must be non-empty if specified",
            ));
        }
        if let Some(reason) = r.get("reason").and_then(Value::as_str)
            && !REASONS.contains(&reason)
        {
            out.schema.push(FieldError::not_supported(
                at.child("reason"),
                json!(reason),
                REASONS,
            ));
        }
        if !field_path.is_empty() && field_path.trim().is_empty() {
            out.schema.push(FieldError::invalid(
                at.child("fieldPath"),
                json!(field_path),
                "must be non-empty if specified",
            ));
        }
        if has_newline(field_path) {
            out.schema.push(FieldError::invalid(
                at.child("fieldPath"),
                json!(field_path),
                "must not contain line breaks",
            ));
        }
        if !field_path.is_empty() && fieldpath::resolve(field_path, &schema_node, true).is_err() {
            out.schema.push(FieldError::invalid(
                at.child("fieldPath"),
                json!(field_path),
                "must be a valid path",
            ));
        }
    }
    if !out.schema.is_empty() || !cel {
        return;
    }
    for (i, r) in list.iter().enumerate() {
        let at = path.child("x-kubernetes-validations").index(i);
        let compiled = Rule::compile(r);
        if let Err(e) = &compiled.program {
            out.cel
                .push(FieldError::invalid(at.child("rule"), r.clone(), e.clone()));
        }
        if let Some(Err(e)) = &compiled.message_program {
            out.cel.push(FieldError::invalid(
                at.child("messageExpression"),
                r.clone(),
                e.clone(),
            ));
        }
        if let Ok(program) = &compiled.program {
            let one = cost::estimate(
                program.expression(),
                vec![
                    ("self", cost::Shape::Schema(&schema_node)),
                    ("oldSelf", cost::Shape::Schema(&schema_node)),
                ],
            );
            let total = one.saturating_mul(ctx.cardinality());
            out.cost = out.cost.saturating_add(total);
            if total > cost::STATIC_RULE_LIMIT {
                out.cel.push(FieldError::forbidden(
                    at.child("rule"),
                    cost::over_budget("estimated rule cost", total, cost::STATIC_RULE_LIMIT),
                ));
            }
            if compiled.uses_old_self {
                if let Some(p) = &ctx.uncorrelatable {
                    out.cel.push(FieldError::invalid(
                        at.child("rule"),
                        json!(compiled.rule),
                        format!("oldSelf cannot be used on the uncorrelatable portion of the schema within {p}"),
                    ));
                }
            } else if let Some(o) = compiled.optional_old_self {
                out.cel.push(FieldError::invalid(
                    at.child("optionalOldSelf"),
                    json!(o),
                    "may not be set if oldSelf is not used in rule",
                ));
            }
        }
    }
}

#[cfg(test)]
#[path = "schema_tests.rs"]
mod tests;
