//! The platform: tenant Kubernetes clusters on demand, inside a tree of tenants with inherited
//! access rights (spec: cozystack.md §1–§4).
//!
//! An operator applies a `Tenant` or a `TenantCluster` (`platform.matryoshka.dev/v1alpha1`)
//! to the root cluster; the platform's controllers turn a Tenant into a namespace with its
//! ancestry, RBAC and quotas, and a TenantCluster into a logical cluster with a kubeconfig
//! Secret, worker nodes and the Kubernetes version of the user's choice.
//!
//! - schema and admission: [`crds`] (the CRDs), [`validation`] and [`quota`] (the rules),
//!   [`admission`] (the API server's validating hooks for the two resources);
//! - controllers: [`tenant`] (with [`rbac`], [`naming`]) and [`cluster`] (with
//!   [`kubeconfig`], [`nodes`], [`spec`]);
//! - [`install`] (CRDs, roles, `tenant-root`) and [`run`], what `matryoshka up` calls.
//!
//! **Architecture Invariant:** the platform reaches clusters only through the Kubernetes API
//! (the in-memory transport in process) and depends on nothing of the API server; the only
//! thing the server takes from it directly are its admission hooks ([`admission::validators`],
//! registered by the binary).

pub mod admission;
pub mod backup;
pub mod cluster;
pub mod conditions;
pub mod crds;
pub mod install;
pub mod kubeconfig;
pub mod naming;
pub mod nodes;
pub mod quota;
pub mod rbac;
pub mod resource;
pub mod spec;
pub mod tenant;
pub mod validation;

use std::future::Future;
use std::sync::Arc;

use kube::Api;
use kube::runtime::{WatchStreamExt, watcher};
use runtime::client::{ClusterClients, ROOT};
use runtime::error::Result;
use runtime::informer::Informer;
use runtime::queue::run_workers;
use runtime::shared::Shutdown;

use crate::cluster::TenantClusterController;
use crate::nodes::NodePools;
use crate::resource::{ClusterBackup, LogicalCluster, Tenant, TenantCluster};
use crate::tenant::TenantController;

/// How the platform runs.
#[derive(Clone, Debug)]
pub struct Options {
    /// Workers per controller.
    pub workers: usize,
    /// Options of the tenant clusters' virtual nodes.
    pub nodes: node::Options,
    /// Lifetime of the client certificates in the kubeconfig Secrets (re-issued once two
    /// thirds of it have passed).
    pub client_cert_validity: std::time::Duration,
    /// Where ClusterBackups are written (`None`: the platform takes no backups).
    pub backup_dir: Option<std::path::PathBuf>,
    /// The shortest time between two scheduled backups of one ClusterBackup.
    pub backup_min_interval: std::time::Duration,
    /// Lease-based leader election (several replicas, one running the platform's controllers
    /// and node pools); `None` runs them at once.
    pub leader_election: Option<runtime::leader::LeaderConfig>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            workers: 8,
            nodes: node::Options::default(),
            client_cert_validity: pki::LEAF_VALIDITY,
            backup_dir: None,
            backup_min_interval: std::time::Duration::from_secs(600),
            leader_election: None,
        }
    }
}

impl Options {
    /// Leader election on the `matryoshka-platform` Lease; `identity` is unique per replica.
    pub fn with_leader_election(mut self, identity: impl Into<String>) -> Self {
        self.leader_election = Some(runtime::leader::LeaderConfig::named(
            "matryoshka-platform",
            identity,
        ));
        self
    }
}

/// An informer of a root-cluster resource.
fn root_informer<K>(clients: &ClusterClients) -> Result<Arc<Informer<K>>>
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
    let api: Api<K> = Api::all(clients.cluster(ROOT)?);
    Ok(Informer::from_stream(
        K::plural(&()).to_string(),
        runtime::lenient::watcher(api, watcher::Config::default(), None).default_backoff(),
    ))
}

/// Installs the CRDs, roles and `tenant-root` into the root cluster (the server must already
/// run the platform's [`admission::validators`]). [`run`] does this first; call it alone to
/// serve the resources without running the controllers.
pub async fn install(clients: &ClusterClients) -> Result<()> {
    install::install(&clients.cluster(ROOT)?).await
}

/// Installs the platform and runs its controllers through `clients` until `shutdown`.
pub async fn run(
    clients: ClusterClients,
    options: Options,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<()> {
    install(&clients).await?;
    run_controllers(clients, options, shutdown).await
}

/// Runs the platform's controllers through `clients` (the platform must be installed); with
/// leader election, only while this replica leads.
pub async fn run_controllers(
    clients: ClusterClients,
    options: Options,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<()> {
    let Some(leader) = options.leader_election.clone() else {
        return run_controllers_now(clients, options, shutdown).await;
    };
    let root = clients.cluster(ROOT)?;
    runtime::leader::run_while_leading(root, leader, shutdown, move |term| {
        run_controllers_now(clients.clone(), options.clone(), term.wait())
    })
    .await;
    Ok(())
}

async fn run_controllers_now(
    clients: ClusterClients,
    options: Options,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<()> {
    let tenants = root_informer::<Tenant>(&clients)?;
    let clusters = root_informer::<TenantCluster>(&clients)?;
    let logical = root_informer::<LogicalCluster>(&clients)?;
    let pools = NodePools::new(clients.clone(), options.nodes.clone());
    let backups = root_informer::<ClusterBackup>(&clients)?;
    let tenant_ctl = TenantController::new(clients.clone(), &tenants);
    let backup_ctl = backup::BackupController::new(
        clients.clone(),
        &backups,
        &clusters,
        options.backup_dir.clone(),
        options.backup_min_interval,
    );
    let cluster_ctl = TenantClusterController::new(
        clients.clone(),
        &clusters,
        &logical,
        pools.clone(),
        options.client_cert_validity,
    );
    let (stop, stopped) = Shutdown::new();
    let mut tasks = vec![
        tokio::spawn(tenants.clone().run(stopped.clone().wait())),
        tokio::spawn(clusters.clone().run(stopped.clone().wait())),
        tokio::spawn(logical.clone().run(stopped.clone().wait())),
        tokio::spawn(backups.clone().run(stopped.clone().wait())),
    ];
    let synced = async {
        tenants.wait_synced().await;
        clusters.wait_synced().await;
        logical.wait_synced().await;
        backups.wait_synced().await;
    };
    tokio::pin!(shutdown);
    tokio::select! {
        () = synced => {}
        () = &mut shutdown => {}
    }
    let w = options.workers.max(1);
    let tq = tenant_ctl.queue();
    let cq = cluster_ctl.queue();
    let bq = backup_ctl.queue();
    {
        let ctl = tenant_ctl.clone();
        tasks.push(tokio::spawn(run_workers(
            "tenant",
            tq.clone(),
            w,
            move |k| {
                let ctl = ctl.clone();
                async move { ctl.reconcile(k).await }
            },
        )));
        let ctl = cluster_ctl.clone();
        tasks.push(tokio::spawn(run_workers(
            "tenantcluster",
            cq.clone(),
            w,
            move |k| {
                let ctl = ctl.clone();
                async move { ctl.reconcile(k).await }
            },
        )));
    }
    {
        let ctl = backup_ctl.clone();
        tasks.push(tokio::spawn(run_workers(
            "clusterbackup",
            bq.clone(),
            2,
            move |k| {
                let ctl = ctl.clone();
                async move { ctl.reconcile(k).await }
            },
        )));
    }
    tracing::info!("platform controllers are running");
    shutdown.await;
    stop.trigger();
    tq.shut_down();
    cq.shut_down();
    bq.shut_down();
    for t in tasks {
        let _ = t.await;
    }
    pools.stop_all().await;
    Ok(())
}
