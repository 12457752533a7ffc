//! The labels and annotations the kubelet puts on CRI sandboxes and containers, and reads
//! back to know whose they are: an agent that restarts finds its pods' containers by them
//! (`io.kubernetes.pod.uid`, `io.kubernetes.container.name`), and a container's spec hash
//! and restart count travel in its annotations, exactly as upstream's `kuberuntime` names
//! them, so tools that read them (crictl, log shippers) see what they expect.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::{Container, Pod};
use sha2::{Digest, Sha256};

pub const POD_NAME: &str = "io.kubernetes.pod.name";
pub const POD_NAMESPACE: &str = "io.kubernetes.pod.namespace";
pub const POD_UID: &str = "io.kubernetes.pod.uid";
pub const CONTAINER_NAME: &str = "io.kubernetes.container.name";
/// Marks sandboxes and containers the kubelet manages (upstream `io.kubernetes.managed`...
/// is not set by the kubelet itself; CRI's own label is `io.cri-containerd.kind`).
pub const CONTAINER_TYPE: &str = "io.kubernetes.container.type";

pub const CONTAINER_HASH: &str = "io.kubernetes.container.hash";
pub const CONTAINER_RESTART_COUNT: &str = "io.kubernetes.container.restartCount";
pub const TERMINATION_MESSAGE_PATH: &str = "io.kubernetes.container.terminationMessagePath";
pub const TERMINATION_MESSAGE_POLICY: &str = "io.kubernetes.container.terminationMessagePolicy";
pub const PRE_STOP_HANDLER: &str = "io.kubernetes.container.preStopHandler";
pub const CONTAINER_PORTS: &str = "io.kubernetes.container.ports";
pub const POD_DELETION_GRACE_PERIOD: &str = "io.kubernetes.pod.deletionGracePeriod";
pub const POD_TERMINATION_GRACE_PERIOD: &str = "io.kubernetes.pod.terminationGracePeriod";

/// The value of [`CONTAINER_TYPE`] for init containers (sidecars included) and regular ones.
pub const TYPE_INIT: &str = "init";
pub const TYPE_CONTAINER: &str = "container";

/// The sandbox's labels: the pod's own plus its name, namespace and UID.
pub fn sandbox_labels(pod: &Pod) -> HashMap<String, String> {
    let mut l: HashMap<String, String> = pod
        .metadata
        .labels
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    l.insert(POD_NAME.into(), name(pod).into());
    l.insert(POD_NAMESPACE.into(), namespace(pod).into());
    l.insert(POD_UID.into(), uid(pod).into());
    l
}

/// The sandbox's annotations: the pod's.
pub fn sandbox_annotations(pod: &Pod) -> HashMap<String, String> {
    pod.metadata
        .annotations
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// A container's labels: who it belongs to.
pub fn container_labels(pod: &Pod, container: &Container) -> HashMap<String, String> {
    HashMap::from([
        (POD_NAME.into(), name(pod).into()),
        (POD_NAMESPACE.into(), namespace(pod).into()),
        (POD_UID.into(), uid(pod).into()),
        (CONTAINER_NAME.into(), container.name.clone()),
    ])
}

/// A container's annotations: spec hash, restart count, termination message settings,
/// grace periods, the preStop handler and ports (JSON), and whether it is an init container.
pub fn container_annotations(
    pod: &Pod,
    container: &Container,
    restart_count: u32,
    init: bool,
) -> HashMap<String, String> {
    let mut a = HashMap::from([
        (CONTAINER_HASH.into(), container_hash(container)),
        (CONTAINER_RESTART_COUNT.into(), restart_count.to_string()),
        (
            TERMINATION_MESSAGE_PATH.into(),
            container
                .termination_message_path
                .clone()
                .unwrap_or_else(|| "/dev/termination-log".into()),
        ),
        (
            TERMINATION_MESSAGE_POLICY.into(),
            container
                .termination_message_policy
                .clone()
                .unwrap_or_else(|| "File".into()),
        ),
        (
            CONTAINER_TYPE.into(),
            if init { TYPE_INIT } else { TYPE_CONTAINER }.into(),
        ),
    ]);
    if let Some(g) = pod.metadata.deletion_grace_period_seconds {
        a.insert(POD_DELETION_GRACE_PERIOD.into(), g.to_string());
    }
    if let Some(g) = pod
        .spec
        .as_ref()
        .and_then(|s| s.termination_grace_period_seconds)
    {
        a.insert(POD_TERMINATION_GRACE_PERIOD.into(), g.to_string());
    }
    if let Some(p) = container
        .lifecycle
        .as_ref()
        .and_then(|l| l.pre_stop.as_ref())
        && let Ok(j) = serde_json::to_string(p)
    {
        a.insert(PRE_STOP_HANDLER.into(), j);
    }
    if let Some(ports) = container.ports.as_ref().filter(|p| !p.is_empty())
        && let Ok(j) = serde_json::to_string(ports)
    {
        a.insert(CONTAINER_PORTS.into(), j);
    }
    a
}

/// A hash of the container's spec without its resources (which may change in place): when
/// it differs from a running container's, the container is restarted with the new spec.
pub fn container_hash(container: &Container) -> String {
    let mut c = container.clone();
    c.resources = None;
    c.resize_policy = None;
    let json = serde_json::to_vec(&c).unwrap_or_default();
    Sha256::digest(&json)[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn name(pod: &Pod) -> &str {
    pod.metadata.name.as_deref().unwrap_or("")
}

fn namespace(pod: &Pod) -> &str {
    pod.metadata.namespace.as_deref().unwrap_or("default")
}

fn uid(pod: &Pod) -> &str {
    pod.metadata.uid.as_deref().unwrap_or("")
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ResourceRequirements;

    use super::*;

    #[test]
    fn the_hash_ignores_resources_and_follows_the_image() {
        let c = Container {
            name: "c".into(),
            image: Some("busybox:1".into()),
            ..Container::default()
        };
        let mut resized = c.clone();
        resized.resources = Some(ResourceRequirements::default());
        assert_eq!(container_hash(&c), container_hash(&resized));
        let mut other = c.clone();
        other.image = Some("busybox:2".into());
        assert_ne!(container_hash(&c), container_hash(&other));
        assert_eq!(container_hash(&c).len(), 16);
    }

    #[test]
    fn containers_carry_their_pod_identity() {
        let mut pod = Pod::default();
        pod.metadata.name = Some("web".into());
        pod.metadata.uid = Some("u1".into());
        let c = Container {
            name: "main".into(),
            ..Container::default()
        };
        let l = container_labels(&pod, &c);
        assert_eq!(l[POD_UID], "u1");
        assert_eq!(l[POD_NAMESPACE], "default");
        assert_eq!(l[CONTAINER_NAME], "main");
        let a = container_annotations(&pod, &c, 3, false);
        assert_eq!(a[CONTAINER_RESTART_COUNT], "3");
        assert_eq!(a[TERMINATION_MESSAGE_PATH], "/dev/termination-log");
        assert_eq!(a[CONTAINER_TYPE], "container");
    }
}
