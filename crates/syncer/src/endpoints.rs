//! The endpoints of a tenant Service without a selector (vcluster syncs them with the
//! Service): what the tenant writes by hand — an `Endpoints` object of the Service's name, or
//! EndpointSlices labelled `kubernetes.io/service-name` — becomes the host Service's
//! EndpointSlices, so traffic to the host Service (the tenant Service's IP) reaches those
//! addresses. A Service with a selector needs none: the host's EndpointSlice controller
//! selects the host pods.
//!
//! Addresses are kept (a tenant pod's IP is its host pod's); a `targetRef` to a tenant pod
//! names the host pod; the node names are the host's (the tenant's nodes are mirrored).

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{Endpoints, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use runtime::error::{Result, ignore_not_found};
use runtime::informer::ObjectKey;
use serde_json::{Value, json};

use crate::translate::Target;
use crate::{COMPONENT, Syncer, names};

/// The label naming a slice's Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";
/// The label naming who manages a slice.
pub const MANAGED_BY_LABEL: &str = "endpointslice.kubernetes.io/managed-by";
/// What the syncer's host slices say they are managed by.
pub const MANAGER: &str = "syncer.matryoshka.dev";
/// The tenant slices the syncer reads: not the tenant's EndpointSlice controller's.
pub const TENANT_SLICES: &str =
    "endpointslice.kubernetes.io/managed-by!=endpointslice-controller.k8s.io";
/// The tenant Endpoints the syncer reads: not the tenant's endpoints controller's.
pub const TENANT_ENDPOINTS: &str = "endpointslice.kubernetes.io/skip-mirror!=true";

/// A tenant pod reference as its host pod.
fn host_ref(r: &Value, target: &Target<'_>) -> Option<Value> {
    if r.get("kind").and_then(Value::as_str) != Some("Pod") {
        return None;
    }
    let ns = r.get("namespace").and_then(Value::as_str)?;
    let name = r.get("name").and_then(Value::as_str)?;
    Some(json!({"kind": "Pod", "namespace": target.host_namespace, "name": target.name(ns, name)}))
}

/// The host EndpointSlice standing for a tenant slice of Service `service`, named `name`.
pub fn host_slice_from_slice(
    slice: &EndpointSlice,
    service: &str,
    name: &str,
    target: &Target<'_>,
) -> Value {
    let endpoints: Vec<Value> = slice
        .endpoints
        .iter()
        .map(|e| {
            let mut v = serde_json::to_value(e).unwrap_or_else(|_| json!({}));
            if let Some(o) = v.as_object_mut() {
                match o.get("targetRef").and_then(|r| host_ref(r, target)) {
                    Some(r) => {
                        o.insert("targetRef".into(), r);
                    }
                    None => {
                        o.remove("targetRef");
                    }
                }
            }
            v
        })
        .collect();
    json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": slice_meta(name, service, target),
        "addressType": slice.address_type,
        "endpoints": endpoints,
        "ports": slice.ports,
    })
}

/// The host EndpointSlices standing for a tenant `Endpoints` object: one per subset (each
/// subset's addresses share its ports), ready and not-ready addresses alike.
pub fn host_slices_from_endpoints(
    ep: &Endpoints,
    service: &str,
    target: &Target<'_>,
) -> Vec<(String, Value)> {
    let base = target.name(
        ep.metadata.namespace.as_deref().unwrap_or_default(),
        &ep.name_any(),
    );
    let mut out = Vec::new();
    for (i, subset) in ep.subsets.iter().flatten().enumerate() {
        let mut endpoints = Vec::new();
        let mut family = "IPv4";
        for (ready, list) in [
            (true, subset.addresses.as_ref()),
            (false, subset.not_ready_addresses.as_ref()),
        ] {
            for a in list.into_iter().flatten() {
                if a.ip.contains(':') {
                    family = "IPv6";
                }
                let mut e = json!({"addresses": [a.ip], "conditions": {"ready": ready}});
                if let Some(n) = &a.node_name {
                    e["nodeName"] = json!(n);
                }
                if let Some(h) = &a.hostname {
                    e["hostname"] = json!(h);
                }
                if let Some(r) = a
                    .target_ref
                    .as_ref()
                    .and_then(|r| serde_json::to_value(r).ok())
                    .and_then(|r| host_ref(&r, target))
                {
                    e["targetRef"] = r;
                }
                endpoints.push(e);
            }
        }
        let ports: Vec<Value> = subset
            .ports
            .iter()
            .flatten()
            .map(|p| json!({"name": p.name, "port": p.port, "protocol": p.protocol, "appProtocol": p.app_protocol}))
            .collect();
        let name = format!("{base}-{i}");
        out.push((
            name.clone(),
            json!({
                "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                "metadata": slice_meta(&name, service, target),
                "addressType": family,
                "endpoints": endpoints,
                "ports": ports,
            }),
        ));
    }
    out
}

fn slice_meta(name: &str, service: &str, target: &Target<'_>) -> Value {
    let mut meta = json!({
        "name": name,
        "namespace": target.host_namespace,
        "labels": {
            names::MANAGED_BY: target.cluster,
            SERVICE_NAME_LABEL: service,
            MANAGED_BY_LABEL: MANAGER,
        },
    });
    if let Some(o) = &target.owner {
        meta["ownerReferences"] = json!([o]);
    }
    meta
}

fn slice_api(client: &kube::Client, namespace: &str) -> Api<EndpointSlice> {
    Api::namespaced(client.clone(), namespace)
}

impl Syncer {
    /// Writes the host EndpointSlices of a selector-less tenant Service (`host_service`: its
    /// host Service's name) and deletes the ones no longer standing for anything (all of
    /// them when the Service is gone or selects pods).
    pub(crate) async fn service_endpoints(
        &self,
        key: &ObjectKey,
        tenant: Option<&Service>,
        host_client: &kube::Client,
        host_service: &str,
        target: &Target<'_>,
    ) -> Result<()> {
        let spec = tenant.and_then(|t| t.spec.as_ref());
        let selector_less = spec.is_some_and(|s| s.selector.as_ref().is_none_or(|m| m.is_empty()))
            && spec.and_then(|s| s.type_.as_deref()) != Some("ExternalName");
        let mut want: Vec<(String, Value)> = Vec::new();
        if selector_less {
            if let Some(ep) =
                self.tenant_endpoints
                    .get(&ObjectKey::new(&key.cluster, &key.namespace, &key.name))
            {
                want.extend(host_slices_from_endpoints(&ep, host_service, target));
            }
            for s in self
                .tenant_slices
                .list_namespace(&key.cluster, &key.namespace)
            {
                if s.labels().get(SERVICE_NAME_LABEL) == Some(&key.name) {
                    let name = target.name(&key.namespace, &s.name_any());
                    want.push((
                        name.clone(),
                        host_slice_from_slice(&s, host_service, &name, target),
                    ));
                }
            }
        }
        let api = slice_api(host_client, target.host_namespace);
        let pp = PatchParams::apply(COMPONENT).force();
        let wanted: BTreeSet<&str> = want.iter().map(|(n, _)| n.as_str()).collect();
        let ours = ListParams::default().labels(&format!(
            "{}={},{SERVICE_NAME_LABEL}={host_service},{MANAGED_BY_LABEL}={MANAGER}",
            names::MANAGED_BY,
            target.cluster
        ));
        for old in api.list(&ours).await?.items {
            if !wanted.contains(old.name_any().as_str()) {
                ignore_not_found(api.delete(&old.name_any(), &DeleteParams::default()).await)?;
            }
        }
        for (name, slice) in &want {
            api.patch(name, &pp, &Patch::Apply(slice)).await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target() -> Target<'static> {
        Target {
            cluster: "demo",
            host_namespace: "team-x",
            owner: None,
        }
    }

    #[test]
    fn a_tenant_endpoints_object_becomes_a_host_slice_per_subset_with_host_pod_references() {
        let ep: Endpoints = serde_json::from_value(json!({
            "metadata": {"name": "db", "namespace": "default"},
            "subsets": [{
                "addresses": [{"ip": "10.1.0.5", "nodeName": "n1",
                    "targetRef": {"kind": "Pod", "namespace": "default", "name": "db-0"}}],
                "notReadyAddresses": [{"ip": "192.0.2.7"}],
                "ports": [{"name": "sql", "port": 5432, "protocol": "TCP"}],
            }],
        }))
        .expect("endpoints");
        let slices = host_slices_from_endpoints(&ep, "db-x-default-x-demo", &target());
        assert_eq!(slices.len(), 1);
        let (name, s) = &slices[0];
        assert_eq!(name, "db-x-default-x-demo-0");
        assert_eq!(
            s["metadata"]["labels"][SERVICE_NAME_LABEL],
            "db-x-default-x-demo"
        );
        assert_eq!(s["metadata"]["labels"][MANAGED_BY_LABEL], MANAGER);
        assert_eq!(s["addressType"], "IPv4");
        assert_eq!(s["endpoints"][0]["addresses"][0], "10.1.0.5");
        assert_eq!(s["endpoints"][0]["conditions"]["ready"], true);
        assert_eq!(
            s["endpoints"][0]["targetRef"],
            json!({"kind": "Pod", "namespace": "team-x", "name": "db-0-x-default-x-demo"})
        );
        assert_eq!(s["endpoints"][1]["conditions"]["ready"], false);
        assert!(s["endpoints"][1].get("targetRef").is_none());
        assert_eq!(s["ports"][0]["port"], 5432);
    }

    #[test]
    fn a_tenant_slice_keeps_its_addresses_and_names_the_host_service() {
        let slice: EndpointSlice = serde_json::from_value(json!({
            "metadata": {"name": "ext-1", "namespace": "default",
                "labels": {SERVICE_NAME_LABEL: "ext"}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": ["192.0.2.10"],
                "targetRef": {"kind": "Node", "name": "n1"}}],
            "ports": [{"port": 80}],
        }))
        .expect("slice");
        let s = host_slice_from_slice(
            &slice,
            "ext-x-default-x-demo",
            "ext-1-x-default-x-demo",
            &target(),
        );
        assert_eq!(s["metadata"]["name"], "ext-1-x-default-x-demo");
        assert_eq!(s["metadata"]["namespace"], "team-x");
        assert_eq!(
            s["metadata"]["labels"][SERVICE_NAME_LABEL],
            "ext-x-default-x-demo"
        );
        assert_eq!(s["endpoints"][0]["addresses"][0], "192.0.2.10");
        assert!(
            s["endpoints"][0].get("targetRef").is_none(),
            "only pods are translated"
        );
    }
}
