//! Validation of a whole pod spec (upstream `ValidatePodSpec`) and of pod templates
//! (`ValidatePodTemplateSpec`): volumes and containers (in their own files), then policies,
//! scheduling constraints, DNS, security context and the names the spec refers to.

use std::collections::HashSet;
use std::net::IpAddr;

use apimachinery::field::{ErrorList, FieldError, Path};
use apimachinery::validation::is_dns1123_subdomain;
use serde_json::{Value, json};

use super::containers::{
    SpecContext, id_errors, seccomp_profile, validate_containers, validate_init_containers,
};
use super::scheduling::{affinity, tolerations, topology_spread};
use super::volumes::validate_volumes;
use crate::builtins::gofmt;
use crate::builtins::util::{
    annotations, arr_at, at, dns_label, dns_subdomain, i64_at, labels, one_of, qualified_name,
    range_error, str_at,
};

/// Where a pod spec sits: in a pod, or in a template of some workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Owner {
    Pod,
    Template,
}

/// Upstream `ValidatePodTemplateSpec` for the template at `path` (`spec.template`).
pub(crate) fn validate_template(errs: &mut ErrorList, template: Option<&Value>, path: &Path) {
    let null = Value::Null;
    let t = template.unwrap_or(&null);
    // Upstream validates template labels at `<path>.labels`, not `<path>.metadata.labels`.
    labels(errs, &path.child("labels"), t.pointer("/metadata/labels"));
    annotations(
        errs,
        &path.child("annotations"),
        t.pointer("/metadata/annotations"),
    );
    let spec = t.get("spec").unwrap_or(&null);
    validate_pod_spec(errs, spec, &path.child("spec"), Owner::Template);
    if !arr_at(spec, "/ephemeralContainers").is_empty() {
        errs.push(FieldError::forbidden(
            path.child("spec").child("ephemeralContainers"),
            "ephemeral containers not allowed in pod template",
        ));
    }
}

/// Upstream `ValidatePodSpec`.
pub(crate) fn validate_pod_spec(errs: &mut ErrorList, spec: &Value, path: &Path, owner: Owner) {
    let grace = i64_at(spec, "/terminationGracePeriodSeconds");
    if at(spec, "/terminationGracePeriodSeconds").is_none() {
        errs.push(FieldError::required(
            path.child("terminationGracePeriodSeconds"),
            "",
        ));
    }
    let volumes = validate_volumes(errs, arr_at(spec, "/volumes"), &path.child("volumes"));
    let ctx = SpecContext {
        volumes: &volumes,
        grace_period: grace,
    };
    validate_containers(
        errs,
        spec.get("containers"),
        &ctx,
        &path.child("containers"),
    );
    validate_init_containers(errs, spec, &ctx, &path.child("initContainers"));
    host_network(errs, spec, path, owner);
    one_of(
        errs,
        &path.child("restartPolicy"),
        str_at(spec, "/restartPolicy"),
        &["Always", "OnFailure", "Never"],
    );
    let dns_policy = str_at(spec, "/dnsPolicy");
    one_of(
        errs,
        &path.child("dnsPolicy"),
        dns_policy,
        &["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"],
    );
    labels(errs, &path.child("nodeSelector"), spec.get("nodeSelector"));
    if let Some(sc) = at(spec, "/securityContext") {
        pod_security_context(errs, spec, sc, &path.child("securityContext"));
    }
    for (i, s) in arr_at(spec, "/imagePullSecrets").iter().enumerate() {
        if s.as_object().is_some_and(|m| m.keys().any(|k| k != "name")) {
            errs.push(gofmt::invalid(
                &path.child("imagePullSecrets").index(i),
                gofmt::json(Some(s)),
                "only name may be set",
            ));
        }
    }
    if let Some(a) = at(spec, "/affinity") {
        affinity(errs, a, &path.child("affinity"));
    }
    dns_config(
        errs,
        spec.get("dnsConfig").filter(|d| !d.is_null()),
        dns_policy,
        &path.child("dnsConfig"),
    );
    for (i, g) in arr_at(spec, "/readinessGates").iter().enumerate() {
        let p = path.child("readinessGates").index(i).child("conditionType");
        qualified_name(errs, &p, str_at(g, "/conditionType"));
    }
    let mut gates = HashSet::new();
    for (i, g) in arr_at(spec, "/schedulingGates").iter().enumerate() {
        let p = path.child("schedulingGates").index(i);
        let name = str_at(g, "/name");
        qualified_name(errs, &p, name);
        if !gates.insert(name) {
            errs.push(FieldError::duplicate(&p, json!(name)));
        }
    }
    topology_spread(
        errs,
        arr_at(spec, "/topologySpreadConstraints"),
        &path.child("topologySpreadConstraints"),
    );
    for (field, subdomain) in [
        ("serviceAccountName", true),
        ("nodeName", true),
        ("hostname", false),
        ("subdomain", false),
        ("priorityClassName", true),
        ("runtimeClassName", true),
    ] {
        let v = str_at(spec, &format!("/{field}"));
        if v.is_empty() && !(field == "runtimeClassName" && at(spec, "/runtimeClassName").is_some())
        {
            continue;
        }
        if subdomain {
            for m in is_dns1123_subdomain(v) {
                errs.push(FieldError::invalid(path.child(field), json!(v), m));
            }
        } else {
            dns_label(errs, &path.child(field), v);
        }
    }
    if let Some(ads) = i64_at(spec, "/activeDeadlineSeconds")
        && !(1..=i64::from(i32::MAX)).contains(&ads)
    {
        errs.push(FieldError::invalid(
            path.child("activeDeadlineSeconds"),
            json!(ads),
            range_error(1, i64::from(i32::MAX)),
        ));
    }
    tolerations(
        errs,
        arr_at(spec, "/tolerations"),
        &path.child("tolerations"),
    );
    for (i, h) in arr_at(spec, "/hostAliases").iter().enumerate() {
        let p = path.child("hostAliases").index(i);
        ip(errs, &p.child("ip"), str_at(h, "/ip"));
        for (j, name) in arr_at(h, "/hostnames").iter().enumerate() {
            dns_subdomain(
                errs,
                &p.child("hostnames").index(j),
                name.as_str().unwrap_or(""),
            );
        }
    }
    if let Some(pp) = spec.get("preemptionPolicy").and_then(Value::as_str) {
        one_of(
            errs,
            &path.child("preemptionPolicy"),
            pp,
            &["PreemptLowerPriority", "Never"],
        );
    }
    if let Some(os) = at(spec, "/os") {
        let name = str_at(os, "/name");
        if name.is_empty() {
            errs.push(FieldError::required(
                path.child("os").child("name"),
                "cannot be empty",
            ));
        } else if !["linux", "windows"].contains(&name) {
            errs.push(FieldError::not_supported(
                path.child("os"),
                json!(name),
                &["linux", "windows"],
            ));
        }
    }
}

/// Upstream `validatePodHostNetworkDeps`: host ports of host-network pods equal container
/// ports (templates may leave them 0, to be defaulted in the pod).
fn host_network(errs: &mut ErrorList, spec: &Value, path: &Path, owner: Owner) {
    if spec.get("hostNetwork").and_then(Value::as_bool) != Some(true) {
        return;
    }
    for (i, c) in arr_at(spec, "/containers").iter().enumerate() {
        for (j, port) in arr_at(c, "/ports").iter().enumerate() {
            let hp = i64_at(port, "/hostPort").unwrap_or(0);
            let cp = i64_at(port, "/containerPort").unwrap_or(0);
            if (owner == Owner::Pod || hp != 0) && hp != cp {
                errs.push(FieldError::invalid(
                    path.child("containers")
                        .index(i)
                        .child("ports")
                        .index(j)
                        .child("hostPort"),
                    json!(hp),
                    "must match `containerPort` when `hostNetwork` is true",
                ));
            }
        }
    }
}

/// Upstream `validatePodSpecSecurityContext`, the common parts.
fn pod_security_context(errs: &mut ErrorList, spec: &Value, sc: &Value, p: &Path) {
    for f in ["fsGroup", "runAsUser", "runAsGroup"] {
        if let Some(id) = i64_at(sc, &format!("/{f}")) {
            for m in id_errors(id) {
                errs.push(FieldError::invalid(p.child(f), json!(id), m));
            }
        }
    }
    for (i, g) in arr_at(sc, "/supplementalGroups").iter().enumerate() {
        let id = g.as_i64().unwrap_or(-1);
        for m in id_errors(id) {
            errs.push(FieldError::invalid(
                p.child("supplementalGroups").index(i),
                json!(id),
                m,
            ));
        }
    }
    if spec.get("shareProcessNamespace").and_then(Value::as_bool) == Some(true)
        && spec.get("hostPID").and_then(Value::as_bool) == Some(true)
    {
        errs.push(FieldError::invalid(
            p.child("shareProcessNamespace"),
            json!(true),
            "ShareProcessNamespace and HostPID cannot both be enabled",
        ));
    }
    let mut seen = HashSet::new();
    for (i, s) in arr_at(sc, "/sysctls").iter().enumerate() {
        let np = p.child("sysctls").index(i).child("name");
        let name = str_at(s, "/name");
        if name.is_empty() {
            errs.push(FieldError::required(&np, ""));
        } else if !valid_sysctl(name) {
            errs.push(FieldError::invalid(
                &np,
                json!(name),
                "must have at most 253 characters and match regex ^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\\./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?$",
            ));
        } else if !seen.insert(name) {
            errs.push(FieldError::duplicate(&np, json!(name)));
        }
    }
    if let Some(policy) = sc.get("fsGroupChangePolicy").and_then(Value::as_str)
        && !["OnRootMismatch", "Always"].contains(&policy)
    {
        errs.push(FieldError::not_supported(
            p.child("fsGroupChangePolicy"),
            json!(policy),
            &["Always", "OnRootMismatch"],
        ));
    }
    if let Some(sp) = at(sc, "/seccompProfile") {
        seccomp_profile(errs, sp, &p.child("seccompProfile"));
    }
}

/// Upstream `IsValidSysctlName`.
fn valid_sysctl(name: &str) -> bool {
    name.len() <= 253
        && name.split(['.', '/']).all(|seg| {
            let b = seg.as_bytes();
            !b.is_empty()
                && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
                && (b[b.len() - 1].is_ascii_lowercase() || b[b.len() - 1].is_ascii_digit())
                && b.iter().all(|c| {
                    c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-' || *c == b'_'
                })
        })
}

/// Upstream `IsValidIP`.
pub(crate) fn ip(errs: &mut ErrorList, p: &Path, value: &str) {
    if value.parse::<IpAddr>().is_err() {
        errs.push(FieldError::invalid(
            p,
            json!(value),
            "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
        ));
    }
}

/// Upstream `validatePodDNSConfig`.
fn dns_config(errs: &mut ErrorList, cfg: Option<&Value>, policy: &str, p: &Path) {
    if policy == "None" {
        let Some(c) = cfg else {
            errs.push(FieldError::required(
                p,
                "must provide `dnsConfig` when `dnsPolicy` is None",
            ));
            return;
        };
        if arr_at(c, "/nameservers").is_empty() {
            errs.push(FieldError::required(
                p.child("nameservers"),
                "must provide at least one DNS nameserver when `dnsPolicy` is None",
            ));
            return;
        }
    }
    let Some(c) = cfg else { return };
    let servers = arr_at(c, "/nameservers");
    if servers.len() > 3 {
        errs.push(gofmt::invalid(
            &p.child("nameservers"),
            gofmt::string_slice(c.get("nameservers")),
            "must not have more than 3 nameservers",
        ));
    }
    for (i, s) in servers.iter().enumerate() {
        ip(
            errs,
            &p.child("nameservers").index(i),
            s.as_str().unwrap_or(""),
        );
    }
    let searches = arr_at(c, "/searches");
    if searches.len() > 32 {
        errs.push(gofmt::invalid(
            &p.child("searches"),
            gofmt::string_slice(c.get("searches")),
            "must not have more than 32 search paths",
        ));
    }
    let joined: usize = searches
        .iter()
        .map(|s| s.as_str().unwrap_or("").len() + 1)
        .sum();
    if joined.saturating_sub(1) > 2048 {
        errs.push(gofmt::invalid(
            &p.child("searches"),
            gofmt::string_slice(c.get("searches")),
            "must not have more than 2048 characters (including spaces) in the search list",
        ));
    }
    for (i, s) in searches.iter().enumerate() {
        let s = s.as_str().unwrap_or("");
        if s == "." {
            continue;
        }
        // Relaxed DNS search validation (on by default in 1.33) also accepts underscores.
        let trimmed = s.strip_suffix('.').unwrap_or(s);
        if !is_dns1123_subdomain(&trimmed.replace('_', "a")).is_empty() {
            for m in is_dns1123_subdomain(trimmed) {
                errs.push(FieldError::invalid(
                    p.child("searches").index(i),
                    json!(trimmed),
                    m,
                ));
            }
        }
    }
    for (i, o) in arr_at(c, "/options").iter().enumerate() {
        if str_at(o, "/name").is_empty() {
            errs.push(FieldError::required(
                p.child("options").index(i),
                "must not be empty",
            ));
        }
    }
}

/// Checks only pods get (upstream `validatePodMetadataAndSpec` and `ValidatePodCreate`).
pub(crate) fn validate_pod_only(errs: &mut ErrorList, spec: &Value, create: bool) {
    let sp = Path::new("spec");
    if str_at(spec, "/serviceAccountName").is_empty() {
        for (vi, v) in arr_at(spec, "/volumes").iter().enumerate() {
            for (si, s) in arr_at(v, "/projected/sources").iter().enumerate() {
                if at(s, "/serviceAccountToken").is_some() {
                    errs.push(FieldError::forbidden(
                        sp.child("volumes")
                            .index(vi)
                            .child("projected")
                            .child("sources")
                            .index(si)
                            .child("serviceAccountToken"),
                        "must not be specified when serviceAccountName is not set",
                    ));
                }
            }
        }
    }
    for list in ["containers", "initContainers"] {
        for (i, c) in arr_at(spec, &format!("/{list}")).iter().enumerate() {
            let image = str_at(c, "/image");
            if image.trim() != image {
                errs.push(FieldError::invalid(
                    sp.child(list).index(i).child("image"),
                    json!(image),
                    "must not have leading or trailing whitespace",
                ));
            }
        }
    }
    if create {
        if !arr_at(spec, "/ephemeralContainers").is_empty() {
            errs.push(FieldError::forbidden(
                sp.child("ephemeralContainers"),
                "cannot be set on create",
            ));
        }
        if !str_at(spec, "/nodeName").is_empty() && !arr_at(spec, "/schedulingGates").is_empty() {
            errs.push(FieldError::forbidden(
                sp.child("nodeName"),
                "cannot be set until all schedulingGates have been cleared",
            ));
        }
    }
}
