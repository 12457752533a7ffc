//! The syncer of shared-node tenant clusters (vcluster's model, spec: peers.md §2.4–2.5).
//!
//! A TenantCluster with `spec.workers.mode: shared` has no machines: its pods run on the host
//! cluster's nodes, in the TenantCluster's namespace of the root cluster. One syncer serves
//! every such cluster (an API client like the controllers: cross-cluster informers of the
//! tenants' pods, Services and nodes, root informers of what it made on the host), and:
//!
//! - **to the host**: a tenant pod, once the tenant's scheduler has bound it to one of the
//!   mirrored nodes, becomes a host pod `<name>-x-<namespace>-x-<cluster>` on that node
//!   ([`translate::host_pod`]), with the ConfigMaps and Secrets it uses copied beside it,
//!   its projected service-account tokens minted by the tenant cluster (TokenRequest, bound
//!   to the tenant pod) and its DNS pointed at the tenant cluster's own DNS server; a tenant
//!   Service becomes a host Service selecting only that cluster's pods of that namespace;
//! - **back to the tenant**: the host pod's status (phase, conditions, IPs, container
//!   statuses); the host Service's cluster IP (a tenant Service with another IP is re-created
//!   with the host's, as vcluster does, so one IP means the same Service everywhere); the
//!   host's nodes, mirrored with their status and Lease; the host's Events about synced pods;
//! - **deletion both ways**: a deleted tenant pod deletes its host pod (with the tenant's
//!   grace period) and is finalised once the host pod is gone; a host pod that vanishes (by
//!   hand, eviction) takes its tenant pod with it, so the tenant's controllers replace it;
//!   a deleted tenant Service deletes the host one; a host Service deleted by hand is made
//!   again. Every host object is owned by the TenantCluster, so deleting the cluster collects
//!   them all.
//!
//! **DNS.** Each shared cluster gets a [`dns::ClusterDns`] of its own (one view per cluster,
//! as the dns crate requires) on [`Options::dns_address`] at a port of its own, behind a
//! selector-less host Service `kube-dns-x-kube-system-x-<cluster>`; the tenant's
//! `kube-system/kube-dns` Service takes that Service's cluster IP, and the host pods'
//! resolv.conf names it.
//!
//! **Kubelet API.** Each shared cluster also gets a [`kubelet`] proxy listener; its mirrored
//! nodes name it as their kubelet, so `kubectl logs/exec/attach/port-forward` in the tenant
//! cluster reach the host pod (authorised in the tenant cluster, as a kubelet authorises).
//!
//! Isolation comes from the host: each shared cluster's pods run in its own host namespace,
//! under that namespace's ResourceQuotas, LimitRanges and NetworkPolicies.

pub mod kubelet;
pub mod names;
pub mod translate;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{
    ConfigMap, Event, Node, ObjectReference, Pod, Secret, Service, ServiceAccount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
    PostParams, Preconditions,
};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher;
use kube::{Api, ResourceExt};
use parking_lot::{Mutex, RwLock};
use runtime::client::{ClusterClients, ROOT};
use runtime::error::{Result, ignore_not_found};
use runtime::informer::{Informer, ObjectKey, Store};
use runtime::queue::{Action, Queue, run_workers};
use runtime::shared::Shutdown;
use serde_json::{Value, json};

use crate::translate::Target;

/// The component's name (leader-election Lease, field manager, user agent).
pub const COMPONENT: &str = "syncer";
/// The platform's TenantCluster.
const PLATFORM_GROUP: &str = "platform.matryoshka.dev";
const PLATFORM_VERSION: &str = "v1alpha1";
/// The namespace of node Leases.
const LEASE_NAMESPACE: &str = "kube-node-lease";

/// How the syncer runs.
#[derive(Debug, Clone)]
pub struct Options {
    /// Where each shared cluster's DNS server and kubelet proxy listen (on ports of their
    /// own): an address of this machine the host's pods and the API server reach. None: host
    /// pods keep the host's DNS and the tenant's kubelet API is not served.
    pub address: Option<IpAddr>,
    /// The client certificate the kubelet proxy presents to host kubelets.
    pub kubelet_identity: Option<kubelet::KubeletIdentity>,
    /// Where the tenant DNS servers send names outside their cluster.
    pub dns_upstream: dns::Upstream,
    /// Run under leader election with this identity (one active syncer per set of replicas).
    pub leader_identity: Option<String>,
    /// Reconciling workers.
    pub workers: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            address: None,
            kubelet_identity: None,
            dns_upstream: dns::Upstream::Disabled,
            leader_identity: None,
            workers: 4,
        }
    }
}

/// A shared tenant cluster.
#[derive(Debug, Clone, PartialEq)]
struct Shared {
    /// The TenantCluster's name (the `-x-<cluster>` suffix of host names).
    name: String,
    /// Its namespace in the root cluster, where its pods run.
    namespace: String,
    uid: String,
    /// The logical cluster serving it.
    logical: String,
}

impl Shared {
    fn target(&self) -> Target<'_> {
        Target {
            cluster: &self.name,
            host_namespace: &self.namespace,
            owner: Some(OwnerReference {
                api_version: format!("{PLATFORM_GROUP}/{PLATFORM_VERSION}"),
                kind: "TenantCluster".into(),
                name: self.name.clone(),
                uid: self.uid.clone(),
                block_owner_deletion: None,
                controller: None,
            }),
        }
    }
}

/// What is reconciled.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Item {
    /// A tenant pod (its cluster is the logical cluster).
    Pod(ObjectKey),
    /// A tenant Service.
    Service(ObjectKey),
    /// The mirrored nodes of a logical cluster.
    Nodes(String),
    /// The DNS server and kubelet proxy of a logical cluster.
    Serve(String),
}

/// A tenant cluster's DNS server and the address its pods use.
struct TenantDns {
    server: dns::ClusterDns,
    cluster_ip: Option<IpAddr>,
}

struct Syncer {
    clients: ClusterClients,
    options: Options,
    clusters: RwLock<HashMap<String, Arc<Shared>>>,
    /// (host namespace, cluster name) → logical cluster.
    by_host: RwLock<HashMap<(String, String), String>>,
    tenant_pods: Store<Pod>,
    tenant_services: Store<Service>,
    tenant_nodes: Store<Node>,
    host_pods: Arc<Informer<Pod>>,
    host_services: Store<Service>,
    host_nodes: Store<Node>,
    host_leases: Store<Lease>,
    dns: tokio::sync::Mutex<HashMap<String, TenantDns>>,
    dns_ips: RwLock<HashMap<String, IpAddr>>,
    proxies: tokio::sync::Mutex<HashMap<String, kubelet::ProxyServer>>,
    proxy_ports: RwLock<HashMap<String, u16>>,
    /// How the kubelet proxy reaches host kubelets.
    kubelet_tls: Option<Arc<rustls::ClientConfig>>,
    /// The renew time last mirrored per (logical cluster, node).
    leases: Mutex<HashMap<(String, String), String>>,
    queue: Arc<Queue<Item>>,
}

fn tenant_cluster_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(PLATFORM_GROUP, PLATFORM_VERSION, "TenantCluster"),
        "tenantclusters",
    )
}

/// The shared cluster a TenantCluster is, if it is one (and is not being deleted).
fn shared_of(tc: &DynamicObject) -> Option<Shared> {
    if tc.metadata.deletion_timestamp.is_some()
        || tc
            .data
            .pointer("/spec/workers/mode")
            .and_then(Value::as_str)
            != Some("shared")
    {
        return None;
    }
    Some(Shared {
        name: tc.metadata.name.clone()?,
        namespace: tc.metadata.namespace.clone()?,
        uid: tc.metadata.uid.clone()?,
        logical: tc
            .data
            .pointer("/status/logicalCluster")
            .and_then(Value::as_str)?
            .to_string(),
    })
}

fn managed_selector() -> watcher::Config {
    watcher::Config::default().labels(names::MANAGED_BY)
}

/// Runs the syncer until `shutdown`.
pub async fn run(
    clients: ClusterClients,
    options: Options,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<()> {
    let (stop, stopped) = Shutdown::new();
    let election = match options.leader_identity.clone() {
        Some(id) => {
            let config = runtime::leader::LeaderConfig::named(COMPONENT, id);
            let client = clients.cluster(ROOT)?;
            let clients = clients.clone();
            let options = options.clone();
            tokio::spawn(runtime::leader::run_while_leading(
                client,
                config,
                stopped.clone().wait(),
                move |term: Shutdown| {
                    let (clients, options) = (clients.clone(), options.clone());
                    async move { lead(clients, options, term).await }
                },
            ))
        }
        None => {
            let s = stopped.clone();
            tokio::spawn(async move {
                if let Err(e) = lead(clients, options, s).await {
                    tracing::error!(error = %e, "the syncer stopped");
                }
            })
        }
    };
    shutdown.await;
    stop.trigger();
    let _ = election.await;
    Ok(())
}

/// The syncer while it leads: informers, handlers, workers, the host Events' watch.
async fn lead(clients: ClusterClients, options: Options, term: Shutdown) -> Result<()> {
    let clients = clients.with_user_agent(COMPONENT);
    let root = clients.cluster(ROOT)?;
    let tcs = Informer::<DynamicObject>::from_stream(
        "tenantclusters",
        watcher::watcher(
            Api::<DynamicObject>::all_with(root.clone(), &tenant_cluster_resource()),
            watcher::Config::default(),
        )
        .default_backoff(),
    );
    let tenant_pods = Informer::<Pod>::new(&clients, watcher::Config::default())?;
    let tenant_services = Informer::<Service>::new(&clients, watcher::Config::default())?;
    let tenant_nodes = Informer::<Node>::new(&clients, watcher::Config::default())?;
    let host = |name: &str| -> Result<kube::Client> {
        let _ = name;
        clients.cluster(ROOT)
    };
    let host_pods = Informer::<Pod>::from_stream(
        "host-pods",
        runtime::lenient::watcher(Api::<Pod>::all(host("pods")?), managed_selector(), None)
            .default_backoff(),
    );
    let host_services = Informer::<Service>::from_stream(
        "host-services",
        runtime::lenient::watcher(
            Api::<Service>::all(host("services")?),
            managed_selector(),
            None,
        )
        .default_backoff(),
    );
    let host_nodes = Informer::<Node>::root(&clients)?;
    let host_leases = Informer::<Lease>::from_stream(
        "host-leases",
        runtime::lenient::watcher(
            Api::<Lease>::namespaced(root.clone(), LEASE_NAMESPACE),
            watcher::Config::default(),
            None,
        )
        .default_backoff(),
    );
    let queue = Queue::new();
    let kubelet_tls = match &options.kubelet_identity {
        Some(id) => Some(Arc::new(
            streaming::proxy::client_tls(&id.cert_pem, &id.key_pem, None)
                .map_err(runtime::error::Error::Config)?,
        )),
        None => None,
    };
    let s = Arc::new(Syncer {
        clients: clients.clone(),
        options,
        clusters: RwLock::new(HashMap::new()),
        by_host: RwLock::new(HashMap::new()),
        tenant_pods: tenant_pods.store(),
        tenant_services: tenant_services.store(),
        tenant_nodes: tenant_nodes.store(),
        host_pods: host_pods.clone(),
        host_services: host_services.store(),
        host_nodes: host_nodes.store(),
        host_leases: host_leases.store(),
        dns: tokio::sync::Mutex::new(HashMap::new()),
        dns_ips: RwLock::new(HashMap::new()),
        proxies: tokio::sync::Mutex::new(HashMap::new()),
        proxy_ports: RwLock::new(HashMap::new()),
        kubelet_tls,
        leases: Mutex::new(HashMap::new()),
        queue: queue.clone(),
    });
    // Handlers only enqueue.
    let store = tcs.store();
    let h = s.clone();
    tcs.on_change(move |_| h.clusters_changed(&store));
    let h = s.clone();
    tenant_pods.on_change(move |c| {
        if h.is_shared(&c.key().cluster) {
            h.queue.add(Item::Pod(c.key().clone()));
        }
    });
    let h = s.clone();
    tenant_services.on_change(move |c| {
        if h.is_shared(&c.key().cluster) {
            h.queue.add(Item::Service(c.key().clone()));
        }
    });
    let h = s.clone();
    tenant_nodes.on_change(move |c| {
        if h.is_shared(&c.key().cluster) {
            h.queue.add(Item::Nodes(c.key().cluster.to_string()));
        }
    });
    let h = s.clone();
    host_pods.on_change(move |c| {
        if let Some(key) = h.tenant_key(&c.object().metadata) {
            h.queue.add(Item::Pod(key));
        }
    });
    let h = s.clone();
    host_services.on_change(move |c| {
        if let Some(key) = h.tenant_key(&c.object().metadata) {
            h.queue.add(Item::Service(key));
        }
    });
    let h = s.clone();
    host_nodes.on_change(move |_| h.all_nodes());
    let h = s.clone();
    host_leases.on_change(move |_| h.all_nodes());

    let mut tasks = Vec::new();
    for run in [
        tokio::spawn(tcs.clone().run(term.clone().wait())),
        tokio::spawn(tenant_pods.clone().run(term.clone().wait())),
        tokio::spawn(tenant_services.clone().run(term.clone().wait())),
        tokio::spawn(tenant_nodes.clone().run(term.clone().wait())),
        tokio::spawn(host_pods.clone().run(term.clone().wait())),
        tokio::spawn(host_services.clone().run(term.clone().wait())),
        tokio::spawn(host_nodes.clone().run(term.clone().wait())),
        tokio::spawn(host_leases.clone().run(term.clone().wait())),
    ] {
        tasks.push(run);
    }
    let events = tokio::spawn(s.clone().host_events(term.clone()));
    host_pods.wait_synced().await;
    tenant_pods.wait_synced().await;
    let workers = s.options.workers;
    let w = s.clone();
    let work = tokio::spawn(run_workers(
        COMPONENT,
        queue.clone(),
        workers,
        move |item| {
            let s = w.clone();
            async move { s.reconcile(item).await }
        },
    ));
    term.wait().await;
    queue.shut_down();
    events.abort();
    let _ = work.await;
    for t in tasks {
        let _ = t.await;
    }
    for (_, d) in s.dns.lock().await.drain() {
        d.server.shutdown().await;
    }
    s.proxies.lock().await.clear();
    Ok(())
}

impl Syncer {
    fn is_shared(&self, logical: &str) -> bool {
        self.clusters.read().contains_key(logical)
    }

    fn shared(&self, logical: &str) -> Option<Arc<Shared>> {
        self.clusters.read().get(logical).cloned()
    }

    /// The tenant object a host object stands for.
    fn tenant_key(&self, meta: &ObjectMeta) -> Option<ObjectKey> {
        let (cluster, namespace, name) =
            names::tenant_of(meta.labels.as_ref(), meta.annotations.as_ref())?;
        let host_ns = meta.namespace.clone()?;
        let logical = self.by_host.read().get(&(host_ns, cluster)).cloned()?;
        Some(ObjectKey::new(&logical, &namespace, &name))
    }

    /// Rebuilds the set of shared clusters; a new one gets its nodes, DNS and objects synced.
    fn clusters_changed(&self, tcs: &Store<DynamicObject>) {
        let fresh: HashMap<String, Arc<Shared>> = tcs
            .entries()
            .into_iter()
            .filter_map(|(_, tc)| shared_of(&tc))
            .map(|s| (s.logical.clone(), Arc::new(s)))
            .collect();
        let added: Vec<String> = {
            let old = self.clusters.read();
            fresh
                .iter()
                .filter(|(k, v)| old.get(*k) != Some(*v))
                .map(|(k, _)| k.clone())
                .collect()
        };
        let removed: Vec<String> = self
            .clusters
            .read()
            .keys()
            .filter(|k| !fresh.contains_key(*k))
            .cloned()
            .collect();
        *self.by_host.write() = fresh
            .values()
            .map(|s| ((s.namespace.clone(), s.name.clone()), s.logical.clone()))
            .collect();
        *self.clusters.write() = fresh;
        for lc in added {
            self.queue.add(Item::Nodes(lc.clone()));
            self.queue.add(Item::Serve(lc.clone()));
            for (k, _) in self.tenant_pods.list_cluster(&lc) {
                self.queue.add(Item::Pod(k));
            }
            for (k, _) in self.tenant_services.list_cluster(&lc) {
                self.queue.add(Item::Service(k));
            }
        }
        for lc in removed {
            // Its DNS server stops; its host objects go with the TenantCluster (owned).
            self.queue.add(Item::Serve(lc));
        }
    }

    fn all_nodes(&self) {
        for lc in self.clusters.read().keys() {
            self.queue.add(Item::Nodes(lc.clone()));
        }
    }

    async fn reconcile(self: &Arc<Self>, item: Item) -> Result<Action> {
        match item {
            Item::Pod(key) => self.pod(key).await,
            Item::Service(key) => self.service(key).await,
            Item::Nodes(lc) => self.nodes(&lc).await,
            Item::Serve(lc) => self.serve(&lc).await,
        }
    }

    // ---- pods ----

    async fn pod(&self, key: ObjectKey) -> Result<Action> {
        let Some(shared) = self.shared(&key.cluster) else {
            return Ok(Action::AwaitChange);
        };
        let target = shared.target();
        let host_name = target.name(&key.namespace, &key.name);
        let host = self
            .host_pods
            .store()
            .get(&ObjectKey::new(ROOT, &shared.namespace, &host_name));
        let root = self.clients.cluster(ROOT)?;
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
            if !self.host_pods.has_synced() {
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
            match host_api.create(&PostParams::default(), &pod).await {
                Ok(_) => {}
                Err(kube::Error::Api(e)) if e.code == 409 => {}
                Err(e) => return Err(e.into()),
            }
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
    async fn sync_references(
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

    /// Deletes the host copies of ConfigMaps and Secrets no tenant pod of the namespace uses.
    async fn collect_references(&self, shared: &Shared, namespace: &str) -> Result<()> {
        let mut used = translate::References::default();
        for p in self.tenant_pods.list_namespace(&shared.logical, namespace) {
            let r = translate::references(&p);
            used.config_maps.extend(r.config_maps);
            used.secrets.extend(r.secrets);
        }
        let root = self.clients.cluster(ROOT)?;
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
    async fn mint_tokens(
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

    // ---- services ----

    async fn service(&self, key: ObjectKey) -> Result<Action> {
        let Some(shared) = self.shared(&key.cluster) else {
            return Ok(Action::AwaitChange);
        };
        // The tenant's own API Service and its DNS Service are not synced.
        if (key.namespace.as_str(), key.name.as_str()) == ("default", "kubernetes")
            || (key.namespace.as_str(), key.name.as_str()) == ("kube-system", "kube-dns")
        {
            return Ok(Action::AwaitChange);
        }
        let target = shared.target();
        let host_name = target.name(&key.namespace, &key.name);
        let root = self.clients.cluster(ROOT)?;
        let host_api: Api<Service> = Api::namespaced(root, &shared.namespace);
        let host = self
            .host_services
            .get(&ObjectKey::new(ROOT, &shared.namespace, &host_name));
        let Some(tenant) = self.tenant_services.get(&key) else {
            if host.is_some() {
                ignore_not_found(host_api.delete(&host_name, &DeleteParams::default()).await)?;
            }
            return Ok(Action::AwaitChange);
        };
        if tenant.metadata.deletion_timestamp.is_some() {
            return Ok(Action::AwaitChange);
        }
        let want = translate::host_service(&tenant, &target);
        let Some(h) = host else {
            match host_api.create(&PostParams::default(), &want).await {
                Ok(_) => {}
                Err(kube::Error::Api(e)) if e.code == 409 => {}
                Err(e) => return Err(e.into()),
            }
            return Ok(Action::AwaitChange);
        };
        if translate::service_spec_fields(&h) != translate::service_spec_fields(&want)
            || h.metadata.labels != want.metadata.labels
        {
            let mut updated = (*h).clone();
            let (spec, w) = (
                updated.spec.get_or_insert_with(Default::default),
                want.spec.clone().unwrap_or_default(),
            );
            spec.type_ = w.type_;
            spec.ports = w.ports;
            spec.selector = w.selector;
            spec.session_affinity = w.session_affinity;
            spec.session_affinity_config = w.session_affinity_config;
            spec.publish_not_ready_addresses = w.publish_not_ready_addresses;
            spec.external_name = w.external_name;
            spec.external_traffic_policy = w.external_traffic_policy;
            spec.internal_traffic_policy = w.internal_traffic_policy;
            updated.metadata.labels = want.metadata.labels.clone();
            updated.metadata.annotations = want.metadata.annotations.clone();
            host_api
                .replace(&host_name, &PostParams::default(), &updated)
                .await?;
            return Ok(Action::AwaitChange);
        }
        // The tenant Service takes the host's cluster IP.
        let host_ip = h.spec.as_ref().and_then(|s| s.cluster_ip.clone());
        let tenant_ip = tenant.spec.as_ref().and_then(|s| s.cluster_ip.clone());
        if let Some(ip) = host_ip.filter(|ip| !ip.is_empty() && ip != "None")
            && tenant_ip.as_deref() != Some(ip.as_str())
        {
            self.recreate_with_ip(&key, &tenant, &ip).await?;
        }
        Ok(Action::AwaitChange)
    }

    /// Re-creates a tenant Service with cluster IP `ip` (vcluster's rule: one IP per Service
    /// on both sides).
    async fn recreate_with_ip(&self, key: &ObjectKey, tenant: &Service, ip: &str) -> Result<()> {
        let api: Api<Service> =
            Api::namespaced(self.clients.cluster(&key.cluster)?, &key.namespace);
        let mut fresh = Service {
            metadata: ObjectMeta {
                name: tenant.metadata.name.clone(),
                namespace: tenant.metadata.namespace.clone(),
                labels: tenant.metadata.labels.clone(),
                annotations: tenant.metadata.annotations.clone(),
                owner_references: tenant.metadata.owner_references.clone(),
                finalizers: tenant.metadata.finalizers.clone(),
                ..ObjectMeta::default()
            },
            spec: tenant.spec.clone(),
            status: None,
        };
        if let Some(spec) = fresh.spec.as_mut() {
            spec.cluster_ip = Some(ip.to_string());
            spec.cluster_ips = Some(vec![ip.to_string()]);
        }
        let dp = DeleteParams {
            preconditions: Some(Preconditions {
                uid: tenant.metadata.uid.clone(),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        match api.delete(&key.name, &dp).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => {}
            Err(e) => return Err(e.into()),
        }
        match api.create(&PostParams::default(), &fresh).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    // ---- nodes ----

    /// Mirrors the host's nodes (and their Leases) into a shared cluster.
    async fn nodes(&self, lc: &str) -> Result<Action> {
        let Some(shared) = self.shared(lc) else {
            return Ok(Action::AwaitChange);
        };
        let tenant = self.clients.cluster(lc)?;
        let api: Api<Node> = Api::all(tenant.clone());
        let mut present = HashSet::new();
        for (_, hn) in self.host_nodes.entries() {
            let name = hn.name_any();
            present.insert(name.clone());
            let mut labels = hn.metadata.labels.clone().unwrap_or_default();
            labels.insert(names::MANAGED_BY.into(), shared.name.clone());
            let host_spec = hn.spec.clone().unwrap_or_default();
            let spec = json!({
                "taints": host_spec.taints,
                "unschedulable": host_spec.unschedulable,
                "providerID": host_spec.provider_id,
            });
            let mut status =
                serde_json::to_value(hn.status.clone().unwrap_or_default()).unwrap_or_default();
            if let Some(s) = status.as_object_mut() {
                // vcluster's clearImageStatus: the host's image list is the host's.
                s.remove("images");
            }
            // The node's kubelet, to the tenant cluster, is this cluster's proxy.
            let proxy_port = self.proxy_ports.read().get(lc).copied();
            if let (Some(port), Some(address)) = (proxy_port, self.options.address) {
                status["daemonEndpoints"] = json!({"kubeletEndpoint": {"Port": port}});
                status["addresses"] = json!([
                    {"type": "InternalIP", "address": address.to_string()},
                    {"type": "Hostname", "address": name},
                ]);
            }
            let existing = self.tenant_nodes.get(&ObjectKey::new(lc, "", &name));
            match existing {
                None => {
                    let node: Node = serde_json::from_value(json!({
                        "metadata": {"name": name, "labels": labels},
                        "spec": spec,
                    }))?;
                    match api.create(&PostParams::default(), &node).await {
                        Ok(_) => {}
                        Err(kube::Error::Api(e)) if e.code == 409 => {}
                        Err(e) => return Err(e.into()),
                    }
                    api.patch_status(
                        &name,
                        &PatchParams::default(),
                        &Patch::Merge(&json!({ "status": status })),
                    )
                    .await?;
                }
                Some(t) => {
                    let t_spec = t.spec.clone().unwrap_or_default();
                    if t.metadata.labels.as_ref() != Some(&labels)
                        || json!({"taints": t_spec.taints, "unschedulable": t_spec.unschedulable, "providerID": t_spec.provider_id})
                            != spec
                    {
                        api.patch(
                            &name,
                            &PatchParams::default(),
                            &Patch::Merge(&json!({"metadata": {"labels": labels}, "spec": spec})),
                        )
                        .await?;
                    }
                    let current = serde_json::to_value(t.status.clone().unwrap_or_default())
                        .unwrap_or_default();
                    if let Some(patch) = translate::status_patch(&current, &status) {
                        api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
                            .await?;
                    }
                }
            }
            self.mirror_lease(lc, &tenant, &name).await?;
        }
        for (key, t) in self.tenant_nodes.list_cluster(lc) {
            let ours = t.labels().get(names::MANAGED_BY) == Some(&shared.name);
            if ours && !present.contains(&key.name) {
                ignore_not_found(api.delete(&key.name, &DeleteParams::default()).await)?;
                self.leases
                    .lock()
                    .remove(&(lc.to_string(), key.name.clone()));
            }
        }
        Ok(Action::AwaitChange)
    }

    /// Copies a host node's Lease renewal into the tenant cluster.
    async fn mirror_lease(&self, lc: &str, tenant: &kube::Client, node: &str) -> Result<()> {
        let Some(hl) = self
            .host_leases
            .get(&ObjectKey::new(ROOT, LEASE_NAMESPACE, node))
        else {
            return Ok(());
        };
        let spec = hl.spec.clone().unwrap_or_default();
        let renew = spec
            .renew_time
            .as_ref()
            .map(|t| t.0.to_string())
            .unwrap_or_default();
        let key = (lc.to_string(), node.to_string());
        if self.leases.lock().get(&key) == Some(&renew) {
            return Ok(());
        }
        let api: Api<Lease> = Api::namespaced(tenant.clone(), LEASE_NAMESPACE);
        let body = json!({"spec": {
            "holderIdentity": spec.holder_identity,
            "leaseDurationSeconds": spec.lease_duration_seconds,
            "renewTime": spec.renew_time,
        }});
        match api
            .patch(node, &PatchParams::default(), &Patch::Merge(&body))
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {
                let lease: Lease = serde_json::from_value(json!({
                    "metadata": {"name": node, "namespace": LEASE_NAMESPACE},
                    "spec": body["spec"],
                }))?;
                match api.create(&PostParams::default(), &lease).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(e)) if e.code == 409 => {}
                    Err(e) => return Err(e.into()),
                }
            }
            Err(e) => return Err(e.into()),
        }
        self.leases.lock().insert(key, renew);
        Ok(())
    }

    // ---- per-cluster servers ----

    /// A shared cluster's DNS server and kubelet proxy (started, or stopped when it is gone).
    async fn serve(self: &Arc<Self>, lc: &str) -> Result<Action> {
        let action = self.dns(lc).await?;
        self.kubelet_proxy(lc).await?;
        Ok(action)
    }

    /// Starts (or stops) a shared cluster's kubelet proxy; its nodes then name it.
    async fn kubelet_proxy(self: &Arc<Self>, lc: &str) -> Result<()> {
        let (Some(address), Some(_)) = (self.options.address, self.kubelet_tls.as_ref()) else {
            return Ok(());
        };
        let mut proxies = self.proxies.lock().await;
        if !self.is_shared(lc) {
            proxies.remove(lc);
            self.proxy_ports.write().remove(lc);
            return Ok(());
        }
        if proxies.contains_key(lc) {
            return Ok(());
        }
        // The tenant cluster's own CA (what the process machines' kubelets trust): the API
        // server's kubelet client certificate for this cluster is issued by it. Only its
        // certificate is read.
        let secrets: Api<Secret> =
            Api::namespaced(self.clients.cluster(ROOT)?, "matryoshka-system");
        let Some(ca) = secrets
            .get_opt(&format!("{lc}-pki"))
            .await?
            .and_then(|s| s.data)
            .and_then(|d| d.get("ca.crt").map(|b| String::from_utf8_lossy(&b.0).into_owned()))
        else {
            return Err(runtime::error::Error::Retry(format!(
                "the credentials of {lc} are not there yet"
            )));
        };
        let handler: Arc<dyn kubelet::Handler> = self.clone();
        let server = kubelet::start(address, lc, &ca, handler)
            .await
            .map_err(runtime::error::Error::Retry)?;
        tracing::info!(cluster = lc, addr = %server.addr, "the kubelet proxy of a shared cluster listens");
        self.proxy_ports
            .write()
            .insert(lc.to_string(), server.addr.port());
        proxies.insert(lc.to_string(), server);
        self.queue.add(Item::Nodes(lc.to_string()));
        Ok(())
    }

    /// Forwards a kubelet API request of a shared cluster to the host pod's kubelet.
    async fn kubelet_request(
        self: Arc<Self>,
        lc: String,
        caller: kubelet::Caller,
        req: http::Request<hyper::body::Incoming>,
    ) -> http::Response<streaming::proxy::Body> {
        use http::StatusCode;
        let Some(r) = kubelet::parse_path(req.uri().path()) else {
            return kubelet::text(StatusCode::NOT_FOUND, "404 page not found");
        };
        let (Some(shared), Some(tls)) = (self.shared(&lc), self.kubelet_tls.clone()) else {
            return kubelet::text(StatusCode::SERVICE_UNAVAILABLE, "the cluster is not served");
        };
        let Some(pod) = self
            .tenant_pods
            .get(&ObjectKey::new(&lc, &r.namespace, &r.pod))
        else {
            return kubelet::text(
                StatusCode::NOT_FOUND,
                &format!("pod {}/{} not found", r.namespace, r.pod),
            );
        };
        let node = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .unwrap_or_default();
        // Authorised as a kubelet authorises: nodes/proxy of the pod's node.
        let verb = kubelet::verb(req.method());
        match self.authorized(&lc, &caller, verb, &node).await {
            Ok(true) => {}
            Ok(false) => {
                return kubelet::text(
                    StatusCode::FORBIDDEN,
                    &format!(
                        "Forbidden (user={}, verb={verb}, resource=nodes, subresource=proxy)",
                        caller.user
                    ),
                );
            }
            Err(e) => {
                return kubelet::text(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    &format!(
                        "Authorization error (user={}, verb={verb}, resource=nodes, subresource=proxy): {e}",
                        caller.user
                    ),
                );
            }
        }
        let target = shared.target();
        let host_name = target.name(&r.namespace, &r.pod);
        let host_uid = self
            .host_pods
            .store()
            .get(&ObjectKey::new(ROOT, &shared.namespace, &host_name))
            .and_then(|p| p.metadata.uid.clone());
        let Some(host_node) = self.host_nodes.get(&ObjectKey::new(ROOT, "", &node)) else {
            return kubelet::text(
                StatusCode::NOT_FOUND,
                &format!("node {node} is not a host node"),
            );
        };
        let Some((address, port)) = kubelet_location(&host_node) else {
            return kubelet::text(
                StatusCode::BAD_GATEWAY,
                &format!("node {node} has no address"),
            );
        };
        let path = r.host_path(&shared.namespace, &host_name, host_uid.as_deref());
        let Some(uri) = kubelet::kubelet_uri(&address, port, &path, req.uri().query()) else {
            return kubelet::text(StatusCode::BAD_REQUEST, "bad path");
        };
        let connector = streaming::upgrade::TcpConnect { tls: Some(tls) };
        match streaming::proxy::forward(req, &uri, &connector, None).await {
            Ok(r) => r,
            Err(e) => kubelet::text(
                StatusCode::BAD_GATEWAY,
                &format!("error dialing backend: {e}"),
            ),
        }
    }

    /// Whether `caller` may `verb` `nodes/proxy` of `node` in cluster `lc`.
    async fn authorized(
        &self,
        lc: &str,
        caller: &kubelet::Caller,
        verb: &str,
        node: &str,
    ) -> Result<bool> {
        use k8s_openapi::api::authorization::v1::{
            ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
        };
        let api: Api<SubjectAccessReview> = Api::all(self.clients.cluster(lc)?);
        let review = SubjectAccessReview {
            metadata: ObjectMeta::default(),
            spec: SubjectAccessReviewSpec {
                user: Some(caller.user.clone()),
                groups: Some(caller.groups.clone()),
                resource_attributes: Some(ResourceAttributes {
                    verb: Some(verb.into()),
                    resource: Some("nodes".into()),
                    subresource: Some("proxy".into()),
                    name: Some(node.into()),
                    ..ResourceAttributes::default()
                }),
                ..SubjectAccessReviewSpec::default()
            },
            status: None,
        };
        let answer = api.create(&PostParams::default(), &review).await?;
        Ok(answer.status.is_some_and(|s| s.allowed))
    }

    // ---- DNS ----

    /// Starts (or stops) a shared cluster's DNS server and keeps its Services.
    async fn dns(&self, lc: &str) -> Result<Action> {
        let Some(address) = self.options.address else {
            return Ok(Action::AwaitChange);
        };
        let Some(shared) = self.shared(lc) else {
            if let Some(d) = self.dns.lock().await.remove(lc) {
                d.server.shutdown().await;
            }
            self.dns_ips.write().remove(lc);
            return Ok(Action::AwaitChange);
        };
        let tenant = self.clients.cluster(lc)?;
        let mut servers = self.dns.lock().await;
        if !servers.contains_key(lc) {
            let config = dns::Config {
                listen: vec![SocketAddr::new(address, 0)],
                upstream: self.options.dns_upstream.clone(),
                ..dns::Config::default()
            };
            let server = dns::ClusterDns::start(tenant.clone(), config)
                .await
                .map_err(|e| runtime::error::Error::Retry(format!("the DNS of {lc}: {e}")))?;
            servers.insert(
                lc.to_string(),
                TenantDns {
                    server,
                    cluster_ip: None,
                },
            );
        }
        let entry = servers.get_mut(lc).expect("just inserted");
        let port = entry.server.addrs().first().map_or(53, SocketAddr::port);
        let target = shared.target();
        let host_name = target.name("kube-system", "kube-dns");
        let root = self.clients.cluster(ROOT)?;
        let pp = PatchParams::apply(COMPONENT).force();
        let mut meta = json!({
            "name": host_name,
            "namespace": shared.namespace,
            "labels": names::host_labels(None, "kube-system", &shared.name),
            "annotations": {names::OBJECT_NAME: "kube-dns", names::OBJECT_NAMESPACE: "kube-system", names::OBJECT_KIND: "Service"},
        });
        if let Some(o) = target.owner.as_ref() {
            meta["ownerReferences"] = json!([o]);
        }
        let svc = json!({
            "apiVersion": "v1", "kind": "Service", "metadata": meta,
            "spec": {"ports": [
                {"name": "dns", "protocol": "UDP", "port": 53, "targetPort": port},
                {"name": "dns-tcp", "protocol": "TCP", "port": 53, "targetPort": port},
            ]},
        });
        let services: Api<Service> = Api::namespaced(root.clone(), &shared.namespace);
        let applied = services.patch(&host_name, &pp, &Patch::Apply(&svc)).await?;
        let mut slice_meta = meta.clone();
        slice_meta["labels"]["kubernetes.io/service-name"] = json!(host_name);
        slice_meta["labels"]["endpointslice.kubernetes.io/managed-by"] =
            json!("syncer.matryoshka.dev");
        let family = if address.is_ipv4() { "IPv4" } else { "IPv6" };
        let slice = json!({
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "metadata": slice_meta,
            "addressType": family,
            "endpoints": [{"addresses": [address.to_string()], "conditions": {"ready": true}}],
            "ports": [
                {"name": "dns", "protocol": "UDP", "port": port},
                {"name": "dns-tcp", "protocol": "TCP", "port": port},
            ],
        });
        let slices: Api<DynamicObject> = Api::namespaced_with(
            root,
            &shared.namespace,
            &ApiResource::from_gvk_with_plural(
                &GroupVersionKind::gvk("discovery.k8s.io", "v1", "EndpointSlice"),
                "endpointslices",
            ),
        );
        slices.patch(&host_name, &pp, &Patch::Apply(&slice)).await?;
        let Some(ip) = applied
            .spec
            .and_then(|s| s.cluster_ip)
            .and_then(|ip| ip.parse::<IpAddr>().ok())
        else {
            return Ok(Action::RequeueAfter(Duration::from_millis(200)));
        };
        // The tenant's kube-system/kube-dns names the same address.
        let t_api: Api<Service> = Api::namespaced(tenant, "kube-system");
        let want = dns::kube_dns::service(ip);
        match t_api.get_opt("kube-dns").await? {
            None => match t_api.create(&PostParams::default(), &want).await {
                Ok(_) => {}
                Err(kube::Error::Api(e)) if e.code == 409 => {}
                Err(e) => return Err(e.into()),
            },
            Some(t) => {
                let key = ObjectKey::new(lc, "kube-system", "kube-dns");
                if t.spec.as_ref().and_then(|s| s.cluster_ip.as_deref()) != Some(&ip.to_string()) {
                    self.recreate_with_ip(&key, &t, &ip.to_string()).await?;
                }
            }
        }
        let first = entry.cluster_ip.is_none();
        entry.cluster_ip = Some(ip);
        drop(servers);
        self.dns_ips.write().insert(lc.to_string(), ip);
        if first {
            for (k, _) in self.tenant_pods.list_cluster(lc) {
                self.queue.add(Item::Pod(k));
            }
        }
        Ok(Action::AwaitChange)
    }

    // ---- events ----

    /// Copies the host's Events about synced pods and Services into their tenant clusters.
    async fn host_events(self: Arc<Self>, term: Shutdown) {
        let Ok(root) = self.clients.cluster(ROOT) else {
            return;
        };
        let api: Api<Event> = Api::all(root);
        let stream = watcher::watcher(api, watcher::Config::default())
            .default_backoff()
            .applied_objects();
        futures::pin_mut!(stream);
        let stopping = term.wait();
        tokio::pin!(stopping);
        loop {
            let ev = tokio::select! {
                ev = stream.next() => ev,
                () = &mut stopping => return,
            };
            let Some(ev) = ev else { return };
            let Ok(ev) = ev else { continue };
            if let Err(e) = self.copy_event(&ev).await {
                tracing::debug!(error = %e, "copying a host event");
            }
        }
    }

    async fn copy_event(&self, ev: &Event) -> Result<()> {
        let obj = &ev.involved_object;
        let (Some(ns), Some(name)) = (obj.namespace.as_deref(), obj.name.as_deref()) else {
            return Ok(());
        };
        let host_key = ObjectKey::new(ROOT, ns, name);
        let meta = match obj.kind.as_deref() {
            Some("Pod") => self
                .host_pods
                .store()
                .get(&host_key)
                .map(|p| p.metadata.clone()),
            Some("Service") => self
                .host_services
                .get(&host_key)
                .map(|s| s.metadata.clone()),
            _ => None,
        };
        let Some(meta) = meta else { return Ok(()) };
        let Some(key) = self.tenant_key(&meta) else {
            return Ok(());
        };
        let suffix = ev
            .metadata
            .name
            .as_deref()
            .and_then(|n| n.rsplit('.').next())
            .unwrap_or("0");
        let mut copy = ev.clone();
        copy.metadata = ObjectMeta {
            name: Some(format!("{}.{suffix}", key.name)),
            namespace: Some(key.namespace.clone()),
            ..ObjectMeta::default()
        };
        copy.involved_object = ObjectReference {
            namespace: Some(key.namespace.clone()),
            name: Some(key.name.clone()),
            uid: meta
                .annotations
                .as_ref()
                .and_then(|a| a.get(names::OBJECT_UID).cloned()),
            field_path: obj.field_path.clone(),
            kind: obj.kind.clone(),
            api_version: obj.api_version.clone(),
            resource_version: None,
        };
        copy.message = copy.message.map(|m| m.replace(name, &key.name));
        copy.related = None;
        let api: Api<Event> = Api::namespaced(self.clients.cluster(&key.cluster)?, &key.namespace);
        match api.create(&PostParams::default(), &copy).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(e)) if e.code == 409 => {
                let patch = json!({"count": copy.count, "lastTimestamp": copy.last_timestamp,
                    "message": copy.message, "eventTime": copy.event_time});
                ignore_not_found(
                    api.patch(
                        copy.metadata.name.as_deref().unwrap_or_default(),
                        &PatchParams::default(),
                        &Patch::Merge(&patch),
                    )
                    .await,
                )?;
                Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_tenant_cluster_in_shared_mode_with_a_logical_cluster_is_synced() {
        let tc = |spec: Value, status: Value| -> DynamicObject {
            serde_json::from_value(json!({
                "apiVersion": "platform.matryoshka.dev/v1alpha1", "kind": "TenantCluster",
                "metadata": {"name": "demo", "namespace": "tenant-foo", "uid": "u"},
                "spec": spec, "status": status,
            }))
            .unwrap()
        };
        let shared = shared_of(&tc(
            json!({"workers": {"mode": "shared"}}),
            json!({"logicalCluster": "tenant-foo-demo"}),
        ))
        .expect("shared");
        assert_eq!(shared.logical, "tenant-foo-demo");
        assert_eq!(shared.namespace, "tenant-foo");
        assert!(shared_of(&tc(json!({}), json!({"logicalCluster": "x"}))).is_none());
        assert!(shared_of(&tc(json!({"workers": {"mode": "shared"}}), json!({}))).is_none());
    }
}

impl kubelet::Handler for Syncer {
    fn handle(
        self: Arc<Self>,
        cluster: String,
        caller: kubelet::Caller,
        req: http::Request<hyper::body::Incoming>,
    ) -> futures::future::BoxFuture<'static, http::Response<streaming::proxy::Body>> {
        Box::pin(self.kubelet_request(cluster, caller, req))
    }
}

/// Where a host node's kubelet listens: its first InternalIP (else any address) and its
/// reported port (else 10250).
fn kubelet_location(node: &Node) -> Option<(String, u16)> {
    let status = node.status.as_ref()?;
    let addresses = status.addresses.as_ref()?;
    let address = addresses
        .iter()
        .find(|a| a.type_ == "InternalIP")
        .or_else(|| addresses.first())?
        .address
        .clone();
    let port = status
        .daemon_endpoints
        .as_ref()
        .and_then(|d| d.kubelet_endpoint.as_ref())
        .map(|e| e.port)
        .and_then(|p| u16::try_from(p).ok())
        .filter(|p| *p != 0)
        .unwrap_or(10250);
    Some((address, port))
}
