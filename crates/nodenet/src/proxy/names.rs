//! Names of the per-service and per-endpoint chains and sets, exactly as upstream's
//! nftables proxier makes them, so `nft list table ip kube-proxy` reads the same on a
//! Matryoshka node as on a kube-proxy node:
//!
//! - a service port's base is `<HASH>-<ns>/<svc>/<proto>/<port name>`;
//! - an endpoint's base is `<HASH>-<ns>/<svc>/<proto>/<port name>__<ip>/<port>` (IPv6 colons
//!   as dots);
//!
//! where HASH is the first 8 characters of the base32 (RFC 4648) SHA-256 of the rest, and a
//! base longer than 240 characters is cut to 237 plus `...`. Prefixes: `service-`, `local-`,
//! `external-`, `firewall-`, `endpoint-`, `affinity-`. Only these names contain `/`, which
//! is how stale ones are told from the fixed chains.

use std::net::IpAddr;

use sha2::{Digest, Sha256};

use super::service::{ServiceChains, ServicePortName};

/// nftables' name length limit (knftables' `NameLengthMax`).
const NAME_LENGTH_MAX: usize = 256;
/// The longest prefix used, hyphen included.
const PREFIX_LENGTH_MAX: usize = 16;
const BASE_LENGTH_MAX: usize = NAME_LENGTH_MAX - PREFIX_LENGTH_MAX;

fn base32(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 32] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
    let mut out = String::with_capacity(bytes.len().div_ceil(5) * 8);
    let mut buffer: u64 = 0;
    let mut bits = 0;
    for b in bytes {
        buffer = (buffer << 8) | u64::from(*b);
        bits += 8;
        while bits >= 5 {
            bits -= 5;
            out.push(ALPHABET[((buffer >> bits) & 31) as usize] as char);
        }
    }
    if bits > 0 {
        out.push(ALPHABET[((buffer << (5 - bits)) & 31) as usize] as char);
    }
    out
}

/// `name` prefixed with 8 characters of its own hash, cut to fit.
pub fn hash_and_truncate(name: &str) -> String {
    let hash = base32(&Sha256::digest(name.as_bytes()));
    let mut out = format!("{}-{name}", &hash[..8]);
    if out.len() > BASE_LENGTH_MAX {
        let mut cut = BASE_LENGTH_MAX - 3;
        while !out.is_char_boundary(cut) {
            cut -= 1;
        }
        out.truncate(cut);
        out.push_str("...");
    }
    out
}

fn port_base(spn: &ServicePortName) -> String {
    hash_and_truncate(&format!(
        "{}/{}/{}/{}",
        spn.service.namespace,
        spn.service.name,
        spn.protocol.nft(),
        spn.port
    ))
}

/// The four chains of a service port.
pub fn service_chains(spn: &ServicePortName) -> ServiceChains {
    let base = port_base(spn);
    ServiceChains {
        cluster: format!("service-{base}"),
        local: format!("local-{base}"),
        external: format!("external-{base}"),
        firewall: format!("firewall-{base}"),
    }
}

/// The endpoint chain and affinity set names of endpoint `ip`:`port` of `spn`.
pub fn endpoint_names(spn: &ServicePortName, ip: IpAddr, port: u16) -> (String, String) {
    let ip = ip.to_string().replace(':', ".");
    let base = hash_and_truncate(&format!(
        "{}/{}/{}/{}__{ip}/{port}",
        spn.service.namespace,
        spn.service.name,
        spn.protocol.nft(),
        spn.port
    ));
    (format!("endpoint-{base}"), format!("affinity-{base}"))
}

/// Whether `chain` is a per-service or per-endpoint chain (the fixed chains have no `/`).
pub fn is_service_chain(chain: &str) -> bool {
    chain.contains('/')
}

/// Whether `set` is a per-endpoint affinity set.
pub fn is_affinity_set(set: &str) -> bool {
    set.starts_with("affinity-")
}

#[cfg(test)]
mod tests {
    use super::super::service::{Protocol, ServiceName};
    use super::*;

    fn spn(ns: &str, svc: &str, port: &str) -> ServicePortName {
        ServicePortName {
            service: ServiceName::new(ns, svc),
            port: port.into(),
            protocol: Protocol::Tcp,
        }
    }

    #[test]
    fn base32_matches_rfc_4648() {
        assert_eq!(base32(b"foobar"), "MZXW6YTBOI");
        assert_eq!(base32(b"f"), "MY");
    }

    #[test]
    fn names_match_upstreams() {
        // The chain names of upstream's proxier tests (pkg/proxy/nftables/proxier_test.go).
        let c = service_chains(&spn("ns1", "svc1", "p80"));
        assert_eq!(c.cluster, "service-ULMVA6XW-ns1/svc1/tcp/p80");
        assert_eq!(c.external, "external-ULMVA6XW-ns1/svc1/tcp/p80");
        let (chain, set) = endpoint_names(
            &spn("ns1", "svc1", "p80"),
            "10.180.0.1".parse().unwrap(),
            80,
        );
        assert_eq!(chain, "endpoint-5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80");
        assert_eq!(set, "affinity-5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80");
        assert!(is_service_chain(&chain) && !is_service_chain("services"));
    }

    #[test]
    fn long_names_are_cut_to_fit() {
        let long = "x".repeat(300);
        let name = hash_and_truncate(&long);
        assert_eq!(name.len(), BASE_LENGTH_MAX);
        assert!(name.ends_with("..."));
    }
}
