//! APIServices (apiregistration.k8s.io/v1), as kube-aggregator validates them: the name is
//! `<version>.<group>`, priorities in range, a local APIService (no `service`) has no CA
//! material, a remote one names a valid Service and port (443 by default).
//!
//! A local APIService is served by this server itself and so always available: its status is
//! filled in when it is read (upstream's availability controller writes the same condition,
//! `Available=True`, reason `Local`), which spares one write per group version of every
//! cluster. Remote APIServices get their status from the API server's availability loop.

use apimachinery::field::{ErrorList, FieldError, Path};
use apimachinery::meta;
use apimachinery::validation::{NameRule, is_dns1035_label, is_path_segment_name};
use serde_json::{Value, json};

use super::util::{at, dns_label, dns_subdomain, i64_at, port_num_errors, str_at};
use crate::strategy::Strategy;

/// The reason and message of a local APIService's `Available` condition.
pub const LOCAL_REASON: &str = "Local";
pub const LOCAL_MESSAGE: &str = "Local APIServices are always available";

/// APIServices.
pub struct ApiServiceStrategy;

/// Whether an APIService is served locally (it names no Service).
pub fn is_local(obj: &Value) -> bool {
    at(obj, "/spec/service").is_none_or(Value::is_null)
}

impl Strategy for ApiServiceStrategy {
    fn default(&self, obj: &mut Value) {
        if let Some(svc) = obj.pointer_mut("/spec/service").filter(|s| s.is_object())
            && svc.get("port").is_none_or(Value::is_null)
        {
            svc["port"] = json!(443);
        }
    }

    fn name_rule(&self) -> NameRule {
        NameRule::Custom(|name, _| is_path_segment_name(name))
    }

    fn validate(&self, obj: &Value) -> ErrorList {
        let mut errs = ErrorList::new();
        let spec = Path::new("spec");
        let (group, version) = (str_at(obj, "/spec/group"), str_at(obj, "/spec/version"));
        let required = format!("{version}.{group}");
        let name = meta::name(obj);
        if !name.is_empty() && is_path_segment_name(name).is_empty() && name != required {
            errs.push(FieldError::invalid(
                "metadata.name",
                json!(name),
                format!("must be `spec.version+\".\"+spec.group`: {required:?}"),
            ));
        }
        if group.is_empty() && version != "v1" {
            errs.push(FieldError::required(
                spec.child("group"),
                "only v1 may have an empty group and it better be legacy kube",
            ));
        }
        if !group.is_empty() {
            dns_subdomain(&mut errs, &spec.child("group"), group);
        }
        for msg in is_dns1035_label(version) {
            errs.push(FieldError::invalid(
                spec.child("version"),
                json!(version),
                msg,
            ));
        }
        let gpm = i64_at(obj, "/spec/groupPriorityMinimum").unwrap_or(0);
        if gpm <= 0 || gpm > 20000 {
            errs.push(FieldError::invalid(
                spec.child("groupPriorityMinimum"),
                json!(gpm),
                "must be positive and less than 20000",
            ));
        }
        let vp = i64_at(obj, "/spec/versionPriority").unwrap_or(0);
        if vp <= 0 || vp > 1000 {
            errs.push(FieldError::invalid(
                spec.child("versionPriority"),
                json!(vp),
                "must be positive and less than 1000",
            ));
        }
        let ca = str_at(obj, "/spec/caBundle");
        let insecure =
            at(obj, "/spec/insecureSkipTLSVerify").and_then(Value::as_bool) == Some(true);
        if is_local(obj) {
            if !ca.is_empty() {
                errs.push(FieldError::invalid(
                    spec.child("caBundle"),
                    json!(format!("{} bytes", decoded_len(ca))),
                    "local APIServices may not have a caBundle",
                ));
            }
            if insecure {
                errs.push(FieldError::invalid(
                    spec.child("insecureSkipTLSVerify"),
                    json!(true),
                    "local APIServices may not have insecureSkipTLSVerify",
                ));
            }
            return errs;
        }
        let svc = spec.child("service");
        // Service names are DNS-1035 labels; namespaces DNS-1123 labels.
        let svc_name = str_at(obj, "/spec/service/name");
        for msg in is_dns1035_label(svc_name) {
            errs.push(FieldError::invalid(svc.child("name"), json!(svc_name), msg));
        }
        dns_label(
            &mut errs,
            &svc.child("namespace"),
            str_at(obj, "/spec/service/namespace"),
        );
        let port = i64_at(obj, "/spec/service/port").unwrap_or(443);
        for msg in port_num_errors(port) {
            errs.push(FieldError::invalid(svc.child("port"), json!(port), msg));
        }
        if insecure && !ca.is_empty() {
            errs.push(FieldError::invalid(
                spec.child("insecureSkipTLSVerify"),
                json!(true),
                "may not be true if caBundle is present",
            ));
        }
        errs
    }

    fn read(&self, obj: &mut Value) {
        if !is_local(obj) {
            return;
        }
        let since = obj
            .pointer("/metadata/creationTimestamp")
            .cloned()
            .unwrap_or(Value::Null);
        obj["status"] = json!({"conditions": [{
            "type": "Available",
            "status": "True",
            "lastTransitionTime": since,
            "reason": LOCAL_REASON,
            "message": LOCAL_MESSAGE,
        }]});
    }

    fn has_read(&self) -> bool {
        true
    }
}

/// The length of a base64 `caBundle` once decoded (upstream reports bytes).
fn decoded_len(b64: &str) -> usize {
    let pad = b64.bytes().rev().take_while(|b| *b == b'=').count();
    (b64.len() / 4 * 3).saturating_sub(pad)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn svc(name: &str, spec: Value) -> Value {
        json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": {"name": name}, "spec": spec})
    }

    fn fields(errs: &ErrorList) -> Vec<String> {
        errs.iter().map(|e| e.field.clone()).collect()
    }

    #[test]
    fn a_local_api_service_named_after_its_group_version_is_valid() {
        let s = ApiServiceStrategy;
        let ok = svc(
            "v1.apps",
            json!({"group": "apps", "version": "v1", "groupPriorityMinimum": 17800, "versionPriority": 15}),
        );
        assert!(s.validate(&ok).is_empty(), "{:?}", s.validate(&ok));
        let core = svc(
            "v1.",
            json!({"version": "v1", "groupPriorityMinimum": 18000, "versionPriority": 1}),
        );
        assert!(s.validate(&core).is_empty(), "{:?}", s.validate(&core));
    }

    #[test]
    fn every_rule_reports_its_field() {
        let s = ApiServiceStrategy;
        let bad = svc(
            "v1.wrong",
            json!({"group": "", "version": "v2", "groupPriorityMinimum": 0, "versionPriority": 1001, "caBundle": "AAAA"}),
        );
        let errs = s.validate(&bad);
        assert_eq!(
            fields(&errs),
            [
                "metadata.name",
                "spec.group",
                "spec.groupPriorityMinimum",
                "spec.versionPriority",
                "spec.caBundle"
            ]
        );
        assert!(
            errs.iter()
                .next()
                .unwrap()
                .detail
                .contains("must be `spec.version+\".\"+spec.group`: \"v2.\"")
        );
        let remote = svc(
            "v1beta1.metrics.k8s.io",
            json!({"group": "metrics.k8s.io", "version": "v1beta1", "groupPriorityMinimum": 100, "versionPriority": 100,
                   "insecureSkipTLSVerify": true, "caBundle": "AAAA",
                   "service": {"name": "Metrics", "namespace": "kube_system", "port": 70000}}),
        );
        assert_eq!(
            fields(&s.validate(&remote)),
            [
                "spec.service.name",
                "spec.service.namespace",
                "spec.service.port",
                "spec.insecureSkipTLSVerify"
            ]
        );
    }

    #[test]
    fn a_service_port_defaults_to_443() {
        let mut obj = svc(
            "v1.x.io",
            json!({"group": "x.io", "version": "v1", "service": {"name": "s", "namespace": "n"}}),
        );
        ApiServiceStrategy.default(&mut obj);
        assert_eq!(obj["spec"]["service"]["port"], 443);
    }

    #[test]
    fn a_local_api_service_reads_as_available() {
        let mut obj = svc("v1.apps", json!({"group": "apps", "version": "v1"}));
        obj["metadata"]["creationTimestamp"] = json!("2026-12-04T00:00:00Z");
        ApiServiceStrategy.read(&mut obj);
        let c = &obj["status"]["conditions"][0];
        assert_eq!(
            (c["type"].as_str(), c["status"].as_str()),
            (Some("Available"), Some("True"))
        );
        assert_eq!(c["reason"], "Local");
        let mut remote = svc(
            "v1.x.io",
            json!({"group": "x.io", "version": "v1", "service": {"name": "s", "namespace": "n"}}),
        );
        ApiServiceStrategy.read(&mut remote);
        assert!(remote.get("status").is_none());
    }
}
