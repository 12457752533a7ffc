//! The webhooks of a cluster, read from its Mutating- and ValidatingWebhookConfigurations in
//! the watch cache, and whether one of them is interested in a request (upstream's
//! `webhook/predicates`: rules, namespace and object selectors).
//!
//! Parsing a configuration (selectors, match-condition programs) is done once per
//! resourceVersion ([`Compiled`]).

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use apimachinery::field::Path;
use apimachinery::labels::{Selector, label_selector_from_json};
use apimachinery::meta;
use cel::Program;
use registry::cache::Filter;
use serde_json::Value;

use crate::ControlPlane;
use crate::admission::compiled::Compiled;

/// Where a webhook is reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// `clientConfig.url`.
    Url(String),
    /// `clientConfig.service`: a Service of the same cluster.
    Service {
        namespace: String,
        name: String,
        path: String,
        port: u16,
    },
}

/// One rule of a webhook (`RuleWithOperations`).
#[derive(Debug, Clone, Default)]
pub struct Rule {
    pub operations: Vec<String>,
    pub groups: Vec<String>,
    pub versions: Vec<String>,
    pub resources: Vec<String>,
    pub scope: String,
}

/// One webhook of a configuration, ready to match and call.
pub struct Webhook {
    /// The configuration it belongs to.
    pub configuration: String,
    pub name: String,
    pub rules: Vec<Rule>,
    /// `failurePolicy: Ignore`.
    pub ignore_failure: bool,
    /// `matchPolicy: Equivalent`.
    pub equivalent: bool,
    pub namespace_selector: Selector,
    pub object_selector: Selector,
    pub side_effects: String,
    pub timeout: Duration,
    /// A mutating webhook.
    pub mutating: bool,
    /// `reinvocationPolicy: IfNeeded` (mutating only).
    pub reinvoke: bool,
    pub target: Target,
    /// `clientConfig.caBundle`, decoded PEM.
    pub ca_bundle: Option<Vec<u8>>,
    /// The AdmissionReview version to send (the first of the webhook's list this server speaks).
    pub review_version: Option<&'static str>,
    /// `matchConditions`, compiled (a compile error fails the condition when evaluated).
    pub match_conditions: Vec<(String, Result<Program, String>)>,
}

impl Webhook {
    /// Whether calls in a dry run are allowed (`sideEffects` None or NoneOnDryRun).
    pub fn dry_run_safe(&self) -> bool {
        matches!(self.side_effects.as_str(), "None" | "NoneOnDryRun")
    }
}

/// The webhook kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Mutating,
    Validating,
}

impl Kind {
    pub fn plural(self) -> &'static str {
        match self {
            Kind::Mutating => "mutatingwebhookconfigurations",
            Kind::Validating => "validatingwebhookconfigurations",
        }
    }
}

/// The strings of an array field (others skipped).
pub(crate) fn strings(v: &Value, key: &str) -> Vec<String> {
    v.get(key)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// A label selector field; absent or null selects everything.
pub(crate) fn selector(v: Option<&Value>) -> Selector {
    match v {
        None | Some(Value::Null) => Selector::everything(),
        // A selector that does not parse matches nothing (validation refuses it on write).
        Some(s) => {
            label_selector_from_json(s, &Path::default()).unwrap_or_else(|_| Selector::nothing())
        }
    }
}

/// One `RuleWithOperations` (scope `*` when absent).
pub(crate) fn rule(r: &Value) -> Rule {
    Rule {
        operations: strings(r, "operations"),
        groups: strings(r, "apiGroups"),
        versions: strings(r, "apiVersions"),
        resources: strings(r, "resources"),
        scope: match r.get("scope").and_then(Value::as_str) {
            None | Some("") => "*".to_string(),
            Some(s) => s.to_string(),
        },
    }
}

/// A `clientConfig` (of an admission webhook or a CRD's conversion webhook): where to call
/// and the decoded `caBundle`.
pub(crate) fn client_config(cc: &Value) -> (Target, Option<Vec<u8>>) {
    let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let target = match (cc.get("url").and_then(Value::as_str), cc.get("service")) {
        (Some(u), _) => Target::Url(u.to_string()),
        (None, Some(svc)) => Target::Service {
            namespace: text(svc, "namespace"),
            name: text(svc, "name"),
            path: text(svc, "path"),
            port: svc
                .get("port")
                .and_then(Value::as_u64)
                .and_then(|p| u16::try_from(p).ok())
                .unwrap_or(443),
        },
        (None, None) => Target::Url(String::new()),
    };
    let ca_bundle = cc
        .get("caBundle")
        .and_then(Value::as_str)
        .filter(|b| !b.is_empty())
        .and_then(|b| {
            use base64::Engine;
            base64::engine::general_purpose::STANDARD.decode(b).ok()
        });
    (target, ca_bundle)
}

/// Parses the webhooks of one configuration.
pub fn parse(config: &Value, kind: Kind) -> Vec<Webhook> {
    let configuration = meta::name(config).to_string();
    let Some(hooks) = config.get("webhooks").and_then(Value::as_array) else {
        return Vec::new();
    };
    hooks
        .iter()
        .map(|h| {
            let s = |k: &str| h.get(k).and_then(Value::as_str).unwrap_or("").to_string();
            let (target, ca_bundle) = client_config(h.get("clientConfig").unwrap_or(&Value::Null));
            let review_version = strings(h, "admissionReviewVersions")
                .iter()
                .find_map(|v| match v.as_str() {
                    "v1" => Some("v1"),
                    "v1beta1" => Some("v1beta1"),
                    _ => None,
                });
            let rules = h
                .get("rules")
                .and_then(Value::as_array)
                .map(|rs| rs.iter().map(rule).collect())
                .unwrap_or_default();
            let match_conditions = h
                .get("matchConditions")
                .and_then(Value::as_array)
                .map(|cs| {
                    cs.iter()
                        .map(|c| {
                            let name = c.get("name").and_then(Value::as_str).unwrap_or("");
                            let expr = c.get("expression").and_then(Value::as_str).unwrap_or("");
                            (name.to_string(), crate::admission::cel::compile(expr))
                        })
                        .collect()
                })
                .unwrap_or_default();
            Webhook {
                configuration: configuration.clone(),
                name: s("name"),
                rules,
                ignore_failure: s("failurePolicy") == "Ignore",
                equivalent: s("matchPolicy") != "Exact",
                namespace_selector: selector(h.get("namespaceSelector")),
                object_selector: selector(h.get("objectSelector")),
                side_effects: s("sideEffects"),
                timeout: Duration::from_secs(
                    h.get("timeoutSeconds")
                        .and_then(Value::as_u64)
                        .unwrap_or(10)
                        .clamp(1, 30),
                ),
                mutating: kind == Kind::Mutating,
                reinvoke: kind == Kind::Mutating && s("reinvocationPolicy") == "IfNeeded",
                target,
                ca_bundle,
                review_version,
                match_conditions,
            }
        })
        .collect()
}

static PARSED: LazyLock<Compiled<Vec<Webhook>>> = LazyLock::new(Compiled::default);

/// The webhooks of `kind` in `cluster`, configurations in name order (upstream sorts them so),
/// each configuration's webhooks in their order.
pub fn webhooks(cp: &ControlPlane, cluster: &str, kind: Kind) -> Vec<Arc<Vec<Webhook>>> {
    let filter = Filter {
        cluster: Some(cluster.to_string()),
        ..Filter::default()
    };
    let (configs, _) = cp.store.cache_for_reads(cluster).list(
        "admissionregistration.k8s.io",
        kind.plural(),
        &filter,
    );
    if configs.is_empty() {
        return Vec::new();
    }
    let mut out: Vec<(String, Arc<Vec<Webhook>>)> = configs
        .iter()
        .map(|c| (c.name().to_string(), PARSED.get(c, |v| parse(v, kind))))
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out.into_iter().map(|(_, h)| h).collect()
}

/// What a rule is matched against.
pub struct Request<'a> {
    pub operation: &'a str,
    pub group: &'a str,
    pub version: &'a str,
    pub resource: &'a str,
    pub subresource: &'a str,
    pub namespaced: bool,
}

fn any_or(list: &[String], value: &str) -> bool {
    list.iter().any(|x| x == "*" || x == value)
}

/// Upstream `rules.Matcher`: operation, group, version, resource (with subresource patterns
/// `pods/*`, `*/scale`, `*/*`) and scope.
pub fn rule_matches(rule: &Rule, r: &Request<'_>) -> bool {
    if !any_or(&rule.operations, r.operation) {
        return false;
    }
    if !any_or(&rule.groups, r.group) || !any_or(&rule.versions, r.version) {
        return false;
    }
    let resource_ok = rule.resources.iter().any(|pattern| {
        let (res, sub) = pattern.split_once('/').unwrap_or((pattern, ""));
        let res_ok = res == "*" || res == r.resource;
        let sub_ok = if pattern.contains('/') {
            sub == "*" || sub == r.subresource
        } else {
            r.subresource.is_empty()
        };
        res_ok && sub_ok
    });
    if !resource_ok {
        return false;
    }
    match rule.scope.as_str() {
        "Cluster" => !r.namespaced,
        "Namespaced" => r.namespaced,
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rule(ops: &[&str], resources: &[&str], scope: &str) -> Rule {
        Rule {
            operations: ops.iter().map(|s| s.to_string()).collect(),
            groups: vec!["".into()],
            versions: vec!["v1".into()],
            resources: resources.iter().map(|s| s.to_string()).collect(),
            scope: scope.into(),
        }
    }

    fn req<'a>(op: &'a str, resource: &'a str, sub: &'a str, namespaced: bool) -> Request<'a> {
        Request {
            operation: op,
            group: "",
            version: "v1",
            resource,
            subresource: sub,
            namespaced,
        }
    }

    #[test]
    fn rules_match_operations_resources_subresources_and_scope_as_upstream() {
        let pods = rule(&["CREATE"], &["pods"], "*");
        assert!(rule_matches(&pods, &req("CREATE", "pods", "", true)));
        assert!(!rule_matches(&pods, &req("UPDATE", "pods", "", true)));
        assert!(!rule_matches(&pods, &req("CREATE", "pods", "status", true)));
        let star = rule(&["*"], &["*"], "*");
        assert!(rule_matches(&star, &req("DELETE", "configmaps", "", true)));
        assert!(!rule_matches(&star, &req("UPDATE", "pods", "status", true)));
        let subs = rule(&["*"], &["pods/*"], "*");
        assert!(rule_matches(&subs, &req("UPDATE", "pods", "status", true)));
        // As upstream's matcher: `pods/*` splits into `pods` and `*`, which also matches the
        // resource itself (no subresource).
        assert!(rule_matches(&subs, &req("UPDATE", "pods", "", true)));
        assert!(!rule_matches(
            &subs,
            &req("UPDATE", "services", "status", true)
        ));
        let scale = rule(&["*"], &["*/scale"], "*");
        assert!(rule_matches(
            &scale,
            &req("UPDATE", "deployments", "scale", true)
        ));
        let all = rule(&["*"], &["*/*"], "*");
        assert!(rule_matches(&all, &req("UPDATE", "pods", "", true)));
        assert!(rule_matches(&all, &req("UPDATE", "pods", "exec", true)));
        let cluster = rule(&["*"], &["*"], "Cluster");
        assert!(!rule_matches(
            &cluster,
            &req("CREATE", "configmaps", "", true)
        ));
        assert!(rule_matches(
            &cluster,
            &req("CREATE", "namespaces", "", false)
        ));
    }

    #[test]
    fn a_configuration_parses_into_callable_webhooks() {
        let cfg = json!({"metadata": {"name": "c"}, "webhooks": [{
            "name": "a.example.com", "failurePolicy": "Ignore", "matchPolicy": "Exact",
            "sideEffects": "None", "timeoutSeconds": 3, "reinvocationPolicy": "IfNeeded",
            "admissionReviewVersions": ["v2", "v1beta1", "v1"],
            "objectSelector": {"matchLabels": {"x": "y"}},
            "clientConfig": {"service": {"namespace": "ns", "name": "svc", "path": "/m", "port": 8443}, "caBundle": "LS0t"},
            "matchConditions": [{"name": "c", "expression": "object.metadata.name != 'skip'"}]
        }]});
        let hooks = parse(&cfg, Kind::Mutating);
        let h = &hooks[0];
        assert!(h.ignore_failure && !h.equivalent && h.reinvoke && h.dry_run_safe());
        assert_eq!(h.timeout, Duration::from_secs(3));
        assert_eq!(h.review_version, Some("v1beta1"));
        assert_eq!(
            h.target,
            Target::Service {
                namespace: "ns".into(),
                name: "svc".into(),
                path: "/m".into(),
                port: 8443
            }
        );
        assert_eq!(h.ca_bundle.as_deref(), Some(&b"---"[..]));
        assert!(h.match_conditions[0].1.is_ok());
        assert!(!h.object_selector.matches_json(Some(&json!({"x": "z"}))));
        assert!(!parse(&cfg, Kind::Validating)[0].reinvoke);
    }
}
