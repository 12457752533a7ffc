//! APIService registration (kube-aggregator's autoregister and CRD registration controllers,
//! and its availability controller, for what this server can honestly say).
//!
//! Every cluster has a local APIService per group version it serves (`v1.`, `v1.apps`,
//! `v2.autoscaling`, `v1.stable.example.com`...), with upstream's group and version priorities;
//! `kubectl get apiservices` lists them `Local` and available (the strategy fills in that
//! status when they are read). Built-in group versions are registered when the cluster is
//! seeded and again for every served cluster when the server starts (labelled
//! `automanaged: onstart`, as upstream's start-time registration: one deleted comes back at
//! the next start, or when the cluster's CRDs next change), a CRD's when the CRD is served and
//! removed with it (`automanaged: "true"`).
//!
//! An APIService naming a Service is stored and validated, but this server does not proxy to
//! aggregated API servers: its status says so (`Available=False`, `ServiceNotFound` when the
//! Service is missing, `FailedDiscoveryCheck` otherwise), and its group is not served.

use std::collections::BTreeMap;
use std::sync::Arc;

use apimachinery::meta;
use apimachinery::status::{ApiError, Reason};
use registry::cache::Filter;
use registry::store::{DeleteOptions, Location, WriteOptions};
use serde_json::{Value, json};

use crate::ControlPlane;

pub const GROUP: &str = "apiregistration.k8s.io";
pub const PLURAL: &str = "apiservices";
/// The label marking APIServices this server manages.
pub const AUTOMANAGED: &str = "kube-aggregator.kubernetes.io/automanaged";

/// Upstream's group and version priorities of the built-in group versions (kube-apiserver's
/// `apiVersionPriorities`); a group version not listed is a custom one.
const PRIORITIES: &[(&str, &str, i64, i64)] = &[
    ("", "v1", 18000, 1),
    ("apps", "v1", 17800, 15),
    ("events.k8s.io", "v1", 17750, 15),
    ("authentication.k8s.io", "v1", 17700, 15),
    ("authorization.k8s.io", "v1", 17600, 15),
    ("autoscaling", "v2", 17500, 30),
    ("autoscaling", "v1", 17500, 15),
    ("batch", "v1", 17400, 15),
    ("certificates.k8s.io", "v1", 17300, 15),
    ("networking.k8s.io", "v1", 17200, 15),
    ("policy", "v1", 17100, 15),
    ("rbac.authorization.k8s.io", "v1", 17000, 15),
    ("storage.k8s.io", "v1", 16800, 15),
    ("apiextensions.k8s.io", "v1", 16700, 15),
    ("admissionregistration.k8s.io", "v1", 16700, 15),
    ("scheduling.k8s.io", "v1", 16600, 15),
    ("coordination.k8s.io", "v1", 16500, 15),
    ("node.k8s.io", "v1", 16300, 15),
    ("discovery.k8s.io", "v1", 16200, 15),
    ("flowcontrol.apiserver.k8s.io", "v1", 16100, 21),
    // metrics-server registers itself with these.
    ("metrics.k8s.io", "v1beta1", 100, 100),
];

/// Priorities of a CRD's group versions (upstream's CRD registration controller).
const CUSTOM_PRIORITY: (i64, i64) = (1000, 100);

/// The name of a group version's APIService: `<version>.<group>`.
pub fn name(group: &str, version: &str) -> String {
    format!("{version}.{group}")
}

/// The local APIServices `cluster` should have, by name, with their `automanaged` label.
fn desired(cp: &ControlPlane, cluster: &str) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    for r in cp.catalog.all(cluster) {
        if r.group == GROUP {
            continue;
        }
        let known = PRIORITIES
            .iter()
            .find(|(g, v, _, _)| *g == r.group && *v == r.version);
        let ((gpm, vp), managed) = match known {
            Some((_, _, g, v)) => ((*g, *v), "onstart"),
            None => (CUSTOM_PRIORITY, "true"),
        };
        let n = name(&r.group, &r.version);
        out.entry(n.clone()).or_insert_with(|| {
            json!({
                "apiVersion": "apiregistration.k8s.io/v1",
                "kind": "APIService",
                "metadata": {"name": n, "labels": {AUTOMANAGED: managed}},
                "spec": {
                    "group": r.group,
                    "version": r.version,
                    "groupPriorityMinimum": gpm,
                    "versionPriority": vp,
                },
            })
        });
    }
    out
}

fn resource(cp: &ControlPlane) -> Result<Arc<registry::ResourceDef>, ApiError> {
    cp.catalog
        .builtin(GROUP, PLURAL)
        .ok_or_else(|| ApiError::internal("apiservices are not served"))
}

/// Registers the local APIServices `cluster` lacks. With `seeding`, only built-in group
/// versions are registered when absent (a new cluster); otherwise CRD group versions are also
/// brought in line: missing ones created, those of CRDs no longer served deleted.
pub async fn sync(cp: &ControlPlane, cluster: &str, seeding: bool) -> Result<(), ApiError> {
    if !crate::clusters::live(cp, cluster) {
        return Ok(());
    }
    let res = resource(cp)?;
    let want = desired(cp, cluster);
    let filter = Filter {
        cluster: Some(cluster.to_string()),
        ..Filter::default()
    };
    let have: BTreeMap<String, Arc<Value>> = cp
        .store
        .cache_for_reads(cluster)
        .list(GROUP, PLURAL, &filter)
        .0
        .iter()
        .map(|o| {
            let v = o.value();
            (meta::name(&v).to_string(), v)
        })
        .collect();
    let mut writes = Vec::new();
    for (n, obj) in &want {
        let managed = obj.pointer(&format!(
            "/metadata/labels/{}",
            AUTOMANAGED.replace('/', "~1")
        ));
        if have.contains_key(n) || (seeding && managed == Some(&json!("true"))) {
            continue;
        }
        let res = res.clone();
        writes.push(Box::pin(async move {
            let loc = Location {
                cluster,
                namespace: "",
                name: "",
            };
            match cp
                .store
                .create(&res, &loc, obj.clone(), &WriteOptions::default())
                .await
            {
                Ok(_) => Ok(()),
                Err(e) if e.reason == Reason::AlreadyExists => Ok(()),
                Err(e) => Err(e),
            }
        })
            as std::pin::Pin<
                Box<dyn std::future::Future<Output = Result<(), ApiError>> + Send>,
            >);
    }
    if !seeding {
        for (n, obj) in &have {
            let custom = obj
                .pointer("/metadata/labels")
                .and_then(|l| l.get(AUTOMANAGED))
                == Some(&json!("true"));
            if !custom || want.contains_key(n) {
                continue;
            }
            let (res, n) = (res.clone(), n.clone());
            writes.push(Box::pin(async move {
                let loc = Location {
                    cluster,
                    namespace: "",
                    name: &n,
                };
                match cp.store.delete(&res, &loc, &DeleteOptions::default()).await {
                    Ok(_) => Ok(()),
                    Err(e) if e.code == 404 => Ok(()),
                    Err(e) => Err(e),
                }
            }));
        }
    }
    for r in futures::future::join_all(writes).await {
        r?;
    }
    Ok(())
}

/// The `Available` condition of a remote APIService: never true, since nothing is proxied.
fn remote_condition(cp: &ControlPlane, cluster: &str, obj: &Value) -> (String, String) {
    let field = |p: &str| obj.pointer(p).and_then(Value::as_str).unwrap_or_default();
    let (ns, svc) = (
        field("/spec/service/namespace"),
        field("/spec/service/name"),
    );
    let filter = Filter {
        cluster: Some(cluster.to_string()),
        namespace: Some(ns.to_string()),
        ..Filter::default()
    };
    let exists = !ns.is_empty()
        && cp
            .store
            .cache_for_reads(cluster)
            .list("", "services", &filter)
            .0
            .iter()
            .any(|o| meta::name(&o.value()) == svc);
    if exists {
        (
            "FailedDiscoveryCheck".into(),
            format!(
                "service {ns}/{svc} exists, but this server does not proxy to aggregated API servers"
            ),
        )
    } else {
        (
            "ServiceNotFound".into(),
            format!("service/{svc} in {ns:?} is not present"),
        )
    }
}

/// Writes the status of a remote APIService when it changed.
async fn report(cp: &ControlPlane, cluster: &str, obj: &Value) -> Result<(), ApiError> {
    if !crate::clusters::live(cp, cluster) {
        return Ok(());
    }
    if registry::builtins::is_local(obj) {
        return Ok(());
    }
    let (reason, message) = remote_condition(cp, cluster, obj);
    let current = obj
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Available"));
    if current.is_some_and(|c| {
        c["status"] == "False" && c["reason"] == reason.as_str() && c["message"] == message.as_str()
    }) {
        return Ok(());
    }
    let res = resource(cp)?;
    let n = meta::name(obj).to_string();
    let loc = Location {
        cluster,
        namespace: "",
        name: &n,
    };
    let now = registry::store::now();
    let opts = WriteOptions {
        subresource: Some("status".into()),
        ..WriteOptions::default()
    };
    let result = cp
        .store
        .update_with(&res, &loc, &opts, |cur| {
            let mut next = cur
                .cloned()
                .ok_or_else(|| ApiError::not_found(PLURAL, GROUP, &n))?;
            next["status"] = json!({"conditions": [{
                "type": "Available",
                "status": "False",
                "lastTransitionTime": now,
                "reason": reason,
                "message": message,
            }]});
            Ok(next)
        })
        .await;
    match result {
        Ok(_) => Ok(()),
        Err(e) if e.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

/// Registers every served cluster's built-in group versions (upstream registers its
/// `onstart` APIServices at every start); the root cluster is seeded by the caller.
pub async fn register_on_start(cp: &ControlPlane) {
    // What is registered is read from the cache: let it catch up with storage first.
    cp.store.wait_for_cache().await;
    for cluster in crate::clusters::served(cp) {
        if let Err(e) = crate::bootstrap::seed_registrations(cp, &cluster).await {
            tracing::warn!(cluster = %cluster, error = %e, "registering APIServices and flow control failed");
        }
    }
}

/// Registers the built-in APIServices of every served cluster, then runs the availability
/// loop over every cluster's APIServices.
/// A singleton: it writes only where the control plane leads, and registers and reports
/// everything again when it gains leadership.
pub fn start(cp: &Arc<ControlPlane>) -> Result<(), ApiError> {
    let mut follow = cp
        .store
        .follow_every_shard(GROUP, PLURAL, Filter::default())?;
    let mut leadership = cp.leadership();
    let weak = Arc::downgrade(cp);
    tokio::spawn(async move {
        if let Some(cp) = weak.upgrade()
            && cp.leads()
        {
            register_on_start(&cp).await;
        }
        loop {
            let (ty, obj) = tokio::select! {
                event = follow.recv() => event,
                gained = crate::gained_leadership(&mut leadership) => {
                    if gained.is_none() {
                        return;
                    }
                    let Some(cp) = weak.upgrade() else { return };
                    register_on_start(&cp).await;
                    let all = cp.store.list_every_shard(GROUP, PLURAL, &Filter::default());
                    for obj in all {
                        let value = obj.value();
                        if let Err(e) = report(&cp, &obj.cluster, &value).await {
                            tracing::warn!(cluster = %obj.cluster, apiservice = meta::name(&value), error = %e, "APIService status failed");
                        }
                    }
                    continue;
                }
            };
            let Some(cp) = weak.upgrade() else { return };
            if ty == registry::cache::EventType::Deleted || !cp.leads() {
                continue;
            }
            let value = obj.value();
            if let Err(e) = report(&cp, &obj.cluster, &value).await {
                tracing::warn!(cluster = %obj.cluster, apiservice = meta::name(&value), error = %e, "APIService status failed");
            }
        }
    });
    Ok(())
}
