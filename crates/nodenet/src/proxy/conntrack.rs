//! Clearing UDP conntrack entries that would keep sending a Service's traffic to an endpoint
//! that is gone (upstream's `conntrack.CleanStaleEntries`).
//!
//! UDP has no connection to end, so a client that keeps sending from the same port keeps
//! hitting the conntrack entry of its first packet — DNAT to the old endpoint — for as long
//! as it sends. After a sync removes an endpoint of a UDP port, entries for each of the
//! port's addresses that were NATed to it are deleted (and for its NodePort); when a UDP
//! port gains its first endpoint, entries for its addresses are deleted so clients that were
//! rejected start over. TCP needs none of this: its connections end.

use std::collections::BTreeSet;
use std::net::IpAddr;

use crate::exec;

/// One deletion, as `conntrack -D` arguments.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Flow {
    /// Entries to `service_ip` that were NATed to `endpoint`.
    ServiceNat {
        service_ip: IpAddr,
        endpoint: IpAddr,
    },
    /// Entries to NodePort `port` that were NATed to `endpoint`.
    NodePortNat { port: u16, endpoint: IpAddr },
    /// Every entry to `service_ip`.
    Service { service_ip: IpAddr },
    /// Every entry to NodePort `port`.
    NodePort { port: u16 },
}

impl Flow {
    fn args(&self) -> Vec<String> {
        let family = |ip: &IpAddr| if ip.is_ipv6() { "ipv6" } else { "ipv4" };
        let mut a: Vec<String> = vec!["-D".into(), "-p".into(), "udp".into()];
        match self {
            Flow::ServiceNat {
                service_ip,
                endpoint,
            } => {
                a.extend(["-f".into(), family(service_ip).into()]);
                a.extend(["--orig-dst".into(), service_ip.to_string()]);
                a.extend(["--dst-nat".into(), endpoint.to_string()]);
            }
            Flow::NodePortNat { port, endpoint } => {
                a.extend(["-f".into(), family(endpoint).into()]);
                a.extend(["--orig-port-dst".into(), port.to_string()]);
                a.extend(["--dst-nat".into(), endpoint.to_string()]);
            }
            Flow::Service { service_ip } => {
                a.extend(["-f".into(), family(service_ip).into()]);
                a.extend(["--orig-dst".into(), service_ip.to_string()]);
            }
            Flow::NodePort { port } => {
                a.extend(["--orig-port-dst".into(), port.to_string()]);
            }
        }
        a
    }
}

/// The deletions one UDP port needs after its usable endpoints went from `old` to `new`.
/// `addresses` are the port's service addresses (cluster IP, external and LB IPs).
pub fn stale_flows(
    addresses: &[IpAddr],
    node_port: u16,
    old: &BTreeSet<IpAddr>,
    new: &BTreeSet<IpAddr>,
) -> Vec<Flow> {
    let mut flows = Vec::new();
    for gone in old.difference(new) {
        for a in addresses {
            flows.push(Flow::ServiceNat {
                service_ip: *a,
                endpoint: *gone,
            });
        }
        if node_port != 0 {
            flows.push(Flow::NodePortNat {
                port: node_port,
                endpoint: *gone,
            });
        }
    }
    if old.is_empty() && !new.is_empty() {
        flows.extend(addresses.iter().map(|a| Flow::Service { service_ip: *a }));
        if node_port != 0 {
            flows.push(Flow::NodePort { port: node_port });
        }
    }
    flows
}

/// What `conntrack -D` prints when nothing matched (it then exits 1).
const NOTHING_DELETED: &str = "0 flow entries have been deleted";

/// Runs the deletions; failures are logged (a stale entry only delays a client).
pub async fn clear(program: &str, flows: &BTreeSet<Flow>) {
    for f in flows {
        let args = f.args();
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        match exec::run(program, &refs, None).await {
            Ok(_) => {}
            Err(crate::Error::Command { stderr, .. }) if stderr.contains(NOTHING_DELETED) => {}
            Err(e) => tracing::warn!(error = %e, "failed to clear stale UDP conntrack entries"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ips(v: &[&str]) -> BTreeSet<IpAddr> {
        v.iter().map(|s| s.parse().unwrap()).collect()
    }

    #[test]
    fn a_removed_endpoint_clears_its_nat_entries_and_a_first_endpoint_clears_the_service() {
        let addrs: Vec<IpAddr> = vec!["10.96.0.10".parse().unwrap()];
        let flows = stale_flows(
            &addrs,
            30053,
            &ips(&["10.0.0.1", "10.0.0.2"]),
            &ips(&["10.0.0.2"]),
        );
        assert_eq!(
            flows,
            vec![
                Flow::ServiceNat {
                    service_ip: addrs[0],
                    endpoint: "10.0.0.1".parse().unwrap()
                },
                Flow::NodePortNat {
                    port: 30053,
                    endpoint: "10.0.0.1".parse().unwrap()
                },
            ]
        );
        assert_eq!(
            flows[0].args().join(" "),
            "-D -p udp -f ipv4 --orig-dst 10.96.0.10 --dst-nat 10.0.0.1"
        );
        let first = stale_flows(&addrs, 0, &ips(&[]), &ips(&["10.0.0.3"]));
        assert_eq!(
            first,
            vec![Flow::Service {
                service_ip: addrs[0]
            }]
        );
        assert!(stale_flows(&addrs, 0, &ips(&["10.0.0.3"]), &ips(&["10.0.0.3"])).is_empty());
    }
}
