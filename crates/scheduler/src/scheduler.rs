//! The scheduler: informers feeding the cache and queue, one scheduling loop, and binding.
//!
//! One instance serves every logical cluster. Its tasks are fixed: one informer per watched
//! resource, the scheduling loop, the queue flusher and the event writer, plus one short task
//! per binding in flight (bounded by [`Options::bind_concurrency`]). Scheduling starts once
//! every informer has listed (so no capacity is double-booked by pods not yet seen).
//!
//! The loop pops a pod, runs a cycle under the cache lock (filters, scores, assume), and hands
//! the pod to a binding task, so many bindings are in flight while the next pods are
//! scheduled against the assumed capacity. A pod that fits nowhere is marked
//! `PodScheduled=False` (`Unschedulable`, upstream's message) with a `FailedScheduling`
//! event, after any preemption it triggered.

use std::collections::HashSet;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use kube::api::Api;
use kube::runtime::watcher;
use parking_lot::Mutex;
use rand::SeedableRng;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinHandle;

use crate::binder;
use crate::cache::Cache;
use runtime::leader::{LeaderConfig, LeaderElector};
use runtime::shared::Shutdown;

use crate::client::{ClusterClients, ROOT};
use crate::error::Result;
use crate::events::{PodEvent, Recorder};
use crate::framework::PluginSet;
use crate::informers;
use crate::podinfo::{DEFAULT_SCHEDULER, PodInfo};
use crate::preemption::Preemption;
use crate::queue::Queue;
use crate::schedule::{Outcome, schedule_one};

/// How many informers must list before scheduling starts (the seven of the kinds and the
/// root's LogicalClusters placed by their host).
const INFORMERS: usize = 8;
/// How often backoffs are checked (their unit is a second).
const FLUSH_INTERVAL: Duration = Duration::from_millis(100);
/// How often long-unschedulable pods are looked for (upstream flushes every 30 s).
const UNSCHEDULABLE_SCAN: Duration = Duration::from_secs(30);
/// Pods scheduled between voluntary yields of the loop.
const YIELD_EVERY: u32 = 32;

/// How the scheduler runs.
#[derive(Debug, Clone)]
pub struct Options {
    /// Bindings (and failure reports) in flight at once. Many in flight let the API server's
    /// store commit them in groups.
    pub bind_concurrency: usize,
    /// Whether a `Scheduled` event is written for every bound pod (upstream does).
    pub scheduled_events: bool,
    /// The `reportingInstance` of events.
    pub instance: String,
    /// Lease-based leader election (several replicas, one scheduling); `None` schedules at
    /// once.
    pub leader_election: Option<LeaderConfig>,
}

/// The Lease upstream's scheduler elects its leader with (in the root cluster's
/// `kube-system`).
pub const LEASE_NAME: &str = "kube-scheduler";

impl Options {
    /// Elects a leader among replicas on the `kube-scheduler` Lease; `identity` is unique per
    /// replica.
    pub fn with_leader_election(mut self, identity: impl Into<String>) -> Self {
        let mut config = LeaderConfig::new(identity);
        config.name = LEASE_NAME.into();
        self.instance = format!("{DEFAULT_SCHEDULER}-{}", config.identity);
        self.leader_election = Some(config);
        self
    }
}

impl Default for Options {
    fn default() -> Self {
        Options {
            bind_concurrency: 256,
            scheduled_events: true,
            instance: format!("{DEFAULT_SCHEDULER}-matryoshka"),
            leader_election: None,
        }
    }
}

/// Counters of what the scheduler did.
#[derive(Debug, Default)]
pub struct Stats {
    /// Pods bound.
    pub bound: AtomicU64,
    /// Scheduling attempts that found no node.
    pub unschedulable: AtomicU64,
    /// Bindings the API server refused or that failed.
    pub bind_errors: AtomicU64,
    /// Preemptions started.
    pub preemptions: AtomicU64,
}

/// State shared by the scheduler's tasks.
pub struct Shared {
    pub(crate) cache: Mutex<Cache>,
    pub(crate) queue: Mutex<Queue>,
    pub(crate) wake: Notify,
    synced: AtomicUsize,
    synced_notify: Notify,
    clients: ClusterClients,
    events: Recorder,
    options: Options,
    binds: Arc<Semaphore>,
    /// Clusters whose pods the host's scheduler places (shared tenant clusters, see
    /// [`apimachinery::cluster::PLACEMENT_LABEL`]): never queued here.
    host_placed: parking_lot::RwLock<HashSet<String>>,
    pub stats: Stats,
}

impl Shared {
    /// Requeues a cluster's unschedulable pods that `plugins` may now admit.
    pub(crate) fn move_pods(&self, cluster: &str, plugins: PluginSet, now: Instant) {
        let active = {
            let mut q = self.queue.lock();
            q.move_for_event(cluster, plugins, now);
            q.has_active()
        };
        if active {
            self.wake.notify_one();
        }
    }

    /// Whether a cluster's pods are placed by its host's scheduler rather than this one.
    pub(crate) fn host_placed(&self, cluster: &str) -> bool {
        let set = self.host_placed.read();
        !set.is_empty() && set.contains(cluster)
    }

    pub(crate) fn mark_synced(&self) {
        self.synced.fetch_add(1, Ordering::AcqRel);
        self.synced_notify.notify_waiters();
    }

    /// Whether every informer has listed.
    pub fn is_synced(&self) -> bool {
        self.synced.load(Ordering::Acquire) >= INFORMERS
    }

    async fn wait_synced(&self) {
        loop {
            let notified = self.synced_notify.notified();
            if self.is_synced() {
                return;
            }
            notified.await;
        }
    }

    /// How many pods are queued (pending, backing off, unschedulable or in flight).
    pub fn queued(&self) -> usize {
        self.queue.lock().len()
    }

    /// How many clusters the cache holds state for.
    pub fn cached_clusters(&self) -> usize {
        self.cache.lock().cluster_count()
    }
}

/// A running scheduler.
pub struct Scheduler {
    shared: Arc<Shared>,
    tasks: Vec<JoinHandle<()>>,
}

impl Scheduler {
    /// Starts the informers, the queue flusher and the scheduling loop (no leader election).
    pub fn start(clients: ClusterClients, options: Options) -> Result<Scheduler> {
        // Fails now if there is no cross-cluster client.
        clients.all_clusters()?;
        let shared = Arc::new(Shared {
            cache: Mutex::new(Cache::default()),
            queue: Mutex::new(Queue::default()),
            wake: Notify::new(),
            synced: AtomicUsize::new(0),
            synced_notify: Notify::new(),
            events: Recorder::start(clients.clone(), options.instance.clone()),
            clients: clients.clone(),
            binds: Arc::new(Semaphore::new(options.bind_concurrency.max(1))),
            options,
            host_placed: parking_lot::RwLock::new(HashSet::new()),
            stats: Stats::default(),
        });
        let root = shared.clients.cluster(ROOT)?;
        let cfg = watcher::Config::default;
        let s = &shared;
        let tasks = vec![
            informers::every_shard(
                &clients,
                s,
                cfg().fields("status.phase!=Succeeded,status.phase!=Failed"),
                informers::on_pod,
            ),
            informers::every_shard(&clients, s, cfg(), informers::on_node),
            informers::every_shard(&clients, s, cfg(), informers::on_priority_class),
            informers::every_shard(&clients, s, cfg(), informers::on_namespace),
            informers::every_shard(&clients, s, cfg(), informers::on_claim),
            informers::every_shard(&clients, s, cfg(), informers::on_volume),
            informers::every_shard(&clients, s, cfg(), informers::on_storage_class),
            tokio::spawn(placements(s.clone(), root)),
            tokio::spawn(flush_loop(s.clone())),
            tokio::spawn(schedule_loop(s.clone())),
        ];
        Ok(Scheduler { shared, tasks })
    }

    /// The state shared by the scheduler's tasks (counters, queue and cache sizes).
    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// Waits until every informer has listed.
    pub async fn synced(&self) {
        self.shared.wait_synced().await;
    }

    /// Whether the scheduler's cache holds node `name` of `cluster` with its allocatable
    /// resources (what a pod created afterwards is judged against; a caller that just wrote
    /// the node waits for this before counting on it, since the node and pod watches are
    /// separate streams).
    pub fn knows_node(&self, cluster: &str, name: &str) -> bool {
        let cache = self.shared.cache.lock();
        cache
            .cluster(cluster)
            .and_then(|c| c.node(name))
            .and_then(|n| n.node.as_ref())
            .is_some_and(|n| n.allocatable.pods > 0)
    }

    /// Stops every task.
    pub fn stop(self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// The `User-Agent` of the scheduler's requests: the server names the field manager of its
/// writes `kube-scheduler`, as upstream's.
pub const USER_AGENT: &str = "kube-scheduler/v1.33.13 (linux/amd64) matryoshka";

/// Runs the scheduler through `clients` until `shutdown`; with leader election it schedules
/// only while it holds the lease (and starts afresh, cache rebuilt, when it wins it back).
pub async fn run(
    clients: ClusterClients,
    options: Options,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<()> {
    let clients = clients.with_user_agent(USER_AGENT);
    let Some(leader) = options.leader_election.clone() else {
        let scheduler = Scheduler::start(clients, options)?;
        shutdown.await;
        scheduler.stop();
        return Ok(());
    };
    let (stop_election, stopped) = Shutdown::new();
    let (leading_tx, mut leading) = tokio::sync::watch::channel(false);
    let elector = LeaderElector::new(clients.cluster(ROOT)?, leader);
    let election = tokio::spawn(elector.run(leading_tx, stopped.wait()));
    tokio::pin!(shutdown);
    let mut result = Ok(());
    loop {
        tokio::select! {
            r = leading.wait_for(|l| *l) => if r.is_err() { break },
            () = &mut shutdown => break,
        }
        let scheduler = match Scheduler::start(clients.clone(), options.clone()) {
            Ok(s) => s,
            Err(e) => {
                result = Err(e);
                break;
            }
        };
        let done = tokio::select! {
            _ = leading.wait_for(|l| !*l) => false,
            () = &mut shutdown => true,
        };
        scheduler.stop();
        if done {
            break;
        }
    }
    stop_election.trigger();
    let _ = election.await;
    result
}

/// The root cluster's `LogicalCluster` resource.
pub fn logical_clusters() -> kube::core::ApiResource {
    kube::core::ApiResource {
        group: "core.matryoshka.dev".into(),
        version: "v1alpha1".into(),
        api_version: "core.matryoshka.dev/v1alpha1".into(),
        kind: "LogicalCluster".into(),
        plural: "logicalclusters".into(),
    }
}

/// Follows the root's LogicalClusters whose pods their host places: their queued pods are
/// dropped and new ones never queued. Against a cluster that serves no LogicalClusters
/// (a plain Kubernetes cluster as the root) there are none.
async fn placements(shared: Arc<Shared>, root: kube::Client) {
    use futures::StreamExt;
    use kube::runtime::WatchStreamExt;
    use kube::runtime::watcher::Event;

    let api: Api<kube::core::PartialObjectMeta<kube::core::DynamicObject>> =
        Api::all_with(root, &logical_clusters());
    let selector = format!(
        "{}={}",
        apimachinery::cluster::PLACEMENT_LABEL,
        apimachinery::cluster::PLACEMENT_HOST
    );
    let config = watcher::Config::default().labels(&selector);
    let mut stream = watcher::watcher(api, config).default_backoff().boxed();
    let mut synced = false;
    let mut listed: HashSet<String> = HashSet::new();
    let add = |name: String| {
        if shared.host_placed.write().insert(name.clone()) {
            shared.queue.lock().delete_cluster(&name);
        }
    };
    while let Some(ev) = stream.next().await {
        match ev {
            Ok(Event::Init) => listed.clear(),
            Ok(Event::InitApply(lc)) => {
                let name = lc.metadata.name.unwrap_or_default();
                listed.insert(name.clone());
                add(name);
            }
            Ok(Event::InitDone) => {
                shared
                    .host_placed
                    .write()
                    .retain(|c| listed.contains(c.as_str()));
                if !synced {
                    synced = true;
                    shared.mark_synced();
                }
            }
            Ok(Event::Apply(lc)) => add(lc.metadata.name.unwrap_or_default()),
            Ok(Event::Delete(lc)) => {
                let name = lc.metadata.name.unwrap_or_default();
                shared.host_placed.write().remove(&name);
            }
            Err(watcher::Error::InitialListFailed(kube::Error::Api(e))) if e.code == 404 => {
                tracing::info!(
                    "the root serves no LogicalClusters: every cluster's pods are placed here"
                );
                if !synced {
                    shared.mark_synced();
                }
                return;
            }
            Err(watcher::Error::InitialListFailed(kube::Error::Api(e)))
                if e.code == 403 && !synced =>
            {
                // Not this scheduler's to read: it schedules meanwhile (as against a plain
                // cluster) and keeps asking.
                tracing::warn!(error = %e, "LogicalClusters may not be listed; retrying");
                synced = true;
                shared.mark_synced();
            }
            Err(e) => tracing::warn!(error = %e, "watching LogicalClusters failed; retrying"),
        }
    }
}

async fn flush_loop(shared: Arc<Shared>) {
    let mut tick = tokio::time::interval(FLUSH_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_scan = Instant::now();
    loop {
        tick.tick().await;
        let now = Instant::now();
        let active = {
            let mut q = shared.queue.lock();
            q.flush_backoff(now);
            if now.duration_since(last_scan) >= UNSCHEDULABLE_SCAN {
                last_scan = now;
                q.flush_unschedulable(now);
            }
            q.has_active()
        };
        if active {
            shared.wake.notify_one();
        }
    }
}

async fn schedule_loop(shared: Arc<Shared>) {
    shared.wait_synced().await;
    let mut rng = rand::rngs::SmallRng::from_os_rng();
    let mut since_yield = 0;
    loop {
        let Some(qp) = shared.queue.lock().pop() else {
            shared.wake.notified().await;
            continue;
        };
        let Ok(permit) = shared.binds.clone().acquire_owned().await else {
            return;
        };
        let pod = qp.info;
        let outcome = {
            let mut cache = shared.cache.lock();
            schedule_one(&mut cache, &pod, &mut rng)
        };
        match outcome {
            Outcome::Bind { node, .. } => {
                tokio::spawn(bind(shared.clone(), pod, node, permit));
            }
            Outcome::Unschedulable {
                message,
                plugins,
                preemption,
                clear_nomination,
            } => {
                shared.stats.unschedulable.fetch_add(1, Ordering::Relaxed);
                shared
                    .queue
                    .lock()
                    .unschedulable(&pod.key, plugins, Instant::now());
                let nomination = match (&preemption, clear_nomination) {
                    (Some(p), _) => Some(p.node.to_string()),
                    (None, true) => None,
                    (None, false) => Some(pod.nominated_node_name.clone()),
                };
                tokio::spawn(report_failure(
                    shared.clone(),
                    pod,
                    message,
                    nomination,
                    preemption,
                    permit,
                ));
            }
        }
        since_yield += 1;
        if since_yield >= YIELD_EVERY {
            since_yield = 0;
            tokio::task::yield_now().await;
        }
    }
}

async fn bind(
    shared: Arc<Shared>,
    pod: Arc<PodInfo>,
    node: Arc<str>,
    _permit: OwnedSemaphorePermit,
) {
    match binder::bind(&shared.clients, &pod, &node).await {
        Ok(()) => {
            shared.queue.lock().done(&pod.key);
            shared.stats.bound.fetch_add(1, Ordering::Relaxed);
            if shared.options.scheduled_events {
                shared.events.record(PodEvent {
                    message: format!(
                        "Successfully assigned {}/{} to {node}",
                        pod.key.namespace, pod.key.name
                    ),
                    pod,
                    type_: "Normal",
                    reason: "Scheduled",
                    action: "Binding",
                });
            }
        }
        Err(e) => {
            shared.stats.bind_errors.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(pod = %pod.key, node = %node, error = %e, "binding failed");
            shared.cache.lock().forget(&pod.key);
            {
                let mut q = shared.queue.lock();
                if e.is_not_found() || e.is_conflict() {
                    // Deleted, or bound by someone else: the watch says what happened.
                    q.done(&pod.key);
                } else {
                    q.retry(&pod.key, Instant::now());
                }
            }
            shared.move_pods(&pod.key.cluster, PluginSet::ALL, Instant::now());
            shared.events.record(PodEvent {
                message: format!("Binding rejected: {e}"),
                pod,
                type_: "Warning",
                reason: "FailedScheduling",
                action: "Scheduling",
            });
        }
    }
}

async fn report_failure(
    shared: Arc<Shared>,
    pod: Arc<PodInfo>,
    message: String,
    nomination: Option<String>,
    preemption: Option<Preemption>,
    _permit: OwnedSemaphorePermit,
) {
    if let Some(p) = preemption {
        shared.stats.preemptions.fetch_add(1, Ordering::Relaxed);
        for victim in p.victims {
            if let Err(e) = binder::preempt_victim(&shared.clients, &victim).await {
                tracing::warn!(victim = %victim.key, error = %e, "failed to preempt a pod");
                continue;
            }
            shared.events.record(PodEvent {
                message: format!("Preempted by pod {} on node {}", pod.uid, p.node),
                pod: victim,
                type_: "Normal",
                reason: "Preempted",
                action: "Preempting",
            });
        }
        for other in p.cleared_nominations {
            if let Err(e) = binder::clear_nomination(&shared.clients, &other).await {
                tracing::debug!(pod = %other.key, error = %e, "failed to clear a nomination");
            }
        }
    }
    if let Some(patch) = binder::unschedulable_patch(&pod, &message, nomination.as_deref())
        && let Err(e) = binder::patch_status(&shared.clients, &pod, &patch).await
    {
        tracing::debug!(pod = %pod.key, error = %e, "failed to update the pod's status");
    }
    shared.events.record(PodEvent {
        pod,
        type_: "Warning",
        reason: "FailedScheduling",
        action: "Scheduling",
        message,
    });
}
