//! The ranges services allocate from: the service CIDR (cluster IPs) and the node-port range,
//! with upstream's split into a static band (low addresses, left to users who pick their own)
//! and a dynamic band (where automatic allocation looks first), so a requested IP or port is
//! rarely already taken by an automatic one (`ServiceIPStaticSubrange`,
//! `ServiceNodePortStaticSubrange`, GA since 1.26 and 1.29).

use std::net::Ipv4Addr;

/// The service CIDR kube-apiserver uses when none is configured (`--service-cluster-ip-range`).
pub const DEFAULT_SERVICE_CIDR: &str = "10.96.0.0/12";

/// The node-port range kube-apiserver uses by default (`--service-node-port-range`).
pub const DEFAULT_NODE_PORTS: (u16, u16) = (30000, 32767);

/// A range that cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RangeError {
    /// Not `a.b.c.d/n`.
    #[error("invalid CIDR {0:?}")]
    Cidr(String),
    /// Too small to hold a service (a /31 or /32) or with host bits set.
    #[error("CIDR {0} is not a usable service range")]
    Unusable(String),
    /// The port range is empty or reversed.
    #[error("invalid port range {0}-{1}")]
    Ports(u16, u16),
}

/// The size of the static band of a range of `size` values (upstream `calculateRangeOffset`
/// and its port twin): `size / step`, at least `min`, at most `max`.
fn static_band(size: u64, min: u64, step: u64, max: u64) -> u64 {
    (size / step).max(min).min(max).min(size)
}

/// The order automatic allocation tries `size` values (offsets `0..size`): from `seed` through
/// the dynamic band (wrapping inside it), then through the static band.
fn candidate_order(size: u64, band: u64, seed: u64) -> impl Iterator<Item = u64> {
    let dynamic = size - band;
    let start = if dynamic == 0 { 0 } else { seed % dynamic };
    (0..dynamic)
        .map(move |i| band + (start + i) % dynamic)
        .chain(0..band)
}

/// An IPv4 service CIDR. The network and broadcast addresses are never handed out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv4Range {
    network: u32,
    prefix: u8,
}

impl Ipv4Range {
    /// Parses `10.96.0.0/12`.
    pub fn parse(cidr: &str) -> Result<Self, RangeError> {
        let bad = || RangeError::Cidr(cidr.to_string());
        let (ip, len) = cidr.split_once('/').ok_or_else(bad)?;
        let ip: Ipv4Addr = ip.parse().map_err(|_| bad())?;
        let prefix: u8 = len.parse().map_err(|_| bad())?;
        if prefix > 30 {
            return Err(RangeError::Unusable(cidr.to_string()));
        }
        let network = u32::from(ip);
        let mask = u32::MAX << (32 - prefix);
        if network & !mask != 0 {
            return Err(RangeError::Unusable(cidr.to_string()));
        }
        Ok(Ipv4Range { network, prefix })
    }

    /// How many addresses can be allocated.
    pub fn size(&self) -> u64 {
        (1u64 << (32 - self.prefix)) - 2
    }

    /// The `i`th allocatable address (`0` is the first after the network address).
    pub fn nth(&self, i: u64) -> Option<Ipv4Addr> {
        (i < self.size()).then(|| Ipv4Addr::from(self.network + 1 + i as u32))
    }

    /// The first allocatable address: the `kubernetes` service's.
    pub fn first(&self) -> Ipv4Addr {
        Ipv4Addr::from(self.network + 1)
    }

    /// Whether `ip` can be allocated from this range.
    pub fn contains(&self, ip: Ipv4Addr) -> bool {
        let ip = u32::from(ip);
        ip > self.network && u64::from(ip - self.network) <= self.size()
    }

    /// The addresses automatic allocation tries, in order, starting from `seed`.
    pub fn candidates(&self, seed: u64) -> impl Iterator<Item = Ipv4Addr> + '_ {
        let band = static_band(self.size(), 16, 16, 256);
        candidate_order(self.size(), band, seed).filter_map(|i| self.nth(i))
    }
}

impl std::fmt::Display for Ipv4Range {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", Ipv4Addr::from(self.network), self.prefix)
    }
}

/// A node-port range, both ends included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortRange {
    pub first: u16,
    pub last: u16,
}

impl PortRange {
    pub fn new(first: u16, last: u16) -> Result<Self, RangeError> {
        if first == 0 || first > last {
            return Err(RangeError::Ports(first, last));
        }
        Ok(PortRange { first, last })
    }

    pub fn size(&self) -> u64 {
        u64::from(self.last - self.first) + 1
    }

    pub fn contains(&self, port: i64) -> bool {
        (i64::from(self.first)..=i64::from(self.last)).contains(&port)
    }

    /// The ports automatic allocation tries, in order, starting from `seed`.
    pub fn candidates(&self, seed: u64) -> impl Iterator<Item = u16> + '_ {
        let band = static_band(self.size(), 16, 32, 128);
        candidate_order(self.size(), band, seed).map(|i| self.first + i as u16)
    }
}

impl std::fmt::Display for PortRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.first, self.last)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_range_starts_at_10_96_0_1_and_excludes_network_and_broadcast() {
        let r = Ipv4Range::parse(DEFAULT_SERVICE_CIDR).unwrap();
        assert_eq!(r.first(), Ipv4Addr::new(10, 96, 0, 1));
        assert_eq!(r.size(), (1 << 20) - 2);
        assert!(r.contains(Ipv4Addr::new(10, 111, 255, 254)));
        assert!(!r.contains(Ipv4Addr::new(10, 111, 255, 255)));
        assert!(!r.contains(Ipv4Addr::new(10, 96, 0, 0)));
        assert!(!r.contains(Ipv4Addr::new(10, 112, 0, 1)));
        assert_eq!(r.to_string(), "10.96.0.0/12");
    }

    #[test]
    fn cidrs_with_host_bits_or_too_small_are_refused() {
        assert_eq!(
            Ipv4Range::parse("10.96.0.1/12"),
            Err(RangeError::Unusable("10.96.0.1/12".into()))
        );
        assert!(Ipv4Range::parse("10.0.0.0/31").is_err());
        assert!(Ipv4Range::parse("10.0.0.0").is_err());
        assert!(Ipv4Range::parse("fd00::/108").is_err());
    }

    #[test]
    fn automatic_allocation_tries_the_dynamic_band_first_and_every_address_once() {
        let r = Ipv4Range::parse("10.0.0.0/24").unwrap();
        let all: Vec<Ipv4Addr> = r.candidates(7).collect();
        assert_eq!(all.len(), 254);
        // The static band of a /24 is its first 16 addresses.
        assert!(all[..238].iter().all(|ip| ip.octets()[3] > 16));
        assert!(all[238..].iter().all(|ip| ip.octets()[3] <= 16));
        let mut sorted = all.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), 254);
    }

    #[test]
    fn node_ports_cover_the_range_with_an_86_port_static_band() {
        let (a, b) = DEFAULT_NODE_PORTS;
        let r = PortRange::new(a, b).unwrap();
        let all: Vec<u16> = r.candidates(12345).collect();
        assert_eq!(all.len(), 2768);
        assert!(all[..2768 - 86].iter().all(|p| *p >= 30086));
        assert!(r.contains(32767) && !r.contains(32768) && !r.contains(29999));
        assert_eq!(r.to_string(), "30000-32767");
        assert!(PortRange::new(10, 9).is_err());
    }
}
