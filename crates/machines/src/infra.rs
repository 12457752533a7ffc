//! The `MatryoshkaMachine` controller: the infrastructure side of a Machine (spec:
//! capi-kubevirt.md §1.8). It waits for its owner Machine, realises the machine with the
//! provider its spec names in the Machine's workload cluster, and reports `spec.providerID`,
//! `status.addresses`, `status.initialization.provisioned` and the `Ready` condition; on
//! deletion the provider stops the machine before the finalizer goes.

use std::collections::BTreeMap;

use kube::Api;
use kube::api::{Patch, PatchParams};
use node::NodeTemplate;
use node::sizing::{KubeletOverrides, SizingInput};
use runtime::error::Result;
use runtime::informer::ObjectKey;
use runtime::queue::Action;
use serde_json::{Value, json};

use crate::cond::{self, Cond};
use crate::crds::FIELD_MANAGER;
use crate::names;
use crate::resource::{MatryoshkaMachine, str_at};
use crate::{Ctx, controller_of};

fn quantity(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// The node's sizing from a machine's infrastructure spec (or a node group's spec, which has
/// the same keys): instance type, resources, kubelet overrides, disk, GPUs.
pub fn sizing_input(spec: &Value) -> SizingInput {
    let kubelet = |k: &str| str_at(spec, &format!("/kubelet/{k}")).map(str::to_string);
    SizingInput {
        instance_type: str_at(spec, "/instanceType").map(str::to_string),
        cpu: quantity(spec.pointer("/resources/cpu")),
        memory: quantity(spec.pointer("/resources/memory")),
        kubelet: KubeletOverrides {
            system_reserved_memory: kubelet("systemReservedMemory"),
            kube_reserved_memory: kubelet("kubeReservedMemory"),
            system_reserved_cpu: kubelet("systemReservedCpu"),
            kube_reserved_cpu: kubelet("kubeReservedCpu"),
            eviction_hard_memory: kubelet("evictionHardMemory"),
            eviction_soft_memory: kubelet("evictionSoftMemory"),
        },
        disk_size: quantity(spec.get("diskSize")),
        gpus: spec
            .get("gpus")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|g| g.get("name").and_then(Value::as_str))
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default(),
    }
}

/// The node agent's template from a machine's infrastructure spec, with the Machine's labels
/// that belong on its Node (roles and the node-restriction domains).
pub fn node_template(spec: &Value, labels: &BTreeMap<String, String>) -> NodeTemplate {
    let sizing = sizing_input(spec);
    let roles = spec
        .get("roles")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    NodeTemplate {
        sizing,
        roles,
        labels: crate::machine::node_labels(labels),
        taints: Vec::new(),
    }
}

impl Ctx {
    pub async fn reconcile_infra(&self, key: ObjectKey) -> Result<Action> {
        let Some(im) = self.infra.get(&key) else {
            return Ok(Action::AwaitChange);
        };
        let api: Api<MatryoshkaMachine> = Api::namespaced(self.root()?, &key.namespace);
        let finalizers = im.metadata.finalizers.clone().unwrap_or_default();
        let has_finalizer = finalizers
            .iter()
            .any(|f| f == names::INFRA_MACHINE_FINALIZER);
        // The workload cluster, through the owner Machine and its Cluster.
        let machine = controller_of(&im.metadata)
            .filter(|o| o.kind == "Machine")
            .and_then(|o| self.machines.get(&Ctx::key(&key.namespace, &o.name)));
        let workload = machine
            .as_ref()
            .and_then(|m| self.cluster_of(&key.namespace, &m.spec))
            .and_then(|c| Ctx::workload_of(&c).map(str::to_string));
        if im.metadata.deletion_timestamp.is_some() {
            if !has_finalizer {
                return Ok(Action::AwaitChange);
            }
            match str_at(&im.spec, "/provider").unwrap_or("virtual") {
                "process" => {
                    if let Some(p) = &self.options.process {
                        let client = workload
                            .as_deref()
                            .and_then(|w| self.clients.cluster(w).ok());
                        p.remove(client.as_ref(), &key.name).await?;
                    }
                }
                _ => {
                    if let Some(w) = &workload {
                        self.virtual_nodes.remove(w, &key.name).await?;
                    } else {
                        // Without its cluster the machine can only be found by name.
                        self.virtual_nodes.remove_everywhere(&key.name).await?;
                    }
                }
            }
            crate::set_finalizer(&api, &*im, names::INFRA_MACHINE_FINALIZER, false).await?;
            return Ok(Action::AwaitChange);
        }
        if !has_finalizer {
            crate::set_finalizer(&api, &*im, names::INFRA_MACHINE_FINALIZER, true).await?;
            return Ok(Action::AwaitChange);
        }
        let (Some(machine), Some(workload)) = (machine, workload) else {
            return self
                .infra_status(
                    &api,
                    &im,
                    json!({}),
                    Cond::no(
                        "Ready",
                        "WaitingForClusterInfrastructure",
                        "waiting for the owner Machine and its Cluster",
                    ),
                )
                .await;
        };
        let provider = str_at(&im.spec, "/provider").unwrap_or("virtual");
        let labels = machine.metadata.labels.clone().unwrap_or_default();
        let template = node_template(&im.spec, &labels);
        let ensured = match (provider, &self.options.process) {
            ("virtual", _) => {
                self.virtual_nodes
                    .ensure(&workload, &key.name, &template)
                    .await
            }
            ("process", Some(p)) => {
                p.ensure(&self.clients, &workload, &key.name, &template)
                    .await
            }
            ("process", None) => {
                let msg = "this platform runs no process machines (it cannot run real nodes, \
                           or was started with --machine-provider virtual)";
                return self
                    .infra_status(
                        &api,
                        &im,
                        json!({}),
                        Cond::no("Ready", "ProviderUnavailable", msg),
                    )
                    .await;
            }
            (other, _) => {
                let msg = format!("unknown provider {other:?}");
                return self
                    .infra_status(
                        &api,
                        &im,
                        json!({}),
                        Cond::no("Ready", "UnknownProvider", msg),
                    )
                    .await;
            }
        };
        let done = match ensured {
            Ok(d) => d,
            Err(e) => {
                let msg = e.to_string();
                self.infra_status(
                    &api,
                    &im,
                    json!({}),
                    Cond::no("Ready", "ProvisioningFailed", msg),
                )
                .await?;
                return Err(e);
            }
        };
        if str_at(&im.spec, "/providerID") != Some(done.provider_id.as_str()) {
            let patch = json!({"spec": {"providerID": done.provider_id}});
            api.patch(&key.name, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
        }
        let addresses: Vec<Value> = done
            .addresses
            .iter()
            .map(|a| json!({"type": a.type_, "address": a.address}))
            .collect();
        self.infra_status(
            &api,
            &im,
            json!({"initialization": {"provisioned": true}, "addresses": addresses}),
            Cond::yes("Ready", "Provisioned"),
        )
        .await
    }

    async fn infra_status(
        &self,
        api: &Api<MatryoshkaMachine>,
        im: &MatryoshkaMachine,
        fields: Value,
        ready: Cond,
    ) -> Result<Action> {
        let old = im.status.clone().unwrap_or_else(|| json!({}));
        let mut status = old.clone();
        if let (Some(s), Some(f)) = (status.as_object_mut(), fields.as_object()) {
            for (k, v) in f {
                s.insert(k.clone(), v.clone());
            }
            s.insert(
                "conditions".into(),
                cond::merge(old.get("conditions"), &[ready], im.metadata.generation),
            );
        }
        if status != old {
            let name = im.metadata.name.as_deref().unwrap_or("");
            api.patch_status(
                name,
                &PatchParams::apply(FIELD_MANAGER),
                &Patch::Merge(json!({"status": status})),
            )
            .await?;
        }
        Ok(Action::AwaitChange)
    }
}
