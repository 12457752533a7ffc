//! Objects every cluster has from its first moment: the system namespaces, the
//! `default/kubernetes` Service (upstream's bootstrap controllers do the same in
//! kube-apiserver) and the default StorageClass `local`, whose volumes the controllers'
//! built-in provisioner creates; the bootstrap RBAC policy, the mandatory flow-control objects
//! and the local APIServices.

use apimachinery::status::{ApiError, Reason};
use registry::store::{Location, WriteOptions};
use serde_json::{Value, json};

use crate::ControlPlane;

/// The namespaces of a new cluster.
pub const NAMESPACES: &[&str] = &["default", "kube-system", "kube-public", "kube-node-lease"];

const RBAC: &str = "rbac.authorization.k8s.io";

fn ensure_owned<'a>(
    cp: &'a ControlPlane,
    cluster: &'a str,
    group: &'a str,
    plural: &'a str,
    namespace: String,
    obj: Value,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), ApiError>> + Send + 'a>> {
    Box::pin(async move { ensure(cp, cluster, group, plural, &namespace, obj).await })
}

/// A built-in resource every cluster serves (its absence is a bug: a 500).
fn served(
    cp: &ControlPlane,
    group: &str,
    plural: &str,
) -> Result<std::sync::Arc<registry::ResourceDef>, ApiError> {
    cp.catalog
        .builtin(group, plural)
        .ok_or_else(|| ApiError::internal(format!("{plural} is not served")))
}

async fn ensure(
    cp: &ControlPlane,
    cluster: &str,
    group: &str,
    plural: &str,
    namespace: &str,
    obj: Value,
) -> Result<(), ApiError> {
    let res = served(cp, group, plural)?;
    let loc = Location {
        cluster,
        namespace,
        name: "",
    };
    match cp
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
pub async fn seed(cp: &ControlPlane, cluster: &str) -> Result<(), ApiError> {
    seed_namespaces(cp, cluster).await?;
    seed_contents(cp, cluster).await?;
    seed_registrations(cp, cluster).await
}

/// What the server registers in a cluster besides its contents: the mandatory flow-control
/// objects (`exempt`, `catch-all`) and the local APIServices of the served group versions.
/// A new logical cluster gets them right after it is Ready, as kube-apiserver's
/// autoregistration registers APIServices after it starts serving; every start registers
/// them again for every served cluster.
pub async fn seed_registrations(cp: &ControlPlane, cluster: &str) -> Result<(), ApiError> {
    let mut writes = Vec::new();
    // The mandatory flow-control objects (`exempt`, `catch-all`).
    for (plural, objects) in [
        ("flowschemas", registry::builtins::mandatory_flow_schemas()),
        (
            "prioritylevelconfigurations",
            registry::builtins::mandatory_priority_levels(),
        ),
    ] {
        for obj in objects {
            writes.push(ensure_owned(
                cp,
                cluster,
                "flowcontrol.apiserver.k8s.io",
                plural,
                String::new(),
                obj,
            ));
        }
    }
    writes.push(Box::pin(crate::apiservices::sync(cp, cluster, true)));
    for r in futures::future::join_all(writes).await {
        r?;
    }
    Ok(())
}

/// The namespaces of [`seed`], written concurrently (they share fsyncs).
pub async fn seed_namespaces(cp: &ControlPlane, cluster: &str) -> Result<(), ApiError> {
    let mut writes = Vec::new();
    for ns in NAMESPACES {
        writes.push(ensure_owned(
            cp,
            cluster,
            "",
            "namespaces",
            String::new(),
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
        ));
    }
    for r in futures::future::join_all(writes).await {
        r?;
    }
    Ok(())
}

/// What [`seed`] puts in the namespaces, written concurrently (they share fsyncs).
pub async fn seed_contents(cp: &ControlPlane, cluster: &str) -> Result<(), ApiError> {
    let mut writes = Vec::new();
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
    writes.push(ensure_owned(
        cp,
        cluster,
        "storage.k8s.io",
        "storageclasses",
        String::new(),
        local_storage_class(),
    ));
    // The first address of the service range, reserved like any requested cluster IP. A
    // service that exists already holds it: creating it again would be refused as
    // "already allocated" before "already exists", so it is looked up first.
    writes.push(Box::pin(async move {
        let services = served(cp, "", "services")?;
        let at = Location {
            cluster,
            namespace: "default",
            name: "kubernetes",
        };
        match cp.store.get(&services, &at).await {
            Ok(_) => Ok(()),
            Err(e) if e.reason == Reason::NotFound => {
                ensure(cp, cluster, "", "services", "default", svc).await
            }
            Err(e) => Err(e),
        }
    }));
    // The default service accounts (the serviceaccount controller keeps them; seeding them here
    // makes a new cluster usable at once) and the bootstrap RBAC policy.
    for ns in NAMESPACES {
        let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default", "namespace": ns}});
        writes.push(ensure_owned(
            cp,
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
            writes.push(ensure_owned(cp, cluster, RBAC, plural, ns, obj));
        }
    }
    for r in futures::future::join_all(writes).await {
        r?;
    }
    Ok(())
}

/// The name of the default StorageClass every cluster has.
pub const LOCAL_STORAGE_CLASS: &str = "local";
/// Its provisioner (the PersistentVolume controller provisions for it).
pub const LOCAL_PROVISIONER: &str = "matryoshka.dev/local";

/// The default StorageClass: volumes are provisioned once a pod using the claim is placed.
fn local_storage_class() -> Value {
    json!({
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {
            "name": LOCAL_STORAGE_CLASS,
            "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
        },
        "provisioner": LOCAL_PROVISIONER,
        "reclaimPolicy": "Delete",
        "volumeBindingMode": "WaitForFirstConsumer",
    })
}

/// Upstream's endpoint reconciler for the `default/kubernetes` Service: its Endpoints and
/// EndpointSlice name the address and port where pods reach the API server (the advertise
/// address), so in-cluster clients (`KUBERNETES_SERVICE_HOST`, `10.96.0.1:443`) get through
/// the node's Service rules. Idempotent: an unchanged object is not written again.
pub async fn reconcile_kubernetes_endpoints(
    cp: &ControlPlane,
    cluster: &str,
    ip: std::net::IpAddr,
    port: u16,
) -> Result<(), ApiError> {
    let family = if ip.is_ipv4() { "IPv4" } else { "IPv6" };
    let ports = json!([{"name": "https", "port": port, "protocol": "TCP"}]);
    let wanted = [
        (
            "",
            "endpoints",
            json!({
                "apiVersion": "v1",
                "kind": "Endpoints",
                "metadata": {"name": "kubernetes", "namespace": "default",
                    "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"}},
                "subsets": [{"addresses": [{"ip": ip.to_string()}], "ports": ports}],
            }),
        ),
        (
            "discovery.k8s.io",
            "endpointslices",
            json!({
                "apiVersion": "discovery.k8s.io/v1",
                "kind": "EndpointSlice",
                "metadata": {"name": "kubernetes", "namespace": "default",
                    "labels": {"kubernetes.io/service-name": "kubernetes"}},
                "addressType": family,
                "endpoints": [{"addresses": [ip.to_string()], "conditions": {"ready": true}}],
                "ports": ports,
            }),
        ),
    ];
    for (group, plural, obj) in wanted {
        let res = served(cp, group, plural)?;
        let at = Location {
            cluster,
            namespace: "default",
            name: "kubernetes",
        };
        cp.store
            .update_with(&res, &at, &WriteOptions::default(), |cur| {
                let mut next = obj.clone();
                if let Some(cur) = cur {
                    // Keep what others added to the metadata (owner references, labels).
                    let mut meta = apimachinery::meta::metadata(cur).clone();
                    for (k, v) in apimachinery::meta::metadata(&obj) {
                        if k == "labels" {
                            let labels = meta.entry("labels").or_insert_with(|| json!({}));
                            if let (Some(have), Some(want)) =
                                (labels.as_object_mut(), v.as_object())
                            {
                                have.extend(want.clone());
                            }
                        } else {
                            meta.insert(k.clone(), v.clone());
                        }
                    }
                    meta.remove("resourceVersion");
                    next["metadata"] = Value::Object(meta);
                }
                Ok(next)
            })
            .await?;
    }
    Ok(())
}
