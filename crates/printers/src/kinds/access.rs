//! Printers for access and admission objects: RoleBinding, ClusterRoleBinding,
//! CertificateSigningRequest, PriorityClass, the webhook configurations and
//! ValidatingAdmissionPolicy with its bindings, and APIService (kube-aggregator's table).
//!
//! Roles and ClusterRoles have no upstream printer; they use the default table.

use serde_json::Value;

use super::Printer;
use crate::column::{AGE, Def, NAME, Row, b, cells, i, s, wide};
use crate::meta;
use crate::time::{Instant, human_duration};
use crate::value::{at, len, list, map, opt_bool, opt_int, opt_str, str_or_empty};

const BINDING_COLUMNS: &[Def] = &[
    NAME,
    s("Role", "The role granted, as Kind/name."),
    AGE,
    wide("Users", "Users the binding grants the role to."),
    wide("Groups", "Groups the binding grants the role to."),
    wide(
        "ServiceAccounts",
        "Service accounts the binding grants the role to, as namespace/name.",
    ),
];

pub(crate) const ROLE_BINDING: Printer = Printer {
    columns: BINDING_COLUMNS,
    row: binding,
};
pub(crate) const CLUSTER_ROLE_BINDING: Printer = Printer {
    columns: BINDING_COLUMNS,
    row: binding,
};

fn binding(obj: &Value, now: Instant) -> Row {
    let role = format!(
        "{}/{}",
        str_or_empty(obj, &["roleRef", "kind"]),
        str_or_empty(obj, &["roleRef", "name"])
    );
    let (mut users, mut groups, mut service_accounts) = (Vec::new(), Vec::new(), Vec::new());
    for subject in list(obj, &["subjects"]) {
        let name = str_or_empty(subject, &["name"]);
        match str_or_empty(subject, &["kind"]) {
            "ServiceAccount" => {
                service_accounts.push(format!("{}/{name}", str_or_empty(subject, &["namespace"])))
            }
            "User" => users.push(name.to_string()),
            "Group" => groups.push(name.to_string()),
            _ => {}
        }
    }
    Row::new(cells![
        meta::name(obj),
        role,
        meta::age(obj, now),
        users.join(", "),
        groups.join(", "),
        service_accounts.join(", "),
    ])
}

pub(crate) const CERTIFICATE_SIGNING_REQUEST: Printer = Printer {
    columns: &[
        NAME,
        AGE,
        s("SignerName", "The signer asked to sign the certificate."),
        s("Requestor", "The user who created the request."),
        s("RequestedDuration", "The validity the requestor asked for."),
        s(
            "Condition",
            "Approval state, and whether the certificate was issued.",
        ),
    ],
    row: certificate_signing_request,
};

fn certificate_signing_request(obj: &Value, now: Instant) -> Row {
    let has = |type_: &str| {
        list(obj, &["status", "conditions"])
            .iter()
            .any(|c| str_or_empty(c, &["type"]) == type_)
    };
    let mut condition = if has("Denied") {
        "Denied"
    } else if has("Approved") {
        "Approved"
    } else {
        "Pending"
    }
    .to_string();
    if has("Failed") {
        condition.push_str(",Failed");
    }
    if !str_or_empty(obj, &["status", "certificate"]).is_empty() {
        condition.push_str(",Issued");
    }
    let signer = match str_or_empty(obj, &["spec", "signerName"]) {
        "" => "<none>",
        s => s,
    };
    let duration = match opt_int(obj, &["spec", "expirationSeconds"]) {
        Some(secs) => human_duration(secs.saturating_mul(1_000_000_000)),
        None => "<none>".to_string(),
    };
    Row::new(cells![
        meta::name(obj),
        meta::age(obj, now),
        signer,
        str_or_empty(obj, &["spec", "username"]),
        duration,
        condition,
    ])
}

pub(crate) const API_SERVICE: Printer = Printer {
    columns: &[
        NAME,
        s(
            "Service",
            "The reference to the service that hosts this API endpoint.",
        ),
        s("Available", "Whether this service is available."),
        AGE,
    ],
    row: api_service,
};

fn api_service(obj: &Value, now: Instant) -> Row {
    let service = match (
        str_or_empty(obj, &["spec", "service", "namespace"]),
        str_or_empty(obj, &["spec", "service", "name"]),
    ) {
        (_, "") if at(obj, &["spec", "service"]).is_none_or(Value::is_null) => "Local".to_string(),
        (ns, name) => format!("{ns}/{name}"),
    };
    let available = list(obj, &["status", "conditions"])
        .iter()
        .find(|c| str_or_empty(c, &["type"]) == "Available")
        .map_or_else(
            || "Unknown".to_string(),
            |c| match (str_or_empty(c, &["status"]), str_or_empty(c, &["reason"])) {
                ("True", _) | (_, "") => str_or_empty(c, &["status"]).to_string(),
                (status, reason) => format!("{status} ({reason})"),
            },
        );
    Row::new(cells![
        meta::name(obj),
        service,
        available,
        meta::age(obj, now)
    ])
}

pub(crate) const FLOW_SCHEMA: Printer = Printer {
    columns: &[
        NAME,
        s(
            "PriorityLevel",
            "The priority level configuration this schema's requests go to.",
        ),
        s(
            "MatchingPrecedence",
            "The order among schemas matching a request: the lowest wins.",
        ),
        s(
            "DistinguisherMethod",
            "How requests are split into flows (ByUser, ByNamespace).",
        ),
        AGE,
        s(
            "MissingPL",
            "references a broken or non-existent PriorityLevelConfiguration",
        ),
    ],
    row: flow_schema,
};

fn flow_schema(obj: &Value, now: Instant) -> Row {
    let method = opt_str(obj, &["spec", "distinguisherMethod", "type"]).unwrap_or("<none>");
    let missing = list(obj, &["status", "conditions"])
        .iter()
        .find(|c| str_or_empty(c, &["type"]) == "Dangling")
        .map_or("?", |c| str_or_empty(c, &["status"]));
    Row::new(cells![
        meta::name(obj),
        str_or_empty(obj, &["spec", "priorityLevelConfiguration", "name"]),
        opt_int(obj, &["spec", "matchingPrecedence"]).unwrap_or(0),
        method,
        meta::age(obj, now),
        missing,
    ])
}

pub(crate) const PRIORITY_LEVEL_CONFIGURATION: Printer = Printer {
    columns: &[
        NAME,
        s("Type", "Exempt or Limited."),
        s(
            "NominalConcurrencyShares",
            "This level's share of the server's concurrency.",
        ),
        s("Queues", "Queues of waiting requests."),
        s("HandSize", "Queues a flow is dealt (shuffle sharding)."),
        s("QueueLengthLimit", "Requests one queue may hold."),
        AGE,
    ],
    row: priority_level_configuration,
};

fn priority_level_configuration(obj: &Value, now: Instant) -> Row {
    let none = || Value::from("<none>");
    let int = |path: &[&str]| opt_int(obj, path).map_or_else(none, Value::from);
    let limited = at(obj, &["spec", "limited"]).is_some_and(|l| !l.is_null());
    let queuing =
        at(obj, &["spec", "limited", "limitResponse", "queuing"]).is_some_and(|q| !q.is_null());
    let q = |k: &str| {
        if queuing {
            int(&["spec", "limited", "limitResponse", "queuing", k])
        } else {
            none()
        }
    };
    Row::new(cells![
        meta::name(obj),
        str_or_empty(obj, &["spec", "type"]),
        if limited {
            int(&["spec", "limited", "nominalConcurrencyShares"])
        } else {
            none()
        },
        q("queues"),
        q("handSize"),
        q("queueLengthLimit"),
        meta::age(obj, now),
    ])
}

pub(crate) const PRIORITY_CLASS: Printer = Printer {
    columns: &[
        NAME,
        i("Value", "The priority of pods using this class."),
        b(
            "Global-Default",
            "Whether pods without a class get this one.",
        ),
        AGE,
        s(
            "PreemptionPolicy",
            "Whether pods of this class may preempt lower-priority pods.",
        ),
    ],
    row: priority_class,
};

fn priority_class(obj: &Value, now: Instant) -> Row {
    Row::new(cells![
        meta::name(obj),
        opt_int(obj, &["value"]).unwrap_or(0),
        opt_bool(obj, &["globalDefault"]).unwrap_or(false),
        meta::age(obj, now),
        // Upstream defaults the policy to PreemptLowerPriority.
        opt_str(obj, &["preemptionPolicy"]).unwrap_or("PreemptLowerPriority"),
    ])
}

const WEBHOOK_COLUMNS: &[Def] = &[
    NAME,
    i("Webhooks", "Number of webhooks in the configuration."),
    AGE,
];

pub(crate) const MUTATING_WEBHOOK: Printer = Printer {
    columns: WEBHOOK_COLUMNS,
    row: webhooks,
};
pub(crate) const VALIDATING_WEBHOOK: Printer = Printer {
    columns: WEBHOOK_COLUMNS,
    row: webhooks,
};

fn webhooks(obj: &Value, now: Instant) -> Row {
    Row::new(cells![
        meta::name(obj),
        len(obj, &["webhooks"]) as i64,
        meta::age(obj, now)
    ])
}

pub(crate) const VALIDATING_ADMISSION_POLICY: Printer = Printer {
    columns: &[
        NAME,
        i("Validations", "Number of validation rules in the policy."),
        s(
            "ParamKind",
            "The kind of the resources that parameterize the policy.",
        ),
        AGE,
    ],
    row: validating_admission_policy,
};

fn validating_admission_policy(obj: &Value, now: Instant) -> Row {
    let param_kind = match at(obj, &["spec", "paramKind"]).filter(|p| p.is_object()) {
        Some(p) => format!(
            "{}/{}",
            str_or_empty(p, &["apiVersion"]),
            str_or_empty(p, &["kind"])
        ),
        None => "<unset>".to_string(),
    };
    Row::new(cells![
        meta::name(obj),
        len(obj, &["spec", "validations"]) as i64,
        param_kind,
        meta::age(obj, now),
    ])
}

pub(crate) const VALIDATING_ADMISSION_POLICY_BINDING: Printer = Printer {
    columns: &[
        NAME,
        s("PolicyName", "The policy this binding applies."),
        s(
            "ParamRef",
            "The parameter resource the binding passes to the policy.",
        ),
        AGE,
    ],
    row: validating_admission_policy_binding,
};

/// A label selector as Go's generated `(*LabelSelector).String()` prints it, which is what
/// upstream shows for a selector-based paramRef.
fn go_selector_string(sel: &Value) -> String {
    let mut labels: Vec<(&String, &str)> = map(sel, &["matchLabels"])
        .into_iter()
        .flatten()
        .map(|(k, v)| (k, v.as_str().unwrap_or("")))
        .collect();
    labels.sort();
    let labels: String = labels.iter().map(|(k, v)| format!("{k}: {v},")).collect();
    let exprs: String = list(sel, &["matchExpressions"])
        .iter()
        .map(|e| {
            let values: Vec<&str> = list(e, &["values"])
                .iter()
                .filter_map(Value::as_str)
                .collect();
            format!(
                "LabelSelectorRequirement{{Key:{},Operator:{},Values:[{}],}},",
                str_or_empty(e, &["key"]),
                str_or_empty(e, &["operator"]),
                values.join(" ")
            )
        })
        .collect();
    format!(
        "&LabelSelector{{MatchLabels:map[string]string{{{labels}}},MatchExpressions:[]LabelSelectorRequirement{{{exprs}}},}}"
    )
}

fn validating_admission_policy_binding(obj: &Value, now: Instant) -> Row {
    let param = match at(obj, &["spec", "paramRef"]).filter(|p| p.is_object()) {
        None => "<unset>".to_string(),
        Some(p) => match (str_or_empty(p, &["name"]), str_or_empty(p, &["namespace"])) {
            ("", _) => match at(p, &["selector"]).filter(|s| s.is_object()) {
                Some(sel) => go_selector_string(sel),
                None => "<unset>".to_string(),
            },
            // Cluster-scoped params cannot be told apart here, so no namespace reads `*`.
            (name, "") => format!("*/{name}"),
            (name, ns) => format!("{ns}/{name}"),
        },
    };
    Row::new(cells![
        meta::name(obj),
        str_or_empty(obj, &["spec", "policyName"]),
        param,
        meta::age(obj, now),
    ])
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::kinds::testutil::{ago, cells, default_names};

    #[test]
    fn bindings_print_role_and_wide_subjects() {
        let rb = json!({
            "metadata": {"name": "admins", "creationTimestamp": ago(5)},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "admin"},
            "subjects": [
                {"kind": "User", "name": "alice"}, {"kind": "Group", "name": "ops"},
                {"kind": "ServiceAccount", "name": "ci", "namespace": "build"}, {"kind": "User", "name": "bob"}
            ]
        });
        assert_eq!(default_names(&ROLE_BINDING), ["Name", "Role", "Age"]);
        assert_eq!(
            cells(&CLUSTER_ROLE_BINDING, &rb),
            vec![
                json!("admins"),
                json!("ClusterRole/admin"),
                json!("5s"),
                json!("alice, bob"),
                json!("ops"),
                json!("build/ci")
            ]
        );
    }

    #[test]
    fn flow_control_objects_print_as_kubectl_shows_them() {
        let fs = json!({"metadata": {"name": "catch-all"}, "spec": {"matchingPrecedence": 10000,
            "priorityLevelConfiguration": {"name": "catch-all"}, "distinguisherMethod": {"type": "ByUser"}}});
        let c = cells(&FLOW_SCHEMA, &fs);
        assert_eq!(c[1..4], [json!("catch-all"), json!(10000), json!("ByUser")]);
        assert_eq!(c[5], json!("?"));
        let exempt =
            json!({"metadata": {"name": "exempt"}, "spec": {"type": "Exempt", "exempt": {}}});
        assert_eq!(
            cells(&PRIORITY_LEVEL_CONFIGURATION, &exempt)[1..6],
            [
                json!("Exempt"),
                json!("<none>"),
                json!("<none>"),
                json!("<none>"),
                json!("<none>")
            ]
        );
        let queued = json!({"metadata": {"name": "workload-low"}, "spec": {"type": "Limited", "limited": {
            "nominalConcurrencyShares": 100, "limitResponse": {"type": "Queue",
            "queuing": {"queues": 128, "handSize": 6, "queueLengthLimit": 50}}}}});
        assert_eq!(
            cells(&PRIORITY_LEVEL_CONFIGURATION, &queued)[1..6],
            [
                json!("Limited"),
                json!(100),
                json!(128),
                json!(6),
                json!(50)
            ]
        );
    }

    #[test]
    fn api_services_print_local_or_their_service_and_availability() {
        let local = json!({"metadata": {"name": "v1.apps"}, "spec": {"group": "apps", "version": "v1"},
            "status": {"conditions": [{"type": "Available", "status": "True", "reason": "Local"}]}});
        assert_eq!(
            cells(&API_SERVICE, &local)[1..3],
            [json!("Local"), json!("True")]
        );
        let remote = json!({"metadata": {"name": "v1beta1.metrics.k8s.io"},
            "spec": {"service": {"namespace": "kube-system", "name": "metrics-server"}},
            "status": {"conditions": [{"type": "Available", "status": "False", "reason": "ServiceNotFound"}]}});
        assert_eq!(
            cells(&API_SERVICE, &remote)[1..3],
            [
                json!("kube-system/metrics-server"),
                json!("False (ServiceNotFound)")
            ]
        );
        let unknown = json!({"metadata": {"name": "v1.x.io"}, "spec": {"service": {"namespace": "n", "name": "s"}}});
        assert_eq!(cells(&API_SERVICE, &unknown)[2], json!("Unknown"));
    }

    #[test]
    fn csr_prints_signer_requestor_duration_and_condition() {
        let csr = json!({
            "metadata": {"name": "csr-abc", "creationTimestamp": ago(90)},
            "spec": {"signerName": "kubernetes.io/kube-apiserver-client", "username": "kubernetes-admin",
                "expirationSeconds": 86_400},
            "status": {"conditions": [{"type": "Approved", "status": "True"}], "certificate": "LS0t"}
        });
        assert_eq!(
            cells(&CERTIFICATE_SIGNING_REQUEST, &csr),
            vec![
                json!("csr-abc"),
                json!("90s"),
                json!("kubernetes.io/kube-apiserver-client"),
                json!("kubernetes-admin"),
                json!("24h"),
                json!("Approved,Issued")
            ]
        );
        let denied = json!({"metadata": {"name": "x"}, "spec": {}, "status": {"conditions": [
            {"type": "Approved"}, {"type": "Denied"}, {"type": "Failed"}]}});
        let c = cells(&CERTIFICATE_SIGNING_REQUEST, &denied);
        assert_eq!(
            c[2..],
            [
                json!("<none>"),
                json!(""),
                json!("<none>"),
                json!("Denied,Failed")
            ]
        );
    }

    #[test]
    fn priority_class_and_webhooks() {
        let pc = json!({"metadata": {"name": "system-node-critical"}, "value": 2000001000});
        assert_eq!(
            cells(&PRIORITY_CLASS, &pc),
            vec![
                json!("system-node-critical"),
                json!(2000001000),
                json!(false),
                json!("<unknown>"),
                json!("PreemptLowerPriority")
            ]
        );
        let wh = json!({"metadata": {"name": "cert-manager"}, "webhooks": [{"name": "a"}, {"name": "b"}]});
        assert_eq!(cells(&VALIDATING_WEBHOOK, &wh)[1], json!(2));
        assert_eq!(
            cells(&MUTATING_WEBHOOK, &json!({"metadata": {"name": "m"}}))[1],
            json!(0)
        );
    }

    #[test]
    fn admission_policies_print_validations_and_params() {
        let vap = json!({"metadata": {"name": "replicas"}, "spec": {
            "paramKind": {"apiVersion": "rules.example.com/v1", "kind": "ReplicaLimit"},
            "validations": [{"expression": "object.spec.replicas <= params.maxReplicas"}]}});
        assert_eq!(
            cells(&VALIDATING_ADMISSION_POLICY, &vap)[1..3],
            [json!(1), json!("rules.example.com/v1/ReplicaLimit")]
        );
        let named = json!({"metadata": {"name": "b"}, "spec": {"policyName": "replicas",
            "paramRef": {"name": "limit", "namespace": "prod"}}});
        assert_eq!(
            cells(&VALIDATING_ADMISSION_POLICY_BINDING, &named)[1..3],
            [json!("replicas"), json!("prod/limit")]
        );
        let any_ns = json!({"metadata": {"name": "b"}, "spec": {"paramRef": {"name": "limit"}}});
        assert_eq!(
            cells(&VALIDATING_ADMISSION_POLICY_BINDING, &any_ns)[2],
            json!("*/limit")
        );
        let by_selector = json!({"metadata": {"name": "b"}, "spec": {"paramRef": {"selector": {
            "matchLabels": {"env": "prod"},
            "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]}}}});
        assert_eq!(
            cells(&VALIDATING_ADMISSION_POLICY_BINDING, &by_selector)[2],
            json!(
                "&LabelSelector{MatchLabels:map[string]string{env: prod,},MatchExpressions:[]LabelSelectorRequirement{LabelSelectorRequirement{Key:tier,Operator:In,Values:[a b],},},}"
            )
        );
        let unset = json!({"metadata": {"name": "b"}, "spec": {"policyName": "p"}});
        assert_eq!(
            cells(&VALIDATING_ADMISSION_POLICY_BINDING, &unset)[2],
            json!("<unset>")
        );
    }
}
