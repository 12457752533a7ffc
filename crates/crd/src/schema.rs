//! The compiled form of one CRD version's `openAPIV3Schema`: everything validation, defaulting
//! and CEL rules need, parsed once when the CRD is (re)registered.
//!
//! A [`Node`] mirrors a `JSONSchemaProps`: the structural part (type, properties, items,
//! additionalProperties, `x-kubernetes-*` extensions) and the value validations kube-openapi
//! checks (enum, bounds, lengths, pattern, format, junctors). Patterns are compiled with the
//! `regex` crate (RE2 syntax, like Go's `regexp`); formats are reduced the way upstream's
//! `StripUnsupportedFormatsPostProcessor` does, so an unknown format is ignored rather than
//! enforced. Malformed input never fails here: CRD validation reports it; a node that is not
//! a JSON object accepts anything.

use std::collections::BTreeMap;
use std::sync::Arc;

use regex::Regex;
use serde_json::{Map, Value};

use crate::cel::Rule;
use crate::formats;

/// `additionalProperties` of a node.
#[derive(Debug, Clone, Default)]
pub enum Additional {
    /// Not given.
    #[default]
    Absent,
    /// `additionalProperties: true|false`.
    Bool(bool),
    /// `additionalProperties: {schema}`.
    Schema(Box<Node>),
}

/// A pattern and its compiled form (or the compile error, which upstream reports when the
/// pattern is used).
#[derive(Debug, Clone)]
pub struct Pattern {
    pub source: String,
    pub regex: Result<Regex, String>,
}

/// One schema node.
#[derive(Debug, Clone, Default)]
pub struct Node {
    /// `type` as written (`""` when absent).
    pub type_name: String,
    /// `x-kubernetes-int-or-string`.
    pub int_or_string: bool,
    pub nullable: bool,
    /// `format` as written.
    pub raw_format: String,
    /// The format validation enforces: `raw_format` when upstream supports it for the type,
    /// else empty.
    pub format: String,
    pub enum_values: Vec<Value>,
    pub maximum: Option<f64>,
    pub exclusive_maximum: bool,
    pub minimum: Option<f64>,
    pub exclusive_minimum: bool,
    pub multiple_of: Option<f64>,
    pub max_length: Option<i64>,
    pub min_length: Option<i64>,
    pub pattern: Option<Pattern>,
    pub max_items: Option<i64>,
    pub min_items: Option<i64>,
    pub unique_items: bool,
    pub max_properties: Option<i64>,
    pub min_properties: Option<i64>,
    pub required: Vec<String>,
    pub properties: BTreeMap<String, Node>,
    pub additional: Additional,
    pub items: Option<Box<Node>>,
    pub all_of: Vec<Node>,
    pub any_of: Vec<Node>,
    pub one_of: Vec<Node>,
    pub not: Option<Box<Node>>,
    pub default: Option<Value>,
    /// `x-kubernetes-preserve-unknown-fields: true`.
    pub preserve_unknown: bool,
    /// `x-kubernetes-embedded-resource: true`.
    pub embedded: bool,
    /// `x-kubernetes-list-type`.
    pub list_type: Option<String>,
    pub list_map_keys: Vec<String>,
    /// `x-kubernetes-map-type`.
    pub map_type: Option<String>,
    /// `x-kubernetes-validations`, compiled.
    pub rules: Vec<Arc<Rule>>,
    /// Whether this node or anything under it has rules (computed once).
    rules_below: bool,
    /// Whether this node or anything under it has a default (computed once).
    defaults_below: bool,
    /// Whether this node or anything under it is a set or map list (computed once).
    lists_below: bool,
    /// Whether this node or anything under it is an embedded resource (computed once).
    embedded_below: bool,
}

impl Node {
    /// Compiles a schema node (and everything under it).
    pub fn compile(value: &Value) -> Node {
        match value {
            Value::Object(m) => compile_object(m),
            _ => Node::default(),
        }
    }

    /// The types a value may have, as go-openapi lists them (`integer,string` for
    /// int-or-string).
    pub fn types(&self) -> &'static [&'static str] {
        if self.int_or_string {
            return &["integer", "string"];
        }
        match self.type_name.as_str() {
            "object" => &["object"],
            "array" => &["array"],
            "string" => &["string"],
            "integer" => &["integer"],
            "number" => &["number"],
            "boolean" => &["boolean"],
            "null" => &["null"],
            "" => &[],
            _ => &["unknown"],
        }
    }

    /// The schema of a field of this object: a property, else the map value schema.
    pub fn field(&self, name: &str) -> Option<&Node> {
        match self.properties.get(name) {
            Some(p) => Some(p),
            None => match &self.additional {
                Additional::Schema(s) => Some(s),
                _ => None,
            },
        }
    }

    /// Whether this node or anything under it has CEL rules.
    pub fn has_rules(&self) -> bool {
        self.rules_below
    }

    /// Whether this node or anything under it has a default.
    pub fn has_defaults(&self) -> bool {
        self.defaults_below
    }

    /// Whether this node or anything under it is a `set` or `map` list.
    pub fn has_keyed_lists(&self) -> bool {
        self.lists_below
    }

    /// Whether this node or anything under it is an embedded resource.
    pub fn has_embedded(&self) -> bool {
        self.embedded_below
    }

    /// The direct structural children: properties, map values, items.
    fn children(&self) -> impl Iterator<Item = &Node> {
        let values = match &self.additional {
            Additional::Schema(s) => Some(s.as_ref()),
            _ => None,
        };
        self.properties
            .values()
            .chain(values)
            .chain(self.items.as_deref())
    }
}

fn int(m: &Map<String, Value>, key: &str) -> Option<i64> {
    m.get(key).and_then(|v| {
        v.as_i64()
            .or_else(|| v.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as i64))
    })
}

fn float(m: &Map<String, Value>, key: &str) -> Option<f64> {
    m.get(key).and_then(Value::as_f64)
}

fn flag(m: &Map<String, Value>, key: &str) -> bool {
    m.get(key).and_then(Value::as_bool).unwrap_or(false)
}

fn string(m: &Map<String, Value>, key: &str) -> String {
    m.get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

fn list(m: &Map<String, Value>, key: &str) -> Vec<Node> {
    m.get(key)
        .and_then(Value::as_array)
        .map(|a| a.iter().map(Node::compile).collect())
        .unwrap_or_default()
}

fn compile_object(m: &Map<String, Value>) -> Node {
    let mut n = Node {
        type_name: string(m, "type"),
        int_or_string: flag(m, "x-kubernetes-int-or-string"),
        nullable: flag(m, "nullable"),
        raw_format: string(m, "format"),
        enum_values: m
            .get("enum")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default(),
        maximum: float(m, "maximum"),
        exclusive_maximum: flag(m, "exclusiveMaximum"),
        minimum: float(m, "minimum"),
        exclusive_minimum: flag(m, "exclusiveMinimum"),
        multiple_of: float(m, "multipleOf"),
        max_length: int(m, "maxLength"),
        min_length: int(m, "minLength"),
        pattern: m.get("pattern").and_then(Value::as_str).map(|p| Pattern {
            source: p.to_string(),
            regex: Regex::new(p).map_err(|e| e.to_string()),
        }),
        max_items: int(m, "maxItems"),
        min_items: int(m, "minItems"),
        unique_items: flag(m, "uniqueItems"),
        max_properties: int(m, "maxProperties"),
        min_properties: int(m, "minProperties"),
        required: m
            .get("required")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default(),
        all_of: list(m, "allOf"),
        any_of: list(m, "anyOf"),
        one_of: list(m, "oneOf"),
        not: m.get("not").map(|v| Box::new(Node::compile(v))),
        default: m.get("default").filter(|v| !v.is_null()).cloned(),
        preserve_unknown: flag(m, "x-kubernetes-preserve-unknown-fields"),
        embedded: flag(m, "x-kubernetes-embedded-resource"),
        list_type: m
            .get("x-kubernetes-list-type")
            .and_then(Value::as_str)
            .map(str::to_string),
        list_map_keys: m
            .get("x-kubernetes-list-map-keys")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default(),
        map_type: m
            .get("x-kubernetes-map-type")
            .and_then(Value::as_str)
            .map(str::to_string),
        ..Node::default()
    };
    n.format = formats::enforced(&n.type_name, n.int_or_string, &n.raw_format);
    if let Some(Value::Object(props)) = m.get("properties") {
        for (k, v) in props {
            n.properties.insert(k.clone(), Node::compile(v));
        }
    }
    n.additional = match m.get("additionalProperties") {
        Some(Value::Bool(b)) => Additional::Bool(*b),
        Some(v @ Value::Object(_)) => Additional::Schema(Box::new(Node::compile(v))),
        _ => Additional::Absent,
    };
    n.items = match m.get("items") {
        Some(v @ Value::Object(_)) => Some(Box::new(Node::compile(v))),
        _ => None,
    };
    if let Some(Value::Array(rules)) = m.get("x-kubernetes-validations") {
        n.rules = rules.iter().map(|r| Arc::new(Rule::compile(r))).collect();
    }
    n.rules_below = !n.rules.is_empty() || n.children().any(Node::has_rules);
    n.defaults_below = n.default.is_some() || n.children().any(Node::has_defaults);
    n.lists_below = matches!(n.list_type.as_deref(), Some("set" | "map"))
        || n.children().any(Node::has_keyed_lists);
    n.embedded_below = n.embedded || n.children().any(Node::has_embedded);
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_keyword_is_compiled() {
        let n = Node::compile(&json!({
            "type": "object",
            "required": ["spec"],
            "properties": {"spec": {"type": "object", "properties": {
                "size": {"type": "string", "enum": ["S", "M"], "default": "S", "pattern": "^[SM]$",
                         "maxLength": 1, "minLength": 1, "format": "password"},
                "n": {"type": "integer", "format": "int32", "minimum": 1, "maximum": 5,
                      "exclusiveMaximum": true, "multipleOf": 1},
                "port": {"x-kubernetes-int-or-string": true},
                "tags": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set",
                         "maxItems": 3, "minItems": 1},
                "m": {"type": "object", "additionalProperties": {"type": "string"},
                      "maxProperties": 2, "x-kubernetes-map-type": "granular"},
                "d": {"type": "string", "format": "no-such-format"}
            }}}
        }));
        let spec = n.field("spec").unwrap();
        let size = spec.field("size").unwrap();
        assert_eq!(size.enum_values, vec![json!("S"), json!("M")]);
        assert_eq!(size.default, Some(json!("S")));
        assert!(size.pattern.as_ref().unwrap().regex.is_ok());
        let num = spec.field("n").unwrap();
        assert_eq!((num.minimum, num.maximum), (Some(1.0), Some(5.0)));
        assert!(num.exclusive_maximum && !num.exclusive_minimum);
        assert_eq!(num.format, "int32");
        assert_eq!(spec.field("port").unwrap().types(), &["integer", "string"]);
        let tags = spec.field("tags").unwrap();
        assert_eq!(tags.list_type.as_deref(), Some("set"));
        assert_eq!(tags.items.as_ref().unwrap().type_name, "string");
        let m = spec.field("m").unwrap();
        assert!(matches!(m.additional, Additional::Schema(_)));
        assert_eq!(m.field("anything").unwrap().type_name, "string");
        let d = spec.field("d").unwrap();
        assert_eq!(
            (d.raw_format.as_str(), d.format.as_str()),
            ("no-such-format", "")
        );
        assert!(n.has_defaults() && !n.has_rules());
    }

    #[test]
    fn an_invalid_pattern_is_kept_with_its_error() {
        let n = Node::compile(&json!({"type": "string", "pattern": "(["}));
        assert!(n.pattern.unwrap().regex.is_err());
    }
}
