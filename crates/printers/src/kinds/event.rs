//! The Event printer, for both `v1` Events and `events.k8s.io/v1` Events.
//!
//! Upstream stores both as one internal type and prints them alike; the two JSON shapes only
//! name fields differently (`involvedObject` vs `regarding`, `message` vs `note`,
//! `firstTimestamp` vs `deprecatedFirstTimestamp`...). LAST SEEN prefers the series' last
//! observation, then `lastTimestamp`, then the first sighting (`firstTimestamp` or
//! `eventTime`); COUNT is the series count, the legacy count, or 1.

use serde_json::Value;

use super::Printer;
use crate::column::{Def, NAME_DESC, Row, cells, s, wide};
use crate::meta::{self, since};
use crate::time::Instant;
use crate::value::{at, int_or_zero, str_or_empty};

const COLUMNS: &[Def] = &[
    s("Last Seen", "Time since the event was last observed."),
    s("Type", "Normal or Warning."),
    s("Reason", "Short machine-readable reason for the event."),
    s("Object", "The object the event is about, as kind/name."),
    wide(
        "Subobject",
        "The part of the object the event is about (fieldPath).",
    ),
    wide(
        "Source",
        "The component (and host) that reported the event.",
    ),
    s("Message", "Human-readable description of the event."),
    wide("First Seen", "Time since the event was first observed."),
    wide("Count", "How many times the event has occurred."),
    Def {
        name: "Name",
        type_: "string",
        format: "name",
        priority: 1,
        description: NAME_DESC,
    },
];

pub(crate) const CORE_EVENT: Printer = Printer {
    columns: COLUMNS,
    row: core_event,
};
pub(crate) const EVENTS_EVENT: Printer = Printer {
    columns: COLUMNS,
    row: events_event,
};

/// Where each printed field lives in one of the two JSON shapes.
struct Fields {
    first_timestamp: &'static str,
    last_timestamp: &'static str,
    count: &'static str,
    regarding: &'static str,
    source: &'static str,
    reporting_controller: &'static str,
    message: &'static str,
}

const CORE: Fields = Fields {
    first_timestamp: "firstTimestamp",
    last_timestamp: "lastTimestamp",
    count: "count",
    regarding: "involvedObject",
    source: "source",
    reporting_controller: "reportingComponent",
    message: "message",
};

const EVENTS: Fields = Fields {
    first_timestamp: "deprecatedFirstTimestamp",
    last_timestamp: "deprecatedLastTimestamp",
    count: "deprecatedCount",
    regarding: "regarding",
    source: "deprecatedSource",
    reporting_controller: "reportingController",
    message: "note",
};

fn core_event(obj: &Value, now: Instant) -> Row {
    event(obj, now, &CORE)
}

fn events_event(obj: &Value, now: Instant) -> Row {
    event(obj, now, &EVENTS)
}

fn non_empty<'a>(a: &'a str, b: &'a str) -> &'a str {
    if a.is_empty() { b } else { a }
}

fn event(obj: &Value, now: Instant, f: &Fields) -> Row {
    let first = match meta::timestamp(obj, &[f.first_timestamp]) {
        Some(t) => since(Some(t), now),
        None => since(meta::timestamp(obj, &["eventTime"]), now),
    };
    let mut last = match meta::timestamp(obj, &[f.last_timestamp]) {
        Some(t) => since(Some(t), now),
        None => first.clone(),
    };
    let mut count = int_or_zero(obj, &[f.count]);
    if let Some(series) = at(obj, &["series"]).filter(|s| s.is_object()) {
        last = since(meta::timestamp(series, &["lastObservedTime"]), now);
        count = int_or_zero(series, &["count"]);
    } else if count == 0 {
        // Singleton events of the new API carry no count.
        count = 1;
    }

    let kind = str_or_empty(obj, &[f.regarding, "kind"]).to_lowercase();
    let name = str_or_empty(obj, &[f.regarding, "name"]);
    let target = if name.is_empty() {
        kind
    } else {
        format!("{kind}/{name}")
    };

    let component = non_empty(
        str_or_empty(obj, &[f.source, "component"]),
        str_or_empty(obj, &[f.reporting_controller]),
    );
    let instance = non_empty(
        str_or_empty(obj, &[f.source, "host"]),
        str_or_empty(obj, &["reportingInstance"]),
    );
    let source = if instance.is_empty() {
        component.to_string()
    } else {
        format!("{component}, {instance}")
    };

    Row::new(cells![
        last,
        str_or_empty(obj, &["type"]),
        str_or_empty(obj, &["reason"]),
        target,
        str_or_empty(obj, &[f.regarding, "fieldPath"]),
        source,
        str_or_empty(obj, &[f.message]).trim(),
        first,
        count,
        meta::name(obj),
    ])
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::kinds::testutil::{ago, cells, default_names};

    #[test]
    fn core_event_prints_last_seen_type_reason_object_message() {
        let e = json!({
            "metadata": {"name": "web-1.17a", "namespace": "default"},
            "involvedObject": {"kind": "Pod", "name": "web-1", "fieldPath": "spec.containers{app}"},
            "reason": "BackOff", "type": "Warning",
            "message": "Back-off restarting failed container app\n",
            "source": {"component": "kubelet", "host": "kind-worker"},
            "firstTimestamp": ago(600), "lastTimestamp": ago(30), "count": 12
        });
        assert_eq!(
            default_names(&CORE_EVENT),
            ["Last Seen", "Type", "Reason", "Object", "Message"]
        );
        assert_eq!(
            cells(&CORE_EVENT, &e),
            vec![
                json!("30s"),
                json!("Warning"),
                json!("BackOff"),
                json!("pod/web-1"),
                json!("spec.containers{app}"),
                json!("kubelet, kind-worker"),
                json!("Back-off restarting failed container app"),
                json!("10m"),
                json!(12),
                json!("web-1.17a")
            ]
        );
    }

    #[test]
    fn new_style_event_uses_event_time_series_and_reporting_controller() {
        let e = json!({
            "metadata": {"name": "lease.1"},
            "regarding": {"kind": "Node", "name": "n1"},
            "reason": "RegisteredNode", "type": "Normal", "note": "Node n1 event",
            "eventTime": "2024-05-01T11:58:00.123456Z",
            "reportingController": "node-controller", "reportingInstance": "",
            "series": {"count": 4, "lastObservedTime": "2024-05-01T11:59:50.000000Z"}
        });
        let c = cells(&EVENTS_EVENT, &e);
        assert_eq!(c[0], json!("10s"));
        assert_eq!(c[3], json!("node/n1"));
        assert_eq!(
            c[5..],
            [
                json!("node-controller"),
                json!("Node n1 event"),
                json!("119s"),
                json!(4),
                json!("lease.1")
            ]
        );
    }

    #[test]
    fn singleton_event_without_timestamps_counts_one() {
        let e = json!({"metadata": {"name": "x"}, "involvedObject": {"kind": "Namespace"}});
        let c = cells(&CORE_EVENT, &e);
        assert_eq!(c[0], json!("<unknown>"));
        assert_eq!(c[3], json!("namespace"));
        assert_eq!(c[7..9], [json!("<unknown>"), json!(1)]);
    }
}
