//! Environment of containers: variable names (upstream's relaxed rule, on by default in
//! 1.33), `valueFrom` sources and their field paths, `envFrom` sources, and the key format
//! of ConfigMaps and Secrets they refer to (`IsConfigMapKey`).

use apimachinery::field::{ErrorList, FieldError, Path};
use serde_json::{Value, json};

use crate::builtins::util::{at, qualified_name, str_at};

/// Upstream `IsRelaxedEnvVarName` (the RelaxedEnvironmentVariableValidation gate is on by
/// default in 1.33).
pub(crate) fn env_name_errors(name: &str) -> Vec<String> {
    if name.bytes().all(|b| (0x20..0x7f).contains(&b) && b != b'=') {
        Vec::new()
    } else {
        vec![
            "a valid environment variable name must consist only of printable ASCII characters other than '='"
                .into(),
        ]
    }
}

/// Upstream `IsConfigMapKey`.
pub(crate) fn config_map_key_errors(key: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if key.len() > 253 {
        errs.push(apimachinery::validation::max_len_error(253));
    }
    if key.is_empty()
        || !key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'))
    {
        errs.push(apimachinery::validation::regex_error(
            "a valid config key must consist of alphanumeric characters, '-', '_' or '.'",
            "[-._a-zA-Z0-9]+",
            &["key.name", "KEY_NAME", "key-name"],
        ));
    }
    match key {
        "." => errs.push("must not be '.'".into()),
        ".." => errs.push("must not be '..'".into()),
        k if k.starts_with("..") => errs.push("must not start with '..'".into()),
        _ => {}
    }
    errs
}

const ENV_FIELD_PATHS: [&str; 9] = [
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
    "spec.nodeName",
    "spec.serviceAccountName",
    "status.hostIP",
    "status.hostIPs",
    "status.podIP",
    "status.podIPs",
];

/// Upstream `ValidateEnv` and `validateEnvVarValueFrom`.
pub(crate) fn env(errs: &mut ErrorList, vars: &[Value], path: &Path) {
    for (i, ev) in vars.iter().enumerate() {
        let p = path.index(i);
        let name = str_at(ev, "/name");
        if name.is_empty() {
            errs.push(FieldError::required(p.child("name"), ""));
        } else {
            for m in env_name_errors(name) {
                errs.push(FieldError::invalid(p.child("name"), json!(name), m));
            }
        }
        let Some(from) = at(ev, "/valueFrom") else {
            continue;
        };
        let fp = p.child("valueFrom");
        let mut sources = 0;
        if let Some(f) = at(from, "/fieldRef") {
            sources += 1;
            field_ref(errs, f, &fp.child("fieldRef"));
        }
        if let Some(r) = at(from, "/resourceFieldRef") {
            sources += 1;
            if str_at(r, "/resource").is_empty() {
                errs.push(FieldError::required(
                    fp.child("resourceFieldRef").child("resource"),
                    "",
                ));
            }
        }
        for key in ["configMapKeyRef", "secretKeyRef"] {
            if let Some(r) = at(from, &format!("/{key}")) {
                sources += 1;
                let kp = fp.child(key);
                for m in apimachinery::validation::is_dns1123_subdomain(str_at(r, "/name")) {
                    errs.push(FieldError::invalid(
                        kp.child("name"),
                        json!(str_at(r, "/name")),
                        m,
                    ));
                }
                let k = str_at(r, "/key");
                if k.is_empty() {
                    errs.push(FieldError::required(kp.child("key"), ""));
                } else {
                    for m in config_map_key_errors(k) {
                        errs.push(FieldError::invalid(kp.child("key"), json!(k), m));
                    }
                }
            }
        }
        if sources == 0 {
            errs.push(FieldError::invalid(
                &fp,
                json!(""),
                "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`",
            ));
        } else if !str_at(ev, "/value").is_empty() {
            errs.push(FieldError::invalid(
                &fp,
                json!(""),
                "may not be specified when `value` is not empty",
            ));
        } else if sources > 1 {
            errs.push(FieldError::invalid(
                &fp,
                json!(""),
                "may not have more than one field specified at a time",
            ));
        }
    }
}

/// Upstream `validateObjectFieldSelector` for environment variables.
pub(crate) fn field_ref(errs: &mut ErrorList, f: &Value, p: &Path) {
    if str_at(f, "/apiVersion").is_empty() {
        errs.push(FieldError::required(p.child("apiVersion"), ""));
        return;
    }
    let fp = str_at(f, "/fieldPath");
    if fp.is_empty() {
        errs.push(FieldError::required(p.child("fieldPath"), ""));
        return;
    }
    if let Some((base, rest)) = fp.split_once('[') {
        let key = rest.trim_end_matches(']').trim_matches('\'');
        match base {
            "metadata.annotations" => qualified_name(errs, p, &key.to_lowercase()),
            "metadata.labels" => qualified_name(errs, p, key),
            other => errs.push(FieldError::invalid(
                p,
                json!(other),
                "does not support subscript",
            )),
        }
    } else if !ENV_FIELD_PATHS.contains(&fp) {
        errs.push(FieldError::not_supported(
            p.child("fieldPath"),
            json!(fp),
            &ENV_FIELD_PATHS,
        ));
    }
}

/// Upstream `ValidateEnvFrom`.
pub(crate) fn env_from(errs: &mut ErrorList, sources: &[Value], path: &Path) {
    for (i, s) in sources.iter().enumerate() {
        let p = path.index(i);
        let prefix = str_at(s, "/prefix");
        for m in env_name_errors(prefix) {
            errs.push(FieldError::invalid(p.child("prefix"), json!(prefix), m));
        }
        let mut n = 0;
        for key in ["configMapRef", "secretRef"] {
            if let Some(r) = at(s, &format!("/{key}")) {
                n += 1;
                let name = str_at(r, "/name");
                if name.is_empty() {
                    errs.push(FieldError::required(p.child(key).child("name"), ""));
                } else {
                    let masked = apimachinery::validation::mask_trailing_dash(name);
                    for m in apimachinery::validation::is_dns1123_subdomain(&masked) {
                        errs.push(FieldError::invalid(
                            p.child(key).child("name"),
                            json!(name),
                            m,
                        ));
                    }
                }
            }
        }
        if n == 0 {
            errs.push(FieldError::invalid(
                path,
                json!(""),
                "must specify one of: `configMapRef` or `secretRef`",
            ));
        } else if n > 1 {
            errs.push(FieldError::invalid(
                path,
                json!(""),
                "may not have more than one field specified at a time",
            ));
        }
    }
}
