//! The cloud controller of the workload clusters: what cloud-provider-kubevirt does for a
//! Cozystack tenant cluster (spec: capi-kubevirt.md §4), for this platform's machines.
//!
//! **Load balancers.** A `type: LoadBalancer` Service of a workload cluster becomes an infra
//! Service in the namespace of its Cluster in the root cluster, named `a` + the tenant
//! Service's UID without dashes, cut at 32 characters, labelled with the tenant Service's
//! name and namespace and the Cluster's name, with the tenant's annotations,
//! `externalTrafficPolicy`, `loadBalancerIP` and `loadBalancerSourceRanges`, and one port per
//! tenant port whose `targetPort` is the tenant port's NodePort. It is selectorless; its
//! EndpointSlices (managed here, as the kubevirt EPS controller does) list the workload
//! cluster's Ready nodes, or with `externalTrafficPolicy: Local` only the nodes that hold a
//! ready endpoint of the tenant Service. The root cluster's load balancer gives it an address;
//! that address is copied to the tenant Service's `status.loadBalancer`. The tenant Service
//! carries upstream's `service.kubernetes.io/load-balancer-cleanup` finalizer until its infra
//! Service is gone. `externalIPs` are not copied: in the root cluster they would capture
//! the platform's own traffic.
//!
//! **The proxied ingress.** The `ingressNginx` addon's controller Service exposed `Proxied`
//! (`ingress-nginx/ingress-nginx-controller`, NodePorts 30000 and 30001) gets the seed's
//! management-side Service instead: `<cluster>-ingress-nginx`, `ClusterIP`, ports 80 and 443
//! leading to those NodePorts on the nodes of role `ingress-nginx`, with its EndpointSlices
//! written the same way.
//!
//! **Node lifecycle.** A Node of a workload cluster whose providerID names one of this
//! platform's machines (`process://`, `virtual://`) is deleted once it is not Ready and its
//! infrastructure machine no longer exists (the cloud node-lifecycle controller's
//! `InstanceExists` = false).

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use runtime::client::ROOT;
use runtime::error::{Result, ignore_not_found};
use runtime::informer::ObjectKey;
use runtime::queue::Action;
use serde_json::{Value, json};

use crate::{Ctx, names};

pub const TENANT_SERVICE_NAME_LABEL: &str = "cluster.x-k8s.io/tenant-service-name";
pub const TENANT_SERVICE_NAMESPACE_LABEL: &str = "cluster.x-k8s.io/tenant-service-namespace";
/// Upstream's service controller finalizer on load balancer Services.
pub const LB_CLEANUP_FINALIZER: &str = "service.kubernetes.io/load-balancer-cleanup";
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";
pub const MANAGED_BY_LABEL: &str = "endpointslice.kubernetes.io/managed-by";
/// The manager of the infra Services' EndpointSlices.
pub const MANAGED_BY: &str = "matryoshka-cloud-controller";
/// Nodes with this label take no load balancer traffic (upstream's service controller).
pub const EXCLUDE_LB_LABEL: &str = "node.kubernetes.io/exclude-from-external-load-balancers";
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// The infra Service's name for a tenant Service's UID (cloud-provider's default).
pub fn infra_service_name(uid: &str) -> String {
    format!("a{}", uid.replace('-', ""))
        .chars()
        .take(32)
        .collect()
}

pub(crate) fn is_load_balancer(svc: &Service) -> bool {
    svc.spec.as_ref().and_then(|s| s.type_.as_deref()) == Some("LoadBalancer")
}

/// The tenant's ingress controller Service of the `ingressNginx` addon exposed `Proxied`.
pub const PROXIED_NAMESPACE: &str = "ingress-nginx";
pub const PROXIED_NAME: &str = "ingress-nginx-controller";
/// The nodes the proxied ingress's traffic goes to (where the controller runs).
pub const INGRESS_ROLE_LABEL: &str = "node-role.kubernetes.io/ingress-nginx";

/// Whether `svc` is the `Proxied` ingress controller's NodePort Service, which gets a
/// ClusterIP Service `<cluster>-ingress-nginx` in the Cluster's namespace (the seed's
/// management-side Service) leading to its NodePorts on the nodes of role `ingress-nginx`.
pub(crate) fn is_proxied_ingress(key: &ObjectKey, svc: &Service) -> bool {
    key.namespace == PROXIED_NAMESPACE
        && key.name == PROXIED_NAME
        && svc.spec.as_ref().and_then(|s| s.type_.as_deref()) == Some("NodePort")
}

/// Whether a workload cluster's Service has an infra Service.
pub(crate) fn exposed(key: &ObjectKey, svc: &Service) -> bool {
    is_load_balancer(svc) || is_proxied_ingress(key, svc)
}

/// The proxied ingress's infra Service name (`<cluster>-ingress-nginx`, the seed's).
pub fn proxied_service_name(cluster: &str) -> String {
    format!("{cluster}-ingress-nginx")
}

/// Whether this controller serves `svc` (a load balancer without another implementation's
/// class, not being deleted).
fn served(svc: &Service) -> bool {
    is_load_balancer(svc)
        && svc
            .spec
            .as_ref()
            .and_then(|s| s.load_balancer_class.as_deref())
            .unwrap_or("")
            .is_empty()
        && svc.metadata.deletion_timestamp.is_none()
}

fn has_finalizer(svc: &Service) -> bool {
    svc.metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == LB_CLEANUP_FINALIZER)
}

fn label<'a>(meta: &'a kube::api::ObjectMeta, key: &str) -> Option<&'a str> {
    meta.labels.as_ref()?.get(key).map(String::as_str)
}

fn ingress_of(svc: &Service) -> Value {
    let ing = svc
        .status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.clone())
        .unwrap_or_default();
    serde_json::to_value(ing).unwrap_or(Value::Null)
}

fn node_ready(n: &Node) -> bool {
    n.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
        .is_some_and(|c| c.status == "True")
}

fn internal_ips(n: &Node) -> Vec<IpAddr> {
    n.status
        .as_ref()
        .and_then(|s| s.addresses.as_ref())
        .map(|a| {
            a.iter()
                .filter(|a| a.type_ == "InternalIP")
                .filter_map(|a| a.address.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Takes a load balancer's address and finalizer off a tenant Service that is no longer one.
async fn release_tenant(tenant_api: &Api<Service>, key: &ObjectKey, svc: &Service) -> Result<()> {
    if !is_load_balancer(svc) && ingress_of(svc).as_array().is_some_and(|a| !a.is_empty()) {
        let patch = json!({"status": {"loadBalancer": {"ingress": null}}});
        ignore_not_found(
            tenant_api
                .patch_status(&key.name, &PatchParams::default(), &Patch::Merge(&patch))
                .await,
        )?;
    }
    if has_finalizer(svc) {
        crate::set_finalizer(tenant_api, svc, LB_CLEANUP_FINALIZER, false).await?;
    }
    Ok(())
}

impl Ctx {
    /// The infra Services of a tenant Service (normally one; more only after the tenant
    /// Service was recreated under its name).
    fn infra_services(
        &self,
        namespace: &str,
        cluster: &str,
        tenant: &ObjectKey,
    ) -> Vec<Arc<Service>> {
        self.services
            .list_namespace(ROOT, namespace)
            .into_iter()
            .filter(|s| {
                label(&s.metadata, names::CLUSTER_NAME_LABEL) == Some(cluster)
                    && label(&s.metadata, TENANT_SERVICE_NAME_LABEL) == Some(tenant.name.as_str())
                    && label(&s.metadata, TENANT_SERVICE_NAMESPACE_LABEL)
                        == Some(tenant.namespace.as_str())
            })
            .collect()
    }

    /// The names of the workload cluster's nodes that take the Service's traffic.
    fn lb_nodes(&self, key: &ObjectKey, local: bool) -> Vec<Arc<Node>> {
        let nodes = self.nodes.list_cluster(key.cluster.as_str());
        let eligible = |n: &Node| {
            node_ready(n)
                && n.metadata.deletion_timestamp.is_none()
                && label(&n.metadata, EXCLUDE_LB_LABEL).is_none()
        };
        if !local {
            return nodes
                .into_iter()
                .map(|(_, n)| n)
                .filter(|n| eligible(n))
                .collect();
        }
        let mut holding = std::collections::BTreeSet::new();
        for slice in self
            .slices
            .list_namespace(key.cluster.as_str(), &key.namespace)
        {
            if label(&slice.metadata, SERVICE_NAME_LABEL) != Some(key.name.as_str()) {
                continue;
            }
            for ep in &slice.endpoints {
                let ready = ep.conditions.as_ref().and_then(|c| c.ready).unwrap_or(true);
                if let (true, Some(n)) = (ready, &ep.node_name) {
                    holding.insert(n.clone());
                }
            }
        }
        nodes
            .into_iter()
            .map(|(_, n)| n)
            .filter(|n| eligible(n) && holding.contains(n.metadata.name.as_deref().unwrap_or("")))
            .collect()
    }

    /// Reconciles a Service of a workload cluster with its infra Service.
    pub async fn reconcile_service(&self, key: ObjectKey) -> Result<Action> {
        if key.cluster.as_str() == ROOT {
            return Ok(Action::AwaitChange);
        }
        let Some(capi) = self.cluster_for_workload(key.cluster.as_str()) else {
            return Ok(Action::AwaitChange);
        };
        let infra_ns = capi.metadata.namespace.clone().unwrap_or_default();
        let cluster_name = capi.metadata.name.clone().unwrap_or_default();
        // A Cluster being deleted gets no new load balancers (its deletion removes them).
        let svc = self
            .services
            .get(&key)
            .filter(|_| capi.metadata.deletion_timestamp.is_none());
        let existing = self.infra_services(&infra_ns, &cluster_name, &key);
        let tenant_api: Api<Service> =
            Api::namespaced(self.clients.cluster(key.cluster.as_str())?, &key.namespace);
        let root_api: Api<Service> = Api::namespaced(self.root()?, &infra_ns);
        if let Some(svc) = svc
            .as_ref()
            .filter(|s| is_proxied_ingress(&key, s) && s.metadata.deletion_timestamp.is_none())
        {
            let infra_name = proxied_service_name(&cluster_name);
            let mut desired =
                self.desired_infra_service(svc, &key, &infra_name, &infra_ns, &cluster_name);
            desired["spec"] = json!({"type": "ClusterIP", "ports": desired["spec"]["ports"]});
            let infra = self
                .ensure_infra_service(&key, &root_api, &existing, &infra_name, desired)
                .await?;
            self.ensure_infra_slices(svc, &key, &infra, &infra_ns, Some(INGRESS_ROLE_LABEL))
                .await?;
            // What it had as a load balancer goes.
            release_tenant(&tenant_api, &key, svc).await?;
            return Ok(Action::AwaitChange);
        }
        let Some(svc) = svc.filter(|s| served(s)) else {
            for infra in &existing {
                let name = infra.metadata.name.as_deref().unwrap_or("");
                ignore_not_found(root_api.delete(name, &DeleteParams::default()).await)?;
                tracing::info!(service = %key, infra = name, "infra load balancer deleted");
            }
            if let Some(svc) = self.services.get(&key) {
                release_tenant(&tenant_api, &key, &svc).await?;
            }
            return Ok(Action::AwaitChange);
        };
        if !has_finalizer(&svc) {
            crate::set_finalizer(&tenant_api, &*svc, LB_CLEANUP_FINALIZER, true).await?;
        }
        let uid = svc.metadata.uid.clone().unwrap_or_default();
        let infra_name = infra_service_name(&uid);
        let desired = self.desired_infra_service(&svc, &key, &infra_name, &infra_ns, &cluster_name);
        let infra = self
            .ensure_infra_service(&key, &root_api, &existing, &infra_name, desired)
            .await?;
        self.ensure_infra_slices(&svc, &key, &infra, &infra_ns, None)
            .await?;
        // The address the root cluster's load balancer gave, back to the tenant.
        let want = ingress_of(&infra);
        if ingress_of(&svc) != want {
            let ingress = if want.as_array().is_some_and(|a| a.is_empty()) {
                Value::Null
            } else {
                want
            };
            let patch = json!({"status": {"loadBalancer": {"ingress": ingress}}});
            tenant_api
                .patch_status(&key.name, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
        }
        Ok(Action::AwaitChange)
    }

    /// Creates or updates the infra Service `infra_name` to `desired`; deletes the others of
    /// the tenant Service (a tenant Service recreated under its name, or exposed another way,
    /// leaves an older one behind).
    async fn ensure_infra_service(
        &self,
        key: &ObjectKey,
        root_api: &Api<Service>,
        existing: &[Arc<Service>],
        infra_name: &str,
        desired: Value,
    ) -> Result<Service> {
        for old in existing
            .iter()
            .filter(|s| s.metadata.name.as_deref() != Some(infra_name))
        {
            let name = old.metadata.name.as_deref().unwrap_or("");
            ignore_not_found(root_api.delete(name, &DeleteParams::default()).await)?;
        }
        let current = existing
            .iter()
            .find(|s| s.metadata.name.as_deref() == Some(infra_name))
            .cloned();
        Ok(match current {
            None => {
                let obj: Service = serde_json::from_value(desired)?;
                let created = root_api.create(&PostParams::default(), &obj).await?;
                tracing::info!(service = %key, infra = %infra_name, "infra Service created");
                created
            }
            Some(cur) => match infra_patch(&cur, &desired) {
                Some(patch) => {
                    root_api
                        .patch(infra_name, &PatchParams::default(), &Patch::Merge(&patch))
                        .await?
                }
                None => (*cur).clone(),
            },
        })
    }

    fn desired_infra_service(
        &self,
        svc: &Service,
        key: &ObjectKey,
        infra_name: &str,
        infra_ns: &str,
        cluster_name: &str,
    ) -> Value {
        let spec = svc.spec.clone().unwrap_or_default();
        let ports: Vec<Value> = spec
            .ports
            .iter()
            .flatten()
            .filter_map(|p| {
                let node_port = p.node_port?;
                let mut port = json!({
                    "protocol": p.protocol.clone().unwrap_or_else(|| "TCP".into()),
                    "port": p.port,
                    "targetPort": node_port,
                });
                if let Some(name) = p.name.as_deref().filter(|n| !n.is_empty()) {
                    port["name"] = json!(name);
                }
                if let Some(a) = p.app_protocol.as_deref() {
                    port["appProtocol"] = json!(a);
                }
                Some(port)
            })
            .collect();
        let annotations: BTreeMap<String, String> = svc
            .metadata
            .annotations
            .clone()
            .unwrap_or_default()
            .into_iter()
            .filter(|(k, _)| k != LAST_APPLIED)
            .collect();
        let mut spec_out = json!({
            "type": "LoadBalancer",
            "ports": ports,
            "externalTrafficPolicy": spec.external_traffic_policy.clone().unwrap_or_else(|| "Cluster".into()),
        });
        if let Some(ip) = spec.load_balancer_ip.as_deref().filter(|s| !s.is_empty()) {
            spec_out["loadBalancerIP"] = json!(ip);
        }
        if let Some(r) = spec
            .load_balancer_source_ranges
            .as_ref()
            .filter(|r| !r.is_empty())
        {
            spec_out["loadBalancerSourceRanges"] = json!(r);
        }
        json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {
                "name": infra_name,
                "namespace": infra_ns,
                "labels": {
                    TENANT_SERVICE_NAME_LABEL: key.name,
                    TENANT_SERVICE_NAMESPACE_LABEL: key.namespace,
                    names::CLUSTER_NAME_LABEL: cluster_name,
                },
                "annotations": annotations,
            },
            "spec": spec_out,
        })
    }

    /// Writes the infra Service's EndpointSlices (one per address family): the nodes that
    /// take its traffic, at each port's NodePort.
    async fn ensure_infra_slices(
        &self,
        svc: &Service,
        key: &ObjectKey,
        infra: &Service,
        infra_ns: &str,
        role: Option<&str>,
    ) -> Result<()> {
        let spec = svc.spec.clone().unwrap_or_default();
        let local = spec.external_traffic_policy.as_deref() == Some("Local");
        let nodes: Vec<Arc<Node>> = self
            .lb_nodes(key, local)
            .into_iter()
            .filter(|n| role.is_none_or(|r| label(&n.metadata, r).is_some()))
            .collect();
        let infra_name = infra.metadata.name.clone().unwrap_or_default();
        let api: Api<EndpointSlice> = Api::namespaced(self.root()?, infra_ns);
        let ports: Vec<Value> = spec
            .ports
            .iter()
            .flatten()
            .filter_map(|p| {
                let mut port = json!({
                    "protocol": p.protocol.clone().unwrap_or_else(|| "TCP".into()),
                    "port": p.node_port?,
                });
                if let Some(name) = p.name.as_deref().filter(|n| !n.is_empty()) {
                    port["name"] = json!(name);
                }
                Some(port)
            })
            .collect();
        for (family, v4) in [("IPv4", true), ("IPv6", false)] {
            let name = format!("{infra_name}-{}", family.to_lowercase());
            let endpoints: Vec<Value> = nodes
                .iter()
                .flat_map(|n| {
                    internal_ips(n)
                        .into_iter()
                        .filter(|ip| ip.is_ipv4() == v4)
                        .map(|ip| {
                            json!({
                                "addresses": [ip.to_string()],
                                "conditions": {"ready": true, "serving": true, "terminating": false},
                            })
                        })
                        .collect::<Vec<_>>()
                })
                .collect();
            let current = self.slices.get(&ObjectKey::new(ROOT, infra_ns, &name));
            if endpoints.is_empty() && !v4 {
                if current.is_some() {
                    ignore_not_found(api.delete(&name, &DeleteParams::default()).await)?;
                }
                continue;
            }
            let desired = json!({
                "apiVersion": "discovery.k8s.io/v1",
                "kind": "EndpointSlice",
                "metadata": {
                    "name": name,
                    "namespace": infra_ns,
                    "labels": {SERVICE_NAME_LABEL: infra_name, MANAGED_BY_LABEL: MANAGED_BY},
                    "ownerReferences": [{
                        "apiVersion": "v1", "kind": "Service", "name": infra_name,
                        "uid": infra.metadata.uid.clone().unwrap_or_default(),
                        "controller": true, "blockOwnerDeletion": true,
                    }],
                },
                "addressType": family,
                "endpoints": endpoints,
                "ports": ports,
            });
            match current {
                None => {
                    let obj: EndpointSlice = serde_json::from_value(desired)?;
                    api.create(&PostParams::default(), &obj).await?;
                }
                Some(cur) => {
                    let have = json!({
                        "endpoints": serde_json::to_value(&cur.endpoints).unwrap_or(Value::Null),
                        "ports": serde_json::to_value(&cur.ports).unwrap_or(Value::Null),
                        "uid": cur.metadata.owner_references.as_ref().and_then(|o| o.first()).map(|o| o.uid.clone()),
                    });
                    let want = json!({
                        "endpoints": desired["endpoints"],
                        "ports": desired["ports"],
                        "uid": desired["metadata"]["ownerReferences"][0]["uid"],
                    });
                    if normalise(have) != normalise(want) {
                        let mut obj: EndpointSlice = serde_json::from_value(desired)?;
                        obj.metadata.resource_version = cur.metadata.resource_version.clone();
                        api.replace(&name, &PostParams::default(), &obj).await?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Deletes a workload cluster's Node whose machine is gone (see the module's docs).
    pub async fn reconcile_cloud_node(&self, key: ObjectKey) -> Result<Action> {
        let Some(node) = self.nodes.get(&key) else {
            return Ok(Action::AwaitChange);
        };
        let Some(machine) = node
            .spec
            .as_ref()
            .and_then(|s| s.provider_id.as_deref())
            .and_then(|p| {
                p.strip_prefix(crate::process::PROVIDER_ID_PREFIX)
                    .or_else(|| p.strip_prefix("virtual://"))
            })
        else {
            return Ok(Action::AwaitChange);
        };
        if node_ready(&node) || node.metadata.deletion_timestamp.is_some() {
            return Ok(Action::AwaitChange);
        }
        let Some(capi) = self.cluster_for_workload(key.cluster.as_str()) else {
            return Ok(Action::AwaitChange);
        };
        let ns = capi.metadata.namespace.as_deref().unwrap_or("");
        if self.infra.get(&Ctx::key(ns, machine)).is_some() {
            return Ok(Action::AwaitChange);
        }
        let api: Api<Node> = Api::all(self.clients.cluster(key.cluster.as_str())?);
        ignore_not_found(api.delete(&key.name, &DeleteParams::default()).await)?;
        self.recorder.about(
            key.cluster.as_str(),
            &*node,
            "Normal",
            "DeletingNode",
            format!(
                "Deleting node {} because it does not exist in the cloud provider",
                key.name
            ),
        );
        Ok(Action::AwaitChange)
    }
}

/// Endpoints and ports compared without the defaults the server fills in.
fn normalise(mut v: Value) -> Value {
    fn strip(v: &mut Value) {
        match v {
            Value::Object(m) => {
                m.retain(|_, x| !x.is_null());
                for x in m.values_mut() {
                    strip(x);
                }
            }
            Value::Array(a) => a.iter_mut().for_each(strip),
            _ => {}
        }
    }
    strip(&mut v);
    v
}

/// The merge patch that brings an infra Service to `desired`, if it differs (ports keep the
/// NodePorts the root cluster gave them).
fn infra_patch(cur: &Service, desired: &Value) -> Option<Value> {
    let cur_v = serde_json::to_value(cur).ok()?;
    let mut ports = desired["spec"]["ports"].clone();
    if let Some(list) = ports.as_array_mut() {
        for p in list.iter_mut() {
            let same = cur_v["spec"]["ports"].as_array().and_then(|have| {
                have.iter()
                    .find(|h| h["port"] == p["port"] && h["protocol"] == p["protocol"])
            });
            if let Some(np) = same.and_then(|h| h.get("nodePort")) {
                p["nodePort"] = np.clone();
            }
        }
    }
    let project = |v: &Value| -> Vec<(Value, Value, Value, Value)> {
        v.as_array()
            .map(|a| {
                a.iter()
                    .map(|p| {
                        (
                            p.get("name").cloned().unwrap_or(Value::Null),
                            p["protocol"].clone(),
                            p["port"].clone(),
                            p["targetPort"].clone(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    let differs = project(&cur_v["spec"]["ports"]) != project(&ports)
        || cur_v["spec"]["externalTrafficPolicy"] != desired["spec"]["externalTrafficPolicy"]
        || cur_v["spec"].get("loadBalancerIP") != desired["spec"].get("loadBalancerIP")
        || cur_v["spec"].get("loadBalancerSourceRanges")
            != desired["spec"].get("loadBalancerSourceRanges")
        || cur_v["metadata"]["annotations"]
            .as_object()
            .cloned()
            .unwrap_or_default()
            != desired["metadata"]["annotations"]
                .as_object()
                .cloned()
                .unwrap_or_default();
    if !differs {
        return None;
    }
    // Annotations the tenant removed are removed (null in a merge patch).
    let mut annotations = desired["metadata"]["annotations"].clone();
    if let (Some(have), Some(want)) = (
        cur_v["metadata"]["annotations"].as_object(),
        annotations.as_object_mut(),
    ) {
        for k in have.keys() {
            want.entry(k.clone()).or_insert(Value::Null);
        }
    }
    Some(json!({
        "metadata": {"labels": desired["metadata"]["labels"], "annotations": annotations},
        "spec": {
            "ports": ports,
            "externalTrafficPolicy": desired["spec"]["externalTrafficPolicy"],
            "loadBalancerIP": desired["spec"].get("loadBalancerIP").cloned().unwrap_or(Value::Null),
            "loadBalancerSourceRanges": desired["spec"].get("loadBalancerSourceRanges").cloned().unwrap_or(Value::Null),
        },
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_infra_service_is_named_after_the_tenant_uid_without_dashes_cut_at_32() {
        assert_eq!(
            infra_service_name("0b0c5a8e-6c1b-4d43-9a3e-1f2d3c4b5a69"),
            "a0b0c5a8e6c1b4d439a3e1f2d3c4b5a6"
        );
        assert_eq!(infra_service_name("abc"), "aabc");
    }

    #[test]
    fn an_unchanged_infra_service_needs_no_patch_and_a_new_port_does() {
        let desired = json!({
            "metadata": {"labels": {"a": "b"}, "annotations": {"x": "y"}},
            "spec": {"type": "LoadBalancer", "externalTrafficPolicy": "Cluster",
                     "ports": [{"name": "http", "protocol": "TCP", "port": 80, "targetPort": 31000}]},
        });
        let cur: Service = serde_json::from_value(json!({
            "metadata": {"name": "a1", "labels": {"a": "b"}, "annotations": {"x": "y"}},
            "spec": {"type": "LoadBalancer", "externalTrafficPolicy": "Cluster",
                     "ports": [{"name": "http", "protocol": "TCP", "port": 80, "targetPort": 31000, "nodePort": 30500}]},
        }))
        .unwrap();
        assert_eq!(infra_patch(&cur, &desired), None);
        let mut more = desired.clone();
        more["spec"]["ports"]
            .as_array_mut()
            .unwrap()
            .push(json!({"name": "https", "protocol": "TCP", "port": 443, "targetPort": 31001}));
        let patch = infra_patch(&cur, &more).expect("a patch");
        // The existing port keeps the NodePort the root cluster gave it.
        assert_eq!(patch["spec"]["ports"][0]["nodePort"], 30500);
        assert_eq!(patch["spec"]["ports"][1]["port"], 443);
    }

    #[test]
    fn an_annotation_the_tenant_removed_is_removed_from_the_infra_service() {
        let desired = json!({
            "metadata": {"labels": {}, "annotations": {}},
            "spec": {"externalTrafficPolicy": "Cluster", "ports": []},
        });
        let cur: Service = serde_json::from_value(json!({
            "metadata": {"name": "a1", "annotations": {"gone": "1"}},
            "spec": {"externalTrafficPolicy": "Cluster", "ports": []},
        }))
        .unwrap();
        let patch = infra_patch(&cur, &desired).expect("a patch");
        assert_eq!(patch["metadata"]["annotations"]["gone"], Value::Null);
    }
}
