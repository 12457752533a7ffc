//! Usage accounting (spec: cozystack.md §8, console-oidc.md C1): what each tenant's worker
//! machines and pods reserved, over time.
//!
//! - [`recorder`] writes one `UsageRecord` (cluster-scoped, root cluster) per consumer with
//!   its size and lifetime; records outlive tenants and restarts.
//! - A `UsageReport` (namespaced, in a tenant's namespace) is a query (`query.tenant`,
//!   `includeSubTenants`, `excludeTenants`, `workload`, `startTimestamp`, `endTimestamp`)
//!   answered when it is created: the platform's admission hook ([`ReportMutator`]) computes
//!   `report` ([`report::compute`]: `consumers[].consumptions` with `vCPUHours`,
//!   `MemoryGiBHours`, `EphemeralStorageGiBHours`, `LifetimeHours`; per-tenant totals rolled up
//!   the tenant tree) from the records in the server's cache, so the reply to the create is
//!   the report. A report is immutable; a tenant may ask about its own subtree only (the
//!   namespace it creates the report in bounds the query), and RBAC on `usagereports` in that
//!   namespace says who may ask.
//! - [`metrics`] renders per-tenant counters for the root cluster's `/metrics`.

pub mod recorder;
pub mod report;

use apimachinery::admission::{Mutator, Objects, Operation, Request, Validator};
use apimachinery::field::FieldError;
use apimachinery::status::ApiError;
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

use crate::crds::{GROUP, VERSION};

pub const USAGE_RECORDS: &str = "usagerecords";
pub const USAGE_REPORTS: &str = "usagereports";
/// The label naming a record's tenant (namespace).
pub const TENANT_LABEL: &str = "platform.matryoshka.dev/tenant";

runtime::json_resource!(
    UsageRecord,
    "UsageRecord",
    "platform.matryoshka.dev",
    "v1alpha1",
    "usagerecords",
    Cluster
);

fn string(desc: &str) -> Value {
    json!({"type": "string", "description": desc})
}

fn date_time(desc: &str) -> Value {
    json!({"type": "string", "format": "date-time", "description": desc})
}

fn consumptions(desc: &str) -> Value {
    json!({"type": "object", "description": desc,
        "additionalProperties": {"type": "string"}})
}

fn workload() -> Value {
    json!({"type": "object", "description": "The workload the consumer belongs to (a TenantCluster for its machines, a pod's controller).",
        "properties": {"kind": string("Its kind."), "name": string("Its name.")}})
}

/// The `UsageRecord` CRD: one consumer's lifetime and reservation.
pub fn record_crd() -> Value {
    let mut c = crate::crds::definition(
        "UsageRecord",
        USAGE_RECORDS,
        "Cluster",
        &["urec"],
        &["platform"],
    );
    c["spec"]["versions"] = json!([{
        "name": VERSION,
        "served": true,
        "storage": true,
        "subresources": {"status": {}},
        "additionalPrinterColumns": [
            {"name": "Tenant", "type": "string", "jsonPath": ".spec.tenant"},
            {"name": "Workload", "type": "string", "jsonPath": ".spec.workload.name"},
            {"name": "Consumer", "type": "string", "jsonPath": ".spec.consumer.name"},
            {"name": "Type", "type": "string", "jsonPath": ".spec.type"},
            {"name": "CPU", "type": "string", "jsonPath": ".spec.resources.cpu"},
            {"name": "Memory", "type": "string", "jsonPath": ".spec.resources.memory"},
            {"name": "Start", "type": "date", "jsonPath": ".spec.start"},
            {"name": "End", "type": "date", "jsonPath": ".status.end"},
        ],
        "schema": {"openAPIV3Schema": {
            "type": "object",
            "description": "What one consumer of a tenant (a worker machine, a pod) reserved and when: written by the platform.",
            "properties": {
                "apiVersion": string("The versioned schema of this representation of an object."),
                "kind": string("The REST resource this object represents."),
                "metadata": {"type": "object"},
                "spec": {
                    "type": "object",
                    "description": "The consumer and what it reserves.",
                    "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "a usage record does not change"}],
                    "properties": {
                        "tenant": string("The tenant's namespace."),
                        "workload": workload(),
                        "consumer": {"type": "object", "description": "The consuming object.",
                            "properties": {"kind": string("Its kind."), "name": string("Its name."), "uid": string("Its UID.")}},
                        "type": string("The instance type of a machine (`custom` for explicit resources), `pod` for a pod."),
                        "resources": {"type": "object", "description": "What it reserves.",
                            "additionalProperties": {"type": "string"}},
                        "start": date_time("When it began to consume."),
                    },
                },
                "status": {
                    "type": "object",
                    "description": "When it stopped consuming.",
                    "properties": {"end": date_time("When it stopped (absent while it runs).")},
                },
            },
        }},
    }]);
    c
}

/// The `UsageReport` CRD: a query and, once created, its answer.
pub fn report_crd() -> Value {
    let mut c = crate::crds::definition(
        "UsageReport",
        USAGE_REPORTS,
        "Namespaced",
        &["urep"],
        &["platform"],
    );
    let interval = json!({"type": "object", "description": "The part of the window the consumer was alive.",
        "properties": {"startTimestamp": date_time("From."), "endTimestamp": date_time("Until.")}});
    c["spec"]["versions"] = json!([{
        "name": VERSION,
        "served": true,
        "storage": true,
        "additionalPrinterColumns": [
            {"name": "Tenant", "type": "string", "jsonPath": ".query.tenant"},
            {"name": "Start", "type": "date", "jsonPath": ".report.startTimestamp"},
            {"name": "End", "type": "date", "jsonPath": ".report.endTimestamp"},
            {"name": "vCPU Hours", "type": "string", "jsonPath": ".report.totalConsumptions.vCPUHours"},
            {"name": "Memory GiB Hours", "type": "string", "jsonPath": ".report.totalConsumptions.MemoryGiBHours"},
            {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
        ],
        "schema": {"openAPIV3Schema": {
            "type": "object",
            "description": "A tenant's usage over a window: create it with a query; the reply carries the report.",
            "required": ["query"],
            "properties": {
                "apiVersion": string("The versioned schema of this representation of an object."),
                "kind": string("The REST resource this object represents."),
                "metadata": {"type": "object"},
                "query": {
                    "type": "object",
                    "description": "What to report.",
                    "required": ["startTimestamp", "endTimestamp"],
                    "properties": {
                        "tenant": string("The tenant's namespace (default: this namespace's tenant); this namespace's tenant or one of its sub-tenants."),
                        "includeSubTenants": {"type": "boolean", "default": false, "description": "Include the tenant's sub-tenants, recursively."},
                        "excludeTenants": {"type": "array", "items": {"type": "string"}, "description": "Tenants (namespaces) left out, with their sub-tenants."},
                        "workload": string("Only this workload's consumers (a TenantCluster's name, a pod controller's name)."),
                        "startTimestamp": date_time("The window's start."),
                        "endTimestamp": date_time("The window's end (a future end reports until now)."),
                    },
                },
                "report": {
                    "type": "object",
                    "description": "The answer, written by the platform when the report is created.",
                    "properties": {
                        "startTimestamp": date_time("The window's start."),
                        "endTimestamp": date_time("The window's end as reported (at most the time it was generated)."),
                        "generatedAt": date_time("When the report was computed."),
                        "truncated": {"type": "boolean", "description": "More consumers than one report lists (the totals cover them all)."},
                        "consumers": {"type": "array", "description": "Each consumer alive in the window.", "items": {
                            "type": "object",
                            "properties": {
                                "tenant": string("Its tenant's namespace."),
                                "workload": workload(),
                                "kind": string("Its kind (MatryoshkaMachine, Pod)."),
                                "name": string("Its name."),
                                "type": string("Its instance type (`pod` for a pod)."),
                                "interval": interval,
                                "consumptions": consumptions("vCPUHours, MemoryGiBHours, EphemeralStorageGiBHours and LifetimeHours."),
                            },
                        }},
                        "tenants": {"type": "array", "description": "Each tenant's own usage and its subtree's.", "items": {
                            "type": "object",
                            "properties": {
                                "tenant": string("The tenant's namespace."),
                                "consumptions": consumptions("Its own consumers'."),
                                "totalConsumptions": consumptions("With its sub-tenants' in the report."),
                            },
                        }},
                        "totalConsumptions": consumptions("Every consumer in the report."),
                    },
                },
            },
        }},
    }]);
    c
}

fn records(objects: &dyn Objects) -> Vec<report::Record> {
    objects
        .list(GROUP, USAGE_RECORDS, apimachinery::cluster::ROOT, "")
        .iter()
        .filter_map(report::Record::from_object)
        .collect()
}

/// The per-tenant usage metrics from the records `objects` holds.
pub fn metrics(objects: &dyn Objects) -> String {
    report::metrics(&records(objects), Timestamp::now())
}

fn invalid(name: &str, errs: Vec<FieldError>) -> ApiError {
    ApiError::invalid("UsageReport", GROUP, name, &errs.into())
}

/// Answers a `UsageReport` when it is created: checks its query and writes `report` (any
/// `report` the client sent is replaced).
pub struct ReportMutator;

impl Mutator for ReportMutator {
    fn mutate(&self, req: &Request<'_>, objects: &dyn Objects) -> Result<Option<Value>, ApiError> {
        if req.cluster != apimachinery::cluster::ROOT {
            return Ok(None);
        }
        let name = apimachinery::meta::name(req.object).to_string();
        let query =
            report::parse_query(req.object, req.namespace).map_err(|e| invalid(&name, e))?;
        let mut out = req.object.clone();
        out["query"]["tenant"] = json!(query.tenant);
        out["report"] = report::compute(&records(objects), &query, Timestamp::now());
        Ok(Some(out))
    }
}

/// Keeps a `UsageReport` as it was answered.
pub struct ReportValidator;

impl Validator for ReportValidator {
    fn validate(&self, req: &Request<'_>, _objects: &dyn Objects) -> Result<(), ApiError> {
        let (Operation::Update, Some(old)) = (req.operation, req.old) else {
            return Ok(());
        };
        let errs: Vec<FieldError> = ["query", "report"]
            .into_iter()
            .filter(|k| req.object.get(*k) != old.get(*k))
            .map(|k| {
                FieldError::invalid(
                    k,
                    req.object.get(k).cloned().unwrap_or(Value::Null),
                    "field is immutable",
                )
            })
            .collect();
        if errs.is_empty() {
            Ok(())
        } else {
            Err(invalid(apimachinery::meta::name(req.object), errs))
        }
    }
}
