//! The write pipeline: create, update, patch, delete and deletecollection, in upstream's order.
//!
//! A write's object (decoded by the HTTP layer) goes through: type checks and field validation
//! of the request (Strict/Warn/Ignore), pruning, the defaults admission adds (service-account
//! token volumes, legacy token Secrets), RBAC escalation prevention, mutating webhooks, the
//! strategy's preparation and validation (inside the store's write), in-process validating
//! hooks, LimitRanger's bounds, validating policies and webhooks, and the quota charge. Nothing
//! is stored unless every stage passed; a patch is applied to the current object first, then
//! pruned and admitted like an update.

use std::sync::Arc;

use apimachinery::meta;
use apimachinery::status::ApiError;
use parking_lot::Mutex;
use registry::ResourceDef;
use registry::cache::CachedObject;
use registry::store::{DeleteOptions, Deleted, ListRequest, Location, WriteOptions};
use serde_json::Value;

use crate::admission::webhook::{self, Attributes, Operation, StoreAdmission};
use crate::patching::{self, PatchKind};
use crate::{ControlPlane, Requester};

/// `fieldValidation`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldValidation {
    Strict,
    Warn,
    Ignore,
}

/// Options every write shares.
pub struct Write {
    pub opts: WriteOptions,
    /// The field manager the write is recorded under.
    pub manager: String,
    pub validation: FieldValidation,
}

/// A patch: its type, its decoded body, and whether an apply takes conflicting fields over.
pub struct Patch {
    pub kind: PatchKind,
    pub body: Value,
    pub force: bool,
}

/// Reports the unknown fields of a request's object per `fieldValidation` (Strict: 400; Warn:
/// warnings).
pub fn check_fields(
    who: &mut Requester<'_>,
    res: &ResourceDef,
    obj: &Value,
    v: FieldValidation,
) -> Result<(), ApiError> {
    if v == FieldValidation::Ignore {
        return Ok(());
    }
    let unknown = crate::fields::unknown(res, obj);
    if unknown.is_empty() {
        return Ok(());
    }
    match v {
        FieldValidation::Strict => Err(strict_error(&unknown)),
        _ => {
            for f in unknown {
                who.warnings.push(format!("unknown field \"{f}\""));
            }
            Ok(())
        }
    }
}

/// The 400 of `fieldValidation=Strict`, naming every unknown field.
fn strict_error(unknown: &[String]) -> ApiError {
    let msgs: Vec<String> = unknown
        .iter()
        .map(|f| format!("unknown field \"{f}\""))
        .collect();
    ApiError::bad_request(format!("strict decoding error: {}", msgs.join(", ")))
}

/// A CertificateSigningRequest records who asked (`spec.username`, `uid`, `groups`, `extra`),
/// whatever the request says: approvers and signers decide on it.
fn record_requester(user: &apimachinery::user::UserInfo, obj: &mut Value) {
    if !obj.get("spec").is_some_and(Value::is_object) {
        return;
    }
    let spec = &mut obj["spec"];
    spec["username"] = Value::String(user.name.clone());
    match user.uid.is_empty() {
        true => {
            if let Some(s) = spec.as_object_mut() {
                s.remove("uid");
            }
        }
        false => spec["uid"] = Value::String(user.uid.clone()),
    }
    spec["groups"] = serde_json::json!(user.groups);
    let extra: serde_json::Map<String, Value> = user
        .extra
        .iter()
        .map(|(k, v)| (k.clone(), serde_json::json!(v)))
        .collect();
    match extra.is_empty() {
        true => {
            if let Some(s) = spec.as_object_mut() {
                s.remove("extra");
            }
        }
        false => spec["extra"] = Value::Object(extra),
    }
}

/// Checks of a write against what the object was: escalation prevention for RBAC objects,
/// and NodeRestriction's label rules for a node writing its Node.
fn rbac_guard(
    cp: &ControlPlane,
    who: &Requester<'_>,
    res: &ResourceDef,
    namespace: &str,
    new: &Value,
    old: Option<&Value>,
) -> Result<(), ApiError> {
    if res.group.is_empty() && res.plural == "nodes" {
        return node_label_guard(who, res, new, old);
    }
    if res.group != "rbac.authorization.k8s.io" {
        return Ok(());
    }
    crate::authz::check_rbac_write(cp, who.cluster, who.user, &res.plural, namespace, new, old)
}

/// The labels a kubelet may set on its own Node in the `kubernetes.io` and `k8s.io`
/// namespaces (upstream `KubeletLabels`), besides those under `kubelet.kubernetes.io/` and
/// `node.kubernetes.io/`.
const KUBELET_LABELS: &[&str] = &[
    "kubernetes.io/hostname",
    "kubernetes.io/arch",
    "kubernetes.io/os",
    "beta.kubernetes.io/arch",
    "beta.kubernetes.io/os",
    "beta.kubernetes.io/instance-type",
    "node.kubernetes.io/instance-type",
    "topology.kubernetes.io/region",
    "topology.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
];

/// Whether a node may not set label `key` on itself (NodeRestriction): `node-restriction.
/// kubernetes.io/` labels, and `kubernetes.io` / `k8s.io` labels a kubelet does not own —
/// `node-role.kubernetes.io/*` among them, which only the node's owner sets.
pub fn node_label_restricted(key: &str) -> bool {
    let Some((domain, _)) = key.split_once('/') else {
        return false;
    };
    let under = |d: &str| domain == d || domain.ends_with(&format!(".{d}"));
    if under("node-restriction.kubernetes.io") {
        return true;
    }
    if !(under("kubernetes.io") || under("k8s.io")) {
        return false;
    }
    !(KUBELET_LABELS.contains(&key)
        || under("kubelet.kubernetes.io")
        || under("node.kubernetes.io"))
}

/// NodeRestriction on a node's own Node: no restricted label set at creation, none changed
/// (added, modified or removed) after.
fn node_label_guard(
    who: &Requester<'_>,
    res: &ResourceDef,
    new: &Value,
    old: Option<&Value>,
) -> Result<(), ApiError> {
    let Some(node) = crate::node_authz::node_name(who.user) else {
        return Ok(());
    };
    let labels = |v: Option<&Value>| {
        v.and_then(|v| v.pointer("/metadata/labels"))
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default()
    };
    let (now, before) = (labels(Some(new)), labels(old));
    let mut changed: Vec<&str> = now
        .iter()
        .filter(|(k, v)| before.get(*k) != Some(v))
        .map(|(k, _)| k.as_str())
        .chain(
            before
                .keys()
                .filter(|k| !now.contains_key(*k))
                .map(String::as_str),
        )
        .filter(|k| node_label_restricted(k))
        .collect();
    if changed.is_empty() {
        return Ok(());
    }
    changed.sort_unstable();
    changed.dedup();
    let message = if old.is_none() {
        format!(
            "node {node:?} is not allowed to set the following labels: {}",
            changed.join(", ")
        )
    } else {
        format!("is not allowed to modify labels: {}", changed.join(", "))
    };
    Err(ApiError::forbidden(
        &res.plural,
        &res.group,
        meta::name(new),
        &message,
    ))
}

/// Sets up admission outside the server (webhooks) inside the store's update of `loc`, when
/// the cluster has any; the returned handle holds their warnings.
fn store_admission(
    cp: &Arc<ControlPlane>,
    who: &Requester<'_>,
    res: &ResourceDef,
    loc: &Location<'_>,
    w: &mut Write,
) -> Option<Arc<StoreAdmission>> {
    if !crate::admission::any_external(cp, who.cluster) {
        return None;
    }
    let mut attrs = Attributes::new(
        who.cluster,
        who.user,
        res,
        w.opts.subresource.as_deref(),
        Operation::Update,
        loc.namespace,
        loc.name,
        w.opts.dry_run,
    );
    attrs.field_manager = w.manager.clone();
    let adm = Arc::new(StoreAdmission {
        cp: cp.clone(),
        attrs,
        mutating: true,
        warnings: Mutex::new(Vec::new()),
    });
    w.opts.admission = Some(registry::store::Admission(adm.clone()));
    Some(adm)
}

/// Admission configuration takes effect when its write returns: the write waits for the
/// watch cache (which admission reads) to hold it. Other writes return at once.
async fn settle(cp: &ControlPlane, cluster: &str, res: &ResourceDef, written: &Value) {
    if res.group != "admissionregistration.k8s.io" {
        return;
    }
    if let Ok(rev) = meta::resource_version(written).parse::<i64>() {
        cp.store
            .cache_for_reads(cluster)
            .wait_for(rev, registry::store::RESOURCE_VERSION_WAIT)
            .await;
    }
}

/// In-process validators judge a write against other objects read from the watch cache (a
/// child tenant's quota against its siblings', say): before they run, the cache catches up
/// with every write already acknowledged, so a sibling created just before is seen.
async fn catch_up_for_validators(cp: &ControlPlane, res: &ResourceDef) {
    if cp.admission.any_for(&res.group, &res.plural) {
        cp.store.wait_for_cache().await;
    }
}

/// Moves the warnings of webhooks run by the store to the requester.
fn take_warnings(who: &mut Requester<'_>, adm: Option<Arc<StoreAdmission>>) {
    if let Some(a) = adm {
        who.warnings.extend(std::mem::take(&mut *a.warnings.lock()));
    }
}

/// Creates `obj` at `loc`; returns the stored object.
pub async fn create(
    cp: &Arc<ControlPlane>,
    who: &mut Requester<'_>,
    res: &ResourceDef,
    loc: &Location<'_>,
    mut w: Write,
    mut obj: Value,
) -> Result<Value, ApiError> {
    crate::fields::check_types(res, &obj)?;
    check_fields(who, res, &obj, w.validation)?;
    crate::fields::prune(res, &mut obj);
    if res.group.is_empty() && res.plural == "secrets" {
        if !loc.namespace.is_empty() && meta::namespace(&obj).is_empty() {
            meta::set(&mut obj, "namespace", loc.namespace);
        }
        crate::tokens::fill_legacy_token(cp, who.cluster, &mut obj)?;
    }
    if res.group.is_empty() && res.plural == "pods" && !loc.namespace.is_empty() {
        crate::admission::service_account::admit_pod(cp, who.cluster, loc.namespace, &mut obj);
    }
    if res.group == "certificates.k8s.io" && res.plural == "certificatesigningrequests" {
        record_requester(who.user, &mut obj);
    }
    // NodeRestriction: a node creates only its own Node.
    if res.group.is_empty()
        && res.plural == "nodes"
        && let Some(node) = crate::node_authz::node_name(who.user)
        && meta::name(&obj) != node
    {
        return Err(ApiError::forbidden(
            &res.plural,
            &res.group,
            meta::name(&obj),
            &format!(
                "node {node:?} is not allowed to modify node {:?}",
                meta::name(&obj)
            ),
        ));
    }
    rbac_guard(cp, who, res, loc.namespace, &obj, None)?;
    catch_up_for_validators(cp, res).await;
    let mut attrs = Attributes::new(
        who.cluster,
        who.user,
        res,
        None,
        Operation::Create,
        loc.namespace,
        meta::name(&obj),
        w.opts.dry_run,
    );
    attrs.field_manager = w.manager.clone();
    let warnings = Mutex::new(Vec::new());
    let admitted = async {
        if crate::admission::any_external(cp, who.cluster)
            && webhook::mutate(cp, &attrs, Some(&mut obj), None, &warnings).await?
        {
            crate::fields::check_types(res, &obj)?;
        }
        crate::admission::mutate(cp, who, res, loc, &mut obj, w.opts.dry_run)?;
        crate::admission::validate(cp, who, res, loc, None, &obj, None, w.opts.dry_run)?;
        crate::admission::admit_create(
            cp,
            who.cluster,
            res,
            loc,
            &mut obj,
            w.opts.dry_run,
            &attrs,
            &warnings,
        )
        .await
    }
    .await;
    who.warnings.extend(warnings.into_inner());
    // Validating webhooks and policies the admission left to the write itself.
    let adm = match admitted? {
        true => {
            let adm = Arc::new(StoreAdmission {
                cp: cp.clone(),
                attrs,
                mutating: false,
                warnings: Mutex::new(Vec::new()),
            });
            w.opts.admission = Some(registry::store::Admission(adm.clone()));
            Some(adm)
        }
        false => None,
    };
    patching::track_update(res, None, &mut obj, &w.manager, None);
    let created = cp.store.create(res, loc, obj, &w.opts).await;
    take_warnings(who, adm);
    let created = created?;
    settle(cp, who.cluster, res, &created).await;
    who.warnings.extend(res.strategy.warnings(&created));
    Ok(created)
}

/// Replaces the object at `loc` (or its subresource `w.opts.subresource`) with `obj`; returns
/// the stored object and whether it was created.
pub async fn update(
    cp: &Arc<ControlPlane>,
    who: &mut Requester<'_>,
    res: &ResourceDef,
    loc: &Location<'_>,
    mut w: Write,
    mut obj: Value,
) -> Result<(Value, bool), ApiError> {
    let adm = store_admission(cp, who, res, loc, &mut w);
    crate::fields::check_types(res, &obj)?;
    check_fields(who, res, &obj, w.validation)?;
    crate::fields::prune(res, &mut obj);
    // A replace without resourceVersion is allowed for most resources, not for all (CRDs and
    // custom resources require one, as upstream does). Patches always carry what they read.
    if meta::resource_version(&obj).is_empty() && !res.strategy.allow_unconditional_update() {
        let errs = vec![apimachinery::FieldError::invalid(
            "metadata.resourceVersion",
            serde_json::json!(""),
            "must be specified for an update",
        )];
        return Err(ApiError::invalid(
            &res.kind,
            &res.group,
            loc.name,
            &errs.into(),
        ));
    }
    let subresource = w.opts.subresource.clone();
    let subresource = subresource.as_deref();
    catch_up_for_validators(cp, res).await;
    let result = {
        let who = &*who;
        cp.store
            .update_with(res, loc, &w.opts, |cur| {
                let mut new = obj.clone();
                match cur {
                    None => Err(ApiError::not_found(&res.plural, &res.group, loc.name)),
                    Some(cur) => {
                        rbac_guard(cp, who, res, loc.namespace, &new, Some(cur))?;
                        crate::admission::validate(
                            cp,
                            who,
                            res,
                            loc,
                            subresource,
                            &new,
                            Some(cur),
                            w.opts.dry_run,
                        )?;
                        patching::track_update(res, Some(cur), &mut new, &w.manager, subresource);
                        Ok(new)
                    }
                }
            })
            .await
    };
    take_warnings(who, adm);
    let (stored, created) = result?;
    settle(cp, who.cluster, res, &stored).await;
    Ok((stored, created))
}

/// Patches the object at `loc` (or its subresource); returns the stored object and whether it
/// was created (an apply may create).
pub async fn patch(
    cp: &Arc<ControlPlane>,
    who: &mut Requester<'_>,
    res: &ResourceDef,
    loc: &Location<'_>,
    mut w: Write,
    patch: Patch,
) -> Result<(Value, bool), ApiError> {
    apimachinery::depth::check(&patch.body)?;
    if patch.kind == PatchKind::Apply {
        check_fields(who, res, &patch.body, w.validation)?;
    }
    let subresource = w.opts.subresource.clone();
    let subresource = subresource.as_deref();
    // Unknown fields of the patched object (not of the patch: a merge patch may name any
    // path), found before anything is written: Strict refuses the patch unstored, Warn
    // warns once it is written. The object is then pruned like an update's.
    let mut unknown = Vec::new();
    let adm = store_admission(cp, who, res, loc, &mut w);
    catch_up_for_validators(cp, res).await;
    let result = {
        let who = &*who;
        cp.store
            .update_with(res, loc, &w.opts, |cur| {
                let mut new = patching::apply(
                    res,
                    patch.kind,
                    cur,
                    &patch.body,
                    &w.manager,
                    subresource,
                    patch.force,
                    loc,
                )?;
                crate::fields::check_types(res, &new)?;
                if patch.kind != PatchKind::Apply && w.validation != FieldValidation::Ignore {
                    unknown = crate::fields::unknown(res, &new);
                    if w.validation == FieldValidation::Strict && !unknown.is_empty() {
                        return Err(strict_error(&unknown));
                    }
                }
                crate::fields::prune(res, &mut new);
                rbac_guard(cp, who, res, loc.namespace, &new, cur)?;
                crate::admission::validate(
                    cp,
                    who,
                    res,
                    loc,
                    subresource,
                    &new,
                    cur,
                    w.opts.dry_run,
                )?;
                Ok(new)
            })
            .await
    };
    take_warnings(who, adm);
    let (stored, created) = result?;
    settle(cp, who.cluster, res, &stored).await;
    for f in unknown {
        who.warnings.push(format!("unknown field \"{f}\""));
    }
    Ok((stored, created))
}

/// Deletes the object at `loc` (or marks it for deletion while finalizers remain); returns it.
pub async fn delete(
    cp: &Arc<ControlPlane>,
    who: &mut Requester<'_>,
    res: &ResourceDef,
    loc: &Location<'_>,
    opts: &DeleteOptions,
) -> Result<Value, ApiError> {
    crate::admission::admit_delete(res, loc)?;
    crate::admission::admit_delete_external(cp, who, res, loc, opts.dry_run).await?;
    let obj = match cp.store.delete(res, loc, opts).await? {
        Deleted::Gone(o) | Deleted::Pending(o) => o,
    };
    settle(cp, who.cluster, res, &obj).await;
    Ok(obj)
}

/// Deletes every object `list` selects, each admitted as its own delete; returns the deleted
/// objects and the revision the answer is at. Objects gone meanwhile are skipped.
pub async fn delete_collection(
    cp: &Arc<ControlPlane>,
    who: &mut Requester<'_>,
    res: &ResourceDef,
    list: ListRequest,
    opts: &DeleteOptions,
) -> Result<(Vec<Arc<CachedObject>>, i64), ApiError> {
    let listed = cp.store.list(res, &list).await?;
    let mut deleted = Vec::new();
    let cluster_name = who.cluster.to_string();
    for o in &listed.items {
        let name = o.name().to_string();
        let ns = o.namespace().to_string();
        let loc = Location {
            cluster: &cluster_name,
            namespace: &ns,
            name: &name,
        };
        crate::admission::admit_delete(res, &loc)?;
        match crate::admission::admit_delete_external(cp, who, res, &loc, opts.dry_run).await {
            Err(e) if e.code == 404 => continue,
            other => other?,
        }
        match cp.store.delete(res, &loc, opts).await {
            Ok(Deleted::Gone(v) | Deleted::Pending(v)) => {
                let rev = meta::resource_version(&v).parse().unwrap_or(0);
                let cluster = Arc::from(who.cluster);
                deleted.extend(
                    CachedObject::new(v, rev, cluster, &*res.strategy, false).map(Arc::new),
                );
            }
            Err(e) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    Ok((deleted, cp.store.cache(who.cluster)?.revision()))
}
