//! Starting the controllers: informers, workers, leader election and shutdown (the
//! kube-controller-manager of Matryoshka).
//!
//! [`run`] takes any [`ClusterClients`]: `matryoshka up` hands it clients over the API server's
//! in-memory transport, and the same controllers run out of process over HTTPS. With leader
//! election on, controllers run only while this replica holds the Lease, so several replicas
//! over one store run each controller once; losing the lease stops them until it is won back.

use std::future::Future;
use std::sync::Arc;

use crate::clock::SharedClock;
use crate::cronjob::CronJobController;
use crate::daemonset::DaemonSetController;
use crate::deployment::DeploymentController;
use crate::endpoints::{legacy::EndpointsController, slices::EndpointSliceController};
use crate::gc::GarbageCollector;
use crate::job::JobController;
use crate::namespace::NamespaceController;
use crate::replicaset::{ReplicaSetController, ReplicationManager};
use crate::rootca::{CaSource, RootCaPublisher};
use crate::serviceaccount::ServiceAccountController;
use crate::statefulset::StatefulSetController;
use crate::ttl::TtlAfterFinishedController;
use runtime::client::{ClusterClients, ROOT};
use runtime::error::Result;
use runtime::leader::LeaderConfig;
use runtime::queue::run_workers;
use runtime::shared::{Informers, Shutdown};

/// How the controllers run.
#[derive(Clone)]
pub struct Options {
    /// The CA bundle published in every namespace as `kube-root-ca.crt`, per cluster; the
    /// publisher does not run without it. In process it is the API server's serving CA (what
    /// the server itself seeds in a new cluster's first namespaces): [`Options::with_ca`].
    pub ca: Option<CaSource>,
    /// Workers per controller (upstream's `--concurrent-*-syncs` default to 5; the garbage
    /// collector gets four times as many, as upstream's 20).
    pub workers: usize,
    /// Lease-based leader election; `None` runs the controllers at once.
    pub leader_election: Option<LeaderConfig>,
    /// The wall clock of time-dependent controllers (Job, CronJob, TTL after finished).
    pub clock: SharedClock,
    /// Durations of the cluster-policy controllers (quota resync, node grace periods).
    pub policy: crate::policy::PolicyOptions,
    /// The root cluster's CA (certificate, key) for the CSR signer; logical clusters' CAs are
    /// read from their `-pki` Secrets.
    pub root_signer: crate::certificates::RootSigner,
    /// How long certificates the CSR signer issues are valid at most
    /// (`--cluster-signing-duration`).
    pub signing_duration: std::time::Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            ca: None,
            workers: 5,
            leader_election: None,
            clock: crate::clock::system(),
            policy: Default::default(),
            root_signer: None,
            signing_duration: crate::certificates::DEFAULT_DURATION,
        }
    }
}

impl Options {
    /// Leader election with a unique identity for this process.
    pub fn with_leader_election(mut self, identity: impl Into<String>) -> Self {
        self.leader_election = Some(LeaderConfig::new(identity));
        self
    }

    /// Runs the time-dependent controllers on `clock` (tests use a [`crate::clock::FakeClock`]).
    /// How long a node may go without a heartbeat before it is `Unknown`
    /// (`--node-monitor-grace-period`).
    pub fn with_node_grace(mut self, grace: std::time::Duration) -> Self {
        self.policy.node_grace = grace;
        self
    }

    /// The longest lifetime of certificates the CSR signer issues.
    pub fn with_signing_duration(mut self, d: std::time::Duration) -> Self {
        self.signing_duration = d;
        self
    }

    pub fn with_clock(mut self, clock: SharedClock) -> Self {
        self.clock = clock;
        self
    }

    /// Lets the CSR signer sign the root cluster's requests with this CA.
    pub fn with_root_signer(
        mut self,
        cert_pem: impl Into<String>,
        key_pem: impl Into<String>,
    ) -> Self {
        self.root_signer = Some((cert_pem.into(), key_pem.into()));
        self
    }

    /// Publishes the same CA bundle in every cluster.
    pub fn with_ca(mut self, pem: impl Into<String>) -> Self {
        let pem = pem.into();
        self.ca = Some(Arc::new(move |_: &str| Some(pem.clone())));
        self
    }
}

/// The `User-Agent` of the controllers' requests: the server names the field manager of
/// their writes `kube-controller-manager`, as upstream's.
pub const USER_AGENT: &str = "kube-controller-manager/v1.33.13 (linux/amd64) matryoshka";

/// Runs every controller through `clients` until `shutdown`.
pub async fn run(
    clients: ClusterClients,
    options: Options,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<()> {
    let clients = clients.with_user_agent(USER_AGENT);
    let Some(leader) = options.leader_election.clone() else {
        let (stop_all, stopped) = Shutdown::new();
        let controllers = run_controllers(clients, options, stopped);
        tokio::pin!(controllers);
        tokio::select! {
            r = &mut controllers => return r,
            () = shutdown => stop_all.trigger(),
        }
        return controllers.await;
    };
    let root = clients.cluster(ROOT)?;
    runtime::leader::run_while_leading(root, leader, shutdown, move |term| {
        run_controllers(clients.clone(), options.clone(), term)
    })
    .await;
    Ok(())
}

/// Builds every controller, starts the informers, waits for them to list, and runs the
/// workers until `stop`.
async fn run_controllers(clients: ClusterClients, options: Options, stop: Shutdown) -> Result<()> {
    let informers = Informers::new(clients.clone());
    let namespaces = NamespaceController::new(&informers)?;
    let accounts = ServiceAccountController::new(&informers)?;
    let sets = ReplicaSetController::<k8s_openapi::api::apps::v1::ReplicaSet>::new(&informers)?;
    let rcs = ReplicationManager::new(&informers)?;
    let deployments = DeploymentController::new(&informers)?;
    let jobs = JobController::new(&informers, options.clock.clone())?;
    let ttl = TtlAfterFinishedController::new(&informers, options.clock.clone())?;
    let cronjobs = CronJobController::new(&informers, options.clock.clone())?;
    let statefulsets = StatefulSetController::new(&informers)?;
    let daemonsets = DaemonSetController::new(&informers)?;
    let policy = crate::policy::Controllers::new(&informers, &options.policy)?;
    let slices = EndpointSliceController::new(&informers)?;
    let endpoints = EndpointsController::new(&informers)?;
    let root_ca = match &options.ca {
        Some(ca) => Some(RootCaPublisher::new(&informers, ca.clone())?),
        None => None,
    };
    let csrs = crate::certificates::CsrController::new(
        &informers,
        options.root_signer.clone(),
        options.signing_duration,
    )?;
    let gc = GarbageCollector::new(clients).await?;
    let mut tasks = informers.start(stop.clone());
    tasks.extend(gc.start(&stop));
    let synced = async {
        informers.wait_synced().await;
        gc.wait_synced().await;
    };
    tokio::select! {
        () = synced => {}
        () = stop.clone().wait() => {}
    }
    let w = options.workers.max(1);
    let mut queues_down: Vec<Box<dyn Fn() + Send + Sync>> = Vec::new();
    let mut workers = Vec::new();
    macro_rules! start {
        ($name:literal, $ctl:expr, $n:expr) => {{
            let ctl = $ctl.clone();
            let q = ctl.queue();
            let qd = q.clone();
            queues_down.push(Box::new(move || qd.shut_down()));
            workers.push(tokio::spawn(run_workers($name, q, $n, move |k| {
                let ctl = ctl.clone();
                async move { ctl.reconcile(k).await }
            })));
        }};
    }
    start!("namespace", namespaces, w);
    start!("serviceaccount", accounts, w);
    start!("replicaset", sets, w);
    start!("replicationcontroller", rcs, w);
    start!("deployment", deployments, w);
    start!("job", jobs, w);
    start!("ttl-after-finished", ttl, w);
    start!("cronjob", cronjobs, w);
    start!("statefulset", statefulsets, w);
    start!("daemonset", daemonsets, w);
    start!("endpointslice", slices, w);
    start!("endpoint", endpoints, w);
    start!("certificatesigningrequest", csrs, w);
    start!("garbagecollector", gc, w * 4);
    start!("resourcequota", policy.quota, w);
    start!("node-lifecycle", policy.nodes, w);
    start!("disruption", policy.disruption, w);
    start!("persistentvolume-binder", policy.volumes, w);
    if let Some(p) = &root_ca {
        start!("root-ca-cert-publisher", p, w);
    }
    tracing::info!("controllers are running");
    stop.wait().await;
    for f in &queues_down {
        f();
    }
    for t in workers.into_iter().chain(tasks) {
        let _ = t.await;
    }
    Ok(())
}
