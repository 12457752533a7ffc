//! The default RBAC objects of a new logical cluster, as upstream kube-apiserver 1.33 creates
//! them at startup (its `bootstrappolicy` package), written here as our own tables.
//!
//! Every object carries the label `kubernetes.io/bootstrapping: rbac-defaults` and the
//! annotation `rbac.authorization.kubernetes.io/autoupdate: "true"`. Rules follow upstream's
//! builder conventions: each list inside a rule is sorted, rules keep their table order.
//! Feature-gated rules are included when the gate is on by default in 1.33 and left out
//! otherwise (DRA, ClusterTrustBundle, VolumeAttributesClass, storage-version APIs,
//! coordinated leader election, `/statusz`).
//!
//! `admin`, `edit` and `view` are created already aggregated (upstream creates them empty and
//! its controller fills them a moment later), so a fresh cluster answers correctly at once and
//! running [`crate::aggregate`] over the result changes nothing.

mod cluster_roles;
mod controller_roles;
mod namespaced;
mod user_facing;

use serde_json::{Map, Value, json};

use crate::aggregate::aggregate_all;
use crate::rule::{PolicyRule, RuleBuilder, rule};

pub(crate) const RBAC_GROUP: &str = "rbac.authorization.k8s.io";
const API_VERSION: &str = "rbac.authorization.k8s.io/v1";
/// The label on every bootstrap object.
pub const BOOTSTRAPPING_LABEL: (&str, &str) = ("kubernetes.io/bootstrapping", "rbac-defaults");
/// The annotation that lets the server reconcile a bootstrap object on upgrade.
pub const AUTOUPDATE_ANNOTATION: (&str, &str) =
    ("rbac.authorization.kubernetes.io/autoupdate", "true");

pub(crate) const READ: &[&str] = &["get", "list", "watch"];
pub(crate) const WRITE: &[&str] = &["create", "update", "patch", "delete", "deletecollection"];
pub(crate) const READ_WRITE: &[&str] = &[
    "get",
    "list",
    "watch",
    "create",
    "update",
    "patch",
    "delete",
    "deletecollection",
];
pub(crate) const READ_UPDATE: &[&str] = &["get", "list", "watch", "update", "patch"];

/// Upstream `eventsRule()`: writing events in both event API groups.
pub(crate) fn events_rule() -> RuleBuilder {
    rule(&["create", "update", "patch"])
        .groups(&["", "events.k8s.io"])
        .resources(&["events"])
}

/// Shorthand for `rule(verbs).groups(groups).resources(resources)`.
pub(crate) fn res(verbs: &[&str], groups: &[&str], resources: &[&str]) -> RuleBuilder {
    rule(verbs).groups(groups).resources(resources)
}

/// A ClusterRole (or Role) to create: name, extra labels, optional aggregation label, rules.
pub(crate) struct RoleSpec {
    pub name: String,
    pub labels: Vec<(&'static str, &'static str)>,
    /// `aggregationRule` selecting ClusterRoles labelled `<this>: "true"`.
    pub aggregate_from: Option<&'static str>,
    pub rules: Vec<PolicyRule>,
}

impl RoleSpec {
    pub fn new(name: impl Into<String>, rules: Vec<RuleBuilder>) -> RoleSpec {
        RoleSpec {
            name: name.into(),
            labels: Vec::new(),
            aggregate_from: None,
            rules: rules.into_iter().map(RuleBuilder::build).collect(),
        }
    }

    pub fn label(mut self, key: &'static str) -> RoleSpec {
        self.labels.push((key, "true"));
        self
    }

    pub fn aggregated_from(mut self, key: &'static str) -> RoleSpec {
        self.aggregate_from = Some(key);
        self
    }

    fn to_object(&self, kind: &str, namespace: Option<&str>) -> Value {
        let mut o = object(kind, &self.name, namespace, &self.labels);
        o["rules"] = Value::Array(self.rules.iter().map(PolicyRule::to_json).collect());
        if let Some(key) = self.aggregate_from {
            o["aggregationRule"] =
                json!({"clusterRoleSelectors": [{"matchLabels": {key: "true"}}]});
        }
        o
    }
}

/// A binding subject.
pub(crate) enum Subject {
    User(&'static str),
    Group(&'static str),
    ServiceAccount(&'static str, String),
}

impl Subject {
    fn to_json(&self) -> Value {
        match self {
            Subject::User(n) => json!({"apiGroup": RBAC_GROUP, "kind": "User", "name": n}),
            Subject::Group(n) => json!({"apiGroup": RBAC_GROUP, "kind": "Group", "name": n}),
            Subject::ServiceAccount(ns, n) => {
                json!({"kind": "ServiceAccount", "name": n, "namespace": ns})
            }
        }
    }
}

/// A binding to create: its name, the role it grants and to whom.
pub(crate) struct BindingSpec {
    pub name: String,
    pub role_kind: &'static str,
    pub role: String,
    pub subjects: Vec<Subject>,
}

impl BindingSpec {
    /// A ClusterRoleBinding named after the ClusterRole it grants.
    pub fn cluster(role: &str, subjects: Vec<Subject>) -> BindingSpec {
        BindingSpec {
            name: role.into(),
            role_kind: "ClusterRole",
            role: role.into(),
            subjects,
        }
    }

    fn to_object(&self, kind: &str, namespace: Option<&str>) -> Value {
        let mut o = object(kind, &self.name, namespace, &[]);
        o["roleRef"] = json!({"apiGroup": RBAC_GROUP, "kind": self.role_kind, "name": self.role});
        if !self.subjects.is_empty() {
            o["subjects"] = Value::Array(self.subjects.iter().map(Subject::to_json).collect());
        }
        o
    }
}

fn object(
    kind: &str,
    name: &str,
    namespace: Option<&str>,
    labels: &[(&'static str, &'static str)],
) -> Value {
    let mut label_map = Map::new();
    for (k, v) in labels.iter().chain([&BOOTSTRAPPING_LABEL]) {
        label_map.insert(k.to_string(), json!(v));
    }
    let mut metadata = json!({
        "name": name,
        "labels": label_map,
        "annotations": {AUTOUPDATE_ANNOTATION.0: AUTOUPDATE_ANNOTATION.1},
    });
    if let Some(ns) = namespace {
        metadata["namespace"] = json!(ns);
    }
    json!({"apiVersion": API_VERSION, "kind": kind, "metadata": metadata})
}

/// Every bootstrap ClusterRole: the policy roles, then the `system:controller:*` roles, with
/// `admin`, `edit` and `view` already holding their aggregated rules.
pub fn bootstrap_cluster_roles() -> Vec<Value> {
    let mut roles: Vec<Value> = cluster_roles::cluster_roles()
        .iter()
        .chain(controller_roles::controller_roles().iter())
        .map(|r| r.to_object("ClusterRole", None))
        .collect();
    aggregate_all(&mut roles);
    roles
}

/// Every bootstrap ClusterRoleBinding: the policy bindings, then one per controller role
/// binding it to the `kube-system` service account of the same name.
pub fn bootstrap_cluster_role_bindings() -> Vec<Value> {
    let controllers = controller_roles::controller_roles()
        .into_iter()
        .map(|r| controller_roles::binding_for(&r.name));
    cluster_roles::cluster_role_bindings()
        .into_iter()
        .chain(controllers)
        .map(|b| b.to_object("ClusterRoleBinding", None))
        .collect()
}

/// The bootstrap Roles of `kube-system` and `kube-public`.
pub fn bootstrap_roles() -> Vec<Value> {
    namespaced::roles()
        .iter()
        .map(|(ns, r)| r.to_object("Role", Some(ns)))
        .collect()
}

/// The bootstrap RoleBindings of `kube-system` and `kube-public`.
pub fn bootstrap_role_bindings() -> Vec<Value> {
    namespaced::role_bindings()
        .iter()
        .map(|(ns, b)| b.to_object("RoleBinding", Some(ns)))
        .collect()
}

/// All bootstrap RBAC objects: ClusterRoles, ClusterRoleBindings, Roles, RoleBindings.
pub fn bootstrap_objects() -> Vec<Value> {
    let mut all = bootstrap_cluster_roles();
    all.extend(bootstrap_cluster_role_bindings());
    all.extend(bootstrap_roles());
    all.extend(bootstrap_role_bindings());
    all
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
