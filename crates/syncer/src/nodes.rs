//! The host's nodes, mirrored into each shared cluster: the same name, labels, taints and
//! status (the tenant's scheduler binds pods to them; the host pod then runs on that node).
//!
//! A mirrored node carries [`MIRRORED_ANNOTATION`]: no kubelet of the tenant heartbeats it,
//! so the tenant's node lifecycle controller does not turn its silence into `Unknown`, and its
//! status is written only when something other than heartbeat times changed. Mirroring costs
//! writes per change of a host node, not per heartbeat, whatever the number of clusters.

use std::collections::HashSet;

use k8s_openapi::api::core::v1::{Node, Taint};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use runtime::error::{Result, ignore_not_found};
use runtime::informer::ObjectKey;
use runtime::queue::Action;
use serde_json::{Value, json};

use crate::{Syncer, names};

/// The annotation of a mirrored node (the tenant's node lifecycle controller reads it).
pub const MIRRORED_ANNOTATION: &str = "node.matryoshka.dev/mirrored-from-host";

/// Taints the tenant's node lifecycle controller owns (kept when the host's are copied).
const CONTROLLER_TAINTS: &[&str] = &[
    "node.kubernetes.io/not-ready",
    "node.kubernetes.io/unreachable",
];

/// The in-memory annotation standing for a tenant node's status in the syncer's store (the
/// status itself is not kept: a digest is all the comparison needs).
pub const STATUS_DIGEST: &str = "syncer.matryoshka.dev/status-digest";

/// A digest of a node status without its heartbeat times.
pub fn status_digest(status: &Value) -> String {
    value_digest(&without_heartbeats(status))
}

/// A digest of a JSON value (its keys in order: equal values, equal digests).
pub fn value_digest(value: &Value) -> String {
    use sha2::{Digest, Sha256};
    let bytes = serde_json::to_vec(value).unwrap_or_default();
    Sha256::digest(&bytes)
        .iter()
        .take(16)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A tenant node as the syncer's store keeps it: its status replaced by [`STATUS_DIGEST`].
pub fn slim_tenant_node(n: &mut Node) {
    n.metadata.managed_fields = None;
    let status = serde_json::to_value(n.status.take().unwrap_or_default()).unwrap_or_default();
    n.metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(STATUS_DIGEST.into(), status_digest(&status));
}

/// A node status without its conditions' heartbeat times (what is compared).
fn without_heartbeats(status: &Value) -> Value {
    let mut s = status.clone();
    if let Some(Value::Array(conds)) = s.get_mut("conditions") {
        for c in conds.iter_mut() {
            if let Some(o) = c.as_object_mut() {
                o.remove("lastHeartbeatTime");
            }
        }
    }
    s
}

impl Syncer {
    /// Mirrors the host's nodes into a shared cluster.
    pub(crate) async fn nodes(&self, lc: &str) -> Result<Action> {
        let Some(shared) = self.shared(lc) else {
            return Ok(Action::AwaitChange);
        };
        let host = self.host(&shared)?;
        let tenant = self.clients.cluster(lc)?;
        let api: Api<Node> = Api::all(tenant.clone());
        let mut present = HashSet::new();
        for (_, hn) in host.nodes.entries() {
            let name = hn.name_any();
            present.insert(name.clone());
            let mut labels = hn.metadata.labels.clone().unwrap_or_default();
            labels.insert(names::MANAGED_BY.into(), shared.name.clone());
            let host_spec = hn.spec.clone().unwrap_or_default();
            let existing = self.tenant_nodes.get(&ObjectKey::new(lc, "", &name));
            let mut taints: Vec<Taint> = host_spec.taints.clone().unwrap_or_default();
            if let Some(t) = &existing {
                let theirs = t
                    .spec
                    .as_ref()
                    .and_then(|s| s.taints.clone())
                    .unwrap_or_default();
                taints.extend(
                    theirs
                        .into_iter()
                        .filter(|t| CONTROLLER_TAINTS.contains(&t.key.as_str())),
                );
            }
            let spec = json!({
                "taints": if taints.is_empty() { None } else { Some(taints) },
                "unschedulable": host_spec.unschedulable,
                "providerID": host_spec.provider_id,
            });
            let mut status =
                serde_json::to_value(hn.status.clone().unwrap_or_default()).unwrap_or_default();
            if let Some(s) = status.as_object_mut() {
                // vcluster's clearImageStatus: the host's image list is the host's.
                s.remove("images");
            }
            // The node's kubelet, to the tenant cluster, is this cluster's proxy.
            let proxy_port = self.proxy_ports.read().get(lc).copied();
            if let (Some(port), Some(address)) = (proxy_port, self.proxy_address()) {
                status["daemonEndpoints"] = json!({"kubeletEndpoint": {"Port": port}});
                status["addresses"] = json!([
                    {"type": "InternalIP", "address": address.to_string()},
                    {"type": "Hostname", "address": name},
                ]);
            }
            let metadata = json!({"labels": labels, "annotations": {MIRRORED_ANNOTATION: "true"}});
            match existing {
                None => {
                    let node: Node = serde_json::from_value(json!({
                        "metadata": {"name": name, "labels": labels, "annotations": metadata["annotations"]},
                        "spec": spec,
                    }))?;
                    match api.create(&PostParams::default(), &node).await {
                        Ok(_) => {}
                        Err(kube::Error::Api(e)) if e.code == 409 => {}
                        Err(e) => return Err(e.into()),
                    }
                    api.patch_status(
                        &name,
                        &PatchParams::default(),
                        &Patch::Merge(&json!({ "status": status })),
                    )
                    .await?;
                }
                Some(t) => {
                    let t_spec = t.spec.clone().unwrap_or_default();
                    let marked = t.annotations().contains_key(MIRRORED_ANNOTATION);
                    if t.metadata.labels.as_ref() != Some(&labels)
                        || !marked
                        || json!({"taints": t_spec.taints, "unschedulable": t_spec.unschedulable, "providerID": t_spec.provider_id})
                            != spec
                    {
                        api.patch(
                            &name,
                            &PatchParams::default(),
                            &Patch::Merge(&json!({"metadata": metadata, "spec": spec})),
                        )
                        .await?;
                    }
                    let current = t.annotations().get(STATUS_DIGEST);
                    if current != Some(&status_digest(&status)) {
                        api.patch_status(
                            &name,
                            &PatchParams::default(),
                            &Patch::Merge(&json!({ "status": status })),
                        )
                        .await?;
                    }
                }
            }
        }
        for (key, t) in self.tenant_nodes.list_cluster(lc) {
            let ours = t.labels().get(names::MANAGED_BY) == Some(&shared.name);
            if ours && !present.contains(&key.name) {
                ignore_not_found(api.delete(&key.name, &DeleteParams::default()).await)?;
            }
        }
        Ok(Action::AwaitChange)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heartbeat_times_alone_are_no_change() {
        let a =
            json!({"conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": "1"}]});
        let b =
            json!({"conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": "2"}]});
        let c =
            json!({"conditions": [{"type": "Ready", "status": "False", "lastHeartbeatTime": "2"}]});
        assert_eq!(without_heartbeats(&a), without_heartbeats(&b));
        assert_ne!(without_heartbeats(&a), without_heartbeats(&c));
        assert_eq!(status_digest(&a), status_digest(&b));
        assert_ne!(status_digest(&a), status_digest(&c));
    }

    #[test]
    fn the_store_keeps_a_digest_of_a_nodes_status_not_the_status() {
        let status = json!({"conditions": [{"type": "Ready", "status": "True",
            "lastHeartbeatTime": "2026-12-06T10:00:00Z"}]});
        let mut n: Node =
            serde_json::from_value(json!({"metadata": {"name": "n1"}, "status": status}))
                .expect("node");
        slim_tenant_node(&mut n);
        assert!(n.status.is_none());
        assert_eq!(n.annotations()[STATUS_DIGEST], status_digest(&status));
    }
}
