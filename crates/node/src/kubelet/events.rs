//! Events the agent records about pods and its node, as the kubelet's recorder writes them:
//! core/v1 Events with source `kubelet` on the node, through the shared
//! `runtime::events::Recorder` (aggregation into counts, upstream's spam filter, a bounded
//! buffer that never blocks a pod worker). Node events go to `default`, as upstream's kubelet
//! writes them.

use k8s_openapi::api::core::v1::{ObjectReference, Pod};

/// `Normal` or `Warning`.
pub const NORMAL: &str = "Normal";
pub const WARNING: &str = "Warning";

/// Records events. Clones share the writer.
#[derive(Clone, Debug)]
pub struct Recorder {
    inner: runtime::events::Recorder,
    node: String,
}

impl Recorder {
    /// A recorder writing through `client` as node `node`; the writer task ends when every
    /// clone is dropped.
    pub fn start(client: kube::Client, node: &str) -> Recorder {
        Recorder {
            inner: runtime::events::Recorder::start_on(client, "kubelet", node),
            node: node.to_string(),
        }
    }

    /// A recorder that drops everything (tests of pure parts).
    pub fn disabled() -> Recorder {
        Recorder {
            inner: runtime::events::Recorder::disabled(),
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
        self.inner.record("", object, type_, reason, message);
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
