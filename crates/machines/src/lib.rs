//! Worker machines: Cluster API's controllers over the upstream CRDs, and the infrastructure
//! providers that realise a machine (spec: capi-kubevirt.md §1).
//!
//! Objects live in the root cluster, in a tenant's namespace, as Cluster API lays them out:
//! `Cluster` → `MachineDeployment` → `MachineSet` → `Machine` → `MatryoshkaMachine` (the
//! infrastructure machine, cloned from a `MatryoshkaMachineTemplate`), with a
//! `MachineHealthCheck` per group. The workload cluster whose Nodes the machines become is a
//! logical cluster of this Matryoshka, named by the Cluster's
//! [`names::LOGICAL_CLUSTER_ANNOTATION`].
//!
//! - [`deployment`]: rollouts (RollingUpdate with maxSurge/maxUnavailable, OnDelete),
//!   revisions, scaling, pause, status;
//! - [`machineset`]: replicas (creation, deletion priority), remediation by deletion, status;
//! - [`machine`]: bootstrap and infrastructure readiness, `providerID` → Node, phases and
//!   conditions, the Node's labels and annotations; deletion drains the Node (cordon, evict
//!   honouring PodDisruptionBudgets, timeout), deletes the infrastructure, then the Node;
//! - [`healthcheck`]: MachineHealthChecks (unhealthy node conditions, node startup timeout,
//!   the `unhealthyLessThanOrEqualTo` short-circuit);
//! - [`cluster`]: the Cluster's status and its deletion (every machine first);
//! - [`infra`] with [`provider`] and [`process`]: `MatryoshkaMachine` — `virtual` machines
//!   are nodes of the in-process node agent, `process` machines real node agents in network
//!   namespaces of their own;
//! - [`autoscaler`]: the cluster autoscaler over the groups' size annotations;
//! - [`volumes`]: volumes from the platform (tenant claims as infra claims of directory
//!   volumes the nodes reach);
//! - [`cloud`]: the workload clusters' cloud controller (LoadBalancer Services as infra
//!   Services of the root cluster, Nodes whose machine is gone).
//!
//! **Architecture Invariant:** an API client only (through `runtime`); one instance serves every
//! namespace and every workload cluster (watches are cross-cluster), so it scales with objects,
//! not with clusters.

pub mod autoscaler;
pub mod cloud;
pub mod cluster;
pub mod cond;
pub mod crds;
pub mod deployment;
pub mod expectations;
pub mod healthcheck;
pub mod infra;
pub mod machine;
pub mod machineset;
pub mod names;
pub mod process;
pub mod provider;
pub mod quota;
pub mod resource;
pub mod volumes;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::runtime::watcher;
use runtime::client::{ClusterClients, ROOT};
use runtime::error::Result;
use runtime::events::Recorder;
use runtime::informer::{Change, Informer, ObjectKey, Store};
use runtime::queue::{Queue, run_workers};
use runtime::shared::Shutdown;

use crate::resource::{
    Cluster, Machine, MachineDeployment, MachineHealthCheck, MachineSet, MatryoshkaMachine,
    MatryoshkaMachineTemplate,
};

/// How the machine controllers run.
#[derive(Clone, Debug)]
pub struct Options {
    /// Workers per controller.
    pub workers: usize,
    /// Options of virtual machines' node agent.
    pub nodes: node::Options,
    /// How often a drain that is waiting looks again (upstream: 20 s).
    pub drain_retry: Duration,
    /// The cluster autoscaler (None: node groups keep the size they are given).
    pub autoscaler: Option<autoscaler::AutoscalerOptions>,
    /// The `process` provider's machines, when this platform can run them (its owner
    /// stops them).
    pub process: Option<Arc<process::ProcessProvider>>,
    /// Where the platform keeps tenant clusters' volumes (None: their claims stay pending).
    pub volumes_dir: Option<std::path::PathBuf>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            workers: 4,
            nodes: node::Options::default(),
            drain_retry: Duration::from_secs(2),
            autoscaler: Some(autoscaler::AutoscalerOptions::default()),
            process: None,
            volumes_dir: None,
        }
    }
}

/// The work queues, one per kind.
pub(crate) struct Queues {
    pub clusters: Arc<Queue<ObjectKey>>,
    pub deployments: Arc<Queue<ObjectKey>>,
    pub sets: Arc<Queue<ObjectKey>>,
    pub machines: Arc<Queue<ObjectKey>>,
    pub checks: Arc<Queue<ObjectKey>>,
    pub infra: Arc<Queue<ObjectKey>>,
    /// Services of workload clusters (the cloud controller's load balancers).
    pub services: Arc<Queue<ObjectKey>>,
    /// Nodes of workload clusters whose machine may be gone.
    pub cloud_nodes: Arc<Queue<ObjectKey>>,
    /// Claims and volumes of the platform's volumes.
    pub volumes: Arc<Queue<ObjectKey>>,
}

/// What every controller of this crate reads: the informers' stores, the clients, the queues.
pub struct Ctx {
    pub(crate) clients: ClusterClients,
    pub(crate) recorder: Recorder,
    pub(crate) options: Options,
    pub(crate) clusters: Store<Cluster>,
    pub(crate) deployments: Store<MachineDeployment>,
    pub(crate) sets: Store<MachineSet>,
    pub(crate) machines: Store<Machine>,
    pub(crate) checks: Store<MachineHealthCheck>,
    pub(crate) infra: Store<MatryoshkaMachine>,
    pub(crate) templates: Store<MatryoshkaMachineTemplate>,
    pub(crate) nodes: Store<Node>,
    pub(crate) services: Store<Service>,
    pub(crate) slices: Store<EndpointSlice>,
    pub(crate) claims: Store<PersistentVolumeClaim>,
    pub(crate) volumes: Store<PersistentVolume>,
    pub(crate) classes: Store<StorageClass>,
    pub(crate) pods: Store<Pod>,
    pub(crate) queues: Queues,
    pub(crate) virtual_nodes: provider::VirtualProvider,
    /// Machines a MachineSet, and MachineSets a MachineDeployment, just wrote.
    pub(crate) expected_machines: expectations::Expectations,
    pub(crate) expected_sets: expectations::Expectations,
    /// Machines created and not yet in the infrastructure informer (charged to quotas).
    pub(crate) unseen_machines: quota::Unseen,
}

/// The controller reference of an object, if any.
pub(crate) fn controller_of(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> Option<&OwnerReference> {
    meta.owner_references
        .as_ref()?
        .iter()
        .find(|o| o.controller == Some(true))
}

/// Adds (`add`) or releases `finalizer` on `obj` with a merge patch carrying its
/// resourceVersion, so a write from a stale view conflicts instead of dropping another
/// controller's finalizer. An object already gone is fine when releasing.
pub(crate) async fn set_finalizer<K>(
    api: &kube::Api<K>,
    obj: &K,
    finalizer: &str,
    add: bool,
) -> Result<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let meta = obj.meta();
    let mut list: Vec<String> = meta
        .finalizers
        .clone()
        .unwrap_or_default()
        .into_iter()
        .filter(|f| f != finalizer)
        .collect();
    if add {
        list.push(finalizer.to_string());
    }
    let patch = serde_json::json!({"metadata": {"finalizers": list, "resourceVersion": meta.resource_version}});
    let name = meta.name.as_deref().unwrap_or("");
    let pp = kube::api::PatchParams::default();
    let done = api.patch(name, &pp, &kube::api::Patch::Merge(&patch)).await;
    if add {
        done?;
    } else {
        runtime::error::ignore_not_found(done)?;
    }
    Ok(())
}

/// A controller owner reference to `obj`.
pub(crate) fn owner_ref<K: kube::Resource<DynamicType = ()>>(obj: &K) -> OwnerReference {
    OwnerReference {
        api_version: K::api_version(&()).to_string(),
        kind: K::kind(&()).to_string(),
        name: obj.meta().name.clone().unwrap_or_default(),
        uid: obj.meta().uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

impl Ctx {
    /// The key of an object in the root cluster.
    pub(crate) fn key(namespace: &str, name: &str) -> ObjectKey {
        ObjectKey::new(ROOT, namespace, name)
    }

    /// The Cluster a namespaced object with `spec.clusterName` belongs to.
    pub(crate) fn cluster_of(
        &self,
        namespace: &str,
        spec: &serde_json::Value,
    ) -> Option<Arc<Cluster>> {
        let name = resource::str_at(spec, "/clusterName")?;
        self.clusters.get(&Self::key(namespace, name))
    }

    /// The logical cluster that is `cluster`'s workload cluster.
    pub(crate) fn workload_of(cluster: &Cluster) -> Option<&str> {
        cluster
            .metadata
            .annotations
            .as_ref()?
            .get(names::LOGICAL_CLUSTER_ANNOTATION)
            .map(String::as_str)
            .filter(|s| !s.is_empty())
    }

    /// The Cluster whose workload cluster is `logical`.
    pub(crate) fn cluster_for_workload(&self, logical: &str) -> Option<Arc<Cluster>> {
        self.clusters
            .list_cluster(ROOT)
            .into_iter()
            .map(|(_, c)| c)
            .find(|c| Self::workload_of(c) == Some(logical))
    }

    /// A client of the root cluster.
    pub(crate) fn root(&self) -> Result<kube::Client> {
        self.clients.cluster(ROOT)
    }
}

/// Installs the CRDs (with Cluster API's from `cluster_api_crds`) and runs the controllers
/// through `clients` until `shutdown`.
pub async fn run(
    clients: ClusterClients,
    options: Options,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<()> {
    let clusters = Informer::<Cluster>::root(&clients)?;
    let deployments = Informer::<MachineDeployment>::root(&clients)?;
    let sets = Informer::<MachineSet>::root(&clients)?;
    let machines = Informer::<Machine>::root(&clients)?;
    let checks = Informer::<MachineHealthCheck>::root(&clients)?;
    let infra = Informer::<MatryoshkaMachine>::root(&clients)?;
    let templates = Informer::<MatryoshkaMachineTemplate>::root(&clients)?;
    let nodes = Informer::<Node>::new(&clients, watcher::Config::default())?;
    let services = Informer::<Service>::new(&clients, watcher::Config::default())?;
    let slices = Informer::<EndpointSlice>::new(&clients, watcher::Config::default())?;
    let claims = Informer::<PersistentVolumeClaim>::new(&clients, watcher::Config::default())?;
    let volumes = Informer::<PersistentVolume>::new(&clients, watcher::Config::default())?;
    let classes = Informer::<StorageClass>::new(&clients, watcher::Config::default())?;
    let pods = Informer::<Pod>::new(&clients, watcher::Config::default())?;
    // The root cluster's class of infra volumes.
    {
        let api: kube::Api<StorageClass> = kube::Api::all(clients.cluster(ROOT)?);
        let class: StorageClass = serde_json::from_value(volumes::root_class())?;
        match api.create(&Default::default(), &class).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => return Err(e.into()),
        }
    }
    let ctx = Arc::new(Ctx {
        clients: clients.clone(),
        recorder: Recorder::start(clients.clone(), "machine-controller"),
        options: options.clone(),
        clusters: clusters.store(),
        deployments: deployments.store(),
        sets: sets.store(),
        machines: machines.store(),
        checks: checks.store(),
        infra: infra.store(),
        templates: templates.store(),
        nodes: nodes.store(),
        services: services.store(),
        slices: slices.store(),
        claims: claims.store(),
        volumes: volumes.store(),
        classes: classes.store(),
        pods: pods.store(),
        queues: Queues {
            clusters: Queue::new(),
            deployments: Queue::new(),
            sets: Queue::new(),
            machines: Queue::new(),
            checks: Queue::new(),
            infra: Queue::new(),
            services: Queue::new(),
            cloud_nodes: Queue::new(),
            volumes: Queue::new(),
        },
        virtual_nodes: provider::VirtualProvider::new(clients.clone(), options.nodes.clone()),
        expected_machines: Default::default(),
        expected_sets: Default::default(),
        unseen_machines: Default::default(),
    });
    wire(
        &ctx,
        &clusters,
        &deployments,
        &sets,
        &machines,
        &checks,
        &infra,
        &nodes,
    );
    cloud_wire(&ctx, &services, &slices, &nodes, &infra);
    volumes::wire(&ctx, &clusters, &claims, &volumes, &pods);
    let (stop, stopped) = Shutdown::new();
    let mut tasks = vec![
        tokio::spawn(clusters.clone().run(stopped.clone().wait())),
        tokio::spawn(deployments.clone().run(stopped.clone().wait())),
        tokio::spawn(sets.clone().run(stopped.clone().wait())),
        tokio::spawn(machines.clone().run(stopped.clone().wait())),
        tokio::spawn(checks.clone().run(stopped.clone().wait())),
        tokio::spawn(infra.clone().run(stopped.clone().wait())),
        tokio::spawn(templates.clone().run(stopped.clone().wait())),
        tokio::spawn(nodes.clone().run(stopped.clone().wait())),
        tokio::spawn(services.clone().run(stopped.clone().wait())),
        tokio::spawn(slices.clone().run(stopped.clone().wait())),
        tokio::spawn(claims.clone().run(stopped.clone().wait())),
        tokio::spawn(volumes.clone().run(stopped.clone().wait())),
        tokio::spawn(classes.clone().run(stopped.clone().wait())),
        tokio::spawn(pods.clone().run(stopped.clone().wait())),
    ];
    let synced = async {
        clusters.wait_synced().await;
        deployments.wait_synced().await;
        sets.wait_synced().await;
        machines.wait_synced().await;
        checks.wait_synced().await;
        infra.wait_synced().await;
        templates.wait_synced().await;
        nodes.wait_synced().await;
        services.wait_synced().await;
        slices.wait_synced().await;
        claims.wait_synced().await;
        volumes.wait_synced().await;
        classes.wait_synced().await;
        pods.wait_synced().await;
    };
    tokio::pin!(shutdown);
    tokio::select! {
        () = synced => {}
        () = &mut shutdown => {}
    }
    let w = options.workers.max(1);
    macro_rules! workers {
        ($name:literal, $queue:ident, $method:ident) => {{
            let c = ctx.clone();
            tasks.push(tokio::spawn(run_workers(
                $name,
                ctx.queues.$queue.clone(),
                w,
                move |k| {
                    let c = c.clone();
                    async move { c.$method(k).await }
                },
            )));
        }};
    }
    workers!("capi-cluster", clusters, reconcile_cluster);
    workers!("machinedeployment", deployments, reconcile_deployment);
    workers!("machineset", sets, reconcile_set);
    workers!("machine", machines, reconcile_machine);
    workers!("machinehealthcheck", checks, reconcile_check);
    workers!("matryoshkamachine", infra, reconcile_infra);
    workers!("cloud-service", services, reconcile_service);
    workers!("cloud-node-lifecycle", cloud_nodes, reconcile_cloud_node);
    workers!("platform-volumes", volumes, reconcile_volume);
    // Every claim once at start (pending ones, infra ones whose tenant claim went meanwhile),
    // and root volumes being deleted.
    for k in ctx.claims.keys() {
        ctx.queues.volumes.add(k);
    }
    for (k, v) in ctx.volumes.list_cluster(ROOT) {
        if v.metadata.deletion_timestamp.is_some() {
            ctx.queues.volumes.add(k);
        }
    }
    // Every load balancer once at start: what changed while no one watched.
    for (k, svc) in ctx.services.entries() {
        if k.cluster.as_str() != ROOT && cloud::exposed(&k, &svc) {
            ctx.queues.services.add(k);
        }
    }
    if let Some(opts) = options.autoscaler.clone() {
        tasks.push(tokio::spawn(
            ctx.clone().run_autoscaler(opts, stopped.clone().wait()),
        ));
    }
    tracing::info!("machine controllers are running");
    shutdown.await;
    stop.trigger();
    for q in [
        &ctx.queues.clusters,
        &ctx.queues.deployments,
        &ctx.queues.sets,
        &ctx.queues.machines,
        &ctx.queues.checks,
        &ctx.queues.infra,
        &ctx.queues.services,
        &ctx.queues.cloud_nodes,
        &ctx.queues.volumes,
    ] {
        q.shut_down();
    }
    for t in tasks {
        let _ = t.await;
    }
    ctx.virtual_nodes.stop_all().await;
    Ok(())
}

/// The owner of kind `kind` of an object, as a key in the object's namespace.
fn owner_key(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    kind: &str,
) -> Option<ObjectKey> {
    let o = controller_of(meta).filter(|o| o.kind == kind)?;
    Some(Ctx::key(meta.namespace.as_deref().unwrap_or(""), &o.name))
}

/// Which changes wake which reconciles.
#[allow(clippy::too_many_arguments)]
fn wire(
    ctx: &Arc<Ctx>,
    clusters: &Informer<Cluster>,
    deployments: &Informer<MachineDeployment>,
    sets: &Informer<MachineSet>,
    machines: &Informer<Machine>,
    checks: &Informer<MachineHealthCheck>,
    infra: &Informer<MatryoshkaMachine>,
    nodes: &Informer<Node>,
) {
    let q = ctx.queues.clusters.clone();
    clusters.on_change(move |c| q.add(c.key().clone()));
    let q = ctx.queues.deployments.clone();
    let qc = ctx.queues.clusters.clone();
    deployments.on_change(move |c| {
        q.add(c.key().clone());
        if let Some(name) = resource::str_at(&c.object().spec, "/clusterName") {
            qc.add(Ctx::key(&c.key().namespace, name));
        }
    });
    let q = ctx.queues.sets.clone();
    let qd = ctx.queues.deployments.clone();
    sets.on_change(move |c| {
        q.add(c.key().clone());
        if let Some(k) = owner_key(&c.object().metadata, "MachineDeployment") {
            qd.add(k);
        }
    });
    let q = ctx.queues.machines.clone();
    let qs = ctx.queues.sets.clone();
    let qc = ctx.queues.clusters.clone();
    let qh = ctx.queues.checks.clone();
    let checks_store = ctx.checks.clone();
    machines.on_change(move |c| {
        q.add(c.key().clone());
        let m = c.object();
        if let Some(k) = owner_key(&m.metadata, "MachineSet") {
            qs.add(k);
        }
        let ns = &c.key().namespace;
        if let Some(cluster) = resource::str_at(&m.spec, "/clusterName") {
            qc.add(Ctx::key(ns, cluster));
            for hc in checks_store.list_namespace(ROOT, ns) {
                if resource::str_at(&hc.spec, "/clusterName") == Some(cluster) {
                    qh.add(Ctx::key(ns, hc.metadata.name.as_deref().unwrap_or("")));
                }
            }
        }
    });
    let q = ctx.queues.checks.clone();
    checks.on_change(move |c| {
        if !matches!(c, Change::Deleted(..)) {
            q.add(c.key().clone());
        }
    });
    let q = ctx.queues.infra.clone();
    let qm = ctx.queues.machines.clone();
    infra.on_change(move |c| {
        q.add(c.key().clone());
        if let Some(k) = owner_key(&c.object().metadata, "Machine") {
            qm.add(k);
        }
    });
    // A Node wakes its Machine: by the annotations the Machine controller writes, else by
    // name (providers name nodes after their machines) in the namespace of the Cluster whose
    // workload cluster it is in.
    let weak = Arc::downgrade(ctx);
    nodes.on_change(move |c| {
        let Some(ctx) = weak.upgrade() else { return };
        let n = c.object();
        let ann = n.metadata.annotations.as_ref();
        let by_annotation = ann.and_then(|a| {
            Some(Ctx::key(
                a.get(names::NODE_CLUSTER_NAMESPACE_ANNOTATION)?,
                a.get(names::NODE_MACHINE_ANNOTATION)?,
            ))
        });
        let key = by_annotation.or_else(|| {
            let cluster = ctx.cluster_for_workload(c.key().cluster.as_str())?;
            Some(Ctx::key(
                cluster.metadata.namespace.as_deref().unwrap_or(""),
                &c.key().name,
            ))
        });
        if let Some(k) = key
            && let Some(m) = ctx.machines.get(&k)
        {
            ctx.queues.machines.add(k.clone());
            if let Some(cluster) = resource::str_at(&m.spec, "/clusterName") {
                for hc in ctx.checks.list_namespace(ROOT, &k.namespace) {
                    if resource::str_at(&hc.spec, "/clusterName") == Some(cluster) {
                        ctx.queues.checks.add(Ctx::key(
                            &k.namespace,
                            hc.metadata.name.as_deref().unwrap_or(""),
                        ));
                    }
                }
            }
        }
    });
}

/// Which changes wake the cloud controller.
fn cloud_wire(
    ctx: &Arc<Ctx>,
    services: &Informer<Service>,
    slices: &Informer<EndpointSlice>,
    nodes: &Informer<Node>,
    infra: &Informer<MatryoshkaMachine>,
) {
    let is_lb = cloud::is_load_balancer;
    let weak = Arc::downgrade(ctx);
    services.on_change(move |c| {
        let Some(ctx) = weak.upgrade() else { return };
        let svc = c.object();
        let key = c.key();
        if key.cluster.as_str() != ROOT {
            let tracked = cloud::exposed(key, svc)
                || svc
                    .metadata
                    .finalizers
                    .iter()
                    .flatten()
                    .any(|f| f == cloud::LB_CLEANUP_FINALIZER)
                || svc
                    .status
                    .as_ref()
                    .and_then(|s| s.load_balancer.as_ref())
                    .and_then(|l| l.ingress.as_ref())
                    .is_some_and(|i| !i.is_empty());
            if tracked {
                ctx.queues.services.add(key.clone());
            }
            return;
        }
        // An infra Service wakes its tenant Service.
        let labels = svc.metadata.labels.as_ref();
        let get = |k: &str| labels.and_then(|l| l.get(k)).map(String::as_str);
        if let (Some(name), Some(ns), Some(cluster)) = (
            get(cloud::TENANT_SERVICE_NAME_LABEL),
            get(cloud::TENANT_SERVICE_NAMESPACE_LABEL),
            get(names::CLUSTER_NAME_LABEL),
        ) && let Some(capi) = ctx.clusters.get(&Ctx::key(&key.namespace, cluster))
            && let Some(workload) = Ctx::workload_of(&capi)
        {
            ctx.queues.services.add(ObjectKey::new(workload, ns, name));
        }
    });
    let weak = Arc::downgrade(ctx);
    slices.on_change(move |c| {
        let Some(ctx) = weak.upgrade() else { return };
        let key = c.key();
        let Some(svc_name) = c
            .object()
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(cloud::SERVICE_NAME_LABEL))
        else {
            return;
        };
        let svc_key = ObjectKey::new(key.cluster.as_str(), &key.namespace, svc_name);
        if key.cluster.as_str() != ROOT
            && ctx.services.get(&svc_key).is_some_and(|s| {
                is_lb(&s)
                    && s.spec
                        .as_ref()
                        .and_then(|s| s.external_traffic_policy.as_deref())
                        == Some("Local")
            })
        {
            ctx.queues.services.add(svc_key);
        }
    });
    let weak = Arc::downgrade(ctx);
    nodes.on_change(move |c| {
        let Some(ctx) = weak.upgrade() else { return };
        let cluster = c.key().cluster.as_str();
        if cluster == ROOT {
            return;
        }
        if !matches!(c, Change::Deleted(..)) {
            ctx.queues.cloud_nodes.add(c.key().clone());
        }
        for (k, s) in ctx.services.list_cluster(cluster) {
            if cloud::exposed(&k, &s) {
                ctx.queues.services.add(k);
            }
        }
    });
    let weak = Arc::downgrade(ctx);
    infra.on_change(move |c| {
        let Some(ctx) = weak.upgrade() else { return };
        if !matches!(c, Change::Deleted(..)) {
            return;
        }
        // The machine's Node, named after it, in its workload cluster.
        let key = c.key();
        for (_, capi) in ctx.clusters.list_cluster(ROOT) {
            if capi.metadata.namespace.as_deref() == Some(key.namespace.as_str())
                && let Some(w) = Ctx::workload_of(&capi)
            {
                ctx.queues.cloud_nodes.add(ObjectKey::new(w, "", &key.name));
            }
        }
    });
}
