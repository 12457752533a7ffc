//! The data path: for every TCP port of every root-cluster Service holding a pool address,
//! a listener on that address and port that carries each connection to one of the
//! Service's ready endpoints (its EndpointSlices, the port matched by name), round-robin,
//! trying the next endpoint when one refuses. `loadBalancerSourceRanges` are enforced on the
//! client's address. Every replica runs it (the listeners use `SO_REUSEPORT`, so replicas on
//! one machine share them).
//!
//! It is a user-space proxy, not a VIP: the client's address is not preserved towards the
//! endpoint (as with a proxying load balancer; `ipMode: Proxy` would say so, but the tenant
//! clusters' kube-proxy would then not short-circuit the address inside their nodes). UDP
//! ports are not carried (they get a Warning Event).

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use parking_lot::Mutex;
use runtime::client::ROOT;
use runtime::events::Recorder;
use runtime::informer::{ObjectKey, Store};
use tokio::net::{TcpSocket, TcpStream};
use tokio::sync::{Notify, Semaphore};
use tokio::task::JoinHandle;

use crate::allocator::{ingress_ips, served};
use crate::pool::Pool;

/// Connections one listener carries at once; more wait in the kernel's backlog.
const MAX_CONNECTIONS: usize = 4096;
/// How long one endpoint may take to accept before the next is tried.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// What one listener forwards to.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Target {
    service: ObjectKey,
    port_name: String,
    source_ranges: Vec<ipnet::IpNet>,
}

struct Listener {
    target: Arc<Mutex<Target>>,
    task: JoinHandle<()>,
}

pub(crate) struct Proxy {
    pub pool: Pool,
    pub services: Store<Service>,
    pub slices: Store<EndpointSlice>,
    pub recorder: Recorder,
    pub changed: Notify,
    listeners: Mutex<HashMap<SocketAddr, Listener>>,
    /// Services already told their UDP ports are not carried.
    warned_udp: Mutex<std::collections::HashSet<ObjectKey>>,
}

impl Proxy {
    pub fn new(
        pool: Pool,
        services: Store<Service>,
        slices: Store<EndpointSlice>,
        recorder: Recorder,
    ) -> Arc<Proxy> {
        Arc::new(Proxy {
            pool,
            services,
            slices,
            recorder,
            changed: Notify::new(),
            listeners: Mutex::new(HashMap::new()),
            warned_udp: Mutex::new(Default::default()),
        })
    }

    /// The listeners the Services ask for.
    fn desired(&self) -> HashMap<SocketAddr, Target> {
        let mut out = HashMap::new();
        for (key, svc) in self.services.list_cluster(ROOT) {
            if !served(&svc) {
                continue;
            }
            let ips: Vec<IpAddr> = ingress_ips(&svc)
                .into_iter()
                .filter(|ip| self.pool.contains(*ip))
                .collect();
            let spec = svc.spec.clone().unwrap_or_default();
            let source_ranges: Vec<ipnet::IpNet> = spec
                .load_balancer_source_ranges
                .iter()
                .flatten()
                .filter_map(|r| r.trim().parse().ok())
                .collect();
            for port in spec.ports.iter().flatten() {
                let protocol = port.protocol.as_deref().unwrap_or("TCP");
                if protocol != "TCP" {
                    if self.warned_udp.lock().insert(key.clone()) {
                        self.recorder.about(
                ROOT,
                            svc.as_ref(),
                            "Warning",
                            "UnsupportedProtocol",
                            format!("the platform's load balancer carries TCP only; port {} ({protocol}) gets no traffic", port.port),
                        );
                    }
                    continue;
                }
                let Ok(p) = u16::try_from(port.port) else {
                    continue;
                };
                for ip in &ips {
                    out.insert(
                        SocketAddr::new(*ip, p),
                        Target {
                            service: key.clone(),
                            port_name: port.name.clone().unwrap_or_default(),
                            source_ranges: source_ranges.clone(),
                        },
                    );
                }
            }
        }
        out
    }

    /// Opens, retargets and closes listeners to match the Services.
    pub fn sync(self: &Arc<Self>) {
        let desired = self.desired();
        let mut listeners = self.listeners.lock();
        listeners.retain(|addr, l| {
            let keep = desired.contains_key(addr);
            if !keep {
                l.task.abort();
                tracing::info!(%addr, "load balancer listener closed");
            }
            keep
        });
        for (addr, target) in desired {
            if let Some(l) = listeners.get(&addr) {
                let mut t = l.target.lock();
                if *t != target {
                    *t = target;
                }
                continue;
            }
            let listener = match bind(addr) {
                Ok(l) => l,
                Err(e) => {
                    if let Some(svc) = self.services.get(&target.service) {
                        self.recorder.about(
                            ROOT,
                            svc.as_ref(),
                            "Warning",
                            "ListenFailed",
                            format!("the platform's load balancer cannot listen on {addr}: {e}"),
                        );
                    }
                    tracing::warn!(%addr, error = %e, "load balancer listener not opened");
                    continue;
                }
            };
            tracing::info!(%addr, service = %target.service, "load balancer listener opened");
            let target = Arc::new(Mutex::new(target));
            let task = tokio::spawn(self.clone().serve(listener, target.clone()));
            listeners.insert(addr, Listener { target, task });
        }
    }

    /// Closes every listener.
    pub fn close_all(&self) {
        for (_, l) in self.listeners.lock().drain() {
            l.task.abort();
        }
    }

    async fn serve(self: Arc<Self>, listener: tokio::net::TcpListener, target: Arc<Mutex<Target>>) {
        let permits = Arc::new(Semaphore::new(MAX_CONNECTIONS));
        let next = Arc::new(AtomicUsize::new(0));
        loop {
            let Ok(permit) = permits.clone().acquire_owned().await else {
                return;
            };
            let (client, peer) = match listener.accept().await {
                Ok(c) => c,
                Err(e) => {
                    tracing::debug!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let t = target.lock().clone();
            if !t.source_ranges.is_empty()
                && !t.source_ranges.iter().any(|r| r.contains(&peer.ip()))
            {
                continue;
            }
            let endpoints = self.endpoints(&t);
            let next = next.clone();
            tokio::spawn(async move {
                let _permit = permit;
                forward(client, endpoints, next).await;
            });
        }
    }

    /// The ready endpoints of a target's Service port.
    fn endpoints(&self, t: &Target) -> Vec<SocketAddr> {
        let mut out = Vec::new();
        for slice in self.slices.list_namespace(ROOT, &t.service.namespace) {
            let owner = slice
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("kubernetes.io/service-name"));
            if owner.map(String::as_str) != Some(t.service.name.as_str()) {
                continue;
            }
            let Some(port) = slice.ports.iter().flatten().find(|p| {
                p.name.as_deref().unwrap_or("") == t.port_name
                    && p.protocol.as_deref().unwrap_or("TCP") == "TCP"
            }) else {
                continue;
            };
            let Some(port) = port.port.and_then(|p| u16::try_from(p).ok()) else {
                continue;
            };
            for ep in &slice.endpoints {
                let ready = ep.conditions.as_ref().and_then(|c| c.ready).unwrap_or(true);
                if !ready {
                    continue;
                }
                out.extend(
                    ep.addresses
                        .iter()
                        .filter_map(|a| a.parse::<IpAddr>().ok())
                        .map(|ip| SocketAddr::new(ip, port)),
                );
            }
        }
        out
    }
}

fn bind(addr: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.set_reuseport(true)?;
    socket.bind(addr)?;
    socket.listen(1024)
}

/// Carries one connection to the first endpoint, from the round-robin position, that
/// accepts it; closes it when none does.
async fn forward(mut client: TcpStream, endpoints: Vec<SocketAddr>, next: Arc<AtomicUsize>) {
    if endpoints.is_empty() {
        return;
    }
    let start = next.fetch_add(1, Ordering::Relaxed);
    for i in 0..endpoints.len() {
        let to = endpoints[(start + i) % endpoints.len()];
        match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(to)).await {
            Ok(Ok(mut upstream)) => {
                let _ = client.set_nodelay(true);
                let _ = upstream.set_nodelay(true);
                let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
                return;
            }
            Ok(Err(e)) => tracing::debug!(endpoint = %to, error = %e, "endpoint refused"),
            Err(_) => tracing::debug!(endpoint = %to, "endpoint timed out"),
        }
    }
}
