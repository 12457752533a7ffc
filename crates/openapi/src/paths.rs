//! The `paths` of an OpenAPI v3 document: every REST operation of one resource.
//!
//! Namespaced resources get `namespaces/{namespace}/<plural>[/{name}[/<sub>]]`, a cross-namespace
//! list and the legacy `watch/` forms; cluster-scoped ones the same without the namespace.
//! Every operation carries `operationId`, `x-kubernetes-action` and
//! `x-kubernetes-group-version-kind`, which kubectl reads to find a kind's schema (`explain`)
//! and whether its PATCH accepts `fieldValidation` (`apply`, `create`, `replace`).

use serde_json::{Map, Value, json};

use crate::definitions::reference;
use crate::params;

/// One resource of a group-version, as the paths need it.
pub(crate) struct Endpoint<'a> {
    pub group: &'a str,
    pub version: &'a str,
    pub kind: &'a str,
    pub plural: &'a str,
    pub namespaced: bool,
    pub verbs: &'a [&'a str],
    /// Definition names of the kind and of its list.
    pub definition: String,
    pub list_definition: Option<String>,
    pub subresources: Vec<SubEndpoint<'a>>,
    /// Built-in: strategic merge patch and protobuf are offered.
    pub builtin: bool,
}

/// A subresource and the definition of what it answers with.
pub(crate) struct SubEndpoint<'a> {
    pub name: &'a str,
    pub group: &'a str,
    pub version: &'a str,
    pub kind: &'a str,
    pub verbs: &'a [&'a str],
    /// `None` for plain-text answers (`pods/log`).
    pub definition: Option<String>,
}

pub(crate) const STATUS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Status";
pub(crate) const DELETE_OPTIONS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions";
pub(crate) const WATCH_EVENT: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent";
pub(crate) const PATCH: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Patch";

/// The URL prefix of a group-version: `/api/v1` or `/apis/<group>/<version>`.
pub(crate) fn prefix(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("/api/{version}")
    } else {
        format!("/apis/{group}/{version}")
    }
}

/// The operationId infix of a group-version: `CoreV1`, `AppsV1`, `RbacAuthorizationV1`,
/// `CertManagerIoV1` (upstream drops a `.k8s.io` suffix and camel-cases the rest).
pub(crate) fn operation_infix(group: &str, version: &str) -> String {
    let group = if group.is_empty() { "core" } else { group };
    let group = group.strip_suffix(".k8s.io").unwrap_or(group);
    let mut out = camel(group);
    out.push_str(&capitalize(version));
    out
}

/// The tag of a group-version: `core_v1`, `apps_v1`, `rbacAuthorization_v1`.
pub(crate) fn tag(group: &str, version: &str) -> String {
    let infix = operation_infix(group, version);
    let group_part = &infix[..infix.len() - version.len()];
    let mut chars = group_part.chars();
    let lowered: String = chars
        .next()
        .map(|c| c.to_ascii_lowercase())
        .into_iter()
        .chain(chars)
        .collect();
    format!("{lowered}_{version}")
}

fn camel(s: &str) -> String {
    s.split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|p| !p.is_empty())
        .map(capitalize)
        .collect()
}

fn capitalize(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) => c.to_ascii_uppercase().to_string() + chars.as_str(),
        None => String::new(),
    }
}

/// Adds every operation of a resource to `paths`.
pub(crate) fn add(paths: &mut Map<String, Value>, e: &Endpoint) {
    let base = prefix(e.group, e.version);
    let infix = operation_infix(e.group, e.version);
    let tags = json!([tag(e.group, e.version)]);
    let scope = if e.namespaced { "Namespaced" } else { "" };
    let gvk = json!({ "group": e.group, "kind": e.kind, "version": e.version });
    let collection = if e.namespaced {
        format!("{base}/namespaces/{{namespace}}/{}", e.plural)
    } else {
        format!("{base}/{}", e.plural)
    };
    let item = format!("{collection}/{{name}}");
    let has = |verb: &str| e.verbs.contains(&verb);
    let op = |verb: &str, id: String, action: &str, gvk: &Value| {
        let mut o = Map::new();
        o.insert("description".into(), format!("{verb} {}", e.kind).into());
        o.insert("operationId".into(), id.into());
        o.insert("tags".into(), tags.clone());
        o.insert("x-kubernetes-action".into(), action.into());
        o.insert("x-kubernetes-group-version-kind".into(), gvk.clone());
        o
    };
    let kind_ref = || reference(&e.definition);

    // The collection: list, create, deletecollection.
    let mut coll = Map::new();
    if let (true, Some(list)) = (has("list"), &e.list_definition) {
        let mut o = op(
            "list or watch objects of kind",
            format!("list{infix}{scope}{}", e.kind),
            "list",
            &gvk,
        );
        o.insert("parameters".into(), params::queries(params::LIST));
        o.insert(
            "responses".into(),
            responses(&[("200", "OK")], Some(&reference(list)), e.builtin, true),
        );
        coll.insert("get".into(), o.into());
    }
    if has("create") {
        let mut o = op(
            "create",
            format!("create{infix}{scope}{}", e.kind),
            "post",
            &gvk,
        );
        o.insert("parameters".into(), params::queries(params::WRITE));
        o.insert("requestBody".into(), body(&kind_ref()));
        let codes = [("200", "OK"), ("201", "Created"), ("202", "Accepted")];
        o.insert(
            "responses".into(),
            responses(&codes, Some(&kind_ref()), e.builtin, false),
        );
        coll.insert("post".into(), o.into());
    }
    if has("deletecollection") {
        let mut o = op(
            "delete collection of",
            format!("delete{infix}Collection{scope}{}", e.kind),
            "deletecollection",
            &gvk,
        );
        o.insert(
            "parameters".into(),
            params::queries(params::DELETE_COLLECTION),
        );
        o.insert("requestBody".into(), delete_body());
        o.insert(
            "responses".into(),
            responses(&[("200", "OK")], Some(&reference(STATUS)), e.builtin, false),
        );
        coll.insert("delete".into(), o.into());
    }
    insert_path(paths, collection.clone(), coll, e.namespaced, false, e.kind);

    // The object: read, replace, patch, delete.
    let mut obj = Map::new();
    let single = format!("{infix}{scope}{}", e.kind);
    if has("get") {
        let mut o = op("read the specified", format!("read{single}"), "get", &gvk);
        o.insert(
            "responses".into(),
            responses(&[("200", "OK")], Some(&kind_ref()), e.builtin, false),
        );
        obj.insert("get".into(), o.into());
    }
    if has("update") {
        obj.insert(
            "put".into(),
            replace_op(
                op(
                    "replace the specified",
                    format!("replace{single}"),
                    "put",
                    &gvk,
                ),
                &kind_ref(),
                e.builtin,
            ),
        );
    }
    if has("patch") {
        obj.insert(
            "patch".into(),
            patch_op(
                op(
                    "partially update the specified",
                    format!("patch{single}"),
                    "patch",
                    &gvk,
                ),
                &kind_ref(),
                e.builtin,
            ),
        );
    }
    if has("delete") {
        let mut o = op("delete", format!("delete{single}"), "delete", &gvk);
        o.insert("parameters".into(), params::queries(params::DELETE));
        o.insert("requestBody".into(), delete_body());
        let codes = [("200", "OK"), ("202", "Accepted")];
        o.insert(
            "responses".into(),
            responses(&codes, Some(&reference(STATUS)), e.builtin, false),
        );
        obj.insert("delete".into(), o.into());
    }
    insert_path(paths, item.clone(), obj, e.namespaced, true, e.kind);

    // Subresources.
    for sub in &e.subresources {
        let sub_gvk = json!({ "group": sub.group, "kind": sub.kind, "version": sub.version });
        let id = format!("{single}{}", capitalize(sub.name));
        let target = sub.definition.as_deref().map(reference);
        let mut ops = Map::new();
        let sub_has = |verb: &str| sub.verbs.contains(&verb);
        if sub_has("get") {
            let mut o = op("read", format!("read{id}"), "get", &sub_gvk);
            if sub.definition.is_none() {
                o.insert("parameters".into(), params::queries(params::POD_LOG));
            }
            o.insert(
                "responses".into(),
                responses(&[("200", "OK")], target.as_ref(), e.builtin, false),
            );
            ops.insert("get".into(), o.into());
        }
        if let Some(target) = &target {
            if sub_has("update") {
                ops.insert(
                    "put".into(),
                    replace_op(
                        op("replace", format!("replace{id}"), "put", &sub_gvk),
                        target,
                        e.builtin,
                    ),
                );
            }
            if sub_has("patch") {
                ops.insert(
                    "patch".into(),
                    patch_op(
                        op("partially update", format!("patch{id}"), "patch", &sub_gvk),
                        target,
                        e.builtin,
                    ),
                );
            }
            if sub_has("create") {
                let mut o = op("create", format!("create{id}"), "post", &sub_gvk);
                o.insert("parameters".into(), params::queries(params::WRITE));
                o.insert("requestBody".into(), body(target));
                let codes = [("200", "OK"), ("201", "Created"), ("202", "Accepted")];
                o.insert(
                    "responses".into(),
                    responses(&codes, Some(target), e.builtin, false),
                );
                ops.insert("post".into(), o.into());
            }
        }
        insert_path(
            paths,
            format!("{item}/{}", sub.name),
            ops,
            e.namespaced,
            true,
            e.kind,
        );
    }

    // Lists across namespaces and the legacy watch endpoints.
    if let (true, true, Some(list)) = (e.namespaced, has("list"), &e.list_definition) {
        let mut o = op(
            "list or watch objects of kind",
            format!("list{infix}{}ForAllNamespaces", e.kind),
            "list",
            &gvk,
        );
        o.insert(
            "responses".into(),
            responses(&[("200", "OK")], Some(&reference(list)), e.builtin, true),
        );
        let mut ops = Map::new();
        ops.insert("get".into(), o.into());
        ops.insert("parameters".into(), list_path_parameters(None, false));
        paths.insert(format!("{base}/{}", e.plural), ops.into());
    }
    if has("watch") {
        let watch_base = if e.namespaced {
            format!("{base}/watch/namespaces/{{namespace}}/{}", e.plural)
        } else {
            format!("{base}/watch/{}", e.plural)
        };
        let event = reference(WATCH_EVENT);
        let watch = |id: String, action: &str, name: Option<&str>, namespaced: bool| {
            let mut o = op("watch changes to", id, action, &gvk);
            o.insert("responses".into(), watch_responses(&event, e.builtin));
            let mut ops = Map::new();
            ops.insert("get".into(), o.into());
            ops.insert("parameters".into(), list_path_parameters(name, namespaced));
            Value::Object(ops)
        };
        paths.insert(
            watch_base.clone(),
            watch(
                format!("watch{single}List"),
                "watchlist",
                None,
                e.namespaced,
            ),
        );
        paths.insert(
            format!("{watch_base}/{{name}}"),
            watch(
                format!("watch{single}"),
                "watch",
                Some(e.kind),
                e.namespaced,
            ),
        );
        if e.namespaced {
            paths.insert(
                format!("{base}/watch/{}", e.plural),
                watch(
                    format!("watch{infix}{}ListForAllNamespaces", e.kind),
                    "watchlist",
                    None,
                    false,
                ),
            );
        }
    }
}

/// The path-level parameters of a list-style path: name, namespace, pretty and list options.
fn list_path_parameters(name: Option<&str>, namespaced: bool) -> Value {
    let mut out = Vec::new();
    if let Some(kind) = name {
        out.push(params::name_of(kind));
    }
    if namespaced {
        out.push(params::namespace());
    }
    out.push(params::query(params::PRETTY));
    out.extend(params::LIST.iter().copied().map(params::query));
    Value::Array(out)
}

fn insert_path(
    paths: &mut Map<String, Value>,
    path: String,
    mut ops: Map<String, Value>,
    namespaced: bool,
    named: bool,
    kind: &str,
) {
    if ops.is_empty() {
        return;
    }
    let mut parameters = Vec::new();
    if named {
        parameters.push(params::name_of(kind));
    }
    if namespaced {
        parameters.push(params::namespace());
    }
    parameters.push(params::query(params::PRETTY));
    ops.insert("parameters".into(), Value::Array(parameters));
    paths.insert(path, ops.into());
}

fn replace_op(mut o: Map<String, Value>, target: &Value, builtin: bool) -> Value {
    o.insert("parameters".into(), params::queries(params::WRITE));
    o.insert("requestBody".into(), body(target));
    o.insert(
        "responses".into(),
        responses(
            &[("200", "OK"), ("201", "Created")],
            Some(target),
            builtin,
            false,
        ),
    );
    o.into()
}

fn patch_op(mut o: Map<String, Value>, target: &Value, builtin: bool) -> Value {
    o.insert("parameters".into(), params::queries(params::PATCH));
    let patch = json!({ "schema": reference(PATCH) });
    let mut content = Map::new();
    content.insert("application/json-patch+json".into(), patch.clone());
    content.insert("application/merge-patch+json".into(), patch.clone());
    if builtin {
        content.insert(
            "application/strategic-merge-patch+json".into(),
            patch.clone(),
        );
    }
    content.insert("application/apply-patch+yaml".into(), patch);
    o.insert(
        "requestBody".into(),
        json!({ "content": content, "required": true }),
    );
    o.insert(
        "responses".into(),
        responses(
            &[("200", "OK"), ("201", "Created")],
            Some(target),
            builtin,
            false,
        ),
    );
    o.into()
}

fn body(schema: &Value) -> Value {
    json!({ "content": { "*/*": { "schema": schema } }, "required": true })
}

fn delete_body() -> Value {
    json!({ "content": { "*/*": { "schema": reference(DELETE_OPTIONS) } } })
}

/// Responses with a schema in every media type the server answers in (plain text when
/// `schema` is `None`), plus 401.
fn responses(
    codes: &[(&str, &str)],
    schema: Option<&Value>,
    builtin: bool,
    streams: bool,
) -> Value {
    let content = match schema {
        Some(schema) => {
            let entry = json!({ "schema": schema });
            let mut content = Map::new();
            content.insert("application/json".into(), entry.clone());
            content.insert("application/yaml".into(), entry.clone());
            if builtin {
                content.insert("application/vnd.kubernetes.protobuf".into(), entry.clone());
            }
            if streams {
                content.insert("application/json;stream=watch".into(), entry.clone());
                if builtin {
                    content.insert(
                        "application/vnd.kubernetes.protobuf;stream=watch".into(),
                        entry,
                    );
                }
            }
            content
        }
        None => {
            let mut content = Map::new();
            content.insert(
                "text/plain".into(),
                json!({ "schema": { "type": "string" } }),
            );
            content
        }
    };
    let mut out = Map::new();
    for (code, description) in codes {
        out.insert(
            (*code).into(),
            json!({ "content": content, "description": description }),
        );
    }
    out.insert("401".into(), json!({ "description": "Unauthorized" }));
    out.into()
}

fn watch_responses(event: &Value, builtin: bool) -> Value {
    responses(&[("200", "OK")], Some(event), builtin, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operation_infixes_follow_upstream() {
        assert_eq!(operation_infix("", "v1"), "CoreV1");
        assert_eq!(operation_infix("apps", "v1"), "AppsV1");
        assert_eq!(
            operation_infix("rbac.authorization.k8s.io", "v1"),
            "RbacAuthorizationV1"
        );
        assert_eq!(
            operation_infix("cert-manager.io", "v1alpha2"),
            "CertManagerIoV1alpha2"
        );
        assert_eq!(
            tag("rbac.authorization.k8s.io", "v1"),
            "rbacAuthorization_v1"
        );
        assert_eq!(tag("", "v1"), "core_v1");
    }
}
