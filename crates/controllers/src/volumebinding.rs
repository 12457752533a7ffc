//! The PersistentVolume controller (upstream `pkg/controller/volume/persistentvolume`) with
//! Matryoshka's built-in provisioner: pending claims are bound to the smallest matching
//! available volume (storage class, capacity, access modes, volume mode, selector), or a
//! volume is provisioned for them when their class's provisioner is [`PROVISIONER`]: at once
//! for `Immediate` classes, once a node is chosen for `WaitForFirstConsumer` ones (the
//! scheduler's `volume.kubernetes.io/selected-node` annotation, or a pod using the claim
//! bound to a node). Both sides record the binding (`claimRef`/`volumeName`, phase `Bound`).
//! A volume whose claim is gone is deleted (`Delete` reclaim policy) or `Released`.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{ObjectReference, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use serde_json::{Value, json};

use crate::podutil;
use runtime::client::ClusterClients;
use runtime::error::Result;
use runtime::informer::{Change, ObjectKey, Store};
use runtime::queue::{Action, Queue};
use runtime::shared::Informers;

/// The provisioner of the built-in `local` storage class.
pub const PROVISIONER: &str = "matryoshka.dev/local";
/// The annotation of a StorageClass a shared cluster's syncer mirrored from its host: the host
/// provisions its claims, not this controller.
pub const FROM_HOST_ANNOTATION: &str = "syncer.matryoshka.dev/from-host";
/// Where the scheduler records the node chosen for a `WaitForFirstConsumer` claim.
pub const SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";

/// The PersistentVolume controller. Keys with a namespace are claims, without are volumes.
pub struct VolumeBindingController {
    clients: ClusterClients,
    claims: Store<PersistentVolumeClaim>,
    volumes: Store<PersistentVolume>,
    classes: Store<StorageClass>,
    pods: Store<Pod>,
    queue: Arc<Queue<ObjectKey>>,
}

fn quantity(
    v: Option<&k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
) -> Option<apimachinery::quota::ResourceList> {
    let v = v?;
    Some(apimachinery::quota::parse_list(Some(&json!({"q": v.0}))))
}

fn request(c: &PersistentVolumeClaim) -> Option<apimachinery::quota::ResourceList> {
    quantity(
        c.spec
            .as_ref()?
            .resources
            .as_ref()?
            .requests
            .as_ref()?
            .get("storage"),
    )
}

fn capacity(v: &PersistentVolume) -> Option<apimachinery::quota::ResourceList> {
    quantity(v.spec.as_ref()?.capacity.as_ref()?.get("storage"))
}

fn class_of_claim(c: &PersistentVolumeClaim) -> String {
    c.spec
        .as_ref()
        .and_then(|s| s.storage_class_name.clone())
        .unwrap_or_default()
}

fn class_of_volume(v: &PersistentVolume) -> String {
    v.spec
        .as_ref()
        .and_then(|s| s.storage_class_name.clone())
        .unwrap_or_default()
}

/// Whether volume `v` can serve claim `c` (upstream `checkVolumeSatisfyClaim` and the
/// selector and class filters of `findMatchingVolume`).
fn satisfies(v: &PersistentVolume, c: &PersistentVolumeClaim) -> bool {
    let (Some(vs), Some(cs)) = (v.spec.as_ref(), c.spec.as_ref()) else {
        return false;
    };
    if class_of_volume(v) != class_of_claim(c) {
        return false;
    }
    match (request(c), capacity(v)) {
        (Some(r), Some(cap)) if cap.get("q") >= r.get("q") => {}
        (None, Some(_)) => {}
        _ => return false,
    }
    let modes = vs.access_modes.clone().unwrap_or_default();
    if !cs.access_modes.iter().flatten().all(|m| modes.contains(m)) {
        return false;
    }
    let mode = |m: Option<&String>| m.cloned().unwrap_or_else(|| "Filesystem".into());
    if mode(vs.volume_mode.as_ref()) != mode(cs.volume_mode.as_ref()) {
        return false;
    }
    let empty = |s: &k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector| {
        s.match_labels.as_ref().is_none_or(|m| m.is_empty())
            && s.match_expressions.as_ref().is_none_or(|e| e.is_empty())
    };
    cs.selector.as_ref().is_none_or(empty)
        || podutil::selector_matches(cs.selector.as_ref(), &podutil::labels(&v.metadata))
}

fn available(v: &PersistentVolume) -> bool {
    v.metadata.deletion_timestamp.is_none()
        && v.spec.as_ref().is_some_and(|s| s.claim_ref.is_none())
        && v.status.as_ref().and_then(|s| s.phase.as_deref()) != Some("Released")
}

impl VolumeBindingController {
    pub fn new(informers: &Informers) -> Result<Arc<Self>> {
        let queue: Arc<Queue<ObjectKey>> = Queue::new();
        let claims = informers.get::<PersistentVolumeClaim>()?;
        let volumes = informers.get::<PersistentVolume>()?;
        let classes = informers.get::<StorageClass>()?;
        let pods = informers.get::<Pod>()?;
        let q = queue.clone();
        claims.on_change(move |c| {
            let k = c.key();
            q.add(k.clone());
            if let Change::Deleted(_, claim) = c
                && let Some(v) = claim.spec.as_ref().and_then(|s| s.volume_name.as_deref())
            {
                q.add(ObjectKey::new(&k.cluster, "", v));
            }
        });
        let (q, cs) = (queue.clone(), claims.store());
        volumes.on_change(move |c| {
            let k = c.key();
            q.add(k.clone());
            if let Some(r) = c.object().spec.as_ref().and_then(|s| s.claim_ref.as_ref()) {
                q.add(ObjectKey::new(
                    &k.cluster,
                    r.namespace.as_deref().unwrap_or(""),
                    r.name.as_deref().unwrap_or(""),
                ));
            }
            if matches!(c, Change::Added(..)) || available(c.object()) {
                // A new or freed volume may serve a pending claim.
                for (ck, claim) in cs.list_cluster(&k.cluster) {
                    if claim
                        .spec
                        .as_ref()
                        .and_then(|s| s.volume_name.as_deref())
                        .is_none_or(str::is_empty)
                    {
                        q.add(ck);
                    }
                }
            }
        });
        let q = queue.clone();
        pods.on_change(move |c| {
            let p = c.object();
            let Some(spec) = p.spec.as_ref().filter(|s| s.node_name.is_some()) else {
                return;
            };
            for v in spec.volumes.iter().flatten() {
                if let Some(pvc) = &v.persistent_volume_claim {
                    q.add(ObjectKey::new(
                        &c.key().cluster,
                        &c.key().namespace,
                        &pvc.claim_name,
                    ));
                }
            }
        });
        Ok(Arc::new(VolumeBindingController {
            clients: informers.clients().clone(),
            claims: claims.store(),
            volumes: volumes.store(),
            classes: classes.store(),
            pods: pods.store(),
            queue,
        }))
    }

    pub fn queue(&self) -> Arc<Queue<ObjectKey>> {
        self.queue.clone()
    }

    pub async fn reconcile(&self, key: ObjectKey) -> Result<Action> {
        if key.namespace.is_empty() {
            self.sync_volume(&key).await
        } else {
            self.sync_claim(&key).await
        }
    }

    /// The node a `WaitForFirstConsumer` claim is to be provisioned on, once known.
    fn selected_node(&self, key: &ObjectKey, c: &PersistentVolumeClaim) -> Option<String> {
        if let Some(n) = c
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(SELECTED_NODE))
        {
            return Some(n.clone());
        }
        self.pods
            .list_namespace(&key.cluster, &key.namespace)
            .into_iter()
            .filter_map(|p| {
                let spec = p.spec.as_ref()?;
                let uses = spec.volumes.iter().flatten().any(|v| {
                    v.persistent_volume_claim
                        .as_ref()
                        .is_some_and(|s| s.claim_name == key.name)
                });
                uses.then(|| spec.node_name.clone()).flatten()
            })
            .next()
    }

    async fn sync_claim(&self, key: &ObjectKey) -> Result<Action> {
        let Some(claim) = self.claims.get(key) else {
            return Ok(Action::AwaitChange);
        };
        if claim.metadata.deletion_timestamp.is_some() {
            return Ok(Action::AwaitChange);
        }
        let client = self.clients.cluster(&key.cluster)?;
        let bound_name = claim
            .spec
            .as_ref()
            .and_then(|s| s.volume_name.clone())
            .filter(|n| !n.is_empty());
        let volume = match bound_name {
            Some(n) => match self.volumes.get(&ObjectKey::new(&key.cluster, "", &n)) {
                Some(v) => v,
                None => return Ok(Action::AwaitChange),
            },
            None => {
                let all: Vec<Arc<PersistentVolume>> = self
                    .volumes
                    .list_cluster(&key.cluster)
                    .into_iter()
                    .map(|(_, v)| v)
                    .collect();
                // A volume already reserved for this claim (provisioned, or pre-bound by a user).
                let reserved = all.iter().find(|v| {
                    v.spec
                        .as_ref()
                        .and_then(|s| s.claim_ref.as_ref())
                        .is_some_and(|r| {
                            r.name.as_deref() == Some(key.name.as_str())
                                && r.namespace.as_deref() == Some(key.namespace.as_str())
                                && (r.uid.is_none() || r.uid == claim.metadata.uid)
                        })
                });
                if let Some(v) = reserved {
                    self.bind(key, &claim, v, &client).await?;
                    return Ok(Action::AwaitChange);
                }
                let mut candidates: Vec<Arc<PersistentVolume>> = all
                    .into_iter()
                    .filter(|v| available(v) && satisfies(v, &claim))
                    .collect();
                candidates.sort_by_key(|v| capacity(v).and_then(|c| c.get("q").cloned()));
                match candidates.into_iter().next() {
                    Some(v) => v,
                    None => return self.provision(key, &claim, &client).await,
                }
            }
        };
        self.bind(key, &claim, &volume, &client).await?;
        Ok(Action::AwaitChange)
    }

    /// Creates a volume for the claim when its class is ours and its node known.
    async fn provision(
        &self,
        key: &ObjectKey,
        claim: &PersistentVolumeClaim,
        client: &kube::Client,
    ) -> Result<Action> {
        let class_name = class_of_claim(claim);
        let Some(class) = self
            .classes
            .get(&ObjectKey::new(&key.cluster, "", &class_name))
        else {
            return Ok(Action::AwaitChange);
        };
        let from_host = class
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(FROM_HOST_ANNOTATION));
        if class.provisioner != PROVISIONER || from_host {
            return Ok(Action::AwaitChange);
        }
        let node = self.selected_node(key, claim);
        if class.volume_binding_mode.as_deref() == Some("WaitForFirstConsumer") && node.is_none() {
            return Ok(Action::AwaitChange);
        }
        let uid = claim.metadata.uid.clone().unwrap_or_default();
        let name = format!("pvc-{uid}");
        let spec = claim.spec.clone().unwrap_or_default();
        let storage = spec
            .resources
            .as_ref()
            .and_then(|r| r.requests.as_ref())
            .and_then(|r| r.get("storage"))
            .map(|q| q.0.clone())
            .unwrap_or_else(|| "1Gi".into());
        let mut pv = json!({
            "metadata": {"name": name, "annotations": {"pv.kubernetes.io/provisioned-by": PROVISIONER}},
            "spec": {
                "capacity": {"storage": storage},
                "accessModes": spec.access_modes.clone().unwrap_or_default(),
                "volumeMode": spec.volume_mode.clone().unwrap_or_else(|| "Filesystem".into()),
                "storageClassName": class_name,
                "persistentVolumeReclaimPolicy": class.reclaim_policy.clone().unwrap_or_else(|| "Delete".into()),
                "hostPath": {"path": format!("/var/lib/matryoshka/volumes/{name}"), "type": "DirectoryOrCreate"},
                "claimRef": {"kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": key.namespace, "name": key.name, "uid": uid},
            },
        });
        if let Some(n) = node {
            pv["spec"]["nodeAffinity"] = json!({"required": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": [n]}]}]}});
        }
        let api: Api<PersistentVolume> = Api::all(client.clone());
        match api
            .create(&PostParams::default(), &serde_json::from_value(pv)?)
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => return Err(e.into()),
        }
        // The new volume's event brings the claim back to be bound.
        Ok(Action::AwaitChange)
    }

    /// Binds both sides: the volume's claimRef and phase, then the claim's volumeName and phase.
    async fn bind(
        &self,
        key: &ObjectKey,
        claim: &PersistentVolumeClaim,
        volume: &PersistentVolume,
        client: &kube::Client,
    ) -> Result<()> {
        let vname = volume.metadata.name.clone().unwrap_or_default();
        let volumes: Api<PersistentVolume> = Api::all(client.clone());
        let uid = claim.metadata.uid.clone();
        let mut v = volume.clone();
        let spec = v.spec.get_or_insert_with(Default::default);
        match &spec.claim_ref {
            Some(r)
                if r.name.as_deref() == Some(key.name.as_str())
                    && r.namespace.as_deref() == Some(key.namespace.as_str())
                    && (r.uid.is_none() || r.uid == uid) => {}
            Some(_) => return Ok(()),
            None => {}
        }
        let want_ref = ObjectReference {
            kind: Some("PersistentVolumeClaim".into()),
            api_version: Some("v1".into()),
            namespace: Some(key.namespace.clone()),
            name: Some(key.name.clone()),
            uid: uid.clone(),
            resource_version: claim.metadata.resource_version.clone(),
            ..Default::default()
        };
        if spec.claim_ref.as_ref().and_then(|r| r.uid.as_ref()) != uid.as_ref() {
            spec.claim_ref = Some(want_ref);
            v = volumes.replace(&vname, &PostParams::default(), &v).await?;
        }
        if v.status.as_ref().and_then(|s| s.phase.as_deref()) != Some("Bound") {
            v.status = Some(serde_json::from_value(json!({"phase": "Bound"}))?);
            volumes
                .replace_status(&vname, &PostParams::default(), &v)
                .await?;
        }
        let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &key.namespace);
        let mut c = claim.clone();
        if c.spec.as_ref().and_then(|s| s.volume_name.as_deref()) != Some(vname.as_str()) {
            c.spec.get_or_insert_with(Default::default).volume_name = Some(vname.clone());
            let a = c.metadata.annotations.get_or_insert_with(Default::default);
            a.insert("pv.kubernetes.io/bind-completed".into(), "yes".into());
            a.insert("pv.kubernetes.io/bound-by-controller".into(), "yes".into());
            c = claims
                .replace(&key.name, &PostParams::default(), &c)
                .await?;
        }
        if c.status.as_ref().and_then(|s| s.phase.as_deref()) != Some("Bound") {
            let vs = v.spec.clone().unwrap_or_default();
            let status: Value =
                json!({"phase": "Bound", "accessModes": vs.access_modes, "capacity": vs.capacity});
            c.status = Some(serde_json::from_value(status)?);
            claims
                .replace_status(&key.name, &PostParams::default(), &c)
                .await?;
        }
        Ok(())
    }

    /// Makes a free volume Available, and reclaims one whose claim is gone.
    async fn sync_volume(&self, key: &ObjectKey) -> Result<Action> {
        let Some(v) = self.volumes.get(key) else {
            return Ok(Action::AwaitChange);
        };
        if v.metadata.deletion_timestamp.is_some() {
            return Ok(Action::AwaitChange);
        }
        let client = self.clients.cluster(&key.cluster)?;
        let api: Api<PersistentVolume> = Api::all(client.clone());
        let phase = v
            .status
            .as_ref()
            .and_then(|s| s.phase.clone())
            .unwrap_or_default();
        let Some(r) = v.spec.as_ref().and_then(|s| s.claim_ref.clone()) else {
            if phase != "Available" {
                let mut next = (*v).clone();
                next.status = Some(serde_json::from_value(json!({"phase": "Available"}))?);
                api.replace_status(&key.name, &PostParams::default(), &next)
                    .await?;
            }
            return Ok(Action::AwaitChange);
        };
        let claim_key = ObjectKey::new(
            &key.cluster,
            r.namespace.as_deref().unwrap_or(""),
            r.name.as_deref().unwrap_or(""),
        );
        let claim_live = match self.claims.get(&claim_key) {
            Some(c) => r.uid.is_none() || c.metadata.uid == r.uid,
            // The informer may not have seen a claim just created: ask the API.
            None => {
                let claims: Api<PersistentVolumeClaim> =
                    Api::namespaced(client.clone(), &claim_key.namespace);
                runtime::error::ignore_not_found(claims.get(&claim_key.name).await)?
                    .is_some_and(|c| r.uid.is_none() || c.metadata.uid == r.uid)
            }
        };
        if claim_live || phase != "Bound" && phase != "Released" {
            return Ok(Action::AwaitChange);
        }
        let policy = v
            .spec
            .as_ref()
            .and_then(|s| s.persistent_volume_reclaim_policy.clone())
            .unwrap_or_default();
        if policy == "Delete" {
            runtime::error::ignore_not_found(
                api.delete(&key.name, &DeleteParams::default()).await,
            )?;
        } else if phase != "Released" {
            let mut next = (*v).clone();
            next.status = Some(serde_json::from_value(json!({"phase": "Released"}))?);
            api.replace_status(&key.name, &PostParams::default(), &next)
                .await?;
        }
        Ok(Action::AwaitChange)
    }
}
