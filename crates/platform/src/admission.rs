//! The platform's validating admission hooks for its resources (the API server runs them;
//! the binary registers [`validators`]): a TenantCluster or Tenant that breaks a rule is refused with `422 Invalid` and a
//! cause per field (the rules are [`crate::validation`]'s); a Tenant claiming more quota than
//! its parent has left is refused with `403 Forbidden` (the check is [`crate::quota`]'s).
//!
//! Updates that leave the spec alone (status, finalizers, labels) are not re-validated, so an
//! object admitted under older rules can still be deleted and have its status written.

use std::sync::Arc;

use apimachinery::admission::{Objects, Request, Validator};
use apimachinery::status::ApiError;
use serde_json::{Map, Value};

use crate::crds::{CLUSTER_BACKUPS, GROUP, TENANT_CLUSTERS, TENANTS};
use crate::{naming, quota, validation};

fn name(obj: &Value) -> &str {
    obj.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
}

fn spec_unchanged(req: &Request<'_>) -> bool {
    req.old
        .is_some_and(|old| old.get("spec") == req.object.get("spec"))
}

/// Admits TenantClusters.
pub struct TenantClusterValidator;

impl Validator for TenantClusterValidator {
    fn validate(&self, req: &Request<'_>, objects: &dyn Objects) -> Result<(), ApiError> {
        if spec_unchanged(req) {
            return Ok(());
        }
        // A DropApp TenantCluster's namespace (made by the platform, named after it) holds its
        // cluster too.
        let dropapp = objects
            .get("", "namespaces", req.cluster, "", req.namespace)
            .and_then(|n| {
                n.pointer("/metadata/labels")
                    .and_then(|l| l.get(crate::dropapp::OWNER_LABEL))
                    .and_then(Value::as_str)
                    .map(|v| v == req.namespace)
            })
            .unwrap_or(false);
        let errs = validation::tenant_cluster(req.object, req.namespace, dropapp);
        if errs.is_empty() {
            Ok(())
        } else {
            Err(ApiError::invalid(
                "TenantCluster",
                GROUP,
                name(req.object),
                &errs,
            ))
        }
    }
}

/// Admits Tenants.
pub struct TenantValidator;

fn quotas(obj: &Value) -> Map<String, Value> {
    obj.pointer("/spec/resourceQuotas")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default()
}

impl Validator for TenantValidator {
    fn validate(&self, req: &Request<'_>, objects: &dyn Objects) -> Result<(), ApiError> {
        if spec_unchanged(req) {
            return Ok(());
        }
        let n = name(req.object);
        if req.old.is_none() {
            let errs = validation::tenant(req.object, req.namespace);
            if !errs.is_empty() {
                return Err(ApiError::invalid("Tenant", GROUP, n, &errs));
            }
        }
        let mine = quotas(req.object);
        if mine.is_empty() || req.old.is_some_and(|o| quotas(o) == mine) {
            return Ok(());
        }
        // The parent is the Tenant owning the namespace this one is created in.
        let Some((pns, pname)) = naming::tenant_of_namespace(req.namespace) else {
            return Ok(());
        };
        let Some(parent) = objects.get(GROUP, TENANTS, req.cluster, &pns, &pname) else {
            return Ok(());
        };
        let parent_q = quotas(&parent);
        if parent_q.is_empty() {
            return Ok(());
        }
        let siblings: Vec<Map<String, Value>> = objects
            .list(GROUP, TENANTS, req.cluster, req.namespace)
            .iter()
            .filter(|s| name(s) != n)
            .map(quotas)
            .collect();
        let sibling_refs: Vec<&Map<String, Value>> = siblings.iter().collect();
        let used = objects
            .get(
                "",
                "resourcequotas",
                req.cluster,
                req.namespace,
                quota::QUOTA_NAME,
            )
            .and_then(|q| {
                q.pointer("/status/used")
                    .and_then(Value::as_object)
                    .cloned()
            })
            .unwrap_or_default();
        quota::check(&mine, &parent_q, &sibling_refs, &used)
            .map_err(|why| ApiError::forbidden(TENANTS, GROUP, n, &why))
    }
}

/// The platform's validators, each with the group and plural of the resource whose writes it
/// admits; the `matryoshka` binary registers them on the API server.
pub fn validators() -> Vec<(&'static str, &'static str, Arc<dyn Validator>)> {
    vec![
        (GROUP, TENANT_CLUSTERS, Arc::new(TenantClusterValidator)),
        (GROUP, TENANTS, Arc::new(TenantValidator)),
        (GROUP, CLUSTER_BACKUPS, Arc::new(ClusterBackupValidator)),
        (
            GROUP,
            crate::usage::USAGE_REPORTS,
            Arc::new(crate::usage::ReportValidator),
        ),
    ]
}

/// The platform's mutating hooks on creates, to register on the API server with
/// [`validators`]: a `UsageReport` is answered when it is created.
pub fn mutators() -> Vec<(
    &'static str,
    &'static str,
    Arc<dyn apimachinery::admission::Mutator>,
)> {
    vec![(
        GROUP,
        crate::usage::USAGE_REPORTS,
        Arc::new(crate::usage::ReportMutator),
    )]
}

/// Admits ClusterBackups: a schedule is a cron schedule (as a CronJob's).
pub struct ClusterBackupValidator;

impl Validator for ClusterBackupValidator {
    fn validate(&self, req: &Request<'_>, _objects: &dyn Objects) -> Result<(), ApiError> {
        if spec_unchanged(req) {
            return Ok(());
        }
        let schedule = req
            .object
            .pointer("/spec/schedule")
            .and_then(Value::as_str)
            .unwrap_or("");
        if schedule.is_empty() {
            return Ok(());
        }
        match apimachinery::cron::parse_standard(schedule) {
            Ok(_) => Ok(()),
            Err(why) => Err(ApiError::invalid(
                "ClusterBackup",
                GROUP,
                name(req.object),
                &vec![apimachinery::FieldError::invalid(
                    "spec.schedule",
                    Value::String(schedule.into()),
                    why,
                )]
                .into(),
            )),
        }
    }
}
