//! Admission webhooks as kube-apiserver calls them (`MutatingAdmissionWebhook` and
//! `ValidatingAdmissionWebhook`).
//!
//! For a write, the cluster's webhook configurations ([`config`]) are matched against the
//! request — rules (operations, groups, versions, resources and subresources, scope), with
//! `matchPolicy: Equivalent` also against the other served versions of the same resource,
//! `namespaceSelector`, `objectSelector` and `matchConditions` — and the interested webhooks
//! are sent an `AdmissionReview` ([`client`]). Mutating webhooks run one after another, each
//! seeing the previous one's JSON patch applied; those with `reinvocationPolicy: IfNeeded` run
//! once more when a later webhook changed the object. Validating webhooks run in parallel. A
//! refusal becomes upstream's `admission webhook "<name>" denied the request: ...`; a failed
//! call is refused with a 500 under `failurePolicy: Fail` and skipped under `Ignore`; in a dry
//! run only webhooks without side effects are called (others refuse the request). Warnings go
//! to the client. Only the request's own cluster's configurations are consulted, so one
//! cluster's webhooks never see another's objects.
//!
//! Where they run: a create calls mutating webhooks in the write pipeline after the built-in
//! mutating admission and validating webhooks on the prepared object before the quota charge
//! (`admission::admit_create`); updates and patches run both inside the store's retry loop
//! ([`StoreAdmission`], so they see the object as it is when written); deletes call them with
//! the object being deleted as `oldObject`.

pub mod client;
pub mod config;

use std::sync::Arc;

use apimachinery::labels::Selector;
use apimachinery::meta;
use apimachinery::status::{ApiError, Reason};
use apimachinery::user::UserInfo;
use parking_lot::Mutex;
use registry::ResourceDef;
use serde_json::{Value, json};

use self::config::{Kind, Webhook};
use crate::ControlPlane;

/// The operations of admission.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    Create,
    Update,
    Delete,
    Connect,
}

impl Operation {
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
            Operation::Connect => "CONNECT",
        }
    }

    fn options_kind(self) -> &'static str {
        match self {
            Operation::Create => "CreateOptions",
            Operation::Update => "UpdateOptions",
            Operation::Delete => "DeleteOptions",
            Operation::Connect => "",
        }
    }
}

/// What admission knows of a request.
#[derive(Debug, Clone)]
pub struct Attributes {
    pub cluster: String,
    pub operation: Operation,
    pub group: String,
    pub version: String,
    pub kind: String,
    pub resource: String,
    pub subresource: String,
    pub namespaced: bool,
    pub namespace: String,
    pub name: String,
    pub user: UserInfo,
    pub dry_run: bool,
    /// `fieldManager` of a create or update.
    pub field_manager: String,
}

impl Attributes {
    /// The attributes of a request for `res`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        cluster: &str,
        user: &UserInfo,
        res: &ResourceDef,
        subresource: Option<&str>,
        operation: Operation,
        namespace: &str,
        name: &str,
        dry_run: bool,
    ) -> Attributes {
        Attributes {
            cluster: cluster.to_string(),
            operation,
            group: res.group.clone(),
            version: res.version.clone(),
            kind: res.kind.clone(),
            resource: res.plural.clone(),
            subresource: subresource.unwrap_or("").to_string(),
            namespaced: res.namespaced,
            namespace: namespace.to_string(),
            name: name.to_string(),
            user: user.clone(),
            dry_run,
            field_manager: String::new(),
        }
    }

    pub(crate) fn rule_request<'a>(&'a self, version: &'a str) -> config::Request<'a> {
        config::Request {
            operation: self.operation.as_str(),
            group: &self.group,
            version,
            resource: &self.resource,
            subresource: &self.subresource,
            namespaced: self.namespaced,
        }
    }
}

/// Whether `cluster` has any webhook configuration of either kind (the cheap test before a
/// write sets up admission).
pub fn any(cp: &ControlPlane, cluster: &str) -> bool {
    configured(cp, cluster, Kind::Mutating) || configured(cp, cluster, Kind::Validating)
}

/// Whether `cluster` has validating webhook configurations.
pub fn any_validating(cp: &ControlPlane, cluster: &str) -> bool {
    configured(cp, cluster, Kind::Validating)
}

/// Whether `cluster` has configurations of `kind` (a count in the cache: nothing parsed).
fn configured(cp: &ControlPlane, cluster: &str, kind: Kind) -> bool {
    cp.store
        .cache_for_reads(cluster)
        .count("admissionregistration.k8s.io", kind.plural(), cluster)
        > 0
}

/// Webhooks are never called for the objects that configure admission (upstream: so a broken
/// webhook can always be removed).
fn exempt(attrs: &Attributes) -> bool {
    attrs.group == "admissionregistration.k8s.io"
}

fn labels_of(obj: Option<&Value>) -> Option<&Value> {
    obj.and_then(|o| o.pointer("/metadata/labels"))
}

/// The version of the resource a rule set matches for this request: the request's own, or
/// with `equivalent` (`matchPolicy: Equivalent`) another version the cluster serves.
pub(crate) fn matched_version<'r>(
    cp: &ControlPlane,
    rules: impl Iterator<Item = &'r config::Rule> + Clone,
    equivalent: bool,
    attrs: &Attributes,
    equivalents: &mut Option<Vec<String>>,
) -> Option<String> {
    let exact = attrs.rule_request(&attrs.version);
    if rules.clone().any(|r| config::rule_matches(r, &exact)) {
        return Some(attrs.version.clone());
    }
    if !equivalent {
        return None;
    }
    let versions = equivalents.get_or_insert_with(|| {
        cp.catalog
            .all(&attrs.cluster)
            .iter()
            .filter(|r| {
                r.group == attrs.group && r.plural == attrs.resource && r.version != attrs.version
            })
            .map(|r| r.version.clone())
            .collect()
    });
    versions
        .iter()
        .find(|v| {
            let req = attrs.rule_request(v);
            rules.clone().any(|r| config::rule_matches(r, &req))
        })
        .cloned()
}

/// Whether a namespace selector admits the request (upstream: a namespace is matched by its
/// own labels, other cluster-scoped objects always match).
pub(crate) fn namespace_matches(
    cp: &ControlPlane,
    selector: &Selector,
    attrs: &Attributes,
    obj: Option<&Value>,
    old: Option<&Value>,
) -> bool {
    if selector.is_empty() {
        return true;
    }
    if attrs.group.is_empty() && attrs.resource == "namespaces" {
        let labels = labels_of(obj).or(labels_of(old));
        return selector.matches_json(labels);
    }
    if !attrs.namespaced {
        return true;
    }
    selector.matches_json(labels_of(namespace_object(cp, attrs).as_deref()))
}

/// The namespace of a namespaced request, from the cache.
pub(crate) fn namespace_object(cp: &ControlPlane, attrs: &Attributes) -> Option<Arc<Value>> {
    if !attrs.namespaced || attrs.namespace.is_empty() {
        return None;
    }
    cp.store
        .cache_for_reads(&attrs.cluster)
        .get("", "namespaces", &attrs.cluster, "", &attrs.namespace)
        .map(|n| n.value())
}

/// Whether an object selector admits the new or the old object.
pub(crate) fn object_matches(
    selector: &Selector,
    obj: Option<&Value>,
    old: Option<&Value>,
) -> bool {
    if selector.is_empty() {
        return true;
    }
    [obj, old]
        .into_iter()
        .flatten()
        .any(|o| selector.matches_json(labels_of(Some(o))))
}

/// The `request` of the review (and of `matchConditions`).
pub(crate) fn review_request(
    attrs: &Attributes,
    version: &str,
    uid: &str,
    obj: Option<&Value>,
    old: Option<&Value>,
) -> Value {
    let gvk = |v: &str| json!({"group": attrs.group, "version": v, "kind": attrs.kind});
    let gvr = |v: &str| json!({"group": attrs.group, "version": v, "resource": attrs.resource});
    let mut req = json!({
        "uid": uid,
        "kind": gvk(version),
        "resource": gvr(version),
        "requestKind": gvk(&attrs.version),
        "requestResource": gvr(&attrs.version),
        "operation": attrs.operation.as_str(),
        "userInfo": user_info(&attrs.user),
        "object": obj.cloned().unwrap_or(Value::Null),
        "oldObject": old.cloned().unwrap_or(Value::Null),
        "dryRun": attrs.dry_run,
    });
    let m = req.as_object_mut().expect("a JSON object literal");
    if !attrs.subresource.is_empty() {
        m.insert("subResource".into(), json!(attrs.subresource));
        m.insert("requestSubResource".into(), json!(attrs.subresource));
    }
    if !attrs.name.is_empty() {
        m.insert("name".into(), json!(attrs.name));
    }
    if !attrs.namespace.is_empty() {
        m.insert("namespace".into(), json!(attrs.namespace));
    }
    let kind = attrs.operation.options_kind();
    if !kind.is_empty() {
        let mut options = json!({"kind": kind, "apiVersion": "meta.k8s.io/v1"});
        if attrs.dry_run {
            options["dryRun"] = json!(["All"]);
        }
        if !attrs.field_manager.is_empty() && attrs.operation != Operation::Delete {
            options["fieldManager"] = json!(attrs.field_manager);
        }
        m.insert("options".into(), options);
    }
    req
}

fn user_info(u: &UserInfo) -> Value {
    let mut v = json!({"username": u.name});
    if !u.uid.is_empty() {
        v["uid"] = json!(u.uid);
    }
    if !u.groups.is_empty() {
        v["groups"] = json!(u.groups);
    }
    if !u.extra.is_empty() {
        let extra: serde_json::Map<String, Value> = u
            .extra
            .iter()
            .map(|(k, vs)| (k.clone(), json!(vs)))
            .collect();
        v["extra"] = Value::Object(extra);
    }
    v
}

/// Converts an object between versions of its resource for a webhook that matched another
/// version (custom resources with `None` conversion differ only in `apiVersion`).
pub(crate) fn in_version(obj: Option<&Value>, group: &str, version: &str) -> Option<Value> {
    obj.map(|o| {
        let mut o = o.clone();
        if group.is_empty() {
            o["apiVersion"] = json!(version);
        } else {
            crd::convert::set_api_version(&mut o, group, version);
        }
        o
    })
}

/// Upstream `ToStatusErr`: a refusal with the webhook's status, at least a 400.
pub fn denied(name: &str, status: &Value) -> ApiError {
    let denied_by = format!("admission webhook {name:?} denied the request");
    let message = status.get("message").and_then(Value::as_str).unwrap_or("");
    let reason = status.get("reason").and_then(Value::as_str).unwrap_or("");
    let text = if !message.is_empty() {
        format!("{denied_by}: {message}")
    } else if !reason.is_empty() {
        format!("{denied_by}: {reason}")
    } else {
        format!("{denied_by} without explanation")
    };
    let code = status
        .get("code")
        .and_then(Value::as_u64)
        .and_then(|c| u16::try_from(c).ok())
        .filter(|c| (400..600).contains(c))
        .unwrap_or(400);
    let mut e = ApiError::new(code, Reason::from_name(reason), text);
    if let Some(causes) = status.pointer("/details/causes").and_then(Value::as_array) {
        for c in causes {
            let s = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or("");
            e = e.with_cause(s("reason"), s("message"), s("field"));
        }
    }
    e
}

/// What one call decided.
enum Outcome {
    /// Not interested (a match condition was false).
    Skipped,
    /// Allowed, perhaps with a JSON patch (mutating).
    Allowed(Option<Value>),
}

fn failed(hook: &Webhook, why: &str) -> ApiError {
    ApiError::internal(format!("failed calling webhook {:?}: {why}", hook.name))
}

/// Evaluates the webhook's `matchConditions`: all true → interested.
fn conditions_match(hook: &Webhook, request: &Value) -> Result<bool, String> {
    use crate::admission::cel;
    if hook.match_conditions.is_empty() {
        return Ok(true);
    }
    let vars = cel::Vars::default()
        .json("object", request.get("object").filter(|o| !o.is_null()))
        .json(
            "oldObject",
            request.get("oldObject").filter(|o| !o.is_null()),
        )
        .json("request", Some(request));
    for (name, program) in &hook.match_conditions {
        let program = program
            .as_ref()
            .map_err(|e| format!("match condition {name:?}: {e}"))?;
        match cel::eval_bool(program, &vars) {
            Ok(true) => {}
            Ok(false) => return Ok(false),
            Err(e) => return Err(format!("failed to evaluate match condition {name:?}: {e}")),
        }
    }
    Ok(true)
}

/// [`call_one_untimed`], observed in `/metrics`.
async fn call_one(
    cp: &ControlPlane,
    hook: &Webhook,
    attrs: &Attributes,
    version: &str,
    obj: Option<&Value>,
    old: Option<&Value>,
    warnings: &Mutex<Vec<String>>,
) -> Result<Outcome, ApiError> {
    let started = std::time::Instant::now();
    let outcome = call_one_untimed(cp, hook, attrs, version, obj, old, warnings).await;
    if !matches!(outcome, Ok(Outcome::Skipped)) {
        let kind = if hook.mutating { "admit" } else { "validating" };
        cp.metrics.observe_webhook(
            kind,
            attrs.operation.as_str(),
            outcome.is_err(),
            started.elapsed(),
        );
    }
    outcome
}

/// Sends one review and reads its answer; `Err` is the request's refusal (a denial, or a
/// failure under `failurePolicy: Fail`). `Ok(Skipped)` also covers an ignored failure.
async fn call_one_untimed(
    cp: &ControlPlane,
    hook: &Webhook,
    attrs: &Attributes,
    version: &str,
    obj: Option<&Value>,
    old: Option<&Value>,
    warnings: &Mutex<Vec<String>>,
) -> Result<Outcome, ApiError> {
    if attrs.dry_run && !hook.dry_run_safe() {
        return Err(ApiError::bad_request(format!(
            "admission webhook {:?} does not support dry run",
            hook.name
        )));
    }
    let uid = uuid::Uuid::new_v4().to_string();
    let request = review_request(attrs, version, &uid, obj, old);
    let fail = |why: String| -> Result<Outcome, ApiError> {
        if hook.ignore_failure {
            tracing::warn!(webhook = %hook.name, "admission webhook failed, ignored: {why}");
            Ok(Outcome::Skipped)
        } else {
            Err(failed(hook, &why))
        }
    };
    match conditions_match(hook, &request) {
        Ok(true) => {}
        Ok(false) => return Ok(Outcome::Skipped),
        Err(e) => return fail(e),
    }
    let Some(review_version) = hook.review_version else {
        return fail("webhook does not accept v1 or v1beta1 AdmissionReview".into());
    };
    let review = json!({
        "apiVersion": format!("admission.k8s.io/{review_version}"),
        "kind": "AdmissionReview",
        "request": request,
    });
    let answer = match client::call(
        cp,
        &attrs.cluster,
        &hook.target,
        hook.ca_bundle.as_deref(),
        &review,
        hook.timeout,
    )
    .await
    {
        Ok(a) => a,
        Err(e) => return fail(format!("failed to call webhook: {}", e.0)),
    };
    let Some(response) = answer.get("response").filter(|r| r.is_object()) else {
        return fail("admission review response is missing".into());
    };
    let got_uid = response.get("uid").and_then(Value::as_str).unwrap_or("");
    if review_version == "v1" && got_uid != uid {
        return fail(format!("expected response.uid={uid:?}, got {got_uid:?}"));
    }
    if let Some(ws) = response.get("warnings").and_then(Value::as_array) {
        let mut w = warnings.lock();
        w.extend(ws.iter().filter_map(Value::as_str).map(str::to_string));
    }
    if let Some(a) = response.get("auditAnnotations").and_then(Value::as_object) {
        for (k, v) in a {
            tracing::debug!(webhook = %hook.name, key = %k, value = %v, "audit annotation");
        }
    }
    if response.get("allowed").and_then(Value::as_bool) != Some(true) {
        return Err(denied(
            &hook.name,
            response.get("status").unwrap_or(&Value::Null),
        ));
    }
    let patch = match response.get("patch").and_then(Value::as_str) {
        None | Some("") => None,
        Some(p) => {
            let kind = response
                .get("patchType")
                .and_then(Value::as_str)
                .unwrap_or("");
            if kind != "JSONPatch" {
                return fail(format!("unsupported patch type {kind:?}"));
            }
            use base64::Engine;
            let bytes = match base64::engine::general_purpose::STANDARD.decode(p) {
                Ok(b) => b,
                Err(e) => return fail(format!("the patch is not base64: {e}")),
            };
            match serde_json::from_slice::<Value>(&bytes) {
                Ok(v) => Some(v),
                Err(e) => return fail(format!("the patch is not JSON: {e}")),
            }
        }
    };
    Ok(Outcome::Allowed(patch))
}

/// The version `hook` wants if it is interested in the request.
fn interested(
    cp: &ControlPlane,
    hook: &Webhook,
    attrs: &Attributes,
    obj: Option<&Value>,
    old: Option<&Value>,
    equivalents: &mut Option<Vec<String>>,
) -> Option<String> {
    let v = matched_version(cp, hook.rules.iter(), hook.equivalent, attrs, equivalents)?;
    (namespace_matches(cp, &hook.namespace_selector, attrs, obj, old)
        && object_matches(&hook.object_selector, obj, old))
    .then_some(v)
}

/// Calls one mutating webhook over `obj` and applies its patch; returns whether it changed
/// the object.
async fn mutate_one(
    cp: &ControlPlane,
    hook: &Webhook,
    attrs: &Attributes,
    version: &str,
    obj: &mut Value,
    old: Option<&Value>,
    warnings: &Mutex<Vec<String>>,
) -> Result<bool, ApiError> {
    let converted = version != attrs.version;
    let sent = if converted {
        in_version(Some(obj), &attrs.group, version)
    } else {
        Some(obj.clone())
    };
    let old_sent = if converted {
        in_version(old, &attrs.group, version)
    } else {
        old.cloned()
    };
    let outcome = call_one(
        cp,
        hook,
        attrs,
        version,
        sent.as_ref(),
        old_sent.as_ref(),
        warnings,
    )
    .await?;
    let (Outcome::Allowed(Some(patch)), Some(sent)) = (outcome, sent) else {
        return Ok(false);
    };
    let patched = match apimachinery::patch::json_patch(&sent, &patch) {
        Ok(p) => p,
        Err(e) if hook.ignore_failure => {
            tracing::warn!(webhook = %hook.name, "admission webhook patch failed, ignored: {e:?}");
            return Ok(false);
        }
        Err(e) => {
            return Err(failed(
                hook,
                &format!("JSON patch failed: {}", e.to_api_error().message),
            ));
        }
    };
    let patched = if converted {
        in_version(Some(&patched), &attrs.group, &attrs.version).unwrap_or(patched)
    } else {
        patched
    };
    if patched == *obj {
        return Ok(false);
    }
    *obj = patched;
    Ok(true)
}

/// Runs the mutating webhooks over `obj` (absent for a delete, whose patches are ignored);
/// returns whether any changed it.
pub async fn mutate(
    cp: &ControlPlane,
    attrs: &Attributes,
    mut obj: Option<&mut Value>,
    old: Option<&Value>,
    warnings: &Mutex<Vec<String>>,
) -> Result<bool, ApiError> {
    let configs = config::webhooks(cp, &attrs.cluster, Kind::Mutating);
    if configs.is_empty() || exempt(attrs) {
        return Ok(false);
    }
    let hooks: Vec<&Webhook> = configs.iter().flat_map(|c| c.iter()).collect();
    let mut equivalents = None;
    // Which webhooks were called, and whether each changed the object.
    let mut called: Vec<(usize, String)> = Vec::new();
    let mut changed: Vec<bool> = Vec::new();
    for (i, hook) in hooks.iter().enumerate() {
        let Some(version) = interested(cp, hook, attrs, obj.as_deref(), old, &mut equivalents)
        else {
            continue;
        };
        let did = match obj.as_deref_mut() {
            Some(o) => mutate_one(cp, hook, attrs, &version, o, old, warnings).await?,
            None => {
                call_one(cp, hook, attrs, &version, None, old, warnings).await?;
                false
            }
        };
        called.push((i, version));
        changed.push(did);
    }
    // Reinvocation (`IfNeeded`): once more for a webhook a later one changed the object after.
    let Some(o) = obj else {
        return Ok(false);
    };
    for (k, (i, version)) in called.iter().enumerate() {
        let hook = hooks[*i];
        if hook.reinvoke && changed[k + 1..].iter().any(|c| *c) {
            let still = interested(cp, hook, attrs, Some(o), old, &mut equivalents);
            if still.is_some() {
                mutate_one(cp, hook, attrs, version, o, old, warnings).await?;
            }
        }
    }
    Ok(changed.iter().any(|c| *c))
}

/// Runs the validating webhooks (in parallel) over `obj` (absent for a delete).
pub async fn validate(
    cp: &ControlPlane,
    attrs: &Attributes,
    obj: Option<&Value>,
    old: Option<&Value>,
    warnings: &Mutex<Vec<String>>,
) -> Result<(), ApiError> {
    let configs = config::webhooks(cp, &attrs.cluster, Kind::Validating);
    if configs.is_empty() || exempt(attrs) {
        return Ok(());
    }
    let mut equivalents = None;
    let calls: Vec<_> = configs
        .iter()
        .flat_map(|c| c.iter())
        .filter_map(|hook| {
            let version = interested(cp, hook, attrs, obj, old, &mut equivalents)?;
            Some(async move {
                if version == attrs.version {
                    call_one(cp, hook, attrs, &version, obj, old, warnings).await
                } else {
                    let o = in_version(obj, &attrs.group, &version);
                    let p = in_version(old, &attrs.group, &version);
                    call_one(cp, hook, attrs, &version, o.as_ref(), p.as_ref(), warnings).await
                }
            })
        })
        .collect();
    for r in futures::future::join_all(calls).await {
        r?;
    }
    Ok(())
}

/// Admission the store runs inside an update or patch: mutating webhooks, then (once the
/// object is prepared and valid) validating webhooks and admission policies. A write whose
/// object does not exist yet (server-side apply creating it) is admitted as a CREATE.
pub struct StoreAdmission {
    pub cp: Arc<ControlPlane>,
    pub attrs: Attributes,
    /// Whether mutating webhooks run here (a create runs them in its handler).
    pub mutating: bool,
    /// Warnings of the webhooks and policies, for the response.
    pub warnings: Mutex<Vec<String>>,
}

impl StoreAdmission {
    fn attrs_for(&self, old: Option<&Value>) -> Attributes {
        let mut a = self.attrs.clone();
        if old.is_none() {
            a.operation = Operation::Create;
        }
        a
    }
}

#[async_trait::async_trait]
impl registry::store::Admit for StoreAdmission {
    async fn mutate(&self, new: &mut Value, old: Option<&Value>) -> Result<bool, ApiError> {
        if !self.mutating {
            return Ok(false);
        }
        let attrs = self.attrs_for(old);
        mutate(&self.cp, &attrs, Some(new), old, &self.warnings).await
    }

    async fn validate(&self, new: &Value, old: Option<&Value>) -> Result<(), ApiError> {
        let mut attrs = self.attrs_for(old);
        if attrs.name.is_empty() {
            attrs.name = meta::name(new).to_string();
        }
        crate::admission::validate_external(&self.cp, &attrs, Some(new), old, &self.warnings).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_reads_and_codes_as_upstream() {
        let e = denied(
            "deny.example.com",
            &json!({"code": 403, "reason": "Forbidden", "message": "no thanks"}),
        );
        assert_eq!(e.code, 403);
        assert_eq!(e.reason, Reason::Forbidden);
        assert_eq!(
            e.message,
            "admission webhook \"deny.example.com\" denied the request: no thanks"
        );
        let e = denied("d", &json!({"code": 200}));
        assert_eq!(e.code, 400);
        assert_eq!(
            e.message,
            "admission webhook \"d\" denied the request without explanation"
        );
        let e = denied("d", &Value::Null);
        assert_eq!((e.code, e.reason), (400, Reason::Unknown));
        let e = denied("d", &json!({"reason": "Because"}));
        assert_eq!(
            e.message,
            "admission webhook \"d\" denied the request: Because"
        );
    }

    #[test]
    fn the_review_request_carries_what_upstream_sends() {
        let user = UserInfo::new("alice", &["devs"]);
        let attrs = Attributes {
            cluster: "c".into(),
            operation: Operation::Update,
            group: "apps".into(),
            version: "v1".into(),
            kind: "Deployment".into(),
            resource: "deployments".into(),
            subresource: "scale".into(),
            namespaced: true,
            namespace: "ns".into(),
            name: "web".into(),
            user,
            dry_run: true,
            field_manager: "kubectl".into(),
        };
        let obj = json!({"a": 1});
        let r = review_request(&attrs, "v1", "u-1", Some(&obj), None);
        assert_eq!(r["uid"], "u-1");
        assert_eq!(
            r["kind"],
            json!({"group": "apps", "version": "v1", "kind": "Deployment"})
        );
        assert_eq!(r["resource"]["resource"], "deployments");
        assert_eq!(r["subResource"], "scale");
        assert_eq!(r["operation"], "UPDATE");
        assert_eq!(
            r["userInfo"],
            json!({"username": "alice", "groups": ["devs"]})
        );
        assert_eq!(r["object"], obj);
        assert_eq!(r["oldObject"], Value::Null);
        assert_eq!(r["dryRun"], true);
        assert_eq!(
            r["options"],
            json!({"kind": "UpdateOptions", "apiVersion": "meta.k8s.io/v1", "dryRun": ["All"], "fieldManager": "kubectl"})
        );
    }
}
