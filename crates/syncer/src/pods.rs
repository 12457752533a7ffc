//! Pods: a tenant pod becomes its host pod (with the ConfigMaps, Secrets and tokens it
//! uses) and the host pod's status comes back; deletion goes both ways.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, ServiceAccount};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams, Preconditions};
use kube::{Api, ResourceExt};
use runtime::client::ROOT;
use runtime::error::{Result, ignore_not_found};
use runtime::informer::ObjectKey;
use runtime::queue::Action;
use serde_json::json;

use crate::translate::Target;
use crate::{Item, Shared, Syncer, names, translate};

impl Syncer {
    pub(crate) async fn pod(&self, key: ObjectKey) -> Result<Action> {
        let Some(shared) = self.shared(&key.cluster) else {
            return Ok(Action::AwaitChange);
        };
        let target = shared.target();
        let host_name = target.name(&key.namespace, &key.name);
        let on = self.host(&shared)?;
        let host = on
            .pods
            .store()
            .get(&ObjectKey::new(ROOT, &shared.namespace, &host_name));
        let root = on.client.clone();
        let host_api: Api<Pod> = Api::namespaced(root.clone(), &shared.namespace);
        let tenant_client = self.clients.cluster(&key.cluster)?;
        let tenant_api: Api<Pod> = Api::namespaced(tenant_client.clone(), &key.namespace);
        let Some(tenant) = self.tenant_pods.get(&key) else {
            if let Some(h) = host {
                if h.metadata.deletion_timestamp.is_none() {
                    delete_pod(&host_api, &h, None).await?;
                }
            } else {
                self.collect_references(&shared, &key.namespace).await?;
            }
            return Ok(Action::AwaitChange);
        };
        let uid = tenant.metadata.uid.clone().unwrap_or_default();
        // A host pod left by an earlier tenant pod of the same name goes first.
        if let Some(h) = &host
            && h.annotations().get(names::OBJECT_UID) != Some(&uid)
        {
            if h.metadata.deletion_timestamp.is_none() {
                delete_pod(&host_api, h, None).await?;
            }
            return Ok(Action::AwaitChange);
        }
        if tenant.metadata.deletion_timestamp.is_some() {
            match host {
                Some(h) => {
                    if h.metadata.deletion_timestamp.is_none() {
                        let grace = tenant.metadata.deletion_grace_period_seconds;
                        delete_pod(&host_api, &h, grace).await?;
                    }
                }
                // Its containers are gone: the tenant pod is finalised (as a kubelet does).
                None => force_delete(&tenant_api, &tenant).await?,
            }
            return Ok(Action::AwaitChange);
        }
        let Some(node) = tenant.spec.as_ref().and_then(|s| s.node_name.clone()) else {
            // Not scheduled yet (the tenant's scheduler binds it to a mirrored node).
            return Ok(Action::AwaitChange);
        };
        let Some(h) = host else {
            if !on.pods.has_synced() {
                return Ok(Action::RequeueAfter(Duration::from_millis(100)));
            }
            let status = tenant.status.clone().unwrap_or_default();
            if status.host_ip.as_deref().is_some_and(|ip| !ip.is_empty()) {
                // It ran on the host and its host pod is gone (deleted there, evicted): the
                // tenant pod goes too, and its controller replaces it.
                force_delete(&tenant_api, &tenant).await?;
                return Ok(Action::AwaitChange);
            }
            if matches!(status.phase.as_deref(), Some("Succeeded" | "Failed")) {
                return Ok(Action::AwaitChange);
            }
            let dns = if self.options.address.is_some() {
                match self.dns_ips.read().get(key.cluster.as_str()).copied() {
                    Some(ip) => Some(ip),
                    None => {
                        self.queue.add(Item::Serve(key.cluster.to_string()));
                        return Ok(Action::RequeueAfter(Duration::from_millis(200)));
                    }
                }
            } else {
                None
            };
            let refs = translate::references(&tenant);
            self.sync_references(&tenant_client, &root, &target, &key.namespace, &refs)
                .await?;
            let tokens = self.mint_tokens(&tenant_client, &tenant).await?;
            let mut pod = translate::host_pod(&tenant, &target, &tokens, dns)?;
            if let Some(spec) = pod.spec.as_mut() {
                spec.node_name = Some(node);
            }
            self.create_on_host(&host_api, &pod, &key.cluster, &*tenant, "pod")
                .await?;
            return Ok(Action::AwaitChange);
        };
        // Its status comes back.
        let current = serde_json::to_value(tenant.status.clone().unwrap_or_default())
            .unwrap_or_else(|_| json!({}));
        let desired = translate::tenant_pod_status(&h);
        if let Some(patch) = translate::status_patch(&current, &desired) {
            ignore_not_found(
                tenant_api
                    .patch_status(&key.name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await,
            )?;
        }
        Ok(Action::AwaitChange)
    }

    /// Copies the ConfigMaps and Secrets a pod uses to the host (made or brought up to date).
    pub(crate) async fn sync_references(
        &self,
        tenant: &kube::Client,
        root: &kube::Client,
        target: &Target<'_>,
        namespace: &str,
        refs: &translate::References,
    ) -> Result<()> {
        let t_cms: Api<ConfigMap> = Api::namespaced(tenant.clone(), namespace);
        let h_cms: Api<ConfigMap> = Api::namespaced(root.clone(), target.host_namespace);
        for name in &refs.config_maps {
            // A missing one is the tenant's to make; the host pod waits for it as a kubelet
            // waits for a missing volume source.
            if let Some(cm) = t_cms.get_opt(name).await? {
                let want = translate::host_config_map(&cm, target);
                upsert(&h_cms, want, |a, b| {
                    a.data == b.data && a.binary_data == b.binary_data
                })
                .await?;
            }
        }
        let t_secrets: Api<Secret> = Api::namespaced(tenant.clone(), namespace);
        let h_secrets: Api<Secret> = Api::namespaced(root.clone(), target.host_namespace);
        for name in &refs.secrets {
            if let Some(s) = t_secrets.get_opt(name).await? {
                let want = translate::host_secret(&s, target);
                upsert(&h_secrets, want, |a, b| {
                    a.data == b.data && a.type_ == b.type_
                })
                .await?;
            }
        }
        Ok(())
    }

    /// Brings the host copies of a shared cluster's ConfigMaps and Secrets up to date with
    /// the tenant's (a deleted one goes), every [`crate::REFERENCES_RESYNC`]: only the copies
    /// are watched, not every tenant's ConfigMaps and Secrets.
    pub(crate) async fn refresh_references(&self, lc: &str) -> Result<Action> {
        let Some(shared) = self.shared(lc) else {
            return Ok(Action::AwaitChange);
        };
        let target = shared.target();
        let tenant = self.clients.cluster(lc)?;
        let on = self.host(&shared)?;
        let root = on.client.clone();
        let ours = |meta: &ObjectMeta| {
            meta.labels.as_ref().and_then(|l| l.get(names::MANAGED_BY)) == Some(&shared.name)
        };
        let h_cms: Api<ConfigMap> = Api::namespaced(root.clone(), &shared.namespace);
        for copy in on.config_maps.list_namespace(ROOT, &shared.namespace) {
            let Some((_, ns, name)) = names::tenant_of(
                copy.metadata.labels.as_ref(),
                copy.metadata.annotations.as_ref(),
            )
            .filter(|_| ours(&copy.metadata)) else {
                continue;
            };
            let t: Api<ConfigMap> = Api::namespaced(tenant.clone(), &ns);
            match t.get_opt(&name).await? {
                Some(cm) => {
                    let want = translate::host_config_map(&cm, &target);
                    upsert(&h_cms, want, |a, b| {
                        a.data == b.data && a.binary_data == b.binary_data
                    })
                    .await?;
                }
                None => {
                    ignore_not_found(
                        h_cms
                            .delete(&copy.name_any(), &DeleteParams::default())
                            .await,
                    )?;
                }
            }
        }
        let h_secrets: Api<Secret> = Api::namespaced(root, &shared.namespace);
        for copy in on.secrets.list_namespace(ROOT, &shared.namespace) {
            let Some((_, ns, name)) = names::tenant_of(
                copy.metadata.labels.as_ref(),
                copy.metadata.annotations.as_ref(),
            )
            .filter(|_| ours(&copy.metadata)) else {
                continue;
            };
            let t: Api<Secret> = Api::namespaced(tenant.clone(), &ns);
            match t.get_opt(&name).await? {
                Some(secret) => {
                    let want = translate::host_secret(&secret, &target);
                    upsert(&h_secrets, want, |a, b| {
                        a.data == b.data && a.type_ == b.type_
                    })
                    .await?;
                }
                None => {
                    ignore_not_found(
                        h_secrets
                            .delete(&copy.name_any(), &DeleteParams::default())
                            .await,
                    )?;
                }
            }
        }
        Ok(Action::RequeueAfter(crate::REFERENCES_RESYNC))
    }

    /// Deletes the host copies of ConfigMaps and Secrets no tenant pod of the namespace uses.
    pub(crate) async fn collect_references(&self, shared: &Shared, namespace: &str) -> Result<()> {
        let mut used = translate::References::default();
        for p in self.tenant_pods.list_namespace(&shared.logical, namespace) {
            let r = translate::references(&p);
            used.config_maps.extend(r.config_maps);
            used.secrets.extend(r.secrets);
        }
        let root = self.host(shared)?.client.clone();
        let selector = format!(
            "{}={},{}={}",
            names::MANAGED_BY,
            shared.name,
            names::NAMESPACE,
            namespace
        );
        let lp = ListParams::default().labels(&selector);
        let cms: Api<ConfigMap> = Api::namespaced(root.clone(), &shared.namespace);
        for cm in cms.list(&lp).await?.items {
            let tenant_name = cm.annotations().get(names::OBJECT_NAME).cloned();
            if tenant_name.is_some_and(|n| !used.config_maps.contains(&n)) {
                ignore_not_found(cms.delete(&cm.name_any(), &DeleteParams::default()).await)?;
            }
        }
        let secrets: Api<Secret> = Api::namespaced(root, &shared.namespace);
        for s in secrets.list(&lp).await?.items {
            let tenant_name = s.annotations().get(names::OBJECT_NAME).cloned();
            if tenant_name.is_some_and(|n| !used.secrets.contains(&n)) {
                ignore_not_found(
                    secrets
                        .delete(&s.name_any(), &DeleteParams::default())
                        .await,
                )?;
            }
        }
        Ok(())
    }

    /// The pod's projected service-account tokens, minted by its own cluster and bound to it.
    pub(crate) async fn mint_tokens(
        &self,
        tenant: &kube::Client,
        pod: &Pod,
    ) -> Result<BTreeMap<String, String>> {
        let mut out = BTreeMap::new();
        let sources = translate::token_sources(pod);
        if sources.is_empty() {
            return Ok(out);
        }
        let namespace = pod.namespace().unwrap_or_default();
        let account = pod
            .spec
            .as_ref()
            .and_then(|s| s.service_account_name.clone())
            .unwrap_or_else(|| "default".into());
        let api: Api<ServiceAccount> = Api::namespaced(tenant.clone(), &namespace);
        for src in sources {
            let request = TokenRequest {
                metadata: ObjectMeta::default(),
                spec: TokenRequestSpec {
                    audiences: src.audience.clone().into_iter().collect(),
                    expiration_seconds: src.expiration_seconds,
                    bound_object_ref: Some(BoundObjectReference {
                        api_version: Some("v1".into()),
                        kind: Some("Pod".into()),
                        name: pod.metadata.name.clone(),
                        uid: pod.metadata.uid.clone(),
                    }),
                },
                status: None,
            };
            let minted = api
                .create_token_request(&account, &PostParams::default(), &request)
                .await?;
            if let Some(status) = minted.status {
                out.insert(src.annotation, status.token);
            }
        }
        Ok(out)
    }
}

impl Syncer {
    /// Creates the host copy `obj` of tenant object `tenant` (of cluster `lc`); when the host
    /// refuses it (its quotas, limits, admission) the tenant object gets a `SyncError`
    /// Warning Event saying why, and the error is returned to be tried again with backoff.
    pub(crate) async fn create_on_host<K, T>(
        &self,
        api: &Api<K>,
        obj: &K,
        lc: &str,
        tenant: &T,
        what: &str,
    ) -> Result<()>
    where
        K: kube::Resource
            + Clone
            + serde::de::DeserializeOwned
            + serde::Serialize
            + std::fmt::Debug,
        T: kube::Resource<DynamicType = ()>,
    {
        match api.create(&PostParams::default(), obj).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
            Err(kube::Error::Api(e)) => {
                self.recorder.record(
                    lc,
                    runtime::events::reference(tenant),
                    runtime::events::WARNING,
                    "SyncError",
                    format!("the host refused the {what}: {}", e.message),
                );
                Err(kube::Error::Api(e).into())
            }
            Err(e) => Err(e.into()),
        }
    }
}

/// Deletes a host pod (that pod, by uid) with a grace period.
async fn delete_pod(api: &Api<Pod>, pod: &Pod, grace: Option<i64>) -> Result<()> {
    let dp = DeleteParams {
        grace_period_seconds: grace.and_then(|g| u32::try_from(g).ok()),
        preconditions: Some(Preconditions {
            uid: pod.metadata.uid.clone(),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match api.delete(&pod.name_any(), &dp).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Removes a tenant pod whose containers are gone (grace 0, that pod by uid).
async fn force_delete(api: &Api<Pod>, pod: &Pod) -> Result<()> {
    delete_pod(api, pod, Some(0)).await
}

/// Creates `want`, or replaces the existing object when `same` says it differs.
async fn upsert<K>(api: &Api<K>, want: K, same: impl Fn(&K, &K) -> bool) -> Result<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let name = want.meta().name.clone().unwrap_or_default();
    match api.get_opt(&name).await? {
        None => match api.create(&PostParams::default(), &want).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
            Err(e) => Err(e.into()),
        },
        Some(existing) if same(&existing, &want) => Ok(()),
        Some(existing) => {
            let mut w = want;
            w.meta_mut().resource_version = existing.meta().resource_version.clone();
            api.replace(&name, &PostParams::default(), &w).await?;
            Ok(())
        }
    }
}
