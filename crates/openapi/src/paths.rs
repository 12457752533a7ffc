//! The `paths` of an OpenAPI v3 document: every REST operation of one resource.
//!
//! Namespaced resources get `namespaces/{namespace}/<plural>[/{name}[/<sub>]]`, a cross-namespace
//! list and the legacy `watch/` forms; cluster-scoped ones the same without the namespace.
//! Every operation carries `operationId`, `x-kubernetes-action` and
//! `x-kubernetes-group-version-kind`, which kubectl reads to find a kind's schema (`explain`)
//! and whether its PATCH accepts `fieldValidation` (`apply`, `create`, `replace`).

use serde_json::{Map, Value, json};

use crate::definitions::reference;
use crate::media::{self, CREATED, DELETED, OK, STATUS, UPDATED, WATCH_EVENT};
use crate::naming::{capitalize, operation_infix, prefix, tag};
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

/// Adds every operation of a resource to `paths`.
pub(crate) fn add(paths: &mut Map<String, Value>, e: &Endpoint) {
    let ops = Operations::new(e);
    let base = prefix(e.group, e.version);
    let collection = if e.namespaced {
        format!("{base}/namespaces/{{namespace}}/{}", e.plural)
    } else {
        format!("{base}/{}", e.plural)
    };
    let item = format!("{collection}/{{name}}");
    insert(paths, &collection, ops.collection(), e.namespaced, None);
    insert(paths, &item, ops.object(), e.namespaced, Some(e.kind));
    for sub in &e.subresources {
        let path = format!("{item}/{}", sub.name);
        insert(
            paths,
            &path,
            ops.subresource(sub),
            e.namespaced,
            Some(e.kind),
        );
    }
    if let (true, Some(list)) = (e.namespaced && e.has("list"), &e.list_definition) {
        let id = format!("list{}{}ForAllNamespaces", ops.infix, e.kind);
        let mut o = ops.op("list or watch objects of kind", id, "list", &ops.gvk);
        o.insert(
            "responses".into(),
            media::responses(OK, Some(&reference(list)), e.builtin, true),
        );
        paths.insert(format!("{base}/{}", e.plural), list_item(o, None, false));
    }
    if e.has("watch") {
        let watch_base = if e.namespaced {
            format!("{base}/watch/namespaces/{{namespace}}/{}", e.plural)
        } else {
            format!("{base}/watch/{}", e.plural)
        };
        let single = &ops.single;
        let list = ops.watch(format!("watch{single}List"), "watchlist");
        paths.insert(watch_base.clone(), list_item(list, None, e.namespaced));
        let one = ops.watch(format!("watch{single}"), "watch");
        paths.insert(
            format!("{watch_base}/{{name}}"),
            list_item(one, Some(e.kind), e.namespaced),
        );
        if e.namespaced {
            let all = ops.watch(
                format!("watch{}{}ListForAllNamespaces", ops.infix, e.kind),
                "watchlist",
            );
            paths.insert(
                format!("{base}/watch/{}", e.plural),
                list_item(all, None, false),
            );
        }
    }
}

impl Endpoint<'_> {
    fn has(&self, verb: &str) -> bool {
        self.verbs.contains(&verb)
    }
}

/// Builds the operations of one resource.
struct Operations<'e> {
    e: &'e Endpoint<'e>,
    /// `AppsV1`.
    infix: String,
    /// `AppsV1NamespacedDeployment`.
    single: String,
    tags: Value,
    gvk: Value,
}

impl<'e> Operations<'e> {
    fn new(e: &'e Endpoint<'e>) -> Self {
        let infix = operation_infix(e.group, e.version);
        let scope = if e.namespaced { "Namespaced" } else { "" };
        Operations {
            single: format!("{infix}{scope}{}", e.kind),
            infix,
            tags: json!([tag(e.group, e.version)]),
            gvk: json!({ "group": e.group, "kind": e.kind, "version": e.version }),
            e,
        }
    }

    fn op(&self, verb: &str, id: String, action: &str, gvk: &Value) -> Map<String, Value> {
        let mut o = Map::new();
        o.insert(
            "description".into(),
            format!("{verb} {}", self.e.kind).into(),
        );
        o.insert("operationId".into(), id.into());
        o.insert("tags".into(), self.tags.clone());
        o.insert("x-kubernetes-action".into(), action.into());
        o.insert("x-kubernetes-group-version-kind".into(), gvk.clone());
        o
    }

    /// list, create, deletecollection.
    fn collection(&self) -> Map<String, Value> {
        let (e, single) = (self.e, &self.single);
        let mut ops = Map::new();
        if let (true, Some(list)) = (e.has("list"), &e.list_definition) {
            let mut o = self.op(
                "list or watch objects of kind",
                format!("list{single}"),
                "list",
                &self.gvk,
            );
            o.insert("parameters".into(), params::queries(params::LIST));
            o.insert(
                "responses".into(),
                media::responses(OK, Some(&reference(list)), e.builtin, true),
            );
            ops.insert("get".into(), o.into());
        }
        if e.has("create") {
            let o = self.op("create", format!("create{single}"), "post", &self.gvk);
            ops.insert("post".into(), self.create(o, &reference(&e.definition)));
        }
        if e.has("deletecollection") {
            let id = format!(
                "delete{}Collection{}",
                self.infix,
                &single[self.infix.len()..]
            );
            let mut o = self.op("delete collection of", id, "deletecollection", &self.gvk);
            o.insert(
                "parameters".into(),
                params::queries(params::DELETE_COLLECTION),
            );
            o.insert("requestBody".into(), media::delete_body());
            o.insert(
                "responses".into(),
                media::responses(OK, Some(&reference(STATUS)), e.builtin, false),
            );
            ops.insert("delete".into(), o.into());
        }
        ops
    }

    /// read, replace, patch, delete.
    fn object(&self) -> Map<String, Value> {
        let (e, single) = (self.e, &self.single);
        let kind = reference(&e.definition);
        let mut ops = Map::new();
        if e.has("get") {
            let mut o = self.op(
                "read the specified",
                format!("read{single}"),
                "get",
                &self.gvk,
            );
            o.insert(
                "responses".into(),
                media::responses(OK, Some(&kind), e.builtin, false),
            );
            ops.insert("get".into(), o.into());
        }
        if e.has("update") {
            let o = self.op(
                "replace the specified",
                format!("replace{single}"),
                "put",
                &self.gvk,
            );
            ops.insert("put".into(), self.replace(o, &kind));
        }
        if e.has("patch") {
            let o = self.op(
                "partially update the specified",
                format!("patch{single}"),
                "patch",
                &self.gvk,
            );
            ops.insert("patch".into(), self.patch(o, &kind));
        }
        if e.has("delete") {
            let mut o = self.op("delete", format!("delete{single}"), "delete", &self.gvk);
            o.insert("parameters".into(), params::queries(params::DELETE));
            o.insert("requestBody".into(), media::delete_body());
            o.insert(
                "responses".into(),
                media::responses(DELETED, Some(&reference(STATUS)), e.builtin, false),
            );
            ops.insert("delete".into(), o.into());
        }
        ops
    }

    /// The operations of `<item>/<subresource>`, named after it (`readAppsV1NamespacedDeploymentScale`).
    fn subresource(&self, sub: &SubEndpoint) -> Map<String, Value> {
        let gvk = json!({ "group": sub.group, "kind": sub.kind, "version": sub.version });
        if let Some(queries) = params::connect(self.e.plural, sub.name) {
            return self.connect(sub, queries, &gvk);
        }
        let id = format!("{}{}", self.single, capitalize(sub.name));
        let target = sub.definition.as_deref().map(reference);
        let has = |verb: &str| sub.verbs.contains(&verb);
        let mut ops = Map::new();
        if has("get") {
            let mut o = self.op("read", format!("read{id}"), "get", &gvk);
            if target.is_none() {
                o.insert("parameters".into(), params::queries(params::POD_LOG));
            }
            o.insert(
                "responses".into(),
                media::responses(OK, target.as_ref(), self.e.builtin, false),
            );
            ops.insert("get".into(), o.into());
        }
        if let Some(target) = &target {
            if has("update") {
                let o = self.op("replace", format!("replace{id}"), "put", &gvk);
                ops.insert("put".into(), self.replace(o, target));
            }
            if has("patch") {
                let o = self.op("partially update", format!("patch{id}"), "patch", &gvk);
                ops.insert("patch".into(), self.patch(o, target));
            }
            if has("create") {
                let o = self.op("create", format!("create{id}"), "post", &gvk);
                ops.insert("post".into(), self.create(o, target));
            }
        }
        ops
    }

    /// The operations of a connect subresource (`connectGetNamespacedPodExec`,
    /// `connectPostNamespacedPodExec`...): one per method its verbs allow, answering a stream.
    fn connect(
        &self,
        sub: &SubEndpoint,
        queries: &[params::Query],
        gvk: &Value,
    ) -> Map<String, Value> {
        let mut ops = Map::new();
        for (verb, method) in [
            ("get", "get"),
            ("create", "post"),
            ("update", "put"),
            ("patch", "patch"),
            ("delete", "delete"),
        ] {
            if !sub.verbs.contains(&verb) {
                continue;
            }
            let id = format!(
                "connect{}{}{}",
                capitalize(method),
                self.single,
                capitalize(sub.name)
            );
            let what = format!(
                "connect {} requests to {} of",
                method.to_uppercase(),
                sub.name
            );
            let mut o = self.op(&what, id, "connect", gvk);
            o.insert("parameters".into(), params::queries(queries));
            o.insert(
                "responses".into(),
                media::responses(OK, None, self.e.builtin, false),
            );
            ops.insert(method.into(), o.into());
        }
        ops
    }

    fn watch(&self, id: String, action: &str) -> Map<String, Value> {
        let mut o = self.op("watch changes to", id, action, &self.gvk);
        let event = reference(WATCH_EVENT);
        o.insert(
            "responses".into(),
            media::responses(OK, Some(&event), self.e.builtin, true),
        );
        o
    }

    fn create(&self, mut o: Map<String, Value>, target: &Value) -> Value {
        o.insert("parameters".into(), params::queries(params::WRITE));
        o.insert("requestBody".into(), media::body(target));
        o.insert(
            "responses".into(),
            media::responses(CREATED, Some(target), self.e.builtin, false),
        );
        o.into()
    }

    fn replace(&self, mut o: Map<String, Value>, target: &Value) -> Value {
        o.insert("parameters".into(), params::queries(params::WRITE));
        o.insert("requestBody".into(), media::body(target));
        o.insert(
            "responses".into(),
            media::responses(UPDATED, Some(target), self.e.builtin, false),
        );
        o.into()
    }

    fn patch(&self, mut o: Map<String, Value>, target: &Value) -> Value {
        o.insert("parameters".into(), params::queries(params::PATCH));
        o.insert("requestBody".into(), media::patch_body(self.e.builtin));
        o.insert(
            "responses".into(),
            media::responses(UPDATED, Some(target), self.e.builtin, false),
        );
        o.into()
    }
}

/// A path item of list-style GETs (cross-namespace list, watches): list options as path-level
/// parameters, with name and namespace where the path has them.
fn list_item(get: Map<String, Value>, name: Option<&str>, namespaced: bool) -> Value {
    let mut parameters = path_parameters(name, namespaced);
    parameters.extend(params::LIST.iter().copied().map(params::query));
    json!({ "get": get, "parameters": parameters })
}

fn path_parameters(name: Option<&str>, namespaced: bool) -> Vec<Value> {
    let mut out = Vec::new();
    if let Some(kind) = name {
        out.push(params::name_of(kind));
    }
    if namespaced {
        out.push(params::namespace());
    }
    out.push(params::query(params::PRETTY));
    out
}

/// Adds a path item with its operations and path-level parameters, unless it has none.
fn insert(
    paths: &mut Map<String, Value>,
    path: &str,
    mut ops: Map<String, Value>,
    namespaced: bool,
    name: Option<&str>,
) {
    if ops.is_empty() {
        return;
    }
    ops.insert(
        "parameters".into(),
        Value::Array(path_parameters(name, namespaced)),
    );
    paths.insert(path.to_string(), ops.into());
}
