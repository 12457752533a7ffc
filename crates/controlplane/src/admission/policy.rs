//! ValidatingAdmissionPolicy (`admissionregistration.k8s.io/v1`, upstream's
//! `ValidatingAdmissionPolicy` admission plugin).
//!
//! Every ValidatingAdmissionPolicyBinding of the request's cluster names a policy; when the
//! policy's `matchConstraints` and the binding's `matchResources` (rules with
//! `resourceNames`, exclusions, namespace and object selectors, `matchPolicy`) both cover
//! the request and the policy's `matchConditions` hold, its `validations` are evaluated (CEL,
//! see [`super::cel`]) with `object`, `oldObject`, `request`, `params` (each parameter
//! object the binding's `paramRef` selects, or null), `namespaceObject` and the policy's
//! `variables`. A failing validation is acted on as the binding says: `Deny` refuses the
//! request (`<resource> "<name>" is forbidden: ValidatingAdmissionPolicy '<p>' with binding
//! '<b>' denied request: <message>`, with the validation's reason, `Invalid` by default),
//! `Warn` sends a warning, `Audit` records it. An expression that cannot be evaluated, a
//! missing parameter or a policy misconfigured for its binding is a failure the policy's
//! `failurePolicy` decides.
//!
//! Not here: static type checking of expressions and cel-go's cost budget (the interpreter
//! has neither; the number of validations and variables is bounded by the objects' size).

use std::collections::HashMap;
use std::sync::{Arc, LazyLock};

use apimachinery::labels::Selector;
use apimachinery::meta;
use apimachinery::status::{ApiError, Reason};
use cel::Program;
use parking_lot::Mutex;
use registry::cache::{CachedObject, Filter};
use serde_json::Value;

use super::cel::{self as acel, Scope, Vars};
use super::compiled::Compiled;
use super::webhook::config::{self, Rule, selector, strings};
use super::webhook::{self, Attributes};
use crate::ControlPlane;

const GROUP: &str = "admissionregistration.k8s.io";

/// A rule with the names it is limited to.
struct NamedRule {
    rule: Rule,
    names: Vec<String>,
}

/// `matchResources` / `matchConstraints`.
struct MatchResources {
    rules: Vec<NamedRule>,
    exclude: Vec<NamedRule>,
    namespace_selector: Selector,
    object_selector: Selector,
    equivalent: bool,
}

type Compiledexpr = Result<Program, String>;

struct Validation {
    expression: String,
    program: Compiledexpr,
    message: String,
    message_expression: Option<Compiledexpr>,
    reason: Reason,
}

struct Policy {
    /// Whether an expression refers to `namespaceObject` (only then is it looked up).
    uses_namespace: bool,
    fail: bool,
    param_kind: Option<(String, String)>,
    constraints: Option<MatchResources>,
    match_conditions: Vec<(String, Compiledexpr)>,
    variables: Vec<(String, Compiledexpr)>,
    validations: Vec<Validation>,
    audit_annotations: Vec<(String, Compiledexpr)>,
}

struct ParamRef {
    name: String,
    namespace: String,
    selector: Option<Selector>,
    deny_missing: bool,
}

struct Binding {
    name: String,
    policy: String,
    param_ref: Option<ParamRef>,
    matches: Option<MatchResources>,
    deny: bool,
    warn: bool,
    audit: bool,
}

fn s<'a>(v: &'a Value, k: &str) -> &'a str {
    v.get(k).and_then(Value::as_str).unwrap_or("")
}

fn named_rules(v: &Value, key: &str) -> Vec<NamedRule> {
    v.get(key)
        .and_then(Value::as_array)
        .map(|rs| {
            rs.iter()
                .map(|r| NamedRule {
                    rule: config::rule(r),
                    names: strings(r, "resourceNames"),
                })
                .collect()
        })
        .unwrap_or_default()
}

fn match_resources(v: &Value) -> MatchResources {
    MatchResources {
        rules: named_rules(v, "resourceRules"),
        exclude: named_rules(v, "excludeResourceRules"),
        namespace_selector: selector(v.get("namespaceSelector")),
        object_selector: selector(v.get("objectSelector")),
        equivalent: s(v, "matchPolicy") != "Exact",
    }
}

fn named_programs(
    v: &Value,
    key: &str,
    expr_key: &str,
    name_key: &str,
) -> Vec<(String, Compiledexpr)> {
    v.get(key)
        .and_then(Value::as_array)
        .map(|xs| {
            xs.iter()
                .map(|x| (s(x, name_key).to_string(), acel::compile(s(x, expr_key))))
                .collect()
        })
        .unwrap_or_default()
}

fn compile_policy(p: &Value) -> Policy {
    let spec = p.get("spec").cloned().unwrap_or(Value::Null);
    let param_kind = spec
        .get("paramKind")
        .filter(|k| k.is_object())
        .map(|k| (s(k, "apiVersion").to_string(), s(k, "kind").to_string()));
    let validations = spec
        .get("validations")
        .and_then(Value::as_array)
        .map(|vs| {
            vs.iter()
                .map(|v| {
                    let expression = s(v, "expression").to_string();
                    let me = s(v, "messageExpression");
                    Validation {
                        program: acel::compile(&expression),
                        expression,
                        message: s(v, "message").to_string(),
                        message_expression: (!me.trim().is_empty()).then(|| acel::compile(me)),
                        reason: match s(v, "reason") {
                            "" => Reason::Invalid,
                            r => Reason::from_name(r),
                        },
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    Policy {
        uses_namespace: spec.to_string().contains("namespaceObject"),
        fail: s(&spec, "failurePolicy") != "Ignore",
        param_kind,
        constraints: spec.get("matchConstraints").map(match_resources),
        match_conditions: named_programs(&spec, "matchConditions", "expression", "name"),
        variables: named_programs(&spec, "variables", "expression", "name"),
        validations,
        audit_annotations: named_programs(&spec, "auditAnnotations", "valueExpression", "key"),
    }
}

fn compile_binding(b: &Value) -> Binding {
    let spec = b.get("spec").cloned().unwrap_or(Value::Null);
    let actions = strings(&spec, "validationActions");
    Binding {
        name: meta::name(b).to_string(),
        policy: s(&spec, "policyName").to_string(),
        param_ref: spec
            .get("paramRef")
            .filter(|p| p.is_object())
            .map(|p| ParamRef {
                name: s(p, "name").to_string(),
                namespace: s(p, "namespace").to_string(),
                selector: p
                    .get("selector")
                    .filter(|x| !x.is_null())
                    .map(|x| selector(Some(x))),
                deny_missing: s(p, "parameterNotFoundAction") != "Allow",
            }),
        matches: spec
            .get("matchResources")
            .filter(|m| m.is_object())
            .map(match_resources),
        deny: actions.iter().any(|a| a == "Deny"),
        warn: actions.iter().any(|a| a == "Warn"),
        audit: actions.iter().any(|a| a == "Audit"),
    }
}

static POLICIES: LazyLock<Compiled<Policy>> = LazyLock::new(Compiled::default);
static BINDINGS: LazyLock<Compiled<Binding>> = LazyLock::new(Compiled::default);

fn cluster_objects(cp: &ControlPlane, cluster: &str, plural: &str) -> Vec<Arc<CachedObject>> {
    let filter = Filter {
        cluster: Some(cluster.to_string()),
        ..Filter::default()
    };
    cp.store
        .cache_for_reads(cluster)
        .list(GROUP, plural, &filter)
        .0
}

/// Whether the cluster has any policy binding (the cheap test before admission runs).
pub fn any(cp: &ControlPlane, cluster: &str) -> bool {
    cp.store
        .cache_for_reads(cluster)
        .count(GROUP, "validatingadmissionpolicybindings", cluster)
        > 0
}

impl MatchResources {
    fn covers(
        &self,
        cp: &ControlPlane,
        attrs: &Attributes,
        obj: Option<&Value>,
        old: Option<&Value>,
    ) -> bool {
        fn named<'r>(rules: &'r [NamedRule], name: &str) -> Vec<&'r Rule> {
            rules
                .iter()
                .filter(|r| r.names.is_empty() || r.names.iter().any(|n| n == name))
                .map(|r| &r.rule)
                .collect()
        }
        let mut equivalents = None;
        let included = webhook::matched_version(
            cp,
            named(&self.rules, &attrs.name).into_iter(),
            self.equivalent,
            attrs,
            &mut equivalents,
        )
        .is_some();
        if !included {
            return false;
        }
        let excluded = !self.exclude.is_empty()
            && webhook::matched_version(
                cp,
                named(&self.exclude, &attrs.name).into_iter(),
                self.equivalent,
                attrs,
                &mut equivalents,
            )
            .is_some();
        !excluded
            && webhook::namespace_matches(cp, &self.namespace_selector, attrs, obj, old)
            && webhook::object_matches(&self.object_selector, obj, old)
    }
}

/// What one evaluation decided.
enum Decision {
    Pass,
    Fail { message: String, reason: Reason },
}

/// The parameter objects a binding selects (`None` when the policy takes none).
fn params(
    cp: &ControlPlane,
    attrs: &Attributes,
    policy: &Policy,
    binding: &Binding,
) -> Result<Vec<Option<Value>>, String> {
    let Some((api_version, kind)) = &policy.param_kind else {
        return Ok(vec![None]);
    };
    let Some(pr) = &binding.param_ref else {
        return Err(format!(
            "failed to configure binding: binding {:?} does not set paramRef but policy {:?} requires params",
            binding.name, binding.policy
        ));
    };
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let res = cp
        .catalog
        .all(&attrs.cluster)
        .into_iter()
        .find(|r| r.group == group && r.version == version && r.kind == *kind)
        .ok_or_else(|| {
            format!("failed to find resource referenced by paramKind: '{api_version}, Kind={kind}'")
        })?;
    let namespace = if !res.namespaced {
        String::new()
    } else if !pr.namespace.is_empty() {
        pr.namespace.clone()
    } else if attrs.namespaced {
        attrs.namespace.clone()
    } else {
        return Err(
            "cannot use namespaced paramRef in policy binding that matches cluster-scoped resources"
                .into(),
        );
    };
    let found: Vec<Option<Value>> = if !pr.name.is_empty() {
        cp.store
            .cache_for_reads(&attrs.cluster)
            .get(
                &res.group,
                &res.plural,
                &attrs.cluster,
                &namespace,
                &pr.name,
            )
            .map(|o| Some(o.to_value()))
            .into_iter()
            .collect()
    } else {
        let filter = Filter {
            cluster: Some(attrs.cluster.clone()),
            namespace: (!namespace.is_empty()).then(|| namespace.clone()),
            ..Filter::default()
        };
        let sel = pr.selector.clone().unwrap_or_else(Selector::everything);
        cp.store
            .cache_for_reads(&attrs.cluster)
            .list(&res.group, &res.plural, &filter)
            .0
            .iter()
            .map(|o| o.to_value())
            .filter(|o| sel.matches_json(o.pointer("/metadata/labels")))
            .map(Some)
            .collect()
    };
    if found.is_empty() {
        if pr.deny_missing {
            return Err(
                "no params found for policy binding with `Deny` parameterNotFoundAction".into(),
            );
        }
        return Ok(Vec::new());
    }
    Ok(found)
}

/// Evaluates `policy` with one parameter object.
fn evaluate(policy: &Policy, base: &Vars, params: Option<&Value>) -> Vec<Decision> {
    let vars = base.clone().json("params", params);
    let error = |e: String| -> Vec<Decision> {
        if policy.fail {
            vec![Decision::Fail {
                message: e,
                reason: Reason::Invalid,
            }]
        } else {
            Vec::new()
        }
    };
    {
        let conditions = Scope::new(
            &vars,
            policy
                .match_conditions
                .iter()
                .filter_map(|(_, p)| p.as_ref().ok()),
        );
        for (name, program) in &policy.match_conditions {
            let result = program
                .as_ref()
                .map_err(Clone::clone)
                .and_then(|p| conditions.eval_bool(p));
            match result {
                Ok(true) => {}
                Ok(false) => return Vec::new(),
                Err(e) => {
                    return error(format!("failed to evaluate match condition {name:?}: {e}"));
                }
            }
        }
    }
    let mut composed: Vec<(String, cel::Value)> = Vec::new();
    for (name, program) in &policy.variables {
        let scope = vars.clone().cel("variables", acel::map(composed.clone()));
        if let Ok(v) = program
            .as_ref()
            .map_err(Clone::clone)
            .and_then(|p| acel::eval(p, &scope))
        {
            composed.push((name.clone(), v));
        }
    }
    let vars = vars.cel("variables", acel::map(composed));
    let programs = policy.validations.iter().flat_map(|v| {
        let message = v.message_expression.as_ref().and_then(|m| m.as_ref().ok());
        v.program.as_ref().ok().into_iter().chain(message)
    });
    let audits = policy
        .audit_annotations
        .iter()
        .filter_map(|(_, p)| p.as_ref().ok());
    let scope = Scope::new(&vars, programs.chain(audits));
    let mut out = Vec::new();
    for v in &policy.validations {
        let result = v
            .program
            .as_ref()
            .map_err(Clone::clone)
            .and_then(|p| scope.eval_bool(p));
        match result {
            Ok(true) => out.push(Decision::Pass),
            Ok(false) => {
                let from_expression = v
                    .message_expression
                    .as_ref()
                    .and_then(|m| m.as_ref().ok())
                    .and_then(|p| scope.eval(p).ok())
                    .and_then(|m| match m {
                        cel::Value::String(s) if !s.trim().is_empty() => Some(s.to_string()),
                        _ => None,
                    });
                let message = from_expression.unwrap_or_else(|| {
                    if v.message.is_empty() {
                        format!("failed expression: {}", v.expression.trim())
                    } else {
                        v.message.clone()
                    }
                });
                out.push(Decision::Fail {
                    message,
                    reason: v.reason,
                });
            }
            Err(e) if policy.fail => out.push(Decision::Fail {
                message: format!("expression '{}' resulted in error: {e}", v.expression),
                reason: Reason::Invalid,
            }),
            Err(_) => {}
        }
    }
    for (key, program) in &policy.audit_annotations {
        if let Ok(p) = program
            && let Ok(v) = scope.eval(p)
        {
            tracing::debug!(key = %key, value = ?v, "admission policy audit annotation");
        }
    }
    out
}

fn code_of(reason: Reason) -> u16 {
    match reason {
        Reason::Forbidden => 403,
        Reason::RequestEntityTooLarge => 413,
        _ => 422,
    }
}

/// Runs the cluster's ValidatingAdmissionPolicies over a request.
pub fn validate(
    cp: &ControlPlane,
    attrs: &Attributes,
    obj: Option<&Value>,
    old: Option<&Value>,
    warnings: &Mutex<Vec<String>>,
) -> Result<(), ApiError> {
    if attrs.group == GROUP {
        return Ok(());
    }
    let bindings = cluster_objects(cp, &attrs.cluster, "validatingadmissionpolicybindings");
    if bindings.is_empty() {
        return Ok(());
    }
    let policies: HashMap<String, Arc<CachedObject>> =
        cluster_objects(cp, &attrs.cluster, "validatingadmissionpolicies")
            .into_iter()
            .map(|p| (p.name().to_string(), p))
            .collect();
    let mut bindings: Vec<Arc<Binding>> = bindings
        .iter()
        .map(|b| BINDINGS.get(b, compile_binding))
        .collect();
    bindings.sort_by(|a, b| a.name.cmp(&b.name));
    let mut base: Option<Vars> = None;
    let mut denied: Option<ApiError> = None;
    for binding in &bindings {
        let Some(policy_obj) = policies.get(&binding.policy) else {
            continue;
        };
        let policy = POLICIES.get(policy_obj, compile_policy);
        let covered = policy
            .constraints
            .as_ref()
            .is_some_and(|m| m.covers(cp, attrs, obj, old))
            && binding
                .matches
                .as_ref()
                .is_none_or(|m| m.covers(cp, attrs, obj, old));
        if !covered {
            continue;
        }
        let base = base.get_or_insert_with(|| {
            // `request` without the objects (expressions read them as `object` and
            // `oldObject`), made only if an expression refers to it.
            Vars::default()
                .json("object", obj)
                .json("oldObject", old)
                .lazy("request", move || {
                    webhook::review_request(attrs, &attrs.version, "", None, None)
                })
        });
        if policy.uses_namespace && !base.values.iter().any(|(n, _)| *n == "namespaceObject") {
            let ns = webhook::namespace_object(cp, attrs);
            let var = match ns {
                Some(n) => acel::Var::Owned(n),
                None => acel::Var::Json(None),
            };
            base.values.push(("namespaceObject", var));
        }
        let decisions = match params(cp, attrs, &policy, binding) {
            Ok(ps) => ps
                .iter()
                .flat_map(|p| evaluate(&policy, base, p.as_ref()))
                .collect(),
            Err(e) if policy.fail => vec![Decision::Fail {
                message: e,
                reason: Reason::Invalid,
            }],
            Err(_) => Vec::new(),
        };
        for d in decisions {
            let Decision::Fail { message, reason } = d else {
                continue;
            };
            let text = format!(
                "ValidatingAdmissionPolicy '{}' with binding '{}' denied request: {message}",
                binding.policy, binding.name
            );
            if binding.warn {
                warnings.lock().push(format!(
                    "Validation failed for ValidatingAdmissionPolicy '{}' with binding '{}': {message}",
                    binding.policy, binding.name
                ));
            }
            if binding.audit {
                tracing::info!(policy = %binding.policy, binding = %binding.name, "admission policy audit: {message}");
            }
            if binding.deny && denied.is_none() {
                let name = if attrs.name.is_empty() {
                    obj.or(old).map(meta::name).unwrap_or("").to_string()
                } else {
                    attrs.name.clone()
                };
                let mut e = ApiError::forbidden(&attrs.resource, &attrs.group, &name, &text);
                e.reason = reason;
                e.code = code_of(reason);
                denied = Some(e.with_cause("", &text, ""));
            }
        }
    }
    match denied {
        Some(e) => Err(e),
        None => Ok(()),
    }
}
