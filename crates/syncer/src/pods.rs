//! Pods: a tenant pod becomes its host pod (with the ConfigMaps, Secrets and tokens it
//! uses) and the host pod's status comes back; deletion goes both ways.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Endpoints, Pod, Secret, Service, ServiceAccount};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams, Preconditions};
use kube::{Api, ResourceExt};
use runtime::client::ROOT;
use runtime::error::{Result, ignore_not_found};
use runtime::informer::ObjectKey;
use runtime::queue::Action;
use serde_json::{Value, json};

use crate::translate::Target;

/// How long the API server's address pods are given is used before it is read again.
const API_ENDPOINT_TTL: Duration = Duration::from_secs(10);

/// The annotation of a host pod with service-account tokens: when they are to be minted
/// again (unix seconds), once 80 % of the shortest one's lifetime has passed, or after a day —
/// the kubelet's rule for the projected tokens it refreshes.
pub(crate) const TOKENS_REFRESH: &str = "syncer.matryoshka.dev/tokens-refresh-at";

/// The in-memory annotation naming the ConfigMaps (`c:<name>`) and Secrets (`s:<name>`) a
/// tenant pod uses, comma-separated, in the syncer's store (which keeps no spec).
pub(crate) const REFERENCES: &str = "syncer.matryoshka.dev/references";
/// The in-memory annotation standing for a tenant pod's status in the syncer's store: a
/// digest of it and its top-level keys (`<digest> <key>,<key>`), all the comparison with the
/// host pod's status and the patch removing what the host no longer reports need.
pub(crate) const STATUS: &str = "syncer.matryoshka.dev/status";

/// A tenant pod as the syncer's store keeps it: its metadata, its node, its phase and host
/// IP, and in annotations the ConfigMaps and Secrets it uses ([`REFERENCES`]) and its status
/// digest ([`STATUS`]). Its whole spec is read from its API server when its host pod is made
/// (once per pod), so the store does not hold every pod's spec and status.
pub(crate) fn slim_tenant_pod(p: &mut Pod) {
    p.metadata.managed_fields = None;
    let refs = translate::references(p);
    let status = serde_json::to_value(p.status.take().unwrap_or_default()).unwrap_or_default();
    let keys: Vec<&str> = status
        .as_object()
        .map(|o| o.keys().map(String::as_str).collect())
        .unwrap_or_default();
    let digest = format!("{} {}", crate::nodes::value_digest(&status), keys.join(","));
    let encoded: Vec<String> = refs
        .config_maps
        .iter()
        .map(|n| format!("c:{n}"))
        .chain(refs.secrets.iter().map(|n| format!("s:{n}")))
        .collect();
    let ann = p.metadata.annotations.get_or_insert_with(BTreeMap::new);
    ann.remove("kubectl.kubernetes.io/last-applied-configuration");
    ann.insert(REFERENCES.into(), encoded.join(","));
    ann.insert(STATUS.into(), digest);
    p.status = Some(k8s_openapi::api::core::v1::PodStatus {
        phase: status
            .get("phase")
            .and_then(serde_json::Value::as_str)
            .map(str::to_string),
        host_ip: status
            .get("hostIP")
            .and_then(serde_json::Value::as_str)
            .map(str::to_string),
        ..Default::default()
    });
    if let Some(spec) = p.spec.take() {
        p.spec = Some(k8s_openapi::api::core::v1::PodSpec {
            node_name: spec.node_name,
            ..Default::default()
        });
    }
}

/// When a token minted at `issued` and expiring at `expires` (unix seconds) is minted again:
/// after 80 % of its lifetime, at most a day later (the kubelet's rule).
fn refresh_time(issued: i64, expires: i64) -> i64 {
    let life = (expires - issued).max(1);
    issued + (life * 8 / 10).clamp(1, 24 * 3600)
}

/// Whether a pod has finished (its containers will not start again).
fn is_terminal(p: &Pod) -> bool {
    matches!(
        p.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

/// The ConfigMaps and Secrets a stored (slim) tenant pod uses.
fn stored_references(p: &Pod) -> translate::References {
    let mut r = translate::References::default();
    let encoded = p
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(REFERENCES))
        .map(String::as_str)
        .unwrap_or_default();
    for item in encoded.split(',') {
        if let Some(n) = item.strip_prefix("c:") {
            r.config_maps.insert(n.to_string());
        } else if let Some(n) = item.strip_prefix("s:") {
            r.secrets.insert(n.to_string());
        }
    }
    r
}

/// A stored (slim) tenant pod's status digest and top-level status keys.
fn stored_status(p: &Pod) -> (&str, Vec<&str>) {
    let s = p
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(STATUS))
        .map(String::as_str)
        .unwrap_or_default();
    let (digest, keys) = s.split_once(' ').unwrap_or((s, ""));
    (digest, keys.split(',').filter(|k| !k.is_empty()).collect())
}
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
        // Where the tenant pod is bound: none yet (the host's scheduler places its host pod,
        // then it is bound there), or a node named in its spec by its author.
        let node = tenant.spec.as_ref().and_then(|s| s.node_name.clone());
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
            // The store keeps no spec: the pod is read whole, once, to make its host pod.
            let Some(full) = tenant_api
                .get_opt(&key.name)
                .await?
                .filter(|p| p.metadata.uid.as_deref() == Some(uid.as_str()))
            else {
                return Ok(Action::AwaitChange);
            };
            let refs = translate::references(&full);
            self.sync_references(&tenant_client, &root, &target, &key.namespace, &refs)
                .await?;
            let (tokens, refresh) = self.mint_tokens(&tenant_client, &full).await?;
            let env = self.service_env(&key.cluster, &full).await;
            let mut pod = translate::host_pod(&full, &target, &tokens, dns, &env)?;
            if let Some(at) = refresh {
                pod.metadata
                    .annotations
                    .get_or_insert_with(BTreeMap::new)
                    .insert(TOKENS_REFRESH.into(), at.to_string());
            }
            self.create_on_host(&host_api, &pod, &key.cluster, &*tenant, "pod")
                .await?;
            return Ok(Action::AwaitChange);
        };
        // The node the host's scheduler chose is the tenant pod's too (as upstream's
        // scheduler binds: the `binding` subresource).
        if node.is_none()
            && let Some(chosen) = h.spec.as_ref().and_then(|s| s.node_name.as_deref())
        {
            bind(&tenant_api, &tenant, chosen).await?;
        }
        // Its tokens are minted again before they expire (the host kubelet writes the
        // annotations into the pod's files, as a kubelet writes the tokens it refreshes).
        let mut action = Action::AwaitChange;
        if let Some(at) = h
            .annotations()
            .get(TOKENS_REFRESH)
            .and_then(|a| a.parse::<i64>().ok())
            .filter(|_| !is_terminal(&h))
        {
            let now = Timestamp::now().as_second();
            if now >= at {
                self.refresh_tokens(&tenant_api, &host_api, &tenant_client, &tenant, &h)
                    .await?;
            } else {
                action = Action::RequeueAfter(Duration::from_secs(
                    u64::try_from(at - now).unwrap_or(1).max(1),
                ));
            }
        }
        // Its status comes back.
        let desired = translate::tenant_pod_status(&h);
        let (digest, keys) = stored_status(&tenant);
        if crate::nodes::value_digest(&desired) != digest {
            let patch = translate::status_patch(&keys, &desired);
            ignore_not_found(
                tenant_api
                    .patch_status(&key.name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await,
            )?;
        }
        Ok(action)
    }

    /// Mints a host pod's tokens again and hands them in (with the next refresh time).
    async fn refresh_tokens(
        &self,
        tenant_api: &Api<Pod>,
        host_api: &Api<Pod>,
        tenant_client: &kube::Client,
        tenant: &Pod,
        host: &Pod,
    ) -> Result<()> {
        let Some(full) = tenant_api
            .get_opt(&tenant.name_any())
            .await?
            .filter(|p| p.metadata.uid == tenant.metadata.uid)
        else {
            return Ok(());
        };
        let (tokens, refresh) = self.mint_tokens(tenant_client, &full).await?;
        let mut annotations: serde_json::Map<String, Value> = tokens
            .into_iter()
            .map(|(k, v)| (k, Value::String(v)))
            .collect();
        annotations.insert(
            TOKENS_REFRESH.into(),
            refresh.map_or(Value::Null, |at| Value::String(at.to_string())),
        );
        let patch = json!({"metadata": {"uid": host.metadata.uid, "annotations": annotations}});
        ignore_not_found(
            host_api
                .patch(
                    &host.name_any(),
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await,
        )?;
        Ok(())
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
            let r = stored_references(&p);
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

    /// The Service variables the tenant's kubelet would give the pod's containers (upstream's
    /// `getServiceEnvVarMap`): the tenant's Services of its namespace (their cluster IPs are
    /// the host's) when `enableServiceLinks`, and always `KUBERNETES_SERVICE_HOST` and its
    /// family naming the platform's API server as pods reach it (its `default/kubernetes`
    /// endpoints in the root cluster), which serves an in-cluster client the cluster its
    /// token was issued in. Written into the host pod, they stand before the host kubelet's
    /// own (which would name the host's API server).
    pub(crate) async fn service_env(&self, lc: &str, pod: &Pod) -> BTreeMap<String, String> {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        let links = pod
            .spec
            .as_ref()
            .and_then(|s| s.enable_service_links)
            .unwrap_or(true);
        let mut services: Vec<Service> = if links {
            self.tenant_services
                .list_namespace(lc, namespace)
                .into_iter()
                // The tenant's own API Service is not synced (its cluster IP means nothing
                // on the host): it stands below for the platform's address.
                .filter(|s| {
                    !(namespace == "default" && s.metadata.name.as_deref() == Some("kubernetes"))
                })
                .map(|s| (*s).clone())
                .collect()
        } else {
            Vec::new()
        };
        if let Some(api) = self.api_endpoint().await {
            services.push(
                serde_json::from_value(json!({
                    "metadata": {"name": "kubernetes", "namespace": "default"},
                    "spec": {"clusterIP": api.ip().to_string(),
                        "ports": [{"name": "https", "port": api.port(), "protocol": "TCP"}]},
                }))
                .unwrap_or_default(),
            );
        }
        runtime::envvars::service_env(&services, namespace, links)
    }

    /// Where pods reach the platform's API server: the first address and port of the root
    /// cluster's `default/kubernetes` Endpoints (read again after [`API_ENDPOINT_TTL`]); none
    /// when the platform publishes none (no advertise address).
    async fn api_endpoint(&self) -> Option<std::net::SocketAddr> {
        let cached = *self.api_endpoint.read();
        if let Some((at, addr)) = cached
            && at.elapsed() < API_ENDPOINT_TTL
        {
            return addr;
        }
        let root = self.clients.cluster(ROOT).ok()?;
        let api: Api<Endpoints> = Api::namespaced(root, "default");
        let found = match api.get_opt("kubernetes").await {
            Ok(ep) => ep.and_then(|ep| {
                let subset = ep.subsets?.into_iter().next()?;
                let ip = subset.addresses?.first()?.ip.parse().ok()?;
                let ports = subset.ports.unwrap_or_default();
                let port = ports
                    .iter()
                    .find(|p| p.name.as_deref() == Some("https"))
                    .or(ports.first())?
                    .port;
                Some(std::net::SocketAddr::new(ip, u16::try_from(port).ok()?))
            }),
            Err(e) => {
                tracing::warn!(error = %e, "reading the API server's endpoints");
                return None;
            }
        };
        // An address not published yet (the API server writes it once it leads) is looked
        // for again at the next pod.
        if found.is_some() {
            *self.api_endpoint.write() = Some((std::time::Instant::now(), found));
        }
        found
    }

    /// Mints the tokens of a pod's projected service-account token sources in its tenant
    /// cluster (bound to the pod), by annotation, and when to mint them again (unix seconds).
    pub(crate) async fn mint_tokens(
        &self,
        tenant: &kube::Client,
        pod: &Pod,
    ) -> Result<(BTreeMap<String, String>, Option<i64>)> {
        let mut out = BTreeMap::new();
        let sources = translate::token_sources(pod);
        if sources.is_empty() {
            return Ok((out, None));
        }
        let mut refresh: Option<i64> = None;
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
            let now = Timestamp::now().as_second();
            let minted = api
                .create_token_request(&account, &PostParams::default(), &request)
                .await?;
            if let Some(status) = minted.status {
                let at = refresh_time(now, status.expiration_timestamp.0.as_second());
                refresh = Some(refresh.map_or(at, |r| r.min(at)));
                out.insert(src.annotation, status.token);
            }
        }
        Ok((out, refresh))
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

/// Binds a tenant pod (that pod, by uid) to `node`: a pod already bound (409) or gone is fine.
async fn bind(api: &Api<Pod>, pod: &Pod, node: &str) -> Result<()> {
    let name = pod.name_any();
    let binding = json!({
        "apiVersion": "v1", "kind": "Binding",
        "metadata": {"name": name, "uid": pod.metadata.uid},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    });
    match api
        .create_subresource::<Value, Value>("binding", &name, &PostParams::default(), &binding)
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_minted_again_after_four_fifths_of_their_life_or_a_day() {
        assert_eq!(refresh_time(1000, 1010), 1008);
        assert_eq!(refresh_time(0, 3607), 2885);
        assert_eq!(refresh_time(0, 365 * 24 * 3600), 24 * 3600);
        assert_eq!(refresh_time(50, 50), 51, "never in the past");
    }

    #[test]
    fn a_stored_tenant_pod_keeps_its_node_references_and_status_digest_but_no_spec() {
        let mut p: Pod = serde_json::from_value(json!({
            "metadata": {"name": "web-1", "namespace": "default", "uid": "u-1",
                "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"}},
            "spec": {"nodeName": "node-a", "containers": [{"name": "c", "image": "i",
                "envFrom": [{"secretRef": {"name": "creds"}}]}],
                "volumes": [{"name": "v", "configMap": {"name": "conf"}}]},
            "status": {"phase": "Running", "hostIP": "10.0.0.2", "podIP": "10.244.0.9"},
        }))
        .unwrap();
        let status = serde_json::to_value(p.status.clone().unwrap()).unwrap();
        slim_tenant_pod(&mut p);
        let spec = p.spec.as_ref().unwrap();
        assert_eq!(spec.node_name.as_deref(), Some("node-a"));
        assert!(spec.containers.is_empty() && spec.volumes.is_none());
        let st = p.status.as_ref().unwrap();
        assert_eq!(st.phase.as_deref(), Some("Running"));
        assert_eq!(st.host_ip.as_deref(), Some("10.0.0.2"));
        assert_eq!(st.pod_ip, None);
        let refs = stored_references(&p);
        assert_eq!(refs.config_maps, ["conf".to_string()].into());
        assert_eq!(refs.secrets, ["creds".to_string()].into());
        let (digest, keys) = stored_status(&p);
        assert_eq!(digest, crate::nodes::value_digest(&status));
        assert_eq!(keys, ["hostIP", "phase", "podIP"]);
        assert!(
            !p.metadata
                .annotations
                .as_ref()
                .unwrap()
                .contains_key("kubectl.kubernetes.io/last-applied-configuration")
        );
    }
}
