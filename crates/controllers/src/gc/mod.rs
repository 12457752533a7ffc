//! The garbage collector (upstream `pkg/controller/garbagecollector`): deletes objects whose
//! owners are gone, and carries out foreground and orphan deletion.
//!
//! Every deletable resource the server serves is watched metadata-only across all clusters —
//! one watch per resource, never per cluster — and fed into the [`graph`]: the built-in ones
//! (found through the root cluster's discovery; they are the same in every cluster) from the
//! start, and custom resources while some cluster's CRD serves them (a watch on every
//! cluster's CRDs starts and stops them, and an owner kind becoming known sends its
//! dependents back to be looked at). Work from
//! the graph is then carried out against the object's own cluster:
//! - background: a dependent none of whose owners exists any more (or ever existed: a dangling
//!   uid) is deleted, with its own finalizers deciding how its dependents go;
//! - foreground: an owner with the `foregroundDeletion` finalizer gets its dependents deleted
//!   (those with dependents of their own in the foreground too), and loses the finalizer once no
//!   dependent blocks it (`blockOwnerDeletion`);
//! - orphan: an owner with the `orphan` finalizer has its references removed from its
//!   dependents, then loses the finalizer.

pub mod graph;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Weak};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::Api;
use kube::api::{DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PropagationPolicy};
use kube::core::{ObjectMeta, PartialObjectMeta};
use kube::discovery::{ApiResource, Discovery, Scope, verbs};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher;
use parking_lot::{Mutex, RwLock};
use serde_json::json;
use tokio::task::JoinHandle;

use self::graph::{FOREGROUND, Graph, Identity, Node, ORPHAN, Work, group_of};
use runtime::client::{ClusterClients, ROOT};
use runtime::error::{Error, Result};
use runtime::informer::{Change, Informer};
use runtime::queue::{Action, Queue};
use runtime::shared::Shutdown;

type Meta = PartialObjectMeta<DynamicObject>;

/// Resources never watched: events churn and own nothing (upstream's default ignore list).
const IGNORED: &[(&str, &str)] = &[("", "events"), ("events.k8s.io", "events")];

/// How an owner reference resolves.
#[derive(Debug, PartialEq, Eq)]
enum OwnerState {
    Solid,
    Dangling,
    /// Being deleted in the foreground: waiting for its dependents.
    Waiting,
}

/// A watched resource: its informer and, once started, the task running it.
struct Watched {
    informer: Arc<Informer<Meta>>,
    task: Option<JoinHandle<()>>,
}

/// The garbage collector.
pub struct GarbageCollector {
    clients: ClusterClients,
    graph: Arc<Mutex<Graph>>,
    /// (group, kind) → resource and whether it is namespaced.
    mapper: RwLock<HashMap<(String, String), (ApiResource, bool)>>,
    queue: Arc<Queue<Work>>,
    /// Watched resources by (group, plural).
    watched: Mutex<HashMap<(String, String), Watched>>,
    /// Resources watched from the start (built-ins and the root cluster's discovery), which
    /// a CRD going away never stops.
    initial: HashSet<(String, String)>,
    /// Custom resources by (group, plural): the clusters whose CRDs serve them.
    custom: Mutex<HashMap<(String, String), HashSet<String>>>,
    /// Every cluster's CustomResourceDefinitions: custom resources are watched while a CRD
    /// serves them, as upstream's collector follows discovery.
    crds: Arc<Informer<CustomResourceDefinition>>,
    shutdown: Mutex<Option<Shutdown>>,
}

/// A metadata-only informer of one resource across all clusters, feeding the graph.
fn informer(
    clients: &ClusterClients,
    ar: &ApiResource,
    graph: &Arc<Mutex<Graph>>,
    queue: &Arc<Queue<Work>>,
) -> Result<Arc<Informer<Meta>>> {
    let resource = ar.clone();
    let inf = Informer::from_shards(
        format!("gc:{}.{}", ar.plural, ar.group),
        clients,
        Arc::new(move |client| {
            let meta_api: Api<Meta> = Api::all_with(client, &resource);
            watcher::watcher(meta_api, watcher::Config::default())
                .default_backoff()
                .map_ok(|ev| ev.modify(|m: &mut Meta| m.metadata.managed_fields = None))
                .boxed()
        }),
    )?;
    let (g, q, ar2) = (graph.clone(), queue.clone(), ar.clone());
    inf.on_change(move |c| observe(&g, &q, &ar2, c));
    Ok(inf)
}

/// What an established CRD serves: its resource (at the storage version) and scope.
fn crd_resource(crd: &CustomResourceDefinition) -> Option<(ApiResource, bool)> {
    let established = crd
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c.type_ == "Established" && c.status == "True")
        });
    if !established || crd.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let spec = &crd.spec;
    let version = spec
        .versions
        .iter()
        .find(|v| v.storage && v.served)
        .or_else(|| spec.versions.iter().find(|v| v.served))?;
    let api_version = format!("{}/{}", spec.group, version.name);
    Some((
        ApiResource {
            group: spec.group.clone(),
            version: version.name.clone(),
            api_version,
            kind: spec.names.kind.clone(),
            plural: spec.names.plural.clone(),
        },
        spec.scope == "Namespaced",
    ))
}

impl GarbageCollector {
    /// Discovers the deletable resources and prepares one cross-cluster metadata informer for
    /// each, and an informer of every cluster's CRDs (started by [`GarbageCollector::start`]).
    pub async fn new(clients: ClusterClients) -> Result<Arc<Self>> {
        let root = clients.cluster(ROOT)?;
        let discovery = match Discovery::new(root.clone()).run_aggregated().await {
            Ok(d) => d,
            Err(_) => Discovery::new(root).run().await?,
        };
        let all = clients.all_clusters()?;
        let graph = Arc::new(Mutex::new(Graph::default()));
        let queue: Arc<Queue<Work>> = Queue::new();
        let mut mapper = HashMap::new();
        let mut watched = HashMap::new();
        for group in discovery.groups() {
            for (ar, caps) in group.recommended_resources() {
                let namespaced = caps.scope == Scope::Namespaced;
                mapper.insert(
                    (ar.group.clone(), ar.kind.clone()),
                    (ar.clone(), namespaced),
                );
                let deletable = [verbs::LIST, verbs::WATCH, verbs::DELETE]
                    .iter()
                    .all(|v| caps.supports_operation(v));
                if !deletable || IGNORED.contains(&(ar.group.as_str(), ar.plural.as_str())) {
                    continue;
                }
                let api: Api<DynamicObject> = Api::all_with(all.clone(), &ar);
                if let Err(e) = api.list_metadata(&ListParams::default().limit(1)).await {
                    tracing::debug!(resource = %ar.plural, error = %e, "not watched by the garbage collector");
                    continue;
                }
                let informer = informer(&clients, &ar, &graph, &queue)?;
                watched.insert(
                    (ar.group.clone(), ar.plural.clone()),
                    Watched {
                        informer,
                        task: None,
                    },
                );
            }
        }
        let crds = Informer::new(&clients, watcher::Config::default())?;
        Ok(Arc::new(GarbageCollector {
            clients,
            graph,
            mapper: RwLock::new(mapper),
            queue,
            initial: watched.keys().cloned().collect(),
            watched: Mutex::new(watched),
            custom: Mutex::new(HashMap::new()),
            crds,
            shutdown: Mutex::new(None),
        }))
    }

    pub fn queue(&self) -> Arc<Queue<Work>> {
        self.queue.clone()
    }

    /// How many resources are watched (one watch each, whatever the number of clusters).
    pub fn watched_resources(&self) -> usize {
        self.watched.lock().len()
    }

    /// How many objects the graph holds.
    pub fn graph_len(&self) -> usize {
        self.graph.lock().len()
    }

    /// Starts the informers, then follows CRDs as they come and go.
    pub fn start(self: &Arc<Self>, shutdown: &Shutdown) -> Vec<JoinHandle<()>> {
        *self.shutdown.lock() = Some(shutdown.clone());
        for w in self.watched.lock().values_mut() {
            w.task = Some(tokio::spawn(
                w.informer.clone().run(shutdown.clone().wait()),
            ));
        }
        let me: Weak<Self> = Arc::downgrade(self);
        self.crds.on_change(move |c| {
            if let Some(gc) = me.upgrade() {
                gc.on_crd(c);
            }
        });
        vec![tokio::spawn(self.crds.clone().run(shutdown.clone().wait()))]
    }

    /// Waits until the informers started with the collector have listed once (custom
    /// resources found later join the graph as their own lists arrive).
    pub async fn wait_synced(&self) {
        self.crds.wait_synced().await;
        let informers: Vec<Arc<Informer<Meta>>> = self
            .watched
            .lock()
            .iter()
            .filter(|(k, _)| self.initial.contains(*k))
            .map(|(_, w)| w.informer.clone())
            .collect();
        for i in informers {
            i.wait_synced().await;
        }
    }

    /// A CRD was added, changed or deleted in some cluster.
    fn on_crd(&self, change: &Change<'_, CustomResourceDefinition>) {
        let cluster = change.key().cluster.clone();
        let crd = change.object();
        let served = match change {
            Change::Deleted(..) => None,
            _ => crd_resource(crd),
        };
        match served {
            Some((ar, namespaced)) => self.watch_custom(&cluster, ar, namespaced),
            None => self.forget_custom(
                &cluster,
                &crd.spec.group,
                &crd.spec.names.plural,
                &crd.spec.names.kind,
            ),
        }
    }

    /// Watches a custom resource `cluster` now serves, and looks again at the dependents
    /// whose owners are of its kind.
    fn watch_custom(&self, cluster: &str, ar: ApiResource, namespaced: bool) {
        let key = (ar.group.clone(), ar.plural.clone());
        let new_here = self
            .custom
            .lock()
            .entry(key.clone())
            .or_default()
            .insert(cluster.to_string());
        if !new_here {
            return;
        }
        self.mapper
            .write()
            .entry((ar.group.clone(), ar.kind.clone()))
            .or_insert((ar.clone(), namespaced));
        if let std::collections::hash_map::Entry::Vacant(slot) = self.watched.lock().entry(key) {
            let Ok(informer) = informer(&self.clients, &ar, &self.graph, &self.queue) else {
                return;
            };
            let task = self
                .shutdown
                .lock()
                .clone()
                .map(|s| tokio::spawn(informer.clone().run(s.wait())));
            tracing::debug!(resource = %ar.plural, group = %ar.group, "garbage collector watches a custom resource");
            slot.insert(Watched { informer, task });
        }
        let work = self
            .graph
            .lock()
            .dependents_of_kind(cluster, &ar.group, &ar.kind);
        for w in work {
            self.queue.add(w);
        }
    }

    /// `cluster` no longer serves a custom resource: its objects leave the graph there (their
    /// dependents look again), and the watch stops when no cluster serves it.
    fn forget_custom(&self, cluster: &str, group: &str, plural: &str, kind: &str) {
        let key = (group.to_string(), plural.to_string());
        let last = {
            let mut custom = self.custom.lock();
            let Some(set) = custom.get_mut(&key) else {
                return;
            };
            if !set.remove(cluster) {
                return;
            }
            let last = set.is_empty();
            if last {
                custom.remove(&key);
            }
            last
        };
        let work = self.graph.lock().remove_kind(cluster, group, kind);
        for w in work {
            self.queue.add(w);
        }
        if last && !self.initial.contains(&key) {
            self.mapper
                .write()
                .remove(&(group.to_string(), kind.to_string()));
            if let Some(w) = self.watched.lock().remove(&key)
                && let Some(t) = w.task
            {
                t.abort();
            }
        }
    }

    fn resource(&self, api_version: &str, kind: &str) -> Option<(ApiResource, bool)> {
        self.mapper
            .read()
            .get(&(group_of(api_version).to_string(), kind.to_string()))
            .cloned()
    }

    fn api(
        &self,
        cluster: &str,
        namespace: &str,
        ar: &ApiResource,
        namespaced: bool,
    ) -> Result<Api<DynamicObject>> {
        let client = self.clients.cluster(cluster)?;
        Ok(if namespaced {
            Api::namespaced_with(client, namespace, ar)
        } else {
            Api::all_with(client, ar)
        })
    }

    /// Carries out one piece of work.
    pub async fn reconcile(&self, work: Work) -> Result<Action> {
        match work {
            Work::AttemptToDelete(c, u) => self.attempt_to_delete(&c, &u).await,
            Work::AttemptToOrphan(c, u) => self.attempt_to_orphan(&c, &u).await,
        }?;
        Ok(Action::AwaitChange)
    }

    async fn attempt_to_delete(&self, cluster: &str, uid: &str) -> Result<()> {
        let Some(node) = self.graph.lock().get(cluster, uid).cloned() else {
            return Ok(());
        };
        if node.being_deleted && !node.deleting_dependents {
            return Ok(());
        }
        let id = &node.identity;
        let Some((ar, namespaced)) = self.resource(&id.api_version, &id.kind) else {
            return Ok(());
        };
        let api = self.api(cluster, &id.namespace, &ar, namespaced)?;
        let Some(latest) = api.get_metadata_opt(&id.name).await? else {
            return Ok(());
        };
        if latest.metadata.uid.as_deref() != Some(uid) {
            return Ok(());
        }
        let finalizers = latest.metadata.finalizers.clone().unwrap_or_default();
        if latest.metadata.deletion_timestamp.is_some()
            && finalizers.iter().any(|f| f == FOREGROUND)
        {
            let blocking = self.graph.lock().blocking_dependents(cluster, uid);
            if blocking.is_empty() {
                return remove_finalizer(&api, &latest.metadata, FOREGROUND).await;
            }
            for dep in blocking.iter().filter(|d| !d.deleting_dependents) {
                self.queue.add(Work::AttemptToDelete(
                    cluster.into(),
                    dep.identity.uid.clone(),
                ));
            }
            return Ok(());
        }
        let owners = latest.metadata.owner_references.clone().unwrap_or_default();
        if owners.is_empty() {
            return Ok(());
        }
        let (mut solid, mut gone) = (Vec::new(), Vec::new());
        let mut waiting = Vec::new();
        for r in &owners {
            match self.owner_state(cluster, &id.namespace, r).await? {
                OwnerState::Solid => solid.push(r.uid.clone()),
                OwnerState::Dangling => gone.push(r.uid.clone()),
                OwnerState::Waiting => waiting.push(r.uid.clone()),
            }
        }
        if !solid.is_empty() {
            if gone.is_empty() && waiting.is_empty() {
                return Ok(());
            }
            // Keep the object; drop the references to owners that are gone or going.
            let keep: Vec<&OwnerReference> =
                owners.iter().filter(|r| solid.contains(&r.uid)).collect();
            return patch_meta(&api, &latest.metadata, json!({"ownerReferences": keep})).await;
        }
        let dependents = self.graph.lock().dependents(cluster, uid);
        let policy = if !waiting.is_empty() && !dependents.is_empty() {
            if dependents.iter().any(|d| d.deleting_dependents) {
                // Break a possible cycle of foreground deletions.
                let unblocked: Vec<OwnerReference> = owners
                    .iter()
                    .cloned()
                    .map(|mut r| {
                        r.block_owner_deletion = Some(false);
                        r
                    })
                    .collect();
                patch_meta(
                    &api,
                    &latest.metadata,
                    json!({"ownerReferences": unblocked}),
                )
                .await?;
            }
            PropagationPolicy::Foreground
        } else if finalizers.iter().any(|f| f == ORPHAN) {
            PropagationPolicy::Orphan
        } else if finalizers.iter().any(|f| f == FOREGROUND) {
            PropagationPolicy::Foreground
        } else {
            PropagationPolicy::Background
        };
        let dp = DeleteParams {
            propagation_policy: Some(policy),
            preconditions: Some(kube::api::Preconditions {
                uid: Some(uid.to_string()),
                resource_version: None,
            }),
            ..Default::default()
        };
        match api.delete(&id.name, &dp).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    async fn owner_state(
        &self,
        cluster: &str,
        namespace: &str,
        r: &OwnerReference,
    ) -> Result<OwnerState> {
        if let Some(o) = self.graph.lock().get(cluster, &r.uid) {
            return Ok(if o.deleting_dependents {
                OwnerState::Waiting
            } else {
                OwnerState::Solid
            });
        }
        let Some((ar, namespaced)) = self.resource(&r.api_version, &r.kind) else {
            // An owner of a kind not served (yet): keep the dependent, as upstream does.
            return Ok(OwnerState::Solid);
        };
        let api = self.api(cluster, namespace, &ar, namespaced)?;
        Ok(match api.get_metadata_opt(&r.name).await? {
            None => OwnerState::Dangling,
            Some(o) if o.metadata.uid.as_deref() != Some(r.uid.as_str()) => OwnerState::Dangling,
            Some(o)
                if o.metadata.deletion_timestamp.is_some()
                    && o.metadata
                        .finalizers
                        .iter()
                        .flatten()
                        .any(|f| f == FOREGROUND) =>
            {
                OwnerState::Waiting
            }
            Some(_) => OwnerState::Solid,
        })
    }

    async fn attempt_to_orphan(&self, cluster: &str, uid: &str) -> Result<()> {
        let Some(node) = self.graph.lock().get(cluster, uid).cloned() else {
            return Ok(());
        };
        let dependents = self.graph.lock().dependents(cluster, uid);
        for dep in dependents {
            let d = &dep.identity;
            let Some((ar, namespaced)) = self.resource(&d.api_version, &d.kind) else {
                continue;
            };
            let api = self.api(cluster, &d.namespace, &ar, namespaced)?;
            let Some(latest) = api.get_metadata_opt(&d.name).await? else {
                continue;
            };
            let refs = latest.metadata.owner_references.clone().unwrap_or_default();
            if !refs.iter().any(|r| r.uid == uid) {
                continue;
            }
            let keep: Vec<&OwnerReference> = refs.iter().filter(|r| r.uid != uid).collect();
            patch_meta(&api, &latest.metadata, json!({"ownerReferences": keep})).await?;
        }
        let id = &node.identity;
        let Some((ar, namespaced)) = self.resource(&id.api_version, &id.kind) else {
            return Ok(());
        };
        let api = self.api(cluster, &id.namespace, &ar, namespaced)?;
        match api.get_metadata_opt(&id.name).await? {
            Some(o) if o.metadata.uid.as_deref() == Some(uid) => {
                remove_finalizer(&api, &o.metadata, ORPHAN).await
            }
            _ => Ok(()),
        }
    }
}

/// Feeds one observed change into the graph and queues the work it causes.
fn observe(graph: &Mutex<Graph>, queue: &Queue<Work>, ar: &ApiResource, change: &Change<'_, Meta>) {
    let key = change.key();
    let work = {
        let mut g = graph.lock();
        let mut work = Vec::new();
        if let Change::Updated { old, new, .. } = change
            && old.metadata.uid != new.metadata.uid
        {
            work.extend(g.remove(
                &key.cluster,
                old.metadata.uid.as_deref().unwrap_or_default(),
            ));
        }
        let m = &change.object().metadata;
        let uid = m.uid.clone().unwrap_or_default();
        match change {
            Change::Deleted(..) => work.extend(g.remove(&key.cluster, &uid)),
            _ => {
                let node = Node {
                    identity: Identity {
                        cluster: key.cluster.clone(),
                        api_version: ar.api_version.clone(),
                        kind: ar.kind.clone(),
                        namespace: key.namespace.clone(),
                        name: key.name.clone(),
                        uid,
                    },
                    owners: m.owner_references.clone().unwrap_or_default(),
                    being_deleted: m.deletion_timestamp.is_some(),
                    deleting_dependents: false,
                    orphaning: false,
                };
                work.extend(g.upsert(node, m.finalizers.as_deref().unwrap_or_default()));
            }
        }
        work
    };
    for w in work {
        queue.add(w);
    }
}

/// A merge patch of metadata fields, conditional on the object's uid and resourceVersion.
async fn patch_meta(
    api: &Api<DynamicObject>,
    meta: &ObjectMeta,
    fields: serde_json::Value,
) -> Result<()> {
    let mut m = fields;
    m["uid"] = json!(meta.uid);
    m["resourceVersion"] = json!(meta.resource_version);
    let name = meta.name.clone().unwrap_or_default();
    match api
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": m})),
        )
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(Error::Kube(e)),
    }
}

async fn remove_finalizer(
    api: &Api<DynamicObject>,
    meta: &ObjectMeta,
    finalizer: &str,
) -> Result<()> {
    let rest: Vec<&String> = meta
        .finalizers
        .iter()
        .flatten()
        .filter(|f| *f != finalizer)
        .collect();
    patch_meta(api, meta, json!({"finalizers": rest})).await
}
