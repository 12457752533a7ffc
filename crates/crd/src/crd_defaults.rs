//! Defaults of a CustomResourceDefinition (upstream `SetDefaults_CustomResourceDefinition`),
//! applied when a CRD is decoded, before validation.

use serde_json::{Value, json};

/// Fills upstream's defaults: `names.singular` (the lower-cased kind), `names.listKind`
/// (`<Kind>List`), `conversion.strategy: None`, a webhook service's port 443, and
/// `status.storedVersions` (the storage version) when empty.
pub fn default_crd(crd: &mut Value) {
    let Some(obj) = crd.as_object_mut() else {
        return;
    };
    let spec = obj.entry("spec").or_insert_with(|| json!({}));
    if let Some(spec) = spec.as_object_mut() {
        if let Some(names) = spec.get_mut("names").and_then(Value::as_object_mut) {
            let kind = names
                .get("kind")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            let empty = |v: Option<&Value>| v.and_then(Value::as_str).is_none_or(str::is_empty);
            if empty(names.get("singular")) {
                names.insert("singular".into(), json!(kind.to_lowercase()));
            }
            if empty(names.get("listKind")) && !kind.is_empty() {
                names.insert("listKind".into(), json!(format!("{kind}List")));
            }
        }
        match spec.get_mut("conversion") {
            None | Some(Value::Null) => {
                spec.insert("conversion".into(), json!({"strategy": "None"}));
            }
            Some(conv) => {
                if let Some(service) = conv
                    .pointer_mut("/webhook/clientConfig/service")
                    .and_then(Value::as_object_mut)
                    && !service.contains_key("port")
                {
                    service.insert("port".into(), json!(443));
                }
            }
        }
    }
    let storage = obj
        .get("spec")
        .and_then(|s| s.get("versions"))
        .and_then(Value::as_array)
        .and_then(|vs| vs.iter().find(|v| v.get("storage") == Some(&json!(true))))
        .and_then(|v| v.get("name"))
        .cloned();
    let status = obj.entry("status").or_insert_with(|| json!({}));
    if let (Some(status), Some(storage)) = (status.as_object_mut(), storage) {
        let empty = status
            .get("storedVersions")
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty);
        if empty {
            status.insert("storedVersions".into(), json!([storage]));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_defaults_are_filled() {
        let mut crd = json!({"spec": {"names": {"kind": "Widget", "plural": "widgets"},
            "versions": [{"name": "v1", "served": true, "storage": true}]}});
        default_crd(&mut crd);
        assert_eq!(crd["spec"]["names"]["singular"], "widget");
        assert_eq!(crd["spec"]["names"]["listKind"], "WidgetList");
        assert_eq!(crd["spec"]["conversion"], json!({"strategy": "None"}));
        assert_eq!(crd["status"]["storedVersions"], json!(["v1"]));
    }

    #[test]
    fn given_values_are_kept_and_a_webhook_port_is_defaulted() {
        let mut crd = json!({"spec": {"names": {"kind": "Widget", "singular": "w", "listKind": "Widgets"},
            "conversion": {"strategy": "Webhook", "webhook": {"clientConfig": {"service": {"name": "s", "namespace": "n"}}}},
            "versions": [{"name": "v1", "storage": true}]},
            "status": {"storedVersions": ["v0"]}});
        default_crd(&mut crd);
        assert_eq!(crd["spec"]["names"]["singular"], "w");
        assert_eq!(crd["spec"]["names"]["listKind"], "Widgets");
        assert_eq!(
            crd["spec"]["conversion"]["webhook"]["clientConfig"]["service"]["port"],
            443
        );
        assert_eq!(crd["status"]["storedVersions"], json!(["v0"]));
    }
}
