//! Answers from one cluster's records: the Kubernetes DNS specification, with CoreDNS's
//! `kubernetes` plugin as the reference where the specification leaves room.
//!
//! [`resolve`] classifies the (lowercased) query name, looks it up in the [`Records`] of the
//! view under its read lock, and returns either an [`Answer`] or what the server must do
//! instead: forward the query upstream (a name outside the zone, a reverse name of no
//! Service or endpoint), or resolve an ExternalName's target upstream after its CNAME.
//!
//! Semantics, as CoreDNS answers them:
//! - A/AAAA of a ClusterIP Service: its cluster IPs of that family; of a headless Service,
//!   or of `<hostname>.<svc>` for any Service: the ready endpoint addresses (all endpoints
//!   when the Service publishes not-ready addresses). A headless Service with no ready
//!   endpoint does not exist (NXDOMAIN).
//! - An endpoint's hostname is its `hostname`, else its address with dashes (`10-1-2-3`).
//! - SRV `_<port>._<proto>.<svc>…`: priority 0, weight 100/n, target `<svc>.<ns>.svc.<zone>`
//!   (ClusterIP) or `<hostname>.<svc>.<ns>.svc.<zone>` (per ready endpoint); the targets'
//!   addresses go in the additional section. A bare SRV query lists every port.
//! - ExternalName: a CNAME to the external name, followed by the target's records.
//! - A name in the zone that does not exist is NXDOMAIN, an existing name without records of
//!   the type NODATA; both carry the zone's SOA in the authority section. Until the view has
//!   synced, names in the zone are SERVFAIL (nothing can be said to be absent yet).

use std::borrow::Cow;
use std::collections::HashSet;
use std::net::IpAddr;

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::rdata::{CNAME, PTR, SRV};
use hickory_proto::rr::{Name, RData, Record, RecordType};

use crate::name::{ServiceName, Target, classify, dashed};
use crate::view::{Records, ServiceKind, View};
use crate::zone::{PodMode, Zone, address};

/// How many ExternalName CNAMEs inside the zone are followed before giving up (CoreDNS
/// follows up to 10 in its `maxCnameChainLength`).
const MAX_CNAME_CHAIN: usize = 8;

/// The key of the cluster DNS Service, whose addresses `ns.dns.<zone>` has.
const KUBE_DNS_KEY: &str = "kube-dns.kube-system";

/// An answer from the cluster's records.
#[derive(Debug, Clone)]
pub struct Answer {
    pub rcode: ResponseCode,
    pub answers: Vec<Record>,
    pub authority: Vec<Record>,
    pub additionals: Vec<Record>,
}

impl Answer {
    fn records(answers: Vec<Record>) -> Answer {
        Answer {
            rcode: ResponseCode::NoError,
            answers,
            authority: Vec::new(),
            additionals: Vec::new(),
        }
    }

    fn negative(zone: &Zone, view_serial: u32, rcode: ResponseCode) -> Answer {
        Answer {
            rcode,
            answers: Vec::new(),
            authority: vec![zone.soa(view_serial)],
            additionals: Vec::new(),
        }
    }
}

/// What to do with a query.
#[derive(Debug, Clone)]
pub enum Resolution {
    /// Answer with this, authoritatively.
    Answer(Answer),
    /// Not the cluster's to answer: ask the upstream resolvers.
    Forward,
    /// An ExternalName: `answer` holds the CNAME chain; the upstream answers for `target` and
    /// the query's type follow it.
    Chase { answer: Answer, target: Name },
}

/// One thing a Service name leads to, before it becomes records.
#[derive(Debug)]
struct Item<'r> {
    host: Host<'r>,
    port: Option<u16>,
    /// The endpoint's hostname; `None` for a cluster IP.
    hostname: Option<Cow<'r, str>>,
}

#[derive(Debug, Clone, Copy)]
enum Host<'r> {
    Ip(IpAddr),
    External(&'r str),
}

/// The name does not exist.
struct Missing;

/// Resolves a query. `qname` is the query's name as sent (its spelling is kept in answers),
/// `lower` the same name lowercased.
pub fn resolve(
    zone: &Zone,
    view: &View,
    qname: &Name,
    lower: &str,
    qtype: RecordType,
) -> Resolution {
    let outside = matches!(
        classify(lower, &zone.domain),
        Target::Outside | Target::Reverse(_)
    );
    if !outside && !view.is_synced() {
        // Before the first lists, absence proves nothing: a negative answer would be cached
        // by clients (CoreDNS answers SERVFAIL until it has synced, too).
        return Resolution::Answer(Answer {
            rcode: ResponseCode::ServFail,
            answers: Vec::new(),
            authority: Vec::new(),
            additionals: Vec::new(),
        });
    }
    let records = view.read();
    resolve_in(zone, &records, view.serial(), qname, lower, qtype, 0)
}

fn resolve_in(
    zone: &Zone,
    r: &Records,
    serial: u32,
    qname: &Name,
    lower: &str,
    qtype: RecordType,
    depth: usize,
) -> Resolution {
    let nxdomain = || Resolution::Answer(Answer::negative(zone, serial, ResponseCode::NXDomain));
    let nodata = || Resolution::Answer(Answer::negative(zone, serial, ResponseCode::NoError));
    let exists = |found: bool| if found { nodata() } else { nxdomain() };
    let answer = |records: Vec<Record>| {
        if records.is_empty() {
            nodata()
        } else {
            Resolution::Answer(Answer::records(records))
        }
    };
    match classify(lower, &zone.domain) {
        Target::Outside | Target::Reverse(None) => Resolution::Forward,
        Target::Reverse(Some(ip)) => {
            let names = if qtype == RecordType::PTR {
                ptr(zone, r, ip)
            } else {
                Vec::new()
            };
            if names.is_empty() {
                // kubeadm's `fallthrough in-addr.arpa ip6.arpa`: not ours, ask upstream.
                return Resolution::Forward;
            }
            let ttl = zone.ttl;
            Resolution::Answer(Answer::records(
                names
                    .into_iter()
                    .map(|n| Record::from_rdata(qname.clone(), ttl, RData::PTR(PTR(n))))
                    .collect(),
            ))
        }
        Target::Apex => match qtype {
            RecordType::SOA => answer(vec![zone.soa(serial)]),
            RecordType::NS => {
                let mut a = Answer::records(vec![zone.ns()]);
                if let Some(ns) = zone.child("ns.dns") {
                    a.additionals = kube_dns_ips(r).map(|ip| zone.ns_address(&ns, ip)).collect();
                }
                Resolution::Answer(a)
            }
            _ => nodata(),
        },
        Target::DnsVersion => match qtype {
            RecordType::TXT => answer(vec![zone.schema_version(qname)]),
            _ => nodata(),
        },
        Target::NameServer => answer(
            kube_dns_ips(r)
                .filter(|ip| family_matches(*ip, qtype))
                .map(|ip| zone.ns_address(qname, ip))
                .collect(),
        ),
        Target::Kind => nodata(),
        Target::Namespace(ns) => exists(r.namespaces.contains(ns)),
        Target::Invalid => nxdomain(),
        Target::Pod { namespace, ip } => {
            let ok = match (zone.pods, ip) {
                (PodMode::Disabled, _) | (_, None) => false,
                (PodMode::Insecure, Some(_)) => r.namespaces.contains(namespace),
                (PodMode::Verified, Some(ip)) => {
                    r.namespaces.contains(namespace) && r.pod_has_ip(namespace, ip)
                }
            };
            match ip {
                Some(ip) if ok => answer(if family_matches(ip, qtype) {
                    vec![address(qname.clone(), zone.ttl, ip)]
                } else {
                    Vec::new()
                }),
                _ => nxdomain(),
            }
        }
        Target::Service(name) => {
            if !r.namespaces.contains(name.namespace) {
                return nxdomain();
            }
            let Ok(items) = lookup(r, &name) else {
                return nxdomain();
            };
            match qtype {
                RecordType::A | RecordType::AAAA | RecordType::TXT => {
                    if let Some(ext) = items.iter().find_map(|i| match i.host {
                        Host::External(n) => Some(n),
                        Host::Ip(_) => None,
                    }) {
                        return chase(zone, r, serial, qname, ext, qtype, depth);
                    }
                    if qtype == RecordType::TXT {
                        return nodata();
                    }
                    let mut seen = HashSet::new();
                    answer(
                        items
                            .iter()
                            .filter_map(|i| match i.host {
                                Host::Ip(ip) if family_matches(ip, qtype) && seen.insert(ip) => {
                                    Some(address(qname.clone(), zone.ttl, ip))
                                }
                                _ => None,
                            })
                            .collect(),
                    )
                }
                RecordType::CNAME => answer(
                    items
                        .iter()
                        .find_map(|i| match i.host {
                            Host::External(n) => external_name(n),
                            Host::Ip(_) => None,
                        })
                        .map(|t| {
                            Record::from_rdata(qname.clone(), zone.ttl, RData::CNAME(CNAME(t)))
                        })
                        .into_iter()
                        .collect(),
                ),
                RecordType::SRV => {
                    let (answers, additionals) = srv(zone, &name, qname, &items);
                    match answer(answers) {
                        Resolution::Answer(mut a) => {
                            a.additionals = additionals;
                            Resolution::Answer(a)
                        }
                        other => other,
                    }
                }
                _ => nodata(),
            }
        }
    }
}

/// Whether `ip` answers a query of type `qtype` (A: IPv4, AAAA: IPv6).
fn family_matches(ip: IpAddr, qtype: RecordType) -> bool {
    matches!(
        (ip, qtype),
        (IpAddr::V4(_), RecordType::A) | (IpAddr::V6(_), RecordType::AAAA)
    )
}

fn kube_dns_ips(r: &Records) -> impl Iterator<Item = IpAddr> + '_ {
    r.services
        .get(KUBE_DNS_KEY)
        .into_iter()
        .flat_map(|s| match &s.kind {
            ServiceKind::ClusterIp(ips) => ips.iter().copied(),
            _ => [].iter().copied(),
        })
}

/// An ExternalName as an absolute name; `None` for one that is an IP address (CoreDNS serves
/// those as nothing) or not a name.
fn external_name(n: &str) -> Option<Name> {
    if n.is_empty() || n.parse::<IpAddr>().is_ok() {
        return None;
    }
    Name::from_ascii(format!("{n}.")).ok()
}

/// The CNAME of an ExternalName Service and what its target resolves to: inside the zone
/// from the same records, else upstream.
fn chase(
    zone: &Zone,
    r: &Records,
    serial: u32,
    qname: &Name,
    ext: &str,
    qtype: RecordType,
    depth: usize,
) -> Resolution {
    let Some(target) = external_name(ext) else {
        return Resolution::Answer(Answer::negative(zone, serial, ResponseCode::NXDomain));
    };
    let cname = Record::from_rdata(qname.clone(), zone.ttl, RData::CNAME(CNAME(target.clone())));
    let target_lower = format!("{ext}.");
    if !matches!(
        classify(&target_lower, &zone.domain),
        Target::Outside | Target::Reverse(_)
    ) {
        if depth >= MAX_CNAME_CHAIN || target_lower == lower_of(qname) {
            return Resolution::Answer(Answer::records(vec![cname]));
        }
        // Inside the zone: the chain continues from the same records.
        return match resolve_in(zone, r, serial, &target, &target_lower, qtype, depth + 1) {
            Resolution::Answer(mut a) => {
                a.answers.insert(0, cname);
                // The CNAME exists even when its target does not.
                a.rcode = ResponseCode::NoError;
                Resolution::Answer(a)
            }
            Resolution::Chase { mut answer, target } => {
                answer.answers.insert(0, cname);
                Resolution::Chase { answer, target }
            }
            Resolution::Forward => Resolution::Answer(Answer::records(vec![cname])),
        };
    }
    Resolution::Chase {
        answer: Answer::records(vec![cname]),
        target,
    }
}

fn lower_of(n: &Name) -> String {
    n.to_lowercase().to_string()
}

/// CoreDNS's hostname of an endpoint: its `hostname`, else its dashed address.
fn endpoint_hostname<'r>(hostname: Option<&'r str>, ip: IpAddr) -> Cow<'r, str> {
    match hostname {
        Some(h) => Cow::Borrowed(h),
        None => Cow::Owned(dashed(ip)),
    }
}

fn port_matches(want: Option<(&str, &str)>, name: &str, protocol: &str) -> bool {
    match want {
        None => true,
        Some((p, proto)) => p == name && proto == protocol,
    }
}

/// What a Service name leads to (CoreDNS `findServices`).
fn lookup<'r>(r: &'r Records, q: &ServiceName<'_>) -> Result<Vec<Item<'r>>, Missing> {
    let svc = r.services.get(q.key).ok_or(Missing)?;
    let mut items = Vec::new();
    let mut found = false;
    match &svc.kind {
        ServiceKind::ExternalName(ext) => {
            // No endpoints and no ports: only the bare name exists.
            if q.endpoint.is_some() || q.port.is_some() || external_name(ext).is_none() {
                return Err(Missing);
            }
            items.push(Item {
                host: Host::External(ext),
                port: None,
                hostname: None,
            });
            return Ok(items);
        }
        ServiceKind::ClusterIp(ips) if q.endpoint.is_none() => {
            for p in svc.ports.iter() {
                if !port_matches(q.port, &p.name, &p.protocol) {
                    continue;
                }
                found = true;
                for ip in ips.iter() {
                    items.push(Item {
                        host: Host::Ip(*ip),
                        port: p.port,
                        hostname: None,
                    });
                }
            }
        }
        // A headless Service, or an endpoint of any Service.
        _ => {
            for slice in r.slices.get(q.key).into_iter().flat_map(|s| s.values()) {
                for ep in slice.endpoints.iter() {
                    if !ep.ready && !svc.publish_not_ready {
                        continue;
                    }
                    {
                        let ip = ep.address;
                        let host = endpoint_hostname(ep.hostname.as_deref(), ip);
                        if q.endpoint.is_some_and(|e| e != host) {
                            continue;
                        }
                        if slice.ports.is_empty() {
                            // A slice without ports still has addresses (CoreDNS port -1).
                            if q.port.is_none() {
                                found = true;
                                items.push(Item {
                                    host: Host::Ip(ip),
                                    port: None,
                                    hostname: Some(host.clone()),
                                });
                            }
                            continue;
                        }
                        for p in slice.ports.iter() {
                            if !port_matches(q.port, &p.name, &p.protocol) {
                                continue;
                            }
                            found = true;
                            items.push(Item {
                                host: Host::Ip(ip),
                                port: p.port,
                                hostname: Some(host.clone()),
                            });
                        }
                    }
                }
            }
        }
    }
    if found { Ok(items) } else { Err(Missing) }
}

/// SRV records and their targets' addresses (CoreDNS `plugin.SRV`).
fn srv(
    zone: &Zone,
    q: &ServiceName<'_>,
    qname: &Name,
    items: &[Item<'_>],
) -> (Vec<Record>, Vec<Record>) {
    let weight = u16::try_from(100 / items.len().max(1)).unwrap_or(1).max(1);
    let mut answers = Vec::new();
    let mut additionals = Vec::new();
    let mut seen_srv = HashSet::new();
    let mut seen_addr = HashSet::new();
    for item in items {
        let (Host::Ip(ip), Some(port)) = (item.host, item.port) else {
            continue;
        };
        let target = match &item.hostname {
            Some(h) => format!("{h}.{}.svc.{}.", q.key, zone.domain),
            None => format!("{}.svc.{}.", q.key, zone.domain),
        };
        let Ok(target_name) = Name::from_ascii(&target) else {
            continue;
        };
        if seen_srv.insert((target.clone(), port)) {
            answers.push(Record::from_rdata(
                qname.clone(),
                zone.ttl,
                RData::SRV(SRV::new(0, weight, port, target_name.clone())),
            ));
        }
        if seen_addr.insert((target, ip)) {
            additionals.push(address(target_name, zone.ttl, ip));
        }
    }
    (answers, additionals)
}

/// PTR targets of `ip`: the Service with that cluster IP, else every ready endpoint with that
/// address (CoreDNS `serviceRecordForIP`).
fn ptr(zone: &Zone, r: &Records, ip: IpAddr) -> Vec<Name> {
    if let Some(key) = r.cluster_ips.get(&ip).and_then(|k| k.first()) {
        return Name::from_ascii(format!("{key}.svc.{}.", zone.domain))
            .into_iter()
            .collect();
    }
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    for key in r.endpoint_ips.get(&ip).into_iter().flatten() {
        if !seen.insert(&**key) {
            continue;
        }
        let pnr = r.services.get(key).is_some_and(|s| s.publish_not_ready);
        for slice in r.slices.get(key).into_iter().flat_map(|s| s.values()) {
            for ep in slice.endpoints.iter() {
                if (!ep.ready && !pnr) || ep.address != ip {
                    continue;
                }
                let host = endpoint_hostname(ep.hostname.as_deref(), ip);
                if let Ok(n) = Name::from_ascii(format!("{host}.{key}.svc.{}.", zone.domain))
                    && !out.contains(&n)
                {
                    out.push(n);
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests;
