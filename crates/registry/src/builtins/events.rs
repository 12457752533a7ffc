//! Events, in both APIs: core/v1 (`involvedObject`, lenient legacy validation) and
//! events.k8s.io/v1 (`regarding`, `note`, strict validation of new-style events), with
//! upstream's selectable fields (`involvedObject.*` or `regarding.*`, `reason`,
//! `reportingComponent`, `source`, `type`).
//!
//! Upstream serves both APIs from one storage of internal events; here each API has its own
//! objects, so each strategy reads its own field names.

use apimachinery::field::{ErrorList, FieldError, Path};
use apimachinery::meta;
use apimachinery::validation::is_dns1123_subdomain;
use serde_json::{Value, json};

use super::gofmt;
use super::util::{at, field_string, i64_at, qualified_name, str_at};
use crate::strategy::Strategy;

const REPORTING_INSTANCE_LIMIT: usize = 128;
const ACTION_LIMIT: usize = 128;
const REASON_LIMIT: usize = 128;
const NOTE_LIMIT: usize = 1024;

/// Field names of one events API.
struct Names {
    regarding: &'static str,
    reporting_controller: &'static str,
    message: &'static str,
    source: &'static str,
}

const CORE: Names = Names {
    regarding: "involvedObject",
    reporting_controller: "reportingComponent",
    message: "message",
    source: "source",
};

const EVENTS: Names = Names {
    regarding: "regarding",
    reporting_controller: "reportingController",
    message: "note",
    source: "deprecatedSource",
};

/// Upstream `legacyValidateEvent`: the checks every event passes.
fn legacy(errs: &mut ErrorList, ev: &Value, n: &Names) {
    let ns = meta::namespace(ev);
    let involved_ns = str_at(ev, &format!("/{}/namespace", n.regarding));
    let ns_path = Path::new(n.regarding).child("namespace");
    let mismatch = || {
        FieldError::invalid(
            &ns_path,
            json!(involved_ns),
            "does not match event.namespace",
        )
    };
    let event_time = str_at(ev, "/eventTime");
    if event_time.is_empty() {
        if involved_ns.is_empty() {
            if !ns.is_empty() && ns != "default" {
                errs.push(mismatch());
            }
        } else if ns != involved_ns {
            errs.push(mismatch());
        }
    } else {
        if involved_ns.is_empty() && ns != "default" && ns != "kube-system" {
            errs.push(mismatch());
        }
        let rc = str_at(ev, &format!("/{}", n.reporting_controller));
        if rc.is_empty() {
            errs.push(FieldError::required(n.reporting_controller, ""));
        }
        qualified_name(errs, &Path::new(n.reporting_controller), rc);
        let ri = str_at(ev, "/reportingInstance");
        if ri.is_empty() {
            errs.push(FieldError::required("reportingInstance", ""));
        }
        if ri.len() > REPORTING_INSTANCE_LIMIT {
            errs.push(FieldError::invalid(
                "reportingInstance",
                json!(""),
                format!("can have at most {REPORTING_INSTANCE_LIMIT} characters"),
            ));
        }
        let action = str_at(ev, "/action");
        if action.is_empty() {
            errs.push(FieldError::required("action", ""));
        }
        if action.len() > ACTION_LIMIT {
            errs.push(FieldError::invalid(
                "action",
                json!(""),
                format!("can have at most {ACTION_LIMIT} characters"),
            ));
        }
        let reason = str_at(ev, "/reason");
        if reason.is_empty() {
            errs.push(FieldError::required("reason", ""));
        }
        if reason.len() > REASON_LIMIT {
            errs.push(FieldError::invalid(
                "reason",
                json!(""),
                format!("can have at most {REASON_LIMIT} characters"),
            ));
        }
        if str_at(ev, &format!("/{}", n.message)).len() > NOTE_LIMIT {
            errs.push(FieldError::invalid(
                n.message,
                json!(""),
                format!("can have at most {NOTE_LIMIT} characters"),
            ));
        }
    }
    for m in is_dns1123_subdomain(ns) {
        errs.push(FieldError::invalid("namespace", json!(ns), m));
    }
}

/// Core events.
pub struct EventStrategy;

impl Strategy for EventStrategy {
    fn validate(&self, obj: &Value) -> ErrorList {
        let mut errs = ErrorList::new();
        legacy(&mut errs, obj, &CORE);
        errs
    }

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
        selectable(obj, name, &CORE)
    }
}

/// The selectable fields of either API, by their core names or by `regarding.*`.
fn selectable(obj: &Value, name: &str, n: &Names) -> Option<String> {
    let (head, rest) = name.split_once('.').unwrap_or((name, ""));
    Some(match (head, rest) {
        ("involvedObject" | "regarding", f) if !f.is_empty() => {
            field_string(obj, &format!("/{}/{f}", n.regarding))
        }
        ("reason" | "type", "") => field_string(obj, &format!("/{head}")),
        ("reportingComponent" | "reportingController", "") => {
            field_string(obj, &format!("/{}", n.reporting_controller))
        }
        ("source", "") => {
            let s = field_string(obj, &format!("/{}/component", n.source));
            if s.is_empty() {
                field_string(obj, &format!("/{}", n.reporting_controller))
            } else {
                s
            }
        }
        _ => return None,
    })
}

/// events.k8s.io/v1 events.
pub struct EventsV1Strategy;

impl Strategy for EventsV1Strategy {
    fn validate(&self, obj: &Value) -> ErrorList {
        let mut errs = ErrorList::new();
        legacy(&mut errs, obj, &EVENTS);
        if let Some(series) = at(obj, "/series") {
            let count = i64_at(series, "/count").unwrap_or(0);
            if count < 2 {
                errs.push(FieldError::invalid(
                    "series.count",
                    json!(""),
                    "should be at least 2",
                ));
            }
            if str_at(series, "/lastObservedTime").is_empty() {
                errs.push(FieldError::required("series.lastObservedTime", ""));
            }
        }
        if str_at(obj, "/eventTime").is_empty() {
            errs.push(FieldError::required("eventTime", ""));
        }
        let ty = str_at(obj, "/type");
        if ty != "Normal" && ty != "Warning" {
            errs.push(FieldError::invalid(
                "type",
                json!(""),
                format!("has invalid value: {ty}"),
            ));
        }
        for f in ["deprecatedFirstTimestamp", "deprecatedLastTimestamp"] {
            if at(obj, &format!("/{f}")).is_some() {
                errs.push(FieldError::invalid(f, json!(""), "needs to be unset"));
            }
        }
        if i64_at(obj, "/deprecatedCount").unwrap_or(0) != 0 {
            errs.push(FieldError::invalid(
                "deprecatedCount",
                json!(""),
                "needs to be unset",
            ));
        }
        if !str_at(obj, "/deprecatedSource/component").is_empty()
            || !str_at(obj, "/deprecatedSource/host").is_empty()
        {
            errs.push(FieldError::invalid(
                "deprecatedSource",
                json!(""),
                "needs to be unset",
            ));
        }
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> ErrorList {
        let mut errs = ErrorList::new();
        legacy(&mut errs, new, &EVENTS);
        // Upstream reports these under the internal (core) field names.
        for (v1, internal) in [
            ("regarding", "involvedObject"),
            ("reason", "reason"),
            ("note", "message"),
            ("deprecatedSource", "source"),
            ("deprecatedFirstTimestamp", "firstTimestamp"),
            ("deprecatedLastTimestamp", "lastTimestamp"),
            ("deprecatedCount", "count"),
            ("type", "type"),
            ("eventTime", "eventTime"),
            ("action", "action"),
            ("related", "related"),
            ("reportingController", "reportingController"),
            ("reportingInstance", "reportingInstance"),
        ] {
            let (n, o) = (at(new, &format!("/{v1}")), at(old, &format!("/{v1}")));
            super::util::immutable(&mut errs, &Path::new(internal), n, o, gofmt::json);
        }
        errs
    }

    fn field_names(&self) -> &[&'static str] {
        &[
            "regarding.kind",
            "regarding.namespace",
            "regarding.name",
            "regarding.uid",
            "regarding.apiVersion",
            "regarding.resourceVersion",
            "regarding.fieldPath",
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingController",
            "reportingComponent",
            "source",
            "type",
        ]
    }

    fn field(&self, obj: &Value, name: &str) -> Option<String> {
        selectable(obj, name, &EVENTS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages(errs: &ErrorList) -> Vec<String> {
        errs.iter().map(FieldError::message).collect()
    }

    #[test]
    fn legacy_events_must_match_their_object_namespace() {
        let ev = json!({"metadata": {"name": "e", "namespace": "a"}, "involvedObject": {"kind": "Pod", "namespace": "b"}});
        assert_eq!(
            messages(&EventStrategy.validate(&ev)),
            vec!["involvedObject.namespace: Invalid value: \"b\": does not match event.namespace"]
        );
        let ev = json!({"metadata": {"name": "e", "namespace": "a"}, "involvedObject": {"kind": "Pod", "namespace": "a"}});
        assert!(EventStrategy.validate(&ev).is_empty());
    }

    #[test]
    fn new_style_events_need_their_reporting_fields() {
        let ev = json!({"metadata": {"name": "e", "namespace": "a"}, "eventTime": "2025-01-01T00:00:00.000000Z",
            "regarding": {"namespace": "a"}, "type": "Odd"});
        assert_eq!(
            messages(&EventsV1Strategy.validate(&ev)),
            vec![
                "reportingController: Required value",
                "reportingController: Invalid value: \"\": name part must be non-empty",
                "reportingController: Invalid value: \"\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
                "reportingInstance: Required value",
                "action: Required value",
                "reason: Required value",
                "type: Invalid value: \"\": has invalid value: Odd",
            ]
        );
    }

    #[test]
    fn event_fields_are_selectable_in_both_apis() {
        let core = json!({"involvedObject": {"name": "p"}, "source": {"component": "kubelet"}, "type": "Normal"});
        assert_eq!(
            EventStrategy.field(&core, "involvedObject.name").as_deref(),
            Some("p")
        );
        assert_eq!(
            EventStrategy.field(&core, "source").as_deref(),
            Some("kubelet")
        );
        let v1 = json!({"regarding": {"name": "p"}, "reportingController": "ctl"});
        assert_eq!(
            EventsV1Strategy.field(&v1, "regarding.name").as_deref(),
            Some("p")
        );
        assert_eq!(
            EventsV1Strategy
                .field(&v1, "involvedObject.name")
                .as_deref(),
            Some("p")
        );
        assert_eq!(
            EventsV1Strategy.field(&v1, "source").as_deref(),
            Some("ctl")
        );
        assert_eq!(
            EventsV1Strategy.field(&v1, "reportingComponent").as_deref(),
            Some("ctl")
        );
    }
}
