//! `metav1.Condition` lists as Cluster API v1beta2 objects carry them: set a condition keeping
//! its `lastTransitionTime` while its status stays, read one back.

use serde_json::{Value, json};

/// The current time as Kubernetes writes it (RFC 3339, seconds).
pub fn now() -> String {
    apimachinery::time::format_time(jiff::Timestamp::now())
}

/// Seconds since an RFC 3339 time (0 when unreadable or in the future).
pub fn age_seconds(time: Option<&str>) -> f64 {
    let Some(t) = time.and_then(apimachinery::time::parse_rfc3339) else {
        return 0.0;
    };
    let d = jiff::Timestamp::now().duration_since(t);
    d.as_secs_f64().max(0.0)
}

/// A condition to set.
#[derive(Debug, Clone)]
pub struct Cond {
    pub type_: &'static str,
    pub status: &'static str,
    pub reason: &'static str,
    pub message: String,
}

impl Cond {
    pub fn yes(type_: &'static str, reason: &'static str) -> Self {
        Cond {
            type_,
            status: "True",
            reason,
            message: String::new(),
        }
    }

    pub fn no(type_: &'static str, reason: &'static str, message: impl Into<String>) -> Self {
        Cond {
            type_,
            status: "False",
            reason,
            message: message.into(),
        }
    }

    pub fn unknown(type_: &'static str, reason: &'static str, message: impl Into<String>) -> Self {
        Cond {
            type_,
            status: "Unknown",
            reason,
            message: message.into(),
        }
    }

    pub fn of(
        type_: &'static str,
        ok: bool,
        reason: &'static str,
        message: impl Into<String>,
    ) -> Self {
        Cond {
            type_,
            status: if ok { "True" } else { "False" },
            reason,
            message: message.into(),
        }
    }

    /// A condition whose status is read from elsewhere (anything but True/False is Unknown).
    pub fn with_status(
        type_: &'static str,
        status: &str,
        reason: &'static str,
        message: impl Into<String>,
    ) -> Self {
        Cond {
            type_,
            status: match status {
                "True" => "True",
                "False" => "False",
                _ => "Unknown",
            },
            reason,
            message: message.into(),
        }
    }
}

/// `old` (a condition list or nothing) with `conds` set; other conditions are kept. The
/// list is sorted by type, so an unchanged set compares equal.
pub fn merge(old: Option<&Value>, conds: &[Cond], generation: Option<i64>) -> Value {
    let mut list: Vec<Value> = old.and_then(Value::as_array).cloned().unwrap_or_default();
    let now = now();
    for c in conds {
        let existing = list
            .iter_mut()
            .find(|v| v.get("type").and_then(Value::as_str) == Some(c.type_));
        let transition = existing
            .as_ref()
            .filter(|v| v.get("status").and_then(Value::as_str) == Some(c.status))
            .and_then(|v| v.get("lastTransitionTime").cloned())
            .unwrap_or_else(|| json!(now));
        let mut fresh = json!({
            "type": c.type_,
            "status": c.status,
            "reason": c.reason,
            "message": c.message,
            "lastTransitionTime": transition,
        });
        if let Some(g) = generation {
            fresh["observedGeneration"] = json!(g);
        }
        match existing {
            Some(e) => *e = fresh,
            None => list.push(fresh),
        }
    }
    list.sort_by(|a, b| {
        let t = |v: &Value| {
            v.get("type")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        t(a).cmp(&t(b))
    });
    Value::Array(list)
}

/// A condition of a status (or of any object with `conditions`), by type.
pub fn get<'a>(status: Option<&'a Value>, type_: &str) -> Option<&'a Value> {
    status?
        .get("conditions")?
        .as_array()?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(type_))
}

/// A condition's status (`True`, `False`, `Unknown`), by type.
pub fn status_of<'a>(status: Option<&'a Value>, type_: &str) -> Option<&'a str> {
    get(status, type_)?.get("status")?.as_str()
}

/// Whether a condition is `True`.
pub fn is_true(status: Option<&Value>, type_: &str) -> bool {
    status_of(status, type_) == Some("True")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_condition_keeps_its_transition_time_while_its_status_stays() {
        let old = json!([{"type": "Ready", "status": "False", "reason": "A", "message": "",
            "lastTransitionTime": "2020-01-01T00:00:00Z"}]);
        let same = merge(Some(&old), &[Cond::no("Ready", "B", "m")], None);
        assert_eq!(same[0]["lastTransitionTime"], "2020-01-01T00:00:00Z");
        assert_eq!(same[0]["reason"], "B");
        let flipped = merge(Some(&old), &[Cond::yes("Ready", "Ok")], Some(3));
        assert_ne!(flipped[0]["lastTransitionTime"], "2020-01-01T00:00:00Z");
        assert_eq!(flipped[0]["observedGeneration"], 3);
    }
}
