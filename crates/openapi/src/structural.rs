//! Compiles JSON schemas into the structural [`Schema`] model.
//!
//! One compiler serves both sources of schemas: the built-in definitions (which reference each
//! other through `$ref`, resolved against [`crate::definitions`] and shared through `Arc`), and
//! a CRD's `openAPIV3Schema` (a self-contained `JSONSchemaProps` tree), via
//! [`compile_structural`]. Every `x-kubernetes-*` extension that shapes an object is honoured;
//! value validations (`enum`, `pattern`, `allOf` of constraints, CEL rules) are not part of the
//! structure and are left to validation.

use std::collections::HashMap;
use std::sync::Arc;

use apimachinery::schema::{Gvk, ListType, MapType, PatchStrategy, Schema, SchemaRef, Type};
use serde_json::{Map, Value};

use crate::definitions::{JSON_SCHEMA_PROPS, OPAQUE, ref_name};

/// Compiles a CRD version's `openAPIV3Schema` (a `JSONSchemaProps` document) into a structural
/// schema. Malformed or unknown parts never fail: a node that is not a schema object accepts
/// anything.
pub fn compile_structural(schema: &Value) -> SchemaRef {
    Compiler::new(None).compile(schema)
}

/// Compiles JSON schemas, resolving `$ref`s against a set of definitions.
pub(crate) struct Compiler<'a> {
    definitions: Option<&'a Map<String, Value>>,
    compiled: HashMap<&'a str, SchemaRef>,
    /// Definitions being compiled: a `$ref` back into one of them is a cycle.
    in_progress: Vec<&'a str>,
}

impl<'a> Compiler<'a> {
    pub(crate) fn new(definitions: Option<&'a Map<String, Value>>) -> Self {
        Compiler {
            definitions,
            compiled: HashMap::new(),
            in_progress: Vec::new(),
        }
    }

    /// The compiled schema of a named definition, shared between all its uses.
    pub(crate) fn definition(&mut self, name: &str) -> SchemaRef {
        if let Some(done) = self.compiled.get(name) {
            return done.clone();
        }
        let Some((key, def)) = self.definitions.and_then(|d| d.get_key_value(name)) else {
            return Schema::any();
        };
        let description = def
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or_default();
        // The one recursive upstream type is cut here; opaque values keep whatever they hold.
        let cycle = self.in_progress.contains(&name);
        let compiled = if cycle || name == JSON_SCHEMA_PROPS || OPAQUE.contains(&name) {
            Arc::new(Schema {
                ty: Type::Any,
                preserve_unknown_fields: true,
                description: description.to_string(),
                definition: Some(name.to_string()),
                ..Schema::default()
            })
        } else {
            self.in_progress.push(key);
            let mut schema = self.build(def);
            self.in_progress.pop();
            schema.definition = Some(name.to_string());
            Arc::new(schema)
        };
        if !cycle {
            self.compiled.insert(key, compiled.clone());
        }
        compiled
    }

    /// Compiles one schema node.
    pub(crate) fn compile(&mut self, value: &'a Value) -> SchemaRef {
        let Value::Object(node) = value else {
            return Schema::any();
        };
        match wrapped_ref(node) {
            Some(name) => {
                let base = self.definition(name);
                if node.keys().all(|k| k == "$ref" || k == "allOf") {
                    return base;
                }
                // A field referring to a definition with its own description or extensions.
                let mut schema = (*base).clone();
                overlay(&mut schema, node);
                Arc::new(schema)
            }
            None => Arc::new(self.build(value)),
        }
    }

    fn build(&mut self, value: &'a Value) -> Schema {
        let Value::Object(node) = value else {
            return (*Schema::any()).clone();
        };
        let mut schema = Schema::default();
        let properties = node.get("properties").and_then(Value::as_object);
        schema.ty = match node.get("type").and_then(Value::as_str) {
            Some("object") => Type::Object,
            Some("array") => Type::Array,
            Some("string") => Type::String,
            Some("integer") => Type::Integer,
            Some("number") => Type::Number,
            Some("boolean") => Type::Boolean,
            _ if properties.is_some() => Type::Object,
            _ => Type::Any,
        };
        if let Some(props) = properties {
            for (name, prop) in props {
                let compiled = self.compile(prop);
                schema.properties.insert(name.clone(), compiled);
            }
        }
        schema.additional_properties = match node.get("additionalProperties") {
            Some(Value::Bool(true)) => Some(Schema::any()),
            Some(v @ Value::Object(_)) => Some(self.compile(v)),
            _ => None,
        };
        schema.items = match node.get("items") {
            Some(v @ Value::Object(_)) => Some(self.compile(v)),
            Some(Value::Array(items)) => items.first().map(|v| self.compile(v)),
            _ => None,
        };
        overlay(&mut schema, node);
        schema
    }
}

/// The definition a node stands for: `{"$ref"}` or `{"allOf": [{"$ref"}]}`.
fn wrapped_ref(node: &Map<String, Value>) -> Option<&str> {
    if let Some(r) = node.get("$ref").and_then(Value::as_str) {
        return ref_name(r);
    }
    match node.get("allOf") {
        Some(Value::Array(all)) if all.len() == 1 => all[0]
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(ref_name),
        _ => None,
    }
}

/// Applies a node's own description, flags and extensions on top of a schema.
fn overlay(schema: &mut Schema, node: &Map<String, Value>) {
    for (key, value) in node {
        match (key.as_str(), value) {
            ("description", Value::String(s)) => schema.description = s.clone(),
            ("format", Value::String(s)) => schema.format = Some(s.clone()),
            ("nullable", Value::Bool(b)) => schema.nullable = *b,
            ("default", v) => schema.default = Some(v.clone()),
            ("required", Value::Array(names)) => {
                schema.required = names
                    .iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect();
            }
            ("x-kubernetes-int-or-string", Value::Bool(true)) => schema.ty = Type::IntOrString,
            ("x-kubernetes-preserve-unknown-fields", Value::Bool(b)) => {
                schema.preserve_unknown_fields = *b;
            }
            ("x-kubernetes-embedded-resource", Value::Bool(b)) => schema.embedded_resource = *b,
            ("x-kubernetes-map-type", Value::String(s)) => {
                schema.map_type = if s == "atomic" {
                    MapType::Atomic
                } else {
                    MapType::Granular
                };
            }
            ("x-kubernetes-list-type", Value::String(s)) => {
                schema.list_type = match s.as_str() {
                    "set" => ListType::Set,
                    "map" => ListType::Map(string_list(node.get("x-kubernetes-list-map-keys"))),
                    _ => ListType::Atomic,
                };
            }
            ("x-kubernetes-patch-strategy", Value::String(s)) => {
                schema.patch_strategy = s
                    .split(',')
                    .filter_map(|p| match p.trim() {
                        "merge" => Some(PatchStrategy::Merge),
                        "retainKeys" => Some(PatchStrategy::RetainKeys),
                        "replace" => Some(PatchStrategy::Replace),
                        _ => None,
                    })
                    .collect();
            }
            ("x-kubernetes-patch-merge-key", Value::String(s)) => {
                schema.patch_merge_key = Some(s.clone());
            }
            ("x-kubernetes-group-version-kind", Value::Array(gvks)) => {
                schema.gvk = gvks
                    .iter()
                    .map(|g| Gvk {
                        group: str_field(g, "group"),
                        version: str_field(g, "version"),
                        kind: str_field(g, "kind"),
                    })
                    .collect();
            }
            _ => {}
        }
    }
    if schema.ty == Type::Any && !schema.properties.is_empty() {
        schema.ty = Type::Object;
    }
}

fn string_list(value: Option<&Value>) -> Vec<String> {
    value
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

fn str_field(value: &Value, key: &str) -> String {
    value
        .get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn crd_schema_compiles_every_structural_extension() {
        let s = compile_structural(&json!({
            "type": "object",
            "required": ["spec"],
            "properties": {
                "spec": {
                    "type": "object",
                    "x-kubernetes-map-type": "atomic",
                    "properties": {
                        "replicas": {"type": "integer", "format": "int32", "default": 1},
                        "port": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]},
                        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                        "ports": {
                            "type": "array",
                            "x-kubernetes-list-type": "map",
                            "x-kubernetes-list-map-keys": ["port", "protocol"],
                            "items": {"type": "object", "properties": {"port": {"type": "integer"}, "protocol": {"type": "string"}}}
                        },
                        "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
                        "raw": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                        "template": {"type": "object", "x-kubernetes-embedded-resource": true, "nullable": true}
                    }
                }
            }
        }));
        assert_eq!(s.required, vec!["spec"]);
        let spec = s.field("spec").unwrap();
        assert_eq!(spec.map_type, MapType::Atomic);
        assert_eq!(spec.field("replicas").unwrap().default, Some(json!(1)));
        assert_eq!(
            spec.field("replicas").unwrap().format.as_deref(),
            Some("int32")
        );
        assert_eq!(spec.field("port").unwrap().ty, Type::IntOrString);
        assert_eq!(
            spec.field("labels")
                .unwrap()
                .additional_properties
                .as_ref()
                .unwrap()
                .ty,
            Type::String
        );
        assert_eq!(
            spec.field("ports").unwrap().list_type,
            ListType::Map(vec!["port".into(), "protocol".into()])
        );
        assert_eq!(spec.field("tags").unwrap().list_type, ListType::Set);
        assert!(spec.field("raw").unwrap().preserve_unknown_fields);
        let template = spec.field("template").unwrap();
        assert!(template.embedded_resource && template.nullable);
    }

    #[test]
    fn garbage_compiles_to_a_schema_that_keeps_everything() {
        let s = compile_structural(&json!("not a schema"));
        assert!(s.keeps_unknown_fields());
        let s = compile_structural(&json!({"type": "object", "properties": {"a": 5}}));
        assert!(s.field("a").unwrap().keeps_unknown_fields());
    }

    #[test]
    fn a_reference_cycle_is_cut_to_any() {
        let defs = json!({
            "a.Node": {"type": "object", "properties": {"next": {"$ref": "#/components/schemas/a.Node"}}}
        });
        let defs = defs.as_object().unwrap();
        let mut c = Compiler::new(Some(defs));
        let node = c.definition("a.Node");
        let next = node.field("next").unwrap();
        assert_eq!(next.ty, Type::Any);
        assert_eq!(node.ty, Type::Object);
    }

    #[test]
    fn a_field_description_overrides_the_shared_definition() {
        let defs = json!({
            "a.Meta": {"description": "meta", "type": "object", "properties": {"name": {"type": "string"}}},
            "a.Kind": {"type": "object", "properties": {
                "metadata": {"allOf": [{"$ref": "#/components/schemas/a.Meta"}], "description": "the metadata"},
                "other": {"$ref": "#/components/schemas/a.Meta"}
            }}
        });
        let mut c = Compiler::new(defs.as_object());
        let kind = c.definition("a.Kind");
        assert_eq!(kind.field("metadata").unwrap().description, "the metadata");
        assert_eq!(
            kind.field("metadata").unwrap().definition.as_deref(),
            Some("a.Meta")
        );
        assert!(Arc::ptr_eq(
            kind.field("other").unwrap(),
            &c.definition("a.Meta")
        ));
    }
}
