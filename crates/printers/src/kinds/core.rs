//! Printers for cluster plumbing: Node, Namespace, Secret, ConfigMap, ServiceAccount,
//! ResourceQuota, Lease and RuntimeClass.
//!
//! Node STATUS is `Ready`/`NotReady`/`Unknown` from the Ready condition, plus
//! `SchedulingDisabled` when cordoned; ROLES come from `node-role.kubernetes.io/<role>` labels
//! and the legacy `kubernetes.io/role` label.

use std::collections::BTreeSet;

use serde_json::Value;

use super::Printer;
use crate::column::{AGE, NAME, Row, cells, s, wide};
use crate::meta;
use crate::time::Instant;
use crate::value::{len, list, map, opt_bool, opt_quantity, opt_str, str_or_empty};

pub(crate) const NODE: Printer = Printer {
    columns: &[
        NAME,
        s(
            "Status",
            "Readiness of the node, and whether it is cordoned.",
        ),
        s(
            "Roles",
            "Roles from the node's node-role.kubernetes.io labels.",
        ),
        AGE,
        s("Version", "Kubelet version the node reports."),
        wide("Internal-IP", "The node's first InternalIP address."),
        wide("External-IP", "The node's first ExternalIP address."),
        wide("OS-Image", "Operating system image the node reports."),
        wide("Kernel-Version", "Kernel version the node reports."),
        wide(
            "Container-Runtime",
            "Container runtime and version the node reports.",
        ),
    ],
    row: node,
};

fn node(obj: &Value, now: Instant) -> Row {
    // The last Ready condition wins, as upstream builds a map by type.
    let ready = list(obj, &["status", "conditions"])
        .iter()
        .rfind(|c| str_or_empty(c, &["type"]) == "Ready");
    let mut status = vec![match ready {
        Some(c) if str_or_empty(c, &["status"]) == "True" => "Ready",
        Some(_) => "NotReady",
        None => "Unknown",
    }];
    if opt_bool(obj, &["spec", "unschedulable"]) == Some(true) {
        status.push("SchedulingDisabled");
    }

    let mut roles = BTreeSet::new();
    for (k, v) in meta::labels(obj).into_iter().flatten() {
        if let Some(role) = k.strip_prefix("node-role.kubernetes.io/") {
            if !role.is_empty() {
                roles.insert(role.to_string());
            }
        } else if k == "kubernetes.io/role"
            && let Some(v) = v.as_str().filter(|v| !v.is_empty())
        {
            roles.insert(v.to_string());
        }
    }
    let roles = if roles.is_empty() {
        "<none>".to_string()
    } else {
        roles.into_iter().collect::<Vec<_>>().join(",")
    };

    let address = |type_: &str| {
        list(obj, &["status", "addresses"])
            .iter()
            .find(|a| str_or_empty(a, &["type"]) == type_)
            .map(|a| str_or_empty(a, &["address"]))
            .unwrap_or("<none>")
    };
    let info = |field: &str| match str_or_empty(obj, &["status", "nodeInfo", field]) {
        "" => "<unknown>",
        v => v,
    };
    Row::new(cells![
        meta::name(obj),
        status.join(","),
        roles,
        meta::age(obj, now),
        str_or_empty(obj, &["status", "nodeInfo", "kubeletVersion"]),
        address("InternalIP"),
        address("ExternalIP"),
        info("osImage"),
        info("kernelVersion"),
        info("containerRuntimeVersion"),
    ])
}

pub(crate) const NAMESPACE: Printer = Printer {
    columns: &[
        NAME,
        s("Status", "Phase of the namespace: Active or Terminating."),
        AGE,
    ],
    row: namespace,
};

fn namespace(obj: &Value, now: Instant) -> Row {
    // Upstream defaults an empty phase to Active.
    let phase = opt_str(obj, &["status", "phase"])
        .filter(|p| !p.is_empty())
        .unwrap_or("Active");
    Row::new(cells![meta::name(obj), phase, meta::age(obj, now)])
}

pub(crate) const SECRET: Printer = Printer {
    columns: &[
        NAME,
        s("Type", "The secret's type, which says what its data holds."),
        s("Data", "Number of keys in the secret's data."),
        AGE,
    ],
    row: secret,
};

fn secret(obj: &Value, now: Instant) -> Row {
    let type_ = opt_str(obj, &["type"])
        .filter(|t| !t.is_empty())
        .unwrap_or("Opaque");
    Row::new(cells![
        meta::name(obj),
        type_,
        len(obj, &["data"]) as i64,
        meta::age(obj, now)
    ])
}

pub(crate) const CONFIG_MAP: Printer = Printer {
    columns: &[
        NAME,
        s("Data", "Number of keys in data and binaryData."),
        AGE,
    ],
    row: config_map,
};

fn config_map(obj: &Value, now: Instant) -> Row {
    let count = len(obj, &["data"]) + len(obj, &["binaryData"]);
    Row::new(cells![meta::name(obj), count as i64, meta::age(obj, now)])
}

pub(crate) const SERVICE_ACCOUNT: Printer = Printer {
    columns: &[
        NAME,
        s(
            "Secrets",
            "Number of secrets listed on the service account.",
        ),
        AGE,
    ],
    row: service_account,
};

fn service_account(obj: &Value, now: Instant) -> Row {
    Row::new(cells![
        meta::name(obj),
        len(obj, &["secrets"]) as i64,
        meta::age(obj, now)
    ])
}

pub(crate) const RESOURCE_QUOTA: Printer = Printer {
    columns: &[
        NAME,
        s(
            "Request",
            "Used and hard amounts of the quota's non-limit resources.",
        ),
        s(
            "Limit",
            "Used and hard amounts of the quota's limits.* resources.",
        ),
        AGE,
    ],
    row: resource_quota,
};

fn resource_quota(obj: &Value, now: Instant) -> Row {
    let mut requests = Vec::new();
    let mut limits = Vec::new();
    let hard = map(obj, &["status", "hard"]);
    let mut names: Vec<&String> = hard.into_iter().flat_map(|m| m.keys()).collect();
    names.sort();
    for name in names {
        let used = opt_quantity(obj, &["status", "used", name]).unwrap_or_else(|| "0".into());
        let limit = opt_quantity(obj, &["status", "hard", name]).unwrap_or_else(|| "0".into());
        let entry = format!("{name}: {used}/{limit}");
        let pieces: Vec<&str> = name.split('.').collect();
        if pieces.len() > 1 && pieces[0] == "limits" {
            limits.push(entry);
        } else {
            requests.push(entry);
        }
    }
    Row::new(cells![
        meta::name(obj),
        requests.join(", "),
        limits.join(", "),
        meta::age(obj, now),
    ])
}

pub(crate) const LEASE: Printer = Printer {
    columns: &[
        NAME,
        s("Holder", "Identity of the lease's current holder."),
        AGE,
    ],
    row: lease,
};

fn lease(obj: &Value, now: Instant) -> Row {
    Row::new(cells![
        meta::name(obj),
        str_or_empty(obj, &["spec", "holderIdentity"]),
        meta::age(obj, now),
    ])
}

pub(crate) const RUNTIME_CLASS: Printer = Printer {
    columns: &[
        NAME,
        s("Handler", "The CRI handler that runs pods of this class."),
        AGE,
    ],
    row: runtime_class,
};

fn runtime_class(obj: &Value, now: Instant) -> Row {
    Row::new(cells![
        meta::name(obj),
        str_or_empty(obj, &["handler"]),
        meta::age(obj, now)
    ])
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::kinds::testutil::{ago, cells, default_names};

    fn node_obj() -> Value {
        json!({
            "metadata": {"name": "cp-1", "creationTimestamp": ago(86_400 * 40), "labels": {
                "node-role.kubernetes.io/control-plane": "", "node-role.kubernetes.io/etcd": "true",
                "kubernetes.io/role": "master", "kubernetes.io/hostname": "cp-1"}},
            "spec": {"unschedulable": true},
            "status": {
                "conditions": [{"type": "MemoryPressure", "status": "False"}, {"type": "Ready", "status": "True"}],
                "addresses": [{"type": "Hostname", "address": "cp-1"}, {"type": "InternalIP", "address": "172.18.0.2"}],
                "nodeInfo": {"kubeletVersion": "v1.33.1", "osImage": "Debian GNU/Linux 12 (bookworm)",
                    "kernelVersion": "6.8.0", "containerRuntimeVersion": "containerd://2.1.1"}
            }
        })
    }

    #[test]
    fn node_prints_status_roles_version_and_wide_info() {
        assert_eq!(
            default_names(&NODE),
            ["Name", "Status", "Roles", "Age", "Version"]
        );
        assert_eq!(
            cells(&NODE, &node_obj()),
            vec![
                json!("cp-1"),
                json!("Ready,SchedulingDisabled"),
                json!("control-plane,etcd,master"),
                json!("40d"),
                json!("v1.33.1"),
                json!("172.18.0.2"),
                json!("<none>"),
                json!("Debian GNU/Linux 12 (bookworm)"),
                json!("6.8.0"),
                json!("containerd://2.1.1")
            ]
        );
    }

    #[test]
    fn node_without_ready_condition_is_unknown_and_roleless() {
        let n = json!({"metadata": {"name": "w"}, "status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}});
        let c = cells(&NODE, &n);
        assert_eq!(c[1..3], [json!("NotReady"), json!("<none>")]);
        assert_eq!(
            c[7..],
            [json!("<unknown>"), json!("<unknown>"), json!("<unknown>")]
        );
        let bare = json!({"metadata": {"name": "w"}});
        assert_eq!(cells(&NODE, &bare)[1], json!("Unknown"));
    }

    #[test]
    fn namespace_secret_config_map_and_service_account_count_entries() {
        let ns = json!({"metadata": {"name": "kube-system", "creationTimestamp": ago(3600)}, "status": {"phase": "Terminating"}});
        assert_eq!(
            cells(&NAMESPACE, &ns),
            vec![json!("kube-system"), json!("Terminating"), json!("60m")]
        );
        assert_eq!(
            cells(&NAMESPACE, &json!({"metadata": {"name": "a"}}))[1],
            json!("Active")
        );
        let secret = json!({"metadata": {"name": "tls"}, "type": "kubernetes.io/tls", "data": {"tls.crt": "", "tls.key": ""}});
        assert_eq!(
            cells(&SECRET, &secret)[1..3],
            [json!("kubernetes.io/tls"), json!(2)]
        );
        let cm =
            json!({"metadata": {"name": "cfg"}, "data": {"a": "1"}, "binaryData": {"b": "AA=="}});
        assert_eq!(cells(&CONFIG_MAP, &cm)[1], json!(2));
        let sa = json!({"metadata": {"name": "default"}});
        assert_eq!(cells(&SERVICE_ACCOUNT, &sa)[1], json!(0));
    }

    #[test]
    fn resource_quota_splits_requests_and_limits() {
        let q = json!({
            "metadata": {"name": "compute"},
            "status": {
                "hard": {"requests.cpu": "2", "limits.memory": "4Gi", "pods": "10", "limits.cpu": "4"},
                "used": {"requests.cpu": "500m", "limits.memory": "1Gi", "pods": "3"}
            }
        });
        assert_eq!(
            default_names(&RESOURCE_QUOTA),
            ["Name", "Request", "Limit", "Age"]
        );
        assert_eq!(
            cells(&RESOURCE_QUOTA, &q)[1..3],
            [
                json!("pods: 3/10, requests.cpu: 500m/2"),
                json!("limits.cpu: 0/4, limits.memory: 1Gi/4Gi")
            ]
        );
    }

    #[test]
    fn lease_and_runtime_class_print_their_one_field() {
        let lease =
            json!({"metadata": {"name": "kube-scheduler"}, "spec": {"holderIdentity": "cp-1_abc"}});
        assert_eq!(cells(&LEASE, &lease)[1], json!("cp-1_abc"));
        let rc = json!({"metadata": {"name": "gvisor"}, "handler": "runsc"});
        assert_eq!(cells(&RUNTIME_CLASS, &rc)[1], json!("runsc"));
    }
}
