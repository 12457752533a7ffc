//! The Machine controller (spec: capi-kubevirt.md §1.5, §1.6): bootstrap and infrastructure
//! readiness, the `providerID` copied from the infrastructure machine and matched to a Node of
//! the workload cluster, `status.nodeRef`, `nodeInfo`, addresses, phases and v1beta2
//! conditions; the Machine's node labels (roles, `node-restriction.kubernetes.io`,
//! `node.cluster.x-k8s.io`) and Cluster API's annotations on the Node.
//!
//! Deletion, under the `machine.cluster.x-k8s.io` finalizer: the Node is cordoned and drained
//! (every pod evicted through the Eviction API, so PodDisruptionBudgets hold it back; DaemonSet
//! and mirror pods stay; `spec.deletion.nodeDrainTimeoutSeconds` bounds the wait; a Cluster
//! being deleted and `machine.cluster.x-k8s.io/exclude-node-draining` skip it), then the
//! infrastructure machine is deleted and awaited, then the Node.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::{DeleteParams, EvictParams, ListParams, Patch, PatchParams};
use runtime::error::{Result, ignore_not_found};
use runtime::informer::ObjectKey;
use runtime::queue::Action;
use serde_json::{Value, json};

use crate::cond::{self, Cond};
use crate::crds::FIELD_MANAGER;
use crate::names;
use crate::resource::{Machine, int_at, str_at};
use crate::{Ctx, controller_of};

/// Whether a label key belongs on the Node (upstream's sync set).
pub fn is_node_label(key: &str) -> bool {
    if key.starts_with("node-role.kubernetes.io/") {
        return true;
    }
    let Some((domain, _)) = key.split_once('/') else {
        return false;
    };
    ["node-restriction.kubernetes.io", "node.cluster.x-k8s.io"]
        .iter()
        .any(|d| domain == *d || domain.ends_with(&format!(".{d}")))
}

/// The labels of a Machine that the Node carries.
pub fn node_labels(labels: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    labels
        .iter()
        .filter(|(k, _)| is_node_label(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// The fields of a machine template whose change rolls machines (upstream's "up to date"
/// comparison): version, bootstrap, the infrastructure reference's kind and name, failure
/// domain.
pub fn rollout_identity(spec: &Value) -> Value {
    json!({
        "version": spec.get("version"),
        "bootstrap": {
            "dataSecretName": spec.pointer("/bootstrap/dataSecretName"),
            "configRef": spec.pointer("/bootstrap/configRef/kind").map(|k| json!([k, spec.pointer("/bootstrap/configRef/name")])),
        },
        "infrastructureRef": [spec.pointer("/infrastructureRef/kind"), spec.pointer("/infrastructureRef/name")],
        "failureDomain": spec.get("failureDomain"),
    })
}

/// A Node condition's status and last transition time.
pub fn node_condition<'a>(node: &'a Node, type_: &str) -> Option<(&'a str, Option<String>)> {
    let c = node
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)?;
    Some((
        c.status.as_str(),
        c.last_transition_time
            .as_ref()
            .map(|t| apimachinery::time::format_time(t.0)),
    ))
}

impl Ctx {
    /// The Node of a Machine in its workload cluster, by providerID.
    pub(crate) fn node_of(
        &self,
        workload: &str,
        name_hint: &str,
        provider_id: &str,
    ) -> Option<std::sync::Arc<Node>> {
        if provider_id.is_empty() {
            return None;
        }
        let matches =
            |n: &Node| n.spec.as_ref().and_then(|s| s.provider_id.as_deref()) == Some(provider_id);
        if let Some(n) = self.nodes.get(&ObjectKey::new(workload, "", name_hint))
            && matches(&n)
        {
            return Some(n);
        }
        self.nodes
            .list_cluster(workload)
            .into_iter()
            .map(|(_, n)| n)
            .find(|n| matches(n))
    }

    pub async fn reconcile_machine(&self, key: ObjectKey) -> Result<Action> {
        let Some(m) = self.machines.get(&key) else {
            return Ok(Action::AwaitChange);
        };
        let api: Api<Machine> = Api::namespaced(self.root()?, &key.namespace);
        let finalizers = m.metadata.finalizers.clone().unwrap_or_default();
        let has_finalizer = finalizers.iter().any(|f| f == names::MACHINE_FINALIZER);
        if m.metadata.deletion_timestamp.is_some() {
            if !has_finalizer {
                return Ok(Action::AwaitChange);
            }
            return self.delete_machine(&key, &m, &api).await;
        }
        let cluster_name = str_at(&m.spec, "/clusterName").unwrap_or("").to_string();
        let labelled = m
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(names::CLUSTER_NAME_LABEL))
            == Some(&cluster_name);
        if !has_finalizer || !labelled {
            let mut f = finalizers.clone();
            if !has_finalizer {
                f.push(names::MACHINE_FINALIZER.into());
            }
            let patch = json!({"metadata": {
                "finalizers": f,
                "labels": {names::CLUSTER_NAME_LABEL: cluster_name},
                "resourceVersion": m.metadata.resource_version,
            }});
            api.patch(&key.name, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
            return Ok(Action::AwaitChange);
        }
        let cluster = self.cluster_of(&key.namespace, &m.spec);
        let workload = cluster
            .as_ref()
            .and_then(|c| Ctx::workload_of(c).map(str::to_string));
        let mut conds: Vec<Cond> = Vec::new();
        let mut fields = json!({});

        // Bootstrap: a data secret named directly (this platform's machines carry no bootstrap
        // provider; the infrastructure provider hands each machine its credentials).
        let bootstrap_ready = str_at(&m.spec, "/bootstrap/dataSecretName").is_some();
        fields["initialization"]["bootstrapDataSecretCreated"] = json!(bootstrap_ready);
        conds.push(if bootstrap_ready {
            Cond::yes("BootstrapConfigReady", "DataSecretAvailable")
        } else {
            Cond::no(
                "BootstrapConfigReady",
                "DataSecretNotAvailable",
                "spec.bootstrap.dataSecretName is not set (bootstrap providers are not supported)",
            )
        });

        // Infrastructure.
        let infra_name = str_at(&m.spec, "/infrastructureRef/name").unwrap_or("");
        let infra = self.infra.get(&Ctx::key(&key.namespace, infra_name));
        let provisioned = infra
            .as_ref()
            .and_then(|i| i.status_field("/initialization/provisioned"))
            .and_then(Value::as_bool)
            == Some(true);
        fields["initialization"]["infrastructureProvisioned"] = json!(provisioned);
        match &infra {
            None => conds.push(Cond::no(
                "InfrastructureReady",
                "InfrastructureNotFound",
                "the infrastructure machine does not exist",
            )),
            Some(i) if provisioned => {
                conds.push(Cond::yes("InfrastructureReady", "Provisioned"));
                if let Some(a) = i.status_field("/addresses") {
                    fields["addresses"] = a.clone();
                }
                let pid = str_at(&i.spec, "/providerID").unwrap_or("");
                if !pid.is_empty() && str_at(&m.spec, "/providerID") != Some(pid) {
                    let patch = json!({"spec": {"providerID": pid}});
                    api.patch(&key.name, &PatchParams::default(), &Patch::Merge(&patch))
                        .await?;
                    return Ok(Action::AwaitChange);
                }
            }
            Some(i) => {
                let msg = cond::get(i.status.as_ref(), "Ready")
                    .and_then(|c| c.get("message"))
                    .and_then(Value::as_str)
                    .unwrap_or("the machine is being provisioned")
                    .to_string();
                conds.push(Cond::no("InfrastructureReady", "NotProvisioned", msg));
            }
        }

        // The Node.
        let provider_id = str_at(&m.spec, "/providerID").unwrap_or("");
        let had_node = m
            .status_field("/nodeRef/name")
            .and_then(Value::as_str)
            .map(str::to_string);
        let node = workload
            .as_deref()
            .and_then(|w| self.node_of(w, &key.name, provider_id));
        let mut node_ready = false;
        let mut requeue = None;
        match (&node, &had_node) {
            (Some(n), _) => {
                let node_name = n.metadata.name.clone().unwrap_or_default();
                fields["nodeRef"] = json!({"name": node_name});
                if let Some(info) = n.status.as_ref().and_then(|s| s.node_info.as_ref()) {
                    fields["nodeInfo"] = serde_json::to_value(info).unwrap_or_default();
                }
                let (status, since) = node_condition(n, "Ready").unwrap_or(("Unknown", None));
                node_ready = status == "True";
                conds.push(Cond::with_status(
                    "NodeReady",
                    status,
                    if node_ready {
                        "NodeReady"
                    } else {
                        "NodeNotReady"
                    },
                    "",
                ));
                conds.push(Cond::of(
                    "NodeHealthy",
                    node_ready,
                    if node_ready {
                        "NodeHealthy"
                    } else {
                        "NodeNotReady"
                    },
                    "",
                ));
                let min_ready = int_at(&m.spec, "/minReadySeconds").unwrap_or(0).max(0) as f64;
                let age = cond::age_seconds(since.as_deref());
                let available = node_ready && age >= min_ready;
                if node_ready && !available {
                    requeue = Some(Duration::from_secs_f64(min_ready - age + 0.5));
                }
                conds.push(Cond::of(
                    "Available",
                    available,
                    if available {
                        "Available"
                    } else {
                        "NotAvailable"
                    },
                    "",
                ));
                if let Some(w) = &workload {
                    self.sync_node(w, n, &m, cluster.as_deref()).await?;
                }
            }
            (None, Some(gone)) => {
                let msg = format!("node {gone} was deleted");
                conds.push(Cond::unknown("NodeReady", "NodeDeleted", msg.clone()));
                conds.push(Cond::no("NodeHealthy", "NodeDeleted", msg));
                conds.push(Cond::no("Available", "NotAvailable", ""));
            }
            (None, None) => {
                conds.push(Cond::unknown(
                    "NodeReady",
                    "NodeDoesNotExist",
                    "waiting for a node with this machine's providerID",
                ));
                conds.push(Cond::no("NodeHealthy", "NodeDoesNotExist", ""));
                conds.push(Cond::no("Available", "NotAvailable", ""));
            }
        }
        let ready = provisioned && node_ready;
        conds.push(Cond::of(
            "Ready",
            ready,
            if ready { "Ready" } else { "NotReady" },
            "",
        ));
        let up_to_date = self.machine_up_to_date(&key.namespace, &m);
        conds.push(Cond::of(
            "UpToDate",
            up_to_date,
            if up_to_date {
                "UpToDate"
            } else {
                "NotUpToDate"
            },
            "",
        ));
        conds.push(Cond::no("Deleting", "NotDeleting", ""));
        let phase = if node.is_some() && provisioned {
            "Running"
        } else if !provider_id.is_empty() {
            "Provisioned"
        } else if bootstrap_ready {
            "Provisioning"
        } else {
            "Pending"
        };
        fields["phase"] = json!(phase);
        self.machine_status(&api, &m, fields, &conds).await?;
        Ok(requeue.map_or(Action::AwaitChange, Action::RequeueAfter))
    }

    /// Whether a Machine's rollout-relevant spec matches its MachineDeployment's template
    /// (a Machine without one is up to date).
    fn machine_up_to_date(&self, namespace: &str, m: &Machine) -> bool {
        let md = m
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(names::DEPLOYMENT_NAME_LABEL))
            .and_then(|d| self.deployments.get(&Ctx::key(namespace, d)));
        match md {
            None => true,
            Some(md) => {
                let t = md
                    .spec
                    .pointer("/template/spec")
                    .cloned()
                    .unwrap_or_default();
                let mut mine = m.spec.clone();
                // A Machine's infrastructureRef names its clone; compare what it was cloned from.
                if let Some(from) = m
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(crate::machineset::CLONED_FROM_ANNOTATION))
                {
                    mine["infrastructureRef"]["name"] = json!(from);
                    mine["infrastructureRef"]["kind"] = t
                        .pointer("/infrastructureRef/kind")
                        .cloned()
                        .unwrap_or_default();
                }
                rollout_identity(&mine) == rollout_identity(&t)
            }
        }
    }

    /// Writes the Machine's node labels and Cluster API's annotations on its Node.
    async fn sync_node(
        &self,
        workload: &str,
        node: &Node,
        m: &Machine,
        cluster: Option<&crate::resource::Cluster>,
    ) -> Result<()> {
        let want_labels = node_labels(&m.metadata.labels.clone().unwrap_or_default());
        let have_labels = node.metadata.labels.clone().unwrap_or_default();
        let have_ann = node.metadata.annotations.clone().unwrap_or_default();
        let owner = controller_of(&m.metadata);
        let mut want_ann = BTreeMap::new();
        want_ann.insert(
            names::NODE_CLUSTER_NAME_ANNOTATION.to_string(),
            str_at(&m.spec, "/clusterName").unwrap_or("").to_string(),
        );
        want_ann.insert(
            names::NODE_CLUSTER_NAMESPACE_ANNOTATION.to_string(),
            cluster
                .and_then(|c| c.metadata.namespace.clone())
                .or_else(|| m.metadata.namespace.clone())
                .unwrap_or_default(),
        );
        want_ann.insert(
            names::NODE_MACHINE_ANNOTATION.to_string(),
            m.metadata.name.clone().unwrap_or_default(),
        );
        if let Some(o) = owner {
            want_ann.insert(
                names::NODE_OWNER_KIND_ANNOTATION.to_string(),
                o.kind.clone(),
            );
            want_ann.insert(
                names::NODE_OWNER_NAME_ANNOTATION.to_string(),
                o.name.clone(),
            );
        }
        let keys: Vec<&str> = want_labels.keys().map(String::as_str).collect();
        want_ann.insert(
            names::NODE_LABELS_FROM_MACHINE_ANNOTATION.to_string(),
            keys.join(","),
        );
        // Labels this controller put there before and the Machine no longer has go away.
        let mut labels = serde_json::Map::new();
        if let Some(prev) = have_ann.get(names::NODE_LABELS_FROM_MACHINE_ANNOTATION) {
            for k in prev.split(',').filter(|k| !k.is_empty()) {
                if !want_labels.contains_key(k) && have_labels.contains_key(k) {
                    labels.insert(k.to_string(), Value::Null);
                }
            }
        }
        for (k, v) in &want_labels {
            if have_labels.get(k) != Some(v) {
                labels.insert(k.clone(), json!(v));
            }
        }
        let annotations: serde_json::Map<String, Value> = want_ann
            .iter()
            .filter(|(k, v)| have_ann.get(*k) != Some(*v))
            .map(|(k, v)| (k.clone(), json!(v)))
            .collect();
        if labels.is_empty() && annotations.is_empty() {
            return Ok(());
        }
        let nodes: Api<Node> = Api::all(self.clients.cluster(workload)?);
        let patch = json!({"metadata": {"labels": labels, "annotations": annotations}});
        ignore_not_found(
            nodes
                .patch(
                    node.metadata.name.as_deref().unwrap_or(""),
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await,
        )?;
        Ok(())
    }

    /// Writes a Machine's status when it changed.
    pub(crate) async fn machine_status(
        &self,
        api: &Api<Machine>,
        m: &Machine,
        fields: Value,
        conds: &[Cond],
    ) -> Result<()> {
        let old = m.status.clone().unwrap_or_else(|| json!({}));
        let mut status = old.clone();
        if let (Some(s), Some(f)) = (status.as_object_mut(), fields.as_object()) {
            for (k, v) in f {
                s.insert(k.clone(), v.clone());
            }
            s.insert(
                "conditions".into(),
                cond::merge(old.get("conditions"), conds, m.metadata.generation),
            );
            s.insert("observedGeneration".into(), json!(m.metadata.generation));
        }
        if status != old {
            let name = m.metadata.name.as_deref().unwrap_or("");
            let mut s = status;
            s["lastUpdated"] = json!(cond::now());
            // The health check and this controller both write conditions: the
            // resourceVersion makes a write from a stale view a conflict (retried) instead of
            // a lost condition.
            let patch =
                json!({"metadata": {"resourceVersion": m.metadata.resource_version}, "status": s});
            api.patch_status(
                name,
                &PatchParams::apply(FIELD_MANAGER),
                &Patch::Merge(patch),
            )
            .await?;
        }
        Ok(())
    }

    async fn delete_machine(
        &self,
        key: &ObjectKey,
        m: &Machine,
        api: &Api<Machine>,
    ) -> Result<Action> {
        let cluster = self.cluster_of(&key.namespace, &m.spec);
        let workload = cluster
            .as_ref()
            .and_then(|c| Ctx::workload_of(c).map(str::to_string));
        // The node: the one the Machine links, else one with its providerID (a machine
        // deleted before its node was linked must not leave the node behind).
        let node_name = m
            .status_field("/nodeRef/name")
            .and_then(Value::as_str)
            .map(str::to_string)
            .or_else(|| {
                let infra = str_at(&m.spec, "/infrastructureRef/name")
                    .and_then(|n| self.infra.get(&Ctx::key(&key.namespace, n)));
                let pid = str_at(&m.spec, "/providerID")
                    .or_else(|| infra.as_ref().and_then(|i| str_at(&i.spec, "/providerID")))
                    .unwrap_or("")
                    .to_string();
                let w = workload.as_deref()?;
                self.node_of(w, &key.name, &pid)?.metadata.name.clone()
            });
        // 1. Drain.
        let excluded = m
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(names::EXCLUDE_DRAIN_ANNOTATION));
        let cluster_going = cluster
            .as_ref()
            .is_none_or(|c| c.metadata.deletion_timestamp.is_some());
        if let (Some(w), Some(node), false, false) =
            (&workload, &node_name, excluded, cluster_going)
        {
            let started = m
                .status_field("/deletion/nodeDrainStartTime")
                .and_then(Value::as_str)
                .map(str::to_string);
            let Some(started) = started else {
                let fields =
                    json!({"phase": "Deleting", "deletion": {"nodeDrainStartTime": cond::now()}});
                self.machine_status(api, m, fields, &[Cond::yes("Deleting", "DrainingNode")])
                    .await?;
                return Ok(Action::AwaitChange);
            };
            let timeout = int_at(&m.spec, "/deletion/nodeDrainTimeoutSeconds").unwrap_or(0);
            let expired = timeout > 0 && cond::age_seconds(Some(&started)) >= timeout as f64;
            if !expired {
                match self.drain(w, node).await {
                    Ok(left) if left.is_empty() => {
                        self.recorder.record(
                            runtime::client::ROOT,
                            runtime::events::reference(m),
                            "Normal",
                            "SuccessfulDrainNode",
                            format!("success draining Machine's node {node:?}"),
                        );
                    }
                    Ok(left) => {
                        let msg =
                            format!("draining node {node:?}: waiting for {}", left.join(", "));
                        self.machine_status(
                            api,
                            m,
                            json!({"phase": "Deleting"}),
                            &[Cond {
                                type_: "Deleting",
                                status: "True",
                                reason: "DrainingNode",
                                message: msg,
                            }],
                        )
                        .await?;
                        return Ok(Action::RequeueAfter(self.options.drain_retry));
                    }
                    Err(e) => {
                        self.recorder.record(
                            runtime::client::ROOT,
                            runtime::events::reference(m),
                            "Warning",
                            "FailedDrainNode",
                            format!("error draining Machine's node {node:?}: {e}"),
                        );
                        return Err(e);
                    }
                }
            }
        }
        // 2. The infrastructure machine, awaited.
        if let Some(name) = str_at(&m.spec, "/infrastructureRef/name") {
            let ikey = Ctx::key(&key.namespace, name);
            if let Some(i) = self.infra.get(&ikey) {
                if i.metadata.deletion_timestamp.is_none() {
                    let infra: Api<crate::resource::MatryoshkaMachine> =
                        Api::namespaced(self.root()?, &key.namespace);
                    ignore_not_found(infra.delete(name, &DeleteParams::default()).await)?;
                }
                self.machine_status(
                    api,
                    m,
                    json!({"phase": "Deleting"}),
                    &[Cond {
                        type_: "Deleting",
                        status: "True",
                        reason: "WaitingForInfrastructureDeletion",
                        message: String::new(),
                    }],
                )
                .await?;
                return Ok(Action::AwaitChange);
            }
        }
        // 3. The Node.
        tracing::debug!(machine = %key, node = ?node_name, workload = ?workload, "infrastructure gone; deleting the node");
        if let (Some(w), Some(node)) = (&workload, &node_name) {
            let nodes: Api<Node> = Api::all(self.clients.cluster(w)?);
            match nodes.delete(node, &DeleteParams::default()).await {
                Ok(_) => self.recorder.record(
                    runtime::client::ROOT,
                    runtime::events::reference(m),
                    "Normal",
                    "SuccessfulDeleteNode",
                    format!("success deleting Machine's node {node:?}"),
                ),
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(e.into()),
            }
        }
        crate::set_finalizer(api, m, names::MACHINE_FINALIZER, false).await?;
        Ok(Action::AwaitChange)
    }

    /// One pass of draining `node` of `workload`: cordons it, evicts every pod that must go,
    /// and answers the pods still there (empty: drained).
    async fn drain(&self, workload: &str, node: &str) -> Result<Vec<String>> {
        let client = self.clients.cluster(workload)?;
        let nodes: Api<Node> = Api::all(client.clone());
        let cordon = json!({"spec": {"unschedulable": true}});
        let Some(cordoned) = ignore_not_found(
            nodes
                .patch(node, &PatchParams::default(), &Patch::Merge(&cordon))
                .await,
        )?
        else {
            return Ok(Vec::new());
        };
        // An unreachable node (Ready Unknown) never confirms a pod's deletion: as upstream,
        // a pod deleted over a second ago is not waited for.
        let unreachable = cordoned
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
            .is_some_and(|c| c.status == "Unknown");
        let pods: Api<Pod> = Api::all(client.clone());
        let list = pods
            .list(&ListParams::default().fields(&format!("spec.nodeName={node}")))
            .await?;
        let mut left = Vec::new();
        for p in list.items {
            if !must_drain(&p) {
                continue;
            }
            let ns = p.metadata.namespace.clone().unwrap_or_default();
            let name = p.metadata.name.clone().unwrap_or_default();
            left.push(format!("{ns}/{name}"));
            if let Some(t) = &p.metadata.deletion_timestamp {
                let age = jiff::Timestamp::now().duration_since(t.0).as_secs_f64();
                if unreachable && age > UNREACHABLE_SKIP_WAIT_SECONDS {
                    left.pop();
                }
                continue;
            }
            let api: Api<Pod> = Api::namespaced(client.clone(), &ns);
            match api.evict(&name, &EvictParams::default()).await {
                Ok(_) => {}
                // A PodDisruptionBudget holds it back (429) or it is gone (404): try again
                // on the next pass.
                Err(kube::Error::Api(s)) if s.code == 429 || s.code == 404 => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(left)
    }
}

/// How long a pod deleted on an unreachable node is waited for (upstream's
/// `SkipWaitForDeleteTimeoutSeconds` for unreachable nodes).
const UNREACHABLE_SKIP_WAIT_SECONDS: f64 = 1.0;

/// Whether a pod has to leave a node being drained: not a DaemonSet's, not a mirror pod, not
/// finished, not labelled `cluster.x-k8s.io/drain: skip`.
pub fn must_drain(p: &Pod) -> bool {
    let daemon = p.metadata.owner_references.as_ref().is_some_and(|o| {
        o.iter()
            .any(|o| o.controller == Some(true) && o.kind == "DaemonSet")
    });
    let mirror = p
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key("kubernetes.io/config.mirror"));
    let skip = p
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get("cluster.x-k8s.io/drain"))
        .is_some_and(|v| v == "skip");
    let finished = matches!(
        p.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    );
    !(daemon || mirror || skip || finished)
}
