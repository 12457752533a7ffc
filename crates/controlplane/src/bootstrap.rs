//! Objects every cluster has from its first moment: the system namespaces, the
//! `default/kubernetes` Service (upstream's bootstrap controllers do the same in
//! kube-apiserver) and the default StorageClass `local`, whose volumes the controllers'
//! built-in provisioner creates; the bootstrap RBAC policy, the mandatory flow-control objects
//! and the local APIServices.

use apimachinery::status::{ApiError, Reason};
use registry::store::{Location, WriteOptions};
use serde_json::{Value, json};

use crate::ControlPlane;
use apimachinery::cluster;

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

/// The label of the Leases by which API server replicas say where pods reach them (upstream's
/// lease endpoint reconciler keeps `/masterleases/<ip>` keys with a TTL; here they are Leases
/// in the root cluster's `kube-system`, one per replica, renewed every 10 s).
pub const ENDPOINT_LEASE_LABEL: &str = "apiserver.matryoshka.dev/endpoint-lease";
/// On such a Lease: the replica's advertise address and port.
pub const ENDPOINT_ANNOTATION: &str = "apiserver.matryoshka.dev/endpoint";
/// How long an endpoint Lease counts after its last renewal (upstream's master lease TTL).
pub const ENDPOINT_LEASE_SECONDS: i64 = 15;
const NODE_SYSTEM: &str = "kube-system";

/// The Lease a replica of identity `identity` announces itself with.
fn endpoint_lease_name(identity: &str) -> String {
    let mut name: String = identity
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .take(200)
        .collect();
    name = name.trim_matches('-').to_string();
    format!("matryoshka-apiserver-{name}")
}

/// Renews this replica's endpoint Lease: pods reach it at `at`.
pub async fn renew_endpoint_lease(
    cp: &ControlPlane,
    identity: &str,
    at: std::net::SocketAddr,
) -> Result<(), ApiError> {
    let res = served(cp, "coordination.k8s.io", "leases")?;
    let name = endpoint_lease_name(identity);
    let lease = json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name, "namespace": NODE_SYSTEM,
            "labels": {ENDPOINT_LEASE_LABEL: "true"},
            "annotations": {ENDPOINT_ANNOTATION: at.to_string()}},
        "spec": {
            "holderIdentity": identity,
            "leaseDurationSeconds": ENDPOINT_LEASE_SECONDS,
            "renewTime": apimachinery::time::format_micro_time(jiff::Timestamp::now()),
        },
    });
    let loc = Location {
        cluster: cluster::ROOT,
        namespace: NODE_SYSTEM,
        name: &name,
    };
    cp.store
        .update_with(&res, &loc, &WriteOptions::default(), |cur| {
            let mut next = lease.clone();
            if let Some(cur) = cur {
                next["metadata"]["resourceVersion"] = cur["metadata"]["resourceVersion"].clone();
            }
            Ok(next)
        })
        .await?;
    Ok(())
}

/// The addresses of the replicas whose endpoint Lease is current, in order.
pub fn live_endpoints(cp: &ControlPlane) -> Vec<std::net::SocketAddr> {
    let filter = registry::cache::Filter {
        cluster: Some(cluster::ROOT.to_string()),
        namespace: Some(NODE_SYSTEM.to_string()),
        predicate: None,
    };
    let now = jiff::Timestamp::now();
    let (leases, _) = cp
        .store
        .shared_cache()
        .list("coordination.k8s.io", "leases", &filter);
    let mut out: Vec<std::net::SocketAddr> = leases
        .iter()
        .filter_map(|l| {
            let v = l.value();
            apimachinery::meta::label(&v, ENDPOINT_LEASE_LABEL)?;
            let renewed =
                apimachinery::time::parse_rfc3339(v.pointer("/spec/renewTime")?.as_str()?)?;
            let secs = v
                .pointer("/spec/leaseDurationSeconds")
                .and_then(Value::as_i64)
                .unwrap_or(ENDPOINT_LEASE_SECONDS);
            if renewed + jiff::SignedDuration::from_secs(secs) < now {
                return None;
            }
            apimachinery::meta::annotation(&v, ENDPOINT_ANNOTATION)?
                .parse()
                .ok()
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Upstream's endpoint reconciler for the `default/kubernetes` Service: its Endpoints and
/// EndpointSlices name the addresses and ports where pods reach the API server's replicas
/// (their advertise addresses), so in-cluster clients (`KUBERNETES_SERVICE_HOST`,
/// `10.96.0.1:443`) get through the node's Service rules to any live replica. Replicas
/// normally share a port; those on other ports get a subset and an EndpointSlice
/// `kubernetes-<port>` each. Idempotent: an unchanged object is not written again.
pub async fn reconcile_kubernetes_endpoints(
    cp: &ControlPlane,
    cluster: &str,
    at: &[std::net::SocketAddr],
) -> Result<(), ApiError> {
    let mut by_port: std::collections::BTreeMap<u16, Vec<String>> = Default::default();
    for a in at {
        by_port
            .entry(a.port())
            .or_default()
            .push(a.ip().to_string());
    }
    let Some(first_port) = by_port.keys().next().copied() else {
        return Ok(());
    };
    let ports = |port: u16| json!([{"name": "https", "port": port, "protocol": "TCP"}]);
    let subsets: Vec<Value> = by_port
        .iter()
        .map(|(port, ips)| {
            json!({"addresses": ips.iter().map(|ip| json!({"ip": ip})).collect::<Vec<_>>(), "ports": ports(*port)})
        })
        .collect();
    let mut wanted = vec![(
        "",
        "endpoints",
        json!({
            "apiVersion": "v1",
            "kind": "Endpoints",
            "metadata": {"name": "kubernetes", "namespace": "default",
                "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"}},
            "subsets": subsets,
        }),
    )];
    for (port, ips) in &by_port {
        let family = if ips[0].contains(':') { "IPv6" } else { "IPv4" };
        let name = if *port == first_port {
            "kubernetes".to_string()
        } else {
            format!("kubernetes-{port}")
        };
        wanted.push((
            "discovery.k8s.io",
            "endpointslices",
            json!({
                "apiVersion": "discovery.k8s.io/v1",
                "kind": "EndpointSlice",
                "metadata": {"name": name, "namespace": "default",
                    "labels": {"kubernetes.io/service-name": "kubernetes"}},
                "addressType": family,
                "endpoints": ips.iter().map(|ip| json!({"addresses": [ip], "conditions": {"ready": true}})).collect::<Vec<_>>(),
                "ports": ports(*port),
            }),
        ));
    }
    // Slices of ports no replica serves any more go.
    let slices = served(cp, "discovery.k8s.io", "endpointslices")?;
    let filter = registry::cache::Filter {
        cluster: Some(cluster.to_string()),
        namespace: Some("default".to_string()),
        predicate: None,
    };
    let (present, _) =
        cp.store
            .cache_for_reads(cluster)
            .list("discovery.k8s.io", "endpointslices", &filter);
    for s in present {
        let name = s.name();
        let stale = name.strip_prefix("kubernetes-").is_some_and(|p| {
            p.parse::<u16>()
                .is_ok_and(|p| p == first_port || !by_port.contains_key(&p))
        }) && apimachinery::meta::label(&s.value(), "kubernetes.io/service-name")
            == Some("kubernetes");
        if stale {
            let at = Location {
                cluster,
                namespace: "default",
                name,
            };
            match cp.store.delete(&slices, &at, &Default::default()).await {
                Ok(_) => {}
                Err(e) if e.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
    }
    for (group, plural, obj) in wanted {
        let name = obj["metadata"]["name"]
            .as_str()
            .unwrap_or("kubernetes")
            .to_string();
        let res = served(cp, group, plural)?;
        let at = Location {
            cluster,
            namespace: "default",
            name: &name,
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
