//! The event recorder: `FailedScheduling`, `Scheduled` and `Preempted` events about pods.
//!
//! Events are core/v1 Events, the API both `kubectl get events` and `kubectl describe pod`
//! (1.27–1.33) read; the server stores core/v1 and events.k8s.io/v1 events apart, so this is
//! the one every kubectl shows. They carry the new-style fields upstream's events.k8s.io
//! recorder sets (`eventTime`, `reportingComponent: default-scheduler`, `reportingInstance`,
//! `action`) and the legacy ones (`source`, timestamps, `count`). Recording never blocks
//! scheduling: events go through a bounded buffer written by one task with a few requests in
//! flight, and are dropped when the buffer is full (as upstream's broadcaster drops them).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use tokio::sync::mpsc;

use crate::client::ClusterClients as Clients;
use crate::podinfo::{DEFAULT_SCHEDULER, PodInfo};

/// Upstream's limit on an event's note (`NoteLengthLimit`).
pub const NOTE_LENGTH_LIMIT: usize = runtime::events::MESSAGE_LIMIT;
/// Events waiting to be written before new ones are dropped.
pub const BUFFER: usize = 4096;
/// Event writes in flight at once.
pub const CONCURRENCY: usize = 16;

/// One event to write about a pod.
#[derive(Debug, Clone)]
pub struct PodEvent {
    pub pod: Arc<PodInfo>,
    /// `Normal` or `Warning`.
    pub type_: &'static str,
    pub reason: &'static str,
    pub action: &'static str,
    pub message: String,
}

/// Cuts a message to the event note limit the way upstream does (` ...` at the end).
pub fn truncate(message: &str) -> String {
    runtime::events::truncate(message.to_string())
}

/// Writes events in the background.
#[derive(Clone)]
pub struct Recorder {
    tx: mpsc::Sender<PodEvent>,
    dropped: Arc<AtomicU64>,
}

impl Recorder {
    /// Starts the writer task; it ends when every `Recorder` clone is gone.
    pub fn start(clients: Clients, instance: String) -> Recorder {
        let (tx, rx) = mpsc::channel::<PodEvent>(BUFFER);
        let instance: Arc<str> = instance.into();
        let events =
            futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|e| (e, rx)) });
        tokio::spawn(events.for_each_concurrent(CONCURRENCY, move |e| {
            let clients = clients.clone();
            let instance = instance.clone();
            async move {
                if let Err(err) = write(&clients, &instance, e).await {
                    tracing::debug!(error = %err, "failed to record an event");
                }
            }
        }));
        Recorder {
            tx,
            dropped: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Queues an event; drops it when the buffer is full.
    pub fn record(&self, event: PodEvent) {
        if self.tx.try_send(event).is_err() {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// How many events were dropped.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

static SEQ: AtomicU64 = AtomicU64::new(0);

/// The Event object for `e`.
pub fn event_object(instance: &str, e: &PodEvent, now: Timestamp) -> Event {
    let pod = &e.pod;
    let seq = SEQ.fetch_add(1, Ordering::Relaxed);
    let nanos = now.as_nanosecond();
    Event {
        metadata: ObjectMeta {
            name: Some(format!("{}.{:x}", pod.key.name, nanos + i128::from(seq))),
            namespace: Some(pod.key.namespace.clone()),
            ..Default::default()
        },
        involved_object: ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            name: Some(pod.key.name.clone()),
            namespace: Some(pod.key.namespace.clone()),
            uid: Some(pod.uid.clone()).filter(|u| !u.is_empty()),
            resource_version: Some(pod.resource_version.clone()).filter(|r| !r.is_empty()),
            ..Default::default()
        },
        reason: Some(e.reason.into()),
        message: Some(truncate(&e.message)),
        type_: Some(e.type_.into()),
        action: Some(e.action.into()),
        source: Some(EventSource {
            component: Some(DEFAULT_SCHEDULER.into()),
            host: None,
        }),
        first_timestamp: Some(Time(now)),
        last_timestamp: Some(Time(now)),
        event_time: Some(MicroTime(now)),
        count: Some(1),
        reporting_component: Some(DEFAULT_SCHEDULER.into()),
        reporting_instance: Some(instance.into()),
        ..Default::default()
    }
}

async fn write(clients: &Clients, instance: &str, e: PodEvent) -> crate::Result<()> {
    let client = clients.cluster(&e.pod.key.cluster)?;
    let api: Api<Event> = Api::namespaced(client, &e.pod.key.namespace);
    api.create(
        &PostParams::default(),
        &event_object(instance, &e, Timestamp::now()),
    )
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn long_messages_are_cut_to_the_note_limit_with_an_ellipsis() {
        let m = "x".repeat(2000);
        let t = truncate(&m);
        assert_eq!(t.len(), NOTE_LENGTH_LIMIT);
        assert!(t.ends_with(" ..."));
        assert_eq!(truncate("short"), "short");
    }

    #[test]
    fn the_event_names_the_pod_and_the_scheduler() {
        let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "d", "uid": "u1", "resourceVersion": "7"},
            "spec": {"containers": [{"name": "c"}]}
        }))
        .unwrap();
        let e = PodEvent {
            pod: Arc::new(PodInfo::new(&Arc::from("a"), &pod)),
            type_: "Warning",
            reason: "FailedScheduling",
            action: "Scheduling",
            message: "0/1 nodes are available: 1 Too many pods.".into(),
        };
        let ev = serde_json::to_value(event_object("default-scheduler-x", &e, Timestamp::now()))
            .unwrap();
        assert_eq!(ev["involvedObject"]["uid"], "u1");
        assert_eq!(ev["involvedObject"]["namespace"], "d");
        assert_eq!(ev["metadata"]["namespace"], "d");
        assert_eq!(ev["reportingComponent"], "default-scheduler");
        assert_eq!(ev["source"]["component"], "default-scheduler");
        assert_eq!(ev["type"], "Warning");
        assert!(ev["metadata"]["name"].as_str().unwrap().starts_with("web."));
    }
}
