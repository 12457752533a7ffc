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
//!   host's nodes, mirrored with their status; the host's Events about synced pods;
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
//!
//! **The host** is the root cluster by default; a TenantCluster's
//! `spec.workers.hostCluster.kubeconfigSecretRef` names another cluster instead ([`host`]).
//! There the host objects cannot be owned by the TenantCluster (another cluster's garbage
//! collector would collect them at once), so the syncer holds a finalizer on the
//! TenantCluster and deletes them itself when it goes.

mod claims;
mod classes;
mod endpoints;
mod events;
mod host;
pub mod kubelet;
pub mod names;
mod nodes;
mod pods;
mod serve;
mod services;
pub mod translate;

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Endpoints, Node, PersistentVolumeClaim, Pod, Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher;
use kube::{Api, ResourceExt};
use parking_lot::RwLock;
use runtime::client::{ClusterClients, ROOT};
use runtime::error::Result;
use runtime::informer::{Informer, ObjectKey, Store};
use runtime::queue::{Action, Queue, run_workers};
use runtime::shared::Shutdown;
use serde_json::Value;

use crate::host::{Host, HostRef};
use crate::translate::Target;

/// The component's name (leader-election Lease, field manager, user agent).
pub const COMPONENT: &str = "syncer";
/// The platform's TenantCluster.
const PLATFORM_GROUP: &str = "platform.matryoshka.dev";
const PLATFORM_VERSION: &str = "v1alpha1";
/// How often the host copies of ConfigMaps and Secrets are compared with the tenant's.
pub const REFERENCES_RESYNC: Duration = Duration::from_secs(10);
/// How often the kubeconfig Secret of another host is compared with what is connected.
pub const HOST_RECHECK: Duration = Duration::from_secs(30);
/// The finalizer on a TenantCluster whose host is another cluster: its host objects are
/// deleted by the syncer before it goes.
pub const HOST_FINALIZER: &str = "syncer.matryoshka.dev/host-objects";

/// How the syncer runs.
#[derive(Debug, Clone)]
pub struct Options {
    /// Where each shared cluster's DNS server and kubelet proxy listen (on ports of their
    /// own): an address of this machine the host's pods and the API server reach. None: host
    /// pods keep the host's DNS.
    pub address: Option<IpAddr>,
    /// Where the kubelet proxies listen when not on `address` (only the API servers dial
    /// them, so loopback does; DNS servers need an address pods reach). None with no
    /// `address`: the tenant's kubelet API is not served.
    pub kubelet_proxy_address: Option<IpAddr>,
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
            kubelet_proxy_address: None,
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
    /// The namespace on the host where its pods run.
    namespace: String,
    /// The TenantCluster's namespace in the root cluster.
    tc_namespace: String,
    uid: String,
    /// The logical cluster serving it.
    logical: String,
    /// Where its pods run.
    host: HostRef,
}

impl Shared {
    fn target(&self) -> Target<'_> {
        Target {
            cluster: &self.name,
            host_namespace: &self.namespace,
            // Only the root cluster holds the TenantCluster: another host's garbage collector
            // would take an owner it cannot find for a deleted one.
            owner: self.host.is_root().then(|| OwnerReference {
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
    /// A tenant PersistentVolumeClaim.
    Claim(ObjectKey),
    /// The host's StorageClasses and IngressClasses in a logical cluster.
    Classes(String),
    /// The mirrored nodes of a logical cluster.
    Nodes(String),
    /// The DNS server and kubelet proxy of a logical cluster.
    Serve(String),
    /// The host copies of a logical cluster's ConfigMaps and Secrets, brought up to date.
    References(String),
    /// A deleted TenantCluster (namespace, name) whose objects on another host are deleted
    /// before its finalizer is removed.
    Release(String, String),
}

struct Syncer {
    clients: ClusterClients,
    options: Options,
    clusters: RwLock<HashMap<String, Arc<Shared>>>,
    /// (host, host namespace, cluster name) → logical cluster.
    by_host: RwLock<HashMap<(HostRef, String, String), String>>,
    tenant_pods: Store<Pod>,
    tenant_services: Store<Service>,
    tenant_nodes: Store<Node>,
    tenant_claims: Store<PersistentVolumeClaim>,
    /// The tenants' hand-made Endpoints and EndpointSlices (of Services without selectors).
    tenant_endpoints: Store<Endpoints>,
    tenant_slices: Store<EndpointSlice>,
    /// Services this syncer re-created with their host's IP, and when.
    recreated: parking_lot::Mutex<HashMap<ObjectKey, std::time::Instant>>,
    /// Hand-made Endpoints of those Services deleted since (the endpoints controller's
    /// doing), to put back.
    restore: parking_lot::Mutex<HashMap<ObjectKey, (std::time::Instant, Endpoints)>>,
    /// The root cluster as a host.
    root_host: RwLock<Option<Arc<Host>>>,
    /// The other hosts in use, connected by [`Syncer::connect_host`].
    hosts: RwLock<HashMap<HostRef, Arc<Host>>>,
    /// The leadership term the hosts' informers run in.
    term: Shutdown,
    /// Each shared cluster's DNS server; `dns_ips` holds the cluster IP its pods use.
    dns: tokio::sync::Mutex<HashMap<String, dns::ClusterDns>>,
    dns_ips: RwLock<HashMap<String, IpAddr>>,
    proxies: tokio::sync::Mutex<HashMap<String, kubelet::ProxyServer>>,
    proxy_ports: RwLock<HashMap<String, u16>>,
    /// Where pods reach the platform's API server, and when that was read.
    api_endpoint: RwLock<Option<(std::time::Instant, Option<std::net::SocketAddr>)>>,
    /// How the kubelet proxy reaches host kubelets.
    kubelet_tls: Option<Arc<rustls::ClientConfig>>,
    queue: Arc<Queue<Item>>,
    recorder: runtime::events::Recorder,
}

fn tenant_cluster_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(PLATFORM_GROUP, PLATFORM_VERSION, "TenantCluster"),
        "tenantclusters",
    )
}

/// Whether a TenantCluster's workers are shared.
fn is_shared_mode(tc: &DynamicObject) -> bool {
    tc.data
        .pointer("/spec/workers/mode")
        .and_then(Value::as_str)
        == Some("shared")
}

/// The shared cluster a TenantCluster is, if it is one (and is not being deleted).
fn shared_of(tc: &DynamicObject) -> Option<Shared> {
    if tc.metadata.deletion_timestamp.is_some() || !is_shared_mode(tc) {
        return None;
    }
    let tc_namespace = tc.metadata.namespace.clone()?;
    let (host, namespace) =
        HostRef::of_spec(tc.data.get("spec").unwrap_or(&Value::Null), &tc_namespace);
    Some(Shared {
        name: tc.metadata.name.clone()?,
        namespace,
        tc_namespace,
        host,
        uid: tc.metadata.uid.clone()?,
        logical: tc
            .data
            .pointer("/status/logicalCluster")
            .and_then(Value::as_str)?
            .to_string(),
    })
}

/// A 404 as something to retry.
fn not_yet(r: Result<Action>) -> Result<Action> {
    match r {
        Err(e) if e.is_not_found() => {
            Err(runtime::error::Error::Retry(format!("not served yet: {e}")))
        }
        other => other,
    }
}

/// An informer over `api` whose objects are kept without their `managedFields` (the syncer
/// never reads them; they are often the larger part of an object).
/// An informer of `api` (the host's objects).
fn informer<K>(name: &str, api: Api<K>, config: watcher::Config) -> Arc<Informer<K>>
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + Default
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    Informer::from_stream(
        name,
        runtime::lenient::watcher(api, config, None)
            .default_backoff()
            .modify(|o: &mut K| o.meta_mut().managed_fields = None),
    )
}

/// A cross-cluster informer of every tenant cluster (each datastore's too), `slim` applied
/// to every object it keeps.
fn tenant_informer<K>(
    name: &str,
    clients: &ClusterClients,
    config: watcher::Config,
    slim: fn(&mut K),
) -> Result<Arc<Informer<K>>>
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + Default
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    Informer::from_shards(
        name,
        clients,
        Arc::new(move |client| {
            runtime::lenient::watcher(Api::<K>::all(client), config.clone(), None)
                .default_backoff()
                .modify(slim)
                .boxed()
        }),
    )
}

fn no_managed_fields<K: kube::Resource>(o: &mut K) {
    o.meta_mut().managed_fields = None;
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
        .default_backoff()
        .modify(|o| o.metadata.managed_fields = None),
    );
    let any = watcher::Config::default;
    let tenant_pods =
        tenant_informer::<Pod>("tenant-pods", &clients, any(), pods::slim_tenant_pod)?;
    let tenant_services =
        tenant_informer::<Service>("tenant-services", &clients, any(), no_managed_fields)?;
    let tenant_nodes =
        tenant_informer::<Node>("tenant-nodes", &clients, any(), nodes::slim_tenant_node)?;
    let tenant_claims = tenant_informer::<PersistentVolumeClaim>(
        "tenant-claims",
        &clients,
        any(),
        no_managed_fields,
    )?;
    let tenant_endpoints = tenant_informer::<Endpoints>(
        "tenant-endpoints",
        &clients,
        any().labels(endpoints::TENANT_ENDPOINTS),
        no_managed_fields,
    )?;
    let tenant_slices = tenant_informer::<EndpointSlice>(
        "tenant-endpointslices",
        &clients,
        any().labels(endpoints::TENANT_SLICES),
        no_managed_fields,
    )?;
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
        tenant_claims: tenant_claims.store(),
        tenant_endpoints: tenant_endpoints.store(),
        tenant_slices: tenant_slices.store(),
        recreated: Default::default(),
        restore: Default::default(),
        root_host: RwLock::new(None),
        hosts: RwLock::new(HashMap::new()),
        term: term.clone(),
        dns: tokio::sync::Mutex::new(HashMap::new()),
        dns_ips: RwLock::new(HashMap::new()),
        proxies: tokio::sync::Mutex::new(HashMap::new()),
        proxy_ports: RwLock::new(HashMap::new()),
        api_endpoint: RwLock::new(None),
        kubelet_tls,
        queue: queue.clone(),
        recorder: runtime::events::Recorder::start(clients.clone(), COMPONENT),
    });
    let root_host = Host::start(
        Arc::downgrade(&s),
        HostRef::Root,
        root.clone(),
        None,
        None,
        None,
        term.clone(),
    );
    *s.root_host.write() = Some(root_host.clone());
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
    tenant_endpoints.on_change(move |c| {
        if h.is_shared(&c.key().cluster) {
            if let runtime::informer::Change::Deleted(key, ep) = &c {
                h.endpoints_deleted(key, ep);
            }
            h.queue.add(Item::Service(c.key().clone()));
        }
    });
    let h = s.clone();
    tenant_slices.on_change(move |c| {
        let k = c.key();
        if h.is_shared(&k.cluster)
            && let Some(svc) = c.object().labels().get(endpoints::SERVICE_NAME_LABEL)
        {
            h.queue
                .add(Item::Service(ObjectKey::new(&k.cluster, &k.namespace, svc)));
        }
    });
    let h = s.clone();
    tenant_claims.on_change(move |c| {
        if h.is_shared(&c.key().cluster) {
            h.queue.add(Item::Claim(c.key().clone()));
        }
    });
    let h = s.clone();
    tenant_nodes.on_change(move |c| {
        if h.is_shared(&c.key().cluster) {
            h.queue.add(Item::Nodes(c.key().cluster.to_string()));
        }
    });

    let mut tasks = Vec::new();
    for run in [
        tokio::spawn(tcs.clone().run(term.clone().wait())),
        tokio::spawn(tenant_pods.clone().run(term.clone().wait())),
        tokio::spawn(tenant_services.clone().run(term.clone().wait())),
        tokio::spawn(tenant_nodes.clone().run(term.clone().wait())),
        tokio::spawn(tenant_claims.clone().run(term.clone().wait())),
        tokio::spawn(tenant_endpoints.clone().run(term.clone().wait())),
        tokio::spawn(tenant_slices.clone().run(term.clone().wait())),
    ] {
        tasks.push(run);
    }
    root_host.pods.wait_synced().await;
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
    let _ = work.await;
    // The hosts' informers stop with them (and with the term).
    s.hosts.write().clear();
    s.root_host.write().take();
    for t in tasks {
        let _ = t.await;
    }
    for (_, d) in s.dns.lock().await.drain() {
        d.shutdown().await;
    }
    s.proxies.lock().await.clear();
    Ok(())
}

impl Syncer {
    /// Where the kubelet proxies listen.
    fn proxy_address(&self) -> Option<IpAddr> {
        self.options.address.or(self.options.kubelet_proxy_address)
    }

    fn is_shared(&self, logical: &str) -> bool {
        self.clusters.read().contains_key(logical)
    }

    fn shared(&self, logical: &str) -> Option<Arc<Shared>> {
        self.clusters.read().get(logical).cloned()
    }

    /// The tenant object a host object (of host `host`) stands for.
    fn tenant_key(&self, host: &HostRef, meta: &ObjectMeta) -> Option<ObjectKey> {
        let (cluster, namespace, name) =
            names::tenant_of(meta.labels.as_ref(), meta.annotations.as_ref())?;
        let host_ns = meta.namespace.clone()?;
        let logical = self
            .by_host
            .read()
            .get(&(host.clone(), host_ns, cluster))
            .cloned()?;
        Some(ObjectKey::new(&logical, &namespace, &name))
    }

    /// The connected host of a shared cluster; when it is not connected yet, its cluster's
    /// `Serve` connects it and the caller is retried.
    fn host(&self, shared: &Shared) -> Result<Arc<Host>> {
        let found = if shared.host.is_root() {
            self.root_host.read().clone()
        } else {
            self.hosts.read().get(&shared.host).cloned()
        };
        found.ok_or_else(|| {
            self.queue.add(Item::Serve(shared.logical.clone()));
            runtime::error::Error::Retry(format!("{} is not connected yet", shared.host))
        })
    }

    /// Connects (or re-connects, when its kubeconfig Secret changed) a shared cluster's host.
    async fn connect_host(self: &Arc<Self>, shared: &Shared) -> Result<Arc<Host>> {
        if shared.host.is_root() {
            return self.host(shared);
        }
        let root = self.clients.cluster(ROOT)?;
        let current = self.hosts.read().get(&shared.host).cloned();
        // The Secret's resourceVersion tells whether the kubeconfig changed.
        let secrets: Api<Secret> = Api::namespaced(root.clone(), &shared.tc_namespace);
        let HostRef::Kubeconfig { secret, .. } = &shared.host else {
            unreachable!("a root host returned above");
        };
        let version = secrets
            .get_metadata_opt(secret)
            .await?
            .and_then(|m| m.metadata.resource_version);
        if let Some(h) = current.filter(|h| h.version == version) {
            return Ok(h);
        }
        let c = host::connect(&root, &shared.host).await?;
        let h = Host::start(
            Arc::downgrade(self),
            shared.host.clone(),
            c.client,
            Some(c.api),
            Some(shared.namespace.clone()),
            c.version,
            self.term.clone(),
        );
        self.hosts.write().insert(shared.host.clone(), h.clone());
        tracing::info!(cluster = %shared.logical, host = %shared.host, "connected a shared cluster's host");
        // Everything of the clusters on it is looked at again with the new informers.
        let on_it: Vec<String> = self
            .clusters
            .read()
            .values()
            .filter(|c| c.host == shared.host)
            .map(|c| c.logical.clone())
            .collect();
        for lc in on_it {
            self.resync(&lc);
        }
        Ok(h)
    }

    /// Queues everything of one shared cluster.
    fn resync(&self, lc: &str) {
        self.queue.add(Item::Nodes(lc.to_string()));
        self.queue.add(Item::Classes(lc.to_string()));
        for (k, _) in self.tenant_claims.list_cluster(lc) {
            self.queue.add(Item::Claim(k));
        }
        self.queue.add(Item::References(lc.to_string()));
        for (k, _) in self.tenant_pods.list_cluster(lc) {
            self.queue.add(Item::Pod(k));
        }
        for (k, _) in self.tenant_services.list_cluster(lc) {
            self.queue.add(Item::Service(k));
        }
    }

    /// Rebuilds the set of shared clusters; a new one gets its nodes, DNS and objects synced.
    fn clusters_changed(&self, tcs: &Store<DynamicObject>) {
        let entries = tcs.entries();
        let fresh: HashMap<String, Arc<Shared>> = entries
            .iter()
            .filter_map(|(_, tc)| shared_of(tc))
            .map(|s| (s.logical.clone(), Arc::new(s)))
            .collect();
        // Deleted clusters whose objects on another host are still to be deleted.
        for (_, tc) in &entries {
            let held = tc
                .metadata
                .finalizers
                .as_ref()
                .is_some_and(|f| f.iter().any(|f| f == HOST_FINALIZER));
            if held
                && (tc.metadata.deletion_timestamp.is_some() || !is_shared_mode(tc))
                && let (Some(ns), Some(name)) = (&tc.metadata.namespace, &tc.metadata.name)
            {
                self.queue.add(Item::Release(ns.clone(), name.clone()));
            }
        }
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
            .map(|s| {
                (
                    (s.host.clone(), s.namespace.clone(), s.name.clone()),
                    s.logical.clone(),
                )
            })
            .collect();
        // A host no shared cluster uses any more is disconnected.
        self.hosts
            .write()
            .retain(|r, _| fresh.values().any(|s| &s.host == r));
        *self.clusters.write() = fresh;
        for lc in added {
            self.queue.add(Item::Serve(lc.clone()));
            self.resync(&lc);
        }
        for lc in removed {
            // Its DNS server stops; its host objects go with the TenantCluster (owned).
            self.queue.add(Item::Serve(lc));
        }
    }

    /// Queues one item (its nodes, its classes) of every shared cluster on `host`.
    fn on_host(&self, host: &HostRef, item: fn(String) -> Item) {
        for (lc, s) in self.clusters.read().iter() {
            if &s.host == host {
                self.queue.add(item(lc.clone()));
            }
        }
    }

    async fn reconcile(self: &Arc<Self>, item: Item) -> Result<Action> {
        match item {
            Item::Pod(key) => self.pod(key).await,
            Item::Service(key) => self.service(key).await,
            Item::Claim(key) => self.claim(key).await,
            Item::Classes(lc) => not_yet(self.classes(&lc).await),
            // A cluster's own work finding it not served yet (404 while it is provisioned)
            // is retried with backoff, not taken for a deleted object.
            Item::Nodes(lc) => not_yet(self.nodes(&lc).await),
            Item::References(lc) => not_yet(self.refresh_references(&lc).await),
            Item::Serve(lc) => not_yet(self.serve(&lc).await),
            Item::Release(ns, name) => self.release(&ns, &name).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
        assert_eq!(shared.host, HostRef::Root);
        assert!(
            shared.target().owner.is_some(),
            "the root's objects are owned"
        );
        let far = shared_of(&tc(
            json!({"workers": {"mode": "shared", "hostCluster": {"kubeconfigSecretRef": {"name": "k"}, "namespace": "guests"}}}),
            json!({"logicalCluster": "tenant-foo-demo"}),
        ))
        .expect("shared");
        assert_eq!(
            (far.namespace.as_str(), far.tc_namespace.as_str()),
            ("guests", "tenant-foo")
        );
        assert!(
            far.target().owner.is_none(),
            "another host's objects are not owned"
        );
        assert!(shared_of(&tc(json!({}), json!({"logicalCluster": "x"}))).is_none());
        assert!(shared_of(&tc(json!({"workers": {"mode": "shared"}}), json!({}))).is_none());
    }
}
