//! Cell formatting rules shared by many printers: label maps, label selectors, container
//! names and images, optional booleans, access modes and "+ N more..." lists.
//!
//! Each function reproduces one upstream helper (`labels.FormatLabels`,
//! `metav1.FormatLabelSelector`, `layoutContainerCells`, `printBoolPtr`,
//! `GetAccessModesAsString`, `listWithMoreString`) from the JSON form of the object.

use serde_json::{Map, Value};

use crate::value::str_or_empty;

/// `labels.FormatLabels`: `k=v` pairs sorted by key and comma-joined, `<none>` when empty.
pub(crate) fn labels(m: Option<&Map<String, Value>>) -> String {
    let mut pairs: Vec<(&str, &str)> = m
        .into_iter()
        .flatten()
        .map(|(k, v)| (k.as_str(), v.as_str().unwrap_or("")))
        .collect();
    if pairs.is_empty() {
        return "<none>".to_string();
    }
    pairs.sort();
    pairs
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// A label selector rendered as `labels.Selector.String()`: `Ok("")` for a nil selector
/// (Nothing) and an empty one (Everything), `Err(())` when a requirement is invalid.
fn selector(sel: Option<&Value>) -> Result<String, ()> {
    let Some(sel) = sel.filter(|s| !s.is_null()) else {
        return Ok(String::new());
    };
    let sel = sel.as_object().ok_or(())?;
    let mut reqs: Vec<(String, String)> = Vec::new();
    if let Some(labels) = sel.get("matchLabels").filter(|v| !v.is_null()) {
        let labels = labels.as_object().ok_or(())?;
        let mut keys: Vec<&String> = labels.keys().collect();
        keys.sort();
        for k in keys {
            let v = labels[k].as_str().ok_or(())?;
            validate_key(k)?;
            validate_value(v)?;
            reqs.push((k.clone(), format!("{k}={v}")));
        }
    }
    let exprs = sel.get("matchExpressions").and_then(Value::as_array);
    for expr in exprs.into_iter().flatten() {
        let key = str_or_empty(expr, &["key"]);
        let values: Vec<&str> = crate::value::list(expr, &["values"])
            .iter()
            .map(|v| v.as_str().ok_or(()))
            .collect::<Result<_, _>>()?;
        validate_key(key)?;
        for v in &values {
            validate_value(v)?;
        }
        let mut sorted = values.clone();
        sorted.sort();
        let text = match str_or_empty(expr, &["operator"]) {
            "In" | "NotIn" if values.is_empty() => return Err(()),
            "In" => format!("{key} in ({})", sorted.join(",")),
            "NotIn" => format!("{key} notin ({})", sorted.join(",")),
            "Exists" | "DoesNotExist" if !values.is_empty() => return Err(()),
            "Exists" => key.to_string(),
            "DoesNotExist" => format!("!{key}"),
            _ => return Err(()),
        };
        reqs.push((key.to_string(), text));
    }
    // `selector.Add` sorts requirements by key; for the handful a selector holds Go's sort is
    // an insertion sort, which is stable, as this one is.
    reqs.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(reqs
        .into_iter()
        .map(|(_, t)| t)
        .collect::<Vec<_>>()
        .join(","))
}

/// `metav1.FormatLabelSelector`: `<none>` for an empty or nil selector, `<error>` when invalid.
pub(crate) fn label_selector(sel: Option<&Value>) -> String {
    match selector(sel) {
        Ok(s) if s.is_empty() => "<none>".to_string(),
        Ok(s) => s,
        Err(()) => "<error>".to_string(),
    }
}

/// The Deployment printer's selector: the selector string (empty for none), `<invalid>` when
/// it cannot be parsed.
pub(crate) fn selector_or_invalid(sel: Option<&Value>) -> String {
    selector(sel).unwrap_or_else(|()| "<invalid>".to_string())
}

/// A label key: a qualified name, `[prefix/]name` (`validation.IsQualifiedName`).
fn validate_key(key: &str) -> Result<(), ()> {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(p) = prefix {
        let ok = !p.is_empty()
            && p.len() <= 253
            && p.split('.').all(|l| {
                !l.is_empty()
                    && l.bytes()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
                    && !l.starts_with('-')
                    && !l.ends_with('-')
            });
        if !ok {
            return Err(());
        }
    }
    if name.is_empty() {
        Err(())
    } else {
        validate_value(name)
    }
}

/// A label value: empty, or up to 63 characters `[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?`.
fn validate_value(v: &str) -> Result<(), ()> {
    if v.is_empty() {
        return Ok(());
    }
    let b = v.as_bytes();
    let edge = |c: u8| c.is_ascii_alphanumeric();
    let inner = |c: &u8| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.');
    let ok = b.len() <= 63 && edge(b[0]) && edge(b[b.len() - 1]) && b.iter().all(inner);
    if ok { Ok(()) } else { Err(()) }
}

/// `layoutContainerCells`: container names and images, each comma-joined.
pub(crate) fn container_cells(containers: &[Value]) -> (String, String) {
    let names: Vec<&str> = containers
        .iter()
        .map(|c| str_or_empty(c, &["name"]))
        .collect();
    let images: Vec<&str> = containers
        .iter()
        .map(|c| str_or_empty(c, &["image"]))
        .collect();
    (names.join(","), images.join(","))
}

/// `printBoolPtr`: `True`, `False` or `<unset>`.
pub(crate) fn bool_ptr(b: Option<bool>) -> &'static str {
    match b {
        Some(true) => "True",
        Some(false) => "False",
        None => "<unset>",
    }
}

/// `GetAccessModesAsString`: the abbreviations present, in a fixed order.
pub(crate) fn access_modes(modes: &[Value]) -> String {
    let has = |m: &str| modes.iter().any(|v| v.as_str() == Some(m));
    [
        ("ReadWriteOnce", "RWO"),
        ("ReadOnlyMany", "ROX"),
        ("ReadWriteMany", "RWX"),
        ("ReadWriteOncePod", "RWOP"),
    ]
    .iter()
    .filter(|(mode, _)| has(mode))
    .map(|(_, short)| *short)
    .collect::<Vec<_>>()
    .join(",")
}

/// `listWithMoreString`: the first entries, `+ N more...` when cut, `<unset>` when empty.
pub(crate) fn list_with_more(list: &[String], more: bool, count: usize, max: usize) -> String {
    let joined = list.join(",");
    if more {
        return format!("{joined} + {} more...", count.saturating_sub(max));
    }
    if joined.is_empty() {
        "<unset>".to_string()
    } else {
        joined
    }
}

/// `net.JoinHostPort`: IPv6 hosts are bracketed.
pub(crate) fn join_host_port(host: &str, port: i64) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn labels_are_sorted_and_none_when_empty() {
        let m = json!({"tier": "web", "app": "nginx"});
        assert_eq!(labels(m.as_object()), "app=nginx,tier=web");
        assert_eq!(labels(None), "<none>");
        assert_eq!(labels(json!({}).as_object()), "<none>");
    }

    #[test]
    fn label_selectors_render_like_upstream() {
        let sel = json!({
            "matchLabels": {"app": "web"},
            "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["front", "back"]},
                {"key": "env", "operator": "NotIn", "values": ["prod"]},
                {"key": "canary", "operator": "DoesNotExist"},
                {"key": "zone", "operator": "Exists"}
            ]
        });
        assert_eq!(
            label_selector(Some(&sel)),
            "app=web,!canary,env notin (prod),tier in (back,front),zone"
        );
        assert_eq!(label_selector(None), "<none>");
        assert_eq!(label_selector(Some(&json!({}))), "<none>");
        assert_eq!(selector_or_invalid(Some(&json!({}))), "");
    }

    #[test]
    fn invalid_selectors_print_error_or_invalid() {
        let bad_op = json!({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]});
        assert_eq!(label_selector(Some(&bad_op)), "<error>");
        assert_eq!(selector_or_invalid(Some(&bad_op)), "<invalid>");
        let empty_in = json!({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]});
        assert_eq!(label_selector(Some(&empty_in)), "<error>");
        let bad_key = json!({"matchLabels": {"-bad": "x"}});
        assert_eq!(label_selector(Some(&bad_key)), "<error>");
        let prefixed = json!({"matchLabels": {"app.kubernetes.io/name": "x"}});
        assert_eq!(label_selector(Some(&prefixed)), "app.kubernetes.io/name=x");
    }

    #[test]
    fn access_modes_use_a_fixed_order() {
        let modes = json!(["ReadWriteMany", "ReadWriteOnce", "ReadWriteOnce"]);
        assert_eq!(access_modes(modes.as_array().unwrap()), "RWO,RWX");
        assert_eq!(access_modes(&[]), "");
    }

    #[test]
    fn lists_with_more_count_what_was_cut() {
        let l = vec!["a".to_string(), "b".to_string()];
        assert_eq!(list_with_more(&l, true, 5, 2), "a,b + 3 more...");
        assert_eq!(list_with_more(&l, false, 2, 3), "a,b");
        assert_eq!(list_with_more(&[], false, 0, 3), "<unset>");
        assert_eq!(join_host_port("fd00::1", 80), "[fd00::1]:80");
    }
}
