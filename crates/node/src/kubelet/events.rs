//! Events the agent records about pods and its node, as the kubelet's recorder writes them:
//! core/v1 Events with source `kubelet` on the node, named `<object>.<hex nanoseconds>`, and
//! aggregated — the same reason and message about the same object (and container) raise the
//! count and `lastTimestamp` of the existing Event instead of creating another.
//!
//! Recording never blocks a pod worker: events go through a channel to one writer task;
//! when the API is unreachable they are dropped after one attempt, as upstream's broadcaster
//! drops what it cannot deliver.

use std::collections::{HashMap, VecDeque};

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio::sync::mpsc;

/// `Normal` or `Warning`.
pub const NORMAL: &str = "Normal";
pub const WARNING: &str = "Warning";

/// How many distinct events the aggregation remembers (upstream's LRU is 4096).
const REMEMBERED: usize = 4096;

#[derive(Debug, Clone)]
struct Record {
    object: ObjectReference,
    type_: &'static str,
    reason: String,
    message: String,
}

/// Records events. Clones share the writer.
#[derive(Clone, Debug)]
pub struct Recorder {
    tx: mpsc::UnboundedSender<Record>,
    node: String,
}

impl Recorder {
    /// A recorder writing through `client` as node `node`; the writer task ends when every
    /// clone is dropped.
    pub fn start(client: kube::Client, node: &str) -> Recorder {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(write_events(client, node.to_string(), rx));
        Recorder {
            tx,
            node: node.to_string(),
        }
    }

    /// A recorder that drops everything (tests of pure parts).
    pub fn disabled() -> Recorder {
        let (tx, _) = mpsc::unbounded_channel();
        Recorder {
            tx,
            node: String::new(),
        }
    }

    /// An event about `pod`, or about one of its containers when `field_path` is given
    /// (`spec.containers{web}`, `spec.initContainers{init}`).
    pub fn pod(
        &self,
        pod: &Pod,
        field_path: Option<String>,
        type_: &'static str,
        reason: &str,
        message: impl Into<String>,
    ) {
        let object = ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            name: pod.metadata.name.clone(),
            namespace: pod.metadata.namespace.clone(),
            uid: pod.metadata.uid.clone(),
            resource_version: pod.metadata.resource_version.clone(),
            field_path,
        };
        self.send(object, type_, reason, message.into());
    }

    /// An event about the node (`uid` is the Node's).
    pub fn node(
        &self,
        uid: Option<String>,
        type_: &'static str,
        reason: &str,
        message: impl Into<String>,
    ) {
        let object = ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Node".into()),
            name: Some(self.node.clone()),
            uid: uid.or_else(|| Some(self.node.clone())),
            ..ObjectReference::default()
        };
        self.send(object, type_, reason, message.into());
    }

    fn send(&self, object: ObjectReference, type_: &'static str, reason: &str, message: String) {
        let _ = self.tx.send(Record {
            object,
            type_,
            reason: reason.to_string(),
            message,
        });
    }
}

/// The field path of a container (`spec.containers{c}`).
pub fn container_path(pod: &Pod, container: &str) -> String {
    let init = pod
        .spec
        .as_ref()
        .and_then(|s| s.init_containers.as_ref())
        .is_some_and(|l| l.iter().any(|c| c.name == container));
    if init {
        format!("spec.initContainers{{{container}}}")
    } else {
        format!("spec.containers{{{container}}}")
    }
}

struct Seen {
    name: String,
    count: i32,
}

async fn write_events(client: kube::Client, node: String, mut rx: mpsc::UnboundedReceiver<Record>) {
    let mut seen: HashMap<String, Seen> = HashMap::new();
    let mut order: VecDeque<String> = VecDeque::new();
    while let Some(r) = rx.recv().await {
        // Node events go to `default`, as upstream's kubelet writes them.
        let namespace = r
            .object
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let key = format!(
            "{}/{}/{}/{}/{}/{}",
            r.object.uid.as_deref().unwrap_or(""),
            r.object.field_path.as_deref().unwrap_or(""),
            r.type_,
            r.reason,
            r.message,
            namespace
        );
        let api: Api<Event> = Api::namespaced(client.clone(), &namespace);
        let now = Time(Timestamp::now());
        if let Some(s) = seen.get_mut(&key) {
            let patch = json!({"count": s.count + 1, "lastTimestamp": now});
            if api
                .patch(&s.name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .is_ok()
            {
                s.count += 1;
                continue;
            }
            // Gone (events expire): write it anew.
            seen.remove(&key);
        }
        let object_name = r.object.name.clone().unwrap_or_default();
        let nanos = Timestamp::now().as_nanosecond();
        let name = format!("{object_name}.{nanos:x}");
        let ev = Event {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(namespace.clone()),
                ..ObjectMeta::default()
            },
            involved_object: r.object,
            reason: Some(r.reason),
            message: Some(r.message),
            type_: Some(r.type_.to_string()),
            source: Some(EventSource {
                component: Some("kubelet".into()),
                host: Some(node.clone()),
            }),
            first_timestamp: Some(now.clone()),
            last_timestamp: Some(now),
            count: Some(1),
            reporting_component: Some("kubelet".into()),
            reporting_instance: Some(node.clone()),
            ..Event::default()
        };
        match api.create(&PostParams::default(), &ev).await {
            Ok(_) => {
                seen.insert(key.clone(), Seen { name, count: 1 });
                order.push_back(key);
                while order.len() > REMEMBERED {
                    if let Some(old) = order.pop_front() {
                        seen.remove(&old);
                    }
                }
            }
            Err(e) => tracing::debug!(error = %e, "an event could not be written"),
        }
    }
}
