//! Probes and lifecycle hooks of containers (upstream `validateProbe`, `validateLifecycle`,
//! `validateHandler`): one handler each, valid ports and paths, sane thresholds.

use apimachinery::field::{ErrorList, FieldError, Path};
use serde_json::{Value, json};

use super::containers::SpecContext;
use crate::builtins::util::{
    arr_at, at, i64_at, nonnegative, port_num_errors, port_num_or_name, str_at,
};

/// Probes: upstream `validateLivenessProbe`, `validateReadinessProbe`, `validateStartupProbe`.
pub(crate) fn probes(errs: &mut ErrorList, c: &Value, ctx: &SpecContext<'_>, p: &Path) {
    for name in ["livenessProbe", "readinessProbe", "startupProbe"] {
        let Some(probe) = at(c, &format!("/{name}")) else {
            continue;
        };
        let pp = p.child(name);
        handler(errs, probe, false, ctx, &pp);
        for f in [
            "initialDelaySeconds",
            "timeoutSeconds",
            "periodSeconds",
            "successThreshold",
            "failureThreshold",
        ] {
            nonnegative(errs, &pp.child(f), i64_at(probe, &format!("/{f}")));
        }
        if let Some(t) = i64_at(probe, "/terminationGracePeriodSeconds") {
            if name == "readinessProbe" {
                errs.push(FieldError::invalid(
                    pp.child("terminationGracePeriodSeconds"),
                    json!(t),
                    "must not be set for readinessProbes",
                ));
            } else if t <= 0 {
                errs.push(FieldError::invalid(
                    pp.child("terminationGracePeriodSeconds"),
                    json!(t),
                    "must be greater than 0",
                ));
            }
        }
        if name != "readinessProbe" {
            let st = i64_at(probe, "/successThreshold").unwrap_or(0);
            if st != 1 {
                errs.push(FieldError::invalid(
                    pp.child("successThreshold"),
                    json!(st),
                    "must be 1",
                ));
            }
        }
    }
}

/// Upstream `validateLifecycle`.
pub(crate) fn lifecycle(errs: &mut ErrorList, lc: &Value, ctx: &SpecContext<'_>, p: &Path) {
    for hook in ["postStart", "preStop"] {
        if let Some(h) = at(lc, &format!("/{hook}")) {
            handler(errs, h, true, ctx, &p.child(hook));
        }
    }
}

/// Upstream `validateHandler`: exactly one action, each well formed.
pub(crate) fn handler(
    errs: &mut ErrorList,
    h: &Value,
    lifecycle: bool,
    ctx: &SpecContext<'_>,
    p: &Path,
) {
    let kinds: &[&str] = if lifecycle {
        &["exec", "httpGet", "tcpSocket", "sleep"]
    } else {
        &["exec", "httpGet", "tcpSocket", "grpc"]
    };
    let mut n = 0;
    for kind in kinds {
        let Some(a) = at(h, &format!("/{kind}")) else {
            continue;
        };
        let ap = p.child(kind);
        if n > 0 {
            errs.push(FieldError::forbidden(
                &ap,
                "may not specify more than 1 handler type",
            ));
            continue;
        }
        n += 1;
        match *kind {
            "exec" => {
                if arr_at(a, "/command").is_empty() {
                    errs.push(FieldError::required(ap.child("command"), ""));
                }
            }
            "httpGet" => {
                if str_at(a, "/path").is_empty() {
                    errs.push(FieldError::required(ap.child("path"), ""));
                }
                port_num_or_name(errs, &ap.child("port"), at(a, "/port"));
                let scheme = str_at(a, "/scheme");
                if !["HTTP", "HTTPS"].contains(&scheme) {
                    errs.push(FieldError::not_supported(
                        ap.child("scheme"),
                        json!(scheme),
                        &["HTTP", "HTTPS"],
                    ));
                }
            }
            "tcpSocket" => port_num_or_name(errs, &ap.child("port"), at(a, "/port")),
            "grpc" => {
                let port = i64_at(a, "/port").unwrap_or(0);
                for m in port_num_errors(port) {
                    errs.push(FieldError::invalid(ap.child("port"), json!(port), m));
                }
            }
            _ => {
                let secs = i64_at(a, "/seconds").unwrap_or(0);
                if let Some(grace) = ctx.grace_period
                    && (secs < 0 || secs > grace)
                {
                    errs.push(FieldError::invalid(
                        &ap,
                        json!(secs),
                        format!(
                            "must be non-negative and less than terminationGracePeriodSeconds ({grace})"
                        ),
                    ));
                }
            }
        }
    }
    if n == 0 {
        errs.push(FieldError::required(p, "must specify a handler type"));
    }
}
