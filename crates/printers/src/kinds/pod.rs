//! The Pod printer: READY `1/2`, STATUS (`Running`, `Completed`, `CrashLoopBackOff`,
//! `Init:0/1`, `Terminating`...), RESTARTS `3 (5m ago)`, and the wide IP/NODE columns.
//!
//! STATUS is the one cell with real logic. It starts from the phase (or `status.reason`),
//! is overridden by the first init container that has not finished (`Init:<reason>` or
//! `Init:<i>/<n>`), then, once initialized, by the first regular container that is waiting or
//! terminated; deletion turns it into `Terminating` (or `Unknown` for `NodeLost`). Sidecars
//! (init containers with `restartPolicy: Always`) count toward READY and RESTARTS.

use serde_json::{Value, json};

use super::Printer;
use crate::column::{AGE, NAME, Row, cells, s, wide};
use crate::meta::{self, since};
use crate::time::Instant;
use crate::value::{int_or_zero, list, opt_bool, opt_str, str_or_empty};

pub(crate) const POD: Printer = Printer {
    columns: &[
        NAME,
        s(
            "Ready",
            "Ready containers out of all containers (sidecars included).",
        ),
        s(
            "Status",
            "Summary of the pod's state, from its phase, reason and containers.",
        ),
        s(
            "Restarts",
            "Container restarts, and how long ago the last one was.",
        ),
        AGE,
        wide("IP", "The pod's first IP address."),
        wide("Node", "The node the pod is bound to."),
        wide(
            "Nominated Node",
            "The node the scheduler nominated after preempting pods.",
        ),
        wide(
            "Readiness Gates",
            "Readiness gates whose condition is True, out of all gates.",
        ),
    ],
    row: pod,
};

/// `restartPolicy: Always` marks an init container as a sidecar.
fn is_sidecar(spec_init: &[Value], name: &str) -> bool {
    spec_init
        .iter()
        .find(|c| str_or_empty(c, &["name"]) == name)
        .is_some_and(|c| str_or_empty(c, &["restartPolicy"]) == "Always")
}

fn condition_status<'a>(pod: &'a Value, type_: &str) -> Option<&'a str> {
    list(pod, &["status", "conditions"])
        .iter()
        .find(|c| str_or_empty(c, &["type"]) == type_)
        .map(|c| str_or_empty(c, &["status"]))
}

/// The finish time of a container's last termination, if it terminated before.
fn last_termination(status: &Value) -> Option<Instant> {
    meta::timestamp(status, &["lastState", "terminated", "finishedAt"])
}

/// Keeps the later of two optional instants (Go's zero time loses to any set time).
fn later(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, y) => x.or(y),
    }
}

/// `Signal:<n>` / `ExitCode:<n>` for a termination without a reason.
fn exit_text(terminated: &Value) -> String {
    let signal = int_or_zero(terminated, &["signal"]);
    if signal != 0 {
        format!("Signal:{signal}")
    } else {
        format!("ExitCode:{}", int_or_zero(terminated, &["exitCode"]))
    }
}

fn pod(pod: &Value, now: Instant) -> Row {
    let spec_init = list(pod, &["spec", "initContainers"]);
    let phase = str_or_empty(pod, &["status", "phase"]);
    let mut reason = opt_str(pod, &["status", "reason"])
        .filter(|r| !r.is_empty())
        .unwrap_or(phase)
        .to_string();
    let gated = list(pod, &["status", "conditions"]).iter().any(|c| {
        str_or_empty(c, &["type"]) == "PodScheduled"
            && str_or_empty(c, &["reason"]) == "SchedulingGated"
    });
    if gated {
        reason = "SchedulingGated".to_string();
    }

    let mut total = list(pod, &["spec", "containers"]).len();
    total += spec_init
        .iter()
        .filter(|c| str_or_empty(c, &["restartPolicy"]) == "Always")
        .count();
    let mut ready = 0usize;
    let mut restarts = 0i64;
    let mut sidecar_restarts = 0i64;
    let mut last_restart: Option<Instant> = None;
    let mut last_sidecar_restart: Option<Instant> = None;

    let mut initializing = false;
    for (i, c) in list(pod, &["status", "initContainerStatuses"])
        .iter()
        .enumerate()
    {
        let count = int_or_zero(c, &["restartCount"]);
        restarts = restarts.saturating_add(count);
        last_restart = later(last_restart, last_termination(c));
        let sidecar = is_sidecar(spec_init, str_or_empty(c, &["name"]));
        if sidecar {
            sidecar_restarts = sidecar_restarts.saturating_add(count);
            last_sidecar_restart = later(last_sidecar_restart, last_termination(c));
        }
        let terminated = crate::value::at(c, &["state", "terminated"]).filter(|t| t.is_object());
        let waiting_reason = str_or_empty(c, &["state", "waiting", "reason"]);
        if terminated.is_some_and(|t| int_or_zero(t, &["exitCode"]) == 0) {
            continue;
        }
        if sidecar && opt_bool(c, &["started"]) == Some(true) {
            if opt_bool(c, &["ready"]) == Some(true) {
                ready += 1;
            }
            continue;
        }
        reason = if let Some(t) = terminated {
            match str_or_empty(t, &["reason"]) {
                "" => format!("Init:{}", exit_text(t)),
                r => format!("Init:{r}"),
            }
        } else if !waiting_reason.is_empty() && waiting_reason != "PodInitializing" {
            format!("Init:{waiting_reason}")
        } else {
            format!("Init:{i}/{}", spec_init.len())
        };
        initializing = true;
        break;
    }

    if !initializing || condition_status(pod, "Initialized") == Some("True") {
        restarts = sidecar_restarts;
        last_restart = last_sidecar_restart;
        let mut has_running = false;
        for c in list(pod, &["status", "containerStatuses"]).iter().rev() {
            restarts = restarts.saturating_add(int_or_zero(c, &["restartCount"]));
            last_restart = later(last_restart, last_termination(c));
            let waiting_reason = str_or_empty(c, &["state", "waiting", "reason"]);
            let terminated =
                crate::value::at(c, &["state", "terminated"]).filter(|t| t.is_object());
            if !waiting_reason.is_empty() {
                reason = waiting_reason.to_string();
            } else if let Some(t) = terminated {
                reason = match str_or_empty(t, &["reason"]) {
                    "" => exit_text(t),
                    r => r.to_string(),
                };
            } else if opt_bool(c, &["ready"]) == Some(true)
                && crate::value::at(c, &["state", "running"]).is_some_and(Value::is_object)
            {
                has_running = true;
                ready += 1;
            }
        }
        if reason == "Completed" && has_running {
            reason = if condition_status(pod, "Ready") == Some("True") {
                "Running".to_string()
            } else {
                "NotReady".to_string()
            };
        }
    }

    if meta::deleting(pod) {
        if opt_str(pod, &["status", "reason"]) == Some("NodeLost") {
            reason = "Unknown".to_string();
        } else if phase != "Succeeded" && phase != "Failed" {
            reason = "Terminating".to_string();
        }
    }

    let restarts_text = match last_restart {
        Some(t) if restarts != 0 => format!("{restarts} ({} ago)", since(Some(t), now)),
        _ => restarts.to_string(),
    };

    let ip = list(pod, &["status", "podIPs"])
        .first()
        .map(|ip| str_or_empty(ip, &["ip"]))
        .or_else(|| opt_str(pod, &["status", "podIP"]))
        .filter(|ip| !ip.is_empty())
        .unwrap_or("<none>");
    let node = non_empty_or_none(str_or_empty(pod, &["spec", "nodeName"]));
    let nominated = non_empty_or_none(str_or_empty(pod, &["status", "nominatedNodeName"]));
    let gates = list(pod, &["spec", "readinessGates"]);
    let readiness = if gates.is_empty() {
        "<none>".to_string()
    } else {
        let passing = gates
            .iter()
            .filter(|g| condition_status(pod, str_or_empty(g, &["conditionType"])) == Some("True"))
            .count();
        format!("{passing}/{}", gates.len())
    };

    let mut row = Row::new(cells![
        meta::name(pod),
        format!("{ready}/{total}"),
        reason,
        restarts_text,
        meta::age(pod, now),
        ip,
        node,
        nominated,
        readiness,
    ]);
    row.conditions = match phase {
        "Succeeded" => vec![completed(
            "Succeeded",
            "The pod has completed successfully.",
        )],
        "Failed" => vec![completed("Failed", "The pod failed.")],
        _ => Vec::new(),
    };
    row
}

/// The `Completed` row condition upstream attaches to finished pods.
fn completed(reason: &str, message: &str) -> Value {
    json!({"type": "Completed", "status": "True", "reason": reason, "message": message})
}

fn non_empty_or_none(s: &str) -> &str {
    if s.is_empty() { "<none>" } else { s }
}

#[cfg(test)]
#[path = "pod_tests.rs"]
mod tests;
