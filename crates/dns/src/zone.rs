//! The cluster zone's settings and the records that belong to the zone itself: its SOA (in
//! every negative answer, for negative caching), its name server, the schema version.

use std::net::IpAddr;

use hickory_proto::rr::rdata::{A, AAAA, NS, SOA, TXT};
use hickory_proto::rr::{Name, RData, Record};

use crate::error::{Error, Result};

/// The DNS schema version served at `dns-version.<zone>` (the specification's current
/// version, which CoreDNS reports too).
pub const SCHEMA_VERSION: &str = "1.1.0";

/// The TTL of the `dns-version` record (CoreDNS: 28800 s).
pub const SCHEMA_VERSION_TTL: u32 = 28_800;

/// The default TTL of every answer: CoreDNS's `kubernetes` plugin default.
pub const DEFAULT_TTL: u32 = 5;

/// The largest TTL the `kubernetes` plugin accepts.
pub const MAX_TTL: u32 = 3600;

/// The default cluster domain (kubelet `clusterDomain`).
pub const DEFAULT_ZONE: &str = "cluster.local";

/// How `<dashed-ip>.<ns>.pod.<zone>` names are answered (CoreDNS's `pods` option).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PodMode {
    /// Every pod name is NXDOMAIN.
    Disabled,
    /// Any well-formed address in an existing namespace is answered without looking for the
    /// pod (what kubeadm configures; kube-dns compatible).
    #[default]
    Insecure,
    /// Answered only when a pod of that namespace has that IP; needs a watch of every pod.
    Verified,
}

/// A served cluster zone.
#[derive(Debug, Clone)]
pub struct Zone {
    /// Lowercase, without the final dot.
    pub(crate) domain: String,
    pub(crate) name: Name,
    pub(crate) ttl: u32,
    pub(crate) pods: PodMode,
    ns_name: Name,
    hostmaster: Name,
}

impl Zone {
    /// The zone `domain` (e.g. `cluster.local`), answering with `ttl` and pod records per
    /// `pods`.
    pub fn new(domain: &str, ttl: u32, pods: PodMode) -> Result<Zone> {
        let domain = domain.trim_end_matches('.').to_ascii_lowercase();
        if domain.is_empty() {
            return Err(Error::Config("the cluster domain is empty".into()));
        }
        if ttl > MAX_TTL {
            return Err(Error::Config(format!(
                "ttl {ttl} is above the maximum {MAX_TTL}"
            )));
        }
        let fqdn = |s: &str| {
            Name::from_ascii(format!("{s}."))
                .map_err(|e| Error::Config(format!("invalid name {s:?}: {e}")))
        };
        Ok(Zone {
            name: fqdn(&domain)?,
            ns_name: fqdn(&format!("ns.dns.{domain}"))?,
            hostmaster: fqdn(&format!("hostmaster.{domain}"))?,
            domain,
            ttl,
            pods,
        })
    }

    /// The cluster domain, lowercase, without the final dot.
    pub fn domain(&self) -> &str {
        &self.domain
    }

    pub fn ttl(&self) -> u32 {
        self.ttl
    }

    /// A name under the zone: `<prefix>.<zone>.`.
    pub(crate) fn child(&self, prefix: &str) -> Option<Name> {
        Name::from_ascii(format!("{prefix}.{}.", self.domain)).ok()
    }

    /// The zone's SOA record, as CoreDNS writes it: `ns.dns.<zone>. hostmaster.<zone>.
    /// <serial> 7200 1800 86400 <ttl>`, with a TTL of at most 300 s.
    pub fn soa(&self, serial: u32) -> Record {
        let soa = SOA::new(
            self.ns_name.clone(),
            self.hostmaster.clone(),
            serial,
            7200,
            1800,
            86400,
            self.ttl,
        );
        Record::from_rdata(self.name.clone(), self.ttl.min(300), RData::SOA(soa))
    }

    /// The zone's NS record.
    pub fn ns(&self) -> Record {
        Record::from_rdata(
            self.name.clone(),
            self.ttl,
            RData::NS(NS(self.ns_name.clone())),
        )
    }

    /// An address record of the name server `ns.dns.<zone>`.
    pub fn ns_address(&self, owner: &Name, ip: IpAddr) -> Record {
        address(owner.clone(), self.ttl, ip)
    }

    /// The `dns-version` TXT record, owned by `owner` (the query's spelling).
    pub fn schema_version(&self, owner: &Name) -> Record {
        Record::from_rdata(
            owner.clone(),
            SCHEMA_VERSION_TTL,
            RData::TXT(TXT::new(vec![SCHEMA_VERSION.to_string()])),
        )
    }
}

/// An A or AAAA record for `ip`.
pub fn address(owner: Name, ttl: u32, ip: IpAddr) -> Record {
    match ip {
        IpAddr::V4(v4) => Record::from_rdata(owner, ttl, RData::A(A(v4))),
        IpAddr::V6(v6) => Record::from_rdata(owner, ttl, RData::AAAA(AAAA(v6))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_soa_follows_coredns() {
        let z = Zone::new("Cluster.Local.", 5, PodMode::Insecure).unwrap();
        assert_eq!(z.domain(), "cluster.local");
        let soa = z.soa(42);
        assert_eq!(
            soa.to_string(),
            "cluster.local. 5 IN SOA ns.dns.cluster.local. hostmaster.cluster.local. 42 7200 1800 86400 5"
        );
        let z = Zone::new("cluster.local", 3600, PodMode::Insecure).unwrap();
        assert_eq!(z.soa(1).ttl(), 300);
    }

    #[test]
    fn a_ttl_above_the_maximum_is_refused() {
        assert!(Zone::new("cluster.local", 3601, PodMode::Insecure).is_err());
        assert!(Zone::new("", 5, PodMode::Insecure).is_err());
    }
}
