//! ClusterRole aggregation: the rules of a role with `aggregationRule` are the union of the
//! rules of the ClusterRoles its selectors match.
//!
//! This is upstream's clusterrole-aggregation controller reduced to its pure step: for each
//! selector in order, the matching ClusterRoles sorted by name (the role itself excluded)
//! contribute their rules in order, each rule kept once. The result replaces `rules` when it
//! differs. `admin`, `edit` and `view` are built this way from the `system:aggregate-to-*` roles
//! and from any role a user labels `rbac.authorization.k8s.io/aggregate-to-<name>: "true"`.

use apimachinery::field::Path;
use apimachinery::labels::label_selector_from_json;
use serde_json::Value;

use crate::rule::PolicyRule;

fn name(role: &Value) -> &str {
    role.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// The aggregated rules of `role` given every ClusterRole of the cluster, or `None` when the
/// role has no `aggregationRule` or its rules are already the aggregate.
///
/// An `aggregationRule` with no selectors aggregates nothing, so it empties `rules`. A selector
/// that does not parse leaves the role unchanged (upstream's controller errors and retries).
pub fn aggregate<'a>(
    role: &Value,
    all_cluster_roles: impl IntoIterator<Item = &'a Value>,
) -> Option<Vec<Value>> {
    let rule = role.get("aggregationRule").filter(|r| !r.is_null())?;
    let selectors: Vec<_> = rule
        .get("clusterRoleSelectors")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let path = Path::new("aggregationRule")
                .child("clusterRoleSelectors")
                .index(i);
            label_selector_from_json(s, &path).ok()
        })
        .collect::<Option<_>>()?;
    let mut candidates: Vec<&Value> = all_cluster_roles
        .into_iter()
        .filter(|r| name(r) != name(role))
        .collect();
    candidates.sort_by(|a, b| name(a).cmp(name(b)));

    let mut rules: Vec<PolicyRule> = Vec::new();
    for selector in &selectors {
        for other in candidates.iter().filter(|r| selector.matches_object(r)) {
            for r in PolicyRule::list_from_object(other) {
                if !rules.contains(&r) {
                    rules.push(r);
                }
            }
        }
    }
    if rules == PolicyRule::list_from_object(role) {
        return None;
    }
    Some(rules.iter().map(PolicyRule::to_json).collect())
}

/// Aggregates every role of `roles` that has an `aggregationRule`, in place, until nothing
/// changes (so roles aggregated from aggregated roles settle). Returns how many updates were
/// made. Stops after as many passes as there are roles, which is enough for any acyclic chain.
pub fn aggregate_all(roles: &mut [Value]) -> usize {
    let mut updates = 0;
    for _ in 0..roles.len().max(1) {
        let mut changed = false;
        for i in 0..roles.len() {
            if let Some(rules) = aggregate(&roles[i], roles.iter()) {
                roles[i]["rules"] = Value::Array(rules);
                changed = true;
                updates += 1;
            }
        }
        if !changed {
            break;
        }
    }
    updates
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn role(name: &str, labels: Value, rules: Value) -> Value {
        json!({"kind": "ClusterRole", "metadata": {"name": name, "labels": labels}, "rules": rules})
    }

    #[test]
    fn matching_roles_contribute_in_name_order_without_repeats() {
        let agg = json!({"kind": "ClusterRole", "metadata": {"name": "agg"},
            "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"x": "true"}}]}});
        let b = role(
            "b",
            json!({"x": "true"}),
            json!([
                {"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]},
                {"verbs": ["list"], "apiGroups": [""], "resources": ["pods"]},
            ]),
        );
        let a = role(
            "a",
            json!({"x": "true"}),
            json!([
                {"verbs": ["list"], "apiGroups": [""], "resources": ["pods"]},
            ]),
        );
        let other = role(
            "c",
            json!({}),
            json!([{"verbs": ["*"], "nonResourceURLs": ["*"]}]),
        );
        let got = aggregate(&agg, [&b, &a, &other, &agg]).expect("changes");
        assert_eq!(
            got,
            vec![
                json!({"verbs": ["list"], "apiGroups": [""], "resources": ["pods"]}),
                json!({"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}),
            ]
        );
        let mut updated = agg.clone();
        updated["rules"] = Value::Array(got);
        assert_eq!(aggregate(&updated, [&b, &a, &other]), None);
    }

    #[test]
    fn roles_without_an_aggregation_rule_are_left_alone() {
        let plain = role("p", json!({}), json!([]));
        assert_eq!(aggregate(&plain, [&plain]), None);
        let null_rule = json!({"metadata": {"name": "n"}, "aggregationRule": null, "rules": [{"verbs": ["get"]}]});
        assert_eq!(aggregate(&null_rule, []), None);
    }

    #[test]
    fn an_empty_aggregation_rule_clears_the_rules() {
        let r = json!({"metadata": {"name": "e"}, "aggregationRule": {},
                       "rules": [{"verbs": ["get"], "nonResourceURLs": ["/x"]}]});
        assert_eq!(aggregate(&r, []), Some(vec![]));
    }

    #[test]
    fn an_invalid_selector_leaves_the_role_unchanged() {
        let r = json!({"metadata": {"name": "bad"}, "aggregationRule": {"clusterRoleSelectors": [
            {"matchExpressions": [{"key": "k", "operator": "Sideways"}]}]}});
        let m = role(
            "m",
            json!({"k": "v"}),
            json!([{"verbs": ["get"], "nonResourceURLs": ["/x"]}]),
        );
        assert_eq!(aggregate(&r, [&m]), None);
    }

    #[test]
    fn chained_aggregations_settle() {
        let mut roles = vec![
            json!({"metadata": {"name": "top"}, "aggregationRule": {"clusterRoleSelectors": [
                {"matchLabels": {"to-top": "true"}}]}}),
            json!({"metadata": {"name": "mid", "labels": {"to-top": "true"}},
                   "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"to-mid": "true"}}]}}),
            role(
                "leaf",
                json!({"to-mid": "true"}),
                json!([{"verbs": ["get"], "nonResourceURLs": ["/l"]}]),
            ),
        ];
        assert!(aggregate_all(&mut roles) >= 2);
        assert_eq!(
            roles[0]["rules"],
            json!([{"verbs": ["get"], "nonResourceURLs": ["/l"]}])
        );
        assert_eq!(aggregate_all(&mut roles), 0);
    }
}
