//! The tenant clusters' ingress controller — the platform's `ingressNginx` addon, as
//! ingress-nginx does the job: it runs in the tenant cluster (a DaemonSet the platform
//! installs, `matryoshka ingress-controller`), serves the cluster's `Ingress` objects of its
//! class (`nginx`, controller `k8s.io/ingress-nginx`) on ports 80 and 443 and publishes the
//! address of its LoadBalancer Service in their status.
//!
//! - [`rules`]: the routing table (hosts, paths, default backend, TLS hosts);
//! - [`tls`]: certificates from `kubernetes.io/tls` Secrets by SNI;
//! - [`proxy`]: the hyper reverse proxy;
//! - this module: the informers, rebuilding the routes on every change, and the status
//!   writer (under leader election, one writer for all replicas).
//!
//! **Architecture Invariant:** an API client of one cluster only (in-cluster config, through
//! `runtime`); it reaches backends at their EndpointSlices' addresses, never through the API.

pub mod proxy;
pub mod rules;
pub mod tls;

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::{Ingress, IngressClass};
use kube::api::{Api, Patch, PatchParams};
use runtime::client::{ClusterClients, ROOT};
use runtime::error::Result;
use runtime::events::Recorder;
use runtime::informer::Informer;
use runtime::leader::{LeaderConfig, run_while_leading};
use runtime::shared::Shutdown;
use runtime::store::Store;
use rustls::sign::CertifiedKey;
use serde_json::json;
use tokio::net::TcpListener;
use tokio::sync::Notify;

use crate::proxy::{Proxy, Routes};
use crate::rules::{BackendRef, ServicePort, Table};
use crate::tls::Certificates;

/// The IngressClass controller value ingress-nginx answers to.
pub const CONTROLLER: &str = "k8s.io/ingress-nginx";
/// The default class name.
pub const CLASS: &str = "nginx";
/// The legacy class annotation.
pub const CLASS_ANNOTATION: &str = "kubernetes.io/ingress.class";
/// The annotation making an IngressClass the default.
pub const DEFAULT_CLASS_ANNOTATION: &str = "ingressclass.kubernetes.io/is-default-class";
/// The component's name in Events.
pub const COMPONENT: &str = "nginx-ingress-controller";

/// How the controller runs.
#[derive(Debug, Clone)]
pub struct Options {
    /// The IngressClass it serves.
    pub class: String,
    /// Its controller value.
    pub controller: String,
    /// Also serve Ingresses naming no class (`--watch-ingress-without-class`).
    pub watch_without_class: bool,
    /// `namespace/name` of the Service whose address goes into every Ingress's status.
    pub publish_service: Option<(String, String)>,
    pub http: SocketAddr,
    pub https: SocketAddr,
    /// The status writers' election (None: this replica always writes).
    pub election: Option<LeaderConfig>,
}

/// Whether the controller of `options` serves `ing`, given the cluster's IngressClasses.
pub fn serves(ing: &Ingress, classes: &[Arc<IngressClass>], options: &Options) -> bool {
    let class_is_ours = |name: &str| {
        name == options.class
            && classes.iter().any(|c| {
                c.metadata.name.as_deref() == Some(name)
                    && c.spec.as_ref().and_then(|s| s.controller.as_deref())
                        == Some(options.controller.as_str())
            })
    };
    if let Some(name) = ing
        .spec
        .as_ref()
        .and_then(|s| s.ingress_class_name.as_deref())
    {
        return class_is_ours(name);
    }
    if let Some(a) = ing
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(CLASS_ANNOTATION))
    {
        return a == &options.class;
    }
    // No class at all: ours when asked to, or when our class is the cluster's default.
    options.watch_without_class
        || classes.iter().any(|c| {
            c.metadata.name.as_deref() == Some(options.class.as_str())
                && c.spec.as_ref().and_then(|s| s.controller.as_deref())
                    == Some(options.controller.as_str())
                && c.metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(DEFAULT_CLASS_ANNOTATION))
                    .is_some_and(|v| v == "true")
        })
}

fn values<K: Clone>(store: &Store<K>) -> Vec<Arc<K>> {
    store.entries().into_iter().map(|(_, v)| v).collect()
}

/// The ready endpoints of every backend the table names.
pub fn resolve(
    table: &Table,
    services: &[Arc<Service>],
    slices: &[Arc<EndpointSlice>],
) -> HashMap<BackendRef, Vec<SocketAddr>> {
    let by_name: HashMap<(&str, &str), &Service> = services
        .iter()
        .filter_map(|s| {
            Some((
                (
                    s.metadata.namespace.as_deref()?,
                    s.metadata.name.as_deref()?,
                ),
                &**s,
            ))
        })
        .collect();
    let mut slices_of: HashMap<(&str, &str), Vec<&EndpointSlice>> = HashMap::new();
    for s in slices {
        let (Some(ns), Some(svc)) = (
            s.metadata.namespace.as_deref(),
            s.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("kubernetes.io/service-name")),
        ) else {
            continue;
        };
        slices_of.entry((ns, svc)).or_default().push(s);
    }
    let mut out = HashMap::new();
    for b in table.backends() {
        let mut addrs = Vec::new();
        let port = by_name
            .get(&(b.namespace.as_str(), b.service.as_str()))
            .and_then(|s| s.spec.as_ref())
            .and_then(|spec| {
                spec.ports.iter().flatten().find(|p| match &b.port {
                    ServicePort::Number(n) => p.port == *n,
                    ServicePort::Name(n) => p.name.as_deref() == Some(n.as_str()),
                })
            });
        if let Some(port) = port {
            let want = port.name.as_deref().unwrap_or("");
            for slice in slices_of
                .get(&(b.namespace.as_str(), b.service.as_str()))
                .into_iter()
                .flatten()
            {
                let Some(p) = slice.ports.iter().flatten().find(|p| {
                    p.name.as_deref().unwrap_or("") == want
                        && p.protocol.as_deref().unwrap_or("TCP") == "TCP"
                }) else {
                    continue;
                };
                let Some(n) = p.port.and_then(|n| u16::try_from(n).ok()) else {
                    continue;
                };
                for ep in &slice.endpoints {
                    if ep.conditions.as_ref().and_then(|c| c.ready) == Some(false) {
                        continue;
                    }
                    addrs.extend(
                        ep.addresses
                            .iter()
                            .filter_map(|a| a.parse::<IpAddr>().ok())
                            .map(|ip| SocketAddr::new(ip, n)),
                    );
                }
            }
        }
        addrs.sort();
        addrs.dedup();
        out.insert(b.clone(), addrs);
    }
    out
}

type CertCache = HashMap<(String, String), (String, Option<Arc<CertifiedKey>>)>;

/// The certificates of the table's TLS hosts from `secrets`, reusing what `cache` parsed at
/// the same resourceVersion.
fn certificates(
    table: &Table,
    secrets: &Store<Secret>,
    cache: &mut CertCache,
) -> HashMap<String, Arc<CertifiedKey>> {
    let by_name: HashMap<(String, String), Arc<Secret>> = values(secrets)
        .into_iter()
        .filter_map(|s| Some(((s.metadata.namespace.clone()?, s.metadata.name.clone()?), s)))
        .collect();
    let mut fresh: CertCache = HashMap::new();
    let mut out = HashMap::new();
    for (host, r) in table.tls_entries() {
        let key = (r.namespace.clone(), r.secret.clone());
        let Some(secret) = by_name.get(&key) else {
            tracing::warn!(ingress = %r.ingress, secret = %format!("{}/{}", r.namespace, r.secret), "the TLS Secret does not exist; the default certificate serves {host}");
            continue;
        };
        let rv = secret.metadata.resource_version.clone().unwrap_or_default();
        let parsed = match cache.get(&key).filter(|(v, _)| *v == rv) {
            Some((_, c)) => c.clone(),
            None => {
                let data = secret.data.as_ref();
                let get = |k: &str| data.and_then(|d| d.get(k)).map(|b| b.0.as_slice());
                match tls::certified_key(get("tls.crt"), get("tls.key")) {
                    Ok(c) => Some(Arc::new(c)),
                    Err(e) => {
                        tracing::warn!(ingress = %r.ingress, secret = %format!("{}/{}", r.namespace, r.secret), error = %e, "the TLS Secret cannot be used");
                        None
                    }
                }
            }
        };
        fresh.insert(key, (rv, parsed.clone()));
        if let Some(c) = parsed {
            out.insert(host.clone(), c);
        }
    }
    *cache = fresh;
    out
}

/// The addresses to publish: the publish Service's as ingress-nginx reads them (a
/// LoadBalancer's ingress points and external IPs, else the external IPs, else the cluster
/// IP).
pub fn published(svc: &Service) -> Vec<serde_json::Value> {
    let spec = svc.spec.clone().unwrap_or_default();
    let mut out = Vec::new();
    if spec.type_.as_deref() == Some("ExternalName") {
        if let Some(n) = spec.external_name {
            out.push(json!({"hostname": n}));
        }
        return out;
    }
    if spec.type_.as_deref() == Some("LoadBalancer") {
        for i in svc
            .status
            .as_ref()
            .and_then(|s| s.load_balancer.as_ref())
            .and_then(|l| l.ingress.as_ref())
            .into_iter()
            .flatten()
        {
            if let Some(ip) = &i.ip {
                out.push(json!({"ip": ip}));
            } else if let Some(h) = &i.hostname {
                out.push(json!({"hostname": h}));
            }
        }
    }
    for ip in spec.external_ips.iter().flatten() {
        out.push(json!({"ip": ip}));
    }
    if out.is_empty()
        && spec.type_.as_deref() != Some("LoadBalancer")
        && let Some(ip) = spec.cluster_ip.filter(|ip| !ip.is_empty() && ip != "None")
    {
        out.push(json!({"ip": ip}));
    }
    out
}

struct Informers {
    ingresses: Arc<Informer<Ingress>>,
    classes: Arc<Informer<IngressClass>>,
    services: Arc<Informer<Service>>,
    slices: Arc<Informer<EndpointSlice>>,
    secrets: Arc<Informer<Secret>>,
}

impl Informers {
    fn ours(&self, options: &Options) -> Vec<Arc<Ingress>> {
        let classes = values(&self.classes.store());
        values(&self.ingresses.store())
            .into_iter()
            .filter(|i| serves(i, &classes, options))
            .collect()
    }
}

/// Binds a listener (address reuse, so a restarted controller binds at once).
pub fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(1024)
}

/// Runs the controller through `clients` (one cluster's, usually in-cluster) until `shutdown`.
pub async fn run(
    clients: ClusterClients,
    options: Options,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<()> {
    let http = bind(options.http).map_err(|e| {
        runtime::error::Error::Config(format!("listening on {}: {e}", options.http))
    })?;
    let https = bind(options.https).map_err(|e| {
        runtime::error::Error::Config(format!("listening on {}: {e}", options.https))
    })?;
    let inf = Arc::new(Informers {
        ingresses: Informer::root(&clients)?,
        classes: Informer::root(&clients)?,
        services: Informer::root(&clients)?,
        slices: Informer::root(&clients)?,
        secrets: Informer::root(&clients)?,
    });
    let changed = Arc::new(Notify::new());
    let status_changed = Arc::new(Notify::new());
    macro_rules! notify_on {
        ($i:expr, $status:expr) => {{
            let c = changed.clone();
            let s = status_changed.clone();
            $i.on_change(move |_| {
                c.notify_one();
                if $status {
                    s.notify_one();
                }
            });
        }};
    }
    notify_on!(inf.ingresses, true);
    notify_on!(inf.classes, true);
    notify_on!(inf.services, true);
    notify_on!(inf.slices, false);
    notify_on!(inf.secrets, false);
    let (stop, stopped) = Shutdown::new();
    let mut tasks = vec![
        tokio::spawn(inf.ingresses.clone().run(stopped.clone().wait())),
        tokio::spawn(inf.classes.clone().run(stopped.clone().wait())),
        tokio::spawn(inf.services.clone().run(stopped.clone().wait())),
        tokio::spawn(inf.slices.clone().run(stopped.clone().wait())),
        tokio::spawn(inf.secrets.clone().run(stopped.clone().wait())),
    ];
    let default_cert = tls::fake_certificate()
        .map_err(|e| runtime::error::Error::Config(format!("the default certificate: {e}")))?;
    let proxy = Proxy::new(Arc::new(Certificates::new(default_cert)));
    // Rebuild the routes on every change, at most every 50 ms.
    {
        let inf = inf.clone();
        let proxy = proxy.clone();
        let options = options.clone();
        let changed = changed.clone();
        let stopping = stopped.clone();
        tasks.push(tokio::spawn(async move {
            let mut cache = CertCache::new();
            let stopping = stopping.wait();
            tokio::pin!(stopping);
            loop {
                tokio::select! {
                    () = changed.notified() => {}
                    () = &mut stopping => return,
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
                let table = Table::build(&inf.ours(&options));
                let endpoints = resolve(
                    &table,
                    &values(&inf.services.store()),
                    &values(&inf.slices.store()),
                );
                proxy
                    .certificates
                    .set(certificates(&table, &inf.secrets.store(), &mut cache));
                proxy.set_routes(Routes { table, endpoints });
            }
        }));
    }
    tasks.push(tokio::spawn(
        proxy.clone().serve_http(http, stopped.clone().wait()),
    ));
    tasks.push(tokio::spawn(
        proxy.clone().serve_https(https, stopped.clone().wait()),
    ));
    // The status writer, one for all replicas.
    let root = clients.cluster(ROOT)?;
    let recorder = Recorder::start(clients.clone(), COMPONENT);
    let writer = {
        let inf = inf.clone();
        let options = options.clone();
        let status_changed = status_changed.clone();
        let root = root.clone();
        move |term: Shutdown| {
            let inf = inf.clone();
            let options = options.clone();
            let status_changed = status_changed.clone();
            let root = root.clone();
            let recorder = recorder.clone();
            async move {
                write_statuses(&inf, &options, &root, &recorder, &status_changed, term).await;
                Ok(())
            }
        }
    };
    match options.election.clone() {
        Some(config) => {
            tasks.push(tokio::spawn(run_while_leading(
                root,
                config,
                stopped.clone().wait(),
                writer,
            )));
        }
        None => {
            let (_keep, term) = Shutdown::new();
            let stopping = stopped.clone();
            let w = writer(term);
            tasks.push(tokio::spawn(async move {
                tokio::select! {
                    _ = w => {}
                    () = stopping.wait() => {}
                }
            }));
        }
    }
    shutdown.await;
    stop.trigger();
    for t in tasks {
        let _ = t.await;
    }
    Ok(())
}

/// Keeps every served Ingress's `status.loadBalancer.ingress` at the published address, and
/// records `Sync` for each new generation, until `term`.
async fn write_statuses(
    inf: &Informers,
    options: &Options,
    root: &kube::Client,
    recorder: &Recorder,
    changed: &Notify,
    term: Shutdown,
) {
    let mut synced: BTreeMap<(String, String), i64> = BTreeMap::new();
    let stopping = term.wait();
    tokio::pin!(stopping);
    loop {
        let address: Vec<serde_json::Value> = match &options.publish_service {
            Some((ns, name)) => values(&inf.services.store())
                .into_iter()
                .find(|s| {
                    s.metadata.namespace.as_deref() == Some(ns.as_str())
                        && s.metadata.name.as_deref() == Some(name.as_str())
                })
                .map(|s| published(&s))
                .unwrap_or_default(),
            None => Vec::new(),
        };
        let mut retry = false;
        for ing in inf.ours(options) {
            let (Some(ns), Some(name)) =
                (ing.metadata.namespace.clone(), ing.metadata.name.clone())
            else {
                continue;
            };
            let generation = ing.metadata.generation.unwrap_or(0);
            if synced.get(&(ns.clone(), name.clone())) != Some(&generation) {
                recorder.about(ROOT, &*ing, "Normal", "Sync", "Scheduled for sync");
                synced.insert((ns.clone(), name.clone()), generation);
            }
            let current = serde_json::to_value(
                ing.status
                    .as_ref()
                    .and_then(|s| s.load_balancer.as_ref())
                    .and_then(|l| l.ingress.clone())
                    .unwrap_or_default(),
            )
            .unwrap_or_default();
            if current == json!(address) {
                continue;
            }
            let api: Api<Ingress> = Api::namespaced(root.clone(), &ns);
            let patch = json!({"status": {"loadBalancer": {"ingress": address}}});
            if let Err(e) = api
                .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                tracing::warn!(ingress = %format!("{ns}/{name}"), error = %e, "updating the status");
                retry = true;
            }
        }
        let wait = if retry {
            Duration::from_secs(2)
        } else {
            Duration::from_secs(60)
        };
        tokio::select! {
            () = changed.notified() => {}
            () = tokio::time::sleep(wait) => {}
            () = &mut stopping => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj<T: k8s_openapi::serde::de::DeserializeOwned>(v: serde_json::Value) -> Arc<T> {
        Arc::new(serde_json::from_value(v).unwrap())
    }

    fn options() -> Options {
        Options {
            class: CLASS.into(),
            controller: CONTROLLER.into(),
            watch_without_class: false,
            publish_service: None,
            http: "127.0.0.1:0".parse().unwrap(),
            https: "127.0.0.1:0".parse().unwrap(),
            election: None,
        }
    }

    #[test]
    fn the_class_name_annotation_or_default_class_decides_what_is_served() {
        let ours: Arc<IngressClass> =
            obj(json!({"metadata": {"name": "nginx"}, "spec": {"controller": CONTROLLER}}));
        let default: Arc<IngressClass> = obj(
            json!({"metadata": {"name": "nginx", "annotations": {DEFAULT_CLASS_ANNOTATION: "true"}}, "spec": {"controller": CONTROLLER}}),
        );
        let other: Arc<IngressClass> = obj(
            json!({"metadata": {"name": "nginx"}, "spec": {"controller": "example.com/other"}}),
        );
        let named: Arc<Ingress> =
            obj(json!({"metadata": {"name": "a"}, "spec": {"ingressClassName": "nginx"}}));
        let annotated: Arc<Ingress> = obj(
            json!({"metadata": {"name": "a", "annotations": {CLASS_ANNOTATION: "nginx"}}, "spec": {}}),
        );
        let classless: Arc<Ingress> = obj(json!({"metadata": {"name": "a"}, "spec": {}}));
        let o = options();
        assert!(serves(&named, std::slice::from_ref(&ours), &o));
        assert!(!serves(&named, &[other], &o));
        assert!(!serves(&named, &[], &o));
        assert!(serves(&annotated, &[], &o));
        assert!(!serves(&classless, std::slice::from_ref(&ours), &o));
        assert!(serves(&classless, &[default], &o));
        assert!(serves(
            &classless,
            &[],
            &Options {
                watch_without_class: true,
                ..o
            }
        ));
    }

    #[test]
    fn backends_resolve_to_ready_endpoints_of_the_named_service_port() {
        let ing: Arc<Ingress> = obj(
            json!({"metadata": {"namespace": "d", "name": "i", "creationTimestamp": "2026-01-01T00:00:00Z"}, "spec": {"rules": [{"host": "h", "http": {"paths": [
                {"path": "/", "pathType": "Prefix", "backend": {"service": {"name": "web", "port": {"number": 80}}}},
                {"path": "/m", "pathType": "Prefix", "backend": {"service": {"name": "web", "port": {"name": "metrics"}}}},
            ]}}]}}),
        );
        let svc: Arc<Service> = obj(
            json!({"metadata": {"namespace": "d", "name": "web"}, "spec": {"ports": [
            {"name": "http", "port": 80, "targetPort": 8080}, {"name": "metrics", "port": 9090}]}}),
        );
        let slice: Arc<EndpointSlice> = obj(
            json!({"metadata": {"namespace": "d", "name": "web-1", "labels": {"kubernetes.io/service-name": "web"}},
            "addressType": "IPv4",
            "ports": [{"name": "http", "port": 8080}, {"name": "metrics", "port": 9091}],
            "endpoints": [
                {"addresses": ["10.0.0.1"], "conditions": {"ready": true}},
                {"addresses": ["10.0.0.2"], "conditions": {"ready": false}},
            ]}),
        );
        let other: Arc<EndpointSlice> = obj(
            json!({"metadata": {"namespace": "d", "name": "x-1", "labels": {"kubernetes.io/service-name": "x"}},
            "addressType": "IPv4", "ports": [{"name": "http", "port": 1}], "endpoints": [{"addresses": ["10.9.9.9"]}]}),
        );
        let table = Table::build(&[ing]);
        let r = resolve(&table, &[svc], &[slice, other]);
        let by = |port: ServicePort| {
            r[&BackendRef {
                namespace: "d".into(),
                service: "web".into(),
                port,
            }]
                .clone()
        };
        assert_eq!(
            by(ServicePort::Number(80)),
            vec!["10.0.0.1:8080".parse().unwrap()]
        );
        assert_eq!(
            by(ServicePort::Name("metrics".into())),
            vec!["10.0.0.1:9091".parse().unwrap()]
        );
    }

    #[test]
    fn the_published_address_is_the_load_balancers_or_else_the_cluster_ip() {
        let lb: Service = serde_json::from_value(
            json!({"spec": {"type": "LoadBalancer", "clusterIP": "10.96.0.5"},
            "status": {"loadBalancer": {"ingress": [{"ip": "127.0.100.10", "ipMode": "VIP"}]}}}),
        )
        .unwrap();
        assert_eq!(published(&lb), vec![json!({"ip": "127.0.100.10"})]);
        let pending: Service = serde_json::from_value(
            json!({"spec": {"type": "LoadBalancer", "clusterIP": "10.96.0.5"}}),
        )
        .unwrap();
        assert!(published(&pending).is_empty());
        let np: Service =
            serde_json::from_value(json!({"spec": {"type": "NodePort", "clusterIP": "10.96.0.5"}}))
                .unwrap();
        assert_eq!(published(&np), vec![json!({"ip": "10.96.0.5"})]);
    }
}
