//! Who is asking and what for: the user, the request attributes and the authorizer's decision.
//!
//! These mirror upstream `user.Info`, `authorizer.Attributes` and `authorizer.Decision`. The API
//! server fills [`Attributes`] from its request info (or from a SubjectAccessReview spec) and
//! hands them, with the authenticated [`UserInfo`], to [`crate::authorize`].

use serde_json::{Value, json};

pub use apimachinery::user::{
    ALL_AUTHENTICATED, ALL_SERVICE_ACCOUNTS, ALL_UNAUTHENTICATED, SERVICE_ACCOUNT_PREFIX,
    SYSTEM_MASTERS, UserInfo, service_account_user_name,
};

/// What a request does (upstream `authorizer.Attributes`, without the user).
///
/// For a resource request `resource_request` is true and `verb` is the API verb (`get`, `list`,
/// `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`, or a special verb such as
/// `bind`, `escalate`, `impersonate`, `approve`, `use`). For a non-resource request only `verb`
/// (the lower-cased HTTP method, `get` for GET) and `path` matter. RBAC ignores label and field
/// selectors and the API version, so they are not carried here.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Attributes {
    pub verb: String,
    pub api_group: String,
    pub api_version: String,
    pub resource: String,
    pub subresource: String,
    pub name: String,
    pub namespace: String,
    pub resource_request: bool,
    pub path: String,
}

impl Attributes {
    /// A resource request: `verb` on `resource` in `api_group`, in `namespace` (empty for
    /// cluster scope), for object `name` (empty for list, watch, collection create).
    pub fn resource(verb: &str, api_group: &str, resource: &str, namespace: &str) -> Attributes {
        Attributes {
            verb: verb.into(),
            api_group: api_group.into(),
            resource: resource.into(),
            namespace: namespace.into(),
            resource_request: true,
            ..Attributes::default()
        }
    }

    /// A non-resource request for `path` (`/healthz`, `/apis`, `/metrics`).
    pub fn non_resource(verb: &str, path: &str) -> Attributes {
        Attributes {
            verb: verb.into(),
            path: path.into(),
            ..Attributes::default()
        }
    }

    /// The same request for one named object.
    pub fn named(mut self, name: &str) -> Attributes {
        self.name = name.into();
        self
    }

    /// The same request on a subresource (`status`, `scale`, `log`).
    pub fn subresource(mut self, subresource: &str) -> Attributes {
        self.subresource = subresource.into();
        self
    }

    /// The attributes of an access review's `spec` (SubjectAccessReview, SelfSubjectAccessReview,
    /// LocalSubjectAccessReview): `resourceAttributes {namespace, verb, group, version,
    /// resource, subresource, name}` or `nonResourceAttributes {path, verb}`. `None` when the
    /// spec has neither (upstream validation rejects that). Selectors are ignored, as RBAC does.
    pub fn from_review_spec(spec: &Value) -> Option<Attributes> {
        let s = |o: &Value, k: &str| o.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        if let Some(r) = spec.get("resourceAttributes").filter(|r| r.is_object()) {
            return Some(Attributes {
                verb: s(r, "verb"),
                api_group: s(r, "group"),
                api_version: s(r, "version"),
                resource: s(r, "resource"),
                subresource: s(r, "subresource"),
                name: s(r, "name"),
                namespace: s(r, "namespace"),
                resource_request: true,
                path: String::new(),
            });
        }
        let n = spec
            .get("nonResourceAttributes")
            .filter(|n| n.is_object())?;
        Some(Attributes::non_resource(&s(n, "verb"), &s(n, "path")))
    }

    /// `resource` or `resource/subresource`, the string rules are matched against.
    pub fn combined_resource(&self) -> String {
        if self.subresource.is_empty() {
            self.resource.clone()
        } else {
            format!("{}/{}", self.resource, self.subresource)
        }
    }
}

/// The RBAC authorizer's answer. RBAC has no deny rules: when nothing allows a request the
/// answer is "no opinion", and the server's next authorizer (or the final deny) decides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Allowed; the reason names the binding, e.g. `RBAC: allowed by ClusterRoleBinding "x" of
    /// ClusterRole "y" to Group "z"` (empty for `system:masters`, as upstream's privileged-group
    /// authorizer gives none).
    Allow { reason: String },
    /// Not allowed by any rule; the reason is empty, or `RBAC: <errors>` when some binding's role
    /// could not be resolved.
    NoOpinion { reason: String },
}

impl Decision {
    pub fn is_allowed(&self) -> bool {
        matches!(self, Decision::Allow { .. })
    }

    pub fn reason(&self) -> &str {
        match self {
            Decision::Allow { reason } | Decision::NoOpinion { reason } => reason,
        }
    }

    /// An access review's `status`: `{allowed, reason?}`. RBAC never sets `denied`.
    pub fn review_status(&self) -> Value {
        let mut status = json!({"allowed": self.is_allowed()});
        if !self.reason().is_empty() {
            status["reason"] = json!(self.reason());
        }
        status
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn review_specs_become_attributes() {
        let spec = json!({"resourceAttributes": {"namespace": "dev", "verb": "get", "group": "apps",
            "version": "v1", "resource": "deployments", "subresource": "scale", "name": "web",
            "labelSelector": {"rawSelector": "a=b"}}});
        let a = Attributes::from_review_spec(&spec).expect("resource attributes");
        assert_eq!(
            a,
            Attributes {
                api_version: "v1".into(),
                ..Attributes::resource("get", "apps", "deployments", "dev")
                    .named("web")
                    .subresource("scale")
            }
        );
        let spec = json!({"nonResourceAttributes": {"path": "/healthz", "verb": "get"}});
        assert_eq!(
            Attributes::from_review_spec(&spec),
            Some(Attributes::non_resource("get", "/healthz"))
        );
        assert_eq!(Attributes::from_review_spec(&json!({"user": "x"})), None);
    }

    #[test]
    fn review_status_carries_the_reason_only_when_there_is_one() {
        let allow = Decision::Allow {
            reason: "RBAC: allowed by x".into(),
        };
        assert_eq!(
            allow.review_status(),
            json!({"allowed": true, "reason": "RBAC: allowed by x"})
        );
        let no = Decision::NoOpinion {
            reason: String::new(),
        };
        assert_eq!(no.review_status(), json!({"allowed": false}));
    }

    #[test]
    fn service_account_users_carry_their_groups() {
        let sa = UserInfo::service_account("ci", "builder");
        assert_eq!(sa.name, "system:serviceaccount:ci:builder");
        assert!(sa.in_group("system:serviceaccounts:ci"));
        assert!(sa.in_group("system:authenticated"));
        assert!(!sa.is_superuser());
    }
}
