//! The MachineSet controller (spec: capi-kubevirt.md §1.4, §1.7): keeps `spec.replicas`
//! Machines, each with its infrastructure machine cloned from the template; deletes surplus
//! machines by upstream's priority (deleting, `delete-machine` annotation, unhealthy, then the
//! deletion order); remediates a machine its MachineHealthCheck marked (`OwnerRemediated`
//! False) by deleting it when the set is its deployment's newest; reports replicas, ready,
//! available and up-to-date counts.

use std::collections::BTreeMap;
use std::sync::Arc;

use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use runtime::error::{Result, ignore_not_found};
use runtime::informer::ObjectKey;
use runtime::queue::Action;
use serde_json::{Value, json};

use crate::cond::{self, Cond};
use crate::crds::FIELD_MANAGER;
use crate::names;
use crate::resource::{
    INFRA_API_VERSION, INFRA_GROUP, Machine, MachineSet, MatryoshkaMachine, int_at, str_at,
};
use crate::{Ctx, controller_of, owner_ref};

/// On a Machine: the template its infrastructure machine was cloned from.
pub const CLONED_FROM_ANNOTATION: &str = "cluster.x-k8s.io/cloned-from-name";

/// How many machines one reconcile creates or deletes at most (the rest on the next pass).
const BURST: usize = 10;

/// A machine's scale-down priority (higher goes first), upstream's table.
pub fn delete_priority(m: &Machine, order: &str) -> f64 {
    if m.metadata.deletion_timestamp.is_some() {
        return 100.0;
    }
    if m.metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(names::DELETE_MACHINE_ANNOTATION))
    {
        return 80.0;
    }
    let st = m.status.as_ref();
    let unhealthy = m.status_field("/nodeRef/name").is_none()
        || cond::status_of(st, "NodeHealthy") == Some("False")
        || cond::status_of(st, "HealthCheckSucceeded") == Some("False");
    if unhealthy {
        return 50.0;
    }
    let created = m
        .metadata
        .creation_timestamp
        .as_ref()
        .map(|t| t.0.as_second());
    let age = created.map_or(0.0, |c| {
        (jiff::Timestamp::now().as_second() - c).max(0) as f64
    });
    let oldest = if created.is_none() {
        0.0
    } else {
        50.0 * (1.0 - (-age / 864_000.0).exp())
    };
    match order {
        "Oldest" => oldest,
        "Newest" => 50.0 - oldest,
        _ => 20.0,
    }
}

impl Ctx {
    /// The Machines a MachineSet controls.
    pub(crate) fn machines_of(&self, namespace: &str, uid: &str) -> Vec<Arc<Machine>> {
        self.machines
            .claim_candidates(runtime::client::ROOT, namespace, uid)
            .into_iter()
            .filter(|m| controller_of(&m.metadata).is_some_and(|o| o.uid == uid))
            .collect()
    }

    /// Whether `ms` is its MachineDeployment's newest set (or has none).
    fn is_newest(&self, namespace: &str, ms: &MachineSet) -> bool {
        let Some(owner) = controller_of(&ms.metadata).filter(|o| o.kind == "MachineDeployment")
        else {
            return true;
        };
        let rev = |s: &MachineSet| {
            s.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(names::REVISION_ANNOTATION))
                .and_then(|r| r.parse::<i64>().ok())
                .unwrap_or(0)
        };
        let mine = rev(ms);
        self.sets
            .claim_candidates(runtime::client::ROOT, namespace, &owner.uid)
            .iter()
            .filter(|s| controller_of(&s.metadata).is_some_and(|o| o.uid == owner.uid))
            .all(|s| rev(s) <= mine)
    }

    pub async fn reconcile_set(&self, key: ObjectKey) -> Result<Action> {
        let Some(ms) = self.sets.get(&key) else {
            self.expected_machines.forget(&key);
            return Ok(Action::AwaitChange);
        };
        if ms.metadata.deletion_timestamp.is_some() {
            return Ok(Action::AwaitChange);
        }
        let root = self.root()?;
        let api: Api<MachineSet> = Api::namespaced(root.clone(), &key.namespace);
        let machines_api: Api<Machine> = Api::namespaced(root.clone(), &key.namespace);
        let uid = ms.metadata.uid.clone().unwrap_or_default();
        let owned = self.machines_of(&key.namespace, &uid);
        let paused = ms
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(names::PAUSED_ANNOTATION))
            || self
                .cluster_of(&key.namespace, &ms.spec)
                .is_some_and(|c| c.spec.get("paused").and_then(Value::as_bool) == Some(true));
        if paused {
            return self.set_status(&api, &ms, &owned, None).await;
        }
        // Remediation: a machine its health check gave to its owner is deleted (and replaced
        // by the replica count below), by the newest set only.
        if self.is_newest(&key.namespace, &ms) {
            for m in &owned {
                let st = m.status.as_ref();
                if m.metadata.deletion_timestamp.is_none()
                    && cond::status_of(st, "OwnerRemediated") == Some("False")
                {
                    let name = m.metadata.name.clone().unwrap_or_default();
                    self.machine_status(
                        &machines_api,
                        m,
                        json!({}),
                        &[Cond::no(
                            "OwnerRemediated",
                            "MachineDeleting",
                            "deleting the unhealthy machine",
                        )],
                    )
                    .await?;
                    ignore_not_found(machines_api.delete(&name, &DeleteParams::default()).await)?;
                    self.recorder.record(
                        runtime::client::ROOT,
                        runtime::events::reference(&*ms),
                        "Normal",
                        "MachineRemediated",
                        format!("deleted unhealthy machine {name:?}; a new one replaces it"),
                    );
                }
            }
        }
        let owned = self.machines_of(&key.namespace, &uid);
        // Machines this controller just created or deleted count as the informer will soon
        // show them.
        let (creating, deleting) = self.expected_machines.pending(
            &key,
            |n| owned.iter().any(|m| m.metadata.name.as_deref() == Some(n)),
            |n| {
                owned
                    .iter()
                    .find(|m| m.metadata.name.as_deref() == Some(n))
                    .is_none_or(|m| m.metadata.deletion_timestamp.is_some())
            },
        );
        let active: Vec<&Arc<Machine>> = owned
            .iter()
            .filter(|m| m.metadata.deletion_timestamp.is_none())
            .filter(|m| {
                !deleting
                    .iter()
                    .any(|d| m.metadata.name.as_deref() == Some(d.as_str()))
            })
            .collect();
        let counted = active.len() + creating.len();
        let want = int_at(&ms.spec, "/replicas").unwrap_or(1).max(0) as usize;
        let mut blocked = None;
        if counted < want {
            let mut n = (want - counted).min(BURST);
            // The namespace's quotas bound the machines (as they bound the worker VMs' pods).
            let template = str_at(&ms.spec, "/template/spec/infrastructureRef/name")
                .and_then(|t| self.templates.get(&Ctx::key(&key.namespace, t)));
            if let Some(t) = &template {
                let spec = t
                    .spec
                    .pointer("/template/spec")
                    .cloned()
                    .unwrap_or_default();
                let (room, refusal) = self.quota_room(&key.namespace, &spec).await?;
                if let Some(room) = room
                    && (room as usize) < n
                {
                    n = room.max(0) as usize;
                    if n == 0 {
                        let msg = refusal.unwrap_or_else(|| "exceeded quota".into());
                        self.recorder.record(
                            runtime::client::ROOT,
                            runtime::events::reference(&*ms),
                            "Warning",
                            "FailedCreate",
                            format!("Error creating machine: {msg}"),
                        );
                        blocked = Some(msg);
                    }
                }
            }
            for _ in 0..n {
                let name = self.create_machine(&key.namespace, &ms).await?;
                self.expected_machines.created(&key, &name);
            }
        } else if counted > want {
            let order = str_at(&ms.spec, "/deletion/order").unwrap_or("Random");
            let mut victims: Vec<&Arc<Machine>> = active.clone();
            victims.sort_by(|a, b| {
                delete_priority(b, order)
                    .partial_cmp(&delete_priority(a, order))
                    .unwrap_or(std::cmp::Ordering::Equal)
                    .then_with(|| a.metadata.name.cmp(&b.metadata.name))
            });
            for m in victims
                .into_iter()
                .take((counted - want).min(active.len()).min(BURST))
            {
                let name = m.metadata.name.clone().unwrap_or_default();
                ignore_not_found(machines_api.delete(&name, &DeleteParams::default()).await)?;
                self.expected_machines.deleted(&key, &name);
                self.recorder.record(
                    runtime::client::ROOT,
                    runtime::events::reference(&*ms),
                    "Normal",
                    "SuccessfulDelete",
                    format!("Deleted machine {name:?}"),
                );
            }
        }
        let owned = self.machines_of(&key.namespace, &uid);
        let action = self
            .set_status(&api, &ms, &owned, blocked.as_deref())
            .await?;
        // A quota may free up without any event of this set's: look again.
        Ok(if blocked.is_some() {
            Action::RequeueAfter(std::time::Duration::from_secs(10))
        } else {
            action
        })
    }

    /// Creates one Machine of `ms` and its infrastructure machine (cloned from the template);
    /// answers the Machine's name.
    async fn create_machine(&self, namespace: &str, ms: &Arc<MachineSet>) -> Result<String> {
        let root = self.root()?;
        let set_name = ms.metadata.name.clone().unwrap_or_default();
        let name = names::generate(&set_name);
        let template = ms.spec.get("template").cloned().unwrap_or_default();
        let mut labels: BTreeMap<String, String> = template
            .pointer("/metadata/labels")
            .and_then(|l| serde_json::from_value(l.clone()).ok())
            .unwrap_or_default();
        let cluster = str_at(&ms.spec, "/clusterName").unwrap_or("").to_string();
        labels.insert(names::CLUSTER_NAME_LABEL.into(), cluster.clone());
        labels.insert(names::SET_NAME_LABEL.into(), set_name.clone());
        if let Some(d) = ms
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(names::DEPLOYMENT_NAME_LABEL))
        {
            labels.insert(names::DEPLOYMENT_NAME_LABEL.into(), d.clone());
        }
        let mut annotations: BTreeMap<String, String> = template
            .pointer("/metadata/annotations")
            .and_then(|a| serde_json::from_value(a.clone()).ok())
            .unwrap_or_default();
        let mut spec = template.get("spec").cloned().unwrap_or_else(|| json!({}));
        spec["clusterName"] = json!(cluster);
        // The infrastructure machine, cloned from the template under the Machine's name.
        let tmpl_name = str_at(&spec, "/infrastructureRef/name")
            .unwrap_or("")
            .to_string();
        let Some(tmpl) = self.templates.get(&Ctx::key(namespace, &tmpl_name)) else {
            self.recorder.record(
                runtime::client::ROOT,
                runtime::events::reference(&**ms),
                "Warning",
                "FailedCreate",
                format!("the infrastructure template {tmpl_name:?} does not exist"),
            );
            return Err(runtime::error::Error::Retry(format!(
                "infrastructure template {tmpl_name} not found"
            )));
        };
        annotations.insert(CLONED_FROM_ANNOTATION.into(), tmpl_name.clone());
        spec["infrastructureRef"] =
            json!({"apiGroup": INFRA_GROUP, "kind": "MatryoshkaMachine", "name": name});
        let machine: Machine = serde_json::from_value(json!({
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": labels,
                "annotations": annotations,
                "ownerReferences": [owner_ref(&**ms)],
                "finalizers": [names::MACHINE_FINALIZER],
            },
            "spec": spec,
        }))?;
        let machines: Api<Machine> = Api::namespaced(root.clone(), namespace);
        let created = machines.create(&PostParams::default(), &machine).await?;
        let infra_spec = tmpl
            .spec
            .pointer("/template/spec")
            .cloned()
            .unwrap_or_else(|| json!({}));
        let infra: MatryoshkaMachine = serde_json::from_value(json!({
            "apiVersion": INFRA_API_VERSION,
            "kind": "MatryoshkaMachine",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": {names::CLUSTER_NAME_LABEL: cluster},
                "annotations": {CLONED_FROM_ANNOTATION: tmpl_name},
                "ownerReferences": [owner_ref(&created)],
            },
            "spec": infra_spec,
        }))?;
        let infra_api: Api<MatryoshkaMachine> = Api::namespaced(root, namespace);
        match infra_api.create(&PostParams::default(), &infra).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => return Err(e.into()),
        }
        self.unseen_machines
            .created(namespace, &name, crate::quota::charge(&infra.spec));
        self.recorder.record(
            runtime::client::ROOT,
            runtime::events::reference(&**ms),
            "Normal",
            "SuccessfulCreate",
            format!("Created machine {name:?}"),
        );
        Ok(name)
    }

    async fn set_status(
        &self,
        api: &Api<MachineSet>,
        ms: &MachineSet,
        owned: &[Arc<Machine>],
        blocked: Option<&str>,
    ) -> Result<Action> {
        let st = |m: &Machine, t: &str| cond::is_true(m.status.as_ref(), t);
        let replicas = owned.len();
        let ready = owned.iter().filter(|m| st(m, "Ready")).count();
        let available = owned.iter().filter(|m| st(m, "Available")).count();
        let up_to_date = owned.iter().filter(|m| st(m, "UpToDate")).count();
        let want = int_at(&ms.spec, "/replicas").unwrap_or(1).max(0) as usize;
        let selector = crate::deployment::selector_string(ms.spec.get("selector"));
        let old = ms.status.clone().unwrap_or_else(|| json!({}));
        let mut status = old.clone();
        status["replicas"] = json!(replicas);
        status["readyReplicas"] = json!(ready);
        status["availableReplicas"] = json!(available);
        status["upToDateReplicas"] = json!(up_to_date);
        status["selector"] = json!(selector);
        status["observedGeneration"] = json!(ms.metadata.generation);
        let scaling_up = owned
            .iter()
            .filter(|m| m.metadata.deletion_timestamp.is_none())
            .count()
            < want;
        let scaling_down = replicas > want;
        status["conditions"] = cond::merge(
            old.get("conditions"),
            &[
                Cond::of(
                    "MachinesReady",
                    ready == replicas,
                    if ready == replicas {
                        "Ready"
                    } else {
                        "NotReady"
                    },
                    format!("{ready} of {replicas} machines ready"),
                ),
                Cond::of(
                    "ScalingUp",
                    scaling_up,
                    match (scaling_up, blocked) {
                        (true, Some(_)) => "QuotaExceeded",
                        (true, None) => "ScalingUp",
                        _ => "NotScalingUp",
                    },
                    blocked
                        .map(|b| format!("scaling up is blocked: {b}"))
                        .unwrap_or_default(),
                ),
                Cond::of(
                    "ScalingDown",
                    scaling_down,
                    if scaling_down {
                        "ScalingDown"
                    } else {
                        "NotScalingDown"
                    },
                    "",
                ),
            ],
            ms.metadata.generation,
        );
        if status != old {
            api.patch_status(
                ms.metadata.name.as_deref().unwrap_or(""),
                &PatchParams::apply(FIELD_MANAGER),
                &Patch::Merge(json!({"status": status})),
            )
            .await?;
        }
        Ok(Action::AwaitChange)
    }
}
