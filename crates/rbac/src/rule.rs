//! `PolicyRule`: the unit of RBAC permission, parsed from `rbac.authorization.k8s.io/v1` JSON.
//!
//! A rule grants its verbs either on resources (`apiGroups` × `resources` × optional
//! `resourceNames`) or on non-resource URLs. This module holds the rule type, its JSON form and
//! the per-field matching upstream uses when evaluating a request
//! (`pkg/apis/rbac/v1/evaluation_helpers.go`), plus the compact text form escalation errors print.

use serde::Serialize;
use serde_json::Value;

use crate::matching::{Field, rule_allows};
use crate::request::Attributes;
use apimachinery::gofmt::{quote, quote_list};

/// One `rules[]` entry of a Role or ClusterRole.
///
/// Absent and empty lists are the same thing (upstream compares rules with semantic equality,
/// for which nil and empty slices are equal), so every field is a plain `Vec`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyRule {
    pub verbs: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub api_groups: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub resource_names: Vec<String>,
    #[serde(rename = "nonResourceURLs", skip_serializing_if = "Vec::is_empty")]
    pub non_resource_urls: Vec<String>,
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

impl PolicyRule {
    /// Reads one rule object; missing or malformed fields read as empty (a rule that grants
    /// nothing), so a bad object can never widen access.
    pub fn from_json(v: &Value) -> PolicyRule {
        PolicyRule {
            verbs: strings(v.get("verbs")),
            api_groups: strings(v.get("apiGroups")),
            resources: strings(v.get("resources")),
            resource_names: strings(v.get("resourceNames")),
            non_resource_urls: strings(v.get("nonResourceURLs")),
        }
    }

    /// The `rules` of a Role or ClusterRole object (empty when absent or null).
    pub fn list_from_object(object: &Value) -> Vec<PolicyRule> {
        Self::list_from_json(object.get("rules"))
    }

    /// A JSON array of rules; anything else reads as no rules.
    pub fn list_from_json(rules: Option<&Value>) -> Vec<PolicyRule> {
        rules
            .and_then(Value::as_array)
            .map(|a| a.iter().map(PolicyRule::from_json).collect())
            .unwrap_or_default()
    }

    /// The v1 JSON form: `verbs` always, the other lists only when non-empty.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// Whether this rule allows the request (upstream `RuleAllows`).
    pub fn allows(&self, attrs: &Attributes) -> bool {
        rule_allows(attrs, |f| self.field(f).iter().map(String::as_str))
    }

    /// One list of the rule by name.
    pub(crate) fn field(&self, f: Field) -> &Vec<String> {
        match f {
            Field::Verbs => &self.verbs,
            Field::ApiGroups => &self.api_groups,
            Field::Resources => &self.resources,
            Field::ResourceNames => &self.resource_names,
            Field::NonResourceUrls => &self.non_resource_urls,
        }
    }

    /// Upstream `CompactString`: the non-empty fields in a fixed order, lists printed like Go's
    /// `%q` (`{APIGroups:[""], Resources:["secrets"], Verbs:["get" "list"]}`).
    pub fn compact_string(&self) -> String {
        let mut parts = Vec::new();
        let fields: [(&str, &Vec<String>); 5] = [
            ("APIGroups", &self.api_groups),
            ("Resources", &self.resources),
            ("NonResourceURLs", &self.non_resource_urls),
            ("ResourceNames", &self.resource_names),
            ("Verbs", &self.verbs),
        ];
        for (label, list) in fields {
            if !list.is_empty() {
                parts.push(format!("{label}:{}", quote_list(list)));
            }
        }
        format!("{{{}}}", parts.join(", "))
    }

    /// Upstream `String`: `PolicyRule{...}`.
    pub fn describe(&self) -> String {
        format!("PolicyRule{}", self.compact_string())
    }
}

/// A fluent builder for rules written in tables (the bootstrap policy, tests), after upstream's
/// `NewRule(verbs...).Groups(...).Resources(...)`. [`RuleBuilder::build`] sorts every list, as
/// upstream's builder does, so tables may list values in any order.
#[derive(Debug, Clone, Default)]
pub struct RuleBuilder {
    rule: PolicyRule,
}

/// Starts a rule granting `verbs`.
pub fn rule(verbs: &[&str]) -> RuleBuilder {
    RuleBuilder {
        rule: PolicyRule {
            verbs: own(verbs),
            ..PolicyRule::default()
        },
    }
}

fn own(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

impl RuleBuilder {
    pub fn groups(mut self, groups: &[&str]) -> Self {
        self.rule.api_groups.extend(own(groups));
        self
    }

    pub fn resources(mut self, resources: &[&str]) -> Self {
        self.rule.resources.extend(own(resources));
        self
    }

    pub fn names(mut self, names: &[&str]) -> Self {
        self.rule.resource_names.extend(own(names));
        self
    }

    pub fn urls(mut self, urls: &[&str]) -> Self {
        self.rule.non_resource_urls.extend(own(urls));
        self
    }

    /// The rule with every list sorted.
    pub fn build(mut self) -> PolicyRule {
        let r = &mut self.rule;
        for list in [
            &mut r.verbs,
            &mut r.api_groups,
            &mut r.resources,
            &mut r.resource_names,
            &mut r.non_resource_urls,
        ] {
            list.sort();
        }
        self.rule
    }
}

/// Go's `%q` of one string, for messages that print names the way upstream does.
pub fn go_quote(s: &str) -> String {
    quote(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn rules_read_from_json_ignore_malformed_entries() {
        let r = PolicyRule::from_json(&json!({
            "verbs": ["get", 3, "list"], "apiGroups": [""], "resources": "pods",
        }));
        assert_eq!(r.verbs, ["get", "list"]);
        assert_eq!(r.api_groups, [""]);
        assert!(r.resources.is_empty());
    }

    #[test]
    fn rule_json_omits_empty_lists_but_keeps_verbs() {
        let r = rule(&["get"]).urls(&["/healthz"]).build();
        assert_eq!(
            r.to_json(),
            json!({"verbs": ["get"], "nonResourceURLs": ["/healthz"]})
        );
        assert_eq!(PolicyRule::default().to_json(), json!({"verbs": []}));
    }

    #[test]
    fn star_subresource_matches_only_that_subresource() {
        let r = rule(&["get"])
            .groups(&["*"])
            .resources(&["*/scale"])
            .build();
        let get = |res: &str, sub: &str| {
            Attributes::resource("get", "apps", res, "ns")
                .named("x")
                .subresource(sub)
        };
        assert!(r.allows(&get("deployments", "scale")));
        assert!(!r.allows(&get("deployments", "status")));
        assert!(!r.allows(&get("deployments", "")));
        assert!(!r.allows(&get("scale", "")));
    }

    #[test]
    fn compact_string_prints_lists_like_go() {
        let r = rule(&["list", "get"])
            .groups(&[""])
            .resources(&["secrets"])
            .names(&["a\"b"])
            .build();
        assert_eq!(
            r.compact_string(),
            r#"{APIGroups:[""], Resources:["secrets"], ResourceNames:["a\"b"], Verbs:["get" "list"]}"#
        );
        assert_eq!(
            rule(&["get"]).urls(&["/x"]).build().describe(),
            r#"PolicyRule{NonResourceURLs:["/x"], Verbs:["get"]}"#
        );
    }
}
