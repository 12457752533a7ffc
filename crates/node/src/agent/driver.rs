//! The pod driver: one watch of every bound pod in the cluster (`spec.nodeName!=`), one
//! task that keeps a record per pod of the virtual nodes here and moves each through its
//! life (see [`crate::pod::lifecycle`]) with status patches and, at the end, a delete.
//!
//! Writes run concurrently (bounded by `max_in_flight`), at most one per pod at a time; a
//! write's answer and later watch events update the record, and the record is looked at
//! again. Events are applied only if newer than what the record holds, so a watch event
//! that trails our own write does not make us repeat it. Timers (a run that ends, a
//! container start delay, a retry) sit in one heap.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::future::Future;
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, Preconditions};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use serde_json::json;
use tokio::sync::{Semaphore, mpsc};
use tokio::time::Instant;

use super::{Inner, VirtualNode};
use crate::config::{DEFAULT_MAX_IN_FLIGHT, FIELD_MANAGER};
use crate::error::status_code;
use crate::pod::lifecycle::{self, Action, Timeline};
use crate::pod::status::{self, Placement};

/// Messages from the node side.
#[derive(Debug)]
pub(super) enum Control {
    /// A node was registered: its already-bound pods must be found.
    NodeAdded(String),
    /// A stopped node runs again: look at its pods.
    NodeStarted(String),
    /// A node is gone from this process: forget its pods.
    NodeRemoved(String),
    /// Pods listed for a node added after the watch's initial list.
    Seed(Vec<Pod>),
}

/// What a finished write reports.
struct Done {
    key: String,
    uid: String,
    action: Action,
    result: Result<Option<Pod>, kube::Error>,
}

struct Record {
    pod: Pod,
    node: String,
    in_flight: bool,
    created: Option<SystemTime>,
    started: Option<SystemTime>,
}

fn key_of(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or(""),
        pod.metadata.name.as_deref().unwrap_or("")
    )
}

fn uid_of(pod: &Pod) -> String {
    pod.metadata.uid.clone().unwrap_or_default()
}

fn rv_of(pod: &Pod) -> u64 {
    pod.metadata
        .resource_version
        .as_deref()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn node_of(pod: &Pod) -> Option<&str> {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .filter(|n| !n.is_empty())
}

fn pod_ip_of(pod: &Pod) -> Option<Ipv4Addr> {
    pod.status.as_ref()?.pod_ip.as_deref()?.parse().ok()
}

fn host_network(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.host_network)
        .unwrap_or(false)
}

struct Driver {
    inner: Arc<Inner>,
    records: HashMap<String, Record>,
    timers: BinaryHeap<Reverse<(Instant, String)>>,
    done_tx: mpsc::UnboundedSender<Done>,
    control_tx: mpsc::UnboundedSender<Control>,
    permits: Arc<Semaphore>,
    /// Between a watch (re)start and its initial list's end: the keys listed so far, and
    /// nodes added meanwhile (listed on their own once it ends).
    init: Option<(HashSet<String>, Vec<String>)>,
    initialized: bool,
}

/// Runs the driver until shutdown.
pub(super) async fn run(inner: Arc<Inner>, mut control: mpsc::UnboundedReceiver<Control>) {
    let api: Api<Pod> = Api::all(inner.client.clone());
    let mut stream = runtime::lenient::watcher(
        api,
        watcher::Config::default().fields("spec.nodeName!="),
        None,
    )
    .default_backoff()
    .boxed();
    let (done_tx, mut done_rx) = mpsc::unbounded_channel();
    let max = inner
        .options
        .max_in_flight
        .unwrap_or(DEFAULT_MAX_IN_FLIGHT)
        .max(1);
    let mut shutdown = inner.shutdown.subscribe();
    // A shutdown sent before this task subscribed is no change to it: look first.
    if *shutdown.borrow() {
        return;
    }
    let mut d = Driver {
        control_tx: inner.control.clone(),
        inner,
        records: HashMap::new(),
        timers: BinaryHeap::new(),
        done_tx,
        permits: Arc::new(Semaphore::new(max)),
        init: None,
        initialized: false,
    };
    loop {
        let next_timer = d.timers.peek().map(|Reverse((at, _))| *at);
        tokio::select! {
            _ = shutdown.changed() => return,
            Some(c) = control.recv() => d.control(c),
            Some(done) = done_rx.recv() => d.done(done),
            ev = stream.next() => match ev {
                Some(Ok(ev)) => d.event(ev),
                Some(Err(e)) => tracing::warn!(error = %e, "pod watch failed; retrying"),
                None => return,
            },
            _ = tokio::time::sleep_until(next_timer.unwrap_or_else(Instant::now)), if next_timer.is_some() => d.fire(),
        }
    }
}

impl Driver {
    fn node(&self, name: &str) -> Option<VirtualNode> {
        self.inner.nodes.read().get(name).cloned()
    }

    fn control(&mut self, c: Control) {
        match c {
            Control::NodeAdded(name) => match &mut self.init {
                Some((_, pending)) => pending.push(name),
                None if self.initialized => self.list_node(name),
                // The initial list is yet to come and will hold the node's pods.
                None => {}
            },
            Control::NodeStarted(name) => {
                let keys: Vec<String> = self
                    .records
                    .iter()
                    .filter(|(_, r)| r.node == name)
                    .map(|(k, _)| k.clone())
                    .collect();
                for k in keys {
                    self.evaluate(&k);
                }
            }
            Control::NodeRemoved(name) => self.records.retain(|_, r| r.node != name),
            Control::Seed(pods) => {
                for p in pods {
                    self.apply(p);
                }
            }
        }
    }

    /// Lists the pods already bound to a node added after the initial list.
    fn list_node(&self, name: String) {
        let api: Api<Pod> = Api::all(self.inner.client.clone());
        let tx = self.control_tx.clone();
        tokio::spawn(async move {
            let lp = ListParams::default().fields(&format!("spec.nodeName={name}"));
            match api.list(&lp).await {
                Ok(list) => {
                    let _ = tx.send(Control::Seed(list.items));
                }
                Err(e) => {
                    tracing::warn!(node = %name, error = %e, "listing the node's pods failed")
                }
            }
        });
    }

    fn event(&mut self, ev: Event<Pod>) {
        match ev {
            Event::Init => {
                self.init = Some((HashSet::new(), Vec::new()));
            }
            Event::InitApply(pod) => {
                if let Some((seen, _)) = &mut self.init {
                    seen.insert(key_of(&pod));
                }
                self.apply(pod);
            }
            Event::InitDone => {
                if let Some((seen, pending)) = self.init.take() {
                    // Pods deleted while the watch was down.
                    let gone: Vec<String> = self
                        .records
                        .keys()
                        .filter(|k| !seen.contains(*k))
                        .cloned()
                        .collect();
                    for k in gone {
                        self.forget(&k);
                    }
                    for n in pending {
                        self.list_node(n);
                    }
                }
                self.initialized = true;
            }
            Event::Apply(pod) => self.apply(pod),
            Event::Delete(pod) => {
                let key = key_of(&pod);
                if self
                    .records
                    .get(&key)
                    .is_some_and(|r| uid_of(&r.pod) == uid_of(&pod))
                {
                    self.forget(&key);
                }
            }
        }
    }

    /// Drops a record and frees its pod's IP.
    fn forget(&mut self, key: &str) {
        if let Some(r) = self.records.remove(key)
            && let Some(n) = self.node(&r.node)
        {
            n.shared.ips.lock().release(&uid_of(&r.pod));
        }
    }

    /// Takes a pod seen in a watch event or a list.
    fn apply(&mut self, mut pod: Pod) {
        // The agent never reads managedFields; they are most of a pod's decoded size.
        pod.metadata.managed_fields = None;
        let key = key_of(&pod);
        let Some(node) = node_of(&pod).and_then(|n| self.node(n)) else {
            self.forget(&key);
            return;
        };
        let uid = uid_of(&pod);
        match self.records.get_mut(&key) {
            Some(r) if uid_of(&r.pod) == uid => {
                if rv_of(&pod) < rv_of(&r.pod) {
                    return;
                }
                r.pod = pod;
            }
            _ => {
                self.forget(&key);
                if let Some(ip) = pod_ip_of(&pod)
                    && lifecycle::stage(&pod) != lifecycle::Stage::Terminal
                {
                    node.shared.ips.lock().reserve(&uid, ip);
                }
                self.records.insert(
                    key.clone(),
                    Record {
                        node: node.name().to_string(),
                        pod,
                        in_flight: false,
                        created: None,
                        started: None,
                    },
                );
            }
        }
        self.evaluate(&key);
    }

    fn fire(&mut self) {
        let now = Instant::now();
        while let Some(Reverse((at, _))) = self.timers.peek() {
            if *at > now {
                break;
            }
            if let Some(Reverse((_, key))) = self.timers.pop() {
                self.evaluate(&key);
            }
        }
    }

    fn wake(&mut self, key: &str, after: Duration) {
        self.timers
            .push(Reverse((Instant::now() + after, key.to_string())));
    }

    /// Decides and starts the next step of one pod.
    fn evaluate(&mut self, key: &str) {
        let Some(r) = self.records.get(key) else {
            return;
        };
        if r.in_flight {
            return;
        }
        let Some(node) = self.node(&r.node) else {
            self.records.remove(key);
            return;
        };
        if !node.is_running() {
            return;
        }
        let timing = &self.inner.options.timing;
        let now = SystemTime::now();
        let action = lifecycle::next(
            &r.pod,
            &Timeline {
                now,
                created: r.created,
                started: r.started,
            },
            &timing.pacing(),
        );
        let host_ip = node.internal_ip();
        let current_ip = pod_ip_of(&r.pod);
        let pod = r.pod.clone();
        let ts = Time(Timestamp::now());
        let at = |pod_ip| Placement { host_ip, pod_ip };
        let status = match action {
            Action::Idle => return,
            Action::WaitUntil(t) => {
                let after = t.duration_since(now).unwrap_or(Duration::ZERO);
                self.wake(key, after);
                return;
            }
            Action::Delete => {
                self.delete(key, &pod, action);
                return;
            }
            Action::Create => status::creating(&pod, &at(None), &ts),
            Action::Initialize | Action::Start => {
                let ip = if host_network(&pod) {
                    Some(host_ip)
                } else {
                    node.shared.ips.lock().allocate(&uid_of(&pod))
                };
                let Some(ip) = ip else {
                    tracing::warn!(pod = key, node = node.name(), "no free pod IP on the node");
                    let retry = timing.retry_interval;
                    self.wake(key, retry);
                    return;
                };
                if action == Action::Start {
                    status::started(&pod, &at(Some(ip)), &ts)
                } else {
                    status::initialized(&pod, &at(Some(ip)), &ts)
                }
            }
            Action::Exit(exit) => status::exited(&pod, &at(current_ip), exit, &ts),
            Action::Crash => status::crashing(&pod, &at(current_ip), &ts),
            Action::Stop => status::stopped(&pod, &at(current_ip), &ts),
        };
        if matches!(action, Action::Exit(_) | Action::Stop) {
            // A finished pod's IP is free again (its status keeps showing it, as upstream).
            node.shared.ips.lock().release(&uid_of(&pod));
        }
        self.patch(
            key,
            &pod,
            action,
            json!({"metadata": {"uid": uid_of(&pod)}, "status": status}),
        );
    }

    /// Runs one write for a pod (`write` gets the pod's namespaced API, its name and UID),
    /// reporting its result back to the driver.
    fn spawn<F, Fut>(&mut self, key: &str, pod: &Pod, action: Action, write: F)
    where
        F: FnOnce(Api<Pod>, String, String) -> Fut + Send + 'static,
        Fut: Future<Output = Result<Option<Pod>, kube::Error>> + Send + 'static,
    {
        let Some(r) = self.records.get_mut(key) else {
            return;
        };
        r.in_flight = true;
        let api: Api<Pod> = Api::namespaced(
            self.inner.client.clone(),
            pod.metadata.namespace.as_deref().unwrap_or(""),
        );
        let name = pod.metadata.name.clone().unwrap_or_default();
        let (tx, permits, key, uid) = (
            self.done_tx.clone(),
            self.permits.clone(),
            key.to_string(),
            uid_of(pod),
        );
        tokio::spawn(async move {
            let _permit = permits.acquire_owned().await;
            let result = write(api, name, uid.clone()).await;
            let _ = tx.send(Done {
                key,
                uid,
                action,
                result,
            });
        });
    }

    /// Writes the pod's status (the UID in the patch is a precondition: a new pod of the
    /// same name is not touched).
    fn patch(&mut self, key: &str, pod: &Pod, action: Action, body: serde_json::Value) {
        self.spawn(key, pod, action, |api, name, _| async move {
            let pp = PatchParams {
                field_manager: Some(FIELD_MANAGER.to_string()),
                ..PatchParams::default()
            };
            api.patch_status(&name, &pp, &Patch::Merge(&body))
                .await
                .map(Some)
        });
    }

    /// Deletes the stopped pod with grace period 0, as the kubelet does.
    fn delete(&mut self, key: &str, pod: &Pod, action: Action) {
        self.spawn(key, pod, action, |api, name, uid| async move {
            let dp = DeleteParams {
                grace_period_seconds: Some(0),
                preconditions: Some(Preconditions {
                    uid: Some(uid),
                    resource_version: None,
                }),
                ..DeleteParams::default()
            };
            api.delete(&name, &dp).await.map(|r| r.left())
        });
    }

    fn done(&mut self, done: Done) {
        let Some(r) = self.records.get_mut(&done.key) else {
            return;
        };
        if uid_of(&r.pod) != done.uid {
            return;
        }
        r.in_flight = false;
        match done.result {
            Ok(pod) => {
                let now = SystemTime::now();
                match done.action {
                    Action::Create => r.created = Some(now),
                    Action::Start => r.started = Some(now),
                    _ => {}
                }
                if let Some(p) = pod
                    && rv_of(&p) >= rv_of(&r.pod)
                {
                    r.pod = p;
                }
                if done.action == Action::Delete {
                    // Gone, or waiting for finalizers: the watch tells which.
                    if !self.records.get(&done.key).is_some_and(|r| {
                        r.pod
                            .metadata
                            .finalizers
                            .as_ref()
                            .is_some_and(|f| !f.is_empty())
                    }) {
                        self.forget(&done.key);
                    }
                    return;
                }
                self.evaluate(&done.key);
            }
            Err(e) if status_code(&e) == Some(404) => self.forget(&done.key),
            Err(e) if status_code(&e) == Some(409) => {
                // Another pod of that name, or a concurrent change: the watch brings it.
                let retry = self.inner.options.timing.retry_interval;
                self.wake(&done.key, retry);
            }
            Err(e) => {
                tracing::warn!(pod = %done.key, error = %e, "pod write failed; retrying");
                let retry = self.inner.options.timing.retry_interval;
                self.wake(&done.key, retry);
            }
        }
    }
}
