//! DropApp's API (spec: peers.md §2.6, seed `002_*`): `cluster.dropapp.ru/v1alpha1`
//! `TenantCluster`, cluster-scoped, needing only a name. Served when `matryoshka up
//! --dropapp-api` is given (its plural, `tenantclusters`, is also the platform's own, and
//! kubectl would resolve `kubectl get tenantclusters` to DropApp's group first).
//!
//! For each, the controller makes the namespace named after it (owned by it, so deleting the
//! TenantCluster deletes everything in it), a platform `TenantCluster` of the same name there
//! (the vcluster values the seed shows mapped onto its spec: control-plane replicas and the
//! persistence's storage class), and — once that cluster's kubeconfig exists — the Secret
//! `vc-<name>` with its kubeconfig under key `config`, as vcluster writes it. The status
//! repeats the platform cluster's readiness.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::Api;
use kube::api::{Patch, PatchParams};
use runtime::client::{ClusterClients, ROOT};
use runtime::error::{Result, ignore_not_found};
use runtime::informer::{Informer, ObjectKey, Store};
use runtime::queue::{Action, Queue};
use serde_json::{Value, json};

use crate::conditions::{self, Cond};
use crate::resource::TenantCluster;

pub const GROUP: &str = "cluster.dropapp.ru";
pub const VERSION: &str = "v1alpha1";
/// The label marking what the controller made for a DropApp TenantCluster.
pub const OWNER_LABEL: &str = "cluster.dropapp.ru/tenant-cluster";
const MANAGER: &str = "matryoshka-dropapp";
/// How often a cluster is looked at again without a change (its kubeconfig is re-issued
/// before it expires; `vc-<name>` follows).
const RESYNC: Duration = Duration::from_secs(600);

runtime::json_resource!(
    DropAppCluster,
    "TenantCluster",
    "cluster.dropapp.ru",
    "v1alpha1",
    "tenantclusters",
    Cluster
);

/// An object schema with `properties` checked and any other field kept (vcluster's values
/// are many; the ones used are typed, so a wrong one is refused with its path).
fn open_object(description: &str, properties: Value) -> Value {
    json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true,
        "description": description, "properties": properties})
}

/// `spec.values`: the vcluster keys the platform uses, typed (built in steps: one nested
/// `json!` would exceed the macro recursion limit).
fn values_schema() -> Value {
    let ha = open_object(
        "",
        json!({"replicas": {"type": "integer", "minimum": 1, "description": "API server replicas."}}),
    );
    let volume_claim = open_object(
        "",
        json!({"storageClass": {"type": "string", "description": "The cluster's storage class (immutable)."}}),
    );
    let persistence = open_object("", json!({"volumeClaim": volume_claim}));
    let sts = open_object(
        "The control plane's replicas and storage.",
        json!({"highAvailability": ha, "persistence": persistence}),
    );
    let control_plane = open_object("The control plane.", json!({"statefulSet": sts}));
    open_object(
        "vcluster values: controlPlane.statefulSet.highAvailability.replicas and controlPlane.statefulSet.persistence.volumeClaim.storageClass are used; the rest is recorded.",
        json!({"controlPlane": control_plane}),
    )
}

/// The CRD of DropApp's TenantCluster.
pub fn crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("tenantclusters.{GROUP}")},
        "spec": {
            "group": GROUP,
            "scope": "Cluster",
            "names": {"kind": "TenantCluster", "plural": "tenantclusters", "singular": "tenantcluster", "listKind": "TenantClusterList"},
            "versions": [{
                "name": VERSION, "served": true, "storage": true,
                "subresources": {"status": {}},
                "additionalPrinterColumns": [
                    {"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status"},
                    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
                ],
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "description": "A tenant cluster, DropApp's way: its name is also its namespace in this cluster; its kubeconfig is Secret vc-<name>, key config.",
                    "properties": {
                        "apiVersion": {"type": "string"},
                        "kind": {"type": "string"},
                        "metadata": {"type": "object"},
                        "spec": {"type": "object", "properties": {
                            "values": values_schema(),
                        }},
                        "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    },
                }},
            }],
        },
    })
}

/// The platform TenantCluster's spec for DropApp `values`.
pub fn platform_spec(values: &Value) -> Value {
    // vcluster's model: no worker machines, the pods run on the host's nodes.
    let mut spec = json!({"workers": {"mode": "shared"}});
    let sts = values.pointer("/controlPlane/statefulSet");
    if let Some(n) = sts
        .and_then(|s| s.pointer("/highAvailability/replicas"))
        .and_then(Value::as_i64)
    {
        spec["controlPlane"] = json!({"replicas": n});
    }
    if let Some(class) = sts
        .and_then(|s| s.pointer("/persistence/volumeClaim/storageClass"))
        .and_then(Value::as_str)
        .filter(|c| !c.is_empty())
    {
        spec["storageClass"] = json!(class);
    }
    spec
}

/// The DropApp TenantCluster controller.
pub struct DropAppController {
    clients: ClusterClients,
    clusters: Store<DropAppCluster>,
    platform: Store<TenantCluster>,
    queue: Arc<Queue<ObjectKey>>,
}

impl DropAppController {
    pub fn new(
        clients: ClusterClients,
        clusters: &Informer<DropAppCluster>,
        platform: &Informer<TenantCluster>,
    ) -> Arc<Self> {
        let queue = Queue::new();
        let q = queue.clone();
        clusters.on_change(move |c| q.add(c.key().clone()));
        // The platform cluster of the same name in the namespace of that name.
        let q = queue.clone();
        platform.on_change(move |c| {
            let key = c.key();
            if key.namespace == key.name {
                q.add(ObjectKey::new(ROOT, "", &key.name));
            }
        });
        Arc::new(DropAppController {
            clients,
            clusters: clusters.store(),
            platform: platform.store(),
            queue,
        })
    }

    pub fn queue(&self) -> Arc<Queue<ObjectKey>> {
        self.queue.clone()
    }

    pub async fn reconcile(&self, key: ObjectKey) -> Result<Action> {
        let Some(dc) = self.clusters.get(&key) else {
            return Ok(Action::AwaitChange);
        };
        if dc.metadata.deletion_timestamp.is_some() {
            return Ok(Action::AwaitChange);
        }
        let name = key.name.clone();
        let root = self.clients.cluster(ROOT)?;
        let apply = PatchParams::apply(MANAGER).force();
        let owner = json!({
            "apiVersion": format!("{GROUP}/{VERSION}"), "kind": "TenantCluster", "name": name,
            "uid": dc.metadata.uid.clone().unwrap_or_default(),
            "controller": true, "blockOwnerDeletion": true,
        });
        // The namespace of its name, unless someone else's.
        let namespaces: Api<Namespace> = Api::all(root.clone());
        if let Some(ns) = namespaces.get_opt(&name).await? {
            let ours = ns
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(OWNER_LABEL))
                .is_some_and(|v| *v == name);
            if !ours {
                self.status(
                    &dc,
                    false,
                    "NamespaceTaken",
                    &format!("namespace {name} exists and is not this cluster's"),
                    None,
                )
                .await?;
                return Ok(Action::AwaitChange);
            }
        }
        let ns = json!({
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "labels": {OWNER_LABEL: name}, "ownerReferences": [owner]},
        });
        namespaces.patch(&name, &apply, &Patch::Apply(&ns)).await?;
        // The platform's TenantCluster.
        let values = dc.spec.get("values").cloned().unwrap_or(Value::Null);
        let tc = json!({
            "apiVersion": "platform.matryoshka.dev/v1alpha1", "kind": "TenantCluster",
            "metadata": {"name": name, "namespace": name, "labels": {OWNER_LABEL: name}},
            "spec": platform_spec(&values),
        });
        let tcs: Api<TenantCluster> = Api::namespaced(root.clone(), &name);
        if let Err(e) = tcs.patch(&name, &apply, &Patch::Apply(&tc)).await {
            // A refusal (an invalid value, a changed storage class) is the user's to see.
            if let kube::Error::Api(s) = &e
                && matches!(s.code, 400 | 403 | 409 | 422)
            {
                self.status(&dc, false, "Invalid", &s.message, None).await?;
                return Ok(Action::AwaitChange);
            }
            return Err(e.into());
        }
        let platform = self.platform.get(&ObjectKey::new(ROOT, &name, &name));
        // The platform cluster's readiness (not Ready while it is being created).
        let (ready, reason, message) = platform
            .as_ref()
            .and_then(|p| p.status_field("/conditions"))
            .and_then(Value::as_array)
            .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"))
            .map(|c| {
                (
                    c["status"] == "True",
                    c["reason"].as_str().unwrap_or("").to_string(),
                    c["message"].as_str().unwrap_or("").to_string(),
                )
            })
            .unwrap_or((
                false,
                "Creating".into(),
                "the cluster is being created".into(),
            ));
        // vc-<name>, key config: the platform cluster's admin kubeconfig.
        let secret_name = format!("vc-{name}");
        let kubeconfig_secret = platform
            .as_ref()
            .and_then(|p| p.status_field("/kubeconfigSecret"))
            .and_then(Value::as_str)
            .map(str::to_string);
        let mut written = None;
        if let Some(source) = kubeconfig_secret {
            let secrets: Api<Secret> = Api::namespaced(root.clone(), &name);
            let conf = ignore_not_found(secrets.get(&source).await)?
                .and_then(|s| s.data)
                .and_then(|d| d.get("admin.conf").cloned());
            if let Some(conf) = conf {
                let secret = json!({
                    "apiVersion": "v1", "kind": "Secret",
                    "metadata": {"name": secret_name, "namespace": name, "labels": {OWNER_LABEL: name}},
                    "type": "Opaque",
                    "data": {"config": conf},
                });
                secrets
                    .patch(&secret_name, &apply, &Patch::Apply(&secret))
                    .await?;
                written = Some(secret_name);
            }
        }
        self.status(&dc, ready, &reason, &message, written.as_deref())
            .await?;
        Ok(Action::RequeueAfter(RESYNC))
    }

    async fn status(
        &self,
        dc: &DropAppCluster,
        ready: bool,
        reason: &str,
        message: &str,
        secret: Option<&str>,
    ) -> Result<()> {
        let name = dc.metadata.name.clone().unwrap_or_default();
        let cond = Cond {
            type_: "Ready",
            ok: ready,
            reason,
            message,
        };
        let old = dc.status_field("/conditions");
        let mut status = json!({
            "conditions": conditions::merge(old, &[cond], &conditions::now()),
            "namespace": name,
        });
        if let Some(s) = secret {
            status["kubeconfigSecret"] = json!(s);
        }
        if dc.status.as_ref() == Some(&status) {
            return Ok(());
        }
        let api: Api<DropAppCluster> = Api::all(self.clients.cluster(ROOT)?);
        api.patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": status})),
        )
        .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seeds_ha_values_become_control_plane_replicas_and_the_storage_class() {
        let values = json!({"controlPlane": {
            "backingStore": {"etcd": {"deploy": {"statefulSet": {"highAvailability": {"replicas": 2}}}}},
            "statefulSet": {"highAvailability": {"replicas": 2},
                "persistence": {"volumeClaim": {"storageClass": "nfs-csi", "enabled": true}}},
        }});
        assert_eq!(
            platform_spec(&values),
            json!({"workers": {"mode": "shared"}, "controlPlane": {"replicas": 2}, "storageClass": "nfs-csi"})
        );
        assert_eq!(
            platform_spec(&Value::Null),
            json!({"workers": {"mode": "shared"}})
        );
    }
}
