//! Status conditions: set one, keeping its `lastTransitionTime` while its status holds.

use serde_json::{Value, json};

/// A condition to set.
pub struct Cond<'a> {
    pub type_: &'a str,
    pub ok: bool,
    pub reason: &'a str,
    pub message: &'a str,
}

/// The conditions `conds` on top of `old` (an object's current `status.conditions`).
pub fn merge(old: Option<&Value>, conds: &[Cond<'_>], now: &str) -> Value {
    let old: &[Value] = old
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let out: Vec<Value> = conds
        .iter()
        .map(|c| {
            let status = if c.ok { "True" } else { "False" };
            let prev = old.iter().find(|o| o["type"] == c.type_);
            let since = prev
                .filter(|p| p["status"] == status)
                .and_then(|p| p["lastTransitionTime"].as_str())
                .unwrap_or(now);
            json!({"type": c.type_, "status": status, "reason": c.reason, "message": c.message, "lastTransitionTime": since})
        })
        .collect();
    Value::Array(out)
}

/// Now, as an RFC 3339 timestamp with second precision.
pub fn now() -> String {
    apimachinery::time::format_time(k8s_openapi::jiff::Timestamp::now())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unchanged_status_keeps_its_transition_time() {
        let old = json!([{"type": "Ready", "status": "True", "lastTransitionTime": "2020-01-01T00:00:00Z"}]);
        let c = [Cond {
            type_: "Ready",
            ok: true,
            reason: "R",
            message: "m",
        }];
        let v = merge(Some(&old), &c, "2030-01-01T00:00:00Z");
        assert_eq!(v[0]["lastTransitionTime"], "2020-01-01T00:00:00Z");
        let c = [Cond {
            type_: "Ready",
            ok: false,
            reason: "R",
            message: "m",
        }];
        let v = merge(Some(&old), &c, "2030-01-01T00:00:00Z");
        assert_eq!(v[0]["lastTransitionTime"], "2030-01-01T00:00:00Z");
    }
}
