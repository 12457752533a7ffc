//! PersistentVolumeClaims (vcluster's PVC syncer with fake persistent volumes): a tenant claim
//! becomes a host claim `<name>-x-<namespace>-x-<cluster>` of the same StorageClass (the
//! host's classes are the tenant's, see [`crate::classes`]), provisioned by the host; once the
//! host claim is bound, the tenant gets a stand-in volume of the host volume's name, reserved
//! for the tenant claim, which the tenant's PersistentVolume controller then binds as it binds
//! any pre-bound volume. The host pod mounts the host claim (its claim names are translated),
//! so the data lives where the host keeps it.
//!
//! A growing request grows the host claim (the host expands it) and the tenant claim reports
//! the host's capacity. Deleting the tenant claim deletes the host claim; a host claim
//! deleted by hand is made again (its data went with it, as on the host).

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use runtime::client::ROOT;
use runtime::error::{Result, ignore_not_found};
use runtime::informer::ObjectKey;
use runtime::queue::Action;
use serde_json::{Value, json};

use crate::translate::Target;
use crate::{Syncer, names};

/// The CSI driver named by the tenant's stand-in volumes (nothing mounts them: the host pod
/// mounts the host claim).
pub const STAND_IN_DRIVER: &str = "syncer.matryoshka.dev";
/// The annotation the scheduler or PV controller sets for a `WaitForFirstConsumer` claim.
const SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";

/// The host claim of a tenant claim: name, labels and annotations translated; the class,
/// access modes, request and volume mode kept; what names tenant objects (volume name,
/// selector, data source) dropped.
pub fn host_claim(tenant: &PersistentVolumeClaim, target: &Target<'_>) -> PersistentVolumeClaim {
    let spec = tenant.spec.clone().unwrap_or_default();
    let mut meta = target.metadata("PersistentVolumeClaim", &tenant.metadata);
    if let Some(node) = tenant
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(SELECTED_NODE))
    {
        meta.annotations
            .get_or_insert_with(Default::default)
            .insert(SELECTED_NODE.into(), node.clone());
    }
    PersistentVolumeClaim {
        metadata: meta,
        spec: Some(k8s_openapi::api::core::v1::PersistentVolumeClaimSpec {
            access_modes: spec.access_modes,
            resources: spec.resources,
            storage_class_name: spec.storage_class_name,
            volume_mode: spec.volume_mode,
            ..Default::default()
        }),
        status: None,
    }
}

/// The tenant's stand-in for host volume `name`, reserved for the tenant claim.
pub fn stand_in_volume(
    name: &str,
    tenant: &PersistentVolumeClaim,
    host: &PersistentVolumeClaim,
    cluster: &str,
) -> Result<PersistentVolume> {
    let spec = tenant.spec.clone().unwrap_or_default();
    let capacity = host
        .status
        .as_ref()
        .and_then(|s| s.capacity.clone())
        .or_else(|| spec.resources.as_ref().and_then(|r| r.requests.clone()))
        .unwrap_or_default();
    let modes = host
        .status
        .as_ref()
        .and_then(|s| s.access_modes.clone())
        .or(spec.access_modes.clone())
        .unwrap_or_default();
    Ok(serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {names::MANAGED_BY: cluster},
            "annotations": {"pv.kubernetes.io/provisioned-by": STAND_IN_DRIVER}},
        "spec": {
            "capacity": capacity,
            "accessModes": modes,
            "volumeMode": spec.volume_mode.unwrap_or_else(|| "Filesystem".into()),
            "storageClassName": spec.storage_class_name,
            "persistentVolumeReclaimPolicy": "Delete",
            "csi": {"driver": STAND_IN_DRIVER, "volumeHandle": name},
            "claimRef": {"kind": "PersistentVolumeClaim", "apiVersion": "v1",
                "namespace": tenant.metadata.namespace, "name": tenant.metadata.name,
                "uid": tenant.metadata.uid},
        },
    }))?)
}

impl Syncer {
    pub(crate) async fn claim(&self, key: ObjectKey) -> Result<Action> {
        let Some(shared) = self.shared(&key.cluster) else {
            return Ok(Action::AwaitChange);
        };
        let target = shared.target();
        let host_name = target.name(&key.namespace, &key.name);
        let on = self.host(&shared)?;
        let host_api: Api<PersistentVolumeClaim> =
            Api::namespaced(on.client.clone(), &shared.namespace);
        let host = on
            .claims
            .get(&ObjectKey::new(ROOT, &shared.namespace, &host_name));
        let tenant_client = self.clients.cluster(&key.cluster)?;
        let Some(tenant) = self.tenant_claims.get(&key) else {
            if host.is_some() {
                ignore_not_found(host_api.delete(&host_name, &DeleteParams::default()).await)?;
            }
            return Ok(Action::AwaitChange);
        };
        if tenant.metadata.deletion_timestamp.is_some() {
            // The tenant's protection finalizer holds it while a pod uses it; the host
            // claim goes with it then.
            if host.is_some() {
                ignore_not_found(host_api.delete(&host_name, &DeleteParams::default()).await)?;
            }
            return Ok(Action::AwaitChange);
        }
        let want = host_claim(&tenant, &target);
        let Some(h) = host else {
            self.create_on_host(&host_api, &want, &key.cluster, &*tenant, "claim")
                .await?;
            return Ok(Action::AwaitChange);
        };
        // A grown request (the host expands) and a node chosen late reach the host claim.
        let requests = |c: &PersistentVolumeClaim| {
            c.spec
                .as_ref()
                .and_then(|s| s.resources.as_ref())
                .and_then(|r| r.requests.clone())
        };
        let selected = |c: &PersistentVolumeClaim| {
            c.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(SELECTED_NODE).cloned())
        };
        if requests(&h) != requests(&want) || (selected(&h).is_none() && selected(&want).is_some())
        {
            let mut patch = json!({"spec": {"resources": {"requests": requests(&want)}}});
            if let Some(n) = selected(&want) {
                patch["metadata"] = json!({"annotations": {SELECTED_NODE: n}});
            }
            host_api
                .patch(&host_name, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
        }
        // Bound on the host: the tenant's stand-in volume, then the host's capacity.
        let host_volume = h
            .spec
            .as_ref()
            .and_then(|s| s.volume_name.clone())
            .filter(|v| !v.is_empty());
        let bound = h.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound");
        let (Some(volume), true) = (host_volume, bound) else {
            return Ok(Action::AwaitChange);
        };
        let volumes: Api<PersistentVolume> = Api::all(tenant_client.clone());
        let existing = volumes.get_opt(&volume).await?;
        let host_capacity = h.status.as_ref().and_then(|s| s.capacity.clone());
        match existing {
            None => {
                let pv = stand_in_volume(&volume, &tenant, &h, &shared.name)?;
                match volumes.create(&PostParams::default(), &pv).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(e)) if e.code == 409 => {}
                    Err(e) => return Err(e.into()),
                }
            }
            Some(pv) => {
                if pv.spec.as_ref().and_then(|s| s.capacity.clone()) != host_capacity
                    && host_capacity.is_some()
                {
                    let patch = json!({"spec": {"capacity": host_capacity}});
                    volumes
                        .patch(&volume, &PatchParams::default(), &Patch::Merge(&patch))
                        .await?;
                }
            }
        }
        // The tenant claim reports what the host gave (once its PV controller bound it).
        let t_status = tenant.status.clone().unwrap_or_default();
        if t_status.phase.as_deref() == Some("Bound")
            && host_capacity.is_some()
            && t_status.capacity != host_capacity
        {
            let claims: Api<PersistentVolumeClaim> = Api::namespaced(tenant_client, &key.namespace);
            let patch: Value = json!({"status": {"capacity": host_capacity}});
            ignore_not_found(
                claims
                    .patch_status(&key.name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await,
            )?;
        }
        Ok(Action::AwaitChange)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tenant() -> PersistentVolumeClaim {
        serde_json::from_value(json!({
            "metadata": {"name": "data", "namespace": "default", "uid": "t-uid",
                "labels": {"app": "db"},
                "annotations": {"volume.kubernetes.io/selected-node": "n1"}},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "local",
                "volumeName": "pvc-tenant", "selector": {"matchLabels": {"a": "b"}},
                "dataSource": {"kind": "PersistentVolumeClaim", "name": "other"},
                "resources": {"requests": {"storage": "1Mi"}}},
        }))
        .expect("claim")
    }

    #[test]
    fn a_host_claim_keeps_the_class_and_request_and_drops_what_names_tenant_objects() {
        let target = Target {
            cluster: "demo",
            host_namespace: "team-x",
            owner: None,
        };
        let h = host_claim(&tenant(), &target);
        assert_eq!(h.metadata.name.as_deref(), Some("data-x-default-x-demo"));
        assert_eq!(h.metadata.namespace.as_deref(), Some("team-x"));
        let labels = h.metadata.labels.clone().unwrap_or_default();
        assert_eq!(
            labels.get(names::MANAGED_BY).map(String::as_str),
            Some("demo")
        );
        let annotations = h.metadata.annotations.clone().unwrap_or_default();
        assert_eq!(
            annotations.get(SELECTED_NODE).map(String::as_str),
            Some("n1")
        );
        let spec = h.spec.expect("spec");
        assert_eq!(spec.storage_class_name.as_deref(), Some("local"));
        assert!(spec.volume_name.is_none() && spec.selector.is_none());
        assert!(spec.data_source.is_none());
        assert_eq!(
            spec.resources.and_then(|r| r.requests).expect("requests")["storage"].0,
            "1Mi"
        );
    }

    #[test]
    fn the_stand_in_volume_is_reserved_for_the_tenant_claim_with_the_hosts_capacity() {
        let host: PersistentVolumeClaim = serde_json::from_value(json!({
            "metadata": {"name": "data-x-default-x-demo"},
            "status": {"phase": "Bound", "capacity": {"storage": "2Mi"}, "accessModes": ["ReadWriteOnce"]},
        }))
        .expect("claim");
        let pv = stand_in_volume("pvc-host", &tenant(), &host, "demo").expect("volume");
        let spec = pv.spec.expect("spec");
        let r = spec.claim_ref.expect("claimRef");
        assert_eq!(
            (r.namespace.as_deref(), r.name.as_deref(), r.uid.as_deref()),
            (Some("default"), Some("data"), Some("t-uid"))
        );
        assert_eq!(spec.capacity.expect("capacity")["storage"].0, "2Mi");
        assert_eq!(spec.csi.expect("csi").driver, STAND_IN_DRIVER);
        assert_eq!(spec.storage_class_name.as_deref(), Some("local"));
    }
}
