//! Strategies of core/v1 resources with special rules (selectable fields, name rules,
//! server-owned fields).

use serde_json::{Value, json};

use crate::strategy::{NameRule, Strategy};

fn str_at(obj: &Value, ptr: &str) -> Option<String> {
    match obj.pointer(ptr)? {
        Value::String(s) => Some(s.clone()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// Namespaces: DNS-label names, `status.phase` Active, the `kubernetes` finalizer.
pub struct NamespaceStrategy;

impl Strategy for NamespaceStrategy {
    fn name_rule(&self) -> NameRule {
        NameRule::DnsLabel
    }
    fn prepare_for_create(&self, obj: &mut Value) {
        obj["status"] = json!({"phase": "Active"});
        obj["spec"] = json!({"finalizers": ["kubernetes"]});
    }
    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        // spec.finalizers only change through the finalize subresource.
        new["spec"] = old.get("spec").cloned().unwrap_or_else(|| json!({}));
    }
    fn default(&self, obj: &mut Value) {
        let name = apimachinery::meta::name(obj).to_string();
        if !name.is_empty() {
            let labels = apimachinery::meta::metadata_mut(obj)
                .entry("labels")
                .or_insert_with(|| json!({}));
            if let Some(l) = labels.as_object_mut() {
                l.insert("kubernetes.io/metadata.name".into(), json!(name));
            }
        }
    }
    fn deletion_pending(&self, obj: &Value) -> bool {
        obj.pointer("/spec/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|f| !f.is_empty())
    }
    fn on_deletion(&self, obj: &mut Value) {
        obj["status"]["phase"] = json!("Terminating");
    }
    fn field_names(&self) -> &[&'static str] {
        &["status.phase"]
    }
    fn field(&self, obj: &Value, name: &str) -> Option<String> {
        match name {
            "status.phase" => str_at(obj, "/status/phase"),
            _ => None,
        }
    }
}

/// Services: DNS-label names.
pub struct ServiceStrategy;

impl Strategy for ServiceStrategy {
    fn name_rule(&self) -> NameRule {
        NameRule::Dns1035Label
    }
}

/// Pods: their selectable fields.
pub struct PodStrategy;

impl Strategy for PodStrategy {
    fn graceful_delete(&self, obj: &Value, requested: Option<i64>) -> Option<i64> {
        let bound = obj
            .pointer("/spec/nodeName")
            .and_then(Value::as_str)
            .is_some_and(|n| !n.is_empty());
        let finished = matches!(
            obj.pointer("/status/phase").and_then(Value::as_str),
            Some("Succeeded" | "Failed")
        );
        if !bound || finished {
            return None;
        }
        Some(requested.unwrap_or_else(|| {
            obj.pointer("/spec/terminationGracePeriodSeconds")
                .and_then(Value::as_i64)
                .unwrap_or(30)
        }))
    }
    fn prepare_for_create(&self, obj: &mut Value) {
        obj["status"] = json!({"phase": "Pending", "qosClass": "BestEffort"});
    }
    fn field_names(&self) -> &[&'static str] {
        &[
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.podIPs",
            "status.nominatedNodeName",
        ]
    }
    fn field(&self, obj: &Value, name: &str) -> Option<String> {
        match name {
            "spec.hostNetwork" => {
                Some(str_at(obj, "/spec/hostNetwork").unwrap_or_else(|| "false".into()))
            }
            "status.podIPs" => str_at(obj, "/status/podIPs/0/ip"),
            _ => {
                let ptr = format!("/{}", name.replace('.', "/"));
                Some(str_at(obj, &ptr).unwrap_or_default())
            }
        }
    }
}

/// Events: the involved object and reason fields.
pub struct EventStrategy;

impl Strategy for EventStrategy {
    fn field_names(&self) -> &[&'static str] {
        &[
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        ]
    }
    fn field(&self, obj: &Value, name: &str) -> Option<String> {
        match name {
            "source" => Some(
                str_at(obj, "/source/component")
                    .or_else(|| str_at(obj, "/reportingComponent"))
                    .unwrap_or_default(),
            ),
            _ => Some(str_at(obj, &format!("/{}", name.replace('.', "/"))).unwrap_or_default()),
        }
    }
}

/// Secrets: the `type` field and its default.
pub struct SecretStrategy;

impl Strategy for SecretStrategy {
    fn default(&self, obj: &mut Value) {
        if obj
            .get("type")
            .is_none_or(|t| t.as_str().is_none_or(str::is_empty))
        {
            obj["type"] = json!("Opaque");
        }
        // stringData is a write-only convenience: merged into data, base64 encoded.
        if let Some(Value::Object(sd)) = obj.as_object_mut().and_then(|m| m.remove("stringData")) {
            use base64::Engine;
            let data = obj
                .as_object_mut()
                .expect("an object")
                .entry("data")
                .or_insert_with(|| json!({}));
            if let Some(d) = data.as_object_mut() {
                for (k, v) in sd {
                    if let Some(s) = v.as_str() {
                        d.insert(
                            k,
                            json!(base64::engine::general_purpose::STANDARD.encode(s)),
                        );
                    }
                }
            }
        }
    }
    fn field_names(&self) -> &[&'static str] {
        &["type"]
    }
    fn field(&self, obj: &Value, name: &str) -> Option<String> {
        (name == "type").then(|| str_at(obj, "/type").unwrap_or_default())
    }
}

/// Nodes: `spec.unschedulable`.
pub struct NodeStrategy;

impl Strategy for NodeStrategy {
    fn field_names(&self) -> &[&'static str] {
        &["spec.unschedulable"]
    }
    fn field(&self, obj: &Value, name: &str) -> Option<String> {
        (name == "spec.unschedulable")
            .then(|| str_at(obj, "/spec/unschedulable").unwrap_or_else(|| "false".into()))
    }
}

/// RBAC objects: names are path segments (`system:basic-user`).
pub struct RbacStrategy;

impl Strategy for RbacStrategy {
    fn name_rule(&self) -> NameRule {
        NameRule::PathSegment
    }
}
