//! Validation of the containers of a pod spec (upstream `validateContainers`,
//! `validateInitContainers` and `validateContainerCommon`): names, images, ports, environment,
//! volume mounts, pull policy, resources, probes, lifecycle hooks and security contexts.

use std::collections::HashSet;

use apimachinery::field::{ErrorList, FieldError, Path};
use serde_json::{Value, json};

use super::env::{env, env_from};
use super::probes::{lifecycle, probes};
use super::resources;
use crate::builtins::gofmt;
use crate::builtins::util::{
    arr_at, at, dns_label, i64_at, one_of, port_name_errors, port_num_errors, range_error, str_at,
};

/// What the container checks need to know about the pod spec.
pub(crate) struct SpecContext<'a> {
    /// Names of the spec's volumes that passed validation.
    pub volumes: &'a HashSet<String>,
    /// `terminationGracePeriodSeconds`, bounding sleep actions.
    pub grace_period: Option<i64>,
}

/// Upstream `validateContainers`.
pub(crate) fn validate_containers(
    errs: &mut ErrorList,
    containers: Option<&Value>,
    ctx: &SpecContext<'_>,
    path: &Path,
) {
    let list = containers
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    if list.is_empty() {
        errs.push(FieldError::required(path, ""));
        return;
    }
    let mut names = HashSet::new();
    for (i, c) in list.iter().enumerate() {
        let p = path.index(i);
        common(errs, c, ctx, &p);
        let name = str_at(c, "/name");
        if !names.insert(name.to_string()) {
            errs.push(FieldError::duplicate(p.child("name"), json!(name)));
        }
        if let Some(lc) = at(c, "/lifecycle") {
            lifecycle(errs, lc, ctx, &p.child("lifecycle"));
        }
        probes(errs, c, ctx, &p);
        if at(c, "/restartPolicy").is_some() {
            errs.push(FieldError::forbidden(
                p.child("restartPolicy"),
                "may not be set for non-init containers",
            ));
        }
    }
    host_port_conflicts(errs, list, path);
}

/// Upstream `validateInitContainers`.
pub(crate) fn validate_init_containers(
    errs: &mut ErrorList,
    spec: &Value,
    ctx: &SpecContext<'_>,
    path: &Path,
) {
    let mut names: HashSet<String> = arr_at(spec, "/containers")
        .iter()
        .map(|c| str_at(c, "/name").to_string())
        .collect();
    for (i, c) in arr_at(spec, "/initContainers").iter().enumerate() {
        let p = path.index(i);
        common(errs, c, ctx, &p);
        let restart = str_at(c, "/restartPolicy");
        let always = restart == "Always";
        if at(c, "/restartPolicy").is_some() && !always {
            errs.push(FieldError::not_supported(
                p.child("restartPolicy"),
                json!(restart),
                &["Always"],
            ));
        }
        let name = str_at(c, "/name");
        if names.contains(name) {
            errs.push(FieldError::duplicate(p.child("name"), json!(name)));
        } else if !name.is_empty() {
            names.insert(name.to_string());
        }
        host_port_conflicts(errs, std::slice::from_ref(c), path);
        if always {
            if let Some(lc) = at(c, "/lifecycle") {
                lifecycle(errs, lc, ctx, &p.child("lifecycle"));
            }
            probes(errs, c, ctx, &p);
        } else {
            for f in [
                "lifecycle",
                "livenessProbe",
                "readinessProbe",
                "startupProbe",
            ] {
                if at(c, &format!("/{f}")).is_some() {
                    errs.push(FieldError::forbidden(
                        p.child(f),
                        "may not be set for init containers without restartPolicy=Always",
                    ));
                }
            }
        }
    }
}

/// Upstream `validateContainerCommon`.
fn common(errs: &mut ErrorList, c: &Value, ctx: &SpecContext<'_>, p: &Path) {
    let name = str_at(c, "/name");
    if name.is_empty() {
        errs.push(FieldError::required(p.child("name"), ""));
    } else {
        dns_label(errs, &p.child("name"), name);
    }
    if str_at(c, "/image").is_empty() {
        errs.push(FieldError::required(p.child("image"), ""));
    }
    let policy = str_at(c, "/terminationMessagePolicy");
    one_of(
        errs,
        &p.child("terminationMessagePolicy"),
        policy,
        &["File", "FallbackToLogsOnError"],
    );
    ports(errs, arr_at(c, "/ports"), &p.child("ports"));
    env(errs, arr_at(c, "/env"), &p.child("env"));
    env_from(errs, arr_at(c, "/envFrom"), &p.child("envFrom"));
    volume_mounts(errs, c, ctx, &p.child("volumeMounts"));
    one_of(
        errs,
        &p.child("imagePullPolicy"),
        str_at(c, "/imagePullPolicy"),
        &["Always", "IfNotPresent", "Never"],
    );
    if let Some(r) = at(c, "/resources") {
        resources::validate_requirements(errs, r, &p.child("resources"));
    }
    if let Some(sc) = at(c, "/securityContext") {
        security_context(errs, sc, &p.child("securityContext"));
    }
}

/// Upstream `validateContainerPorts`.
fn ports(errs: &mut ErrorList, ports: &[Value], path: &Path) {
    let mut names = HashSet::new();
    for (i, port) in ports.iter().enumerate() {
        let p = path.index(i);
        let name = str_at(port, "/name");
        if !name.is_empty() {
            let msgs = port_name_errors(name);
            if !msgs.is_empty() {
                for m in msgs {
                    errs.push(FieldError::invalid(p.child("name"), json!(name), m));
                }
            } else if !names.insert(name.to_string()) {
                errs.push(FieldError::duplicate(p.child("name"), json!(name)));
            }
        }
        match i64_at(port, "/containerPort").unwrap_or(0) {
            0 => errs.push(FieldError::required(p.child("containerPort"), "")),
            n => {
                for m in port_num_errors(n) {
                    errs.push(FieldError::invalid(p.child("containerPort"), json!(n), m));
                }
            }
        }
        let host = i64_at(port, "/hostPort").unwrap_or(0);
        if host != 0 {
            for m in port_num_errors(host) {
                errs.push(FieldError::invalid(p.child("hostPort"), json!(host), m));
            }
        }
        one_of(
            errs,
            &p.child("protocol"),
            str_at(port, "/protocol"),
            &["SCTP", "TCP", "UDP"],
        );
    }
}

/// Upstream `checkHostPortConflicts`: a `protocol/hostIP/hostPort` may be used once.
fn host_port_conflicts(errs: &mut ErrorList, containers: &[Value], path: &Path) {
    let mut seen = HashSet::new();
    for (ci, c) in containers.iter().enumerate() {
        for (pi, port) in arr_at(c, "/ports").iter().enumerate() {
            let host = i64_at(port, "/hostPort").unwrap_or(0);
            if host == 0 {
                continue;
            }
            let key = format!(
                "{}/{}/{host}",
                str_at(port, "/protocol"),
                str_at(port, "/hostIP")
            );
            if !seen.insert(key.clone()) {
                errs.push(FieldError::duplicate(
                    path.index(ci).child("ports").index(pi).child("hostPort"),
                    json!(key),
                ));
            }
        }
    }
}

/// Upstream `ValidateVolumeMounts`.
fn volume_mounts(errs: &mut ErrorList, c: &Value, ctx: &SpecContext<'_>, path: &Path) {
    let mut mount_points = HashSet::new();
    let privileged = c
        .pointer("/securityContext/privileged")
        .and_then(Value::as_bool)
        == Some(true);
    for (i, m) in arr_at(c, "/volumeMounts").iter().enumerate() {
        let p = path.index(i);
        let name = str_at(m, "/name");
        if name.is_empty() {
            errs.push(FieldError::required(p.child("name"), ""));
        }
        if !ctx.volumes.contains(name) {
            errs.push(FieldError::not_found(p.child("name"), json!(name)));
        }
        let mp = str_at(m, "/mountPath");
        if mp.is_empty() {
            errs.push(FieldError::required(p.child("mountPath"), ""));
        }
        if !mount_points.insert(mp.to_string()) {
            errs.push(FieldError::invalid(
                p.child("mountPath"),
                json!(mp),
                "must be unique",
            ));
        }
        let sub = str_at(m, "/subPath");
        if !sub.is_empty() {
            local_descending_path(errs, &path.child("subPath"), sub);
        }
        let expr = str_at(m, "/subPathExpr");
        if !expr.is_empty() {
            if !sub.is_empty() {
                errs.push(FieldError::invalid(
                    p.child("subPathExpr"),
                    json!(expr),
                    "subPathExpr and subPath are mutually exclusive",
                ));
            }
            local_descending_path(errs, &path.child("subPathExpr"), expr);
        }
        if let Some(prop) = m.get("mountPropagation").and_then(Value::as_str) {
            let pp = path.child("mountPropagation");
            if !["Bidirectional", "HostToContainer", "None"].contains(&prop) {
                errs.push(FieldError::not_supported(
                    &pp,
                    json!(prop),
                    &["Bidirectional", "HostToContainer", "None"],
                ));
            }
            if prop == "Bidirectional" && !privileged {
                errs.push(FieldError::forbidden(
                    &pp,
                    "Bidirectional mount propagation is available only to privileged containers",
                ));
            }
        }
    }
}

/// Upstream `validateLocalDescendingPath`: relative, without `..` elements.
pub(crate) fn local_descending_path(errs: &mut ErrorList, path: &Path, target: &str) {
    if target.starts_with('/') {
        errs.push(FieldError::invalid(
            path,
            json!(target),
            "must be a relative path",
        ));
    }
    no_backsteps(errs, path, target);
}

/// Upstream `validatePathNoBacksteps`.
pub(crate) fn no_backsteps(errs: &mut ErrorList, path: &Path, target: &str) {
    if target.replace('\\', "/").split('/').any(|p| p == "..") {
        errs.push(FieldError::invalid(
            path,
            json!(target),
            "must not contain '..'",
        ));
    }
}

/// Upstream `IsValidUserID` / `IsValidGroupID`.
pub(crate) fn id_errors(id: i64) -> Vec<String> {
    if (0..=i64::from(i32::MAX)).contains(&id) {
        Vec::new()
    } else {
        vec![range_error(0, i64::from(i32::MAX))]
    }
}

/// Upstream `ValidateSecurityContext`, the common parts.
fn security_context(errs: &mut ErrorList, sc: &Value, p: &Path) {
    for f in ["runAsUser", "runAsGroup"] {
        if let Some(id) = i64_at(sc, &format!("/{f}")) {
            for m in id_errors(id) {
                errs.push(FieldError::invalid(p.child(f), json!(id), m));
            }
        }
    }
    if let Some(pm) = sc.get("procMount").and_then(Value::as_str)
        && !["Default", "Unmasked"].contains(&pm)
    {
        errs.push(FieldError::not_supported(
            p.child("procMount"),
            json!(pm),
            &["Default", "Unmasked"],
        ));
    }
    if let Some(sp) = at(sc, "/seccompProfile") {
        seccomp_profile(errs, sp, &p.child("seccompProfile"));
    }
    if sc.get("allowPrivilegeEscalation").and_then(Value::as_bool) == Some(false)
        && sc.get("privileged").and_then(Value::as_bool) == Some(true)
    {
        errs.push(gofmt::invalid(
            p,
            gofmt::json(Some(sc)),
            "cannot set `allowPrivilegeEscalation` to false and `privileged` to true",
        ));
    }
}

/// Upstream `validateSeccompProfileField`.
pub(crate) fn seccomp_profile(errs: &mut ErrorList, sp: &Value, p: &Path) {
    let ty = str_at(sp, "/type");
    match ty {
        "Localhost" | "RuntimeDefault" | "Unconfined" => {}
        "" => errs.push(FieldError::required(
            p.child("type"),
            "type is required when seccompProfile is set",
        )),
        other => errs.push(FieldError::not_supported(
            p.child("type"),
            json!(other),
            &["Localhost", "RuntimeDefault", "Unconfined"],
        )),
    }
    let local = at(sp, "/localhostProfile");
    if ty == "Localhost" {
        match local.and_then(Value::as_str) {
            None => errs.push(FieldError::required(
                p.child("localhostProfile"),
                "must be set when seccomp type is Localhost",
            )),
            Some(l) => local_descending_path(errs, &p.child("localhostProfile"), l),
        }
    } else if local.is_some() {
        errs.push(gofmt::invalid(
            &p.child("localhostProfile"),
            gofmt::json(Some(sp)),
            "can only be set when seccomp type is Localhost",
        ));
    }
}
