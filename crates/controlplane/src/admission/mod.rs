//! Admission that needs more than the object itself: ServiceAccount (a pod's account and its
//! token volume, `service_account`), NamespaceLifecycle's immortal namespaces,
//! DefaultStorageClass (claims without a class get the cluster's default), LimitRanger
//! (defaults and bounds from the namespace's LimitRanges), ResourceQuota (charging creates to
//! the namespace's quotas) and the disruption-budget check of evictions.
//!
//! [`admit_create`] runs in the create pipeline ([`crate::write::create`]) in upstream's order:
//! LimitRanger's defaults (mutating), then the object's own defaulting and validation (a dry
//! run of the store's create), then LimitRanger's bounds and the quota charge (validating).
//! Updates are not charged (upstream charges only pod resizes and claim expansions there).

pub mod cel;
mod compiled;
mod eviction;
mod limits;
pub mod policy;
mod quota;
pub mod service_account;
mod validators;
pub mod webhook;

use apimachinery::meta;
use apimachinery::status::ApiError;
use parking_lot::Mutex;
use registry::ResourceDef;
use registry::cache::Filter;
use registry::store::{Location, WriteOptions};
use serde_json::Value;

use crate::{ControlPlane, Requester};
use webhook::Attributes;

pub use eviction::check_eviction;
pub use validators::{
    CacheObjects, Mutator, Objects, Operation, Request, Validator, Validators, mutate, validate,
};

/// The name admission errors use (upstream `extractResourceName`): the object's name, else
/// its generateName, else `Unknown`.
fn display_name(obj: &Value) -> String {
    let n = meta::name(obj);
    if !n.is_empty() {
        return n.to_string();
    }
    let g = meta::generate_name(obj);
    if !g.is_empty() {
        return g.to_string();
    }
    "Unknown".into()
}

/// The objects of a core resource in one namespace, from the watch cache, in name order.
fn namespace_objects(
    cp: &ControlPlane,
    cluster: &str,
    namespace: &str,
    plural: &str,
) -> Vec<Value> {
    // Read from the cache: only kinds whose writes wait for it, or a write just acknowledged
    // could be missed.
    debug_assert!(registry::store::READ_BY_ADMISSION.contains(&plural));
    let filter = Filter {
        cluster: Some(cluster.to_string()),
        namespace: Some(namespace.to_string()),
        predicate: None,
    };
    cp.store
        .cache_for_reads(cluster)
        .list("", plural, &filter)
        .0
        .iter()
        .map(|o| o.to_value())
        .collect()
}

/// The namespaces NamespaceLifecycle admission never lets go of (upstream's immortal
/// namespaces: kube-apiserver and its controllers rely on them existing).
const IMMORTAL_NAMESPACES: [&str; 3] = ["default", "kube-system", "kube-public"];

/// Admits a delete of `loc`: NamespaceLifecycle refuses (403) to delete an immortal namespace,
/// with upstream's message.
pub fn admit_delete(res: &ResourceDef, loc: &Location<'_>) -> Result<(), ApiError> {
    if res.group.is_empty() && res.plural == "namespaces" && IMMORTAL_NAMESPACES.contains(&loc.name)
    {
        return Err(ApiError::forbidden(
            &res.plural,
            &res.group,
            loc.name,
            "this namespace may not be deleted",
        ));
    }
    Ok(())
}

/// Whether admission outside the server applies to writes in `cluster` (webhook
/// configurations exist there), the test before a write pays for anything more.
pub fn any_external(cp: &ControlPlane, cluster: &str) -> bool {
    webhook::any(cp, cluster) || policy::any(cp, cluster)
}

/// The validating stage outside the server, in upstream's plugin order:
/// ValidatingAdmissionPolicies, then validating webhooks (in parallel).
pub async fn validate_external(
    cp: &ControlPlane,
    attrs: &Attributes,
    obj: Option<&Value>,
    old: Option<&Value>,
    warnings: &Mutex<Vec<String>>,
) -> Result<(), ApiError> {
    policy::validate(cp, attrs, obj, old, warnings)?;
    webhook::validate(cp, attrs, obj, old, warnings).await
}

/// Admission of a delete of `loc` by webhooks: mutating ones are told (their patches have no
/// object to apply to), validating ones may refuse; both see the object as `oldObject`.
pub async fn admit_delete_external(
    cp: &ControlPlane,
    who: &mut Requester<'_>,
    res: &ResourceDef,
    loc: &Location<'_>,
    dry_run: bool,
) -> Result<(), ApiError> {
    if !any_external(cp, who.cluster) {
        return Ok(());
    }
    let current = cp.store.get(res, loc).await?;
    let attrs = Attributes::new(
        who.cluster,
        who.user,
        res,
        None,
        webhook::Operation::Delete,
        loc.namespace,
        loc.name,
        dry_run,
    );
    let warnings = Mutex::new(Vec::new());
    let result = async {
        webhook::mutate(cp, &attrs, None, Some(&current), &warnings).await?;

        validate_external(cp, &attrs, None, Some(&current), &warnings).await
    }
    .await;
    who.warnings.extend(warnings.into_inner());
    result
}

/// Admits a create of `obj` into `loc`: may add LimitRange defaults to it, refuses it (403)
/// when it breaks a LimitRange, lets validating webhooks and policies judge the prepared
/// object, refuses it when it exceeds a ResourceQuota, and charges it to the quotas (unless
/// `dry_run`) — the quota last, as upstream orders its plugins, so a refused create is never
/// charged. Where neither LimitRanges nor quotas apply, validating webhooks and policies are
/// left to the store's write (no dry run needed): returns whether they were.
#[allow(clippy::too_many_arguments)]
pub async fn admit_create(
    cp: &ControlPlane,
    cluster: &str,
    res: &ResourceDef,
    loc: &Location<'_>,
    obj: &mut Value,
    dry_run: bool,
    attrs: &Attributes,
    warnings: &Mutex<Vec<String>>,
) -> Result<bool, ApiError> {
    let namespaced = res.namespaced && !loc.namespace.is_empty();
    let core = res.group.is_empty();
    if namespaced && core && res.plural == "persistentvolumeclaims" {
        default_storage_class(cp, cluster, obj);
    }
    let ranged =
        namespaced && core && matches!(res.plural.as_str(), "pods" | "persistentvolumeclaims");
    let ranges = if ranged {
        namespace_objects(cp, cluster, loc.namespace, "limitranges")
    } else {
        Vec::new()
    };
    let quotas = if namespaced {
        namespace_objects(cp, cluster, loc.namespace, "resourcequotas")
    } else {
        Vec::new()
    };
    let external = webhook::any_validating(cp, cluster) || policy::any(cp, cluster);
    if ranges.is_empty() && quotas.is_empty() {
        return Ok(external);
    }
    let name = display_name(obj);
    if core && res.plural == "pods" && !ranges.is_empty() {
        // Upstream decodes (and so defaults requests from limits) before LimitRanger runs.
        res.strategy.default(obj);
        limits::apply_defaults(&ranges, obj);
    }
    let validated = cp
        .store
        .create(
            res,
            loc,
            obj.clone(),
            &WriteOptions {
                dry_run: true,
                subresource: None,
                ..Default::default()
            },
        )
        .await?;
    let forbidden = |why: &str| ApiError::forbidden(&res.plural, &res.group, &name, why);
    if !ranges.is_empty() {
        limits::check(&ranges, &res.plural, &validated).map_err(|e| forbidden(&e))?;
    }
    if external {
        let mut attrs = attrs.clone();
        attrs.name = meta::name(&validated).to_string();
        validate_external(cp, &attrs, Some(&validated), None, warnings).await?;
    }
    if !quotas.is_empty() {
        quota::charge(
            cp,
            cluster,
            res,
            loc.namespace,
            &quotas,
            &validated,
            dry_run,
        )
        .await
        .map_err(|e| match e {
            quota::Refused::Forbidden(why) => forbidden(&why),
            quota::Refused::Api(e) => e,
        })?;
    }
    Ok(false)
}

/// Upstream's DefaultStorageClass plugin: a claim that names no class (the field absent, not
/// `""`) gets the default one, the newest if several are marked default.
fn default_storage_class(cp: &ControlPlane, cluster: &str, claim: &mut Value) {
    if claim
        .pointer("/spec/storageClassName")
        .is_some_and(|c| !c.is_null())
        || !claim.get("spec").is_some_and(Value::is_object)
    {
        return;
    }
    let filter = Filter {
        cluster: Some(cluster.to_string()),
        namespace: None,
        predicate: None,
    };
    let default = cp
        .store
        .cache_for_reads(cluster)
        .list("storage.k8s.io", "storageclasses", &filter)
        .0
        .iter()
        .map(|c| c.value())
        .filter(|c| {
            meta::annotation(c, "storageclass.kubernetes.io/is-default-class") == Some("true")
        })
        .max_by_key(|c| {
            let m = meta::metadata(c);
            (
                m.get("creationTimestamp")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
                meta::name(c).to_string(),
            )
        })
        .map(|c| meta::name(&c).to_string());
    if let Some(name) = default {
        claim["spec"]["storageClassName"] = Value::String(name);
    }
}
