//! Secrets and ConfigMaps (core/v1): key names, the 1 MiB size limit, the data each secret
//! type requires, `immutable` objects whose data may no longer change, and a Secret's
//! `stringData` folded into base64 `data` as upstream's v1 conversion does (it is never
//! stored). A Secret's `type` defaults to `Opaque`, is immutable and selectable.

use apimachinery::field::{ErrorList, FieldError, Path};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Map, Value, json};

use super::podspec::config_map_key_errors;
use super::util::{IMMUTABLE, default_str, field_string, obj_at, str_at};
use crate::strategy::Strategy;

/// Upstream `MaxSecretSize`, also the ConfigMap limit.
const MAX_SIZE: usize = 1024 * 1024;
const IMMUTABLE_SET: &str = "field is immutable when `immutable` is set";
const REDACTED: &str = "<secret contents redacted>";

/// Secrets.
pub struct SecretStrategy;

fn sorted(map: &Map<String, Value>) -> Vec<(&String, &Value)> {
    let mut v: Vec<_> = map.iter().collect();
    v.sort_by(|a, b| a.0.cmp(b.0));
    v
}

/// Decodes base64 data, or the error upstream's JSON decoding would report.
fn decode(v: &Value) -> Result<Vec<u8>, String> {
    match v {
        Value::String(s) => STANDARD.decode(s).map_err(|e| match e {
            base64::DecodeError::InvalidByte(i, _)
            | base64::DecodeError::InvalidLastSymbol(i, _) => {
                format!("illegal base64 data at input byte {i}")
            }
            _ => format!("illegal base64 data at input byte {}", s.len()),
        }),
        Value::Null => Ok(Vec::new()),
        _ => Err("must be a base64-encoded string".into()),
    }
}

/// Checks data keys and values; the total decoded size.
fn validate_data(
    errs: &mut ErrorList,
    data: Option<&Map<String, Value>>,
    p: &Path,
    binary: bool,
) -> usize {
    let mut total = 0;
    for (k, v) in data.map(sorted).unwrap_or_default() {
        for m in config_map_key_errors(k) {
            errs.push(FieldError::invalid(p.key(k), json!(k), m));
        }
        if binary {
            match decode(v) {
                Ok(bytes) => total += bytes.len(),
                Err(e) => errs.push(FieldError::invalid(p.key(k), json!(REDACTED), e)),
            }
        } else {
            total += v.as_str().map_or(0, str::len);
        }
    }
    total
}

/// The `immutable: true` rules shared by Secrets and ConfigMaps.
fn immutable_data(errs: &mut ErrorList, new: &Value, old: &Value, fields: &[&str]) {
    if old.get("immutable").and_then(Value::as_bool) != Some(true) {
        return;
    }
    if new.get("immutable").and_then(Value::as_bool) != Some(true) {
        errs.push(FieldError::forbidden("immutable", IMMUTABLE_SET));
    }
    let norm = |v: Option<&Value>| {
        v.filter(|x| x.as_object().is_some_and(|m| !m.is_empty()))
            .cloned()
    };
    for f in fields {
        if norm(new.get(*f)) != norm(old.get(*f)) {
            errs.push(FieldError::forbidden(*f, IMMUTABLE_SET));
        }
    }
}

impl Strategy for SecretStrategy {
    fn default(&self, obj: &mut Value) {
        if !obj.is_object() {
            return;
        }
        default_str(obj, "type", "Opaque");
        let Some(string_data) = obj.as_object_mut().and_then(|m| m.remove("stringData")) else {
            return;
        };
        let Some(sd) = string_data.as_object() else {
            return;
        };
        if sd.is_empty() {
            return;
        }
        let data = obj
            .as_object_mut()
            .map(|m| m.entry("data").or_insert_with(|| json!({})));
        if let Some(data) = data {
            if !data.is_object() {
                *data = json!({});
            }
            for (k, v) in sd {
                let s = match v {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                data[k.as_str()] = json!(STANDARD.encode(s.as_bytes()));
            }
        }
    }

    fn validate(&self, obj: &Value) -> ErrorList {
        let mut errs = ErrorList::new();
        let dp = Path::new("data");
        let data = obj_at(obj, "/data");
        let total = validate_data(&mut errs, data, &dp, true);
        if total > MAX_SIZE {
            errs.push(FieldError::too_long(&dp, MAX_SIZE));
        }
        let has = |k: &str| data.is_some_and(|d| d.contains_key(k));
        let get = |k: &str| data.and_then(|d| d.get(k)).map(decode);
        match str_at(obj, "/type") {
            "kubernetes.io/service-account-token" => {
                let name =
                    apimachinery::meta::annotation(obj, "kubernetes.io/service-account.name");
                if name.is_none_or(str::is_empty) {
                    errs.push(FieldError::required(
                        Path::new("metadata")
                            .child("annotations")
                            .key("kubernetes.io/service-account.name"),
                        "",
                    ));
                }
            }
            "kubernetes.io/dockercfg" => {
                json_key(&mut errs, get(".dockercfg"), &dp.key(".dockercfg"))
            }
            "kubernetes.io/dockerconfigjson" => json_key(
                &mut errs,
                get(".dockerconfigjson"),
                &dp.key(".dockerconfigjson"),
            ),
            "kubernetes.io/basic-auth" if !has("username") && !has("password") => {
                errs.push(FieldError::required(dp.key("username"), ""));
                errs.push(FieldError::required(dp.key("password"), ""));
            }
            "kubernetes.io/ssh-auth"
                if get("ssh-privatekey").is_none_or(|r| !r.is_ok_and(|b| !b.is_empty())) =>
            {
                errs.push(FieldError::required(dp.key("ssh-privatekey"), ""));
            }
            "kubernetes.io/tls" => {
                for k in ["tls.crt", "tls.key"] {
                    if !has(k) {
                        errs.push(FieldError::required(dp.key(k), ""));
                    }
                }
            }
            _ => {}
        }
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> ErrorList {
        let mut errs = ErrorList::new();
        let (nt, ot) = (str_at(new, "/type"), str_at(old, "/type"));
        if nt != ot {
            errs.push(FieldError::invalid("type", json!(nt), IMMUTABLE));
        }
        immutable_data(&mut errs, new, old, &["data"]);
        errs.extend(self.validate(new));
        errs
    }

    fn field_names(&self) -> &[&'static str] {
        &["type"]
    }

    fn field(&self, obj: &Value, name: &str) -> Option<String> {
        (name == "type").then(|| field_string(obj, "/type"))
    }
}

/// A key that must hold a JSON document (docker configs).
fn json_key(errs: &mut ErrorList, value: Option<Result<Vec<u8>, String>>, p: &Path) {
    match value {
        None => errs.push(FieldError::required(p, "")),
        Some(Ok(bytes)) => {
            if let Err(e) = serde_json::from_slice::<Map<String, Value>>(&bytes) {
                errs.push(FieldError::invalid(p, json!(REDACTED), e.to_string()));
            }
        }
        Some(Err(_)) => {}
    }
}

/// ConfigMaps.
pub struct ConfigMapStrategy;

impl Strategy for ConfigMapStrategy {
    fn validate(&self, obj: &Value) -> ErrorList {
        let mut errs = ErrorList::new();
        let data = obj_at(obj, "/data");
        let binary = obj_at(obj, "/binaryData");
        let dp = Path::new("data");
        let mut total = validate_data(&mut errs, data, &dp, false);
        for (k, _) in data.map(sorted).unwrap_or_default() {
            if binary.is_some_and(|b| b.contains_key(k)) {
                errs.push(FieldError::invalid(
                    dp.key(k),
                    json!(k),
                    "duplicate of key present in binaryData",
                ));
            }
        }
        total += validate_data(&mut errs, binary, &Path::new("binaryData"), true);
        if total > MAX_SIZE {
            errs.push(FieldError::too_long("", MAX_SIZE));
        }
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> ErrorList {
        let mut errs = ErrorList::new();
        immutable_data(&mut errs, new, old, &["data", "binaryData"]);
        errs.extend(self.validate(new));
        errs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages(errs: &ErrorList) -> Vec<String> {
        errs.iter().map(FieldError::message).collect()
    }

    #[test]
    fn string_data_is_merged_into_base64_data_and_dropped() {
        let mut s = json!({"metadata": {"name": "s"}, "data": {"a": "eA=="}, "stringData": {"b": "hello", "a": "y"}});
        SecretStrategy.default(&mut s);
        assert_eq!(
            s,
            json!({"metadata": {"name": "s"}, "type": "Opaque", "data": {"a": "eQ==", "b": "aGVsbG8="}})
        );
    }

    #[test]
    fn secret_types_require_their_keys() {
        let s = json!({"type": "kubernetes.io/tls", "data": {"tls.crt": "eA=="}});
        assert_eq!(
            messages(&SecretStrategy.validate(&s)),
            vec!["data[tls.key]: Required value"]
        );
        let s = json!({"type": "Opaque", "data": {"bad key": "eA==", "ok": "%%%"}});
        assert_eq!(
            messages(&SecretStrategy.validate(&s)),
            vec![
                "data[bad key]: Invalid value: \"bad key\": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')",
                "data[ok]: Invalid value: \"<secret contents redacted>\": illegal base64 data at input byte 0",
            ]
        );
    }

    #[test]
    fn immutable_secrets_keep_their_data_and_type() {
        let old = json!({"type": "Opaque", "immutable": true, "data": {"a": "eA=="}});
        let new = json!({"type": "kubernetes.io/basic-auth", "data": {"username": "eQ=="}});
        assert_eq!(
            messages(&SecretStrategy.validate_update(&new, &old)),
            vec![
                "type: Invalid value: \"kubernetes.io/basic-auth\": field is immutable",
                "immutable: Forbidden: field is immutable when `immutable` is set",
                "data: Forbidden: field is immutable when `immutable` is set",
            ]
        );
    }

    #[test]
    fn secret_type_is_selectable() {
        assert_eq!(
            SecretStrategy
                .field(&json!({"type": "Opaque"}), "type")
                .as_deref(),
            Some("Opaque")
        );
    }

    #[test]
    fn immutable_config_maps_keep_their_data() {
        let old = json!({"immutable": true, "data": {"a": "1"}});
        let mut new = old.clone();
        assert!(ConfigMapStrategy.validate_update(&new, &old).is_empty());
        new["data"]["a"] = json!("2");
        assert_eq!(
            messages(&ConfigMapStrategy.validate_update(&new, &old)),
            vec!["data: Forbidden: field is immutable when `immutable` is set"]
        );
    }

    #[test]
    fn config_map_keys_may_not_repeat_across_data_and_binary_data() {
        let cm = json!({"data": {"a": "1"}, "binaryData": {"a": "eA=="}});
        assert_eq!(
            messages(&ConfigMapStrategy.validate(&cm)),
            vec!["data[a]: Invalid value: \"a\": duplicate of key present in binaryData"]
        );
    }
}
