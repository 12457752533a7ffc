//! Where a tenant cluster's API server is reached besides its path under the platform's
//! address (spec: cozystack.md §2.3, §2.8):
//!
//! - **its hostname**: `spec.host`, by default `kubernetes-<name>.<tenant host>`, where a
//!   tenant's host is its `spec.host` or `<tenant>.<parent's host>` and the root tenant's is
//!   the platform's root host (Cozystack's `_cluster.root-host`). The LogicalCluster lists it
//!   in `spec.hostnames` with the in-cluster Service names, and the API server serves the
//!   cluster to a TLS client naming any of them (SNI) with a certificate for that name;
//! - **the Service `kubernetes-<name>`** (port 6443) in the tenant's namespace of the root
//!   cluster, whose EndpointSlice names where the root cluster's `kubernetes` Service leads
//!   (the API server's advertise address), so `admin.svc`
//!   (`https://kubernetes-<name>.<ns>.svc:6443`) works from the root cluster's pods.

use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::Api;
use runtime::client::ROOT;
use runtime::error::Result;
use runtime::informer::{ObjectKey, Store};
use serde_json::{Value, json};

use crate::install::apply;
use crate::kubeconfig::SERVICE_PORT;
use crate::naming;
use crate::resource::Tenant;

/// The root tenant's host when the operator names none.
pub const DEFAULT_ROOT_HOST: &str = "matryoshka.local";

/// How tenant clusters are served by name.
#[derive(Clone, Debug)]
pub struct Hosting {
    /// The root tenant's host.
    pub root_host: String,
    /// Whether kubeconfigs and `status.endpoint` use the clusters' hostnames (the operator
    /// resolves them to the platform) instead of paths under the platform's address.
    pub host_urls: bool,
}

impl Default for Hosting {
    fn default() -> Self {
        Hosting {
            root_host: DEFAULT_ROOT_HOST.into(),
            host_urls: false,
        }
    }
}

fn own_host(spec: &Value) -> Option<&str> {
    spec.get("host")
        .and_then(Value::as_str)
        .filter(|h| !h.is_empty())
}

/// The host of tenant namespace `ns`.
pub fn tenant_host(tenants: &Store<Tenant>, root_host: &str, ns: &str) -> String {
    let mut host = root_host.to_string();
    for t_ns in naming::chain(ns).into_iter().skip(1) {
        let Some((parent, name)) = naming::tenant_of_namespace(&t_ns) else {
            break;
        };
        let tenant = tenants.get(&ObjectKey::new(ROOT, &parent, &name));
        host = match tenant.as_ref().and_then(|t| own_host(&t.spec)) {
            Some(h) => h.to_ascii_lowercase(),
            None => format!("{name}.{host}"),
        };
    }
    host
}

/// A TenantCluster's hostname.
pub fn cluster_host(spec: &Value, name: &str, tenant_host: &str) -> String {
    match own_host(spec) {
        Some(h) => h.to_ascii_lowercase(),
        None => format!("{}.{tenant_host}", naming::release(name)),
    }
}

/// Every name the cluster is served at: its host and the in-cluster Service's names.
pub fn hostnames(host: &str, namespace: &str, name: &str) -> Vec<String> {
    let svc = format!("{}.{namespace}.svc", naming::release(name));
    vec![
        host.to_string(),
        svc.clone(),
        format!("{svc}.cluster.local"),
    ]
}

/// `url` (`https://addr:port/clusters/x`) at `host` instead: `https://host:port`.
pub fn host_url(url: &str, host: &str) -> String {
    let Ok(uri) = url.parse::<http::Uri>() else {
        return url.to_string();
    };
    let scheme = uri.scheme_str().unwrap_or("https");
    match uri.port_u16() {
        Some(p) => format!("{scheme}://{host}:{p}"),
        None => format!("{scheme}://{host}"),
    }
}

/// The Service `kubernetes-<name>` and its EndpointSlice, copied from where the root
/// cluster's `kubernetes` Service leads (nothing when that is not known).
pub async fn ensure_api_service(
    root: &kube::Client,
    namespace: &str,
    name: &str,
    owner: &OwnerReference,
) -> Result<()> {
    let slices: Api<EndpointSlice> = Api::namespaced(root.clone(), "default");
    let api = runtime::error::ignore_not_found(slices.get("kubernetes").await)?;
    let port = api
        .iter()
        .flat_map(|a| a.ports.iter().flatten())
        .find_map(|p| p.port)
        .unwrap_or(6443);
    let release = naming::release(name);
    let owner = serde_json::to_value(owner)?;
    let labels = json!({machines::names::CLUSTER_NAME_LABEL: release});
    apply(
        root,
        &json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": release, "namespace": namespace, "labels": labels,
                "ownerReferences": [owner]},
            "spec": {"ports": [{"name": "https", "port": SERVICE_PORT, "targetPort": port, "protocol": "TCP"}]},
        }),
    )
    .await?;
    let Some(api) = api else {
        // Where the API server is reached from pods is not known (no node of the root
        // cluster runs pods): the Service has no endpoints.
        return Ok(());
    };
    let addresses: Vec<Value> = api
        .endpoints
        .iter()
        .flat_map(|e| e.addresses.iter())
        .map(|a| json!({"addresses": [a], "conditions": {"ready": true}}))
        .collect();
    apply(
        root,
        &json!({
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": release, "namespace": namespace,
                "labels": {"kubernetes.io/service-name": release,
                    "endpointslice.kubernetes.io/managed-by": "platform.matryoshka.dev"},
                "ownerReferences": [owner]},
            "addressType": api.address_type,
            "endpoints": addresses,
            "ports": [{"name": "https", "port": port, "protocol": "TCP"}],
        }),
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cluster_host_defaults_under_its_tenants_host() {
        assert_eq!(
            cluster_host(&json!({}), "team-x", "foo.example.org"),
            "kubernetes-team-x.foo.example.org"
        );
        assert_eq!(
            cluster_host(&json!({"host": "API.x.org"}), "team-x", "foo.example.org"),
            "api.x.org"
        );
        assert_eq!(
            hostnames("h.example", "tenant-foo", "team-x"),
            [
                "h.example",
                "kubernetes-team-x.tenant-foo.svc",
                "kubernetes-team-x.tenant-foo.svc.cluster.local"
            ]
        );
    }

    #[test]
    fn a_host_url_keeps_the_scheme_and_port_and_drops_the_path() {
        assert_eq!(
            host_url("https://127.0.0.1:6443/clusters/tenant-root-x", "k.example"),
            "https://k.example:6443"
        );
    }

    #[test]
    fn a_tenants_host_is_its_own_or_its_name_under_its_parents() {
        let store: Store<Tenant> = Store::default();
        let mk = |ns: &str, name: &str, spec: Value| {
            let t: Tenant = serde_json::from_value(json!({
                "apiVersion": "platform.matryoshka.dev/v1alpha1", "kind": "Tenant",
                "metadata": {"name": name, "namespace": ns}, "spec": spec,
            }))
            .unwrap();
            store.insert(ObjectKey::new(ROOT, ns, name), std::sync::Arc::new(t));
        };
        mk("tenant-root", "foo", json!({}));
        mk("tenant-foo", "bar", json!({"host": "bar.example.com"}));
        mk("tenant-foo-bar", "baz", json!({}));
        assert_eq!(tenant_host(&store, "r.example", "tenant-root"), "r.example");
        assert_eq!(
            tenant_host(&store, "r.example", "tenant-foo"),
            "foo.r.example"
        );
        assert_eq!(
            tenant_host(&store, "r.example", "tenant-foo-bar"),
            "bar.example.com"
        );
        assert_eq!(
            tenant_host(&store, "r.example", "tenant-foo-bar-baz"),
            "baz.bar.example.com"
        );
    }
}
