//! One logical cluster's DNS data: the compact records the resolver answers from.
//!
//! A [`View`] holds what the Kubernetes DNS specification needs of one cluster and nothing
//! else: namespace names, per Service its kind (cluster IPs, headless, ExternalName) and
//! ports, per EndpointSlice its ports and endpoints (addresses, hostname, readiness), and —
//! only when pod records are verified — pod IPs per namespace. Objects are reduced to these
//! records as they arrive, so memory per Service or endpoint is a few dozen bytes plus names.
//! Reverse indexes (cluster IP → Service, endpoint IP → Services) serve PTR queries.
//!
//! Reads take a shared lock for the microseconds an answer takes; writes (watch events) take
//! it exclusively for a map update. There is no per-query allocation in the view itself.
//!
//! **Architecture Invariant:** a view belongs to one logical cluster. Nothing in it is keyed
//! by cluster, and the only way to fill it is through its own update methods, which the
//! informer calls with the objects of one cluster's client.

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use parking_lot::{RwLock, RwLockReadGuard};
use tokio::sync::watch;

/// A Service port (or an EndpointSlice port) as DNS needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortRecord {
    /// The port's name (`""` for an unnamed port, which has no `_<port>._<proto>` SRV name).
    pub name: Box<str>,
    /// The protocol, lowercase as it appears in SRV names (`tcp`, `udp`, `sctp`).
    pub protocol: Box<str>,
    /// The port number; `None` for an EndpointSlice port without one (all ports).
    pub port: Option<u16>,
}

/// What a Service name resolves to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServiceKind {
    /// A Service with cluster IPs (A/AAAA to those IPs).
    ClusterIp(Box<[IpAddr]>),
    /// A headless Service (`clusterIP: None`): A/AAAA to its ready endpoints.
    Headless,
    /// An ExternalName Service: a CNAME to this name (lowercase, without the final dot).
    ExternalName(Box<str>),
}

/// A Service as DNS needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceRecord {
    pub kind: ServiceKind,
    pub ports: Box<[PortRecord]>,
    /// `spec.publishNotReadyAddresses` (or the legacy `tolerate-unready-endpoints`
    /// annotation): every endpoint counts as ready.
    pub publish_not_ready: bool,
}

/// One address of an endpoint of an EndpointSlice (an endpoint with several addresses is
/// one record per address, sharing the hostname).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointRecord {
    pub address: IpAddr,
    /// The endpoint's `hostname` (StatefulSet pods: the pod's hostname under its subdomain).
    pub hostname: Option<Box<str>>,
    /// `conditions.ready` (unset means ready, as the API documents).
    pub ready: bool,
}

/// An EndpointSlice as DNS needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SliceRecord {
    pub ports: Box<[PortRecord]>,
    pub endpoints: Box<[EndpointRecord]>,
}

/// The records of one cluster, read by the resolver under the view's lock.
#[derive(Debug, Default)]
pub struct Records {
    pub(crate) namespaces: HashSet<Box<str>>,
    /// Keyed `<name>.<namespace>`, the order they appear in a query name.
    pub(crate) services: HashMap<Arc<str>, ServiceRecord>,
    /// Service key → slice name → slice.
    pub(crate) slices: HashMap<Arc<str>, HashMap<Box<str>, SliceRecord>>,
    /// `<namespace>/<slice>` → the service key it is filed under.
    slice_owner: HashMap<Box<str>, Arc<str>>,
    /// Cluster IP → service keys (one, except briefly while a Service is replaced); the keys
    /// share the maps' strings.
    pub(crate) cluster_ips: HashMap<IpAddr, Vec<Arc<str>>>,
    /// Endpoint IP → service keys, once per slice endpoint holding it.
    pub(crate) endpoint_ips: HashMap<IpAddr, Vec<Arc<str>>>,
    /// Verified pod records only: `<namespace>/<pod>` → its IPs.
    pods: HashMap<Box<str>, Box<[IpAddr]>>,
    /// Verified pod records only: pod IP → namespaces of pods holding it.
    pub(crate) pod_ips: HashMap<IpAddr, Vec<Arc<str>>>,
}

/// `<name>.<namespace>`, the key of a Service.
pub fn service_key(namespace: &str, name: &str) -> Arc<str> {
    format!("{name}.{namespace}").into()
}

fn add_multi(map: &mut HashMap<IpAddr, Vec<Arc<str>>>, ip: IpAddr, key: &Arc<str>) {
    map.entry(ip).or_default().push(key.clone());
}

fn remove_multi(map: &mut HashMap<IpAddr, Vec<Arc<str>>>, ip: IpAddr, key: &str) {
    if let Some(keys) = map.get_mut(&ip) {
        if let Some(i) = keys.iter().position(|k| &**k == key) {
            keys.swap_remove(i);
        }
        if keys.is_empty() {
            map.remove(&ip);
        }
    }
}

impl Records {
    fn index_service(&mut self, key: &Arc<str>, svc: &ServiceRecord, add: bool) {
        if let ServiceKind::ClusterIp(ips) = &svc.kind {
            for ip in ips.iter() {
                if add {
                    add_multi(&mut self.cluster_ips, *ip, key);
                } else {
                    remove_multi(&mut self.cluster_ips, *ip, key);
                }
            }
        }
    }

    fn index_slice(&mut self, key: &Arc<str>, slice: &SliceRecord, add: bool) {
        for ep in slice.endpoints.iter() {
            if add {
                add_multi(&mut self.endpoint_ips, ep.address, key);
            } else {
                remove_multi(&mut self.endpoint_ips, ep.address, key);
            }
        }
    }

    fn upsert_service(&mut self, key: Arc<str>, svc: ServiceRecord) -> bool {
        if self.services.get(&key) == Some(&svc) {
            return false;
        }
        self.index_service(&key, &svc, true);
        if let Some(old) = self.services.insert(key.clone(), svc) {
            self.index_service(&key, &old, false);
        }
        true
    }

    fn remove_service(&mut self, key: &str) -> bool {
        match self.services.remove_entry(key) {
            Some((key, old)) => {
                self.index_service(&key, &old, false);
                true
            }
            None => false,
        }
    }

    fn upsert_slice(
        &mut self,
        owner: Box<str>,
        key: Arc<str>,
        name: Box<str>,
        slice: SliceRecord,
    ) -> bool {
        if self.slice_owner.get(&owner) == Some(&key)
            && self.slices.get(&*key).and_then(|s| s.get(&name)) == Some(&slice)
        {
            return false;
        }
        self.remove_slice(&owner, &name);
        // One string per service key, shared by the slice map, the owner map and the index.
        let key = match self.slices.get_key_value(&*key) {
            Some((k, _)) => k.clone(),
            None => key,
        };
        self.index_slice(&key, &slice, true);
        self.slices
            .entry(key.clone())
            .or_default()
            .insert(name, slice);
        self.slice_owner.insert(owner, key);
        true
    }

    fn remove_slice(&mut self, owner: &str, name: &str) -> bool {
        let Some(key) = self.slice_owner.remove(owner) else {
            return false;
        };
        let Some(slices) = self.slices.get_mut(&key) else {
            return true;
        };
        let old = slices.remove(name);
        if slices.is_empty() {
            self.slices.remove(&key);
        }
        if let Some(old) = old {
            self.index_slice(&key, &old, false);
        }
        true
    }

    fn upsert_pod(&mut self, key: Box<str>, namespace: &str, ips: Box<[IpAddr]>) -> bool {
        if self.pods.get(&key) == Some(&ips) {
            return false;
        }
        self.remove_pod(&key, namespace);
        let namespace: Arc<str> = namespace.into();
        for ip in ips.iter() {
            add_multi(&mut self.pod_ips, *ip, &namespace);
        }
        self.pods.insert(key, ips);
        true
    }

    fn remove_pod(&mut self, key: &str, namespace: &str) -> bool {
        match self.pods.remove(key) {
            Some(ips) => {
                for ip in ips.iter() {
                    remove_multi(&mut self.pod_ips, *ip, namespace);
                }
                true
            }
            None => false,
        }
    }

    /// Whether a pod of `namespace` has `ip` (verified pod records).
    pub(crate) fn pod_has_ip(&self, namespace: &str, ip: IpAddr) -> bool {
        self.pod_ips
            .get(&ip)
            .is_some_and(|nss| nss.iter().any(|n| &**n == namespace))
    }

    /// How many Services, EndpointSlices and pods the view holds.
    pub fn counts(&self) -> (usize, usize, usize) {
        (self.services.len(), self.slice_owner.len(), self.pods.len())
    }
}

/// One logical cluster's DNS records, shared by the informer that fills it and the servers
/// that answer from it.
#[derive(Debug)]
pub struct View {
    records: RwLock<Records>,
    /// The SOA serial: the Unix time of the last change, as CoreDNS reports it.
    serial: AtomicU32,
    /// Read on every query; `synced_tx` wakes those waiting for it.
    synced: AtomicBool,
    synced_tx: watch::Sender<bool>,
}

impl Default for View {
    fn default() -> Self {
        View::new()
    }
}

fn now_serial() -> u32 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as u32)
        .unwrap_or(0)
}

/// A batch of changes applied under one write lock (see [`View::update`]).
pub struct Update<'a> {
    records: &'a mut Records,
    changed: bool,
}

impl Update<'_> {
    pub fn upsert_namespace(&mut self, name: &str) {
        if !self.records.namespaces.contains(name) {
            self.records.namespaces.insert(name.into());
            self.changed = true;
        }
    }

    pub fn remove_namespace(&mut self, name: &str) {
        self.changed |= self.records.namespaces.remove(name);
    }

    pub fn upsert_service(&mut self, namespace: &str, name: &str, svc: ServiceRecord) {
        self.changed |= self
            .records
            .upsert_service(service_key(namespace, name), svc);
    }

    pub fn remove_service(&mut self, namespace: &str, name: &str) {
        self.changed |= self.records.remove_service(&service_key(namespace, name));
    }

    /// Files slice `name` of `namespace` under Service `service`.
    pub fn upsert_slice(&mut self, namespace: &str, name: &str, service: &str, slice: SliceRecord) {
        let owner = format!("{namespace}/{name}").into_boxed_str();
        self.changed |=
            self.records
                .upsert_slice(owner, service_key(namespace, service), name.into(), slice);
    }

    pub fn remove_slice(&mut self, namespace: &str, name: &str) {
        self.changed |= self
            .records
            .remove_slice(&format!("{namespace}/{name}"), name);
    }

    pub fn upsert_pod(&mut self, namespace: &str, name: &str, ips: Box<[IpAddr]>) {
        let key = format!("{namespace}/{name}").into_boxed_str();
        self.changed |= self.records.upsert_pod(key, namespace, ips);
    }

    pub fn remove_pod(&mut self, namespace: &str, name: &str) {
        self.changed |= self
            .records
            .remove_pod(&format!("{namespace}/{name}"), namespace);
    }

    /// Drops every namespace (before a fresh list replaces them).
    pub fn clear_namespaces(&mut self) {
        self.changed |= !self.records.namespaces.is_empty();
        self.records.namespaces.clear();
    }

    /// Drops every Service (before a fresh list replaces them).
    pub fn clear_services(&mut self) {
        self.changed |= !self.records.services.is_empty();
        self.records.services.clear();
        self.records.cluster_ips.clear();
    }

    /// Drops every EndpointSlice (before a fresh list replaces them).
    pub fn clear_slices(&mut self) {
        self.changed |= !self.records.slice_owner.is_empty();
        self.records.slices.clear();
        self.records.slice_owner.clear();
        self.records.endpoint_ips.clear();
    }

    /// Drops every pod (before a fresh list replaces them).
    pub fn clear_pods(&mut self) {
        self.changed |= !self.records.pods.is_empty();
        self.records.pods.clear();
        self.records.pod_ips.clear();
    }
}

impl View {
    pub fn new() -> View {
        View {
            records: RwLock::new(Records::default()),
            serial: AtomicU32::new(now_serial()),
            synced: AtomicBool::new(false),
            synced_tx: watch::channel(false).0,
        }
    }

    /// Applies a batch of changes atomically: a query sees all of them or none.
    pub fn update<T>(&self, f: impl FnOnce(&mut Update<'_>) -> T) -> T {
        let mut guard = self.records.write();
        let mut u = Update {
            records: &mut guard,
            changed: false,
        };
        let out = f(&mut u);
        if u.changed {
            let now = now_serial();
            // Strictly increasing, so secondaries (and tests) see every change.
            let _ = self
                .serial
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |s| {
                    Some(now.max(s.wrapping_add(1)))
                });
        }
        out
    }

    /// The records, for reading; held only while one answer is built.
    pub fn read(&self) -> RwLockReadGuard<'_, Records> {
        self.records.read()
    }

    /// The SOA serial.
    pub fn serial(&self) -> u32 {
        self.serial.load(Ordering::Relaxed)
    }

    /// Marks the view complete: every watch has listed its objects once.
    pub fn set_synced(&self) {
        self.synced.store(true, Ordering::Release);
        self.synced_tx.send_replace(true);
    }

    /// Whether every watch has listed its objects once.
    pub fn is_synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }

    /// Waits until the view is synced.
    pub async fn synced(&self) {
        let mut rx = self.synced_tx.subscribe();
        let _ = rx.wait_for(|s| *s).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn slice(ips: &[&str]) -> SliceRecord {
        SliceRecord {
            ports: Box::new([]),
            endpoints: ips
                .iter()
                .map(|a| EndpointRecord {
                    address: ip(a),
                    hostname: None,
                    ready: true,
                })
                .collect(),
        }
    }

    #[test]
    fn replacing_a_slice_moves_its_reverse_entries() {
        let v = View::new();
        v.update(|u| u.upsert_slice("ns", "web-1", "web", slice(&["10.0.0.1", "10.0.0.2"])));
        v.update(|u| u.upsert_slice("ns", "web-1", "web", slice(&["10.0.0.2", "10.0.0.3"])));
        let r = v.read();
        assert!(!r.endpoint_ips.contains_key(&ip("10.0.0.1")));
        assert_eq!(r.endpoint_ips[&ip("10.0.0.2")].len(), 1);
        assert_eq!(&*r.endpoint_ips[&ip("10.0.0.3")][0], "web.ns");
        drop(r);
        v.update(|u| u.remove_slice("ns", "web-1"));
        let r = v.read();
        assert!(r.endpoint_ips.is_empty());
        assert!(r.slices.is_empty());
    }

    #[test]
    fn a_slice_that_changes_service_is_filed_under_the_new_one() {
        let v = View::new();
        v.update(|u| u.upsert_slice("ns", "s", "a", slice(&["10.0.0.1"])));
        v.update(|u| u.upsert_slice("ns", "s", "b", slice(&["10.0.0.1"])));
        let r = v.read();
        assert!(!r.slices.contains_key("a.ns"));
        assert!(r.slices["b.ns"].contains_key("s"));
        assert_eq!(
            r.endpoint_ips[&ip("10.0.0.1")],
            vec![Arc::<str>::from("b.ns")]
        );
    }

    #[test]
    fn the_serial_grows_only_when_something_changes() {
        let v = View::new();
        let s0 = v.serial();
        v.update(|u| u.upsert_namespace("default"));
        let s1 = v.serial();
        assert!(s1 > s0);
        v.update(|u| u.upsert_namespace("default"));
        assert_eq!(v.serial(), s1);
    }

    #[test]
    fn a_service_cluster_ip_is_indexed_and_released() {
        let v = View::new();
        let svc = ServiceRecord {
            kind: ServiceKind::ClusterIp(Box::new([ip("10.96.0.5")])),
            ports: Box::new([]),
            publish_not_ready: false,
        };
        v.update(|u| u.upsert_service("ns", "web", svc));
        assert_eq!(&*v.read().cluster_ips[&ip("10.96.0.5")][0], "web.ns");
        v.update(|u| u.remove_service("ns", "web"));
        assert!(v.read().cluster_ips.is_empty());
    }
}
