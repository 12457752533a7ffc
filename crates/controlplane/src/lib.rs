//! The control plane: everything the API server does that is not HTTP.
//!
//! The write pipeline ([`write`]) in upstream's order and the admission chain it runs
//! ([`admission`]), the subresources that are objects of their own ([`subresources`]: binding,
//! eviction, scale, finalize; [`tokens`]: TokenRequest), authorization decisions ([`authz`]),
//! credentials ([`trust`], [`jwt`], [`tokens`]), service IP allocation ([`services`]), tenancy
//! provisioning ([`tenancy`]), CRD serving ([`crds`], [`conversion`], [`openapi`]), APIService
//! registration ([`apiservices`]), ClusterRole aggregation ([`aggregation`]), credential
//! rotation ([`rotation`]), backups and restores of clusters ([`backup`]) and the seeded
//! contents of every cluster ([`bootstrap`]).
//!
//! **Architecture Invariant:** nothing here serves HTTP or knows of requests, routes, media
//! types or responses; the `apiserver` crate decodes a request, calls in here with objects and a
//! [`Requester`], and renders what comes back. The only HTTP this crate speaks is as a client,
//! to the admission and conversion webhooks tenants configure.

pub mod admission;
pub mod aggregation;
pub mod apiservices;
pub mod auth;
pub mod authz;
pub mod backup;
pub mod bootstrap;
pub mod clusters;
pub mod conversion;
pub mod crds;
pub mod datastores;
pub mod event_ttl;
pub mod fields;
pub mod hosts;
pub mod jwt;
pub mod metrics;
pub mod moves;
pub mod node_authz;
pub mod openapi;
pub mod patching;
pub mod rotation;
pub mod services;
pub mod subresources;
pub mod tenancy;
pub mod tokens;
pub mod trust;
pub mod write;

use std::sync::Arc;

use apimachinery::status::ApiError;
use parking_lot::Mutex;
use registry::ResourceDef;
use registry::catalog::Catalog;
use registry::store::Store;

use crate::auth::UserInfo;
use crate::trust::{Trust, Trusts};

/// What the control plane needs to know about itself.
pub struct Config {
    /// The URL clients reach the root cluster at (logical clusters are under `/clusters/`).
    pub external_url: String,
    /// The root cluster's CA (PEM certificate and key).
    pub root_ca: pki::CertPair,
    /// The root cluster's service-account signing key (PKCS#8 DER).
    pub root_sa_key: Vec<u8>,
    /// Several replicas serve one store: the singleton loops (provisioning, CRD status,
    /// APIServices, ClusterRole aggregation) write only once told this replica leads
    /// ([`ControlPlane::set_leading`]). Otherwise this process leads from the start.
    pub elected: bool,
    /// How often credentials rotate.
    pub rotation: rotation::Rotation,
    /// The platform's volumes directory (`<data-dir>/volumes`): backups carry the data of a
    /// cluster's volumes kept there, and restores write it back under `restored/`. `None`: this
    /// server keeps no volumes.
    pub volumes_dir: Option<std::path::PathBuf>,
    /// How long an Event lives after its last write (kube-apiserver's `--event-ttl`).
    pub event_ttl: std::time::Duration,
}

/// Who makes a request, in which cluster, and the warnings the answer carries.
pub struct Requester<'a> {
    pub cluster: &'a str,
    pub user: &'a UserInfo,
    /// `Warning`s for the client (unknown fields, webhooks' and strategies' warnings).
    pub warnings: Vec<String>,
}

impl<'a> Requester<'a> {
    pub fn new(cluster: &'a str, user: &'a UserInfo) -> Self {
        Requester {
            cluster,
            user,
            warnings: Vec::new(),
        }
    }
}

type ForgetHook = Box<dyn Fn(&str) + Send + Sync>;

/// The control plane's state: storage, the served resources, the clusters' credentials and
/// the admission configuration. Fields are reached through methods outside this crate.
pub struct ControlPlane {
    pub(crate) store: Store,
    pub(crate) catalog: Catalog,
    pub(crate) config: Config,
    pub(crate) trusts: Trusts,
    pub(crate) openapi: openapi::ClusterDocuments,
    pub(crate) admission: admission::Validators,
    pub(crate) metrics: metrics::Metrics,
    /// Whether this replica runs the singleton loops' writes (see [`Config::elected`]).
    leading: tokio::sync::watch::Sender<bool>,
    /// Called with the name of each logical cluster whose deletion completed, so caches
    /// outside the control plane (metrics scrapes, say) let go of it.
    forget_hooks: Mutex<Vec<ForgetHook>>,
    /// The hostnames clusters are served at (SNI).
    pub(crate) hostnames: hosts::Hostnames,
    /// Each served logical cluster's `spec.authentication` (an `AuthenticationConfiguration`
    /// of OIDC issuers for its users).
    pub(crate) authentication:
        parking_lot::RwLock<std::collections::HashMap<String, Arc<serde_json::Value>>>,
}

impl ControlPlane {
    /// A control plane over `store` serving `catalog`, with nothing started.
    pub fn new(store: Store, catalog: Catalog, config: Config) -> Result<Arc<Self>, ApiError> {
        crd::cel::cost::set_runner(off_the_async_worker);
        let root_trust = Trust::new(
            &config.root_ca.cert_pem,
            &config.root_sa_key,
            config.external_url.clone(),
        )
        .map_err(|e| {
            ApiError::internal(format!("the root cluster's credentials are invalid: {e}"))
        })?;
        let (leading, _) = tokio::sync::watch::channel(!config.elected);
        Ok(Arc::new(ControlPlane {
            leading,
            store,
            catalog,
            trusts: Trusts::new(
                root_trust,
                config.external_url.clone(),
                config.rotation.max_token_expiration,
            ),
            config,
            openapi: Default::default(),
            admission: Default::default(),
            metrics: Default::default(),
            forget_hooks: Mutex::new(Vec::new()),
            hostnames: Default::default(),
            authentication: Default::default(),
        }))
    }

    /// Builds the control plane over `storage`: the watch cache, the built-in catalogue plus
    /// `extra` resources (those the HTTP layer serves itself: reviews, metrics), the seeded root
    /// cluster, and its loops (tenancy, ClusterRole aggregation, CRD serving, APIServices).
    pub async fn start(
        storage: Arc<dyn storage::Storage>,
        config: Config,
        extra: Vec<ResourceDef>,
    ) -> Result<Arc<Self>, ApiError> {
        use registry::cache::WatchCache;
        let cache = WatchCache::start(storage.clone(), Self::cache_options())
            .await
            .map_err(|e| ApiError::service_unavailable(format!("loading the watch cache: {e}")))?;
        let mut resources = registry::builtins::resources();
        resources.push(tenancy::logical_cluster_resource());
        resources.push(datastores::resource());
        resources.extend(extra);
        let catalog = Catalog::new(resources).with_builtin_strategy(
            crds::GROUP,
            crds::PLURAL,
            Arc::new(crd::CrdStrategy),
        );
        let store = Store::new(storage, cache).with_hook(
            "",
            "services",
            Arc::new(services::ServiceAllocator::default()),
        );
        // A cluster's keys are in the datastore its LogicalCluster names, read from the shared
        // store's cache on every lookup: no copy of the binding to fall behind.
        let lcs = store.shared_cache().clone();
        store.shards.set_resolver(Arc::new(move |c: &str| {
            let lc = lcs.get(
                tenancy::GROUP,
                tenancy::PLURAL,
                apimachinery::cluster::ROOT,
                "",
                c,
            )?;
            let v = lc.value();
            let ds = datastores::binding(&v);
            let moving = moves::moving_to(&v).is_some();
            (!ds.is_empty() || moving).then(|| registry::shards::Binding {
                datastore: Arc::from(ds),
                moving,
            })
        }));
        let cp = ControlPlane::new(store, catalog, config)?;
        cp.admission.register(
            tenancy::GROUP,
            tenancy::PLURAL,
            Arc::new(datastores::BindingValidator),
        );
        cp.admission.register_mutator(
            tenancy::GROUP,
            datastores::PLURAL,
            Arc::new(datastores::RevisionOffset),
        );
        bootstrap::seed(&cp, apimachinery::cluster::ROOT).await?;
        datastores::start(&cp)?;
        tenancy::start(cp.clone()).await?;
        aggregation::start(&cp)?;
        crds::start(&cp)?;
        apiservices::start(&cp)?;
        rotation::start(&cp)?;
        event_ttl::start(&cp)?;
        Ok(cp)
    }

    /// The tuning of every watch cache (the shared store's and each datastore's).
    pub fn cache_options() -> registry::cache::CacheOptions {
        let mut opts = registry::cache::CacheOptions::default();
        // Every request to a tenant cluster reads its LogicalCluster (does it exist, is it
        // Ready, where are its keys): keep those decoded, as RBAC is.
        opts.keep_decoded
            .push((tenancy::GROUP.into(), tenancy::PLURAL.into()));
        opts
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The OpenAPI documents each cluster serves.
    pub fn openapi(&self) -> &openapi::ClusterDocuments {
        &self.openapi
    }

    /// In-process validating admission hooks, by resource.
    pub fn admission(&self) -> &admission::Validators {
        &self.admission
    }

    pub fn metrics(&self) -> &metrics::Metrics {
        &self.metrics
    }

    /// The trust material of a cluster (its CA and service-account key), if it is provisioned.
    pub fn trust(&self, cluster: &str) -> Option<Arc<Trust>> {
        self.trusts.get(self.store.shared_cache(), cluster)
    }

    /// Whether the shared store answers (the `etcd` health check): its current revision is
    /// read within two seconds. (Each datastore's health is in its `DataStore`'s status.)
    pub async fn storage_healthy(&self) -> bool {
        let probe = self.store.shared().storage.current_revision();
        matches!(
            tokio::time::timeout(std::time::Duration::from_secs(2), probe).await,
            Ok(Ok(_))
        )
    }

    /// Whether a logical cluster is served.
    pub async fn cluster_exists(&self, cluster: &str) -> bool {
        cluster == apimachinery::cluster::ROOT || clusters::exists(self, cluster).await
    }

    /// Whether a logical cluster is created and not yet served ([`clusters::pending`]).
    pub fn cluster_pending(&self, cluster: &str) -> bool {
        clusters::pending(self, cluster)
    }

    /// Whether this replica leads: its singleton loops write.
    pub fn leads(&self) -> bool {
        *self.leading.borrow()
    }

    /// Tells the singleton loops whether this replica leads (from a Lease election); on
    /// gaining leadership they reconcile everything, as nothing was written while following.
    pub fn set_leading(&self, leading: bool) {
        self.leading
            .send_if_modified(|l| std::mem::replace(l, leading) != leading);
    }

    /// Follows [`ControlPlane::leads`].
    pub fn leadership(&self) -> tokio::sync::watch::Receiver<bool> {
        self.leading.subscribe()
    }

    /// The sizes of what the control plane keeps per logical cluster, by name (see
    /// `ApiServer::per_cluster_state`).
    pub fn per_cluster_state(&self) -> std::collections::BTreeMap<&'static str, usize> {
        std::collections::BTreeMap::from([
            ("trust", self.trusts.cached()),
            ("openapi documents", self.openapi.clusters()),
            ("custom resource catalogues", self.catalog.custom_clusters()),
            (
                "cached objects",
                self.store
                    .shards
                    .all()
                    .iter()
                    .map(|s| s.cache.object_count())
                    .sum(),
            ),
            (
                "watchers",
                self.store
                    .shards
                    .all()
                    .iter()
                    .map(|s| s.cache.watcher_count())
                    .sum(),
            ),
            (
                "authentication configurations",
                self.authentication.read().len(),
            ),
        ])
    }

    /// Registers `hook`, called with each logical cluster whose deletion completed.
    pub fn on_forget(&self, hook: impl Fn(&str) + Send + Sync + 'static) {
        self.forget_hooks.lock().push(Box::new(hook));
    }

    /// Lets go of everything kept about a deleted cluster.
    /// The logical cluster served at `host` (a TLS client's SNI), if any.
    pub fn cluster_for_host(&self, host: &str) -> Option<String> {
        self.hostnames.cluster(host)
    }

    /// The logical cluster a service-account token was issued in, read from its issuer
    /// (`<external URL>/clusters/<name>`) without verifying it: where an in-cluster client of
    /// a tenant cluster — which knows only `KUBERNETES_SERVICE_HOST` and its token — is
    /// served. The request is then authenticated in that cluster as any other, so a forged
    /// issuer gains nothing. None for the root cluster's tokens and unknown clusters.
    pub fn cluster_of_token(&self, token: &str) -> Option<String> {
        let claims = jwt::unverified_claims(token)?;
        let iss = claims.get("iss")?.as_str()?;
        let name = trust::cluster_of_issuer(self.trusts.external_url(), iss)?;
        self.trust(name).map(|_| name.to_string())
    }

    /// A logical cluster's OIDC configuration (its LogicalCluster's `spec.authentication`).
    pub fn authentication(&self, cluster: &str) -> Option<Arc<serde_json::Value>> {
        self.authentication.read().get(cluster).cloned()
    }

    pub(crate) fn set_authentication(&self, cluster: &str, config: Option<serde_json::Value>) {
        let mut all = self.authentication.write();
        match config {
            Some(c) if all.get(cluster).map(|a| a.as_ref()) != Some(&c) => {
                all.insert(cluster.to_string(), Arc::new(c));
            }
            Some(_) => {}
            None => {
                all.remove(cluster);
            }
        }
    }

    pub(crate) fn forget(&self, cluster: &str) {
        self.hostnames.set(cluster, Vec::new());
        self.set_authentication(cluster, None);
        self.trusts.forget(cluster);
        for shard in self.store.shards.all() {
            shard.cache.forget_cluster(cluster);
        }
        self.openapi.set(cluster, None);
        for hook in self.forget_hooks.lock().iter() {
            hook(cluster);
        }
    }
}

/// Waits until this replica gains leadership (see [`ControlPlane::leadership`]); `None` once
/// the control plane is gone.
pub(crate) async fn gained_leadership(rx: &mut tokio::sync::watch::Receiver<bool>) -> Option<()> {
    loop {
        rx.changed().await.ok()?;
        if *rx.borrow_and_update() {
            return Some(());
        }
    }
}

/// Runs an expensive CEL evaluation: on a worker of a multi-threaded runtime under
/// `block_in_place`, so the worker's other tasks (every cluster's requests) move to another
/// thread while it computes; elsewhere it simply runs.
fn off_the_async_worker(f: &mut dyn FnMut()) {
    let multi = tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
    if multi {
        tokio::task::block_in_place(f)
    } else {
        f()
    }
}
