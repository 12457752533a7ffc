//! Paths into a structural schema written as JSONPath-like strings (`.spec.replicas`,
//! `['foo.bar']`): the `fieldPath` of CEL rules and the `jsonPath` of `selectableFields`
//! (upstream `cel.ValidFieldPath`). A path is valid when every step names a declared property,
//! or a key of a map (`additionalProperties`).

use apimachinery::field::Path;

use crate::schema::{Additional, Node};

/// Follows `json_path` through `node`: the field path it names (`spec.x`, `spec.labels[a]`)
/// and the schema it reaches, or why it is not valid (upstream's wording).
pub fn resolve<'n>(
    json_path: &str,
    mut node: &'n Node,
    allow_array_notation: bool,
) -> Result<(Path, &'n Node), String> {
    let tokens = tokenize(json_path);
    let mut path = Path::default();
    let mut i = 0;
    while i < tokens.len() {
        let tok = tokens[i].as_str();
        let name = match tok {
            "[" => {
                if !allow_array_notation {
                    return Err("array notation is not allowed".into());
                }
                let quoted = tokens.get(i + 1).ok_or("unexpected end of JSON path")?;
                if quoted.len() < 2 || !quoted.starts_with('\'') || !quoted.ends_with('\'') {
                    return Err(format!("expected single quoted string but got {quoted}"));
                }
                let name = unescape(&quoted[1..quoted.len() - 1])
                    .map_err(|e| format!("invalid string literal: {e}"))?;
                match tokens.get(i + 2).map(String::as_str) {
                    Some("]") => {}
                    Some(other) => return Err(format!("expected ] but got {other}")),
                    None => return Err("unexpected end of JSON path".into()),
                }
                i += 3;
                name
            }
            "." => {
                let name = tokens.get(i + 1).ok_or("unexpected end of JSON path")?;
                i += 2;
                name.clone()
            }
            other => return Err(format!("expected [ or . but got: {other}")),
        };
        if !node.properties.is_empty() {
            path = path.child(&name);
            node = node
                .properties
                .get(&name)
                .ok_or("does not refer to a valid field")?;
        } else if let Additional::Schema(values) = &node.additional {
            path = path.key(&name);
            node = values;
        } else {
            return Err("does not refer to a valid field".into());
        }
    }
    Ok((path, node))
}

/// Splits at `.`, `[` and `]`, keeping single-quoted strings whole.
fn tokenize(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let chars: Vec<char> = s.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '.' | '[' | ']' => {
                out.push(chars[i].to_string());
                i += 1;
            }
            '\'' => {
                let mut j = i + 1;
                while j < chars.len() && !(chars[j] == '\'' && chars[j - 1] != '\\') {
                    j += 1;
                }
                let end = (j + 1).min(chars.len());
                out.push(chars[i..end].iter().collect());
                i = end;
            }
            _ => {
                let mut j = i;
                while j < chars.len() && !matches!(chars[j], '.' | '[' | ']') {
                    j += 1;
                }
                out.push(chars[i..j].iter().collect());
                i = j;
            }
        }
    }
    out
}

fn unescape(s: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let d = chars.next().ok_or("invalid escape char \\")?;
        out.push(match d {
            'a' => '\u{7}',
            'b' => '\u{8}',
            'f' => '\u{c}',
            'n' => '\n',
            'r' => '\r',
            't' => '\t',
            'v' => '\u{b}',
            '\'' => '\'',
            '\\' => '\\',
            other => return Err(format!("invalid escape char \\{other}")),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Node {
        Node::compile(&json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {
                "replicas": {"type": "integer"},
                "a.b": {"type": "string"},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}}}}}}))
    }

    #[test]
    fn dotted_and_quoted_steps_resolve_to_the_schema() {
        let s = schema();
        let (p, n) = resolve(".spec.replicas", &s, true).unwrap();
        assert_eq!(
            (p.as_str(), n.type_name.as_str()),
            ("spec.replicas", "integer")
        );
        let (p, _) = resolve(".spec['a.b']", &s, true).unwrap();
        assert_eq!(p.as_str(), "spec.a.b");
        let (p, n) = resolve(".spec.labels.app", &s, true).unwrap();
        assert_eq!(
            (p.as_str(), n.type_name.as_str()),
            ("spec.labels[app]", "string")
        );
    }

    #[test]
    fn invalid_paths_say_why() {
        let s = schema();
        assert_eq!(
            resolve(".spec.nope", &s, true).unwrap_err(),
            "does not refer to a valid field"
        );
        assert_eq!(
            resolve("spec", &s, true).unwrap_err(),
            "expected [ or . but got: spec"
        );
        assert_eq!(
            resolve(".spec['a.b']", &s, false).unwrap_err(),
            "array notation is not allowed"
        );
        assert_eq!(
            resolve(".spec.", &s, true).unwrap_err(),
            "unexpected end of JSON path"
        );
    }
}
