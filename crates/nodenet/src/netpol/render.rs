//! The NetworkPolicy table, `ip matryoshka-netpol`, and the transactions that keep it equal
//! to a [`Desired`].
//!
//! ```text
//! chain forward  (filter, forward, priority 0: after kube-proxy's DNAT, so destinations
//!                 are endpoints, before SNAT, so sources are the clients)
//!   ct state established,related accept     replies of allowed connections
//!   ip saddr vmap @egress-pods              jump egress-<pod>: return if allowed, else drop
//!   ip daddr vmap @ingress-pods             jump ingress-<pod>
//! chain input    (filter, input, priority 0: pods → this node)
//!   ct state established,related accept
//!   ip daddr . meta l4proto . th dport @node-dns accept    the node's cluster DNS
//!   ip saddr vmap @egress-pods
//! ```
//!
//! Traffic the node itself sends to its pods (kubelet probes) takes the output path and is
//! never checked, as upstream implementations allow it. The node's DNS server is not a pod,
//! so no policy can select it: pods always reach it (see the crate docs).
//!
//! The first sync (and one after a failure) replaces the table atomically. Later syncs
//! diff: set elements added and deleted one by one, a pod's chain rewritten only when its
//! rules changed, map elements updated; chains no longer used are flushed and deleted a
//! sync later (as the proxier does).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use super::model::Desired;
use crate::nft::{BaseChain, Family, Transaction, priority};

/// The table's name.
pub const TABLE: &str = "matryoshka-netpol";
/// How long a flushed chain waits before it is deleted.
pub const STALE_CHAIN_DELAY: Duration = Duration::from_secs(1);

const PEER_SET_TYPE: &str = "ipv4_addr";
const PORT_SET_TYPE: &str = "ipv4_addr . inet_proto . inet_service";

fn tx() -> Transaction {
    Transaction::new(Family::Ip, TABLE)
}

/// The table as last applied.
#[derive(Debug, Default)]
pub struct Table {
    applied: Option<Desired>,
    dns: Vec<String>,
    stale: BTreeMap<String, Instant>,
}

fn add_set(tx: &mut Transaction, name: &str, interval: bool, elements: &BTreeSet<String>) {
    if interval {
        tx.add_set(name, PEER_SET_TYPE, &["interval"], None, None);
    } else {
        tx.add_set(name, PORT_SET_TYPE, &[], None, None);
    }
    for e in elements {
        tx.add_element(name, e, None, None);
    }
}

fn sync_set(tx: &mut Transaction, name: &str, old: &BTreeSet<String>, new: &BTreeSet<String>) {
    for e in old.difference(new) {
        tx.delete_element(name, e);
    }
    for e in new.difference(old) {
        tx.add_element(name, e, None, None);
    }
}

fn write_chain(tx: &mut Transaction, name: &str, rules: &[String]) {
    for r in rules {
        tx.add_rule(name, r);
    }
}

impl Table {
    /// `dns` are the node DNS server's `ip . proto . port` elements.
    pub fn new(dns: Vec<String>) -> Self {
        Table {
            applied: None,
            dns,
            stale: BTreeMap::new(),
        }
    }

    /// Whether the next sync replaces the table.
    pub fn needs_full(&self) -> bool {
        self.applied.is_none()
    }

    /// Forgets what was applied (a transaction failed): the next sync replaces the table.
    pub fn invalidate(&mut self) {
        self.applied = None;
        self.stale.clear();
    }

    /// The transaction bringing the table to `want`, and the record to keep once it is
    /// applied (pass it to [`Table::applied`]).
    pub fn sync(&mut self, want: &Desired, now: Instant) -> Transaction {
        match &self.applied {
            None => self.full(want),
            Some(old) => {
                let old = old.clone();
                self.partial(&old, want, now)
            }
        }
    }

    /// Records that `want` is in the kernel.
    pub fn applied(&mut self, want: Desired) {
        self.applied = Some(want);
    }

    /// The transaction deleting chains flushed long enough ago.
    pub fn stale_deletions(&mut self, now: Instant) -> Transaction {
        let mut t = tx();
        let due: Vec<String> = self
            .stale
            .iter()
            .filter(|(_, at)| now.duration_since(**at) >= STALE_CHAIN_DELAY)
            .map(|(c, _)| c.clone())
            .collect();
        for c in due {
            t.delete_chain(&c);
            self.stale.remove(&c);
        }
        t
    }

    pub fn next_stale_deadline(&self) -> Option<Instant> {
        self.stale.values().min().map(|t| *t + STALE_CHAIN_DELAY)
    }

    fn full(&mut self, want: &Desired) -> Transaction {
        self.stale.clear();
        let mut t = tx();
        t.add_table(None);
        t.delete_table();
        t.add_table(Some("NetworkPolicy of the node's pods"));
        t.add_map(
            "ingress-pods",
            PEER_SET_TYPE,
            "verdict",
            Some("isolated pods' ingress chains"),
        );
        t.add_map(
            "egress-pods",
            PEER_SET_TYPE,
            "verdict",
            Some("isolated pods' egress chains"),
        );
        t.add_set(
            "node-dns",
            PORT_SET_TYPE,
            &[],
            None,
            Some("the node's cluster DNS server"),
        );
        for e in &self.dns {
            t.add_element("node-dns", e, None, None);
        }
        for (name, elements) in &want.peer_sets {
            add_set(&mut t, name, true, elements);
        }
        for (name, elements) in &want.port_sets {
            add_set(&mut t, name, false, elements);
        }
        for (name, rules) in &want.chains {
            t.add_chain(name, None);
            write_chain(&mut t, name, rules);
        }
        for (ip, chain) in &want.ingress {
            t.add_element(
                "ingress-pods",
                &ip.to_string(),
                Some(&format!("jump {chain}")),
                None,
            );
        }
        for (ip, chain) in &want.egress {
            t.add_element(
                "egress-pods",
                &ip.to_string(),
                Some(&format!("jump {chain}")),
                None,
            );
        }
        let base = |hook| {
            Some(BaseChain {
                kind: "filter",
                hook,
                priority: priority::FILTER,
            })
        };
        t.add_chain("forward", base("forward"));
        t.add_rule("forward", "ct state established,related accept");
        t.add_rule("forward", "ip saddr vmap @egress-pods");
        t.add_rule("forward", "ip daddr vmap @ingress-pods");
        t.add_chain("input", base("input"));
        t.add_rule("input", "ct state established,related accept");
        t.add_rule(
            "input",
            "ip daddr . meta l4proto . th dport @node-dns accept",
        );
        t.add_rule("input", "ip saddr vmap @egress-pods");
        t
    }

    fn partial(&mut self, old: &Desired, want: &Desired, now: Instant) -> Transaction {
        let mut t = tx();
        // Sets first: new chains may refer to new sets.
        for (name, elements) in &want.peer_sets {
            match old.peer_sets.get(name) {
                None => add_set(&mut t, name, true, elements),
                Some(o) => sync_set(&mut t, name, o, elements),
            }
        }
        for (name, elements) in &want.port_sets {
            match old.port_sets.get(name) {
                None => add_set(&mut t, name, false, elements),
                Some(o) => sync_set(&mut t, name, o, elements),
            }
        }
        for (name, rules) in &want.chains {
            match old.chains.get(name) {
                Some(o) if o == rules => {}
                Some(_) => {
                    t.flush_chain(name);
                    write_chain(&mut t, name, rules);
                }
                None => {
                    t.add_chain(name, None);
                    t.flush_chain(name);
                    write_chain(&mut t, name, rules);
                    self.stale.remove(name);
                }
            }
        }
        let maps = [
            ("ingress-pods", &old.ingress, &want.ingress),
            ("egress-pods", &old.egress, &want.egress),
        ];
        for (map, o, w) in maps {
            for (ip, chain) in o {
                if w.get(ip) != Some(chain) {
                    t.delete_element(map, &ip.to_string());
                }
            }
            for (ip, chain) in w {
                if o.get(ip) != Some(chain) {
                    t.add_element(map, &ip.to_string(), Some(&format!("jump {chain}")), None);
                }
            }
        }
        for name in old.chains.keys() {
            if !want.chains.contains_key(name) {
                t.flush_chain(name);
                self.stale.insert(name.clone(), now);
            }
        }
        for name in old.peer_sets.keys() {
            if !want.peer_sets.contains_key(name) {
                t.delete_set(name);
            }
        }
        for name in old.port_sets.keys() {
            if !want.port_sets.contains_key(name) {
                t.delete_set(name);
            }
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn desired(ip: &str, rules: &[&str], peers: &[&str]) -> Desired {
        let mut d = Desired::default();
        d.chains.insert(
            "ingress-X-a/web".into(),
            rules.iter().map(|r| r.to_string()).collect(),
        );
        d.ingress
            .insert(ip.parse().unwrap(), "ingress-X-a/web".into());
        d.peer_sets.insert(
            "peers-Y-a/p/ingress/0".into(),
            peers.iter().map(|p| p.to_string()).collect(),
        );
        d
    }

    #[test]
    fn the_first_sync_replaces_the_table_and_later_ones_change_only_what_changed() {
        let mut table = Table::new(vec!["10.99.0.2 . udp . 53".into()]);
        let t0 = Instant::now();
        let rules = ["ip saddr @peers-Y-a/p/ingress/0 return", "drop"];
        let d1 = desired("10.244.1.5", &rules, &["10.244.2.7"]);
        let full = table.sync(&d1, t0);
        let s = full.script();
        assert!(
            s.starts_with("add table ip matryoshka-netpol \ndelete table ip matryoshka-netpol \n"),
            "{s}"
        );
        assert!(s.contains("add element ip matryoshka-netpol node-dns { 10.99.0.2 . udp . 53 }"));
        assert!(s.contains(
            "add element ip matryoshka-netpol ingress-pods { 10.244.1.5 : jump ingress-X-a/web }"
        ));
        table.applied(d1.clone());

        let d2 = desired("10.244.1.5", &rules, &["10.244.2.7", "10.244.3.1"]);
        let p = table.sync(&d2, t0);
        assert_eq!(
            p.script(),
            "add element ip matryoshka-netpol peers-Y-a/p/ingress/0 { 10.244.3.1 }\n",
            "a new peer is one element"
        );
        table.applied(d2.clone());

        let p = table.sync(&Desired::default(), t0);
        let s = p.script();
        assert!(
            s.contains("delete element ip matryoshka-netpol ingress-pods { 10.244.1.5 }"),
            "{s}"
        );
        assert!(
            s.contains("flush chain ip matryoshka-netpol ingress-X-a/web"),
            "{s}"
        );
        assert!(
            s.trim_end()
                .ends_with("delete set ip matryoshka-netpol peers-Y-a/p/ingress/0"),
            "{s}"
        );
        table.applied(Desired::default());
        assert!(table.stale_deletions(t0).is_empty());
        let later = table.stale_deletions(t0 + STALE_CHAIN_DELAY);
        assert_eq!(
            later.script(),
            "delete chain ip matryoshka-netpol ingress-X-a/web\n"
        );
    }
}
