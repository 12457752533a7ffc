//! Events that API clients record about the objects they act on, as upstream's
//! `record.EventRecorder` writes them: core/v1 Events (the API `kubectl get events` and
//! `kubectl describe` read in 1.27–1.33) in the object's namespace and cluster, named
//! `<object>.<hex nanoseconds>`, with the legacy recorder's fields (`source`, `count`, first
//! and last timestamps, `reportingComponent`; no `eventTime`, which would make the server
//! require the new API's `action` and `reportingInstance`).
//!
//! As upstream's broadcaster does, the recorder
//! - aggregates: the same reason and message about the same object raise the `count` and
//!   `lastTimestamp` of the Event already written instead of creating another;
//! - filters spam: each object may cause a burst of 25 events, then one per five minutes
//!   (`EventSourceObjectSpamFilter`'s token bucket), so a controller churning one object
//!   cannot flood its cluster's events;
//! - never blocks its caller: events go through a bounded buffer to one writer task with a
//!   few writes in flight, and are dropped (and counted) when the buffer is full or the API
//!   refuses them.
//!
//! One recorder serves every cluster: the cluster is part of each record. A recorder bound to
//! one client ([`Recorder::start_on`], the node agent's) writes every record through it, with
//! the reporting host (`source.host`, `reportingInstance`) set.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::Resource;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio::sync::mpsc;

use crate::client::ClusterClients;

/// `Normal` or `Warning`.
pub const NORMAL: &str = "Normal";
pub const WARNING: &str = "Warning";

/// Upstream's limit on an event's message (`NoteLengthLimit`).
pub const MESSAGE_LIMIT: usize = 1024;
/// Records waiting to be written before new ones are dropped.
pub const BUFFER: usize = 4096;
/// Event writes in flight at once.
pub const CONCURRENCY: usize = 8;
/// How many distinct events (and objects, for the spam filter) are remembered.
const REMEMBERED: usize = 4096;
/// The spam filter's burst per object and its refill interval (upstream: 25, one per 300 s).
const BURST: f64 = 25.0;
const REFILL: Duration = Duration::from_secs(300);

/// One event to write.
#[derive(Debug, Clone)]
pub struct Record {
    /// The logical cluster of the object.
    pub cluster: String,
    pub object: ObjectReference,
    /// [`NORMAL`] or [`WARNING`].
    pub type_: &'static str,
    pub reason: String,
    pub message: String,
}

/// Records events. Clones share the writer; it ends when every clone is gone.
#[derive(Clone)]
pub struct Recorder {
    tx: Option<mpsc::Sender<Record>>,
    dropped: Arc<AtomicU64>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("enabled", &self.tx.is_some())
            .finish()
    }
}

/// A reference to `obj` for an event's `involvedObject`.
pub fn reference<K: Resource<DynamicType = ()>>(obj: &K) -> ObjectReference {
    let m = obj.meta();
    ObjectReference {
        api_version: Some(K::api_version(&()).into_owned()),
        kind: Some(K::kind(&()).into_owned()),
        name: m.name.clone(),
        namespace: m.namespace.clone(),
        uid: m.uid.clone(),
        resource_version: m.resource_version.clone(),
        field_path: None,
    }
}

impl Recorder {
    /// Starts the writer for `component` (the event's `source.component` and
    /// `reportingComponent`, e.g. `replicaset-controller`).
    pub fn start(clients: ClusterClients, component: &str) -> Recorder {
        Self::spawn(Target::Clusters(clients), component, None)
    }

    /// Starts a writer through one client (of one cluster; records' clusters are ignored) for
    /// `component` on `host` (the kubelet: `kubelet` on its node).
    pub fn start_on(client: kube::Client, component: &str, host: &str) -> Recorder {
        Self::spawn(Target::One(client), component, Some(host.into()))
    }

    fn spawn(target: Target, component: &str, host: Option<Arc<str>>) -> Recorder {
        let (tx, rx) = mpsc::channel::<Record>(BUFFER);
        let dropped = Arc::new(AtomicU64::new(0));
        let writer = Writer {
            target,
            component: component.into(),
            host,
            dropped: dropped.clone(),
        };
        tokio::spawn(writer.run(rx));
        Recorder {
            tx: Some(tx),
            dropped,
        }
    }

    /// A recorder that drops everything (tests of pure parts).
    pub fn disabled() -> Recorder {
        Recorder {
            tx: None,
            dropped: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Queues an event about `object` in `cluster`; drops it when the buffer is full.
    pub fn record(
        &self,
        cluster: &str,
        object: ObjectReference,
        type_: &'static str,
        reason: &str,
        message: impl Into<String>,
    ) {
        let Some(tx) = &self.tx else { return };
        let record = Record {
            cluster: cluster.to_string(),
            object,
            type_,
            reason: reason.to_string(),
            message: truncate(message.into()),
        };
        if tx.try_send(record).is_err() {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Queues an event about a typed object of `cluster`. The cluster is named, not read from
    /// the object: an informer's objects carry no cluster annotation (`take_key` removes it),
    /// so reading it sent tenant objects' Events to the root cluster.
    pub fn about<K: Resource<DynamicType = ()>>(
        &self,
        cluster: &str,
        obj: &K,
        type_: &'static str,
        reason: &str,
        message: impl Into<String>,
    ) {
        self.record(cluster, reference(obj), type_, reason, message);
    }

    /// How many events were dropped (buffer full, spam filter or a refused write).
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

/// Cuts a message to the limit the way upstream does (` ...` at the end).
pub fn truncate(mut message: String) -> String {
    if message.len() <= MESSAGE_LIMIT {
        return message;
    }
    let mut cut = MESSAGE_LIMIT - 4;
    while !message.is_char_boundary(cut) {
        cut -= 1;
    }
    message.truncate(cut);
    message.push_str(" ...");
    message
}

/// What is remembered of an event already written.
struct Written {
    name: String,
    count: i32,
    first: Timestamp,
}

/// A token bucket per object.
struct Bucket {
    tokens: f64,
    at: Instant,
}

/// A bounded map forgetting its oldest entries.
struct Lru<V> {
    map: HashMap<String, V>,
    order: VecDeque<String>,
}

impl<V> Lru<V> {
    fn new() -> Self {
        Lru {
            map: HashMap::new(),
            order: VecDeque::new(),
        }
    }

    fn get_mut(&mut self, k: &str) -> Option<&mut V> {
        self.map.get_mut(k)
    }

    fn insert(&mut self, k: String, v: V) {
        if self.map.insert(k.clone(), v).is_none() {
            self.order.push_back(k);
            while self.order.len() > REMEMBERED {
                if let Some(old) = self.order.pop_front() {
                    self.map.remove(&old);
                }
            }
        }
    }
}

/// What one write does.
enum Write {
    Create(Box<Event>),
    Bump {
        name: String,
        count: i32,
        event: Box<Event>,
    },
}

/// Where events are written.
enum Target {
    /// Each record's cluster, through per-cluster clients.
    Clusters(ClusterClients),
    /// One client, whatever the record's cluster.
    One(kube::Client),
}

struct Writer {
    target: Target,
    component: Arc<str>,
    /// The reporting host (`source.host`, `reportingInstance`), if any.
    host: Option<Arc<str>>,
    dropped: Arc<AtomicU64>,
}

fn object_key(r: &Record) -> String {
    let o = &r.object;
    format!(
        "{}\x00{}\x00{}\x00{}\x00{}",
        r.cluster,
        o.namespace.as_deref().unwrap_or_default(),
        o.kind.as_deref().unwrap_or_default(),
        o.name.as_deref().unwrap_or_default(),
        o.uid.as_deref().unwrap_or_default(),
    )
}

impl Writer {
    async fn run(self, rx: mpsc::Receiver<Record>) {
        let mut written: Lru<Written> = Lru::new();
        let mut buckets: Lru<Bucket> = Lru::new();
        let this = Arc::new(self);
        // Deciding (aggregation and spam filter) is serial; writing is concurrent.
        let decided =
            futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|r| (r, rx)) })
                .filter_map(|r| {
                    let w = this.decide(&mut written, &mut buckets, r, Instant::now());
                    async move { w }
                });
        let writer = this.clone();
        decided
            .for_each_concurrent(CONCURRENCY, move |(cluster, namespace, w)| {
                let writer = writer.clone();
                async move { writer.write(&cluster, &namespace, w).await }
            })
            .await;
    }

    fn decide(
        &self,
        written: &mut Lru<Written>,
        buckets: &mut Lru<Bucket>,
        r: Record,
        now: Instant,
    ) -> Option<(String, String, Write)> {
        let object = object_key(&r);
        match buckets.get_mut(&object) {
            Some(b) => {
                let refill = now.duration_since(b.at).as_secs_f64() / REFILL.as_secs_f64();
                b.tokens = (b.tokens + refill).min(BURST);
                b.at = now;
                if b.tokens < 1.0 {
                    self.dropped.fetch_add(1, Ordering::Relaxed);
                    return None;
                }
                b.tokens -= 1.0;
            }
            None => buckets.insert(
                object.clone(),
                Bucket {
                    tokens: BURST - 1.0,
                    at: now,
                },
            ),
        }
        let ts = Timestamp::now();
        // Node-scoped and cluster-scoped objects' events go to `default`, as upstream's.
        let namespace = r
            .object
            .namespace
            .clone()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| "default".into());
        let key = format!(
            "{object}\x00{}\x00{}\x00{}\x00{}",
            r.object.field_path.as_deref().unwrap_or_default(),
            r.type_,
            r.reason,
            r.message
        );
        let mut event = Event {
            metadata: ObjectMeta {
                namespace: Some(namespace.clone()),
                ..Default::default()
            },
            involved_object: r.object.clone(),
            reason: Some(r.reason.clone()),
            message: Some(r.message.clone()),
            type_: Some(r.type_.into()),
            source: Some(EventSource {
                component: Some(self.component.to_string()),
                host: self.host.as_deref().map(String::from),
            }),
            first_timestamp: Some(Time(ts)),
            last_timestamp: Some(Time(ts)),
            count: Some(1),
            reporting_component: Some(self.component.to_string()),
            reporting_instance: self.host.as_deref().map(String::from),
            ..Default::default()
        };
        if let Some(w) = written.get_mut(&key) {
            w.count += 1;
            event.metadata.name = Some(w.name.clone());
            event.count = Some(w.count);
            event.first_timestamp = Some(Time(w.first));
            return Some((
                r.cluster,
                namespace,
                Write::Bump {
                    name: w.name.clone(),
                    count: w.count,
                    event: Box::new(event),
                },
            ));
        }
        let name = format!(
            "{}.{:x}",
            r.object.name.as_deref().unwrap_or("unknown"),
            unique_nanos(ts)
        );
        event.metadata.name = Some(name.clone());
        written.insert(
            key,
            Written {
                name,
                count: 1,
                first: ts,
            },
        );
        Some((r.cluster, namespace, Write::Create(Box::new(event))))
    }

    async fn write(&self, cluster: &str, namespace: &str, w: Write) {
        let client = match &self.target {
            Target::One(client) => client.clone(),
            Target::Clusters(clients) => match clients.cluster(cluster) {
                Ok(client) => client,
                Err(_) => {
                    self.dropped.fetch_add(1, Ordering::Relaxed);
                    return;
                }
            },
        };
        let api: Api<Event> = Api::namespaced(client, namespace);
        let result = match w {
            Write::Create(event) => api.create(&PostParams::default(), &event).await,
            Write::Bump { name, count, event } => {
                let patch = json!({
                    "count": count,
                    "lastTimestamp": event.last_timestamp,
                    "message": event.message,
                });
                match api
                    .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                {
                    // The event expired or was deleted: write it again.
                    Err(kube::Error::Api(s)) if s.code == 404 => {
                        api.create(&PostParams::default(), &event).await
                    }
                    r => r,
                }
            }
        };
        if let Err(e) = result {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(component = %self.component, error = %e, "failed to record an event");
        }
    }
}

/// Nanoseconds of `ts`, made unique within the process (two events in one nanosecond get
/// different names).
fn unique_nanos(ts: Timestamp) -> i128 {
    static LAST: AtomicU64 = AtomicU64::new(0);
    let n = ts.as_nanosecond();
    let low = n as u64;
    let mut prev = LAST.load(Ordering::Relaxed);
    loop {
        let next = low.max(prev + 1);
        match LAST.compare_exchange(prev, next, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return n - i128::from(low) + i128::from(next),
            Err(p) => prev = p,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::ReplicaSet;

    fn writer() -> Writer {
        struct None_;
        impl crate::client::ClientFactory for None_ {
            fn client(&self, _: &str) -> crate::Result<kube::Client> {
                Err(crate::Error::Config("none".into()))
            }
            fn all_clusters(&self) -> crate::Result<kube::Client> {
                Err(crate::Error::Config("none".into()))
            }
            fn shard(&self, _: &str) -> crate::Result<kube::Client> {
                Err(crate::Error::Config("none".into()))
            }
            fn multi_cluster(&self) -> bool {
                true
            }
            fn with_user_agent(&self, _: &str) -> Arc<dyn crate::client::ClientFactory> {
                Arc::new(None_)
            }
        }
        Writer {
            target: Target::Clusters(ClusterClients::new(Arc::new(None_))),
            component: "replicaset-controller".into(),
            host: None,
            dropped: Arc::new(AtomicU64::new(0)),
        }
    }

    fn record(name: &str, message: &str) -> Record {
        let mut rs = ReplicaSet::default();
        rs.metadata.name = Some(name.into());
        rs.metadata.namespace = Some("ns".into());
        rs.metadata.uid = Some(format!("uid-{name}"));
        Record {
            cluster: "a".into(),
            object: reference(&rs),
            type_: NORMAL,
            reason: "SuccessfulCreate".into(),
            message: message.into(),
        }
    }

    #[test]
    fn the_same_event_twice_raises_the_count_of_the_first() {
        let w = writer();
        let (mut written, mut buckets) = (Lru::new(), Lru::new());
        let now = Instant::now();
        let Some((cluster, ns, Write::Create(first))) = w.decide(
            &mut written,
            &mut buckets,
            record("web", "Created pod: web-1"),
            now,
        ) else {
            panic!("the first event is created")
        };
        assert_eq!((cluster.as_str(), ns.as_str()), ("a", "ns"));
        assert_eq!(first.involved_object.kind.as_deref(), Some("ReplicaSet"));
        assert_eq!(
            first.involved_object.api_version.as_deref(),
            Some("apps/v1")
        );
        assert_eq!(
            first.source.as_ref().unwrap().component.as_deref(),
            Some("replicaset-controller")
        );
        let name = first.metadata.name.clone().unwrap();
        assert!(name.starts_with("web."), "{name}");
        match w.decide(
            &mut written,
            &mut buckets,
            record("web", "Created pod: web-1"),
            now,
        ) {
            Some((_, _, Write::Bump { name: n, count, .. })) => {
                assert_eq!(n, name);
                assert_eq!(count, 2);
            }
            _ => panic!("the repeat bumps the count"),
        }
        assert!(matches!(
            w.decide(
                &mut written,
                &mut buckets,
                record("web", "Created pod: web-2"),
                now
            ),
            Some((_, _, Write::Create(_)))
        ));
    }

    #[test]
    fn a_host_recorder_reports_its_host_and_containers_aggregate_apart() {
        let mut w = writer();
        w.host = Some("node-1".into());
        w.component = "kubelet".into();
        let (mut written, mut buckets) = (Lru::new(), Lru::new());
        let now = Instant::now();
        let mut pulled = |container: &str| {
            let mut r = record("web", "Pulled image");
            r.object.field_path = Some(format!("spec.containers{{{container}}}"));
            w.decide(&mut written, &mut buckets, r, now)
        };
        let Some((_, _, Write::Create(first))) = pulled("a") else {
            panic!("the first event is created")
        };
        let source = first.source.as_ref().unwrap();
        assert_eq!(
            (source.component.as_deref(), source.host.as_deref()),
            (Some("kubelet"), Some("node-1"))
        );
        assert_eq!(first.reporting_instance.as_deref(), Some("node-1"));
        // Another container of the same pod is another event; the same one bumps.
        assert!(matches!(pulled("b"), Some((_, _, Write::Create(_)))));
        assert!(matches!(
            pulled("a"),
            Some((_, _, Write::Bump { count: 2, .. }))
        ));
    }

    #[test]
    fn an_object_gets_a_burst_of_25_events_then_one_per_five_minutes() {
        let w = writer();
        let (mut written, mut buckets) = (Lru::new(), Lru::new());
        let now = Instant::now();
        let passed = (0..40)
            .filter(|i| {
                w.decide(
                    &mut written,
                    &mut buckets,
                    record("web", &format!("m{i}")),
                    now,
                )
                .is_some()
            })
            .count();
        assert_eq!(passed, 25);
        assert_eq!(w.dropped.load(Ordering::Relaxed), 15);
        // Another object has its own bucket.
        assert!(
            w.decide(&mut written, &mut buckets, record("db", "m"), now)
                .is_some()
        );
        let later = now + REFILL;
        assert!(
            w.decide(&mut written, &mut buckets, record("web", "m99"), later)
                .is_some()
        );
        assert!(
            w.decide(&mut written, &mut buckets, record("web", "m100"), later)
                .is_none()
        );
    }

    #[test]
    fn long_messages_are_cut_to_the_limit_with_an_ellipsis() {
        let t = truncate("é".repeat(1000));
        assert!(t.len() <= MESSAGE_LIMIT);
        assert!(t.ends_with(" ..."));
        assert_eq!(truncate("short".into()), "short");
    }

    #[test]
    fn event_names_are_unique_within_the_process() {
        let ts = Timestamp::now();
        let a = unique_nanos(ts);
        let b = unique_nanos(ts);
        assert_ne!(a, b);
    }
}
