//! Objects every cluster has from its first moment: the system namespaces and the
//! `default/kubernetes` Service (upstream's bootstrap controllers do the same in
//! kube-apiserver).

use apimachinery::status::{ApiError, Reason};
use registry::store::{Location, WriteOptions};
use serde_json::{Value, json};

use crate::server::ApiServer;

/// The namespaces of a new cluster.
pub const NAMESPACES: &[&str] = &["default", "kube-system", "kube-public", "kube-node-lease"];

const RBAC: &str = "rbac.authorization.k8s.io";

fn ensure_owned<'a>(
    server: &'a ApiServer,
    cluster: &'a str,
    group: &'a str,
    plural: &'a str,
    namespace: String,
    obj: Value,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), ApiError>> + Send + 'a>> {
    Box::pin(async move { ensure(server, cluster, group, plural, &namespace, obj).await })
}

async fn ensure(
    server: &ApiServer,
    cluster: &str,
    group: &str,
    plural: &str,
    namespace: &str,
    obj: Value,
) -> Result<(), ApiError> {
    let res = server
        .catalog
        .builtin(group, plural)
        .ok_or_else(|| ApiError::internal(format!("{plural} is not served")))?;
    let loc = Location {
        cluster,
        namespace,
        name: "",
    };
    match server
        .store
        .create(&res, &loc, obj, &WriteOptions::default())
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if e.reason == Reason::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

/// Creates what a cluster must have; existing objects are left alone.
pub async fn seed(server: &ApiServer, cluster: &str) -> Result<(), ApiError> {
    for ns in NAMESPACES {
        ensure(
            server,
            cluster,
            "",
            "namespaces",
            "",
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
        )
        .await?;
    }
    let svc = json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "kubernetes", "namespace": "default", "labels": {"component": "apiserver", "provider": "kubernetes"}},
        "spec": {
            "type": "ClusterIP",
            "clusterIP": "10.96.0.1",
            "clusterIPs": ["10.96.0.1"],
            "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 6443}],
            "sessionAffinity": "None",
            "ipFamilies": ["IPv4"],
            "ipFamilyPolicy": "SingleStack",
            "internalTrafficPolicy": "Cluster",
        },
    });
    // The first address of the service range, reserved like any requested cluster IP. A
    // service that exists already holds it: creating it again would be refused as
    // "already allocated" before "already exists", so it is looked up first.
    let services = server
        .catalog
        .builtin("", "services")
        .ok_or_else(|| ApiError::internal("services are not served"))?;
    let at = Location {
        cluster,
        namespace: "default",
        name: "kubernetes",
    };
    match server.store.get(&services, &at).await {
        Ok(_) => {}
        Err(e) if e.reason == Reason::NotFound => {
            ensure(server, cluster, "", "services", "default", svc).await?;
        }
        Err(e) => return Err(e),
    }
    // The default service accounts (the serviceaccount controller keeps them; seeding them here
    // makes a new cluster usable at once) and the bootstrap RBAC policy, written concurrently
    // so they share fsyncs.
    let mut writes = Vec::new();
    for ns in NAMESPACES {
        let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default", "namespace": ns}});
        writes.push(ensure_owned(
            server,
            cluster,
            "",
            "serviceaccounts",
            ns.to_string(),
            sa,
        ));
    }
    for (plural, objects) in [
        ("clusterroles", rbac::bootstrap_cluster_roles()),
        (
            "clusterrolebindings",
            rbac::bootstrap_cluster_role_bindings(),
        ),
        ("roles", rbac::bootstrap_roles()),
        ("rolebindings", rbac::bootstrap_role_bindings()),
    ] {
        for obj in objects {
            let ns = apimachinery::meta::namespace(&obj).to_string();
            writes.push(ensure_owned(server, cluster, RBAC, plural, ns, obj));
        }
    }
    for r in futures::future::join_all(writes).await {
        r?;
    }
    Ok(())
}
