//! StorageClasses and IngressClasses from the host (vcluster's `fromHost` classes): a shared
//! cluster's classes are its host's, mirrored under the same names and marked with
//! [`FROM_HOST_ANNOTATION`], so its claims name a class the host provisions (the tenant's own
//! PersistentVolume controller leaves classes so marked to the host). A mirrored class the
//! host no longer has goes; so does the built-in `local` class the tenant cluster was made
//! with (no node of its own could provision it), unless the host has one of that name.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::networking::v1::IngressClass;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{DeleteParams, ObjectMeta, PostParams};
use kube::{Api, ResourceExt};
use runtime::error::{Result, ignore_not_found};
use runtime::queue::Action;

use crate::Syncer;

/// The annotation of a class mirrored from the host (the tenant's PersistentVolume
/// controller reads it: such a class is provisioned by the host).
pub const FROM_HOST_ANNOTATION: &str = "syncer.matryoshka.dev/from-host";
/// The provisioner of every cluster's built-in `local` class.
const BUILT_IN_LOCAL_PROVISIONER: &str = "matryoshka.dev/local";

/// The tenant's copy of host object metadata: name, labels, annotations, marked.
fn mirrored_meta(host: &ObjectMeta) -> ObjectMeta {
    let mut annotations: BTreeMap<String, String> = host.annotations.clone().unwrap_or_default();
    annotations.remove("kubectl.kubernetes.io/last-applied-configuration");
    annotations.insert(FROM_HOST_ANNOTATION.into(), "true".into());
    ObjectMeta {
        name: host.name.clone(),
        labels: host.labels.clone(),
        annotations: Some(annotations),
        ..ObjectMeta::default()
    }
}

fn from_host(meta: &ObjectMeta) -> bool {
    meta.annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(FROM_HOST_ANNOTATION))
}

/// A host StorageClass as the tenant has it.
pub fn tenant_storage_class(host: &StorageClass) -> StorageClass {
    StorageClass {
        metadata: mirrored_meta(&host.metadata),
        ..host.clone()
    }
}

/// A host IngressClass as the tenant has it.
pub fn tenant_ingress_class(host: &IngressClass) -> IngressClass {
    IngressClass {
        metadata: mirrored_meta(&host.metadata),
        spec: host.spec.clone(),
    }
}

/// What of a StorageClass cannot change in place.
fn fixed(c: &StorageClass) -> serde_json::Value {
    serde_json::json!([
        c.provisioner,
        c.parameters,
        c.reclaim_policy,
        c.volume_binding_mode
    ])
}

impl Syncer {
    /// Mirrors the host's StorageClasses and IngressClasses into shared cluster `lc`.
    pub(crate) async fn classes(&self, lc: &str) -> Result<Action> {
        let Some(shared) = self.shared(lc) else {
            return Ok(Action::AwaitChange);
        };
        let host = self.host(&shared)?;
        let tenant = self.clients.cluster(lc)?;
        let host_storage: Vec<StorageClass> = host
            .storage_classes
            .entries()
            .into_iter()
            .map(|(_, c)| (*c).clone())
            .collect();
        let api: Api<StorageClass> = Api::all(tenant.clone());
        let names: BTreeSet<String> = host_storage.iter().map(ResourceExt::name_any).collect();
        for h in &host_storage {
            let want = tenant_storage_class(h);
            let name = h.name_any();
            match api.get_opt(&name).await? {
                None => create(&api, &want).await?,
                Some(t) if fixed(&t) != fixed(&want) => {
                    // The built-in `local` or an older copy: made again as the host has it.
                    ignore_not_found(api.delete(&name, &DeleteParams::default()).await)?;
                    create(&api, &want).await?;
                }
                Some(t)
                    if t.metadata.labels != want.metadata.labels
                        || t.metadata.annotations != want.metadata.annotations
                        || t.allow_volume_expansion != want.allow_volume_expansion
                        || t.mount_options != want.mount_options =>
                {
                    let mut updated = want.clone();
                    updated.metadata.resource_version = t.metadata.resource_version.clone();
                    api.replace(&name, &PostParams::default(), &updated).await?;
                }
                Some(_) => {}
            }
        }
        for t in api.list(&Default::default()).await?.items {
            let built_in = t.provisioner == BUILT_IN_LOCAL_PROVISIONER;
            if !names.contains(&t.name_any()) && (from_host(&t.metadata) || built_in) {
                ignore_not_found(api.delete(&t.name_any(), &DeleteParams::default()).await)?;
            }
        }
        let host_ingress: Vec<IngressClass> = host
            .ingress_classes
            .entries()
            .into_iter()
            .map(|(_, c)| (*c).clone())
            .collect();
        let api: Api<IngressClass> = Api::all(tenant);
        let names: BTreeSet<String> = host_ingress.iter().map(ResourceExt::name_any).collect();
        for h in &host_ingress {
            let want = tenant_ingress_class(h);
            let name = h.name_any();
            match api.get_opt(&name).await? {
                None => create(&api, &want).await?,
                Some(t)
                    if t.spec != want.spec
                        || t.metadata.labels != want.metadata.labels
                        || t.metadata.annotations != want.metadata.annotations =>
                {
                    let mut updated = want.clone();
                    updated.metadata.resource_version = t.metadata.resource_version.clone();
                    api.replace(&name, &PostParams::default(), &updated).await?;
                }
                Some(_) => {}
            }
        }
        for t in api.list(&Default::default()).await?.items {
            if !names.contains(&t.name_any()) && from_host(&t.metadata) {
                ignore_not_found(api.delete(&t.name_any(), &DeleteParams::default()).await)?;
            }
        }
        Ok(Action::AwaitChange)
    }
}

async fn create<K>(api: &Api<K>, want: &K) -> Result<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    match api.create(&PostParams::default(), want).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_mirrored_class_is_the_hosts_marked_as_from_the_host() {
        let host: StorageClass = serde_json::from_value(json!({
            "metadata": {"name": "local", "uid": "h", "resourceVersion": "7",
                "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
            "provisioner": "matryoshka.dev/local", "volumeBindingMode": "WaitForFirstConsumer",
        }))
        .expect("class");
        let t = tenant_storage_class(&host);
        assert_eq!(t.metadata.uid, None);
        assert_eq!(t.metadata.resource_version, None);
        let a = t.metadata.annotations.clone().expect("annotations");
        assert_eq!(a[FROM_HOST_ANNOTATION], "true");
        assert_eq!(a["storageclass.kubernetes.io/is-default-class"], "true");
        assert_eq!(fixed(&t), fixed(&host));
        assert!(from_host(&t.metadata));
    }
}
