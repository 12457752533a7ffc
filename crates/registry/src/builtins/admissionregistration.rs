//! `admissionregistration.k8s.io/v1`: webhook configurations, ValidatingAdmissionPolicies and
//! their bindings, defaulted and validated as kube-apiserver 1.33 does (upstream's
//! `pkg/apis/admissionregistration/v1/defaults.go` and `validation/validation.go`).
//!
//! A webhook defaults to `failurePolicy: Fail`, `matchPolicy: Equivalent`, empty namespace and
//! object selectors, `timeoutSeconds: 10`, rules of scope `*`, service port 443 and (mutating)
//! `reinvocationPolicy: Never`. `null` counts as absent, so a merge patch setting a selector
//! to null stores the default `{}`. Validation requires what v1 requires (`sideEffects` of
//! `None`/`NoneOnDryRun`, `admissionReviewVersions` naming v1 or v1beta1, fully qualified and
//! unique webhook names, an `https` URL or a service); an update keeps accepting what the old
//! object already had (upstream's ratcheting options).

use apimachinery::field::{ErrorList, FieldError, Path};
use apimachinery::labels::{LabelSelectorOptions, validate_label_selector};
use apimachinery::validation as names;
use serde_json::{Value, json};

use super::util::{arr_at, at, child, default_str, default_value, each_mut, one_of, str_at};
use crate::strategy::Strategy;

/// Which webhook configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WebhookKind {
    Validating,
    Mutating,
}

/// Validating- and MutatingWebhookConfigurations.
pub struct WebhookConfigurationStrategy(pub WebhookKind);

/// ValidatingAdmissionPolicies.
pub struct ValidatingAdmissionPolicyStrategy;

/// ValidatingAdmissionPolicyBindings.
pub struct ValidatingAdmissionPolicyBindingStrategy;

const FAILURE_POLICIES: &[&str] = &["Fail", "Ignore"];
const MATCH_POLICIES: &[&str] = &["Equivalent", "Exact"];
const NO_SIDE_EFFECTS: &[&str] = &["None", "NoneOnDryRun"];
const ALL_SIDE_EFFECTS: &[&str] = &["None", "NoneOnDryRun", "Some", "Unknown"];
const OPERATIONS: &[&str] = &["*", "CONNECT", "CREATE", "DELETE", "UPDATE"];
const SCOPES: &[&str] = &["*", "Cluster", "Namespaced"];
const REINVOCATION: &[&str] = &["IfNeeded", "Never"];
const REVIEW_VERSIONS: &[&str] = &["v1", "v1beta1"];
const ACTIONS: &[&str] = &["Audit", "Deny", "Warn"];
/// Upstream's limit on `matchConditions` per webhook or policy.
const MAX_MATCH_CONDITIONS: usize = 64;

fn default_rules(v: &mut Value, key: &str) {
    each_mut(v, key, |r| {
        if r.is_object() {
            default_str(r, "scope", "*");
        }
    });
}

fn default_webhook(hook: &mut Value, kind: WebhookKind) {
    if !hook.is_object() {
        return;
    }
    default_str(hook, "failurePolicy", "Fail");
    default_str(hook, "matchPolicy", "Equivalent");
    default_value(hook, "namespaceSelector", json!({}));
    default_value(hook, "objectSelector", json!({}));
    default_value(hook, "timeoutSeconds", json!(10));
    if kind == WebhookKind::Mutating {
        default_str(hook, "reinvocationPolicy", "Never");
    }
    default_rules(hook, "rules");
    if let Some(service) = hook
        .pointer_mut("/clientConfig/service")
        .filter(|s| s.is_object())
    {
        default_value(service, "port", json!(443));
    }
}

/// What an update keeps accepting because the old object already had it (upstream's
/// `validationOptions`).
struct Options {
    require_no_side_effects: bool,
    require_known_review_version: bool,
    require_unique_names: bool,
}

impl Options {
    const STRICT: Options = Options {
        require_no_side_effects: true,
        require_known_review_version: true,
        require_unique_names: true,
    };

    fn ratcheted(old: &Value) -> Options {
        let hooks = arr_at(old, "/webhooks");
        let mut names: Vec<&str> = hooks.iter().map(|h| str_at(h, "/name")).collect();
        let count = names.len();
        names.sort_unstable();
        names.dedup();
        Options {
            require_no_side_effects: hooks
                .iter()
                .all(|h| NO_SIDE_EFFECTS.contains(&str_at(h, "/sideEffects"))),
            require_known_review_version: hooks.iter().all(|h| {
                let versions = arr_at(h, "/admissionReviewVersions");
                versions.is_empty()
                    || versions
                        .iter()
                        .any(|v| REVIEW_VERSIONS.contains(&v.as_str().unwrap_or("")))
            }),
            require_unique_names: names.len() == count,
        }
    }
}

/// Upstream `IsFullyQualifiedName`.
fn fully_qualified_name(errs: &mut ErrorList, path: &Path, name: &str) {
    if name.is_empty() {
        errs.push(FieldError::required(path, ""));
        return;
    }
    let msgs = names::is_dns1123_subdomain(name);
    if !msgs.is_empty() {
        for m in msgs {
            errs.push(FieldError::invalid(path, json!(name), m));
        }
        return;
    }
    if name.split('.').count() < 3 {
        errs.push(FieldError::invalid(
            path,
            json!(name),
            "should be a domain with at least three segments separated by dots",
        ));
    }
}

/// The parts of a URL the checks look at (Go's `url.Parse`, leniently).
struct UrlParts<'a> {
    scheme: &'a str,
    host: &'a str,
    user: Option<&'a str>,
    query: &'a str,
    fragment: &'a str,
}

fn parse_url(url: &str) -> UrlParts<'_> {
    let (rest, fragment) = url.split_once('#').unwrap_or((url, ""));
    let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (scheme, rest) = match rest.split_once(':') {
        Some((s, r))
            if s.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c)) =>
        {
            (s, r)
        }
        _ => ("", rest),
    };
    let (authority, user) = match rest.strip_prefix("//") {
        Some(r) => {
            let authority = r.split('/').next().unwrap_or("");
            match authority.rsplit_once('@') {
                Some((u, h)) => (h, Some(u)),
                None => (authority, None),
            }
        }
        None => ("", None),
    };
    UrlParts {
        scheme,
        host: authority,
        user,
        query,
        fragment,
    }
}

/// Upstream `ValidateWebhookURL` with https forced.
fn webhook_url(errs: &mut ErrorList, path: &Path, url: &str) {
    const FORM: &str = "; desired format: https://host[/path]";
    let u = parse_url(url);
    if u.scheme != "https" {
        errs.push(FieldError::invalid(
            path,
            json!(u.scheme),
            format!("'https' is the only allowed URL scheme{FORM}"),
        ));
    }
    if u.host.is_empty() {
        errs.push(FieldError::invalid(
            path,
            json!(""),
            format!("host must be specified{FORM}"),
        ));
    }
    if let Some(user) = u.user {
        errs.push(FieldError::invalid(
            path,
            json!(user),
            "user information is not permitted in the URL",
        ));
    }
    if !u.fragment.is_empty() {
        errs.push(FieldError::invalid(
            path,
            json!(u.fragment),
            "fragments are not permitted in the URL",
        ));
    }
    if !u.query.is_empty() {
        errs.push(FieldError::invalid(
            path,
            json!(u.query),
            "query parameters are not permitted in the URL",
        ));
    }
}

/// Upstream `ValidateWebhookService`.
fn webhook_service(errs: &mut ErrorList, path: &Path, service: &Value) {
    if str_at(service, "/name").is_empty() {
        errs.push(FieldError::required(path.child("name"), ""));
    }
    if str_at(service, "/namespace").is_empty() {
        errs.push(FieldError::required(path.child("namespace"), ""));
    }
    let port = service.get("port").and_then(Value::as_i64).unwrap_or(443);
    if !(1..=65535).contains(&port) {
        errs.push(FieldError::invalid(
            path.child("port"),
            json!(port),
            "port is not valid: must be between 1 and 65535, inclusive",
        ));
    }
    let p = str_at(service, "/path");
    if p.is_empty() || p == "/" {
        return;
    }
    let pp = path.child("path");
    if p == "//" {
        errs.push(FieldError::invalid(
            &pp,
            json!(p),
            "segment[0] may not be empty",
        ));
        return;
    }
    if !p.starts_with('/') {
        errs.push(FieldError::invalid(&pp, json!(p), "must start with a '/'"));
    }
    let trimmed = p.strip_prefix('/').unwrap_or(p);
    let trimmed = trimmed.strip_suffix('/').unwrap_or(trimmed);
    for (i, step) in trimmed.split('/').enumerate() {
        if step.is_empty() {
            errs.push(FieldError::invalid(
                &pp,
                json!(p),
                format!("segment[{i}] may not be empty"),
            ));
            continue;
        }
        for m in names::is_dns1123_subdomain(step) {
            errs.push(FieldError::invalid(
                &pp,
                json!(p),
                format!("segment[{i}]: {m}"),
            ));
        }
    }
}

fn strings(v: &Value, ptr: &str) -> Vec<String> {
    arr_at(v, ptr)
        .iter()
        .map(|x| x.as_str().unwrap_or("").to_string())
        .collect()
}

/// Upstream `validateResources` (subresources allowed) or its no-subresource variant.
fn resources(errs: &mut ErrorList, path: &Path, list: &[String], subresources: bool) {
    if list.is_empty() {
        errs.push(FieldError::required(path, ""));
    }
    if !subresources {
        for (i, r) in list.iter().enumerate() {
            if r.is_empty() {
                errs.push(FieldError::required(path.index(i), ""));
            }
            if r.contains('/') {
                errs.push(FieldError::invalid(
                    path.index(i),
                    json!(r),
                    "must not specify subresources",
                ));
            }
        }
        if list.len() > 1 && list.iter().any(|r| r == "*") {
            errs.push(FieldError::invalid(
                path,
                json!(list),
                "if '*' is present, must not specify other resources",
            ));
        }
        return;
    }
    let mut wildcard_sub: Vec<&str> = Vec::new();
    let mut wildcard_res: Vec<&str> = Vec::new();
    let (mut double, mut single, mut plain) = (false, false, false);
    for (i, r) in list.iter().enumerate() {
        if r.is_empty() {
            errs.push(FieldError::required(path.index(i), ""));
            continue;
        }
        double |= r == "*/*";
        single |= r == "*";
        let Some((res, sub)) = r.split_once('/') else {
            plain = r != "*";
            continue;
        };
        if wildcard_sub.contains(&res) {
            errs.push(FieldError::invalid(
                path.index(i),
                json!(r),
                format!("if '{res}/*' is present, must not specify {r}"),
            ));
        }
        if wildcard_res.contains(&sub) {
            errs.push(FieldError::invalid(
                path.index(i),
                json!(r),
                format!("if '*/{sub}' is present, must not specify {r}"),
            ));
        }
        if sub == "*" {
            wildcard_sub.push(res);
        }
        if res == "*" {
            wildcard_res.push(sub);
        }
    }
    if list.len() > 1 && double {
        errs.push(FieldError::invalid(
            path,
            json!(list),
            "if '*/*' is present, must not specify other resources",
        ));
    }
    if single && plain {
        errs.push(FieldError::invalid(
            path,
            json!(list),
            "if '*' is present, must not specify other resources without subresources",
        ));
    }
}

/// Upstream `validateRule`.
fn rule(errs: &mut ErrorList, path: &Path, r: &Value, subresources: bool) {
    let groups = strings(r, "/apiGroups");
    if groups.is_empty() {
        errs.push(FieldError::required(path.child("apiGroups"), ""));
    }
    if groups.len() > 1 && groups.iter().any(|g| g == "*") {
        errs.push(FieldError::invalid(
            path.child("apiGroups"),
            json!(groups),
            "if '*' is present, must not specify other API groups",
        ));
    }
    let versions = strings(r, "/apiVersions");
    if versions.is_empty() {
        errs.push(FieldError::required(path.child("apiVersions"), ""));
    }
    if versions.len() > 1 && versions.iter().any(|g| g == "*") {
        errs.push(FieldError::invalid(
            path.child("apiVersions"),
            json!(versions),
            "if '*' is present, must not specify other API versions",
        ));
    }
    for (i, v) in versions.iter().enumerate() {
        if v.is_empty() {
            errs.push(FieldError::required(path.child("apiVersions").index(i), ""));
        }
    }
    resources(
        errs,
        &path.child("resources"),
        &strings(r, "/resources"),
        subresources,
    );
    let scope = str_at(r, "/scope");
    if !scope.is_empty() && !SCOPES.contains(&scope) {
        errs.push(FieldError::not_supported(
            path.child("scope"),
            json!(scope),
            SCOPES,
        ));
    }
}

/// Upstream `validateRuleWithOperations`.
fn rule_with_operations(errs: &mut ErrorList, path: &Path, r: &Value) {
    let ops = strings(r, "/operations");
    if ops.is_empty() {
        errs.push(FieldError::required(path.child("operations"), ""));
    }
    if ops.len() > 1 && ops.iter().any(|o| o == "*") {
        errs.push(FieldError::invalid(
            path.child("operations"),
            json!(ops),
            "if '*' is present, must not specify other operations",
        ));
    }
    for (i, o) in ops.iter().enumerate() {
        if !OPERATIONS.contains(&o.as_str()) {
            errs.push(FieldError::not_supported(
                path.child("operations").index(i),
                json!(o),
                OPERATIONS,
            ));
        }
    }
    rule(errs, path, r, true);
}

fn selector(errs: &mut ErrorList, path: &Path, v: Option<&Value>) {
    if let Some(sel) = v {
        errs.extend(validate_label_selector(
            sel,
            LabelSelectorOptions::default(),
            path,
        ));
    }
}

/// `matchConditions`: names unique qualified names, expressions present, at most 64.
fn match_conditions(errs: &mut ErrorList, path: &Path, conditions: &[Value]) {
    if conditions.len() > MAX_MATCH_CONDITIONS {
        errs.push(FieldError::too_many(
            path,
            conditions.len(),
            MAX_MATCH_CONDITIONS,
        ));
    }
    let mut seen: Vec<&str> = Vec::new();
    for (i, c) in conditions.iter().enumerate() {
        let p = path.index(i);
        let name = str_at(c, "/name");
        if name.is_empty() {
            errs.push(FieldError::required(p.child("name"), ""));
        } else {
            for m in names::is_qualified_name(name) {
                errs.push(FieldError::invalid(p.child("name"), json!(name), m));
            }
            if seen.contains(&name) {
                errs.push(FieldError::duplicate(p.child("name"), json!(name)));
            }
            seen.push(name);
        }
        if str_at(c, "/expression").trim().is_empty() {
            errs.push(FieldError::required(p.child("expression"), ""));
        }
    }
}

fn validate_webhook(
    errs: &mut ErrorList,
    path: &Path,
    hook: &Value,
    kind: WebhookKind,
    opts: &Options,
) {
    fully_qualified_name(errs, &path.child("name"), str_at(hook, "/name"));
    for (i, r) in arr_at(hook, "/rules").iter().enumerate() {
        rule_with_operations(errs, &path.child("rules").index(i), r);
    }
    for (key, allowed) in [
        ("failurePolicy", FAILURE_POLICIES),
        ("matchPolicy", MATCH_POLICIES),
    ] {
        let v = str_at(hook, &format!("/{key}"));
        if !v.is_empty() && !allowed.contains(&v) {
            errs.push(FieldError::not_supported(
                path.child(key),
                json!(v),
                allowed,
            ));
        }
    }
    let allowed = if opts.require_no_side_effects {
        NO_SIDE_EFFECTS
    } else {
        ALL_SIDE_EFFECTS
    };
    match at(hook, "/sideEffects").map(|v| v.as_str().unwrap_or("")) {
        None => errs.push(FieldError::required(
            path.child("sideEffects"),
            format!("must specify one of {}", allowed.join(", ")),
        )),
        Some(s) if !allowed.contains(&s) => errs.push(FieldError::not_supported(
            path.child("sideEffects"),
            json!(s),
            allowed,
        )),
        Some(_) => {}
    }
    if let Some(t) = hook.get("timeoutSeconds").and_then(Value::as_i64)
        && !(1..=30).contains(&t)
    {
        errs.push(FieldError::invalid(
            path.child("timeoutSeconds"),
            json!(t),
            "the timeout value must be between 1 and 30 seconds",
        ));
    }
    selector(
        errs,
        &path.child("namespaceSelector"),
        hook.get("namespaceSelector"),
    );
    selector(
        errs,
        &path.child("objectSelector"),
        hook.get("objectSelector"),
    );
    if kind == WebhookKind::Mutating {
        let r = str_at(hook, "/reinvocationPolicy");
        if !r.is_empty() && !REINVOCATION.contains(&r) {
            errs.push(FieldError::not_supported(
                path.child("reinvocationPolicy"),
                json!(r),
                REINVOCATION,
            ));
        }
    }
    let cc = path.child("clientConfig");
    let url = at(hook, "/clientConfig/url");
    let service = at(hook, "/clientConfig/service");
    match (url, service) {
        (Some(u), None) => webhook_url(errs, &cc.child("url"), u.as_str().unwrap_or("")),
        (None, Some(s)) => webhook_service(errs, &cc.child("service"), s),
        _ => errs.push(FieldError::required(
            &cc,
            "exactly one of url or service is required",
        )),
    }
    match_conditions(
        errs,
        &path.child("matchConditions"),
        arr_at(hook, "/matchConditions"),
    );
    let versions = strings(hook, "/admissionReviewVersions");
    let vp = path.child("admissionReviewVersions");
    if versions.is_empty() {
        errs.push(FieldError::required(
            &vp,
            format!("must specify one of {}", REVIEW_VERSIONS.join(", ")),
        ));
    } else {
        let mut seen: Vec<&str> = Vec::new();
        for (i, v) in versions.iter().enumerate() {
            if seen.contains(&v.as_str()) {
                errs.push(FieldError::invalid(
                    vp.index(i),
                    json!(v),
                    "duplicate version",
                ));
                continue;
            }
            seen.push(v);
            for m in names::is_dns1035_label(v) {
                errs.push(FieldError::invalid(vp.index(i), json!(v), m));
            }
        }
        if opts.require_known_review_version
            && !versions
                .iter()
                .any(|v| REVIEW_VERSIONS.contains(&v.as_str()))
        {
            errs.push(FieldError::invalid(
                &vp,
                json!(versions),
                format!(
                    "must include at least one of {}",
                    REVIEW_VERSIONS.join(", ")
                ),
            ));
        }
    }
}

impl WebhookConfigurationStrategy {
    fn check(&self, obj: &Value, opts: &Options) -> ErrorList {
        let mut errs = ErrorList::new();
        let mut seen: Vec<&str> = Vec::new();
        for (i, hook) in arr_at(obj, "/webhooks").iter().enumerate() {
            let p = Path::new("webhooks").index(i);
            validate_webhook(&mut errs, &p, hook, self.0, opts);
            let name = str_at(hook, "/name");
            if opts.require_unique_names && !name.is_empty() {
                if seen.contains(&name) {
                    errs.push(FieldError::duplicate(p.child("name"), json!(name)));
                } else {
                    seen.push(name);
                }
            }
        }
        errs
    }
}

impl Strategy for WebhookConfigurationStrategy {
    fn default(&self, obj: &mut Value) {
        let kind = self.0;
        each_mut(obj, "webhooks", |h| default_webhook(h, kind));
    }

    fn validate(&self, obj: &Value) -> ErrorList {
        self.check(obj, &Options::STRICT)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> ErrorList {
        self.check(new, &Options::ratcheted(old))
    }
}

/// `matchResources` of a policy or binding, defaulted.
fn default_match_resources(m: &mut Value) {
    if !m.is_object() {
        return;
    }
    default_str(m, "matchPolicy", "Equivalent");
    default_value(m, "namespaceSelector", json!({}));
    default_value(m, "objectSelector", json!({}));
    default_rules(m, "resourceRules");
    default_rules(m, "excludeResourceRules");
}

/// Upstream `validateMatchResources`; `constraints` when it is a policy's (resource rules
/// required).
fn match_resources(errs: &mut ErrorList, path: &Path, m: &Value, constraints: bool) {
    let mp = str_at(m, "/matchPolicy");
    if mp.is_empty() {
        errs.push(FieldError::required(path.child("matchPolicy"), ""));
    } else if !MATCH_POLICIES.contains(&mp) {
        errs.push(FieldError::not_supported(
            path.child("matchPolicy"),
            json!(mp),
            MATCH_POLICIES,
        ));
    }
    selector(
        errs,
        &path.child("namespaceSelector"),
        m.get("namespaceSelector"),
    );
    selector(errs, &path.child("objectSelector"), m.get("objectSelector"));
    let rules = arr_at(m, "/resourceRules");
    if constraints && rules.is_empty() {
        errs.push(FieldError::required(path.child("resourceRules"), ""));
    }
    for key in ["resourceRules", "excludeResourceRules"] {
        for (i, r) in arr_at(m, &format!("/{key}")).iter().enumerate() {
            let p = path.child(key).index(i);
            rule_with_operations(errs, &p, r);
            let names_p = p.child("resourceNames");
            for (j, n) in arr_at(r, "/resourceNames").iter().enumerate() {
                let n = n.as_str().unwrap_or("");
                for msg in names::is_dns1123_subdomain(n) {
                    errs.push(FieldError::invalid(names_p.index(j), json!(n), msg));
                }
            }
        }
    }
}

impl Strategy for ValidatingAdmissionPolicyStrategy {
    fn default(&self, obj: &mut Value) {
        let Some(spec) = child(obj, "spec") else {
            return;
        };
        default_str(spec, "failurePolicy", "Fail");
        if let Some(m) = spec.get_mut("matchConstraints") {
            default_match_resources(m);
        }
    }

    fn validate(&self, obj: &Value) -> ErrorList {
        let mut errs = ErrorList::new();
        let spec = obj.get("spec").cloned().unwrap_or(json!({}));
        let p = Path::new("spec");
        one_of(
            &mut errs,
            &p.child("failurePolicy"),
            str_at(&spec, "/failurePolicy"),
            FAILURE_POLICIES,
        );
        if let Some(pk) = at(&spec, "/paramKind") {
            let pp = p.child("paramKind");
            if str_at(pk, "/kind").is_empty() {
                errs.push(FieldError::required(pp.child("kind"), ""));
            }
            let av = str_at(pk, "/apiVersion");
            if av.is_empty() {
                errs.push(FieldError::required(pp.child("apiVersion"), ""));
            } else if av.split('/').count() > 2 || av.ends_with('/') || av.starts_with('/') {
                errs.push(FieldError::invalid(
                    pp.child("apiVersion"),
                    json!(av),
                    "apiVersion must be in the format of group/version",
                ));
            }
        }
        match at(&spec, "/matchConstraints") {
            None => errs.push(FieldError::required(p.child("matchConstraints"), "")),
            Some(m) => match_resources(&mut errs, &p.child("matchConstraints"), m, true),
        }
        let validations = arr_at(&spec, "/validations");
        let audits = arr_at(&spec, "/auditAnnotations");
        if validations.is_empty() && audits.is_empty() {
            errs.push(FieldError::required(
                p.child("validations"),
                "validations or auditAnnotations must contain at least one item",
            ));
            errs.push(FieldError::required(
                p.child("auditAnnotations"),
                "validations or auditAnnotations must contain at least one item",
            ));
        }
        for (i, v) in validations.iter().enumerate() {
            let vp = p.child("validations").index(i);
            if str_at(v, "/expression").trim().is_empty() {
                errs.push(FieldError::required(vp.child("expression"), ""));
            }
            let reason = str_at(v, "/reason");
            let reasons = ["Forbidden", "Invalid", "RequestEntityTooLarge"];
            if !reason.is_empty() && !reasons.contains(&reason) {
                errs.push(FieldError::not_supported(
                    vp.child("reason"),
                    json!(reason),
                    &reasons,
                ));
            }
            let msg = str_at(v, "/message");
            if msg.contains('\n') {
                errs.push(FieldError::invalid(
                    vp.child("message"),
                    json!(msg),
                    "message must not contain line breaks",
                ));
            }
        }
        for (i, a) in audits.iter().enumerate() {
            let ap = p.child("auditAnnotations").index(i);
            let key = str_at(a, "/key");
            if key.is_empty() {
                errs.push(FieldError::required(ap.child("key"), ""));
            }
            if str_at(a, "/valueExpression").trim().is_empty() {
                errs.push(FieldError::required(ap.child("valueExpression"), ""));
            }
        }
        let mut seen: Vec<&str> = Vec::new();
        for (i, v) in arr_at(&spec, "/variables").iter().enumerate() {
            let vp = p.child("variables").index(i);
            let name = str_at(v, "/name");
            if name.is_empty() {
                errs.push(FieldError::required(vp.child("name"), ""));
            } else if !is_cel_identifier(name) {
                errs.push(FieldError::invalid(
                    vp.child("name"),
                    json!(name),
                    "name is not a valid CEL identifier",
                ));
            } else if seen.contains(&name) {
                errs.push(FieldError::duplicate(vp.child("name"), json!(name)));
            }
            seen.push(name);
            if str_at(v, "/expression").trim().is_empty() {
                errs.push(FieldError::required(vp.child("expression"), ""));
            }
        }
        match_conditions(
            &mut errs,
            &p.child("matchConditions"),
            arr_at(&spec, "/matchConditions"),
        );
        errs
    }
}

/// A CEL identifier (`[a-zA-Z_][a-zA-Z0-9_]*`).
fn is_cel_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

impl Strategy for ValidatingAdmissionPolicyBindingStrategy {
    fn default(&self, obj: &mut Value) {
        let Some(spec) = child(obj, "spec") else {
            return;
        };
        if let Some(m) = spec.get_mut("matchResources") {
            default_match_resources(m);
        }
        if let Some(pr) = spec.get_mut("paramRef").filter(|p| p.is_object())
            && at(pr, "/parameterNotFoundAction").is_none()
        {
            pr["parameterNotFoundAction"] = json!("Deny");
        }
    }

    fn validate(&self, obj: &Value) -> ErrorList {
        let mut errs = ErrorList::new();
        let p = Path::new("spec");
        if str_at(obj, "/spec/policyName").is_empty() {
            errs.push(FieldError::required(p.child("policyName"), ""));
        }
        if let Some(m) = at(obj, "/spec/matchResources") {
            match_resources(&mut errs, &p.child("matchResources"), m, false);
        }
        if let Some(pr) = at(obj, "/spec/paramRef") {
            let pp = p.child("paramRef");
            let name = str_at(pr, "/name");
            let has_selector = at(pr, "/selector").is_some();
            if name.is_empty() && !has_selector {
                errs.push(FieldError::required(
                    &pp,
                    "one of `name` or `selector` must be specified",
                ));
            } else if !name.is_empty() && has_selector {
                errs.push(FieldError::forbidden(
                    pp.child("name"),
                    "name and selector are mutually exclusive",
                ));
            }
            let action = str_at(pr, "/parameterNotFoundAction");
            if !action.is_empty() && !["Allow", "Deny"].contains(&action) {
                errs.push(FieldError::not_supported(
                    pp.child("parameterNotFoundAction"),
                    json!(action),
                    &["Allow", "Deny"],
                ));
            }
        }
        let actions = strings(obj, "/spec/validationActions");
        let ap = p.child("validationActions");
        if actions.is_empty() {
            errs.push(FieldError::required(
                &ap,
                "at least one validation action is required",
            ));
        }
        let mut seen: Vec<&str> = Vec::new();
        for (i, a) in actions.iter().enumerate() {
            if seen.contains(&a.as_str()) {
                errs.push(FieldError::duplicate(ap.index(i), json!(a)));
            } else if !ACTIONS.contains(&a.as_str()) {
                errs.push(FieldError::not_supported(ap.index(i), json!(a), ACTIONS));
            }
            seen.push(a);
        }
        if seen.contains(&"Deny") && seen.contains(&"Warn") {
            errs.push(FieldError::invalid(
                &ap,
                json!(actions),
                "must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)",
            ));
        }
        errs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages(errs: &ErrorList) -> Vec<String> {
        errs.iter().map(FieldError::message).collect()
    }

    fn validating() -> WebhookConfigurationStrategy {
        WebhookConfigurationStrategy(WebhookKind::Validating)
    }

    #[test]
    fn webhooks_get_upstreams_defaults_and_null_selectors_become_empty() {
        let mut cfg = json!({"metadata": {"name": "c"}, "webhooks": [{
            "name": "a.example.com", "objectSelector": null,
            "clientConfig": {"service": {"name": "s", "namespace": "n"}},
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}]
        }]});
        WebhookConfigurationStrategy(WebhookKind::Mutating).default(&mut cfg);
        let h = &cfg["webhooks"][0];
        assert_eq!(h["failurePolicy"], "Fail");
        assert_eq!(h["matchPolicy"], "Equivalent");
        assert_eq!(h["timeoutSeconds"], 10);
        assert_eq!(h["objectSelector"], json!({}));
        assert_eq!(h["namespaceSelector"], json!({}));
        assert_eq!(h["reinvocationPolicy"], "Never");
        assert_eq!(h["rules"][0]["scope"], "*");
        assert_eq!(h["clientConfig"]["service"]["port"], 443);
    }

    #[test]
    fn a_webhook_without_dots_side_effects_or_review_versions_and_an_http_url_is_invalid() {
        let cfg = json!({"webhooks": [{"name": "no-dots", "clientConfig": {"url": "http://x"}}]});
        let got = messages(&validating().validate(&cfg));
        assert_eq!(
            got,
            vec![
                "webhooks[0].name: Invalid value: \"no-dots\": should be a domain with at least three segments separated by dots",
                "webhooks[0].sideEffects: Required value: must specify one of None, NoneOnDryRun",
                "webhooks[0].clientConfig.url: Invalid value: \"http\": 'https' is the only allowed URL scheme; desired format: https://host[/path]",
                "webhooks[0].admissionReviewVersions: Required value: must specify one of v1, v1beta1",
            ]
        );
    }

    #[test]
    fn webhook_names_are_unique_and_rules_complete() {
        let hook = json!({"name": "a.b.c", "sideEffects": "None", "admissionReviewVersions": ["v1"],
            "clientConfig": {"url": "https://h/p?q=1"},
            "rules": [{"operations": ["GET"], "apiGroups": ["*", "apps"], "apiVersions": [], "resources": ["*", "pods"]}]});
        let cfg = json!({"webhooks": [hook.clone(), hook]});
        let got = messages(&validating().validate(&cfg));
        assert!(got.contains(&"webhooks[0].rules[0].operations[0]: Unsupported value: \"GET\": supported values: \"*\", \"CONNECT\", \"CREATE\", \"DELETE\", \"UPDATE\"".to_string()), "{got:?}");
        assert!(got.contains(&"webhooks[0].rules[0].apiVersions: Required value".to_string()));
        assert!(got.contains(&"webhooks[0].clientConfig.url: Invalid value: \"q=1\": query parameters are not permitted in the URL".to_string()));
        assert!(got.contains(&"webhooks[1].name: Duplicate value: \"a.b.c\"".to_string()));
        assert!(got.iter().any(|m| {
            m.contains("if '*' is present, must not specify other resources without subresources")
        }));
    }

    #[test]
    fn an_update_keeps_accepting_side_effects_the_old_object_had() {
        let old = json!({"webhooks": [{"name": "a.b.c", "sideEffects": "Some", "admissionReviewVersions": ["v1"], "clientConfig": {"url": "https://h"}}]});
        assert!(validating().validate_update(&old, &old).is_empty());
        assert!(!validating().validate(&old).is_empty());
    }

    #[test]
    fn bindings_need_a_policy_and_compatible_actions() {
        let b = json!({"spec": {"validationActions": ["Deny", "Warn", "Deny", "Nope"]}});
        let got = messages(&ValidatingAdmissionPolicyBindingStrategy.validate(&b));
        assert!(got.contains(&"spec.policyName: Required value".to_string()));
        assert!(got.contains(&"spec.validationActions[2]: Duplicate value: \"Deny\"".to_string()));
        assert!(
            got.iter()
                .any(|m| m.starts_with("spec.validationActions[3]: Unsupported value"))
        );
        assert!(
            got.iter()
                .any(|m| m.contains("must not contain both Deny and Warn"))
        );
    }

    #[test]
    fn policies_are_defaulted_and_need_constraints_and_validations() {
        let mut p = json!({"spec": {"matchConstraints": {"resourceRules": [{"operations": ["CREATE"], "apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["deployments"]}]}, "validations": [{"expression": "object.spec.replicas < 5"}]}});
        ValidatingAdmissionPolicyStrategy.default(&mut p);
        assert_eq!(p["spec"]["failurePolicy"], "Fail");
        assert_eq!(p["spec"]["matchConstraints"]["matchPolicy"], "Equivalent");
        assert!(ValidatingAdmissionPolicyStrategy.validate(&p).is_empty());
        let got = messages(&ValidatingAdmissionPolicyStrategy.validate(&json!({"spec": {}})));
        assert!(got.contains(&"spec.matchConstraints: Required value".to_string()));
    }
}
