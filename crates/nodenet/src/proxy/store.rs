//! What the proxier's maps and sets hold in the kernel, so a sync writes only the elements
//! that changed (upstream's `nftElementStorage`).
//!
//! Each element remembers which service ports want it. The kernel holds the value of the
//! first; when two ports claim one key (two Services given the same external IP and port)
//! the first keeps it and the other takes over only when the first lets go, instead of
//! failing the whole transaction on a duplicate key.

use std::collections::HashMap;

use super::service::ServicePortName;
use crate::nft::Transaction;

/// The proxier's maps and sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Container {
    ClusterIps,
    ServiceIps,
    ServiceNodePorts,
    NoEndpointServices,
    NoEndpointNodePorts,
    FirewallIps,
}

impl Container {
    pub const ALL: [Container; 6] = [
        Container::ClusterIps,
        Container::ServiceIps,
        Container::ServiceNodePorts,
        Container::NoEndpointServices,
        Container::NoEndpointNodePorts,
        Container::FirewallIps,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Container::ClusterIps => "cluster-ips",
            Container::ServiceIps => "service-ips",
            Container::ServiceNodePorts => "service-nodeports",
            Container::NoEndpointServices => "no-endpoint-services",
            Container::NoEndpointNodePorts => "no-endpoint-nodeports",
            Container::FirewallIps => "firewall-ips",
        }
    }

    pub fn is_map(self) -> bool {
        self != Container::ClusterIps
    }

    fn index(self) -> usize {
        Container::ALL
            .iter()
            .position(|c| *c == self)
            .unwrap_or_default()
    }
}

#[derive(Debug, Clone)]
struct Claim {
    owner: ServicePortName,
    value: Option<String>,
    comment: Option<String>,
}

/// The elements of every container, with their claimants (the first is in the kernel).
#[derive(Debug, Default, Clone)]
pub struct Elements {
    containers: [HashMap<String, Vec<Claim>>; 6],
}

fn add(tx: &mut Transaction, c: Container, key: &str, claim: &Claim) {
    tx.add_element(
        c.name(),
        key,
        claim.value.as_deref(),
        claim.comment.as_deref(),
    );
}

impl Elements {
    /// Forgets everything (the containers are being flushed).
    pub fn reset(&mut self) {
        for c in &mut self.containers {
            c.clear();
        }
    }

    /// `owner` wants `key` (mapped to `value`) in `c`.
    pub fn ensure(
        &mut self,
        tx: &mut Transaction,
        c: Container,
        owner: &ServicePortName,
        key: String,
        value: Option<String>,
        comment: Option<String>,
    ) {
        let claims = self.containers[c.index()].entry(key.clone()).or_default();
        let claim = Claim {
            owner: owner.clone(),
            value,
            comment,
        };
        match claims.iter().position(|cl| &cl.owner == owner) {
            Some(0) => {
                if claims[0].value != claim.value {
                    tx.delete_element(c.name(), &key);
                    add(tx, c, &key, &claim);
                }
                claims[0] = claim;
            }
            Some(i) => claims[i] = claim,
            None => {
                if claims.is_empty() {
                    add(tx, c, &key, &claim);
                } else {
                    tracing::warn!(
                        container = c.name(),
                        key,
                        holder = %claims[0].owner,
                        wanted_by = %owner,
                        "two service ports claim one element; the first keeps it"
                    );
                }
                claims.push(claim);
            }
        }
    }

    /// `owner` no longer wants `key` in `c`.
    pub fn release(
        &mut self,
        tx: &mut Transaction,
        c: Container,
        owner: &ServicePortName,
        key: &str,
    ) {
        let map = &mut self.containers[c.index()];
        let Some(claims) = map.get_mut(key) else {
            return;
        };
        let Some(i) = claims.iter().position(|cl| &cl.owner == owner) else {
            return;
        };
        let was = claims.remove(i);
        if i != 0 {
            return;
        }
        match claims.first() {
            None => {
                tx.delete_element(c.name(), key);
                map.remove(key);
            }
            Some(next) => {
                if next.value != was.value {
                    tx.delete_element(c.name(), key);
                    add(tx, c, key, next);
                }
            }
        }
    }

    /// How many elements `c` holds in the kernel.
    pub fn len(&self, c: Container) -> usize {
        self.containers[c.index()].len()
    }
}

#[cfg(test)]
mod tests {
    use super::super::service::{Protocol, ServiceName};
    use super::*;
    use crate::nft::Family;

    fn spn(name: &str) -> ServicePortName {
        ServicePortName {
            service: ServiceName::new("ns", name),
            port: "p".into(),
            protocol: Protocol::Tcp,
        }
    }

    #[test]
    fn elements_are_written_only_when_they_change_and_conflicts_wait_their_turn() {
        let mut e = Elements::default();
        let mut tx = Transaction::new(Family::Ip, "t");
        let key = || "1.2.3.4 . tcp . 80".to_string();
        e.ensure(
            &mut tx,
            Container::ServiceIps,
            &spn("a"),
            key(),
            Some("goto a".into()),
            None,
        );
        e.ensure(
            &mut tx,
            Container::ServiceIps,
            &spn("a"),
            key(),
            Some("goto a".into()),
            None,
        );
        assert_eq!(tx.len(), 1, "{}", tx.script());
        e.ensure(
            &mut tx,
            Container::ServiceIps,
            &spn("b"),
            key(),
            Some("goto b".into()),
            None,
        );
        assert_eq!(tx.len(), 1, "the second claimant waits");
        e.release(&mut tx, Container::ServiceIps, &spn("a"), &key());
        assert!(tx.script().ends_with(
            "delete element ip t service-ips { 1.2.3.4 . tcp . 80 }\nadd element ip t service-ips { 1.2.3.4 . tcp . 80 : goto b }\n"
        ), "{}", tx.script());
        e.release(&mut tx, Container::ServiceIps, &spn("b"), &key());
        assert_eq!(e.len(Container::ServiceIps), 0);
        assert_eq!(tx.len(), 4);
    }
}
