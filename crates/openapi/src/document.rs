//! Builds OpenAPI v3 documents: one per group-version, plus the small `api`, `apis`,
//! `apis/<group>` and `version` documents, in the shape kube-apiserver serves them.
//!
//! A document is serialized once and kept as bytes with its hash ([`Document`]). Built-in
//! documents come from the built-in definitions; a custom resource group-version's document
//! ([`custom_resource_document`]) is made from its CRDs' schemas and the built-in definitions
//! they share (ObjectMeta, Status, Scale, ...), and never offers strategic merge patch.

use std::collections::BTreeSet;

use apimachinery::builtin::{ALL, Resource};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha512};

use crate::definitions::{
    DEFINITIONS, LIST_META, OBJECT_META, collect_refs, gvk_value, ref_name, reference,
};
use crate::kinds::served_resources;
use crate::naming::{operation_infix, prefix, tag};
use crate::paths::{self, Endpoint, SubEndpoint};

/// The Kubernetes version the documents describe.
pub(crate) const KUBERNETES_VERSION: &str = "v1.33.0";

/// One serialized OpenAPI document and its content hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Document {
    bytes: Vec<u8>,
    hash: String,
}

impl Document {
    /// Serializes a document and hashes it.
    pub fn from_json(value: &Value) -> Document {
        let bytes = serde_json::to_vec(value).unwrap_or_default();
        let digest = Sha512::digest(&bytes);
        let hash = digest.iter().map(|b| format!("{b:02X}")).collect();
        Document { bytes, hash }
    }

    /// The JSON bytes served.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Upper-case hex SHA-512 of [`Document::bytes`], as upstream puts in `?hash=` and `ETag`.
    pub fn hash(&self) -> &str {
        &self.hash
    }
}

/// A custom resource served in a group-version, as its CRD describes it.
#[derive(Debug, Clone, Copy)]
pub struct CustomResource<'a> {
    pub group: &'a str,
    pub version: &'a str,
    pub kind: &'a str,
    pub list_kind: &'a str,
    pub plural: &'a str,
    pub namespaced: bool,
    /// The version's `schema.openAPIV3Schema`.
    pub schema: &'a Value,
    pub status_subresource: bool,
    pub scale_subresource: bool,
}

/// The key of a group-version's document in the index: `api/v1` or `apis/<group>/<version>`.
pub fn group_version_path(group: &str, version: &str) -> String {
    prefix(group, version).trim_start_matches('/').to_string()
}

/// The OpenAPI definition name of a custom kind: the group reversed, then version and kind
/// (`com.example.v1.Widget` for `example.com/v1 Widget`), as upstream names them.
pub fn custom_definition_name(group: &str, version: &str, kind: &str) -> String {
    let reversed: Vec<&str> = group.split('.').rev().collect();
    format!("{}.{version}.{kind}", reversed.join("."))
}

/// Wraps paths and schemas into an OpenAPI 3.0 document.
fn assemble(paths: Map<String, Value>, schemas: Map<String, Value>) -> Value {
    json!({
        "openapi": "3.0.0",
        "info": { "title": "Kubernetes", "version": KUBERNETES_VERSION },
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {
                "BearerToken": {
                    "description": "Bearer Token authentication",
                    "in": "header",
                    "name": "authorization",
                    "type": "apiKey",
                },
            },
        },
        "security": [{ "BearerToken": [] }],
    })
}

/// The schemas the paths refer to, with every definition they reach. `local` definitions
/// (custom kinds) take precedence over the built-in ones.
fn components(paths: &Map<String, Value>, local: &Map<String, Value>) -> Map<String, Value> {
    let mut pending = BTreeSet::new();
    for p in paths.values() {
        refs_anywhere(p, &mut pending);
    }
    for def in local.values() {
        collect_refs(def, &mut |r| {
            pending.insert(r.to_string());
        });
    }
    let builtin = &DEFINITIONS.schemas;
    let mut out = local.clone();
    let mut stack: Vec<String> = pending.into_iter().collect();
    while let Some(name) = stack.pop() {
        if out.contains_key(&name) {
            continue;
        }
        let Some(def) = local.get(&name).or_else(|| builtin.get(&name)) else {
            continue;
        };
        collect_refs(def, &mut |r| {
            if !out.contains_key(r) {
                stack.push(r.to_string());
            }
        });
        out.insert(name, def.clone());
    }
    out
}

/// Every `$ref` in a JSON value that is not a schema (paths, operations).
fn refs_anywhere(value: &Value, found: &mut BTreeSet<String>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                match (k.as_str(), v) {
                    ("$ref", Value::String(r)) => {
                        if let Some(name) = ref_name(r) {
                            found.insert(name.to_string());
                        }
                    }
                    _ => refs_anywhere(v, found),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| refs_anywhere(v, found)),
        _ => {}
    }
}

/// A single GET operation answering with a definition.
fn get_only(id: &str, tag: &str, definition: &str, description: &str) -> Value {
    let schema = json!({ "schema": reference(definition) });
    json!({
        "get": {
            "description": description,
            "operationId": id,
            "responses": {
                "200": {
                    "content": {
                        "application/json": schema,
                        "application/yaml": schema,
                        "application/vnd.kubernetes.protobuf": schema,
                    },
                    "description": "OK",
                },
                "401": { "description": "Unauthorized" },
            },
            "tags": [tag],
        }
    })
}

fn discovery_path(paths: &mut Map<String, Value>, group: &str, version: &str) {
    let infix = operation_infix(group, version);
    paths.insert(
        format!("{}/", prefix(group, version)),
        get_only(
            &format!("get{infix}APIResources"),
            &tag(group, version),
            "io.k8s.apimachinery.pkg.apis.meta.v1.APIResourceList",
            "get available resources",
        ),
    );
}

/// The endpoint of a built-in resource.
fn builtin_endpoint(r: &'static Resource) -> Option<Endpoint<'static>> {
    let defs = &*DEFINITIONS;
    let definition = defs.name_of(r.group, r.version, r.kind)?.to_string();
    let list_definition = defs
        .name_of(r.group, r.version, &format!("{}List", r.kind))
        .map(str::to_string);
    let subresources = r
        .subresources
        .iter()
        .map(|s| SubEndpoint {
            name: s.name,
            group: s.group,
            version: s.version,
            kind: s.kind,
            verbs: s.verbs,
            definition: (s.name != "log" && crate::params::connect(r.plural, s.name).is_none())
                .then(|| defs.name_of(s.group, s.version, s.kind).map(str::to_string))
                .flatten(),
        })
        .collect();
    Some(Endpoint {
        group: r.group,
        version: r.version,
        kind: r.kind,
        plural: r.plural,
        namespaced: r.namespaced,
        verbs: r.verbs,
        definition,
        list_definition,
        subresources,
        builtin: true,
    })
}

/// The document of a built-in group-version.
pub(crate) fn builtin_document(group: &str, version: &str) -> Value {
    let mut paths = Map::new();
    discovery_path(&mut paths, group, version);
    for r in served_resources().filter(|r| r.group == group && r.version == version) {
        if let Some(e) = builtin_endpoint(r) {
            paths::add(&mut paths, &e);
        }
    }
    let schemas = components(&paths, &Map::new());
    assemble(paths, schemas)
}

/// The documents of the discovery roots: `api`, `apis`, `version`.
pub(crate) fn root_documents() -> Vec<(String, Value)> {
    let doc = |path: &str, id: &str, tag: &str, def: &str, description: &str| {
        let mut paths = Map::new();
        paths.insert(path.to_string(), get_only(id, tag, def, description));
        let schemas = components(&paths, &Map::new());
        assemble(paths, schemas)
    };
    vec![
        (
            "api".into(),
            doc(
                "/api/",
                "getCoreAPIVersions",
                "core",
                "io.k8s.apimachinery.pkg.apis.meta.v1.APIVersions",
                "get available API versions",
            ),
        ),
        (
            "apis".into(),
            doc(
                "/apis/",
                "getAPIVersions",
                "apis",
                "io.k8s.apimachinery.pkg.apis.meta.v1.APIGroupList",
                "get available API versions",
            ),
        ),
        (
            "version".into(),
            doc(
                "/version/",
                "getCodeVersion",
                "version",
                "io.k8s.apimachinery.pkg.version.Info",
                "get the version information for this server",
            ),
        ),
    ]
}

/// The document of `apis/<group>`: its discovery endpoint.
pub(crate) fn group_document(group: &str) -> Value {
    let infix = operation_infix(group, "");
    let mut paths = Map::new();
    paths.insert(
        format!("/apis/{group}/"),
        get_only(
            &format!("get{infix}APIGroup"),
            &tag(group, ""),
            "io.k8s.apimachinery.pkg.apis.meta.v1.APIGroup",
            "get information of a group",
        ),
    );
    let schemas = components(&paths, &Map::new());
    assemble(paths, schemas)
}

/// The schema of a custom kind as published: the CRD's schema with `apiVersion`, `kind` and
/// `metadata` filled in and the kind's `x-kubernetes-group-version-kind`.
fn custom_kind_schema(cr: &CustomResource) -> Value {
    let mut schema = match cr.schema {
        Value::Object(m) => m.clone(),
        _ => Map::new(),
    };
    schema.entry("type").or_insert_with(|| "object".into());
    let properties = schema
        .entry("properties")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(props) = properties {
        props.insert(
            "apiVersion".into(),
            json!({ "description": "APIVersion defines the versioned schema of this representation of an object.", "type": "string" }),
        );
        props.insert(
            "kind".into(),
            json!({ "description": "Kind is a string value representing the REST resource this object represents.", "type": "string" }),
        );
        props.insert(
            "metadata".into(),
            json!({ "allOf": [reference(OBJECT_META)], "description": "Standard object's metadata." }),
        );
    }
    schema.insert(
        "x-kubernetes-group-version-kind".into(),
        json!([gvk_value(cr.group, cr.version, cr.kind)]),
    );
    Value::Object(schema)
}

fn custom_list_schema(cr: &CustomResource, item: &str) -> Value {
    json!({
        "description": format!("{} is a list of {}", cr.list_kind, cr.kind),
        "type": "object",
        "properties": {
            "apiVersion": { "description": "APIVersion defines the versioned schema of this representation of an object.", "type": "string" },
            "kind": { "description": "Kind is a string value representing the REST resource this object represents.", "type": "string" },
            "metadata": { "allOf": [reference(LIST_META)], "description": "Standard list metadata." },
            "items": {
                "description": format!("List of {}.", cr.plural),
                "type": "array",
                "items": reference(item),
            },
        },
        "required": ["items"],
        "x-kubernetes-group-version-kind": [gvk_value(cr.group, cr.version, cr.list_kind)],
    })
}

const GPU: &[&str] = &["get", "patch", "update"];

/// The OpenAPI v3 document of a custom resource group-version: every resource given (all of the
/// same group and version), with its status and scale subresources. PATCH offers JSON patch,
/// merge patch and apply, never strategic merge patch.
pub fn custom_resource_document(resources: &[CustomResource]) -> Document {
    Document::from_json(&custom_resource_json(resources))
}

pub(crate) fn custom_resource_json(resources: &[CustomResource]) -> Value {
    let mut paths = Map::new();
    let mut local = Map::new();
    let scale = DEFINITIONS
        .name_of("autoscaling", "v1", "Scale")
        .map(str::to_string);
    if let Some(first) = resources.first() {
        discovery_path(&mut paths, first.group, first.version);
    }
    for cr in resources {
        let definition = custom_definition_name(cr.group, cr.version, cr.kind);
        let list_definition = custom_definition_name(cr.group, cr.version, cr.list_kind);
        local.insert(definition.clone(), custom_kind_schema(cr));
        local.insert(list_definition.clone(), custom_list_schema(cr, &definition));
        let mut subresources = Vec::new();
        if cr.scale_subresource {
            subresources.push(SubEndpoint {
                name: "scale",
                group: "autoscaling",
                version: "v1",
                kind: "Scale",
                verbs: GPU,
                definition: scale.clone(),
            });
        }
        if cr.status_subresource {
            subresources.push(SubEndpoint {
                name: "status",
                group: cr.group,
                version: cr.version,
                kind: cr.kind,
                verbs: GPU,
                definition: Some(definition.clone()),
            });
        }
        let endpoint = Endpoint {
            group: cr.group,
            version: cr.version,
            kind: cr.kind,
            plural: cr.plural,
            namespaced: cr.namespaced,
            verbs: ALL,
            definition,
            list_definition: Some(list_definition),
            subresources,
            builtin: false,
        };
        paths::add(&mut paths, &endpoint);
    }
    let schemas = components(&paths, &local);
    assemble(paths, schemas)
}
