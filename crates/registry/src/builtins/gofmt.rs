//! Renders JSON values the way upstream's field errors print Go values (`%#v`), so messages
//! read exactly as kube-apiserver 1.33 writes them:
//! `spec.template.metadata.labels: Invalid value: map[string]string{"app":"web"}: ...`.
//!
//! Upstream prints strings quoted and numbers bare, and composite values (maps, slices,
//! structs) with Go syntax. Only the composite types that appear in common messages are
//! rendered here; deeply nested structs (a whole pod template) are printed as compact JSON,
//! which upstream does not do.

use apimachinery::field::{ErrorKind, FieldError, Path};
use serde_json::Value;

/// A field error whose bad value is already rendered (`Invalid value: <rendered>: <detail>`).
pub(crate) fn invalid(path: &Path, rendered: String, detail: &str) -> FieldError {
    FieldError {
        kind: ErrorKind::Invalid,
        field: path.to_string(),
        value: None,
        detail: match (rendered.is_empty(), detail.is_empty()) {
            (true, _) => detail.to_string(),
            (false, true) => rendered,
            (false, false) => format!("{rendered}: {detail}"),
        },
    }
}

/// `Duplicate value: <rendered>`.
pub(crate) fn duplicate(path: &Path, rendered: String) -> FieldError {
    FieldError {
        kind: ErrorKind::Duplicate,
        field: path.to_string(),
        value: None,
        detail: rendered,
    }
}

/// `Unsupported value: <rendered>: supported values: "a", "b"`.
pub(crate) fn not_supported(path: &Path, rendered: String, supported: &[&str]) -> FieldError {
    let quoted: Vec<String> = supported.iter().map(|s| quote(s)).collect();
    FieldError {
        kind: ErrorKind::NotSupported,
        field: path.to_string(),
        value: None,
        detail: format!("{rendered}: supported values: {}", quoted.join(", ")),
    }
}

pub(crate) use apimachinery::gofmt::quote;

fn str_of(v: &Value) -> String {
    match v {
        Value::String(s) => quote(s),
        other => quote(&other.to_string()),
    }
}

/// `map[string]string{"a":"b", "c":"d"}` (keys sorted, as Go prints maps), or
/// `map[string]string(nil)`.
pub(crate) fn string_map(v: Option<&Value>) -> String {
    match v.and_then(Value::as_object) {
        None => "map[string]string(nil)".into(),
        Some(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let items: Vec<String> = keys
                .iter()
                .map(|k| format!("{}:{}", quote(k), str_of(&m[k.as_str()])))
                .collect();
            format!("map[string]string{{{}}}", items.join(", "))
        }
    }
}

/// `[]string{"a", "b"}` or `[]string(nil)`.
pub(crate) fn string_slice(v: Option<&Value>) -> String {
    match v.and_then(Value::as_array) {
        None => "[]string(nil)".into(),
        Some(a) => {
            let items: Vec<String> = a.iter().map(str_of).collect();
            format!("[]string{{{}}}", items.join(", "))
        }
    }
}

/// A `metav1.LabelSelector` as `v1.LabelSelector{MatchLabels:..., MatchExpressions:...}`.
pub(crate) fn label_selector(v: Option<&Value>) -> String {
    let Some(v) = v.filter(|v| v.is_object()) else {
        return "null".into();
    };
    let exprs = match v.get("matchExpressions").and_then(Value::as_array) {
        None => "[]v1.LabelSelectorRequirement(nil)".to_string(),
        Some(a) => {
            let items: Vec<String> = a
                .iter()
                .map(|e| {
                    format!(
                        "v1.LabelSelectorRequirement{{Key:{}, Operator:{}, Values:{}}}",
                        quote(e.get("key").and_then(Value::as_str).unwrap_or("")),
                        quote(e.get("operator").and_then(Value::as_str).unwrap_or("")),
                        string_slice(e.get("values")),
                    )
                })
                .collect();
            format!("[]v1.LabelSelectorRequirement{{{}}}", items.join(", "))
        }
    };
    format!(
        "v1.LabelSelector{{MatchLabels:{}, MatchExpressions:{}}}",
        string_map(v.get("matchLabels")),
        exprs
    )
}

/// An int-or-string as `intstr.IntOrString{Type:0, IntVal:5, StrVal:""}`.
pub(crate) fn int_or_string(v: &Value) -> String {
    match v {
        Value::String(s) => format!(
            "intstr.IntOrString{{Type:1, IntVal:0, StrVal:{}}}",
            quote(s)
        ),
        Value::Number(n) => format!(
            "intstr.IntOrString{{Type:0, IntVal:{}, StrVal:\"\"}}",
            n.as_i64().unwrap_or(0)
        ),
        other => format!(
            "intstr.IntOrString{{Type:1, IntVal:0, StrVal:{}}}",
            quote(&other.to_string())
        ),
    }
}

/// The `(protocol, port)` key of a Service port, as the duplicate-port error prints it.
pub(crate) fn service_port_key(protocol: &str, port: i64) -> String {
    format!(
        "core.ServicePort{{Name:\"\", Protocol:{}, AppProtocol:(*string)(nil), Port:{port}, TargetPort:intstr.IntOrString{{Type:0, IntVal:0, StrVal:\"\"}}, NodePort:0}}",
        quote(protocol)
    )
}

/// Anything else: compact JSON (`null` when absent).
pub(crate) fn json(v: Option<&Value>) -> String {
    v.map(Value::to_string).unwrap_or_else(|| "null".into())
}

/// The changed top-level fields of two objects, old then new, in the `-`/`+` layout of
/// upstream's `cmp.Diff` (which diffs the internal Go types; this diffs JSON fields).
pub(crate) fn struct_diff(type_name: &str, old: &Value, new: &Value) -> String {
    let mut keys: Vec<&String> = old
        .as_object()
        .into_iter()
        .chain(new.as_object())
        .flat_map(|m| m.keys())
        .collect();
    keys.sort();
    keys.dedup();
    let mut out = format!("  {type_name}{{\n");
    for k in keys {
        let (o, n) = (
            old.get(k.as_str()).filter(|v| !v.is_null()),
            new.get(k.as_str()).filter(|v| !v.is_null()),
        );
        if o == n {
            continue;
        }
        let mut field = k.clone();
        if let Some(first) = field.get(..1) {
            let upper = first.to_uppercase();
            field.replace_range(..1, &upper);
        }
        if let Some(o) = o {
            out.push_str(&format!("- \t{field}: {o},\n"));
        }
        if let Some(n) = n {
            out.push_str(&format!("+ \t{field}: {n},\n"));
        }
    }
    out.push_str("  }\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn maps_print_sorted_with_go_syntax() {
        assert_eq!(
            string_map(Some(&json!({"tier": "fe", "app": "web"}))),
            "map[string]string{\"app\":\"web\", \"tier\":\"fe\"}"
        );
        assert_eq!(string_map(None), "map[string]string(nil)");
    }

    #[test]
    fn selectors_print_as_upstream_structs() {
        assert_eq!(
            label_selector(Some(&json!({"matchLabels": {"app": "a"}}))),
            "v1.LabelSelector{MatchLabels:map[string]string{\"app\":\"a\"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}"
        );
        assert_eq!(
            label_selector(Some(
                &json!({"matchExpressions": [{"key": "k", "operator": "In", "values": ["x"]}]})
            )),
            "v1.LabelSelector{MatchLabels:map[string]string(nil), MatchExpressions:[]v1.LabelSelectorRequirement{v1.LabelSelectorRequirement{Key:\"k\", Operator:\"In\", Values:[]string{\"x\"}}}}"
        );
    }

    #[test]
    fn rendered_errors_read_like_upstream() {
        let e = invalid(
            &Path::new("spec.template.metadata.labels"),
            string_map(Some(&json!({"app": "x"}))),
            "`selector` does not match template `labels`",
        );
        assert_eq!(
            e.message(),
            "spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"x\"}: `selector` does not match template `labels`"
        );
        let d = duplicate(&Path::new("spec.ports[1]"), service_port_key("TCP", 80));
        assert_eq!(
            d.message(),
            "spec.ports[1]: Duplicate value: core.ServicePort{Name:\"\", Protocol:\"TCP\", AppProtocol:(*string)(nil), Port:80, TargetPort:intstr.IntOrString{Type:0, IntVal:0, StrVal:\"\"}, NodePort:0}"
        );
    }
}
