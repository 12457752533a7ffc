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
//!   [`kubeconfig`], [`workers`], [`spec`]; the workers' machines are the `machines` crate's,
//!   run here under the same leader);
//! - [`install`] (CRDs, roles, `tenant-root`) and [`run`], what `matryoshka up` calls.
//!
//! **Architecture Invariant:** the platform reaches clusters only through the Kubernetes API
//! (the in-memory transport in process) and depends on nothing of the API server; the only
//! thing the server takes from it directly are its admission hooks ([`admission::validators`],
//! registered by the binary).

pub mod addons;
pub mod admission;
pub mod backup;
pub mod cluster;
pub mod conditions;
pub mod crds;
pub mod datastore;
pub mod dropapp;
pub mod endpoint;
pub mod install;
pub mod kubeconfig;
pub mod naming;
pub mod oidc;
pub mod quota;
pub mod rbac;
pub mod resource;
pub mod spec;
pub mod tenant;
pub mod usage;
pub mod validation;
pub mod workers;

use std::future::Future;

use runtime::client::{ClusterClients, ROOT};
use runtime::error::Result;
use runtime::informer::Informer;
use runtime::queue::run_workers;
use runtime::shared::Shutdown;

use crate::cluster::TenantClusterController;
use crate::resource::{ClusterBackup, LogicalCluster, Tenant, TenantCluster};
use crate::tenant::TenantController;

/// How the platform runs.
#[derive(Clone, Debug)]
pub struct Options {
    /// Workers per controller.
    pub workers: usize,
    /// Options of the machine controllers (and of virtual machines' node agent).
    pub machines: machines::Options,
    /// Where the Cluster API CRDs are (installed with the platform); without them, and
    /// without Cluster API installed otherwise, tenant clusters get no workers.
    pub cluster_api_crds: Option<std::path::PathBuf>,
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
    /// How tenant clusters are served by name.
    pub hosting: endpoint::Hosting,
    /// The image of the ingress controller the `ingressNginx` addon runs (None: the addon
    /// cannot be installed).
    pub ingress_image: Option<addons::ImageSource>,
    /// The platform's identity provider, for tenant clusters with `oidc.mode: System`.
    pub system_oidc: Option<oidc::SystemIssuer>,
    /// How long a usage record is kept after its consumer ended.
    pub usage_retention: std::time::Duration,
    /// Serve DropApp's `cluster.dropapp.ru` TenantCluster ([`dropapp`]).
    pub dropapp: bool,
    /// How tenants' own etcds run (`Tenant.spec.etcd: true`); `None`: tenants asking for one
    /// get a condition saying the platform does not run datastores.
    pub etcd: Option<datastore::EtcdOptions>,
}

/// The default retention of usage records: 400 days.
pub const USAGE_RETENTION: std::time::Duration = std::time::Duration::from_secs(400 * 24 * 3600);

impl Default for Options {
    fn default() -> Self {
        Options {
            workers: 8,
            machines: machines::Options::default(),
            cluster_api_crds: None,
            client_cert_validity: pki::LEAF_VALIDITY,
            backup_dir: None,
            backup_min_interval: std::time::Duration::from_secs(600),
            leader_election: None,
            hosting: endpoint::Hosting::default(),
            ingress_image: None,
            system_oidc: None,
            usage_retention: USAGE_RETENTION,
            dropapp: false,
            etcd: None,
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

/// Installs the CRDs, roles and `tenant-root` into the root cluster (the server must already
/// run the platform's [`admission::validators`]). [`run`] does this first; call it alone to
/// serve the resources without running the controllers.
pub async fn install(clients: &ClusterClients) -> Result<()> {
    install::install(&clients.cluster(ROOT)?).await
}

/// Installs DropApp's TenantCluster CRD ([`dropapp`]).
pub async fn install_dropapp(clients: &ClusterClients) -> Result<()> {
    install::install_crd(&clients.cluster(ROOT)?, &dropapp::crd()).await
}

/// Installs the machine providers' CRDs and, from `cluster_api_crds`, Cluster API's.
pub async fn install_machines(
    clients: &ClusterClients,
    cluster_api_crds: Option<&std::path::Path>,
) -> Result<()> {
    machines::crds::install(&clients.cluster(ROOT)?, cluster_api_crds).await
}

/// Installs the platform and runs its controllers through `clients` until `shutdown`.
pub async fn run(
    clients: ClusterClients,
    options: Options,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<()> {
    install(&clients).await?;
    if options.dropapp {
        install_dropapp(&clients).await?;
    }
    install_machines(&clients, options.cluster_api_crds.as_deref()).await?;
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
    let tenants = Informer::<Tenant>::root(&clients)?;
    let clusters = Informer::<TenantCluster>::root(&clients)?;
    let logical = Informer::<LogicalCluster>::root(&clients)?;
    let cluster_api = machines::crds::cluster_api_installed(&clients.cluster(ROOT)?).await;
    if !cluster_api {
        tracing::warn!(
            "Cluster API's CRDs are not served: tenant clusters get no worker machines (matryoshka up --cluster-api-crds DIR)"
        );
    }
    let backups = Informer::<ClusterBackup>::root(&clients)?;
    let etcds = options.etcd.clone().map(datastore::ManagedEtcds::new);
    let tenant_ctl = TenantController::new(clients.clone(), &tenants, etcds.clone());
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
        &tenants,
        options.hosting.clone(),
        cluster_api,
        options.client_cert_validity,
        if options.machines.process.is_some() {
            "process"
        } else {
            "virtual"
        },
        options.ingress_image.clone(),
        options.system_oidc.clone(),
    );
    // The Cluster API objects a TenantCluster renders bring it back when they change.
    let capi = if cluster_api {
        let clusters_capi = Informer::<machines::resource::Cluster>::root(&clients)?;
        let mds = Informer::<machines::resource::MachineDeployment>::root(&clients)?;
        let q = cluster_ctl.queue();
        let requeue = move |meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
            let name = meta
                .labels
                .as_ref()
                .and_then(|l| l.get(machines::names::CLUSTER_NAME_LABEL));
            if let (Some(ns), Some(tc)) = (
                meta.namespace.as_deref(),
                name.and_then(|n| naming::cluster_of_release(n)),
            ) {
                q.add(runtime::informer::ObjectKey::new(ROOT, ns, tc));
            }
        };
        let r = requeue.clone();
        clusters_capi.on_change(move |c| r(&c.object().metadata));
        mds.on_change(move |c| requeue(&c.object().metadata));
        Some((clusters_capi, mds))
    } else {
        None
    };
    // Usage: records of every machine and root pod of a tenant.
    let usage_records = Informer::<usage::UsageRecord>::root(&clients)?;
    let infra_machines = Informer::<machines::resource::MatryoshkaMachine>::root(&clients)?;
    let root_pods = Informer::<k8s_openapi::api::core::v1::Pod>::root(&clients)?;
    let recorder = usage::recorder::Recorder::new(
        clients.clone(),
        options.usage_retention,
        &usage_records,
        &infra_machines,
        &root_pods,
    );
    let dropapp = if options.dropapp {
        let informer = Informer::<dropapp::DropAppCluster>::root(&clients)?;
        let ctl = dropapp::DropAppController::new(clients.clone(), &informer, &clusters);
        Some((informer, ctl))
    } else {
        None
    };
    let (stop, stopped) = Shutdown::new();
    let mut tasks = vec![
        tokio::spawn(usage_records.clone().run(stopped.clone().wait())),
        tokio::spawn(infra_machines.clone().run(stopped.clone().wait())),
        tokio::spawn(root_pods.clone().run(stopped.clone().wait())),
        tokio::spawn(tenants.clone().run(stopped.clone().wait())),
        tokio::spawn(clusters.clone().run(stopped.clone().wait())),
        tokio::spawn(logical.clone().run(stopped.clone().wait())),
        tokio::spawn(backups.clone().run(stopped.clone().wait())),
    ];
    if let Some((i, _)) = &dropapp {
        tasks.push(tokio::spawn(i.clone().run(stopped.clone().wait())));
    }
    if let Some((c, m)) = &capi {
        tasks.push(tokio::spawn(c.clone().run(stopped.clone().wait())));
        tasks.push(tokio::spawn(m.clone().run(stopped.clone().wait())));
    }
    if cluster_api {
        let (c, o, s) = (clients.clone(), options.machines.clone(), stopped.clone());
        tasks.push(tokio::spawn(async move {
            if let Err(e) = machines::run(c, o, s.wait()).await {
                tracing::error!(error = %e, "the machine controllers stopped");
            }
        }));
    }
    let synced = async {
        tenants.wait_synced().await;
        clusters.wait_synced().await;
        logical.wait_synced().await;
        backups.wait_synced().await;
        usage_records.wait_synced().await;
        infra_machines.wait_synced().await;
        root_pods.wait_synced().await;
        if let Some((i, _)) = &dropapp {
            i.wait_synced().await;
        }
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
    let dq = dropapp.as_ref().map(|(_, ctl)| {
        let q = ctl.queue();
        let ctl = ctl.clone();
        tasks.push(tokio::spawn(run_workers(
            "dropapp-tenantcluster",
            q.clone(),
            2,
            move |k| {
                let ctl = ctl.clone();
                async move { ctl.reconcile(k).await }
            },
        )));
        q
    });
    let uq = recorder.queue();
    recorder.resync();
    {
        let ctl = recorder.clone();
        tasks.push(tokio::spawn(run_workers(
            "usagerecord",
            uq.clone(),
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
    uq.shut_down();
    if let Some(q) = dq {
        q.shut_down();
    }
    for t in tasks {
        let _ = t.await;
    }
    // Tenants' etcds run where the platform leads: they stop with it.
    if let Some(e) = etcds {
        e.stop_all().await;
    }
    Ok(())
}
