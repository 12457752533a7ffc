//! Endpoints as the proxier sees them: EndpointSlices of a Service merged into one endpoint
//! list per service port, and upstream's `CategorizeEndpoints` choosing which of them each
//! traffic policy uses.
//!
//! As upstream's endpoint slice cache does: slices of the other address family (and FQDN
//! slices) are ignored; an endpoint is its first address; an address:port listed by two
//! slices counts once; `ready` defaults to true, `serving` to `ready`, `terminating` to
//! false. Topology hints are not applied (every endpoint is a candidate on every node).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::IpAddr;

use jiff::Timestamp;
use k8s_openapi::api::discovery::v1::EndpointSlice;

use super::names;
use super::service::{IpFamily, Protocol, ServiceName, ServicePort, ServicePortName};

/// The label naming a slice's Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";
/// When the change a slice reflects happened (upstream's network programming latency clock).
pub const TRIGGER_TIME_ANNOTATION: &str = "endpoints.kubernetes.io/last-change-trigger-time";

/// One endpoint of a service port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub ip: IpAddr,
    pub port: u16,
    pub ready: bool,
    pub serving: bool,
    pub terminating: bool,
    /// On this proxier's node.
    pub local: bool,
    /// `endpoint-…`.
    pub chain: String,
    /// `affinity-…`.
    pub affinity_set: String,
}

impl Endpoint {
    /// `ip:port` (`[ip]:port` for IPv6), as `dnat to` takes it.
    pub fn address(&self) -> String {
        match self.ip {
            IpAddr::V4(ip) => format!("{ip}:{}", self.port),
            IpAddr::V6(ip) => format!("[{ip}]:{}", self.port),
        }
    }
}

/// A slice reduced to what the proxier uses.
#[derive(Debug, Clone, PartialEq)]
struct Slice {
    ports: Vec<(String, Protocol, u16)>,
    endpoints: Vec<SliceEndpoint>,
    trigger_time: Option<Timestamp>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct SliceEndpoint {
    ip: IpAddr,
    ready: bool,
    serving: bool,
    terminating: bool,
    node: Option<String>,
}

/// The slices of every Service, by Service and slice name.
#[derive(Debug, Default)]
pub struct SliceCache {
    slices: HashMap<ServiceName, BTreeMap<String, Slice>>,
}

/// The Service a slice belongs to, from its label.
pub fn slice_service(slice: &EndpointSlice) -> Option<ServiceName> {
    let ns = slice.metadata.namespace.as_deref()?;
    let svc = slice.metadata.labels.as_ref()?.get(SERVICE_NAME_LABEL)?;
    Some(ServiceName::new(ns, svc))
}

fn reduce(slice: &EndpointSlice, family: IpFamily) -> Option<Slice> {
    if slice.address_type != family.address_type() {
        return None;
    }
    let ports = slice
        .ports
        .iter()
        .flatten()
        .filter_map(|p| {
            let port = u16::try_from(p.port?).ok().filter(|p| *p != 0)?;
            let proto = Protocol::parse(p.protocol.as_deref())?;
            Some((p.name.clone().unwrap_or_default(), proto, port))
        })
        .collect();
    let endpoints = slice
        .endpoints
        .iter()
        .filter_map(|e| {
            let ip: IpAddr = e.addresses.first()?.parse().ok()?;
            if !family.matches(&ip) {
                return None;
            }
            let c = e.conditions.clone().unwrap_or_default();
            let ready = c.ready.unwrap_or(true);
            Some(SliceEndpoint {
                ip,
                ready,
                serving: c.serving.unwrap_or(ready),
                terminating: c.terminating.unwrap_or(false),
                node: e.node_name.clone(),
            })
        })
        .collect();
    let trigger_time = slice
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(TRIGGER_TIME_ANNOTATION))
        .and_then(|t| t.parse::<Timestamp>().ok());
    Some(Slice {
        ports,
        endpoints,
        trigger_time,
    })
}

impl SliceCache {
    /// Records `slice` (or its deletion); returns its Service when what the proxier uses
    /// changed, with the slice's trigger time.
    pub fn update(
        &mut self,
        slice: &EndpointSlice,
        deleted: bool,
        family: IpFamily,
    ) -> Option<(ServiceName, Option<Timestamp>)> {
        let svc = slice_service(slice)?;
        let name = slice.metadata.name.clone().unwrap_or_default();
        let reduced = if deleted { None } else { reduce(slice, family) };
        let slices = self.slices.entry(svc.clone()).or_default();
        let changed = match reduced {
            Some(r) => {
                let trigger = r.trigger_time;
                let old = slices.insert(name, r.clone());
                (old.as_ref() != Some(&r)).then_some(trigger)
            }
            None => slices.remove(&name).map(|_| None),
        };
        if slices.is_empty() {
            self.slices.remove(&svc);
        }
        changed.map(|t| (svc, t))
    }

    /// Replaces every slice with `all`; returns the Services whose slices changed.
    pub fn replace(&mut self, all: &[EndpointSlice], family: IpFamily) -> BTreeSet<ServiceName> {
        let mut fresh: HashMap<ServiceName, BTreeMap<String, Slice>> = HashMap::new();
        for s in all {
            if let (Some(svc), Some(r)) = (slice_service(s), reduce(s, family)) {
                let name = s.metadata.name.clone().unwrap_or_default();
                fresh.entry(svc).or_default().insert(name, r);
            }
        }
        let mut changed: BTreeSet<ServiceName> = BTreeSet::new();
        for (svc, slices) in &self.slices {
            if fresh.get(svc) != Some(slices) {
                changed.insert(svc.clone());
            }
        }
        for svc in fresh.keys() {
            if !self.slices.contains_key(svc) {
                changed.insert(svc.clone());
            }
        }
        self.slices = fresh;
        changed
    }

    /// The endpoints of every port of `svc`, each list sorted by address.
    pub fn endpoints(
        &self,
        svc: &ServiceName,
        node: &str,
    ) -> BTreeMap<ServicePortName, Vec<Endpoint>> {
        let mut out: BTreeMap<ServicePortName, Vec<Endpoint>> = BTreeMap::new();
        let Some(slices) = self.slices.get(svc) else {
            return out;
        };
        for slice in slices.values() {
            for (port_name, proto, port) in &slice.ports {
                let spn = ServicePortName {
                    service: svc.clone(),
                    port: port_name.clone(),
                    protocol: *proto,
                };
                let list = out.entry(spn.clone()).or_default();
                for e in &slice.endpoints {
                    if list.iter().any(|x| x.ip == e.ip && x.port == *port) {
                        continue;
                    }
                    let (chain, affinity_set) = names::endpoint_names(&spn, e.ip, *port);
                    list.push(Endpoint {
                        ip: e.ip,
                        port: *port,
                        ready: e.ready,
                        serving: e.serving,
                        terminating: e.terminating,
                        local: e.node.as_deref() == Some(node),
                        chain,
                        affinity_set,
                    });
                }
            }
        }
        for list in out.values_mut() {
            list.sort_by_key(|e| (e.ip, e.port));
        }
        out
    }
}

/// Which endpoints a service port's traffic goes to (upstream's `CategorizeEndpoints`).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Categorized<'a> {
    /// For Cluster traffic policy: ready endpoints anywhere, else serving terminating ones.
    pub cluster: Vec<&'a Endpoint>,
    /// For Local traffic policy: this node's ready endpoints, else its serving terminating
    /// ones.
    pub local: Vec<&'a Endpoint>,
    /// Every endpoint some rule of the port reaches (the union).
    pub reachable: Vec<&'a Endpoint>,
    /// Whether the port has a usable endpoint anywhere in the cluster.
    pub any: bool,
}

pub fn categorize<'a>(endpoints: &'a [Endpoint], svc: &ServicePort) -> Categorized<'a> {
    let mut c = Categorized::default();
    if svc.uses_cluster_endpoints() {
        c.cluster = endpoints.iter().filter(|e| e.ready).collect();
        if c.cluster.is_empty() {
            c.cluster = endpoints
                .iter()
                .filter(|e| e.serving && e.terminating)
                .collect();
        }
        c.any = !c.cluster.is_empty();
    }
    if !svc.uses_local_endpoints() {
        c.reachable = c.cluster.clone();
        return c;
    }
    let mut local_ready = false;
    let mut local_terminating = false;
    for e in endpoints {
        if e.ready {
            c.any = true;
            local_ready |= e.local;
        } else if e.serving && e.terminating {
            c.any = true;
            local_terminating |= e.local;
        }
    }
    if local_ready {
        c.local = endpoints.iter().filter(|e| e.local && e.ready).collect();
    } else if local_terminating {
        c.local = endpoints
            .iter()
            .filter(|e| e.local && e.serving && e.terminating)
            .collect();
    }
    if !svc.uses_cluster_endpoints() {
        c.reachable = c.local.clone();
        return c;
    }
    c.reachable = c.cluster.clone();
    for e in &c.local {
        if !c.reachable.iter().any(|r| std::ptr::eq(*r, *e)) {
            c.reachable.push(e);
        }
    }
    c
}

#[cfg(test)]
mod tests {
    use super::super::service::service_ports;
    use super::*;

    fn slice(json: serde_json::Value) -> EndpointSlice {
        serde_json::from_value(json).expect("an EndpointSlice")
    }

    fn web_slice(name: &str, endpoints: serde_json::Value) -> EndpointSlice {
        slice(serde_json::json!({
            "metadata": {"namespace": "ns", "name": name, "labels": {"kubernetes.io/service-name": "web"},
                         "annotations": {"endpoints.kubernetes.io/last-change-trigger-time": "2025-01-02T03:04:05.123456Z"}},
            "addressType": "IPv4",
            "endpoints": endpoints,
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]
        }))
    }

    fn port(json: serde_json::Value) -> ServicePort {
        let s = serde_json::from_value(json).expect("a Service");
        service_ports(&s, IpFamily::V4)
            .into_values()
            .next()
            .expect("a port")
    }

    #[test]
    fn slices_merge_into_sorted_deduplicated_endpoints() {
        let mut cache = SliceCache::default();
        let a = web_slice(
            "web-a",
            serde_json::json!([
                {"addresses": ["10.0.0.9"], "nodeName": "n1"},
                {"addresses": ["10.0.0.3"], "conditions": {"ready": false, "serving": true, "terminating": true}}
            ]),
        );
        let b = web_slice(
            "web-b",
            serde_json::json!([{"addresses": ["10.0.0.9"]}, {"addresses": ["fd00::1"]}]),
        );
        let (svc, trigger) = cache.update(&a, false, IpFamily::V4).expect("changed");
        assert_eq!(svc, ServiceName::new("ns", "web"));
        assert_eq!(
            trigger.map(|t| t.to_string()),
            Some("2025-01-02T03:04:05.123456Z".into())
        );
        assert!(cache.update(&b, false, IpFamily::V4).is_some());
        assert!(cache.update(&b, false, IpFamily::V4).is_none(), "no change");
        let eps = cache.endpoints(&svc, "n1");
        let list = eps.values().next().expect("one port");
        assert_eq!(list.len(), 2);
        assert_eq!(list[0].ip.to_string(), "10.0.0.3");
        assert!(!list[0].ready && list[0].serving && list[0].terminating);
        assert!(list[1].local && list[1].ready);
        assert_eq!(list[1].address(), "10.0.0.9:8080");
        assert!(cache.update(&a, true, IpFamily::V4).is_some());
        assert_eq!(
            cache.endpoints(&svc, "n1").values().next().unwrap().len(),
            1
        );
    }

    #[test]
    fn a_relist_reports_services_whose_slices_changed() {
        let mut cache = SliceCache::default();
        let a = web_slice("web-a", serde_json::json!([{"addresses": ["10.0.0.1"]}]));
        cache.update(&a, false, IpFamily::V4);
        assert!(
            cache
                .replace(std::slice::from_ref(&a), IpFamily::V4)
                .is_empty()
        );
        let changed = cache.replace(&[], IpFamily::V4);
        assert!(changed.contains(&ServiceName::new("ns", "web")));
    }

    fn ep(ip: &str, ready: bool, terminating: bool, local: bool) -> Endpoint {
        Endpoint {
            ip: ip.parse().unwrap(),
            port: 80,
            ready,
            serving: ready || terminating,
            terminating,
            local,
            chain: format!("endpoint-{ip}"),
            affinity_set: format!("affinity-{ip}"),
        }
    }

    #[test]
    fn cluster_policy_falls_back_to_serving_terminating_endpoints() {
        let svc = port(serde_json::json!({
            "metadata": {"namespace": "ns", "name": "web"},
            "spec": {"clusterIP": "10.96.0.5", "ports": [{"port": 80}]}
        }));
        let eps = vec![
            ep("10.0.0.1", false, true, false),
            ep("10.0.0.2", false, false, false),
        ];
        let c = categorize(&eps, &svc);
        assert_eq!(c.cluster.len(), 1);
        assert!(c.any && c.local.is_empty());
        let eps = vec![
            ep("10.0.0.1", false, true, false),
            ep("10.0.0.3", true, false, false),
        ];
        let c = categorize(&eps, &svc);
        assert_eq!(
            c.cluster
                .iter()
                .map(|e| e.ip.to_string())
                .collect::<Vec<_>>(),
            ["10.0.0.3"]
        );
    }

    #[test]
    fn local_policy_uses_this_nodes_endpoints_only() {
        let svc = port(serde_json::json!({
            "metadata": {"namespace": "ns", "name": "web"},
            "spec": {"type": "NodePort", "clusterIP": "10.96.0.5", "externalTrafficPolicy": "Local",
                     "ports": [{"port": 80, "nodePort": 30001}]}
        }));
        let eps = vec![
            ep("10.0.0.1", true, false, false),
            ep("10.0.0.2", true, false, true),
        ];
        let c = categorize(&eps, &svc);
        assert_eq!(c.cluster.len(), 2);
        assert_eq!(c.local.len(), 1);
        assert_eq!(c.reachable.len(), 2);
        let remote_only = vec![ep("10.0.0.1", true, false, false)];
        let c = categorize(&remote_only, &svc);
        assert!(c.any && c.local.is_empty());
    }
}
