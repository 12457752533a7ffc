//! The host's nodes and their Leases, mirrored into each shared cluster.

use std::collections::HashSet;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use runtime::client::ROOT;
use runtime::error::{Result, ignore_not_found};
use runtime::informer::ObjectKey;
use runtime::queue::Action;
use serde_json::json;

use crate::{LEASE_NAMESPACE, Syncer, names, translate};

impl Syncer {
    /// Mirrors the host's nodes (and their Leases) into a shared cluster.
    pub(crate) async fn nodes(&self, lc: &str) -> Result<Action> {
        let Some(shared) = self.shared(lc) else {
            return Ok(Action::AwaitChange);
        };
        let tenant = self.clients.cluster(lc)?;
        let api: Api<Node> = Api::all(tenant.clone());
        let mut present = HashSet::new();
        for (_, hn) in self.host_nodes.entries() {
            let name = hn.name_any();
            present.insert(name.clone());
            let mut labels = hn.metadata.labels.clone().unwrap_or_default();
            labels.insert(names::MANAGED_BY.into(), shared.name.clone());
            let host_spec = hn.spec.clone().unwrap_or_default();
            let spec = json!({
                "taints": host_spec.taints,
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
            if let (Some(port), Some(address)) = (proxy_port, self.options.address) {
                status["daemonEndpoints"] = json!({"kubeletEndpoint": {"Port": port}});
                status["addresses"] = json!([
                    {"type": "InternalIP", "address": address.to_string()},
                    {"type": "Hostname", "address": name},
                ]);
            }
            let existing = self.tenant_nodes.get(&ObjectKey::new(lc, "", &name));
            match existing {
                None => {
                    let node: Node = serde_json::from_value(json!({
                        "metadata": {"name": name, "labels": labels},
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
                    if t.metadata.labels.as_ref() != Some(&labels)
                        || json!({"taints": t_spec.taints, "unschedulable": t_spec.unschedulable, "providerID": t_spec.provider_id})
                            != spec
                    {
                        api.patch(
                            &name,
                            &PatchParams::default(),
                            &Patch::Merge(&json!({"metadata": {"labels": labels}, "spec": spec})),
                        )
                        .await?;
                    }
                    let current = serde_json::to_value(t.status.clone().unwrap_or_default())
                        .unwrap_or_default();
                    if let Some(patch) = translate::status_patch(&current, &status) {
                        api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
                            .await?;
                    }
                }
            }
            self.mirror_lease(lc, &tenant, &name).await?;
        }
        for (key, t) in self.tenant_nodes.list_cluster(lc) {
            let ours = t.labels().get(names::MANAGED_BY) == Some(&shared.name);
            if ours && !present.contains(&key.name) {
                ignore_not_found(api.delete(&key.name, &DeleteParams::default()).await)?;
                self.leases
                    .lock()
                    .remove(&(lc.to_string(), key.name.clone()));
            }
        }
        Ok(Action::AwaitChange)
    }

    /// Copies a host node's Lease renewal into the tenant cluster.
    pub(crate) async fn mirror_lease(
        &self,
        lc: &str,
        tenant: &kube::Client,
        node: &str,
    ) -> Result<()> {
        let Some(hl) = self
            .host_leases
            .get(&ObjectKey::new(ROOT, LEASE_NAMESPACE, node))
        else {
            return Ok(());
        };
        let spec = hl.spec.clone().unwrap_or_default();
        let renew = spec
            .renew_time
            .as_ref()
            .map(|t| t.0.to_string())
            .unwrap_or_default();
        let key = (lc.to_string(), node.to_string());
        if self.leases.lock().get(&key) == Some(&renew) {
            return Ok(());
        }
        let api: Api<Lease> = Api::namespaced(tenant.clone(), LEASE_NAMESPACE);
        let body = json!({"spec": {
            "holderIdentity": spec.holder_identity,
            "leaseDurationSeconds": spec.lease_duration_seconds,
            "renewTime": spec.renew_time,
        }});
        match api
            .patch(node, &PatchParams::default(), &Patch::Merge(&body))
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {
                let lease: Lease = serde_json::from_value(json!({
                    "metadata": {"name": node, "namespace": LEASE_NAMESPACE},
                    "spec": body["spec"],
                }))?;
                match api.create(&PostParams::default(), &lease).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(e)) if e.code == 409 => {}
                    Err(e) => return Err(e.into()),
                }
            }
            Err(e) => return Err(e.into()),
        }
        self.leases.lock().insert(key, renew);
        Ok(())
    }
}
