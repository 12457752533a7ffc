//! Cluster IPs and node ports for Services, allocated per logical cluster as kube-apiserver's
//! service REST storage does (`allocateCreate`, `allocateUpdate`, `releaseAllocatedResources`).
//!
//! [`ServiceAllocator`] is the services' [`WriteHook`]: after a create or update is validated
//! it assigns what the service lacks — a cluster IP unless the service is headless (`None`) or
//! an ExternalName, node ports for NodePort and LoadBalancer services (unless
//! `allocateLoadBalancerNodePorts` is false), a health-check node port for a LoadBalancer with
//! `externalTrafficPolicy: Local` — and reserves requested values, refusing taken or
//! out-of-range ones with upstream's messages. Each value is its own storage key
//! ([`reserve`]), so allocation is atomic per value; a failed write gives its reservations
//! back, and a deleted service or a type change releases what is no longer held. Every
//! logical cluster has its own ranges: the same address is free in each.
//!
//! The cluster is single-stack IPv4: IPv6 families and `RequireDualStack` are refused as
//! upstream refuses them on a single-stack cluster.

mod range;
pub mod reserve;

use std::collections::HashSet;
use std::net::Ipv4Addr;

use apimachinery::field::{ErrorKind, ErrorList, FieldError, Path};
use apimachinery::meta;
use apimachinery::status::ApiError;
use registry::hooks::{Reservation, WriteHook};
use registry::store::Store;
use serde_json::{Value, json};

pub use range::{DEFAULT_NODE_PORTS, DEFAULT_SERVICE_CIDR, Ipv4Range, PortRange, RangeError};
use reserve::Item;

/// Allocates cluster IPs and node ports from one service CIDR and node-port range, separately
/// in every logical cluster.
#[derive(Debug, Clone)]
pub struct ServiceAllocator {
    ips: Ipv4Range,
    ports: PortRange,
}

impl Default for ServiceAllocator {
    /// `10.96.0.0/12` and `30000-32767`, kube-apiserver's defaults.
    fn default() -> Self {
        let (a, b) = DEFAULT_NODE_PORTS;
        ServiceAllocator {
            ips: Ipv4Range::parse(DEFAULT_SERVICE_CIDR).expect("the default CIDR is valid"),
            ports: PortRange::new(a, b).expect("the default port range is valid"),
        }
    }
}

fn ty(svc: &Value) -> &str {
    svc.pointer("/spec/type")
        .and_then(Value::as_str)
        .unwrap_or("ClusterIP")
}

fn str_at<'a>(v: &'a Value, p: &str) -> &'a str {
    v.pointer(p).and_then(Value::as_str).unwrap_or("")
}

fn int_at(v: &Value, p: &str) -> i64 {
    v.pointer(p).and_then(Value::as_i64).unwrap_or(0)
}

fn needs_node_ports(svc: &Value) -> bool {
    matches!(ty(svc), "NodePort" | "LoadBalancer")
}

fn needs_health_check(svc: &Value) -> bool {
    ty(svc) == "LoadBalancer" && str_at(svc, "/spec/externalTrafficPolicy") == "Local"
}

/// Go's `%#v` of a `[]string`, as upstream prints `spec.clusterIPs` in messages.
fn go_strings(v: Option<&Value>) -> String {
    let items: Vec<String> = v
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|s| format!("{:?}", s.as_str().unwrap_or("")))
                .collect()
        })
        .unwrap_or_default();
    format!("[]string{{{}}}", items.join(", "))
}

/// What a service holds: its cluster IP and node ports (health check included).
pub fn held(svc: &Value) -> HashSet<Item> {
    let mut out = HashSet::new();
    if ty(svc) != "ExternalName" {
        for ip in svc
            .pointer("/spec/clusterIPs")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .chain(svc.pointer("/spec/clusterIP"))
        {
            if let Some(ip) = ip.as_str().and_then(|s| s.parse::<Ipv4Addr>().ok()) {
                out.insert(Item::Ip(ip));
            }
        }
    }
    if needs_node_ports(svc) {
        for p in svc
            .pointer("/spec/ports")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Ok(n) = u16::try_from(int_at(p, "/nodePort"))
                && n != 0
            {
                out.insert(Item::NodePort(n));
            }
        }
    }
    if needs_health_check(svc)
        && let Ok(n) = u16::try_from(int_at(svc, "/spec/healthCheckNodePort"))
        && n != 0
    {
        out.insert(Item::NodePort(n));
    }
    out
}

/// One write's allocations in progress.
struct Txn<'a> {
    store: &'a Store,
    cluster: &'a str,
    dry_run: bool,
    /// What the stored object already holds (nothing to reserve for these).
    old: HashSet<Item>,
    reserved: Reservation,
    seed: u64,
}

impl Txn<'_> {
    /// Takes a requested item unless the old object holds it. `Ok(false)`: taken by another.
    async fn request(&mut self, item: Item, svc: &Value) -> Result<bool, ApiError> {
        if self.old.contains(&item) || self.reserved.keys.contains(&item.key(self.cluster)) {
            return Ok(true);
        }
        let ok = reserve::take(self.store, self.cluster, item, svc, self.dry_run).await?;
        if ok && !self.dry_run {
            self.reserved.keys.push(item.key(self.cluster));
        }
        Ok(ok)
    }

    /// Takes the first free candidate; `None` when the range is full.
    async fn next(
        &mut self,
        candidates: impl Iterator<Item = Item>,
        node_ports: bool,
        svc: &Value,
    ) -> Result<Option<Item>, ApiError> {
        let known = reserve::known(self.store, self.cluster, node_ports);
        for item in candidates {
            let k = item.key(self.cluster);
            if self.reserved.keys.contains(&k) || known.contains(&item_name(item)) {
                continue;
            }
            if self.request(item, svc).await? {
                return Ok(Some(item));
            }
        }
        Ok(None)
    }
}

fn item_name(item: Item) -> String {
    match item {
        Item::Ip(ip) => ip.to_string(),
        Item::NodePort(p) => p.to_string(),
    }
}

fn invalid(svc: &Value, errs: ErrorList) -> ApiError {
    ApiError::invalid("Service", "", meta::name(svc), &errs)
}

fn one(field: impl Into<String>, detail: String) -> ErrorList {
    let mut errs = ErrorList::new();
    errs.push(FieldError {
        kind: ErrorKind::Invalid,
        field: field.into(),
        value: None,
        detail,
    });
    errs
}

impl ServiceAllocator {
    /// An allocator over `cidr` (IPv4, e.g. `10.96.0.0/12`) and node ports `first..=last`.
    pub fn new(cidr: &str, first: u16, last: u16) -> Result<Self, RangeError> {
        Ok(ServiceAllocator {
            ips: Ipv4Range::parse(cidr)?,
            ports: PortRange::new(first, last)?,
        })
    }

    /// The first address of the range, which the `kubernetes` service gets.
    pub fn first_ip(&self) -> Ipv4Addr {
        self.ips.first()
    }

    /// Refuses families this single-stack IPv4 cluster does not serve.
    fn check_families(&self, svc: &Value) -> Result<(), ApiError> {
        let mut errs = ErrorList::new();
        if str_at(svc, "/spec/ipFamilyPolicy") == "RequireDualStack" {
            errs.push(FieldError::invalid(
                "spec.ipFamilyPolicy",
                json!("RequireDualStack"),
                "this cluster is not configured for dual-stack services",
            ));
        }
        let families = svc.pointer("/spec/ipFamilies").and_then(Value::as_array);
        for (i, f) in families.into_iter().flatten().enumerate() {
            if f.as_str() != Some("IPv4") {
                errs.push(FieldError::invalid(
                    Path::new("spec").child("ipFamilies").index(i),
                    f.clone(),
                    "not configured on this cluster",
                ));
            }
        }
        if errs.is_empty() {
            Ok(())
        } else {
            Err(invalid(svc, errs))
        }
    }

    async fn cluster_ip(&self, t: &mut Txn<'_>, svc: &mut Value) -> Result<(), ApiError> {
        let requested = str_at(svc, "/spec/clusterIP").to_string();
        if requested == "None" {
            return Ok(());
        }
        if requested.is_empty() {
            let candidates = self.ips.candidates(t.seed).map(Item::Ip);
            let Some(Item::Ip(ip)) = t.next(candidates, false, svc).await? else {
                return Err(ApiError::internal(
                    "failed to allocate a serviceIP: range is full",
                ));
            };
            svc["spec"]["clusterIP"] = json!(ip.to_string());
            svc["spec"]["clusterIPs"] = json!([ip.to_string()]);
            return Ok(());
        }
        let fail = |why: String| {
            let rendered = go_strings(svc.pointer("/spec/clusterIPs"));
            invalid(
                svc,
                one(
                    "spec.clusterIPs",
                    format!("{rendered}: failed to allocate IP {requested}: {why}"),
                ),
            )
        };
        // Something that is no IP at all is for validation to report.
        let Ok(parsed) = requested.parse::<std::net::IpAddr>() else {
            return Ok(());
        };
        let ip = match parsed {
            std::net::IpAddr::V4(ip) if self.ips.contains(ip) => ip,
            _ => {
                return Err(fail(format!(
                    "the provided IP ({requested}) is not in the valid range. The range of valid IPs is {}",
                    self.ips
                )));
            }
        };
        if !t.request(Item::Ip(ip), svc).await? {
            return Err(fail("provided IP is already allocated".into()));
        }
        Ok(())
    }

    async fn node_ports(&self, t: &mut Txn<'_>, svc: &mut Value) -> Result<(), ApiError> {
        let allocate = !(ty(svc) == "LoadBalancer"
            && svc.pointer("/spec/allocateLoadBalancerNodePorts") == Some(&json!(false)));
        let count = svc
            .pointer("/spec/ports")
            .and_then(Value::as_array)
            .map_or(0, Vec::len);
        // Ports with the same port number share a node port (TCP and UDP of one port).
        let mut by_port: Vec<(i64, u16)> = Vec::new();
        for i in 0..count {
            let port = int_at(svc, &format!("/spec/ports/{i}/port"));
            let requested = int_at(svc, &format!("/spec/ports/{i}/nodePort"));
            if requested == 0 {
                if !allocate {
                    continue;
                }
                let shared = by_port.iter().find(|(p, _)| *p == port).map(|(_, n)| *n);
                let n = match shared {
                    Some(n) => n,
                    None => {
                        let candidates = self.ports.candidates(t.seed).map(Item::NodePort);
                        let Some(Item::NodePort(n)) = t.next(candidates, true, svc).await? else {
                            return Err(ApiError::internal(
                                "failed to allocate a nodePort: range is full",
                            ));
                        };
                        n
                    }
                };
                svc["spec"]["ports"][i]["nodePort"] = json!(n);
                by_port.push((port, n));
                continue;
            }
            if !(1..=65535).contains(&requested) {
                // Not a port: validation reports it.
                continue;
            }
            let path = format!("spec.ports[{i}].nodePort");
            let n = match u16::try_from(requested) {
                Ok(n) if self.ports.contains(requested) => n,
                _ => {
                    return Err(invalid(
                        svc,
                        one(
                            path,
                            format!(
                                "{requested}: provided port is not in the valid range. The range of valid ports is {}",
                                self.ports
                            ),
                        ),
                    ));
                }
            };
            if !t.request(Item::NodePort(n), svc).await? {
                return Err(invalid(
                    svc,
                    one(
                        path,
                        format!("{requested}: provided port is already allocated"),
                    ),
                ));
            }
            by_port.push((port, n));
        }
        Ok(())
    }

    async fn health_check(&self, t: &mut Txn<'_>, svc: &mut Value) -> Result<(), ApiError> {
        let requested = int_at(svc, "/spec/healthCheckNodePort");
        if requested == 0 {
            let candidates = self.ports.candidates(t.seed / 3).map(Item::NodePort);
            let Some(Item::NodePort(n)) = t.next(candidates, true, svc).await? else {
                return Err(ApiError::internal(
                    "failed to allocate a HealthCheck NodePort 0: range is full",
                ));
            };
            svc["spec"]["healthCheckNodePort"] = json!(n);
            return Ok(());
        }
        let why = match u16::try_from(requested) {
            Ok(n) if self.ports.contains(requested) => {
                if t.request(Item::NodePort(n), svc).await? {
                    return Ok(());
                }
                "provided port is already allocated".to_string()
            }
            _ => format!(
                "provided port is not in the valid range. The range of valid ports is {}",
                self.ports
            ),
        };
        Err(ApiError::internal(format!(
            "failed to allocate requested HealthCheck NodePort {requested}: {why}"
        )))
    }

    async fn allocate(&self, t: &mut Txn<'_>, svc: &mut Value) -> Result<(), ApiError> {
        if ty(svc) != "ExternalName" {
            self.check_families(svc)?;
            self.cluster_ip(t, svc).await?;
        }
        if needs_node_ports(svc) {
            self.node_ports(t, svc).await?;
        }
        if needs_health_check(svc) {
            self.health_check(t, svc).await?;
        }
        Ok(())
    }
}

/// Refuses a Service whose `spec` or `spec.ports[*]` the allocator writes into is not an
/// object, before anything is reserved, as upstream's decoder does (400, its message).
/// Regression: `"spec": "str"` panicked the allocator after it had reserved an address.
fn check_shape(svc: &Value) -> Result<(), ApiError> {
    let refuse = |v: &Value, field: &str, go_type: &str| {
        ApiError::bad_request(format!(
            "Service in version \"v1\" cannot be handled as a Service: json: cannot unmarshal {} into Go struct field {field} of type {go_type}",
            apimachinery::schema::json_type_name(v)
        ))
    };
    let Some(spec) = svc.get("spec") else {
        return Ok(());
    };
    match spec {
        Value::Null | Value::Object(_) => {}
        v => return Err(refuse(v, "Service.spec", "v1.ServiceSpec")),
    }
    match spec.get("ports") {
        None | Some(Value::Null) => {}
        Some(Value::Array(ports)) => {
            if let Some(p) = ports.iter().find(|p| !p.is_object()) {
                return Err(refuse(p, "ServiceSpec.spec.ports", "v1.ServicePort"));
            }
        }
        Some(v) => return Err(refuse(v, "ServiceSpec.spec.ports", "[]v1.ServicePort")),
    }
    Ok(())
}

#[async_trait::async_trait]
impl WriteHook for ServiceAllocator {
    async fn before_write(
        &self,
        store: &Store,
        cluster: &str,
        old: Option<&Value>,
        new: &mut Value,
        dry_run: bool,
    ) -> Result<Reservation, ApiError> {
        check_shape(new)?;
        let mut t = Txn {
            store,
            cluster,
            dry_run,
            old: old.map(held).unwrap_or_default(),
            reserved: Reservation::default(),
            seed: uuid::Uuid::new_v4().as_u128() as u64,
        };
        match self.allocate(&mut t, new).await {
            Ok(()) => Ok(t.reserved),
            Err(e) => {
                self.abort(store, cluster, t.reserved).await;
                Err(e)
            }
        }
    }

    async fn abort(&self, store: &Store, cluster: &str, reserved: Reservation) {
        for k in &reserved.keys {
            reserve::undo(store, cluster, k).await;
        }
    }

    async fn after_write(&self, store: &Store, cluster: &str, old: &Value, new: Option<&Value>) {
        let kept = new.map(held).unwrap_or_default();
        for item in held(old) {
            if !kept.contains(&item) {
                reserve::release(store, cluster, item, meta::uid(old)).await;
            }
        }
    }
}

#[cfg(test)]
mod tests;
