//! The OpenAPI v2 (Swagger 2.0) document of a cluster, `/openapi/v2`, derived from its v3
//! documents, and its gnostic protobuf form.
//!
//! Older clients read v2: kubectl 1.27–1.28 fetch it (as protobuf) for `explain
//! --output plaintext-openapiv2` and client-side validation, Helm validates manifests against
//! it. The v3 documents are the one source: definitions are their `components.schemas`, paths
//! their operations, with v3's shapes turned into v2's (`#/definitions/` references, a `$ref`
//! taking its siblings back from `allOf`, no `nullable`/`anyOf`/`oneOf`, request bodies as
//! `body` parameters, `consumes`/`produces` lists, parameter schemas inlined).
//!
//! The protobuf form is gnostic's `openapi.v2.Document` with `swagger`, `info` and
//! `definitions` — what kube-openapi's models (kubectl, Helm) read; paths are in the JSON
//! form only. Vendor extensions travel as YAML (written as JSON, which YAML reads).

use serde_json::{Map, Value, json};

use crate::set::DocumentSet;

const V3_REFS: &str = "#/components/schemas/";
const V2_REFS: &str = "#/definitions/";

/// The Swagger 2.0 document of `set`, titled for Kubernetes `version`.
pub fn swagger(set: &DocumentSet, version: &str) -> Value {
    let mut paths = Map::new();
    let mut definitions = Map::new();
    for (_, doc) in set.documents() {
        let Ok(v3) = serde_json::from_slice::<Value>(doc.bytes()) else {
            continue;
        };
        if let Some(schemas) = v3.pointer("/components/schemas").and_then(Value::as_object) {
            for (name, schema) in schemas {
                if !definitions.contains_key(name) {
                    definitions.insert(name.clone(), schema_v2(schema));
                }
            }
        }
        if let Some(ps) = v3.get("paths").and_then(Value::as_object) {
            for (path, item) in ps {
                paths.insert(path.clone(), path_item_v2(item));
            }
        }
    }
    json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": version},
        "paths": paths,
        "definitions": definitions,
    })
}

/// A v3 schema as v2 has it.
fn schema_v2(v: &Value) -> Value {
    let Some(node) = v.as_object() else {
        return v.clone();
    };
    let mut out = Map::new();
    // `{"allOf": [{"$ref": r}], ...siblings}` is v3's way of giving a reference siblings.
    let single_ref = node
        .get("allOf")
        .and_then(Value::as_array)
        .filter(|a| a.len() == 1)
        .and_then(|a| a[0].get("$ref"))
        .and_then(Value::as_str);
    for (k, val) in node {
        match k.as_str() {
            "nullable" | "anyOf" | "oneOf" | "not" => {}
            "allOf" if single_ref.is_some() => {}
            "$ref" => {
                let r = val.as_str().unwrap_or_default();
                out.insert("$ref".into(), json!(r.replacen(V3_REFS, V2_REFS, 1)));
            }
            "properties" | "patternProperties" => {
                let props = val
                    .as_object()
                    .map(|m| {
                        m.iter()
                            .map(|(n, s)| (n.clone(), schema_v2(s)))
                            .collect::<Map<_, _>>()
                    })
                    .unwrap_or_default();
                out.insert(k.clone(), Value::Object(props));
            }
            "items" | "additionalProperties" if val.is_object() => {
                out.insert(k.clone(), schema_v2(val));
            }
            "allOf" => {
                let all = val
                    .as_array()
                    .map(|a| a.iter().map(schema_v2).collect())
                    .unwrap_or_default();
                out.insert(k.clone(), Value::Array(all));
            }
            _ => {
                out.insert(k.clone(), val.clone());
            }
        }
    }
    if let Some(r) = single_ref {
        out.insert("$ref".into(), json!(r.replacen(V3_REFS, V2_REFS, 1)));
        // A reference's default is the referenced schema's business in v2.
        out.remove("default");
    }
    Value::Object(out)
}

const METHODS: [&str; 7] = ["get", "put", "post", "delete", "options", "head", "patch"];

fn path_item_v2(item: &Value) -> Value {
    let Some(node) = item.as_object() else {
        return item.clone();
    };
    let mut out = Map::new();
    for (k, v) in node {
        if METHODS.contains(&k.as_str()) {
            out.insert(k.clone(), operation_v2(v));
        } else if k == "parameters" {
            out.insert(k.clone(), parameters_v2(v));
        } else if k != "servers" && k != "summary" {
            out.insert(k.clone(), v.clone());
        }
    }
    Value::Object(out)
}

fn parameters_v2(v: &Value) -> Value {
    Value::Array(
        v.as_array()
            .map(|ps| ps.iter().map(parameter_v2).collect())
            .unwrap_or_default(),
    )
}

/// A v3 parameter with its `schema` flattened into the parameter, as v2 has it.
fn parameter_v2(p: &Value) -> Value {
    let Some(node) = p.as_object() else {
        return p.clone();
    };
    let mut out = Map::new();
    for (k, v) in node {
        match k.as_str() {
            "schema" => {
                if let Some(s) = v.as_object() {
                    for (sk, sv) in s {
                        out.insert(sk.clone(), sv.clone());
                    }
                }
            }
            "style" | "explode" | "example" | "examples" => {}
            _ => {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    Value::Object(out)
}

fn operation_v2(op: &Value) -> Value {
    let Some(node) = op.as_object() else {
        return op.clone();
    };
    let mut out = Map::new();
    let mut parameters = node
        .get("parameters")
        .map(parameters_v2)
        .and_then(|v| v.as_array().cloned())
        .unwrap_or_default();
    let mut produces: Vec<String> = Vec::new();
    for (k, v) in node {
        match k.as_str() {
            "parameters" => {}
            "requestBody" => {
                let content = v.get("content").and_then(Value::as_object);
                let consumes: Vec<&String> =
                    content.map(|c| c.keys().collect()).unwrap_or_default();
                let schema = content
                    .and_then(|c| c.values().next())
                    .and_then(|m| m.get("schema"))
                    .map(schema_v2)
                    .unwrap_or_else(|| json!({}));
                parameters.insert(
                    0,
                    json!({"name": "body", "in": "body", "required": true, "schema": schema}),
                );
                out.insert("consumes".into(), json!(consumes));
            }
            "responses" => {
                let mut responses = Map::new();
                for (code, r) in v.as_object().into_iter().flatten() {
                    let mut resp = Map::new();
                    resp.insert(
                        "description".into(),
                        r.get("description").cloned().unwrap_or_else(|| json!("")),
                    );
                    if let Some(content) = r.get("content").and_then(Value::as_object) {
                        for mime in content.keys() {
                            if !produces.contains(mime) {
                                produces.push(mime.clone());
                            }
                        }
                        if let Some(s) = content.values().next().and_then(|m| m.get("schema")) {
                            resp.insert("schema".into(), schema_v2(s));
                        }
                    }
                    responses.insert(code.clone(), Value::Object(resp));
                }
                out.insert("responses".into(), Value::Object(responses));
            }
            _ => {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    if !parameters.is_empty() {
        out.insert("parameters".into(), Value::Array(parameters));
    }
    if !produces.is_empty() {
        out.insert("produces".into(), json!(produces));
    }
    out.insert("schemes".into(), json!(["https"]));
    Value::Object(out)
}

/// Protocol buffer writing: just what gnostic's messages need.
mod pb {
    pub fn varint(buf: &mut Vec<u8>, mut v: u64) {
        while v >= 0x80 {
            buf.push((v as u8) | 0x80);
            v >>= 7;
        }
        buf.push(v as u8);
    }

    fn key(buf: &mut Vec<u8>, field: u32, wire: u8) {
        varint(buf, (u64::from(field) << 3) | u64::from(wire));
    }

    pub fn bytes(buf: &mut Vec<u8>, field: u32, b: &[u8]) {
        key(buf, field, 2);
        varint(buf, b.len() as u64);
        buf.extend_from_slice(b);
    }

    pub fn string(buf: &mut Vec<u8>, field: u32, s: &str) {
        if !s.is_empty() {
            bytes(buf, field, s.as_bytes());
        }
    }

    pub fn message(buf: &mut Vec<u8>, field: u32, f: impl FnOnce(&mut Vec<u8>)) {
        let mut inner = Vec::new();
        f(&mut inner);
        bytes(buf, field, &inner);
    }

    pub fn boolean(buf: &mut Vec<u8>, field: u32, b: bool) {
        if b {
            key(buf, field, 0);
            buf.push(1);
        }
    }

    pub fn int64(buf: &mut Vec<u8>, field: u32, v: i64) {
        if v != 0 {
            key(buf, field, 0);
            varint(buf, v as u64);
        }
    }

    pub fn double(buf: &mut Vec<u8>, field: u32, v: f64) {
        if v != 0.0 {
            key(buf, field, 1);
            buf.extend_from_slice(&v.to_le_bytes());
        }
    }
}

/// gnostic `openapi.v2.Any` carrying `v` as YAML (JSON text is YAML).
fn any(buf: &mut Vec<u8>, field: u32, v: &Value) {
    pb::message(buf, field, |b| {
        pb::string(b, 2, &serde_json::to_string(v).unwrap_or_default());
    });
}

/// gnostic `openapi.v2.Schema`.
fn schema_pb(buf: &mut Vec<u8>, s: &Value) {
    let Some(node) = s.as_object() else {
        return;
    };
    let str_of = |k: &str| node.get(k).and_then(Value::as_str).unwrap_or_default();
    let int_of = |k: &str| node.get(k).and_then(Value::as_i64).unwrap_or(0);
    let f64_of = |k: &str| node.get(k).and_then(Value::as_f64).unwrap_or(0.0);
    let bool_of = |k: &str| node.get(k).and_then(Value::as_bool).unwrap_or(false);
    pb::string(buf, 1, str_of("$ref"));
    pb::string(buf, 2, str_of("format"));
    pb::string(buf, 3, str_of("title"));
    pb::string(buf, 4, str_of("description"));
    if let Some(d) = node.get("default") {
        any(buf, 5, d);
    }
    pb::double(buf, 6, f64_of("multipleOf"));
    pb::double(buf, 7, f64_of("maximum"));
    pb::boolean(buf, 8, bool_of("exclusiveMaximum"));
    pb::double(buf, 9, f64_of("minimum"));
    pb::boolean(buf, 10, bool_of("exclusiveMinimum"));
    pb::int64(buf, 11, int_of("maxLength"));
    pb::int64(buf, 12, int_of("minLength"));
    pb::string(buf, 13, str_of("pattern"));
    pb::int64(buf, 14, int_of("maxItems"));
    pb::int64(buf, 15, int_of("minItems"));
    pb::boolean(buf, 16, bool_of("uniqueItems"));
    pb::int64(buf, 17, int_of("maxProperties"));
    pb::int64(buf, 18, int_of("minProperties"));
    for r in node
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        pb::string(buf, 19, r.as_str().unwrap_or_default());
    }
    for e in node
        .get("enum")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        any(buf, 20, e);
    }
    match node.get("additionalProperties") {
        Some(Value::Bool(b)) => pb::message(buf, 21, |m| {
            // The oneof's boolean: written even when false.
            m.extend_from_slice(&[0x10, u8::from(*b)]);
        }),
        Some(a @ Value::Object(_)) => {
            pb::message(buf, 21, |m| pb::message(m, 1, |sch| schema_pb(sch, a)))
        }
        _ => {}
    }
    match node.get("type") {
        Some(Value::String(t)) => pb::message(buf, 22, |m| pb::string(m, 1, t)),
        Some(Value::Array(ts)) => pb::message(buf, 22, |m| {
            for t in ts {
                pb::string(m, 1, t.as_str().unwrap_or_default());
            }
        }),
        _ => {}
    }
    match node.get("items") {
        Some(i @ Value::Object(_)) => {
            pb::message(buf, 23, |m| pb::message(m, 1, |sch| schema_pb(sch, i)))
        }
        Some(Value::Array(is)) => pb::message(buf, 23, |m| {
            for i in is {
                pb::message(m, 1, |sch| schema_pb(sch, i));
            }
        }),
        _ => {}
    }
    for a in node
        .get("allOf")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        pb::message(buf, 24, |sch| schema_pb(sch, a));
    }
    if let Some(props) = node.get("properties").and_then(Value::as_object) {
        pb::message(buf, 25, |m| {
            for (name, p) in props {
                pb::message(m, 1, |named| {
                    pb::string(named, 1, name);
                    pb::message(named, 2, |sch| schema_pb(sch, p));
                });
            }
        });
    }
    pb::string(buf, 26, str_of("discriminator"));
    pb::boolean(buf, 27, bool_of("readOnly"));
    if let Some(e) = node.get("example") {
        any(buf, 30, e);
    }
    for (k, v) in node {
        if k.starts_with("x-") {
            pb::message(buf, 31, |named| {
                pb::string(named, 1, k);
                any(named, 2, v);
            });
        }
    }
}

/// The gnostic protobuf (`openapi.v2.Document`) of a Swagger document: `swagger`, `info` and
/// `definitions`.
pub fn protobuf(doc: &Value) -> Vec<u8> {
    let mut buf = Vec::new();
    pb::string(&mut buf, 1, doc["swagger"].as_str().unwrap_or("2.0"));
    pb::message(&mut buf, 2, |info| {
        pb::string(info, 1, doc["info"]["title"].as_str().unwrap_or_default());
        pb::string(info, 2, doc["info"]["version"].as_str().unwrap_or_default());
    });
    if let Some(defs) = doc.get("definitions").and_then(Value::as_object) {
        pb::message(&mut buf, 9, |d| {
            for (name, s) in defs {
                pb::message(d, 1, |named| {
                    pb::string(named, 1, name);
                    pb::message(named, 2, |sch| schema_pb(sch, s));
                });
            }
        });
    }
    buf
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads the fields of one protobuf message: (field, wire type, payload or varint).
    fn fields(mut b: &[u8]) -> Vec<(u64, u64, Vec<u8>)> {
        fn varint(b: &mut &[u8]) -> u64 {
            let (mut v, mut shift) = (0u64, 0);
            loop {
                let byte = b[0];
                *b = &b[1..];
                v |= u64::from(byte & 0x7f) << shift;
                shift += 7;
                if byte < 0x80 {
                    return v;
                }
            }
        }
        let mut out = Vec::new();
        while !b.is_empty() {
            let key = varint(&mut b);
            let (field, wire) = (key >> 3, key & 7);
            match wire {
                0 => out.push((field, wire, varint(&mut b).to_le_bytes().to_vec())),
                1 => {
                    out.push((field, wire, b[..8].to_vec()));
                    b = &b[8..];
                }
                2 => {
                    let n = varint(&mut b) as usize;
                    out.push((field, wire, b[..n].to_vec()));
                    b = &b[n..];
                }
                _ => panic!("unexpected wire type {wire}"),
            }
        }
        out
    }

    fn field(b: &[u8], n: u64) -> Vec<Vec<u8>> {
        fields(b)
            .into_iter()
            .filter(|f| f.0 == n)
            .map(|f| f.2)
            .collect()
    }

    #[test]
    fn v3_shapes_become_v2_shapes() {
        let s = schema_v2(&json!({
            "description": "the spec",
            "allOf": [{"$ref": "#/components/schemas/io.k8s.api.apps.v1.DeploymentSpec"}],
            "default": {},
            "nullable": true,
            "properties": {"port": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]}},
        }));
        assert_eq!(
            s,
            json!({
                "description": "the spec",
                "$ref": "#/definitions/io.k8s.api.apps.v1.DeploymentSpec",
                "properties": {"port": {"x-kubernetes-int-or-string": true}},
            })
        );
        let op = operation_v2(&json!({
            "operationId": "createAppsV1NamespacedDeployment",
            "parameters": [{"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": true}}],
            "requestBody": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/D"}}, "application/yaml": {"schema": {"$ref": "#/components/schemas/D"}}}, "required": true},
            "responses": {"201": {"description": "Created", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/D"}}}}},
        }));
        assert_eq!(
            op["parameters"][0],
            json!({"name": "body", "in": "body", "required": true, "schema": {"$ref": "#/definitions/D"}})
        );
        assert_eq!(
            op["parameters"][1],
            json!({"name": "dryRun", "in": "query", "type": "string", "uniqueItems": true})
        );
        assert_eq!(
            op["consumes"],
            json!(["application/json", "application/yaml"])
        );
        assert_eq!(op["produces"], json!(["application/json"]));
        assert_eq!(op["responses"]["201"]["schema"]["$ref"], "#/definitions/D");
    }

    #[test]
    fn the_builtin_document_has_every_kind_with_its_group_version_kind() {
        let doc = swagger(&DocumentSet::new(), "v1.33.13");
        let deployment = &doc["definitions"]["io.k8s.api.apps.v1.Deployment"];
        assert_eq!(
            deployment["x-kubernetes-group-version-kind"],
            json!([{"group": "apps", "kind": "Deployment", "version": "v1"}])
        );
        assert_eq!(
            deployment["properties"]["spec"]["$ref"],
            "#/definitions/io.k8s.api.apps.v1.DeploymentSpec"
        );
        let create = &doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments"]["post"];
        assert_eq!(create["parameters"][0]["in"], "body");
        assert!(doc["paths"].as_object().unwrap().len() > 100);
        let text = serde_json::to_string(&doc).unwrap();
        assert!(
            !text.contains("#/components/schemas/"),
            "every reference is rewritten"
        );
    }

    #[test]
    fn the_protobuf_names_each_definition_with_its_schema_and_extensions() {
        let doc = json!({"swagger": "2.0", "info": {"title": "Kubernetes", "version": "v1.33.13"},
            "definitions": {"a.B": {"type": "object", "description": "d", "required": ["x"],
                "properties": {"x": {"type": "string"}}, "additionalProperties": false,
                "x-kubernetes-group-version-kind": [{"group": "a", "kind": "B", "version": "v1"}]}}});
        let b = protobuf(&doc);
        assert_eq!(field(&b, 1), [b"2.0".to_vec()]);
        let info = &field(&b, 2)[0];
        assert_eq!(field(info, 2), [b"v1.33.13".to_vec()]);
        let defs = &field(&b, 9)[0];
        let named = &field(defs, 1)[0];
        assert_eq!(field(named, 1), [b"a.B".to_vec()]);
        let schema = &field(named, 2)[0];
        assert_eq!(field(schema, 4), [b"d".to_vec()]);
        assert_eq!(field(schema, 19), [b"x".to_vec()]);
        assert_eq!(field(&field(schema, 22)[0], 1), [b"object".to_vec()]);
        // `additionalProperties: false` is the oneof's boolean, present though false.
        assert_eq!(
            field(&field(schema, 21)[0], 2),
            [0u64.to_le_bytes().to_vec()]
        );
        let props = &field(schema, 25)[0];
        let x = &field(props, 1)[0];
        assert_eq!(field(x, 1), [b"x".to_vec()]);
        let ext = &field(schema, 31)[0];
        assert_eq!(field(ext, 1), [b"x-kubernetes-group-version-kind".to_vec()]);
        let yaml = &field(&field(ext, 2)[0], 2)[0];
        let back: Value = serde_json::from_slice(yaml).unwrap();
        assert_eq!(back[0]["kind"], "B");
    }
}
