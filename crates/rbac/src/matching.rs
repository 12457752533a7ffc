//! Whether one rule allows one request (upstream `RuleAllows` and the `*Matches` helpers).
//!
//! The same logic runs over two representations: a parsed [`crate::PolicyRule`], and a rule
//! still in its JSON object. The authorizer uses the JSON form so that checking a request against
//! the cached Roles allocates nothing; both go through [`rule_allows`], so they cannot disagree.

use serde_json::Value;

use crate::request::Attributes;

/// The five lists of a rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Field {
    Verbs,
    ApiGroups,
    Resources,
    ResourceNames,
    NonResourceUrls,
}

impl Field {
    /// The v1 JSON key.
    pub(crate) fn key(self) -> &'static str {
        match self {
            Field::Verbs => "verbs",
            Field::ApiGroups => "apiGroups",
            Field::Resources => "resources",
            Field::ResourceNames => "resourceNames",
            Field::NonResourceUrls => "nonResourceURLs",
        }
    }
}

/// The strings of one list of a JSON rule; missing or non-string entries are skipped.
pub(crate) fn json_strs(rule: &Value, f: Field) -> impl Iterator<Item = &str> {
    rule.get(f.key())
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
}

/// Whether a rule, given as a way to list each of its fields, allows `attrs`.
///
/// Resource requests need a verb, the API group, the resource (`res`, `res/sub`, `*` or `*/sub`)
/// and — when the rule names objects — the object's name. Non-resource requests need the verb
/// and the path.
pub(crate) fn rule_allows<'a, I>(attrs: &Attributes, list: impl Fn(Field) -> I) -> bool
where
    I: Iterator<Item = &'a str>,
{
    if !list(Field::Verbs).any(|v| v == "*" || v == attrs.verb) {
        return false;
    }
    if !attrs.resource_request {
        return list(Field::NonResourceUrls).any(|u| url_covers(u, &attrs.path));
    }
    list(Field::ApiGroups).any(|g| g == "*" || g == attrs.api_group)
        && list(Field::Resources).any(|r| resource_covers(r, &attrs.resource, &attrs.subresource))
        && {
            let mut names = list(Field::ResourceNames).peekable();
            names.peek().is_none() || names.any(|n| n == attrs.name)
        }
}

/// Whether a JSON rule object allows `attrs`.
pub(crate) fn json_rule_allows(attrs: &Attributes, rule: &Value) -> bool {
    rule_allows(attrs, |f| json_strs(rule, f))
}

/// A `resources` entry against a request's resource and subresource.
fn resource_covers(entry: &str, resource: &str, subresource: &str) -> bool {
    if entry == "*" {
        return true;
    }
    if subresource.is_empty() {
        return entry == resource;
    }
    entry.strip_prefix("*/") == Some(subresource)
        || entry
            .strip_prefix(resource)
            .and_then(|rest| rest.strip_prefix('/'))
            == Some(subresource)
}

/// Whether a `nonResourceURLs` entry covers a path: `*`, equal, or a `*`-suffixed prefix.
pub(crate) fn url_covers(owner: &str, path: &str) -> bool {
    owner == path || (owner.ends_with('*') && path.starts_with(owner.trim_end_matches('*')))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn non_resource_urls_match_exactly_or_by_star_prefix() {
        assert!(url_covers("*", "/anything"));
        assert!(url_covers("/healthz", "/healthz"));
        assert!(!url_covers("/healthz", "/healthz/etcd"));
        assert!(url_covers("/apis/*", "/apis/apps/v1"));
        assert!(url_covers("/apis/*", "/apis/"));
        assert!(!url_covers("/apis/*", "/apis"));
    }

    #[test]
    fn combined_resources_need_the_whole_string() {
        assert!(resource_covers("pods/log", "pods", "log"));
        assert!(!resource_covers("pods", "pods", "log"));
        assert!(!resource_covers("pods/log", "pods", ""));
        assert!(!resource_covers("podsx/log", "pods", "log"));
        assert!(resource_covers("*/log", "pods", "log"));
    }

    #[test]
    fn json_rules_match_like_parsed_rules() {
        let rule = json!({"verbs": ["get"], "apiGroups": [""], "resources": ["pods"],
                          "resourceNames": ["p1"]});
        let get = |name: &str| Attributes::resource("get", "", "pods", "ns").named(name);
        assert!(json_rule_allows(&get("p1"), &rule));
        assert!(!json_rule_allows(&get("p2"), &rule));
        assert!(!json_rule_allows(&get(""), &rule));
        let parsed = crate::PolicyRule::from_json(&rule);
        for name in ["p1", "p2", ""] {
            assert_eq!(
                parsed.allows(&get(name)),
                json_rule_allows(&get(name), &rule)
            );
        }
    }

    #[test]
    fn non_resource_requests_ignore_resource_fields() {
        let rule = json!({"verbs": ["get"], "apiGroups": ["*"], "resources": ["*"]});
        assert!(!json_rule_allows(
            &Attributes::non_resource("get", "/healthz"),
            &rule
        ));
        let urls = json!({"verbs": ["*"], "nonResourceURLs": ["*"]});
        assert!(json_rule_allows(
            &Attributes::non_resource("post", "/x"),
            &urls
        ));
        assert!(!json_rule_allows(
            &Attributes::resource("get", "", "pods", ""),
            &urls
        ));
    }
}
