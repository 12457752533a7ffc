//! The Cluster controller: a Cluster's status (initialization, phase, worker counts from its
//! MachineDeployments, conditions) and its deletion under the `cluster.cluster.x-k8s.io`
//! finalizer — its MachineDeployments, MachineSets, MachineHealthChecks and Machines are
//! deleted, and the finalizer goes once no Machine of the cluster is left (a Machine of a
//! Cluster being deleted is not drained: its workloads go with the cluster).

use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams};
use runtime::client::ROOT;
use runtime::error::{Result, ignore_not_found};
use runtime::informer::ObjectKey;
use runtime::queue::Action;
use serde_json::{Value, json};

use crate::Ctx;
use crate::cond::{self, Cond};
use crate::crds::FIELD_MANAGER;
use crate::names;
use crate::resource::{
    Cluster, Machine, MachineDeployment, MachineHealthCheck, MachineSet, int_at, str_at,
};

impl Ctx {
    pub async fn reconcile_cluster(&self, key: ObjectKey) -> Result<Action> {
        let Some(c) = self.clusters.get(&key) else {
            return Ok(Action::AwaitChange);
        };
        let root = self.root()?;
        let api: Api<Cluster> = Api::namespaced(root.clone(), &key.namespace);
        let finalizers = c.metadata.finalizers.clone().unwrap_or_default();
        let has_finalizer = finalizers.iter().any(|f| f == names::CLUSTER_FINALIZER);
        let of_cluster = |spec: &Value| str_at(spec, "/clusterName") == Some(key.name.as_str());
        if c.metadata.deletion_timestamp.is_some() {
            if !has_finalizer {
                return Ok(Action::AwaitChange);
            }
            let ns = &key.namespace;
            let dp = DeleteParams::default();
            for d in self
                .deployments
                .list_namespace(ROOT, ns)
                .iter()
                .filter(|d| of_cluster(&d.spec) && d.metadata.deletion_timestamp.is_none())
            {
                let a: Api<MachineDeployment> = Api::namespaced(root.clone(), ns);
                ignore_not_found(
                    a.delete(d.metadata.name.as_deref().unwrap_or(""), &dp)
                        .await,
                )?;
            }
            for s in self
                .sets
                .list_namespace(ROOT, ns)
                .iter()
                .filter(|s| of_cluster(&s.spec) && s.metadata.deletion_timestamp.is_none())
            {
                let a: Api<MachineSet> = Api::namespaced(root.clone(), ns);
                ignore_not_found(
                    a.delete(s.metadata.name.as_deref().unwrap_or(""), &dp)
                        .await,
                )?;
            }
            for h in self
                .checks
                .list_namespace(ROOT, ns)
                .iter()
                .filter(|h| of_cluster(&h.spec) && h.metadata.deletion_timestamp.is_none())
            {
                let a: Api<MachineHealthCheck> = Api::namespaced(root.clone(), ns);
                ignore_not_found(
                    a.delete(h.metadata.name.as_deref().unwrap_or(""), &dp)
                        .await,
                )?;
            }
            let machines: Vec<_> = self
                .machines
                .list_namespace(ROOT, ns)
                .into_iter()
                .filter(|m| of_cluster(&m.spec))
                .collect();
            for m in machines
                .iter()
                .filter(|m| m.metadata.deletion_timestamp.is_none())
            {
                let a: Api<Machine> = Api::namespaced(root.clone(), ns);
                ignore_not_found(
                    a.delete(m.metadata.name.as_deref().unwrap_or(""), &dp)
                        .await,
                )?;
            }
            if !machines.is_empty() {
                // Each Machine's deletion brings this key back.
                return Ok(Action::AwaitChange);
            }
            // What the cluster had of the platform goes with it (Cozystack's pre-cleanup:
            // its load balancers' infra Services and its volumes' infra claims).
            fn label<'a>(m: &'a kube::api::ObjectMeta, k: &str) -> Option<&'a str> {
                m.labels.as_ref().and_then(|l| l.get(k)).map(String::as_str)
            }
            for svc in self.services.list_namespace(ROOT, ns) {
                if label(&svc.metadata, names::CLUSTER_NAME_LABEL) == Some(key.name.as_str())
                    && label(&svc.metadata, crate::cloud::TENANT_SERVICE_NAME_LABEL).is_some()
                {
                    let a: Api<k8s_openapi::api::core::v1::Service> =
                        Api::namespaced(root.clone(), ns);
                    ignore_not_found(
                        a.delete(svc.metadata.name.as_deref().unwrap_or(""), &dp)
                            .await,
                    )?;
                }
            }
            for claim in self.claims.list_namespace(ROOT, ns) {
                if label(&claim.metadata, names::CLUSTER_NAME_LABEL) == Some(key.name.as_str())
                    && label(&claim.metadata, crate::volumes::TENANT_CLAIM_NAME_LABEL).is_some()
                {
                    let a: Api<k8s_openapi::api::core::v1::PersistentVolumeClaim> =
                        Api::namespaced(root.clone(), ns);
                    ignore_not_found(
                        a.delete(claim.metadata.name.as_deref().unwrap_or(""), &dp)
                            .await,
                    )?;
                }
            }
            crate::set_finalizer(&api, &*c, names::CLUSTER_FINALIZER, false).await?;
            return Ok(Action::AwaitChange);
        }
        if !has_finalizer {
            crate::set_finalizer(&api, &*c, names::CLUSTER_FINALIZER, true).await?;
            return Ok(Action::AwaitChange);
        }
        let workload = Ctx::workload_of(&c).is_some();
        let mds: Vec<_> = self
            .deployments
            .list_namespace(ROOT, &key.namespace)
            .into_iter()
            .filter(|d| of_cluster(&d.spec))
            .collect();
        let sum = |f: &str| {
            mds.iter()
                .map(|d| {
                    d.status_field(&format!("/{f}"))
                        .and_then(Value::as_i64)
                        .unwrap_or(0)
                })
                .sum::<i64>()
        };
        let desired: i64 = mds
            .iter()
            .map(|d| int_at(&d.spec, "/replicas").unwrap_or(0))
            .sum();
        let available = sum("availableReplicas");
        let paused = c.spec.get("paused").and_then(Value::as_bool) == Some(true);
        let old = c.status.clone().unwrap_or_else(|| json!({}));
        let mut status = old.clone();
        status["initialization"] =
            json!({"infrastructureProvisioned": true, "controlPlaneInitialized": workload});
        status["phase"] = json!(if workload {
            "Provisioned"
        } else {
            "Provisioning"
        });
        status["workers"] = json!({
            "desiredReplicas": desired,
            "replicas": sum("replicas"),
            "readyReplicas": sum("readyReplicas"),
            "availableReplicas": available,
            "upToDateReplicas": sum("upToDateReplicas"),
        });
        status["observedGeneration"] = json!(c.metadata.generation);
        let workers_ok = available >= desired;
        status["conditions"] = cond::merge(
            old.get("conditions"),
            &[
                Cond::yes("InfrastructureReady", "Provisioned"),
                Cond::of(
                    "ControlPlaneInitialized",
                    workload,
                    if workload {
                        "Initialized"
                    } else {
                        "NotInitialized"
                    },
                    if workload {
                        ""
                    } else {
                        "the Cluster names no workload cluster"
                    },
                ),
                Cond::of(
                    "WorkersAvailable",
                    workers_ok,
                    if workers_ok {
                        "Available"
                    } else {
                        "NotAvailable"
                    },
                    format!("{available} of {desired} worker machines available"),
                ),
                Cond::of(
                    "Available",
                    workload && workers_ok,
                    if workload && workers_ok {
                        "Available"
                    } else {
                        "NotAvailable"
                    },
                    "",
                ),
                Cond::of(
                    "Paused",
                    paused,
                    if paused { "Paused" } else { "NotPaused" },
                    "",
                ),
            ],
            c.metadata.generation,
        );
        if status != old {
            api.patch_status(
                &key.name,
                &PatchParams::apply(FIELD_MANAGER),
                &Patch::Merge(json!({"status": status})),
            )
            .await?;
        }
        Ok(Action::AwaitChange)
    }
}
