//! Addresses of virtual nodes and their pods: IPv4 CIDRs, the per-node pod subnet
//! (`spec.podCIDR`) and the node's InternalIP chosen by a node's slot, and the pod IPs
//! handed out inside a node's subnet.
//!
//! Upstream the node IPAM controller assigns pod CIDRs; a virtual node has no such
//! controller to wait for, so the agent takes the lowest free slot itself, avoiding the
//! subnets of nodes it saw when it started.

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::net::Ipv4Addr;
use std::str::FromStr;

/// An IPv4 network (`10.244.0.0/16`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv4Cidr {
    network: u32,
    prefix: u8,
}

/// Why a string is not an IPv4 CIDR.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid IPv4 CIDR {0:?}: want a.b.c.d/n with n at most 32 and no host bits set")]
pub struct CidrError(pub String);

impl Ipv4Cidr {
    /// The network `addr/prefix`; host bits must be zero.
    pub fn new(addr: Ipv4Addr, prefix: u8) -> Result<Self, CidrError> {
        let bits = u32::from(addr);
        if prefix > 32 || bits & !mask(prefix) != 0 {
            return Err(CidrError(format!("{addr}/{prefix}")));
        }
        Ok(Ipv4Cidr {
            network: bits,
            prefix,
        })
    }

    pub fn network(&self) -> Ipv4Addr {
        Ipv4Addr::from(self.network)
    }

    pub fn prefix(&self) -> u8 {
        self.prefix
    }

    /// How many addresses the network spans.
    pub fn size(&self) -> u64 {
        1u64 << (32 - u32::from(self.prefix))
    }

    pub fn contains(&self, ip: Ipv4Addr) -> bool {
        u32::from(ip) & mask(self.prefix) == self.network
    }

    /// The `n`th address of the network (0 is the network address itself).
    pub fn host(&self, n: u64) -> Option<Ipv4Addr> {
        (n < self.size()).then(|| Ipv4Addr::from(self.network + n as u32))
    }

    /// How many `/prefix` subnets the network holds (0 if `prefix` is shorter than its own).
    pub fn subnet_count(&self, prefix: u8) -> u64 {
        if prefix < self.prefix || prefix > 32 {
            0
        } else {
            1u64 << (prefix - self.prefix)
        }
    }

    /// The `index`th `/prefix` subnet of the network.
    pub fn subnet(&self, index: u64, prefix: u8) -> Option<Ipv4Cidr> {
        if index >= self.subnet_count(prefix) {
            return None;
        }
        let step = 1u64 << (32 - u32::from(prefix));
        Some(Ipv4Cidr {
            network: self.network + (index * step) as u32,
            prefix,
        })
    }

    /// Which subnet of this network `sub` is, if it is one of its `/sub.prefix` subnets.
    pub fn subnet_index(&self, sub: &Ipv4Cidr) -> Option<u64> {
        if sub.prefix < self.prefix || !self.contains(sub.network()) {
            return None;
        }
        Some(u64::from(sub.network - self.network) >> (32 - u32::from(sub.prefix)))
    }
}

fn mask(prefix: u8) -> u32 {
    if prefix == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(prefix.min(32)))
    }
}

impl FromStr for Ipv4Cidr {
    type Err = CidrError;
    fn from_str(s: &str) -> Result<Self, CidrError> {
        let err = || CidrError(s.to_string());
        let (addr, prefix) = s.split_once('/').ok_or_else(err)?;
        let addr: Ipv4Addr = addr.parse().map_err(|_| err())?;
        let prefix: u8 = prefix.parse().map_err(|_| err())?;
        Ipv4Cidr::new(addr, prefix).map_err(|_| err())
    }
}

impl fmt::Display for Ipv4Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network(), self.prefix)
    }
}

/// The pod IPs of one node: addresses `.2` up to the last before broadcast of its pod CIDR
/// (`.1` is the node's bridge), one per pod UID, lowest free first.
#[derive(Debug)]
pub struct PodIps {
    cidr: Ipv4Cidr,
    used: BTreeSet<u64>,
    by_pod: HashMap<String, u64>,
}

impl PodIps {
    pub fn new(cidr: Ipv4Cidr) -> Self {
        PodIps {
            cidr,
            used: BTreeSet::new(),
            by_pod: HashMap::new(),
        }
    }

    pub fn cidr(&self) -> Ipv4Cidr {
        self.cidr
    }

    fn range(&self) -> std::ops::Range<u64> {
        2..self.cidr.size().saturating_sub(1)
    }

    /// The IP of pod `uid`, allocating the lowest free one the first time; `None` when the
    /// subnet is full.
    pub fn allocate(&mut self, uid: &str) -> Option<Ipv4Addr> {
        if let Some(n) = self.by_pod.get(uid) {
            return self.cidr.host(*n);
        }
        let n = self.range().find(|n| !self.used.contains(n))?;
        self.used.insert(n);
        self.by_pod.insert(uid.to_string(), n);
        self.cidr.host(n)
    }

    /// Records that pod `uid` already has `ip` (seen in its status after a restart). Returns
    /// false if the IP is outside the subnet or held by another pod.
    pub fn reserve(&mut self, uid: &str, ip: Ipv4Addr) -> bool {
        if !self.cidr.contains(ip) {
            return false;
        }
        let n = u64::from(u32::from(ip) - u32::from(self.cidr.network()));
        if !self.range().contains(&n) {
            return false;
        }
        match self.by_pod.get(uid) {
            Some(m) if *m == n => return true,
            Some(_) => return false,
            None => {}
        }
        if !self.used.insert(n) {
            return false;
        }
        self.by_pod.insert(uid.to_string(), n);
        true
    }

    /// Frees the IP of pod `uid`.
    pub fn release(&mut self, uid: &str) {
        if let Some(n) = self.by_pod.remove(uid) {
            self.used.remove(&n);
        }
    }

    /// How many IPs are in use.
    pub fn in_use(&self) -> usize {
        self.used.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cidr(s: &str) -> Ipv4Cidr {
        s.parse().expect("a CIDR")
    }

    #[test]
    fn cidrs_parse_and_print_and_refuse_host_bits() {
        assert_eq!(cidr("10.244.0.0/14").to_string(), "10.244.0.0/14");
        assert!("10.244.1.0/14".parse::<Ipv4Cidr>().is_err());
        assert!("10.244.0.0/33".parse::<Ipv4Cidr>().is_err());
        assert!("10.244.0.0".parse::<Ipv4Cidr>().is_err());
        assert!("10.244.0/24".parse::<Ipv4Cidr>().is_err());
        assert!("0.0.0.0/0".parse::<Ipv4Cidr>().is_ok());
    }

    #[test]
    fn subnets_are_numbered_from_the_network_address() {
        let pool = cidr("10.244.0.0/14");
        assert_eq!(pool.subnet_count(24), 1024);
        assert_eq!(pool.subnet(0, 24), Some(cidr("10.244.0.0/24")));
        assert_eq!(pool.subnet(7, 24), Some(cidr("10.244.7.0/24")));
        assert_eq!(pool.subnet(256, 24), Some(cidr("10.245.0.0/24")));
        assert_eq!(pool.subnet(1024, 24), None);
        assert_eq!(pool.subnet_index(&cidr("10.245.3.0/24")), Some(259));
        assert_eq!(pool.subnet_index(&cidr("10.250.0.0/24")), None);
        assert_eq!(cidr("10.0.0.0/24").subnet_count(16), 0);
    }

    #[test]
    fn hosts_and_membership() {
        let n = cidr("172.18.0.0/16");
        assert_eq!(n.host(2), Some(Ipv4Addr::new(172, 18, 0, 2)));
        assert_eq!(n.host(258), Some(Ipv4Addr::new(172, 18, 1, 2)));
        assert_eq!(n.host(65536), None);
        assert!(n.contains(Ipv4Addr::new(172, 18, 200, 1)));
        assert!(!n.contains(Ipv4Addr::new(172, 19, 0, 1)));
    }

    #[test]
    fn pod_ips_are_unique_lowest_first_and_stable_per_pod() {
        let mut ips = PodIps::new(cidr("10.244.3.0/24"));
        assert_eq!(ips.allocate("a"), Some(Ipv4Addr::new(10, 244, 3, 2)));
        assert_eq!(ips.allocate("b"), Some(Ipv4Addr::new(10, 244, 3, 3)));
        assert_eq!(ips.allocate("a"), Some(Ipv4Addr::new(10, 244, 3, 2)));
        ips.release("a");
        assert_eq!(ips.allocate("c"), Some(Ipv4Addr::new(10, 244, 3, 2)));
        assert_eq!(ips.in_use(), 2);
    }

    #[test]
    fn a_full_subnet_hands_out_nothing() {
        let mut ips = PodIps::new(cidr("10.0.0.0/29"));
        let got: Vec<_> = (0..10)
            .filter_map(|i| ips.allocate(&i.to_string()))
            .collect();
        // .2 to .6: .0 network, .1 bridge, .7 broadcast.
        assert_eq!(got.len(), 5);
        assert_eq!(got.last(), Some(&Ipv4Addr::new(10, 0, 0, 6)));
    }

    #[test]
    fn reserving_takes_an_ip_seen_in_a_status() {
        let mut ips = PodIps::new(cidr("10.244.0.0/24"));
        assert!(ips.reserve("a", Ipv4Addr::new(10, 244, 0, 2)));
        assert!(ips.reserve("a", Ipv4Addr::new(10, 244, 0, 2)));
        assert!(!ips.reserve("b", Ipv4Addr::new(10, 244, 0, 2)));
        assert!(!ips.reserve("c", Ipv4Addr::new(10, 244, 1, 2)));
        assert!(!ips.reserve("d", Ipv4Addr::new(10, 244, 0, 255)));
        assert_eq!(ips.allocate("b"), Some(Ipv4Addr::new(10, 244, 0, 3)));
    }
}
