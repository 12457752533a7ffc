//! Logical clusters: the `LogicalCluster` resource of the root cluster and the provisioner that
//! turns one into a served cluster, and tears it down on delete.
//!
//! Provisioning a cluster: its own CA and service-account signing key (kept in the root
//! cluster's Secret `matryoshka-system/<name>-pki`), the seeded objects (namespaces, the
//! `kubernetes` Service, `kube-root-ca.crt`), an admin kubeconfig in the Secret
//! `matryoshka-system/<name>-admin-kubeconfig`, then `status.phase: Ready`; right after it the
//! server's registrations (local APIServices, mandatory flow-control objects), as
//! kube-apiserver registers them once it serves. Only a Ready cluster is served. Deleting the LogicalCluster deletes every key under the cluster's prefix
//! and its credentials (a finalizer makes the cleanup survive a crash).
//!
//! The provisioner is a loop inside the API server fed by the watch cache — one task for every
//! cluster, whatever their number.

use std::sync::Arc;

use apimachinery::builtin::{ALL, Resource, Subresource};
use apimachinery::meta;
use apimachinery::status::{ApiError, Reason};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use registry::cache::{EventType, Filter, Follow};
use registry::store::{Location, WriteOptions};
use registry::{ResourceDef, Strategy};
use serde_json::{Value, json};

use crate::ControlPlane;
use crate::trust::{SYSTEM_NAMESPACE, pki_secret_name};
use apimachinery::cluster;
use pki::Ca;

pub const GROUP: &str = "core.matryoshka.dev";
pub const VERSION: &str = "v1alpha1";
pub const PLURAL: &str = "logicalclusters";
/// Holds a LogicalCluster until its keyspace and credentials are gone.
pub const FINALIZER: &str = "core.matryoshka.dev/cleanup";

static LOGICAL_CLUSTERS: Resource = Resource {
    group: GROUP,
    version: VERSION,
    kind: "LogicalCluster",
    plural: PLURAL,
    singular: "logicalcluster",
    namespaced: false,
    short_names: &["lc"],
    categories: &[],
    verbs: ALL,
    subresources: &[
        Subresource {
            name: "status",
            group: GROUP,
            version: VERSION,
            kind: "LogicalCluster",
            verbs: &["get", "patch", "update"],
        },
        // A backup of the cluster ([`crate::backup`]), streamed as JSON lines.
        Subresource {
            name: "snapshot",
            group: GROUP,
            version: VERSION,
            kind: "LogicalClusterSnapshot",
            verbs: &["get"],
        },
        // One chunk of a restore into a new cluster of that name.
        Subresource {
            name: "restore",
            group: GROUP,
            version: VERSION,
            kind: "LogicalClusterRestore",
            verbs: &["create"],
        },
        // Moving the cluster's keys to another datastore ([`crate::moves`]).
        Subresource {
            name: "move",
            group: GROUP,
            version: VERSION,
            kind: "LogicalClusterMove",
            verbs: &["create"],
        },
    ],
};

/// Names that are not clusters.
const RESERVED: &[&str] = &[cluster::ROOT, "*", "system"];

struct LogicalClusterStrategy;

impl Strategy for LogicalClusterStrategy {
    fn validate_update(&self, new: &Value, old: &Value) -> apimachinery::ErrorList {
        let mut errs = self.validate(new);
        // The binding changes only as the last step of a move (`crate::moves`).
        if !crate::moves::is_switch(new, old) {
            crate::datastores::validate_binding_update(new, old, &mut errs);
        }
        errs
    }

    fn name_rule(&self) -> apimachinery::validation::NameRule {
        apimachinery::validation::NameRule::DnsLabel
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        obj["status"] = json!({"phase": "Provisioning"});
        let mut f = meta::finalizers(obj);
        if !f.iter().any(|x| x == FINALIZER) {
            f.push(FINALIZER.into());
        }
        meta::set_finalizers(obj, f);
    }

    fn validate(&self, obj: &Value) -> apimachinery::ErrorList {
        let mut errs = apimachinery::ErrorList::new();
        let name = meta::name(obj);
        if RESERVED.contains(&name) {
            errs.push(apimachinery::FieldError::invalid(
                "metadata.name",
                json!(name),
                "the name is reserved",
            ));
        }
        if let Some(config) = obj.pointer("/spec/authentication") {
            match apimachinery::authn_config::parse_authentication_config(config) {
                Err(e) => errs.push(apimachinery::FieldError::invalid(
                    "spec.authentication",
                    json!("AuthenticationConfiguration"),
                    e,
                )),
                Ok(issuers) => {
                    for e in issuers.iter().flat_map(|i| i.expressions()) {
                        if let Err(why) = crate::admission::cel::compile(e) {
                            errs.push(apimachinery::FieldError::invalid(
                                "spec.authentication",
                                json!(e),
                                why,
                            ));
                        }
                    }
                }
            }
        }
        crate::datastores::validate_binding(obj, &mut errs);
        if let Some(hosts) = obj.pointer("/spec/hostnames") {
            match hosts.as_array() {
                None => errs.push(apimachinery::FieldError::invalid(
                    "spec.hostnames",
                    hosts.clone(),
                    "must be a list of DNS names",
                )),
                Some(list) if list.len() > crate::hosts::MAX_HOSTNAMES => {
                    errs.push(apimachinery::FieldError::too_many(
                        "spec.hostnames",
                        list.len(),
                        crate::hosts::MAX_HOSTNAMES,
                    ))
                }
                Some(list) => {
                    for (i, h) in list.iter().enumerate() {
                        let why = match h.as_str() {
                            Some(s) => apimachinery::validation::is_dns1123_subdomain(s),
                            None => vec!["must be a string".to_string()],
                        };
                        for w in why {
                            errs.push(apimachinery::FieldError::invalid(
                                format!("spec.hostnames[{i}]"),
                                h.clone(),
                                w,
                            ));
                        }
                    }
                }
            }
        }
        errs
    }
}

/// The served LogicalCluster resource (root cluster only).
pub fn logical_cluster_resource() -> ResourceDef {
    let mut def = ResourceDef::builtin(&LOGICAL_CLUSTERS, Arc::new(LogicalClusterStrategy), None);
    def.root_only = true;
    def
}

fn store_err(e: ApiError) -> ApiError {
    e
}

/// Creates `obj` unless an object of its name exists (which is kept).
pub(crate) async fn create_or_keep(
    cp: &ControlPlane,
    cluster: &str,
    group: &str,
    plural: &str,
    ns: &str,
    obj: Value,
) -> Result<(), ApiError> {
    let res = cp
        .catalog
        .builtin(group, plural)
        .ok_or_else(|| ApiError::internal(format!("{plural} is not served")))?;
    let loc = Location {
        cluster,
        namespace: ns,
        name: "",
    };
    match cp
        .store
        .create(&res, &loc, obj, &WriteOptions::default())
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if e.reason == Reason::AlreadyExists => Ok(()),
        Err(e) => Err(store_err(e)),
    }
}

fn secret(name: &str, data: &[(&str, &[u8])], labels: Value) -> Value {
    let data: serde_json::Map<String, Value> = data
        .iter()
        .map(|(k, v)| (k.to_string(), json!(STANDARD.encode(v))))
        .collect();
    json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": SYSTEM_NAMESPACE, "labels": labels},
        "type": "Opaque",
        "data": data,
    })
}

/// The URL a cluster is served at.
pub fn cluster_url(cp: &ControlPlane, cluster: &str) -> String {
    format!("{}/clusters/{cluster}", cp.config.external_url)
}

/// The name of the Secret holding a logical cluster's admin kubeconfig.
pub fn admin_kubeconfig_name(cluster: &str) -> String {
    format!("{cluster}-admin-kubeconfig")
}

/// The Secret `matryoshka-system/<name>-admin-kubeconfig`: `admin.conf` with a fresh client
/// certificate of `system:masters` issued by the cluster's CA, valid for the configured
/// client-certificate lifetime. Clients verify the server with the serving CA (one server
/// serves every cluster); the cluster's own CA only issues its client certificates.
pub(crate) fn admin_kubeconfig_secret(
    cp: &ControlPlane,
    name: &str,
    ca: &Ca,
) -> Result<Value, ApiError> {
    let admin = ca
        .issue_client_for(
            "kubernetes-admin",
            &["system:masters"],
            cp.config.rotation.client_cert_validity,
        )
        .map_err(ApiError::internal)?;
    let kubeconfig = pki::kubeconfig(
        name,
        &cluster_url(cp, name),
        &cp.config.root_ca.cert_pem,
        "kubernetes-admin",
        &admin,
    );
    Ok(secret(
        &admin_kubeconfig_name(name),
        &[("admin.conf", kubeconfig.as_bytes())],
        json!({"core.matryoshka.dev/cluster": name}),
    ))
}

/// Makes a LogicalCluster served: credentials, seeded objects, admin kubeconfig, Ready.
pub async fn provision(cp: &ControlPlane, name: &str) -> Result<(), ApiError> {
    // 1. Credentials (kept when they exist: re-provisioning must not rotate the CA), the
    // seeded objects and the admin kubeconfig, all written concurrently so they share fsyncs.
    // The cluster is served once Ready, which is written last: the watch cache applies events
    // in revision order, so by then its credentials are loaded.
    let existing = cp.trust(name).is_some();
    let (ca, pki) = if existing {
        (ca_of(cp, name)?, None)
    } else {
        let ca = Ca::generate(&format!("{name}-ca")).map_err(ApiError::internal)?;
        let sa = crate::jwt::SigningKey::generate_pkcs8().map_err(ApiError::internal)?;
        let mut s = secret(
            &pki_secret_name(name),
            &[
                ("ca.crt", ca.pair.cert_pem.as_bytes()),
                ("ca.key", ca.pair.key_pem.as_bytes()),
                (crate::trust::SA_KEY, &sa),
            ],
            json!({"core.matryoshka.dev/cluster": name}),
        );
        s["metadata"]["annotations"] = json!({
            crate::trust::SA_KEY_SINCE: registry::store::unix_now().to_string(),
        });
        (ca, Some(s))
    };
    let serving_ca = cp.config.root_ca.cert_pem.clone();
    let kc = admin_kubeconfig_secret(cp, name, &ca)?;
    let pki_write = async {
        match pki {
            Some(s) => create_or_keep(cp, cluster::ROOT, "", "secrets", SYSTEM_NAMESPACE, s).await,
            None => Ok(()),
        }
    };
    let (pki_done, namespaces, kc_done) = futures::join!(
        pki_write,
        crate::bootstrap::seed_namespaces(cp, name),
        create_or_keep(cp, cluster::ROOT, "", "secrets", SYSTEM_NAMESPACE, kc),
    );
    pki_done?;
    namespaces?;
    kc_done?;
    let ca_cm = |ns: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kube-root-ca.crt", "namespace": ns}, "data": {"ca.crt": serving_ca}});
    let configmaps = futures::future::join_all(
        crate::bootstrap::NAMESPACES
            .iter()
            .map(|ns| create_or_keep(cp, name, "", "configmaps", ns, ca_cm(ns))),
    );
    let (seeded, cms) = futures::join!(crate::bootstrap::seed_contents(cp, name), configmaps);
    seeded?;
    for r in cms {
        r?;
    }
    // A racing provisioner may have stored other credentials first (kept by create_or_keep):
    // the kubeconfig just written would then not authenticate, so start over.
    cp.store.wait_for_cache().await;
    match cp.trust(name) {
        Some(t) if t.ca_pem == ca.pair.cert_pem => {}
        _ => {
            return Err(ApiError::internal(
                "the new cluster's credentials did not load",
            ));
        }
    }
    // 4. Ready.
    let res = cp
        .catalog
        .lookup(cluster::ROOT, GROUP, VERSION, PLURAL)
        .ok_or_else(|| ApiError::internal("LogicalCluster is not served"))?;
    let loc = Location {
        cluster: cluster::ROOT,
        namespace: "",
        name,
    };
    let url = cluster_url(cp, name);
    let ca_b64 = STANDARD.encode(serving_ca.as_bytes());
    let opts = WriteOptions {
        dry_run: false,
        subresource: Some("status".into()),
        ..Default::default()
    };
    cp
        .store
        .update_with(&res, &loc, &opts, |cur| {
            let mut next = cur.cloned().ok_or_else(|| ApiError::not_found(PLURAL, GROUP, name))?;
            meta::remove(&mut next, "resourceVersion");
            next["status"] = json!({
                "phase": "Ready",
                "url": url,
                "caBundle": ca_b64,
                "conditions": [{"type": "Ready", "status": "True", "reason": "Provisioned", "lastTransitionTime": registry::store::now()}],
            });
            Ok(next)
        })
        .await?;
    tracing::info!(cluster = name, "logical cluster ready");
    // 5. Registrations (APIServices, flow control), off the path to Ready; a start repairs
    // what a crash here left out.
    if let Err(e) = crate::bootstrap::seed_registrations(cp, name).await {
        tracing::warn!(cluster = name, error = %e, "registering APIServices and flow control failed");
    }
    Ok(())
}

/// The CA (with key) of a provisioned cluster.
pub fn ca_of(cp: &ControlPlane, name: &str) -> Result<Ca, ApiError> {
    if name == cluster::ROOT {
        return Ok(Ca {
            pair: cp.config.root_ca.clone(),
        });
    }
    let s = cp
        .store
        .shared_cache()
        .get(
            "",
            "secrets",
            cluster::ROOT,
            SYSTEM_NAMESPACE,
            &pki_secret_name(name),
        )
        .ok_or_else(|| ApiError::internal(format!("cluster {name} has no credentials")))?;
    let s = s.value();
    let field = |k: &str| {
        s.get("data")
            .and_then(|d| d.get(k))
            .and_then(Value::as_str)
            .and_then(|v| STANDARD.decode(v).ok())
            .and_then(|b| String::from_utf8(b).ok())
    };
    Ok(Ca {
        pair: pki::CertPair {
            cert_pem: field("ca.crt").ok_or_else(|| ApiError::internal("no ca.crt"))?,
            key_pem: field("ca.key").ok_or_else(|| ApiError::internal("no ca.key"))?,
        },
    })
}

/// Deletes the keys of a cluster whose LogicalCluster is gone again: a loop that decided to
/// write before the deletion began may have written after its keys were removed.
async fn sweep(cp: &ControlPlane, name: &str) {
    let prefix = registry::key::cluster(name);
    let shard = match cp.store.shard(name) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(cluster = %name, error = %e, "sweeping a deleted cluster's keys");
            return;
        }
    };
    match shard.storage.delete_prefix(prefix.as_bytes()).await {
        Ok(0) => {}
        Ok(n) => {
            tracing::warn!(cluster = %name, keys = n, "removed keys written after the cluster's deletion began")
        }
        Err(e) => tracing::warn!(cluster = %name, error = %e, "sweeping a deleted cluster's keys"),
    }
}

/// Removes everything of a deleted cluster, then lets its LogicalCluster go.
pub async fn cleanup(cp: &ControlPlane, name: &str) -> Result<(), ApiError> {
    let prefix = registry::key::cluster(name);
    let deleted = cp
        .store
        .shard(name)?
        .storage
        .delete_prefix(prefix.as_bytes())
        .await
        .map_err(|e| {
            ApiError::service_unavailable(format!("deleting the cluster's keyspace: {e}"))
        })?;
    let secrets = cp
        .catalog
        .builtin("", "secrets")
        .ok_or_else(|| ApiError::internal("secrets are not served"))?;
    for s in [pki_secret_name(name), admin_kubeconfig_name(name)] {
        let loc = Location {
            cluster: cluster::ROOT,
            namespace: SYSTEM_NAMESPACE,
            name: &s,
        };
        match cp.store.delete(&secrets, &loc, &Default::default()).await {
            Ok(_) => {}
            Err(e) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    // Volumes a restore wrote for it (the platform removes those it provisioned).
    crate::backup::volumes::clear(cp, name).await?;
    cp.catalog.remove_cluster(name);
    cp.forget(name);
    let res = cp
        .catalog
        .lookup(cluster::ROOT, GROUP, VERSION, PLURAL)
        .ok_or_else(|| ApiError::internal("LogicalCluster is not served"))?;
    let loc = Location {
        cluster: cluster::ROOT,
        namespace: "",
        name,
    };
    let result = cp
        .store
        .update_with(&res, &loc, &WriteOptions::default(), |cur| {
            let mut next = cur
                .cloned()
                .ok_or_else(|| ApiError::not_found(PLURAL, GROUP, name))?;
            meta::remove(&mut next, "resourceVersion");
            let f: Vec<String> = meta::finalizers(&next)
                .into_iter()
                .filter(|f| f != FINALIZER)
                .collect();
            meta::set_finalizers(&mut next, f);
            Ok(next)
        })
        .await;
    match result {
        Ok(_) => {}
        Err(e) if e.code == 404 => {}
        Err(e) => return Err(e),
    }
    tracing::info!(cluster = name, keys = deleted, "logical cluster deleted");
    Ok(())
}

/// How many clusters are provisioned at once.
const PARALLEL_PROVISIONING: usize = 32;

/// Brings one cluster to its desired state: provisioned, or cleaned up when being deleted.
async fn reconcile(cp: &ControlPlane, name: &str) -> Result<(), ApiError> {
    let Some(obj) = cp
        .store
        .shared_cache()
        .get(GROUP, PLURAL, cluster::ROOT, "", name)
    else {
        return Ok(());
    };
    let obj = obj.value();
    if meta::deletion_timestamp(&obj).is_some() {
        cleanup(cp, name).await
    } else if crate::backup::restoring(&obj) {
        // Provisioned once its restore has written every key.
        Ok(())
    } else if obj.pointer("/status/phase").and_then(Value::as_str) != Some("Ready") {
        provision(cp, name).await
    } else {
        Ok(())
    }
}

/// Starts the provisioner: every LogicalCluster that is not Ready is provisioned, every one
/// being deleted is cleaned up, now and whenever one changes.
pub async fn start(cp: Arc<ControlPlane>) -> Result<(), ApiError> {
    create_or_keep(
        &cp,
        cluster::ROOT,
        "",
        "namespaces",
        "",
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SYSTEM_NAMESPACE}}),
    )
    .await?;
    let filter = Filter {
        cluster: Some(cluster::ROOT.into()),
        ..Filter::default()
    };
    let mut follow = Follow::new(cp.store.shared_cache(), GROUP, PLURAL, filter.clone())?;
    let mut leadership = cp.leadership();
    let weak = Arc::downgrade(&cp);
    // Clusters are provisioned concurrently (bounded), each by one task at a time: an event for
    // a cluster already being worked on marks it for another pass.
    let running: Arc<parking_lot::Mutex<std::collections::HashMap<String, bool>>> = Arc::default();
    let permits = Arc::new(tokio::sync::Semaphore::new(PARALLEL_PROVISIONING));
    let moves: Arc<crate::moves::Running> = Arc::default();
    tokio::spawn(async move {
        let mut todo: Vec<String> = Vec::new();
        // Each cluster's datastore as last seen: a change is a finished move.
        let mut bound: std::collections::HashMap<String, String> = Default::default();
        loop {
            if todo.is_empty() {
                tokio::select! {
                    (ty, obj) = follow.recv() => {
                        let Some(cp) = weak.upgrade() else { return };
                        // Every replica serves the hostnames of the served clusters.
                        {
                            let v = obj.value();
                            let served = ty != EventType::Deleted
                                && meta::deletion_timestamp(&v).is_none()
                                && v.pointer("/status/phase").and_then(Value::as_str) == Some("Ready");
                            let hosts = if served { crate::hosts::requested(&v) } else { Vec::new() };
                            cp.hostnames.set(obj.name(), hosts);
                            let authn = v.pointer("/spec/authentication").filter(|_| served).cloned();
                            cp.set_authentication(obj.name(), authn);
                        }
                        if ty == EventType::Deleted {
                            bound.remove(obj.name());
                        } else {
                            let v = obj.value();
                            let now = crate::datastores::binding(&v).to_string();
                            match bound.insert(obj.name().to_string(), now.clone()) {
                                Some(before) if before != now => {
                                    crate::moves::switched(&cp, obj.name(), &now)
                                }
                                _ => {}
                            }
                            if crate::moves::moving_to(&v).is_some() && cp.leads() {
                                moves.start(&cp, obj.name());
                            }
                        }
                        if ty == EventType::Deleted {
                            // Every replica lets go of what it kept about the cluster.
                            cp.catalog.remove_cluster(obj.name());
                            cp.forget(obj.name());
                            if cp.leads() {
                                sweep(&cp, obj.name()).await;
                            }
                            continue;
                        }
                        if !cp.leads() {
                            continue;
                        }
                        todo.push(obj.name().to_string());
                    }
                    gained = crate::gained_leadership(&mut leadership) => {
                        if gained.is_none() {
                            return;
                        }
                        // Provision and clean up what was only followed until now.
                        let Some(cp) = weak.upgrade() else { return };
                        let (all, _) = cp.store.shared_cache().list(GROUP, PLURAL, &filter);
                        todo.extend(all.iter().map(|o| o.name().to_string()));
                    }
                }
            }
            let Some(name) = todo.pop() else { continue };
            {
                let mut r = running.lock();
                if let Some(dirty) = r.get_mut(&name) {
                    *dirty = true;
                    continue;
                }
                r.insert(name.clone(), false);
            }
            let Some(cp) = weak.upgrade() else { return };
            let running = running.clone();
            let permits = permits.clone();
            tokio::spawn(async move {
                loop {
                    if !cp.leads() {
                        // Another replica took over; it provisions from the current state.
                        running.lock().remove(&name);
                        return;
                    }
                    let result = {
                        let _permit = permits.acquire().await;
                        reconcile(&cp, &name).await
                    };
                    if let Err(e) = &result {
                        tracing::warn!(cluster = %name, error = %e, "logical cluster provisioning failed; retrying");
                        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                        continue;
                    }
                    let mut r = running.lock();
                    if r.get(&name) == Some(&true) {
                        r.insert(name.clone(), false);
                        continue;
                    }
                    r.remove(&name);
                    return;
                }
            });
        }
    });
    Ok(())
}
