//! JSON values as CEL sees them in CRD rules.
//!
//! - Declared object properties are CEL fields under their escaped name (upstream
//!   `cel.Escape`): `foo-bar` is `foo__dash__bar`, `namespace` is `__namespace__`; keys of
//!   maps (`additionalProperties`) stay as they are and are read with `self['key']`.
//! - `type: number` values are doubles even when written as integers; integers are `int`.
//! - At a resource root and in embedded resources, `apiVersion` and `kind` are visible and
//!   `metadata` has only `name` and `generateName`, as upstream's declared type allows.

use std::collections::HashMap;
use std::sync::Arc;

use cel::Value as Cel;
use cel::objects::{Key, Map};
use serde_json::Value;

use crate::schema::{Additional, Node};

const RESERVED: &[&str] = &[
    "true",
    "false",
    "null",
    "in",
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
];

/// Upstream `cel.Escape`: the CEL field name of a property, or `None` when it can't be one.
pub fn escape(ident: &str) -> Option<String> {
    let first = ident.chars().next()?;
    if first.is_ascii_digit() {
        return None;
    }
    if RESERVED.contains(&ident) {
        return Some(format!("__{ident}__"));
    }
    let mut out = String::with_capacity(ident.len());
    let mut chars = ident.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '_' if chars.peek() == Some(&'_') => {
                chars.next();
                out.push_str("__underscores__");
            }
            '.' => out.push_str("__dot__"),
            '-' => out.push_str("__dash__"),
            '/' => out.push_str("__slash__"),
            c if c.is_ascii_alphanumeric() || c == '_' => out.push(c),
            _ => return None,
        }
    }
    Some(out)
}

fn map(entries: HashMap<Key, Cel>) -> Cel {
    Cel::Map(Map {
        map: Arc::new(entries),
    })
}

/// Converts `v` (described by `node`) to a CEL value. `resource` is true at a resource root
/// and in embedded resources.
pub fn to_cel(v: &Value, node: Option<&Node>, resource: bool) -> Cel {
    match v {
        Value::Null => Cel::Null,
        Value::Bool(b) => Cel::Bool(*b),
        Value::Number(n) => {
            let double = node.is_some_and(|n| n.type_name == "number");
            match n.as_i64() {
                Some(i) if !double => Cel::Int(i),
                _ => match n.as_u64() {
                    Some(u) if !double && n.as_i64().is_none() => Cel::UInt(u),
                    _ => Cel::Float(n.as_f64().unwrap_or(0.0)),
                },
            }
        }
        Value::String(s) => Cel::String(Arc::new(s.clone())),
        Value::Array(items) => {
            let item = node.and_then(|n| n.items.as_deref());
            let embedded = item.is_some_and(|i| i.embedded);
            Cel::List(Arc::new(
                items.iter().map(|i| to_cel(i, item, embedded)).collect(),
            ))
        }
        Value::Object(m) => {
            let mut out = HashMap::with_capacity(m.len());
            let structured = node.is_some_and(|n| !n.properties.is_empty());
            for (k, child) in m {
                if resource && k == "metadata" {
                    let mut meta = HashMap::new();
                    for f in ["name", "generateName"] {
                        if let Some(s) = child.get(f).and_then(Value::as_str) {
                            meta.insert(Key::from(f), Cel::String(Arc::new(s.to_string())));
                        }
                    }
                    out.insert(Key::from("metadata"), map(meta));
                    continue;
                }
                let prop = node.and_then(|n| n.properties.get(k));
                match prop {
                    Some(p) => {
                        if let Some(name) = escape(k) {
                            out.insert(Key::from(name), to_cel(child, Some(p), p.embedded));
                        }
                    }
                    None => {
                        let values = match node.map(|n| &n.additional) {
                            Some(Additional::Schema(s)) => Some(s.as_ref()),
                            _ => None,
                        };
                        let keep = !structured
                            || values.is_some()
                            || node.is_some_and(|n| n.preserve_unknown)
                            || (resource && (k == "apiVersion" || k == "kind"));
                        if keep {
                            let embedded = values.is_some_and(|s| s.embedded);
                            out.insert(Key::from(k.as_str()), to_cel(child, values, embedded));
                        }
                    }
                }
            }
            map(out)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn property_names_are_escaped_like_upstream() {
        assert_eq!(escape("foo-bar").as_deref(), Some("foo__dash__bar"));
        assert_eq!(escape("a.b/c").as_deref(), Some("a__dot__b__slash__c"));
        assert_eq!(escape("namespace").as_deref(), Some("__namespace__"));
        assert_eq!(escape("x__y").as_deref(), Some("x__underscores__y"));
        assert_eq!(escape("plain").as_deref(), Some("plain"));
        assert_eq!(escape("1abc"), None);
        assert_eq!(escape("a b"), None);
    }

    #[test]
    fn numbers_follow_the_schema_type() {
        let n = Node::compile(&json!({"type": "number"}));
        assert_eq!(to_cel(&json!(2), Some(&n), false), Cel::Float(2.0));
        let i = Node::compile(&json!({"type": "integer"}));
        assert_eq!(to_cel(&json!(2), Some(&i), false), Cel::Int(2));
    }

    #[test]
    fn a_resource_root_exposes_only_name_and_generate_name_of_metadata() {
        let node =
            Node::compile(&json!({"type": "object", "properties": {"spec": {"type": "object"}}}));
        let v = to_cel(
            &json!({"apiVersion": "a/v1", "kind": "K", "metadata": {"name": "n", "labels": {"a": "b"}}, "spec": {}}),
            Some(&node),
            true,
        );
        let Cel::Map(m) = v else { panic!("a map") };
        let Some(Cel::Map(meta)) = m.map.get(&Key::from("metadata")) else {
            panic!("metadata")
        };
        assert_eq!(meta.map.len(), 1);
        assert!(m.map.contains_key(&Key::from("apiVersion")));
    }
}
