//! Claiming dependents for a controller (upstream `ControllerRefManager`): keeping the objects a
//! controller owns, adopting orphans its selector matches, releasing owned objects that stopped
//! matching.
//!
//! The ReplicaSet and Deployment controllers carry their own copies; the StatefulSet, DaemonSet
//! and Job controllers share this one, for pods and ControllerRevisions alike. Adoption is a
//! merge patch of `ownerReferences` that carries the object's uid and resourceVersion, so it
//! fails (and is retried) rather than overwrite a concurrent change; nothing is adopted before
//! the owner has been read afresh and found alive (upstream `RecheckDeletionTimestamp`).

use std::fmt::Debug;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kube::api::{Patch, PatchParams};
use kube::{Api, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::podutil;
use runtime::error::{Result, ignore_not_found};

/// Who claims: the owner's metadata and type, its selector, and what else an adopted object
/// gets.
pub struct Claimer<'a> {
    pub owner: &'a ObjectMeta,
    pub api_version: &'a str,
    pub kind: &'a str,
    pub selector: Option<&'a LabelSelector>,
    /// A finalizer added to adopted objects (the Job controller's tracking finalizer).
    pub adopt_finalizer: Option<&'a str>,
}

/// Whether `owner`, read afresh through `api` (the informer may lag), still exists with the same
/// uid and is not being deleted.
pub async fn recheck_alive<O>(api: &Api<O>, owner: &ObjectMeta) -> Result<bool>
where
    O: Resource + Clone + DeserializeOwned + Debug,
{
    let fresh = ignore_not_found(api.get(owner.name.as_deref().unwrap_or_default()).await)?;
    Ok(fresh.is_some_and(|f| f.meta().uid == owner.uid && f.meta().deletion_timestamp.is_none()))
}

impl Claimer<'_> {
    /// The candidates the owner keeps after adopting and releasing. `filter` narrows what may
    /// be adopted (a StatefulSet adopts only pods named after it); `alive` is asked once, before
    /// the first adoption.
    pub async fn claim<K, F>(
        &self,
        api: &Api<K>,
        candidates: Vec<Arc<K>>,
        filter: impl Fn(&K) -> bool,
        alive: F,
    ) -> Result<Vec<Arc<K>>>
    where
        K: Resource + Clone + DeserializeOwned + Serialize + Debug,
        F: AsyncFnOnce() -> Result<bool>,
    {
        let uid = self.owner.uid.clone().unwrap_or_default();
        let deleting = self.owner.deletion_timestamp.is_some();
        let mut owned = Vec::new();
        let mut alive = Some(alive);
        let mut is_alive: Option<bool> = None;
        for obj in candidates {
            let meta = obj.meta();
            let matches =
                podutil::selector_matches(self.selector, &podutil::labels(meta)) && filter(&obj);
            match podutil::controller_ref(meta) {
                Some(r) if r.uid == uid => {
                    if matches || deleting {
                        owned.push(obj);
                    } else if meta.deletion_timestamp.is_none() {
                        self.release(api, &obj, &uid).await?;
                    }
                }
                Some(_) => {}
                None if matches && !deleting && meta.deletion_timestamp.is_none() => {
                    if is_alive.is_none() {
                        let f = alive.take();
                        is_alive = Some(match f {
                            Some(f) => f().await?,
                            None => false,
                        });
                    }
                    if is_alive != Some(true) {
                        continue;
                    }
                    if let Some(adopted) = self.adopt(api, &obj).await? {
                        owned.push(Arc::new(adopted));
                    }
                }
                None => {}
            }
        }
        Ok(owned)
    }

    async fn adopt<K>(&self, api: &Api<K>, obj: &K) -> Result<Option<K>>
    where
        K: Resource + Clone + DeserializeOwned + Serialize + Debug,
    {
        let meta = obj.meta();
        let mut refs = meta.owner_references.clone().unwrap_or_default();
        refs.push(podutil::new_controller_ref(
            self.owner,
            self.api_version,
            self.kind,
        ));
        let mut patch = json!({"metadata": {
            "ownerReferences": refs,
            "uid": meta.uid,
            "resourceVersion": meta.resource_version,
        }});
        if let Some(f) = self.adopt_finalizer {
            let mut finalizers = meta.finalizers.clone().unwrap_or_default();
            if !finalizers.iter().any(|x| x == f) {
                finalizers.push(f.to_string());
                patch["metadata"]["finalizers"] = json!(finalizers);
            }
        }
        let name = meta.name.as_deref().unwrap_or_default();
        match api
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(o) => Ok(Some(o)),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    async fn release<K>(&self, api: &Api<K>, obj: &K, owner_uid: &str) -> Result<()>
    where
        K: Resource + Clone + DeserializeOwned + Serialize + Debug,
    {
        let meta = obj.meta();
        let refs: Vec<_> = meta
            .owner_references
            .clone()
            .unwrap_or_default()
            .into_iter()
            .filter(|r| r.uid != owner_uid)
            .collect();
        let patch = json!({"metadata": {
            "ownerReferences": refs,
            "uid": meta.uid,
            "resourceVersion": meta.resource_version,
        }});
        let name = meta.name.as_deref().unwrap_or_default();
        match api
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}
