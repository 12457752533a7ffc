//! Defaulting of pod specs, as upstream's `SetDefaults_PodSpec`, `SetDefaults_Container`,
//! `SetDefaults_Probe`, `SetDefaults_Volume` and friends do for pods and for every pod
//! template (Deployments, Jobs, ...), plus the pod-only defaults of `SetDefaults_Pod` and
//! the values upstream's admission plugins add to new pods (ServiceAccount, Priority,
//! DefaultTolerationSeconds).
//!
//! Every function is idempotent: the store defaults on create and again on each update.

use serde_json::{Value, json};

use super::resources;
use crate::builtins::util::{
    child, default_int, default_str, default_value, each_mut, obj_at, str_at,
};

/// Upstream `DefaultTerminationGracePeriodSeconds`.
const TERMINATION_GRACE_PERIOD_SECONDS: i64 = 30;
/// Upstream `SecretVolumeSourceDefaultMode` (and the ConfigMap, DownwardAPI, Projected ones).
const VOLUME_DEFAULT_MODE: i64 = 0o644;
/// Upstream's default `expirationSeconds` of a projected service account token (an hour).
const TOKEN_EXPIRATION_SECONDS: i64 = 3600;
/// Seconds pods tolerate a not-ready or unreachable node (the DefaultTolerationSeconds
/// admission plugin's `--default-not-ready-toleration-seconds` default).
const DEFAULT_TOLERATION_SECONDS: i64 = 300;

/// The container lists of a pod spec.
pub(crate) const CONTAINER_LISTS: [&str; 3] =
    ["containers", "initContainers", "ephemeralContainers"];

/// Defaults a pod spec wherever it appears (upstream `SetDefaults_PodSpec` and the defaults
/// of everything inside it).
pub(crate) fn pod_spec(spec: &mut Value) {
    if !spec.is_object() {
        return;
    }
    default_str(spec, "dnsPolicy", "ClusterFirst");
    default_str(spec, "restartPolicy", "Always");
    default_value(spec, "securityContext", json!({}));
    default_value(
        spec,
        "terminationGracePeriodSeconds",
        json!(TERMINATION_GRACE_PERIOD_SECONDS),
    );
    default_str(spec, "schedulerName", "default-scheduler");
    // v1 conversion: the deprecated `serviceAccount` mirrors `serviceAccountName`.
    let sa = str_at(spec, "/serviceAccountName").to_string();
    let deprecated = str_at(spec, "/serviceAccount").to_string();
    if sa.is_empty() && !deprecated.is_empty() {
        spec["serviceAccountName"] = json!(deprecated);
    } else if !sa.is_empty() {
        spec["serviceAccount"] = json!(sa);
    }
    for list in CONTAINER_LISTS {
        each_mut(spec, list, container);
    }
    each_mut(spec, "volumes", volume);
    if let Some(overhead) = spec.get_mut("overhead") {
        resources::canonical_list(overhead);
    }
}

/// Defaults a pod template (`spec.template` of workloads).
pub(crate) fn template(template: &mut Value) {
    if let Some(spec) = child(template, "spec") {
        pod_spec(spec);
    }
}

/// Defaults only pods get (upstream `SetDefaults_Pod`): requests default to limits,
/// `enableServiceLinks`, host ports of host-network pods.
pub(crate) fn pod_only(spec: &mut Value) {
    if !spec.is_object() {
        return;
    }
    for list in ["containers", "initContainers"] {
        each_mut(spec, list, |c| {
            let Some(limits) = obj_at(c, "/resources/limits").cloned() else {
                return;
            };
            if let Some(res) = child(c, "resources")
                && let Some(requests) = child(res, "requests").and_then(Value::as_object_mut)
            {
                for (k, v) in limits {
                    requests.entry(k).or_insert(v);
                }
            }
        });
    }
    default_value(spec, "enableServiceLinks", json!(true));
    if spec.get("hostNetwork").and_then(Value::as_bool) == Some(true) {
        for list in ["containers", "initContainers"] {
            each_mut(spec, list, |c| {
                each_mut(c, "ports", |p| {
                    if let Some(cp) = p.get("containerPort").cloned() {
                        let unset = p
                            .get("hostPort")
                            .is_none_or(|h| h.as_i64().unwrap_or(0) == 0);
                        if unset {
                            p["hostPort"] = cp;
                        }
                    }
                });
            });
        }
    }
}

/// What upstream's admission plugins add to a new pod: the `default` service account, the
/// priority of its (built-in) priority class, and tolerations of not-ready and unreachable
/// nodes for five minutes.
pub(crate) fn pod_admission(spec: &mut Value) {
    if !spec.is_object() {
        return;
    }
    default_str(spec, "serviceAccountName", "default");
    default_str(spec, "serviceAccount", "default");
    let class = str_at(spec, "/priorityClassName");
    let priority = match class {
        "" => Some(0),
        "system-cluster-critical" => Some(2_000_000_000),
        "system-node-critical" => Some(2_000_001_000),
        // Other classes are looked up by upstream's Priority plugin; left to the scheduler.
        _ => None,
    };
    if let Some(p) = priority {
        default_value(spec, "priority", json!(p));
        default_str(spec, "preemptionPolicy", "PreemptLowerPriority");
    }
    let tolerations = spec
        .get("tolerations")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let tolerates = |taint: &str| {
        tolerations.iter().any(|t| {
            let key = t.get("key").and_then(Value::as_str).unwrap_or("");
            let effect = t.get("effect").and_then(Value::as_str).unwrap_or("");
            (key == taint || key.is_empty()) && (effect == "NoExecute" || effect.is_empty())
        })
    };
    let mut added = Vec::new();
    for taint in [
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
    ] {
        if !tolerates(taint) {
            added.push(json!({
                "key": taint,
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": DEFAULT_TOLERATION_SECONDS,
            }));
        }
    }
    if !added.is_empty() {
        let mut all = tolerations;
        all.extend(added);
        spec["tolerations"] = Value::Array(all);
    }
}

/// Upstream `SetDefaults_Container` and what is nested in a container.
fn container(c: &mut Value) {
    if !c.is_object() {
        return;
    }
    let image = str_at(c, "/image").to_string();
    default_str(
        c,
        "imagePullPolicy",
        if image_tag(&image).as_deref() == Some("latest") {
            "Always"
        } else {
            "IfNotPresent"
        },
    );
    default_str(c, "terminationMessagePath", "/dev/termination-log");
    default_str(c, "terminationMessagePolicy", "File");
    each_mut(c, "ports", |p| default_str(p, "protocol", "TCP"));
    each_mut(c, "env", |e| {
        if let Some(from) = e.get_mut("valueFrom") {
            if let Some(f) = from.get_mut("fieldRef") {
                default_str(f, "apiVersion", "v1");
            }
            if let Some(r) = from.get_mut("resourceFieldRef") {
                default_value(r, "divisor", json!("0"));
            }
        }
    });
    default_value(c, "resources", json!({}));
    if let Some(r) = c.get_mut("resources") {
        for part in ["limits", "requests"] {
            if let Some(list) = r.get_mut(part) {
                resources::canonical_list(list);
            }
        }
    }
    for probe_name in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(p) = c.get_mut(probe_name).filter(|p| p.is_object()) {
            probe(p);
        }
    }
    if let Some(lc) = c.get_mut("lifecycle") {
        for hook in ["postStart", "preStop"] {
            if let Some(h) = lc.get_mut(hook) {
                handler(h);
            }
        }
    }
}

/// Upstream `SetDefaults_Probe`.
fn probe(p: &mut Value) {
    default_int(p, "timeoutSeconds", 1);
    default_int(p, "periodSeconds", 10);
    default_int(p, "successThreshold", 1);
    default_int(p, "failureThreshold", 3);
    handler(p);
}

/// Handler defaults: `SetDefaults_HTTPGetAction` and gRPC's empty service.
fn handler(h: &mut Value) {
    if let Some(get) = h.get_mut("httpGet").filter(|g| g.is_object()) {
        default_str(get, "path", "/");
        default_str(get, "scheme", "HTTP");
    }
    if let Some(grpc) = h.get_mut("grpc").filter(|g| g.is_object()) {
        default_value(grpc, "service", json!(""));
    }
}

/// The volume source fields of a `Volume`; a volume with none of them becomes an `emptyDir`.
pub(crate) const VOLUME_SOURCES: [&str; 29] = [
    "hostPath",
    "emptyDir",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "gitRepo",
    "secret",
    "nfs",
    "iscsi",
    "glusterfs",
    "persistentVolumeClaim",
    "rbd",
    "flexVolume",
    "cinder",
    "cephfs",
    "flocker",
    "downwardAPI",
    "fc",
    "azureFile",
    "configMap",
    "vsphereVolume",
    "quobyte",
    "azureDisk",
    "photonPersistentDisk",
    "projected",
    "portworxVolume",
    "scaleIO",
    "storageos",
    "csi",
    "ephemeral",
];

/// Upstream `SetDefaults_Volume` and the defaults of the common volume sources.
fn volume(v: &mut Value) {
    let Some(map) = v.as_object() else { return };
    let has_source = VOLUME_SOURCES
        .iter()
        .chain(std::iter::once(&"image"))
        .any(|s| map.get(*s).is_some_and(|x| !x.is_null()));
    if !has_source {
        v["emptyDir"] = json!({});
    }
    for src in ["secret", "configMap", "downwardAPI", "projected"] {
        if let Some(s) = v.get_mut(src).filter(|s| s.is_object()) {
            default_value(s, "defaultMode", json!(VOLUME_DEFAULT_MODE));
        }
    }
    if let Some(d) = v.get_mut("downwardAPI") {
        each_mut(d, "items", downward_item);
    }
    if let Some(p) = v.get_mut("projected") {
        each_mut(p, "sources", |s| {
            if let Some(t) = s.get_mut("serviceAccountToken").filter(|t| t.is_object()) {
                default_value(t, "expirationSeconds", json!(TOKEN_EXPIRATION_SECONDS));
            }
            if let Some(d) = s.get_mut("downwardAPI") {
                each_mut(d, "items", downward_item);
            }
        });
    }
    if let Some(h) = v.get_mut("hostPath").filter(|h| h.is_object()) {
        default_value(h, "type", json!(""));
    }
    if let Some(image) = v.get_mut("image").filter(|i| i.is_object()) {
        let reference = str_at(image, "/reference").to_string();
        let policy = if image_tag(&reference).as_deref() == Some("latest") {
            "Always"
        } else {
            "IfNotPresent"
        };
        default_str(image, "pullPolicy", policy);
    }
    if let Some(spec) = v
        .pointer_mut("/ephemeral/volumeClaimTemplate/spec")
        .filter(|s| s.is_object())
    {
        claim_spec(spec);
    }
}

fn downward_item(item: &mut Value) {
    if let Some(f) = item.get_mut("fieldRef").filter(|f| f.is_object()) {
        default_str(f, "apiVersion", "v1");
    }
    if let Some(r) = item.get_mut("resourceFieldRef").filter(|r| r.is_object()) {
        default_value(r, "divisor", json!("0"));
    }
}

/// Upstream `SetDefaults_PersistentVolumeClaimSpec` (claims and claim templates).
pub(crate) fn claim_spec(spec: &mut Value) {
    default_value(spec, "volumeMode", json!("Filesystem"));
    if let Some(r) = spec.get_mut("resources") {
        for part in ["limits", "requests"] {
            if let Some(list) = r.get_mut(part) {
                resources::canonical_list(list);
            }
        }
    }
}

/// The tag of an image reference as upstream's `ParseImageName` reports it: the explicit tag,
/// `latest` when there is neither tag nor digest, `None` for a digest-only or unparsable
/// reference (which then pulls `IfNotPresent`).
pub(crate) fn image_tag(image: &str) -> Option<String> {
    if image.is_empty() || image.trim() != image {
        return None;
    }
    let (name, digest) = match image.split_once('@') {
        Some((n, d)) => (n, Some(d)),
        None => (image, None),
    };
    let (repo, tag) = match name.rfind(':') {
        Some(i) if !name[i..].contains('/') => (&name[..i], Some(&name[i + 1..])),
        _ => (name, None),
    };
    if !valid_repository(repo) {
        return None;
    }
    match (tag, digest) {
        (Some(t), _) if !t.is_empty() => Some(t.to_string()),
        (Some(_), _) => None,
        (None, Some(_)) => None,
        (None, None) => Some("latest".into()),
    }
}

/// Docker reference grammar, loosely: an optional registry host, then lower-case path
/// components of `[a-z0-9]` separated by `.`, `_`, `__` or `-`.
fn valid_repository(repo: &str) -> bool {
    let mut parts: Vec<&str> = repo.split('/').collect();
    if parts.len() > 1 {
        let first = parts[0];
        let is_host = first.contains('.')
            || first.contains(':')
            || first == "localhost"
            || first.bytes().any(|b| b.is_ascii_uppercase());
        if is_host {
            parts.remove(0);
        }
    }
    !parts.is_empty()
        && parts.iter().all(|p| {
            !p.is_empty()
                && p.bytes().all(|b| {
                    b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-')
                })
                && p.as_bytes()[0].is_ascii_alphanumeric()
                && p.as_bytes()[p.len() - 1].is_ascii_alphanumeric()
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_tags_follow_upstream_parsing() {
        assert_eq!(image_tag("nginx").as_deref(), Some("latest"));
        assert_eq!(image_tag("nginx:1.25").as_deref(), Some("1.25"));
        assert_eq!(image_tag("nginx:latest").as_deref(), Some("latest"));
        assert_eq!(image_tag("localhost:5000/app").as_deref(), Some("latest"));
        assert_eq!(image_tag("localhost:5000/app:v1").as_deref(), Some("v1"));
        assert_eq!(image_tag("app@sha256:abc"), None);
        assert_eq!(image_tag("Nginx"), None);
        assert_eq!(image_tag(""), None);
    }

    #[test]
    fn pod_spec_defaults_match_upstream() {
        let mut spec = json!({"containers": [{"name": "c", "image": "nginx",
            "ports": [{"containerPort": 80}],
            "env": [{"name": "N", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
            "livenessProbe": {"httpGet": {"port": 80}}}]});
        pod_spec(&mut spec);
        assert_eq!(
            spec,
            json!({
                "containers": [{
                    "name": "c", "image": "nginx", "imagePullPolicy": "Always",
                    "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "File",
                    "ports": [{"containerPort": 80, "protocol": "TCP"}],
                    "env": [{"name": "N", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}}],
                    "resources": {},
                    "livenessProbe": {"httpGet": {"port": 80, "path": "/", "scheme": "HTTP"},
                        "timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3},
                }],
                "dnsPolicy": "ClusterFirst",
                "restartPolicy": "Always",
                "securityContext": {},
                "terminationGracePeriodSeconds": 30,
                "schedulerName": "default-scheduler",
            })
        );
    }

    #[test]
    fn volumes_without_a_source_become_empty_dirs() {
        let mut spec = json!({"containers": [], "volumes": [{"name": "a"}, {"name": "b", "secret": {"secretName": "s"}}]});
        pod_spec(&mut spec);
        assert_eq!(spec["volumes"][0]["emptyDir"], json!({}));
        assert_eq!(spec["volumes"][1]["secret"]["defaultMode"], json!(420));
    }

    #[test]
    fn pod_only_defaults_copy_limits_into_requests() {
        let mut spec = json!({"containers": [{"name": "c", "resources": {"limits": {"cpu": "1"}, "requests": {"memory": "1Gi"}}}]});
        pod_only(&mut spec);
        assert_eq!(
            spec["containers"][0]["resources"]["requests"],
            json!({"memory": "1Gi", "cpu": "1"})
        );
        assert_eq!(spec["enableServiceLinks"], json!(true));
    }

    #[test]
    fn admission_adds_tolerations_only_when_missing() {
        let mut spec =
            json!({"tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists"}]});
        pod_admission(&mut spec);
        let t = spec["tolerations"].as_array().cloned().unwrap_or_default();
        assert_eq!(t.len(), 2);
        assert_eq!(t[1]["key"], json!("node.kubernetes.io/unreachable"));
        assert_eq!(spec["serviceAccountName"], json!("default"));
        assert_eq!(spec["priority"], json!(0));
        assert_eq!(spec["preemptionPolicy"], json!("PreemptLowerPriority"));
    }
}
