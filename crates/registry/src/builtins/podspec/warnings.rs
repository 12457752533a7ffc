//! Warnings for pod specs (a subset of upstream's `GetWarningsForPod` and
//! `GetWarningsForPodTemplate`): deprecated node labels, deprecated volume types, fractional
//! byte quantities, negative grace periods, environment variables that hide earlier ones,
//! and duplicate container ports.

use std::collections::HashMap;

use apimachinery::field::Path;
use apimachinery::quantity::Quantity;
use serde_json::Value;

use crate::builtins::util::{arr_at, i64_at, obj_at, str_at};

/// Deprecated node labels and what replaces them.
const DEPRECATED_NODE_LABELS: [(&str, &str); 5] = [
    (
        "beta.kubernetes.io/arch",
        "deprecated since v1.14; use \"kubernetes.io/arch\" instead",
    ),
    (
        "beta.kubernetes.io/os",
        "deprecated since v1.14; use \"kubernetes.io/os\" instead",
    ),
    (
        "failure-domain.beta.kubernetes.io/region",
        "deprecated since v1.17; use \"topology.kubernetes.io/region\" instead",
    ),
    (
        "failure-domain.beta.kubernetes.io/zone",
        "deprecated since v1.17; use \"topology.kubernetes.io/zone\" instead",
    ),
    (
        "beta.kubernetes.io/instance-type",
        "deprecated since v1.17; use \"node.kubernetes.io/instance-type\" instead",
    ),
];

/// Deprecated volume types.
const DEPRECATED_VOLUMES: [(&str, &str); 9] = [
    (
        "photonPersistentDisk",
        "deprecated in v1.11, non-functional in v1.16+",
    ),
    ("gitRepo", "deprecated in v1.11"),
    ("scaleIO", "deprecated in v1.16, non-functional in v1.22+"),
    (
        "flocker",
        "deprecated in v1.22, support removal is planned in v1.26",
    ),
    (
        "storageos",
        "deprecated in v1.22, support removal is planned in v1.26",
    ),
    (
        "quobyte",
        "deprecated in v1.22, support removal is planned in v1.26",
    ),
    (
        "glusterfs",
        "deprecated in v1.25, this feature will be removed soon after in a subsequent release",
    ),
    ("rbd", "deprecated in v1.28, non-functional in v1.31+"),
    ("cephfs", "deprecated in v1.28, non-functional in v1.31+"),
];

fn deprecated_label(key: &str) -> Option<&'static str> {
    DEPRECATED_NODE_LABELS
        .iter()
        .find(|(k, _)| *k == key)
        .map(|(_, m)| *m)
}

/// Warnings for the pod spec at `spec_path` (`spec`, `spec.template.spec`, ...).
pub(crate) fn pod_spec_warnings(spec: &Value, spec_path: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut selector: Vec<&String> = obj_at(spec, "/nodeSelector")
        .into_iter()
        .flatten()
        .map(|(k, _)| k)
        .collect();
    selector.sort();
    for k in selector {
        if let Some(m) = deprecated_label(k) {
            out.push(format!("{}: {m}", spec_path.child("nodeSelector").key(k)));
        }
    }
    let terms_path = spec_path
        .child("affinity")
        .child("nodeAffinity")
        .child("requiredDuringSchedulingIgnoredDuringExecution")
        .child("nodeSelectorTerms");
    for (i, t) in arr_at(
        spec,
        "/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms",
    )
    .iter()
    .enumerate()
    {
        for (j, e) in arr_at(t, "/matchExpressions").iter().enumerate() {
            if let Some(m) = deprecated_label(str_at(e, "/key")) {
                let p = terms_path
                    .index(i)
                    .child("matchExpressions")
                    .index(j)
                    .child("key");
                out.push(format!("{p}: {m}"));
            }
        }
    }
    for (i, v) in arr_at(spec, "/volumes").iter().enumerate() {
        for (kind, m) in DEPRECATED_VOLUMES {
            if v.get(kind).is_some_and(|x| !x.is_null()) {
                out.push(format!(
                    "{}: {m}",
                    spec_path.child("volumes").index(i).child(kind)
                ));
            }
        }
    }
    if let Some(g) = i64_at(spec, "/terminationGracePeriodSeconds")
        && g < 0
    {
        out.push(format!(
            "{}: must be >= 0; negative values are invalid and will be treated as 1",
            spec_path.child("terminationGracePeriodSeconds")
        ));
    }
    for list in ["initContainers", "containers"] {
        for (i, c) in arr_at(spec, &format!("/{list}")).iter().enumerate() {
            let cp = spec_path.child(list).index(i);
            container_warnings(&mut out, c, &cp);
        }
    }
    out
}

fn container_warnings(out: &mut Vec<String>, c: &Value, cp: &Path) {
    for part in ["limits", "requests"] {
        for res in ["memory", "ephemeral-storage"] {
            if let Some(raw) = c.pointer(&format!("/resources/{part}/{res}"))
                && let Ok(q) = Quantity::from_json(raw)
                && q.milli_value_i128() % 1000 != 0
            {
                out.push(format!(
                    "{}: fractional byte value {:?} is invalid, must be an integer",
                    cp.child("resources").child(part).key(res),
                    q.to_string()
                ));
            }
        }
    }
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for (j, e) in arr_at(c, "/env").iter().enumerate() {
        let name = str_at(e, "/name");
        if seen.insert(name, j).is_some() {
            out.push(format!(
                "{}: hides previous definition of {name:?}, which may be dropped when using apply",
                cp.child("env").index(j)
            ));
        }
    }
    let ports = arr_at(c, "/ports");
    for (j, p) in ports.iter().enumerate() {
        let key = |p: &Value| {
            (
                i64_at(p, "/containerPort"),
                str_at(p, "/protocol").to_string(),
                i64_at(p, "/hostPort"),
                str_at(p, "/hostIP").to_string(),
            )
        };
        if let Some(k) = ports[..j].iter().position(|q| key(q) == key(p)) {
            out.push(format!(
                "{}: duplicate port definition with {}",
                cp.child("ports").index(j),
                cp.child("ports").index(k)
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn deprecated_labels_fractions_and_duplicates_warn() {
        let spec = json!({
            "nodeSelector": {"beta.kubernetes.io/os": "linux"},
            "terminationGracePeriodSeconds": -1,
            "containers": [{"name": "c", "resources": {"requests": {"memory": "1.5"}},
                "env": [{"name": "A"}, {"name": "A"}],
                "ports": [{"containerPort": 80, "protocol": "TCP"}, {"containerPort": 80, "protocol": "TCP"}]}],
        });
        assert_eq!(
            pod_spec_warnings(&spec, &Path::new("spec")),
            vec![
                "spec.nodeSelector[beta.kubernetes.io/os]: deprecated since v1.14; use \"kubernetes.io/os\" instead",
                "spec.terminationGracePeriodSeconds: must be >= 0; negative values are invalid and will be treated as 1",
                "spec.containers[0].resources.requests[memory]: fractional byte value \"1500m\" is invalid, must be an integer",
                "spec.containers[0].env[1]: hides previous definition of \"A\", which may be dropped when using apply",
                "spec.containers[0].ports[1]: duplicate port definition with spec.containers[0].ports[0]",
            ]
        );
    }
}
