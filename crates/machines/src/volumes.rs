//! Volumes from the platform: what kubevirt-csi does for a Cozystack tenant cluster
//! (spec: capi-kubevirt.md §5), for this platform's machines.
//!
//! A claim of a workload cluster whose StorageClass has provisioner [`PROVISIONER`] (the
//! platform gives every tenant cluster one, named after the TenantCluster's `storageClass`)
//! becomes an infra claim `pvc-<tenant claim uid>` in the namespace of its Cluster in the root
//! cluster, bound to a volume this controller provisions there: a directory under the
//! platform's volumes directory (`<dir>/<namespace>/pvc-<uid>`; StorageClass
//! [`ROOT_CLASS`] of the root cluster). The tenant claim is then bound to a tenant volume of
//! the same name that reaches that directory from whichever node runs the pod: process
//! machines share the platform's mount namespace, so the kubelet's bind mount of the
//! directory is the attachment, and the data follows the pod to another node and outlives
//! any machine. Growing the tenant claim's request grows the infra claim and both volumes
//! (the resizer's part; directories have no quota to grow). Deleting the tenant claim deletes
//! the infra claim, and the root volume's finalizer removes the directory; a deleted cluster's
//! infra claims go with it.
//!
//! **Attachment** (the attach/detach controller's part for these volumes): a volume only one
//! node may use (`ReadWriteOnce`, `ReadWriteOncePod`) is attached to the node of the first
//! pod using it (the tenant volume's [`ATTACHED_NODE_ANNOTATION`]); the kubelet mounts it only
//! there. A pod on another node waits, with upstream's `FailedAttachVolume` "Multi-Attach
//! error" Event, until no pod on the attached node uses the volume, which is then detached
//! and attached to the waiting pod's node.
//!
//! Not done: block volumes are refused, and capacity is not a quota on the directory.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use apimachinery::cluster;
use apimachinery::quantity::Quantity;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
pub use node::kubelet::volumes::hostpath::ATTACHED_NODE_ANNOTATION;
use runtime::client::ROOT;
use runtime::error::{Result, ignore_not_found};
use runtime::informer::ObjectKey;
use runtime::queue::Action;
use serde_json::{Value, json};

use crate::{Ctx, names};

/// The provisioner of the tenant clusters' platform StorageClass.
pub const PROVISIONER: &str = node::kubelet::volumes::hostpath::PLATFORM_PROVISIONER;
/// The root cluster's StorageClass of infra volumes (directories).
pub const ROOT_CLASS: &str = "matryoshka-volumes";
/// Holds a root volume until its directory is removed.
pub const DIRECTORY_FINALIZER: &str = "volumes.platform.matryoshka.dev/directory";
pub const PROVISIONED_BY: &str = "pv.kubernetes.io/provisioned-by";
pub const TENANT_CLAIM_NAME_LABEL: &str = "volumes.platform.matryoshka.dev/claim-name";
pub const TENANT_CLAIM_NAMESPACE_LABEL: &str = "volumes.platform.matryoshka.dev/claim-namespace";
pub const TENANT_CLAIM_UID_ANNOTATION: &str = "volumes.platform.matryoshka.dev/claim-uid";

/// The root cluster's StorageClass of infra volumes.
pub fn root_class() -> Value {
    json!({
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": ROOT_CLASS},
        "provisioner": PROVISIONER,
        "reclaimPolicy": "Delete",
        "allowVolumeExpansion": true,
        "volumeBindingMode": "Immediate",
    })
}

/// The StorageClass a tenant cluster gets, named `name`, its default.
pub fn tenant_class(name: &str) -> Value {
    json!({
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": name,
            "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
        "provisioner": PROVISIONER,
        "reclaimPolicy": "Delete",
        "allowVolumeExpansion": true,
        "volumeBindingMode": "Immediate",
    })
}

fn label<'a>(meta: &'a kube::api::ObjectMeta, key: &str) -> Option<&'a str> {
    meta.labels.as_ref()?.get(key).map(String::as_str)
}

fn requested(c: &PersistentVolumeClaim) -> Option<Quantity> {
    let q = c
        .spec
        .as_ref()?
        .resources
        .as_ref()?
        .requests
        .as_ref()?
        .get("storage")?;
    Quantity::parse(&q.0).ok()
}

fn capacity(v: &PersistentVolume) -> Option<Quantity> {
    let q = v.spec.as_ref()?.capacity.as_ref()?.get("storage")?;
    Quantity::parse(&q.0).ok()
}

/// The directory of volume `name` of namespace `ns` under `dir`.
fn directory(dir: &Path, ns: &str, name: &str) -> PathBuf {
    dir.join(ns).join(name)
}

impl Ctx {
    /// The provisioner of the tenant claim's class, if it is ours.
    fn platform_class(&self, key: &ObjectKey, claim: &PersistentVolumeClaim) -> Option<String> {
        let class = claim.spec.as_ref()?.storage_class_name.clone()?;
        let sc = self
            .classes
            .get(&ObjectKey::new(key.cluster.as_str(), "", &class))?;
        (sc.provisioner == PROVISIONER).then_some(class)
    }

    /// Dispatches a key of the volumes queue: a tenant claim, an infra claim or a root volume.
    pub async fn reconcile_volume(&self, key: ObjectKey) -> Result<Action> {
        match (key.cluster.as_str() == ROOT, key.namespace.is_empty()) {
            (false, false) => self.reconcile_tenant_claim(key).await,
            (true, false) => self.reconcile_infra_claim(key).await,
            (true, true) => self.reconcile_root_volume(key).await,
            (false, true) => Ok(Action::AwaitChange),
        }
    }

    async fn reconcile_tenant_claim(&self, key: ObjectKey) -> Result<Action> {
        let Some(claim) = self.claims.get(&key) else {
            return Ok(Action::AwaitChange);
        };
        if claim.metadata.deletion_timestamp.is_some() {
            return Ok(Action::AwaitChange);
        }
        let Some(class) = self.platform_class(&key, &claim) else {
            return Ok(Action::AwaitChange);
        };
        // A Cluster being deleted gets no new volumes (its deletion removes them).
        let Some(capi) = self
            .cluster_for_workload(key.cluster.as_str())
            .filter(|c| c.metadata.deletion_timestamp.is_none())
        else {
            return Ok(Action::AwaitChange);
        };
        let Some(dir) = self.options.volumes_dir.clone() else {
            self.recorder.about(
                key.cluster.as_str(),
                &*claim,
                "Warning",
                "ProvisioningFailed",
                "the platform keeps no volumes (it runs without a volumes directory)",
            );
            return Ok(Action::AwaitChange);
        };
        let spec = claim.spec.clone().unwrap_or_default();
        if spec.volume_mode.as_deref() == Some("Block") {
            self.recorder.about(
                key.cluster.as_str(),
                &*claim,
                "Warning",
                "ProvisioningFailed",
                "the platform's volumes are filesystems; volumeMode Block is not supported",
            );
            return Ok(Action::AwaitChange);
        }
        let Some(size) = requested(&claim) else {
            return Ok(Action::AwaitChange);
        };
        let uid = claim.metadata.uid.clone().unwrap_or_default();
        let name = format!("pvc-{uid}");
        let ns = capi.metadata.namespace.clone().unwrap_or_default();
        let cluster_name = capi.metadata.name.clone().unwrap_or_default();
        let modes = spec
            .access_modes
            .clone()
            .filter(|m| !m.is_empty())
            .unwrap_or_else(|| vec!["ReadWriteOnce".into()]);
        let path = directory(&dir, &ns, &name);
        let size_s = size.to_string();
        let root = self.root()?;
        // 1. The infra claim and its directory volume in the root cluster.
        let infra_claims: Api<PersistentVolumeClaim> = Api::namespaced(root.clone(), &ns);
        let infra_key = ObjectKey::new(ROOT, &ns, &name);
        let infra_claim = self.claims.get(&infra_key);
        if infra_claim.is_none() {
            let obj: PersistentVolumeClaim = serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": ns,
                    "labels": {names::CLUSTER_NAME_LABEL: cluster_name,
                        TENANT_CLAIM_NAME_LABEL: key.name, TENANT_CLAIM_NAMESPACE_LABEL: key.namespace},
                    "annotations": {TENANT_CLAIM_UID_ANNOTATION: uid}},
                "spec": {"accessModes": modes, "storageClassName": ROOT_CLASS, "volumeName": name,
                    "resources": {"requests": {"storage": size_s}}},
            }))?;
            match infra_claims.create(&PostParams::default(), &obj).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 409 => {}
                Err(e) => return Err(e.into()),
            }
        }
        let root_volumes: Api<PersistentVolume> = Api::all(root.clone());
        let root_volume = self.volumes.get(&ObjectKey::new(ROOT, "", &name));
        // Volumes made before they were labelled with their cluster get the label (backups
        // find a cluster's volumes by it).
        if let Some(v) = &root_volume
            && label(&v.metadata, cluster::VOLUME_OF_LABEL) != Some(key.cluster.as_str())
        {
            let labelled =
                json!({"metadata": {"labels": {cluster::VOLUME_OF_LABEL: key.cluster.as_str()}}});
            root_volumes
                .patch(&name, &PatchParams::default(), &Patch::Merge(&labelled))
                .await?;
        }
        if root_volume.is_none() {
            tokio::fs::create_dir_all(&path).await.map_err(|e| {
                runtime::error::Error::Retry(format!("creating {}: {e}", path.display()))
            })?;
            // Containers of any user write there, as with hostPath provisioners.
            let _ = tokio::fs::set_permissions(
                &path,
                std::os::unix::fs::PermissionsExt::from_mode(0o777),
            )
            .await;
            let obj: PersistentVolume = serde_json::from_value(json!({
                "metadata": {"name": name, "finalizers": [DIRECTORY_FINALIZER],
                    "labels": {names::CLUSTER_NAME_LABEL: cluster_name,
                        cluster::VOLUME_OF_LABEL: key.cluster.as_str()},
                    "annotations": {PROVISIONED_BY: PROVISIONER}},
                "spec": {"capacity": {"storage": size_s}, "accessModes": modes,
                    "persistentVolumeReclaimPolicy": "Delete", "storageClassName": ROOT_CLASS,
                    "volumeMode": "Filesystem",
                    "hostPath": {"path": path.to_string_lossy(), "type": "Directory"},
                    "claimRef": {"kind": "PersistentVolumeClaim", "apiVersion": "v1",
                        "namespace": ns, "name": name}},
            }))?;
            match root_volumes.create(&PostParams::default(), &obj).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 409 => {}
                Err(e) => return Err(e.into()),
            }
        }
        // 2. The tenant's volume, reaching the same directory, reserved for the claim.
        let tenant = self.clients.cluster(key.cluster.as_str())?;
        let tenant_volumes: Api<PersistentVolume> = Api::all(tenant.clone());
        let tenant_volume = self
            .volumes
            .get(&ObjectKey::new(key.cluster.as_str(), "", &name));
        match &tenant_volume {
            None => {
                let obj: PersistentVolume = serde_json::from_value(json!({
                    "metadata": {"name": name, "annotations": {PROVISIONED_BY: PROVISIONER}},
                    "spec": {"capacity": {"storage": size_s}, "accessModes": modes,
                        "persistentVolumeReclaimPolicy": "Delete", "storageClassName": class,
                        "volumeMode": "Filesystem",
                        "hostPath": {"path": path.to_string_lossy(), "type": "Directory"},
                        "claimRef": {"kind": "PersistentVolumeClaim", "apiVersion": "v1",
                            "namespace": key.namespace, "name": key.name, "uid": uid}},
                }))?;
                match tenant_volumes.create(&PostParams::default(), &obj).await {
                    Ok(_) => {
                        self.recorder.about(
                            key.cluster.as_str(),
                            &*claim,
                            "Normal",
                            "ProvisioningSucceeded",
                            format!("Successfully provisioned volume {name}"),
                        );
                    }
                    Err(kube::Error::Api(s)) if s.code == 409 => {}
                    Err(e) => return Err(e.into()),
                }
                return Ok(Action::AwaitChange);
            }
            Some(v) => {
                self.attach(&key, v, &tenant_volumes).await?;
                // 3. Expansion: a bound claim asking for more grows every side.
                let bound = claim.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound");
                let have = capacity(v);
                if bound && have.as_ref().is_some_and(|h| *h < size) {
                    let grow = json!({"spec": {"capacity": {"storage": size_s}}});
                    let pp = PatchParams::default();
                    if let Some(ic) = &infra_claim
                        && requested(ic).is_some_and(|r| r < size)
                    {
                        infra_claims
                            .patch(&name, &pp, &Patch::Merge(&json!({"spec": {"resources": {"requests": {"storage": size_s}}}})))
                            .await?;
                        infra_claims
                            .patch_status(
                                &name,
                                &pp,
                                &Patch::Merge(
                                    &json!({"status": {"capacity": {"storage": size_s}}}),
                                ),
                            )
                            .await?;
                    }
                    root_volumes.patch(&name, &pp, &Patch::Merge(&grow)).await?;
                    tenant_volumes
                        .patch(&name, &pp, &Patch::Merge(&grow))
                        .await?;
                    let claims: Api<PersistentVolumeClaim> =
                        Api::namespaced(tenant, &key.namespace);
                    claims
                        .patch_status(
                            &key.name,
                            &pp,
                            &Patch::Merge(&json!({"status": {"capacity": {"storage": size_s}}})),
                        )
                        .await?;
                    self.recorder.about(
                        key.cluster.as_str(),
                        &*claim,
                        "Normal",
                        "VolumeResizeSuccessful",
                        format!("resize volume \"{name}\" by resizer \"{PROVISIONER}\" finished successfully"),
                    );
                }
            }
        }
        Ok(Action::AwaitChange)
    }

    /// Attaches an exclusive volume to the node of the pods using it (see the module's docs).
    async fn attach(
        &self,
        key: &ObjectKey,
        volume: &PersistentVolume,
        api: &Api<PersistentVolume>,
    ) -> Result<()> {
        if !node::kubelet::volumes::hostpath::exclusive(volume) {
            return Ok(());
        }
        let name = volume.metadata.name.clone().unwrap_or_default();
        // Pods placed on a node and not finished that use the claim, oldest first.
        let mut users: Vec<Arc<Pod>> = self
            .pods
            .list_namespace(key.cluster.as_str(), &key.namespace)
            .into_iter()
            .filter(|p| {
                let spec = p.spec.as_ref();
                let placed = spec
                    .and_then(|s| s.node_name.as_deref())
                    .is_some_and(|n| !n.is_empty());
                let done = matches!(
                    p.status.as_ref().and_then(|s| s.phase.as_deref()),
                    Some("Succeeded" | "Failed")
                );
                let uses = spec.and_then(|s| s.volumes.as_ref()).is_some_and(|vs| {
                    vs.iter().any(|v| {
                        v.persistent_volume_claim
                            .as_ref()
                            .is_some_and(|c| c.claim_name == key.name)
                    })
                });
                placed && !done && uses
            })
            .collect();
        users.sort_by(|a, b| {
            a.metadata
                .creation_timestamp
                .as_ref()
                .map(|t| t.0)
                .cmp(&b.metadata.creation_timestamp.as_ref().map(|t| t.0))
        });
        let node_of = |p: &Pod| {
            p.spec
                .as_ref()
                .and_then(|s| s.node_name.clone())
                .unwrap_or_default()
        };
        let attached = volume
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(ATTACHED_NODE_ANNOTATION))
            .cloned();
        let still_used = attached
            .as_ref()
            .is_some_and(|a| users.iter().any(|p| node_of(p) == *a));
        let want = if still_used {
            attached.clone()
        } else {
            users.first().map(|p| node_of(p))
        };
        if want != attached {
            let patch = json!({"metadata": {"annotations": {ATTACHED_NODE_ANNOTATION: want}}});
            api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
            tracing::info!(volume = %name, from = ?attached, to = ?want, "platform volume attachment");
        }
        if let Some(at) = &want {
            let holders: Vec<String> = users
                .iter()
                .filter(|p| node_of(p) == *at)
                .map(|p| p.metadata.name.clone().unwrap_or_default())
                .collect();
            for p in users.iter().filter(|p| node_of(p) != *at) {
                self.recorder.about(
                    key.cluster.as_str(),
                    &**p,
                    "Warning",
                    "FailedAttachVolume",
                    format!(
                        "Multi-Attach error for volume \"{name}\" Volume is already used by pod(s) {}",
                        holders.join(", ")
                    ),
                );
            }
        }
        Ok(())
    }

    /// Deletes an infra claim whose tenant claim (or cluster) is gone.
    async fn reconcile_infra_claim(&self, key: ObjectKey) -> Result<Action> {
        let Some(infra) = self.claims.get(&key) else {
            return Ok(Action::AwaitChange);
        };
        let meta = &infra.metadata;
        let (Some(cluster), Some(t_name), Some(t_ns)) = (
            label(meta, names::CLUSTER_NAME_LABEL),
            label(meta, TENANT_CLAIM_NAME_LABEL),
            label(meta, TENANT_CLAIM_NAMESPACE_LABEL),
        ) else {
            return Ok(Action::AwaitChange);
        };
        if meta.deletion_timestamp.is_some() {
            return Ok(Action::AwaitChange);
        }
        let uid = meta
            .annotations
            .as_ref()
            .and_then(|a| a.get(TENANT_CLAIM_UID_ANNOTATION))
            .cloned()
            .unwrap_or_default();
        let live = self
            .clusters
            .get(&Ctx::key(&key.namespace, cluster))
            .and_then(|c| Ctx::workload_of(&c).map(str::to_string))
            .and_then(|w| self.claims.get(&ObjectKey::new(&w, t_ns, t_name)))
            .is_some_and(|c| c.metadata.uid.as_deref() == Some(uid.as_str()));
        if live {
            return Ok(Action::AwaitChange);
        }
        let api: Api<PersistentVolumeClaim> = Api::namespaced(self.root()?, &key.namespace);
        ignore_not_found(api.delete(&key.name, &DeleteParams::default()).await)?;
        tracing::info!(claim = %key, "infra claim of a deleted tenant claim deleted");
        Ok(Action::AwaitChange)
    }

    /// Removes a deleted root volume's directory, then its finalizer.
    async fn reconcile_root_volume(&self, key: ObjectKey) -> Result<Action> {
        let Some(v) = self.volumes.get(&key) else {
            return Ok(Action::AwaitChange);
        };
        let ours = v
            .metadata
            .finalizers
            .iter()
            .flatten()
            .any(|f| f == DIRECTORY_FINALIZER);
        if v.metadata.deletion_timestamp.is_none() || !ours {
            return Ok(Action::AwaitChange);
        }
        let path = v
            .spec
            .as_ref()
            .and_then(|s| s.host_path.as_ref())
            .map(|h| PathBuf::from(&h.path));
        // Only a directory of ours is ever removed.
        if let (Some(path), Some(dir)) = (path, &self.options.volumes_dir)
            && path.starts_with(dir)
            && path.file_name().is_some_and(|n| n == key.name.as_str())
        {
            match tokio::fs::remove_dir_all(&path).await {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(runtime::error::Error::Retry(format!(
                        "removing {}: {e}",
                        path.display()
                    )));
                }
            }
        }
        let api: Api<PersistentVolume> = Api::all(self.root()?);
        crate::set_finalizer(&api, &*v, DIRECTORY_FINALIZER, false).await?;
        Ok(Action::AwaitChange)
    }
}

/// What wakes the volume controller.
pub(crate) fn wire(
    ctx: &Arc<Ctx>,
    clusters: &runtime::informer::Informer<crate::resource::Cluster>,
    claims: &runtime::informer::Informer<PersistentVolumeClaim>,
    volumes: &runtime::informer::Informer<PersistentVolume>,
    pods: &runtime::informer::Informer<Pod>,
) {
    // A deleted Cluster's infra claims go with it.
    let weak = Arc::downgrade(ctx);
    clusters.on_change(move |c| {
        let Some(ctx) = weak.upgrade() else { return };
        if !matches!(c, runtime::informer::Change::Deleted(..)) {
            return;
        }
        let key = c.key();
        for infra in ctx.claims.list_namespace(ROOT, &key.namespace) {
            if label(&infra.metadata, names::CLUSTER_NAME_LABEL) == Some(key.name.as_str())
                && label(&infra.metadata, TENANT_CLAIM_NAME_LABEL).is_some()
            {
                ctx.queues.volumes.add(ObjectKey::new(
                    ROOT,
                    &key.namespace,
                    infra.metadata.name.as_deref().unwrap_or(""),
                ));
            }
        }
    });
    let weak = Arc::downgrade(ctx);
    claims.on_change(move |c| {
        let Some(ctx) = weak.upgrade() else { return };
        let key = c.key();
        let claim = c.object();
        if key.cluster.as_str() == ROOT {
            if label(&claim.metadata, TENANT_CLAIM_NAME_LABEL).is_some() {
                ctx.queues.volumes.add(key.clone());
            }
            return;
        }
        if matches!(c, runtime::informer::Change::Deleted(..)) {
            // Its infra claim goes.
            if let (Some(capi), Some(uid)) = (
                ctx.cluster_for_workload(key.cluster.as_str()),
                claim.metadata.uid.as_deref(),
            ) {
                ctx.queues.volumes.add(ObjectKey::new(
                    ROOT,
                    capi.metadata.namespace.as_deref().unwrap_or(""),
                    &format!("pvc-{uid}"),
                ));
            }
            return;
        }
        ctx.queues.volumes.add(key.clone());
    });
    // A pod placed, finished or gone changes who may have its volumes.
    let weak = Arc::downgrade(ctx);
    pods.on_change(move |c| {
        let Some(ctx) = weak.upgrade() else { return };
        let key = c.key();
        if key.cluster.as_str() == ROOT {
            return;
        }
        let pod = c.object();
        let Some(spec) = pod.spec.as_ref() else {
            return;
        };
        if spec.node_name.as_deref().unwrap_or("").is_empty() {
            return;
        }
        for v in spec.volumes.iter().flatten() {
            if let Some(c) = &v.persistent_volume_claim {
                ctx.queues.volumes.add(ObjectKey::new(
                    key.cluster.as_str(),
                    &key.namespace,
                    &c.claim_name,
                ));
            }
        }
    });
    let weak = Arc::downgrade(ctx);
    volumes.on_change(move |c| {
        let Some(ctx) = weak.upgrade() else { return };
        let v = c.object();
        let provisioned = v
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(PROVISIONED_BY))
            .is_some_and(|p| p == PROVISIONER);
        if !provisioned {
            return;
        }
        if c.key().cluster.as_str() == ROOT {
            ctx.queues.volumes.add(c.key().clone());
        } else if let Some(r) = v.spec.as_ref().and_then(|s| s.claim_ref.as_ref()) {
            ctx.queues.volumes.add(ObjectKey::new(
                c.key().cluster.as_str(),
                r.namespace.as_deref().unwrap_or(""),
                r.name.as_deref().unwrap_or(""),
            ));
        }
    });
}
