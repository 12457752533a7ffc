//! Addons installed into a tenant cluster from its `spec.addons`, as the seed's `kubernetes`
//! application installs its HelmReleases. Today: `ingressNginx` — the platform's own ingress
//! controller (`matryoshka ingress-controller`, the `ingress` crate) as ingress-nginx's chart
//! lays it out: namespace `ingress-nginx`, its ServiceAccount and RBAC, the IngressClass
//! `nginx` (controller `k8s.io/ingress-nginx`), a DaemonSet `ingress-nginx-controller` on the
//! nodes of role `ingress-nginx` and the Service of the same name — `LoadBalancer` (an address
//! from the platform's pool through the cloud controller) or, `Proxied`, `NodePort` with http
//! 30000 and https 30001 as the seed's. Disabling it removes all of that.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use kube::api::{Api, DeleteParams};
use serde_json::{Value, json};

use runtime::error::{Result, ignore_not_found};

type ImageFuture = Pin<Box<dyn Future<Output = std::result::Result<String, String>> + Send>>;

/// Where the controller's image comes from: the binary pushes it into the platform's
/// registry on first use and answers its reference.
#[derive(Clone)]
pub struct ImageSource(Arc<dyn Fn() -> ImageFuture + Send + Sync>);

impl ImageSource {
    pub fn new(f: impl Fn() -> ImageFuture + Send + Sync + 'static) -> Self {
        ImageSource(Arc::new(f))
    }

    /// The image's reference, once it is in the registry.
    pub async fn get(&self) -> std::result::Result<String, String> {
        (self.0)().await
    }
}

impl std::fmt::Debug for ImageSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ImageSource")
    }
}

pub const INGRESS_NAMESPACE: &str = "ingress-nginx";
pub const INGRESS_NAME: &str = "ingress-nginx-controller";
pub const INGRESS_CLASS: &str = "nginx";
/// The node role the controller's pods run on (the seed's node-group `roles`).
pub const INGRESS_NODE_ROLE: &str = "node-role.kubernetes.io/ingress-nginx";
const MANAGED_BY: &str = "matryoshka-platform";

/// The `ingressNginx` addon's settings from a TenantCluster spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IngressAddon {
    pub enabled: bool,
    /// `Proxied` (default) or `LoadBalancer`.
    pub expose_method: String,
}

impl IngressAddon {
    pub fn from_spec(spec: &Value) -> IngressAddon {
        let a = spec.pointer("/addons/ingressNginx");
        IngressAddon {
            enabled: a
                .and_then(|a| a.get("enabled"))
                .and_then(Value::as_bool)
                .unwrap_or(false),
            expose_method: a
                .and_then(|a| a.get("exposeMethod"))
                .and_then(Value::as_str)
                .unwrap_or("Proxied")
                .to_string(),
        }
    }
}

fn labels() -> Value {
    json!({
        "app.kubernetes.io/name": "ingress-nginx",
        "app.kubernetes.io/instance": "ingress-nginx",
        "app.kubernetes.io/component": "controller",
        "app.kubernetes.io/managed-by": MANAGED_BY,
    })
}

/// Everything the addon puts into the tenant cluster, in the order it is applied.
pub fn ingress_objects(addon: &IngressAddon, image: &str) -> Vec<Value> {
    let ns = INGRESS_NAMESPACE;
    let meta = |name: &str| json!({"name": name, "namespace": ns, "labels": labels()});
    let cluster_meta = |name: &str| json!({"name": name, "labels": labels()});
    let selector = json!({
        "app.kubernetes.io/name": "ingress-nginx",
        "app.kubernetes.io/instance": "ingress-nginx",
        "app.kubernetes.io/component": "controller",
    });
    let (type_, ports) = if addon.expose_method == "LoadBalancer" {
        (
            "LoadBalancer",
            json!([
                {"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP", "appProtocol": "http"},
                {"name": "https", "port": 443, "targetPort": "https", "protocol": "TCP", "appProtocol": "https"},
            ]),
        )
    } else {
        (
            "NodePort",
            json!([
                {"name": "http", "port": 80, "targetPort": "http", "nodePort": 30000, "protocol": "TCP", "appProtocol": "http"},
                {"name": "https", "port": 443, "targetPort": "https", "nodePort": 30001, "protocol": "TCP", "appProtocol": "https"},
            ]),
        )
    };
    vec![
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": cluster_meta(ns)}),
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta("ingress-nginx")}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": cluster_meta("ingress-nginx"),
        "rules": [
            {"apiGroups": [""], "resources": ["configmaps", "endpoints", "nodes", "pods", "secrets", "namespaces"], "verbs": ["list", "watch"]},
            {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]},
            {"apiGroups": [""], "resources": ["services"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": ["networking.k8s.io"], "resources": ["ingresses", "ingressclasses"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": ["networking.k8s.io"], "resources": ["ingresses/status"], "verbs": ["update", "patch"]},
            {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
        ]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": cluster_meta("ingress-nginx"),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "ingress-nginx"},
            "subjects": [{"kind": "ServiceAccount", "name": "ingress-nginx", "namespace": ns}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta("ingress-nginx"),
            "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "create", "update", "patch"]}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": meta("ingress-nginx"),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "ingress-nginx"},
            "subjects": [{"kind": "ServiceAccount", "name": "ingress-nginx", "namespace": ns}]}),
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass", "metadata": cluster_meta(INGRESS_CLASS),
            "spec": {"controller": ingress_controller_value()}}),
        json!({"apiVersion": "v1", "kind": "Service", "metadata": meta(INGRESS_NAME),
            "spec": {"type": type_, "selector": selector, "ports": ports}}),
        json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": meta(INGRESS_NAME),
        "spec": {
            "selector": {"matchLabels": selector},
            "template": {
                "metadata": {"labels": selector},
                "spec": {
                    "serviceAccountName": "ingress-nginx",
                    "nodeSelector": {INGRESS_NODE_ROLE: ""},
                    "terminationGracePeriodSeconds": 30,
                    "containers": [{
                        "name": "controller",
                        "image": image,
                        "imagePullPolicy": "IfNotPresent",
                        "args": [
                            "ingress-controller",
                            format!("--publish-service={ns}/{INGRESS_NAME}"),
                            "--election-id=ingress-nginx-leader",
                            format!("--ingress-class={INGRESS_CLASS}"),
                            format!("--controller-class={}", ingress_controller_value()),
                        ],
                        "env": [
                            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                            {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                        ],
                        "ports": [
                            {"name": "http", "containerPort": 80, "protocol": "TCP"},
                            {"name": "https", "containerPort": 443, "protocol": "TCP"},
                        ],
                        "readinessProbe": {"tcpSocket": {"port": 80}, "periodSeconds": 2},
                        "resources": {"requests": {"cpu": "100m", "memory": "90Mi"}},
                    }],
                },
            },
        }}),
    ]
}

fn ingress_controller_value() -> &'static str {
    "k8s.io/ingress-nginx"
}

/// Installs (or updates) the addon in the tenant cluster.
pub async fn ensure_ingress(
    tenant: &kube::Client,
    addon: &IngressAddon,
    image: &str,
) -> Result<()> {
    for obj in ingress_objects(addon, image) {
        crate::install::apply(tenant, &obj).await?;
    }
    Ok(())
}

/// Removes the addon from the tenant cluster if the platform installed it.
pub async fn remove_ingress(tenant: &kube::Client) -> Result<()> {
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(tenant.clone());
    let Some(ns) = ignore_not_found(namespaces.get(INGRESS_NAMESPACE).await)? else {
        return Ok(());
    };
    let ours = ns
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get("app.kubernetes.io/managed-by"))
        .is_some_and(|m| m == MANAGED_BY);
    if !ours || ns.metadata.deletion_timestamp.is_some() {
        return Ok(());
    }
    let dp = DeleteParams::default();
    let classes: Api<k8s_openapi::api::networking::v1::IngressClass> = Api::all(tenant.clone());
    ignore_not_found(classes.delete(INGRESS_CLASS, &dp).await)?;
    let bindings: Api<k8s_openapi::api::rbac::v1::ClusterRoleBinding> = Api::all(tenant.clone());
    ignore_not_found(bindings.delete("ingress-nginx", &dp).await)?;
    let roles: Api<k8s_openapi::api::rbac::v1::ClusterRole> = Api::all(tenant.clone());
    ignore_not_found(roles.delete("ingress-nginx", &dp).await)?;
    // The namespace takes the DaemonSet, its pods and the Service (whose address the cloud
    // controller releases) with it.
    ignore_not_found(namespaces.delete(INGRESS_NAMESPACE, &dp).await)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_addon_reads_enabled_and_the_expose_method_with_the_seeds_defaults() {
        let a = IngressAddon::from_spec(&json!({}));
        assert!(!a.enabled);
        assert_eq!(a.expose_method, "Proxied");
        let a = IngressAddon::from_spec(
            &json!({"addons": {"ingressNginx": {"enabled": true, "exposeMethod": "LoadBalancer"}}}),
        );
        assert!(a.enabled);
        assert_eq!(a.expose_method, "LoadBalancer");
    }

    #[test]
    fn proxied_exposes_node_ports_30000_and_30001_and_load_balancer_asks_for_an_address() {
        let svc = |method: &str| {
            ingress_objects(
                &IngressAddon {
                    enabled: true,
                    expose_method: method.into(),
                },
                "img",
            )
            .into_iter()
            .find(|o| o["kind"] == "Service")
            .unwrap()
        };
        let p = svc("Proxied");
        assert_eq!(p["spec"]["type"], "NodePort");
        assert_eq!(p["spec"]["ports"][0]["nodePort"], 30000);
        assert_eq!(p["spec"]["ports"][1]["nodePort"], 30001);
        assert_eq!(svc("LoadBalancer")["spec"]["type"], "LoadBalancer");
        let ds = ingress_objects(
            &IngressAddon {
                enabled: true,
                expose_method: "Proxied".into(),
            },
            "registry/img:1",
        )
        .into_iter()
        .find(|o| o["kind"] == "DaemonSet")
        .unwrap();
        let c = &ds["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(c["image"], "registry/img:1");
        assert_eq!(
            ds["spec"]["template"]["spec"]["nodeSelector"][INGRESS_NODE_ROLE],
            ""
        );
    }
}
