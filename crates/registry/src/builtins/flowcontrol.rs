//! FlowSchemas and PriorityLevelConfigurations (flowcontrol.apiserver.k8s.io/v1): upstream's
//! defaults (matching precedence 1000; 30 nominal shares, 64 queues, hand size 8, 50 per
//! queue) and validation (`pkg/apis/flowcontrol/validation`), including the fixed specs of the
//! mandatory `exempt` and `catch-all` objects every cluster is seeded with.
//!
//! The objects are served as kube-apiserver serves them; this server's own fair queuing
//! (`apiserver::flow`: per logical cluster, then per user) is configured by its flags, not by
//! them.

use apimachinery::field::{ErrorList, FieldError, Path};
use apimachinery::validation::{is_dns1123_label, is_dns1123_subdomain};
use serde_json::{Value, json};

use super::util::{arr_at, at, child, default_value, i64_at, str_at};
use crate::strategy::Strategy;

const MAX_MATCHING_PRECEDENCE: i64 = 10_000;
const MAX_QUEUES: i64 = 10_000_000;
const MAX_HASH_BITS: i64 = 60;
const NS_INTRO: &str = "each member of this list must be '*' or a DNS-1123 label; ";

/// The mandatory FlowSchemas and PriorityLevelConfigurations (upstream `internalbootstrap`).
pub fn mandatory_flow_schemas() -> Vec<Value> {
    let every_request = |subjects: Value| {
        json!([{
            "subjects": subjects,
            "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "clusterScope": true, "namespaces": ["*"]}],
            "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
        }])
    };
    let group = |name: &str| json!({"kind": "Group", "group": {"name": name}});
    vec![
        flow_schema(
            "exempt",
            json!({
                "matchingPrecedence": 1,
                "priorityLevelConfiguration": {"name": "exempt"},
                "rules": every_request(json!([group("system:masters")])),
            }),
        ),
        flow_schema(
            "catch-all",
            json!({
                "matchingPrecedence": 10000,
                "priorityLevelConfiguration": {"name": "catch-all"},
                "distinguisherMethod": {"type": "ByUser"},
                "rules": every_request(json!([group("system:unauthenticated"), group("system:authenticated")])),
            }),
        ),
    ]
}

/// See [`mandatory_flow_schemas`].
pub fn mandatory_priority_levels() -> Vec<Value> {
    vec![
        priority_level(
            "exempt",
            json!({"type": "Exempt", "exempt": {"nominalConcurrencyShares": 0, "lendablePercent": 0}}),
        ),
        priority_level(
            "catch-all",
            json!({"type": "Limited", "limited": {"nominalConcurrencyShares": 5, "lendablePercent": 0,
                "limitResponse": {"type": "Reject"}}}),
        ),
    ]
}

fn flow_schema(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema",
        "metadata": {"name": name, "annotations": {"apf.kubernetes.io/autoupdate-spec": "true"}},
        "spec": spec})
}

fn priority_level(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration",
        "metadata": {"name": name, "annotations": {"apf.kubernetes.io/autoupdate-spec": "true"}},
        "spec": spec})
}

/// FlowSchemas.
pub struct FlowSchemaStrategy;

/// PriorityLevelConfigurations.
pub struct PriorityLevelConfigurationStrategy;

fn strings(v: &Value, ptr: &str) -> Vec<String> {
    arr_at(v, ptr)
        .iter()
        .map(|s| s.as_str().unwrap_or_default().to_string())
        .collect()
}

/// A list that must not be empty and may hold `*` only alone.
fn wildcard_list(
    errs: &mut ErrorList,
    rule: &Value,
    key: &str,
    p: &Path,
    required: &str,
    what: &str,
) -> Vec<String> {
    let list = strings(rule, &format!("/{key}"));
    if list.is_empty() {
        errs.push(FieldError::required(p.child(key), required));
    } else if list.len() > 1 && list.iter().any(|v| v == "*") {
        errs.push(FieldError::invalid(
            p.child(key),
            json!(list),
            format!("if '*' is present, must not specify other {what}"),
        ));
    }
    list
}

fn verbs(errs: &mut ErrorList, rule: &Value, p: &Path) {
    let list = wildcard_list(
        errs,
        rule,
        "verbs",
        p,
        "verbs must contain at least one value",
        "verbs",
    );
    // Upstream's supported verbs: `*` and every verb of an ordinary resource.
    let all = apimachinery::builtin::ALL;
    if !list.iter().any(|v| v == "*") && list.iter().any(|v| !all.contains(&v.as_str())) {
        let supported: Vec<&str> = std::iter::once("*").chain(all.iter().copied()).collect();
        errs.push(FieldError::not_supported(
            p.child("verbs"),
            json!(list),
            &supported,
        ));
    }
}

/// Upstream `ValidateNonResourceURLPath`.
fn non_resource_url(errs: &mut ErrorList, url: &str, p: Path) {
    let msg = if url.is_empty() {
        Some("must not be empty")
    } else if url == "/" {
        None
    } else if !url.starts_with('/') {
        Some("must start with slash")
    } else if url.contains(' ') {
        Some("must not contain white-space")
    } else if url.contains("//") {
        Some("must not contain double slash")
    } else {
        let stars = url.matches('*').count();
        (stars > 1 || (stars == 1 && !url.ends_with('*')))
            .then_some("wildcard can only do suffix glob matching")
    };
    if let Some(m) = msg {
        errs.push(FieldError::invalid(p, json!(url), m));
    }
}

fn subject(errs: &mut ErrorList, s: &Value, p: &Path) {
    let kind = str_at(s, "/kind");
    let present = |k: &str| at(s, &format!("/{k}")).is_some_and(|v| !v.is_null());
    let forbid = |errs: &mut ErrorList, k: &str, as_kind: &str| {
        if present(k) {
            errs.push(FieldError::forbidden(
                p.child(k),
                format!("{k} is forbidden when subject kind is not '{as_kind}'"),
            ));
        }
    };
    match kind {
        "ServiceAccount" => {
            let sp = p.child("serviceAccount");
            if !present("serviceAccount") {
                errs.push(FieldError::required(
                    sp,
                    "serviceAccount is required when subject kind is 'ServiceAccount'",
                ));
            } else {
                let name = str_at(s, "/serviceAccount/name");
                if name.is_empty() {
                    errs.push(FieldError::required(sp.child("name"), ""));
                } else if name != "*" {
                    for m in is_dns1123_subdomain(name) {
                        errs.push(FieldError::invalid(sp.child("name"), json!(name), m));
                    }
                }
                let ns = str_at(s, "/serviceAccount/namespace");
                if ns.is_empty() {
                    errs.push(FieldError::required(
                        sp.child("namespace"),
                        "must specify namespace for service account",
                    ));
                } else {
                    for m in is_dns1123_label(ns) {
                        errs.push(FieldError::invalid(sp.child("namespace"), json!(ns), m));
                    }
                }
            }
            forbid(errs, "user", "User");
            forbid(errs, "group", "Group");
        }
        "User" | "Group" => {
            let (k, other) = if kind == "User" {
                ("user", ("group", "Group"))
            } else {
                ("group", ("user", "User"))
            };
            if !present(k) {
                errs.push(FieldError::required(
                    p.child(k),
                    format!("{k} is required when subject kind is '{kind}'"),
                ));
            } else if str_at(s, &format!("/{k}/name")).is_empty() {
                errs.push(FieldError::required(p.child(k).child("name"), ""));
            }
            forbid(errs, "serviceAccount", "ServiceAccount");
            forbid(errs, other.0, other.1);
        }
        _ => errs.push(FieldError::not_supported(
            p.child("kind"),
            json!(kind),
            &["Group", "ServiceAccount", "User"],
        )),
    }
}

fn rule(errs: &mut ErrorList, r: &Value, p: &Path) {
    let subjects = arr_at(r, "/subjects");
    if subjects.is_empty() {
        errs.push(FieldError::required(
            p.child("subjects"),
            "subjects must contain at least one value",
        ));
    }
    for (i, s) in subjects.iter().enumerate() {
        subject(errs, s, &p.child("subjects").index(i));
    }
    let (resource, non_resource) = (arr_at(r, "/resourceRules"), arr_at(r, "/nonResourceRules"));
    if resource.is_empty() && non_resource.is_empty() {
        errs.push(FieldError::required(
            p.clone(),
            "at least one of resourceRules and nonResourceRules has to be non-empty",
        ));
    }
    for (i, rr) in resource.iter().enumerate() {
        let rp = p.child("resourceRules").index(i);
        verbs(errs, rr, &rp);
        wildcard_list(
            errs,
            rr,
            "apiGroups",
            &rp,
            "resource rules must supply at least one api group",
            "api groups",
        );
        wildcard_list(
            errs,
            rr,
            "resources",
            &rp,
            "resource rules must supply at least one resource",
            "resources",
        );
        let namespaces = strings(rr, "/namespaces");
        let cluster_scope = at(rr, "/clusterScope").and_then(Value::as_bool) == Some(true);
        if namespaces.is_empty() && !cluster_scope {
            errs.push(FieldError::required(
                rp.child("namespaces"),
                "resource rules that are not cluster scoped must supply at least one namespace",
            ));
        } else if namespaces.iter().any(|n| n == "*") {
            if namespaces.len() > 1 {
                errs.push(FieldError::invalid(
                    rp.child("namespaces"),
                    json!(namespaces),
                    "if '*' is present, must not specify other namespaces",
                ));
            }
        } else {
            for (j, ns) in namespaces.iter().enumerate() {
                for m in is_dns1123_label(ns) {
                    errs.push(FieldError::invalid(
                        rp.child("namespaces").index(j),
                        json!(ns),
                        format!("{NS_INTRO}{m}"),
                    ));
                }
            }
        }
    }
    for (i, nr) in non_resource.iter().enumerate() {
        let np = p.child("nonResourceRules").index(i);
        verbs(errs, nr, &np);
        let urls = wildcard_list(
            errs,
            nr,
            "nonResourceURLs",
            &np,
            "nonResourceURLs must contain at least one value",
            "non-resource URLs",
        );
        if !urls.iter().any(|u| u == "*") {
            for (j, u) in urls.iter().enumerate() {
                non_resource_url(errs, u, np.child("nonResourceURLs").index(j));
            }
        }
    }
}

fn conditions(errs: &mut ErrorList, obj: &Value) {
    let mut seen = Vec::new();
    for (i, c) in arr_at(obj, "/status/conditions").iter().enumerate() {
        let p = Path::new("status")
            .child("conditions")
            .index(i)
            .child("type");
        let ty = str_at(c, "/type");
        if ty.is_empty() {
            errs.push(FieldError::required(p, "must not be empty"));
        } else if seen.contains(&ty) {
            errs.push(FieldError::duplicate(p, json!(ty)));
        } else {
            seen.push(ty);
        }
    }
}

impl Strategy for FlowSchemaStrategy {
    fn default(&self, obj: &mut Value) {
        if let Some(spec) = child(obj, "spec")
            && spec
                .get("matchingPrecedence")
                .is_none_or(|v| v == 0 || v.is_null())
        {
            spec["matchingPrecedence"] = json!(1000);
        }
    }

    fn validate(&self, obj: &Value) -> ErrorList {
        let mut errs = ErrorList::new();
        let p = Path::new("spec");
        let name = apimachinery::meta::name(obj);
        let mp = i64_at(obj, "/spec/matchingPrecedence").unwrap_or(0);
        if mp <= 0 {
            errs.push(FieldError::invalid(
                p.child("matchingPrecedence"),
                json!(mp),
                "must be a positive value",
            ));
        }
        if mp > MAX_MATCHING_PRECEDENCE {
            errs.push(FieldError::invalid(
                p.child("matchingPrecedence"),
                json!(mp),
                format!("must not be greater than {MAX_MATCHING_PRECEDENCE}"),
            ));
        }
        if mp == 1 && name != "exempt" {
            errs.push(FieldError::invalid(
                p.child("matchingPrecedence"),
                json!(mp),
                "only the schema named 'exempt' may have matchingPrecedence 1",
            ));
        }
        if let Some(d) = at(obj, "/spec/distinguisherMethod").filter(|d| !d.is_null()) {
            let ty = str_at(d, "/type");
            if ty != "ByUser" && ty != "ByNamespace" {
                errs.push(FieldError::not_supported(
                    p.child("distinguisherMethod").child("type"),
                    json!(ty),
                    &["ByNamespace", "ByUser"],
                ));
            }
        }
        let pl = str_at(obj, "/spec/priorityLevelConfiguration/name");
        let plp = p.child("priorityLevelConfiguration").child("name");
        if pl.is_empty() {
            errs.push(FieldError::required(plp, "must reference a priority level"));
        } else {
            for m in is_dns1123_subdomain(pl) {
                errs.push(FieldError::invalid(plp.clone(), json!(pl), m));
            }
        }
        for (i, r) in arr_at(obj, "/spec/rules").iter().enumerate() {
            rule(&mut errs, r, &p.child("rules").index(i));
        }
        if let Some(fixed) = mandatory_flow_schemas()
            .into_iter()
            .find(|m| apimachinery::meta::name(m) == name)
        {
            let mut want = fixed["spec"].clone();
            let mut with_defaults = json!({"spec": want});
            self.default(&mut with_defaults);
            want = with_defaults["spec"].take();
            if obj.get("spec") != Some(&want) {
                errs.push(FieldError::invalid(
                    p,
                    obj.get("spec").cloned().unwrap_or(Value::Null),
                    format!("spec of '{name}' must equal the fixed value"),
                ));
            }
        }
        conditions(&mut errs, obj);
        errs
    }
}

impl Strategy for PriorityLevelConfigurationStrategy {
    fn default(&self, obj: &mut Value) {
        let Some(spec) = child(obj, "spec") else {
            return;
        };
        if let Some(e) = spec.get_mut("exempt").filter(|e| e.is_object()) {
            default_value(e, "nominalConcurrencyShares", json!(0));
            default_value(e, "lendablePercent", json!(0));
        }
        if let Some(l) = spec.get_mut("limited").filter(|l| l.is_object()) {
            default_value(l, "nominalConcurrencyShares", json!(30));
            default_value(l, "lendablePercent", json!(0));
            if let Some(q) = l
                .pointer_mut("/limitResponse/queuing")
                .filter(|q| q.is_object())
            {
                for (k, v) in [("queues", 64), ("handSize", 8), ("queueLengthLimit", 50)] {
                    if q.get(k).is_none_or(|x| x == 0 || x.is_null()) {
                        q[k] = json!(v);
                    }
                }
            }
        }
    }

    fn validate(&self, obj: &Value) -> ErrorList {
        let mut errs = ErrorList::new();
        let p = Path::new("spec");
        let name = apimachinery::meta::name(obj);
        let ty = str_at(obj, "/spec/type");
        if (name == "exempt") != (ty == "Exempt") {
            errs.push(FieldError::invalid(
                p.child("type"),
                json!(ty),
                "type must be 'Exempt' if and only if name is 'exempt'",
            ));
        }
        let present = |k: &str| at(obj, &format!("/spec/{k}")).is_some_and(|v| !v.is_null());
        match ty {
            "Exempt" => {
                if present("limited") {
                    errs.push(FieldError::forbidden(
                        p.child("limited"),
                        "must be nil if the type is not Limited",
                    ));
                }
                let ep = p.child("exempt");
                shares_and_percent(&mut errs, obj, "/spec/exempt", &ep);
            }
            "Limited" => {
                if present("exempt") {
                    errs.push(FieldError::forbidden(
                        p.child("exempt"),
                        "must be nil if the type is Limited",
                    ));
                }
                if !present("limited") {
                    errs.push(FieldError::required(
                        p.child("limited"),
                        "must not be empty when type is Limited",
                    ));
                } else {
                    limited(&mut errs, obj, &p.child("limited"));
                }
            }
            _ => errs.push(FieldError::not_supported(
                p.child("type"),
                json!(ty),
                &["Exempt", "Limited"],
            )),
        }
        conditions(&mut errs, obj);
        errs
    }
}

fn shares_and_percent(errs: &mut ErrorList, obj: &Value, at_ptr: &str, p: &Path) {
    let shares = i64_at(obj, &format!("{at_ptr}/nominalConcurrencyShares")).unwrap_or(0);
    if shares < 0 {
        errs.push(FieldError::invalid(
            p.child("nominalConcurrencyShares"),
            json!(shares),
            "must be a non-negative integer",
        ));
    }
    if let Some(l) = i64_at(obj, &format!("{at_ptr}/lendablePercent"))
        && !(0..=100).contains(&l)
    {
        errs.push(FieldError::invalid(
            p.child("lendablePercent"),
            json!(l),
            "must be between 0 and 100, inclusive",
        ));
    }
}

fn limited(errs: &mut ErrorList, obj: &Value, p: &Path) {
    shares_and_percent(errs, obj, "/spec/limited", p);
    if let Some(b) = i64_at(obj, "/spec/limited/borrowingLimitPercent")
        && b < 0
    {
        errs.push(FieldError::invalid(
            p.child("borrowingLimitPercent"),
            json!(b),
            "if specified, must be a non-negative integer",
        ));
    }
    let lp = p.child("limitResponse");
    let queuing = at(obj, "/spec/limited/limitResponse/queuing").filter(|q| !q.is_null());
    match str_at(obj, "/spec/limited/limitResponse/type") {
        "Reject" => {
            if queuing.is_some() {
                errs.push(FieldError::forbidden(
                    lp.child("queuing"),
                    "must be nil if limited.limitResponse.type is not Limited",
                ));
            }
        }
        "Queue" => match queuing {
            None => errs.push(FieldError::required(
                lp.child("queuing"),
                "must not be empty if limited.limitResponse.type is Limited",
            )),
            Some(q) => queuing_config(errs, q, &lp.child("queuing")),
        },
        other => errs.push(FieldError::not_supported(
            lp.child("type"),
            json!(other),
            &["Queue", "Reject"],
        )),
    }
}

fn queuing_config(errs: &mut ErrorList, q: &Value, p: &Path) {
    let get = |k: &str| i64_at(q, &format!("/{k}")).unwrap_or(0);
    let (limit, queues, hand) = (get("queueLengthLimit"), get("queues"), get("handSize"));
    if limit <= 0 {
        errs.push(FieldError::invalid(
            p.child("queueLengthLimit"),
            json!(limit),
            "must be positive",
        ));
    }
    if queues <= 0 {
        errs.push(FieldError::invalid(
            p.child("queues"),
            json!(queues),
            "must be positive",
        ));
    } else if queues > MAX_QUEUES {
        errs.push(FieldError::invalid(
            p.child("queues"),
            json!(queues),
            format!("must not be greater than {MAX_QUEUES}"),
        ));
    }
    if hand <= 0 {
        errs.push(FieldError::invalid(
            p.child("handSize"),
            json!(hand),
            "must be positive",
        ));
    } else if hand > queues {
        errs.push(FieldError::invalid(
            p.child("handSize"),
            json!(hand),
            format!("should not be greater than queues ({queues})"),
        ));
    } else {
        // Upstream `shufflesharding.RequiredEntropyBits`.
        let entropy = (hand as f64 * (queues as f64).log2()).ceil() as i64;
        if entropy > MAX_HASH_BITS {
            errs.push(FieldError::invalid(
                p.child("handSize"),
                json!(hand),
                format!(
                    "required entropy bits of deckSize {queues} and handSize {hand} should not be greater than {MAX_HASH_BITS}"
                ),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(errs: &ErrorList) -> Vec<String> {
        errs.iter().map(|e| e.field.clone()).collect()
    }

    #[test]
    fn the_mandatory_objects_are_valid_and_fixed() {
        for mut fs in mandatory_flow_schemas() {
            FlowSchemaStrategy.default(&mut fs);
            assert!(FlowSchemaStrategy.validate(&fs).is_empty(), "{fs}");
            fs["spec"]["matchingPrecedence"] = json!(500);
            let errs = FlowSchemaStrategy.validate(&fs);
            assert!(
                errs.iter()
                    .any(|e| e.field == "spec" && e.detail.contains("must equal the fixed value")),
                "{errs:?}"
            );
        }
        for mut pl in mandatory_priority_levels() {
            PriorityLevelConfigurationStrategy.default(&mut pl);
            assert!(
                PriorityLevelConfigurationStrategy.validate(&pl).is_empty(),
                "{pl}"
            );
        }
    }

    #[test]
    fn a_flow_schema_reports_every_rule_it_breaks() {
        let mut fs = json!({"metadata": {"name": "mine"}, "spec": {
        "matchingPrecedence": 1,
        "distinguisherMethod": {"type": "ByColor"},
        "rules": [{
            "subjects": [{"kind": "ServiceAccount"}, {"kind": "Robot"}],
            "resourceRules": [{"verbs": ["*", "get"], "apiGroups": [], "resources": ["pods"], "namespaces": ["Bad_NS"]}],
            "nonResourceRules": [{"verbs": ["fly"], "nonResourceURLs": ["healthz", "/a/*/b"]}],
        }]}});
        FlowSchemaStrategy.default(&mut fs);
        assert_eq!(
            fields(&FlowSchemaStrategy.validate(&fs)),
            [
                "spec.matchingPrecedence",
                "spec.distinguisherMethod.type",
                "spec.priorityLevelConfiguration.name",
                "spec.rules[0].subjects[0].serviceAccount",
                "spec.rules[0].subjects[1].kind",
                "spec.rules[0].resourceRules[0].verbs",
                "spec.rules[0].resourceRules[0].apiGroups",
                "spec.rules[0].resourceRules[0].namespaces[0]",
                "spec.rules[0].nonResourceRules[0].verbs",
                "spec.rules[0].nonResourceRules[0].nonResourceURLs[0]",
                "spec.rules[0].nonResourceRules[0].nonResourceURLs[1]",
            ]
        );
        let mut ok = json!({"metadata": {"name": "mine"}, "spec": {"priorityLevelConfiguration": {"name": "workload-low"}}});
        FlowSchemaStrategy.default(&mut ok);
        assert_eq!(ok["spec"]["matchingPrecedence"], 1000);
        assert!(FlowSchemaStrategy.validate(&ok).is_empty());
    }

    #[test]
    fn a_priority_level_gets_upstream_defaults_and_queuing_limits() {
        let mut pl = json!({"metadata": {"name": "batch"}, "spec": {"type": "Limited",
            "limited": {"limitResponse": {"type": "Queue", "queuing": {}}}}});
        PriorityLevelConfigurationStrategy.default(&mut pl);
        assert_eq!(pl["spec"]["limited"]["nominalConcurrencyShares"], 30);
        assert_eq!(
            pl["spec"]["limited"]["limitResponse"]["queuing"],
            json!({"queues": 64, "handSize": 8, "queueLengthLimit": 50})
        );
        assert!(PriorityLevelConfigurationStrategy.validate(&pl).is_empty());
        pl["spec"]["limited"]["limitResponse"]["queuing"] =
            json!({"queues": 1000000, "handSize": 10, "queueLengthLimit": 0});
        pl["spec"]["limited"]["lendablePercent"] = json!(101);
        let errs = PriorityLevelConfigurationStrategy.validate(&pl);
        assert_eq!(
            fields(&errs),
            [
                "spec.limited.lendablePercent",
                "spec.limited.limitResponse.queuing.queueLengthLimit",
                "spec.limited.limitResponse.queuing.handSize"
            ]
        );
        assert!(errs.iter().last().unwrap().detail.contains("entropy bits"));
        let exempt_named_limited = json!({"metadata": {"name": "exempt"}, "spec": {"type": "Limited", "limited": {"limitResponse": {"type": "Reject"}}}});
        assert_eq!(
            fields(&PriorityLevelConfigurationStrategy.validate(&exempt_named_limited)),
            ["spec.type"]
        );
    }
}
