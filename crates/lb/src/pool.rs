//! An address pool as a MetalLB `IPAddressPool` lists it: first-last ranges and CIDRs,
//! comma-separated (`127.0.100.10-127.0.100.50`, `192.0.2.0/28,198.51.100.7-198.51.100.9`).
//! A CIDR gives every address in it, its network and broadcast addresses included (MetalLB's
//! default without `avoidBuggyIPs`).

use std::collections::HashSet;
use std::net::IpAddr;
use std::str::FromStr;

/// Why a pool does not parse.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("invalid load balancer address pool {input:?}: {why}")]
pub struct PoolError {
    input: String,
    why: String,
}

/// Inclusive ranges of addresses of one family each.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pool {
    ranges: Vec<(IpAddr, IpAddr)>,
}

fn to_u128(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(v) => u128::from(u32::from(v)),
        IpAddr::V6(v) => u128::from(v),
    }
}

fn from_u128(like: IpAddr, n: u128) -> IpAddr {
    match like {
        // Within a v4 range every value fits in 32 bits.
        IpAddr::V4(_) => IpAddr::V4(std::net::Ipv4Addr::from(n as u32)),
        IpAddr::V6(_) => IpAddr::V6(std::net::Ipv6Addr::from(n)),
    }
}

impl FromStr for Pool {
    type Err = PoolError;

    fn from_str(input: &str) -> Result<Self, PoolError> {
        let fail = |why: String| PoolError {
            input: input.to_string(),
            why,
        };
        let mut ranges = Vec::new();
        for part in input.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let range = if let Some((a, b)) = part.split_once('-') {
                let first: IpAddr = a
                    .trim()
                    .parse()
                    .map_err(|_| fail(format!("{a:?} is not an IP address")))?;
                let last: IpAddr = b
                    .trim()
                    .parse()
                    .map_err(|_| fail(format!("{b:?} is not an IP address")))?;
                if first.is_ipv4() != last.is_ipv4() {
                    return Err(fail(format!("{part:?} mixes address families")));
                }
                if to_u128(first) > to_u128(last) {
                    return Err(fail(format!("{part:?} ends before it starts")));
                }
                (first, last)
            } else {
                let net: ipnet::IpNet = part
                    .parse()
                    .map_err(|_| fail(format!("{part:?} is neither a range nor a CIDR")))?;
                (net.network(), net.broadcast())
            };
            ranges.push(range);
        }
        if ranges.is_empty() {
            return Err(fail("no address".into()));
        }
        Ok(Pool { ranges })
    }
}

impl std::fmt::Display for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, (a, b)) in self.ranges.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{a}-{b}")?;
        }
        Ok(())
    }
}

impl Pool {
    /// Whether `ip` is in the pool.
    pub fn contains(&self, ip: IpAddr) -> bool {
        let n = to_u128(ip);
        self.ranges
            .iter()
            .any(|(a, b)| a.is_ipv4() == ip.is_ipv4() && to_u128(*a) <= n && n <= to_u128(*b))
    }

    /// The first address of the pool (in the order given) of a family in `families` (any
    /// when empty) that is not in `used`. Looks at no more than `used.len() + 1` addresses
    /// per range, however large the range.
    pub fn first_free(&self, used: &HashSet<IpAddr>, families: &[Family]) -> Option<IpAddr> {
        for (a, b) in &self.ranges {
            let family = Family::of(*a);
            if !families.is_empty() && !families.contains(&family) {
                continue;
            }
            let (start, end) = (to_u128(*a), to_u128(*b));
            let mut n = start;
            loop {
                let ip = from_u128(*a, n);
                if !used.contains(&ip) {
                    return Some(ip);
                }
                if n == end {
                    break;
                }
                n += 1;
            }
        }
        None
    }
}

/// An address family, as a Service's `spec.ipFamilies` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    V4,
    V6,
}

impl Family {
    pub fn of(ip: IpAddr) -> Family {
        if ip.is_ipv4() { Family::V4 } else { Family::V6 }
    }

    /// `IPv4` or `IPv6`.
    pub fn parse(s: &str) -> Option<Family> {
        match s {
            "IPv4" => Some(Family::V4),
            "IPv6" => Some(Family::V6),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn a_range_and_a_cidr_hold_exactly_their_addresses() {
        let p: Pool = "127.0.100.10-127.0.100.12, 192.0.2.0/30".parse().unwrap();
        for inside in ["127.0.100.10", "127.0.100.12", "192.0.2.0", "192.0.2.3"] {
            assert!(p.contains(ip(inside)), "{inside}");
        }
        for outside in ["127.0.100.9", "127.0.100.13", "192.0.2.4", "::1"] {
            assert!(!p.contains(ip(outside)), "{outside}");
        }
        assert_eq!(
            p.to_string(),
            "127.0.100.10-127.0.100.12,192.0.2.0-192.0.2.3"
        );
    }

    #[test]
    fn the_first_free_address_skips_used_ones_and_other_families() {
        let p: Pool = "fd00::1-fd00::2,127.0.100.10-127.0.100.11".parse().unwrap();
        let mut used = HashSet::new();
        assert_eq!(p.first_free(&used, &[Family::V4]), Some(ip("127.0.100.10")));
        assert_eq!(p.first_free(&used, &[]), Some(ip("fd00::1")));
        used.insert(ip("127.0.100.10"));
        assert_eq!(p.first_free(&used, &[Family::V4]), Some(ip("127.0.100.11")));
        used.insert(ip("127.0.100.11"));
        assert_eq!(p.first_free(&used, &[Family::V4]), None);
    }

    #[test]
    fn a_huge_range_is_searched_only_as_far_as_the_used_addresses_reach() {
        let p: Pool = "10.0.0.0/8".parse().unwrap();
        let used: HashSet<IpAddr> = (0..3u32)
            .map(|n| IpAddr::V4(std::net::Ipv4Addr::from(0x0a00_0000 + n)))
            .collect();
        assert_eq!(p.first_free(&used, &[]), Some(ip("10.0.0.3")));
    }

    #[test]
    fn malformed_pools_are_refused_with_the_reason() {
        for (input, why) in [
            ("", "no address"),
            ("127.0.0.2-127.0.0.1", "ends before it starts"),
            ("127.0.0.1-fd00::1", "mixes address families"),
            ("nonsense", "neither a range nor a CIDR"),
            ("1.2.3.4-x", "is not an IP address"),
        ] {
            let e = input.parse::<Pool>().unwrap_err().to_string();
            assert!(e.contains(why), "{input}: {e}");
        }
    }
}
