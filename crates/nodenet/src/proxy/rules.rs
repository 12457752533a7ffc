//! The proxier's rules: the `kube-proxy` table as upstream's nftables proxier writes it, and
//! the transaction of each sync.
//!
//! A **full** sync writes the fixed chains, maps and sets and every service port. The first
//! one replaces the table atomically (`add table; delete table; …` in one transaction), which
//! also clears whatever a previous run left; later ones (periodic, or after a failed sync)
//! rewrite the table in place, keeping the affinity sets' state, and flush service chains the
//! kernel holds that no port uses any more. A **partial** sync touches only the service
//! ports of Services whose Service or EndpointSlices changed: their chains are flushed and
//! rewritten, their map elements added, replaced or deleted one by one (see [`store`]).
//!
//! Chains no longer used are flushed at once and deleted in a later transaction, at least
//! [`STALE_CHAIN_DELAY`] later: before Linux 6.2 the kernel notices only after a moment that
//! a chain whose map element was deleted is unreferenced (upstream's reason).
//!
//! [`store`]: super::store

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::IpAddr;
use std::time::{Duration, Instant};

use ipnet::IpNet;

use super::endpoints::{Categorized, Endpoint, categorize};
use super::names;
use super::service::{IpFamily, ServiceName, ServicePort, ServicePortName};
use super::store::{Container, Elements};
use crate::nft::{BaseChain, Transaction, priority};

/// The proxier's table (upstream's name; one per family).
pub const TABLE: &str = "kube-proxy";
/// How long a flushed chain waits before it is deleted.
pub const STALE_CHAIN_DELAY: Duration = Duration::from_secs(1);
/// Upstream's default masquerade mark (bit 14).
pub const MASQUERADE_MARK: u32 = 0x4000;

const REJECT_CHAIN: &str = "reject-chain";
const MARK_MASQ_CHAIN: &str = "mark-for-masquerade";

/// What shapes the rules besides Services and endpoints (upstream's proxier flags).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleConfig {
    pub family: IpFamily,
    /// `--masquerade-all`: masquerade all traffic to cluster IPs.
    pub masquerade_all: bool,
    pub masquerade_mark: u32,
    /// The local traffic detector: traffic from these networks is from pods (upstream's
    /// `--detect-local-mode=ClusterCIDR`). Empty: no detector.
    pub local_cidrs: Vec<IpNet>,
    /// The node's own IPs (`loadBalancerSourceRanges` that contain one let the node in).
    pub node_ips: Vec<IpAddr>,
    /// `--nodeport-addresses`: NodePorts answer on these addresses only (nftables mode
    /// defaults to the node's primary IPs); `None` for every local address.
    pub node_port_addresses: Option<Vec<IpAddr>>,
    /// The ServiceCIDRs: traffic to an unallocated address in them is dropped.
    pub service_cidrs: Vec<IpNet>,
}

impl RuleConfig {
    fn if_local(&self) -> Option<String> {
        self.cidr_match("")
    }

    fn if_not_local(&self) -> Option<String> {
        self.cidr_match("!= ")
    }

    fn cidr_match(&self, op: &str) -> Option<String> {
        let ip = self.family.ip();
        let cidrs: Vec<String> = self
            .local_cidrs
            .iter()
            .filter(|c| self.family.matches(&c.addr()))
            .map(|c| c.to_string())
            .collect();
        match cidrs.len() {
            0 => None,
            1 => Some(format!("{ip} saddr {op}{}", cidrs[0])),
            _ => Some(format!("{ip} saddr {op}{{ {} }}", cidrs.join(", "))),
        }
    }
}

/// What the kernel will hold once a sync's transaction is applied.
#[derive(Debug, Default)]
struct PortRecord {
    chains: BTreeSet<String>,
    sets: BTreeSet<String>,
    affinity_timeout: Option<u32>,
    keys: Vec<(Container, String)>,
}

/// How a sync's ports fared (for logs and metrics).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct SyncStats {
    pub ports_written: usize,
    pub chains_flushed_stale: usize,
    /// Ports with Local internal policy and no local endpoint.
    pub no_local_internal: usize,
    pub no_local_external: usize,
}

/// What one sync is given.
pub struct SyncInput<'a> {
    pub ports: &'a BTreeMap<ServicePortName, ServicePort>,
    pub endpoints: &'a HashMap<ServicePortName, Vec<Endpoint>>,
    /// Services whose ports or endpoints changed since the last successful sync.
    pub changed: &'a BTreeSet<ServiceName>,
}

/// One sync's transaction in the making.
struct Cx {
    tx: Transaction,
    stats: SyncStats,
    now: Instant,
    /// Affinity sets already deleted in this transaction.
    deleted_sets: BTreeSet<String>,
    /// Affinity sets to delete at its end, once no rule refers to them.
    deferred_sets: BTreeSet<String>,
}

impl Cx {
    fn new(tx: Transaction, now: Instant) -> Self {
        Cx {
            tx,
            stats: SyncStats::default(),
            now,
            deleted_sets: BTreeSet::new(),
            deferred_sets: BTreeSet::new(),
        }
    }

    fn finish(mut self) -> (Transaction, SyncStats) {
        for s in std::mem::take(&mut self.deferred_sets) {
            if !self.deleted_sets.contains(&s) {
                self.tx.delete_set(&s);
            }
        }
        (self.tx, self.stats)
    }
}

/// The proxier's record of its table.
#[derive(Debug)]
pub struct Rules {
    config: RuleConfig,
    elements: Elements,
    ports: HashMap<ServicePortName, PortRecord>,
    stale: HashMap<String, Instant>,
    replaced: bool,
}

impl Rules {
    pub fn new(config: RuleConfig) -> Self {
        Rules {
            config,
            elements: Elements::default(),
            ports: HashMap::new(),
            stale: HashMap::new(),
            replaced: false,
        }
    }

    pub fn config(&self) -> &RuleConfig {
        &self.config
    }

    fn tx(&self) -> Transaction {
        Transaction::new(self.config.family.nft_family(), TABLE)
    }

    /// Forgets what the kernel holds, so the next sync must be full. Called when a
    /// transaction failed and the record can no longer be trusted; `replace` makes the next
    /// full sync replace the table rather than rewrite it (after a failed full sync, whose
    /// in-place rewrite may fail again the same way).
    pub fn invalidate(&mut self, replace: bool) {
        self.elements.reset();
        self.ports.clear();
        self.stale.clear();
        if replace {
            self.replaced = false;
        }
    }

    /// Whether the next full sync replaces the table (and needs no listing of it).
    pub fn will_replace(&self) -> bool {
        !self.replaced
    }

    /// The transaction deleting chains flushed at least [`STALE_CHAIN_DELAY`] before `now`.
    pub fn stale_deletions(&mut self, now: Instant) -> Transaction {
        let mut tx = self.tx();
        let due: Vec<String> = self
            .stale
            .iter()
            .filter(|(_, t)| now.duration_since(**t) >= STALE_CHAIN_DELAY)
            .map(|(c, _)| c.clone())
            .collect();
        for c in due {
            tx.delete_chain(&c);
            self.stale.remove(&c);
        }
        tx
    }

    /// When the next stale chain is due for deletion.
    pub fn next_stale_deadline(&self) -> Option<Instant> {
        self.stale.values().min().map(|t| *t + STALE_CHAIN_DELAY)
    }

    /// The transaction of a full sync. `existing` lists the chains and sets the kernel
    /// holds (ignored by the first sync, which replaces the table).
    pub fn full(
        &mut self,
        input: &SyncInput<'_>,
        existing: (&[String], &[String]),
        now: Instant,
    ) -> (Transaction, SyncStats) {
        let mut cx = Cx::new(self.tx(), now);
        let replace = !self.replaced;
        if replace {
            cx.tx.add_table(None);
            cx.tx.delete_table();
            self.stale.clear();
        }
        self.setup(&mut cx.tx, !replace);
        self.elements.reset();
        let mut old = std::mem::take(&mut self.ports);
        let mut targets: BTreeSet<ServicePortName> = input.ports.keys().cloned().collect();
        targets.extend(old.keys().cloned());
        for spn in &targets {
            // The maps were flushed: no element is left to release. A replaced table has
            // none of the old chains and sets either.
            let prev = old.remove(spn).filter(|_| !replace).map(|mut r| {
                r.keys.clear();
                r
            });
            self.sync_port(&mut cx, input, spn, prev);
        }
        if !replace {
            let active: BTreeSet<&String> = self.ports.values().flat_map(|r| &r.chains).collect();
            for c in existing.0 {
                if names::is_service_chain(c) && !active.contains(c) && !self.stale.contains_key(c)
                {
                    cx.tx.flush_chain(c);
                    self.stale.insert(c.clone(), now);
                    cx.stats.chains_flushed_stale += 1;
                }
            }
            let sets: BTreeSet<&String> = self.ports.values().flat_map(|r| &r.sets).collect();
            for s in existing.1 {
                if names::is_affinity_set(s) && !sets.contains(s) {
                    cx.deferred_sets.insert(s.clone());
                }
            }
        }
        self.replaced = true;
        cx.finish()
    }

    /// The transaction of a partial sync: the ports of `input.changed` only.
    pub fn partial(&mut self, input: &SyncInput<'_>, now: Instant) -> (Transaction, SyncStats) {
        let mut cx = Cx::new(self.tx(), now);
        let mut targets: BTreeSet<ServicePortName> = BTreeSet::new();
        for svc in input.changed {
            let lo = ServicePortName {
                service: svc.clone(),
                port: String::new(),
                protocol: super::service::Protocol::Tcp,
            };
            targets.extend(
                input
                    .ports
                    .range(lo..)
                    .take_while(|(k, _)| &k.service == svc)
                    .map(|(k, _)| k.clone()),
            );
            targets.extend(self.ports.keys().filter(|k| &k.service == svc).cloned());
        }
        for spn in &targets {
            let prev = self.ports.remove(spn);
            self.sync_port(&mut cx, input, spn, prev);
        }
        cx.finish()
    }

    /// Writes one port, or removes it when it is gone.
    fn sync_port(
        &mut self,
        cx: &mut Cx,
        input: &SyncInput<'_>,
        spn: &ServicePortName,
        prev: Option<PortRecord>,
    ) {
        let prev = prev.unwrap_or_default();
        let record = match input.ports.get(spn) {
            Some(sp) => {
                if prev.affinity_timeout.is_some() && prev.affinity_timeout != sp.affinity_timeout {
                    // A set's timeout cannot change: drop the references, then the sets,
                    // before they are made again.
                    for c in &prev.chains {
                        cx.tx.flush_chain(c);
                    }
                    for s in &prev.sets {
                        cx.tx.delete_set(s);
                        cx.deleted_sets.insert(s.clone());
                    }
                }
                let empty = Vec::new();
                let eps = input.endpoints.get(spn).unwrap_or(&empty);
                cx.stats.ports_written += 1;
                self.write_port(&mut cx.tx, sp, eps, &mut cx.stats)
            }
            None => PortRecord::default(),
        };
        let new_keys: BTreeSet<&(Container, String)> = record.keys.iter().collect();
        for k in &prev.keys {
            if !new_keys.contains(k) {
                self.elements.release(&mut cx.tx, k.0, spn, &k.1);
            }
        }
        for c in prev.chains.difference(&record.chains) {
            cx.tx.flush_chain(c);
            self.stale.insert(c.clone(), cx.now);
            cx.stats.chains_flushed_stale += 1;
        }
        for c in &record.chains {
            self.stale.remove(c);
        }
        for s in prev.sets.difference(&record.sets) {
            if !cx.deleted_sets.contains(s) {
                cx.deferred_sets.insert(s.clone());
            }
        }
        for s in &record.sets {
            cx.deferred_sets.remove(s);
        }
        if input.ports.contains_key(spn) {
            self.ports.insert(spn.clone(), record);
        }
    }

    fn ensure(
        &mut self,
        tx: &mut Transaction,
        rec: &mut PortRecord,
        owner: &ServicePortName,
        (c, key, value, comment): (Container, String, Option<String>, Option<String>),
    ) {
        rec.keys.push((c, key.clone()));
        self.elements.ensure(tx, c, owner, key, value, comment);
    }

    fn write_port(
        &mut self,
        tx: &mut Transaction,
        sp: &ServicePort,
        eps: &[Endpoint],
        stats: &mut SyncStats,
    ) -> PortRecord {
        let ip = self.config.family.ip();
        let proto = sp.name.protocol.nft();
        let spn = &sp.name;
        let comment = spn.to_string();
        let cat: Categorized<'_> = categorize(eps, sp);
        let mut rec = PortRecord {
            affinity_timeout: sp.affinity_timeout,
            ..PortRecord::default()
        };
        let ensure_chain = |tx: &mut Transaction, rec: &mut PortRecord, c: &str| {
            if rec.chains.insert(c.to_string()) {
                tx.add_chain(c, None);
                tx.flush_chain(c);
            }
        };
        for e in &cat.reachable {
            ensure_chain(tx, &mut rec, &e.chain);
        }
        let chains = &sp.chains;
        let uses_cluster = !cat.cluster.is_empty() && sp.uses_cluster_endpoints();
        if uses_cluster {
            ensure_chain(tx, &mut rec, &chains.cluster);
        }
        let uses_local = !cat.local.is_empty() && sp.uses_local_endpoints();
        if uses_local {
            ensure_chain(tx, &mut rec, &chains.local);
        }
        let (internal_chain, has_internal) = if sp.internal_local {
            (&chains.local, cat.any && !cat.local.is_empty())
        } else {
            (&chains.cluster, cat.any)
        };
        let (external_policy_chain, has_external) = if sp.external_local {
            (&chains.local, cat.any && !cat.local.is_empty())
        } else {
            (&chains.cluster, cat.any)
        };
        let uses_external = cat.any && sp.externally_accessible();
        if uses_external {
            ensure_chain(tx, &mut rec, &chains.external);
        }
        let uses_firewall =
            !sp.load_balancer_ips.is_empty() && !sp.load_balancer_source_ranges.is_empty();
        if uses_firewall {
            ensure_chain(tx, &mut rec, &chains.firewall);
        }
        let reject = format!("goto {REJECT_CHAIN}");
        let (internal_filter, external_filter) = if !cat.any {
            (reject.clone(), reject)
        } else {
            if !has_internal {
                stats.no_local_internal += 1;
            }
            if !has_external {
                stats.no_local_external += 1;
            }
            ("drop".to_string(), "drop".to_string())
        };

        // Map elements.
        let cip = sp.cluster_ip.to_string();
        let key3 = |addr: &str| format!("{addr} . {proto} . {}", sp.port);
        self.ensure(
            tx,
            &mut rec,
            spn,
            (Container::ClusterIps, cip.clone(), None, None),
        );
        if has_internal {
            let v = format!("goto {internal_chain}");
            self.ensure(
                tx,
                &mut rec,
                spn,
                (Container::ServiceIps, key3(&cip), Some(v), None),
            );
        } else {
            let v = Some(internal_filter.clone());
            let c = Some(comment.clone());
            self.ensure(
                tx,
                &mut rec,
                spn,
                (Container::NoEndpointServices, key3(&cip), v, c),
            );
        }
        let to_external = format!("goto {}", chains.external);
        for ext in &sp.external_ips {
            let k = key3(&ext.to_string());
            if cat.any {
                let v = Some(to_external.clone());
                self.ensure(
                    tx,
                    &mut rec,
                    spn,
                    (Container::ServiceIps, k.clone(), v, None),
                );
            }
            if !has_external {
                let (v, c) = (Some(external_filter.clone()), Some(comment.clone()));
                self.ensure(tx, &mut rec, spn, (Container::NoEndpointServices, k, v, c));
            }
        }
        for lb in &sp.load_balancer_ips {
            let k = key3(&lb.to_string());
            if cat.any {
                let v = Some(to_external.clone());
                self.ensure(
                    tx,
                    &mut rec,
                    spn,
                    (Container::ServiceIps, k.clone(), v, None),
                );
            }
            if uses_firewall {
                let v = Some(format!("goto {}", chains.firewall));
                self.ensure(
                    tx,
                    &mut rec,
                    spn,
                    (Container::FirewallIps, k.clone(), v, None),
                );
            }
            if !has_external {
                let (v, c) = (Some(external_filter.clone()), Some(comment.clone()));
                self.ensure(tx, &mut rec, spn, (Container::NoEndpointServices, k, v, c));
            }
        }
        if sp.node_port != 0 {
            let k = format!("{proto} . {}", sp.node_port);
            if cat.any {
                let v = Some(to_external.clone());
                self.ensure(
                    tx,
                    &mut rec,
                    spn,
                    (Container::ServiceNodePorts, k.clone(), v, None),
                );
            }
            if !has_external {
                let (v, c) = (Some(external_filter.clone()), Some(comment.clone()));
                self.ensure(tx, &mut rec, spn, (Container::NoEndpointNodePorts, k, v, c));
            }
        }

        // Internal traffic: masquerade what does not come from a pod.
        if has_internal {
            let masq = if self.config.masquerade_all {
                Some(format!("{ip} daddr {cip} jump {MARK_MASQ_CHAIN}"))
            } else {
                self.config
                    .if_not_local()
                    .map(|m| format!("{ip} daddr {cip} {m} jump {MARK_MASQ_CHAIN}"))
            };
            if let Some(rule) = masq {
                tx.add_rule(internal_chain, &rule);
            }
        }

        // External traffic.
        if uses_external {
            let ext = &chains.external;
            if !sp.external_local {
                tx.add_rule(ext, &format!("jump {MARK_MASQ_CHAIN}"));
            } else {
                if let Some(m) = self.config.if_local() {
                    tx.add_rule(
                        ext,
                        &format!(
                            "{m} goto {} comment \"short-circuit pod traffic\"",
                            chains.cluster
                        ),
                    );
                }
                tx.add_rule(
                    ext,
                    &format!(
                        "fib saddr type local jump {MARK_MASQ_CHAIN} comment \"masquerade local traffic\""
                    ),
                );
                tx.add_rule(
                    ext,
                    &format!(
                        "fib saddr type local goto {} comment \"short-circuit local traffic\"",
                        chains.cluster
                    ),
                );
            }
            if has_external {
                tx.add_rule(ext, &format!("goto {external_policy_chain}"));
            }
        }

        if uses_firewall {
            let mut sources: Vec<String> = sp
                .load_balancer_source_ranges
                .iter()
                .map(|c| c.to_string())
                .collect();
            let from_node = sp
                .load_balancer_source_ranges
                .iter()
                .any(|c| self.config.node_ips.iter().any(|n| c.contains(n)));
            if from_node {
                sources.extend(sp.load_balancer_ips.iter().map(|i| i.to_string()));
            }
            tx.add_rule(
                &chains.firewall,
                &format!("{ip} saddr != {{ {} }} drop", sources.join(", ")),
            );
        }

        if let Some(timeout) = sp.affinity_timeout {
            for e in &cat.reachable {
                tx.add_set(
                    &e.affinity_set,
                    self.config.family.addr_type(),
                    &["dynamic", "timeout"],
                    Some(timeout),
                    None,
                );
                rec.sets.insert(e.affinity_set.clone());
            }
        }

        if uses_cluster {
            self.dispatch(tx, sp, &chains.cluster, &cat.cluster);
        }
        if uses_local {
            self.dispatch(tx, sp, &chains.local, &cat.local);
        }

        for e in &cat.reachable {
            tx.add_rule(
                &e.chain,
                &format!("{ip} saddr {} jump {MARK_MASQ_CHAIN}", e.ip),
            );
            if sp.affinity_timeout.is_some() {
                tx.add_rule(
                    &e.chain,
                    &format!("update @{} {{ {ip} saddr }}", e.affinity_set),
                );
            }
            tx.add_rule(
                &e.chain,
                &format!("meta l4proto {proto} dnat to {}", e.address()),
            );
        }
        rec
    }

    /// The affinity lookups and the random choice among `endpoints` in `chain`.
    fn dispatch(
        &self,
        tx: &mut Transaction,
        sp: &ServicePort,
        chain: &str,
        endpoints: &[&Endpoint],
    ) {
        let ip = self.config.family.ip();
        if sp.affinity_timeout.is_some() {
            for e in endpoints {
                tx.add_rule(
                    chain,
                    &format!("{ip} saddr @{} goto {}", e.affinity_set, e.chain),
                );
            }
        }
        let arms: Vec<String> = endpoints
            .iter()
            .enumerate()
            .map(|(i, e)| format!("{i} : goto {}", e.chain))
            .collect();
        tx.add_rule(
            chain,
            &format!(
                "numgen random mod {} vmap {{ {} }}",
                endpoints.len(),
                arms.join(" , ")
            ),
        );
    }

    /// The fixed chains, maps and sets, and their rules. `flush` empties the maps and
    /// sets of a table being rewritten in place (a fresh table is empty already).
    fn setup(&self, tx: &mut Transaction, flush: bool) {
        let ip = self.config.family.ip();
        let addr = self.config.family.addr_type();
        let key3 = format!("{addr} . inet_proto . inet_service");
        tx.add_table(Some("rules for kube-proxy"));
        tx.add_set("cluster-ips", addr, &[], None, Some("Active ClusterIPs"));
        if self.config.node_port_addresses.is_some() {
            tx.add_set(
                "nodeport-ips",
                addr,
                &[],
                None,
                Some("IPs that accept NodePort traffic"),
            );
        }
        tx.add_map(
            "firewall-ips",
            &key3,
            "verdict",
            Some("destinations that are subject to LoadBalancerSourceRanges"),
        );
        tx.add_map(
            "no-endpoint-nodeports",
            "inet_proto . inet_service",
            "verdict",
            Some("vmap to drop or reject packets to service nodeports with no endpoints"),
        );
        tx.add_map(
            "no-endpoint-services",
            &key3,
            "verdict",
            Some("vmap to drop or reject packets to services with no endpoints"),
        );
        tx.add_map(
            "service-ips",
            &key3,
            "verdict",
            Some("ClusterIP, ExternalIP and LoadBalancer IP traffic"),
        );
        tx.add_map(
            "service-nodeports",
            "inet_proto . inet_service",
            "verdict",
            Some("NodePort traffic"),
        );
        if flush {
            for c in Container::ALL {
                if c.is_map() {
                    tx.flush_map(c.name());
                } else {
                    tx.flush_set(c.name());
                }
            }
            if self.config.node_port_addresses.is_some() {
                tx.flush_set("nodeport-ips");
            }
        }
        let base = |kind, hook, priority| {
            Some(BaseChain {
                kind,
                hook,
                priority,
            })
        };
        let filter = "filter";
        let nat = "nat";
        let pre_dnat = priority::DSTNAT - 10;
        let base_chains = [
            (
                "filter-prerouting-pre-dnat",
                base(filter, "prerouting", pre_dnat),
            ),
            ("filter-output-pre-dnat", base(filter, "output", pre_dnat)),
            ("filter-forward", base(filter, "forward", priority::FILTER)),
            ("filter-input", base(filter, "input", priority::FILTER)),
            ("filter-output", base(filter, "output", priority::FILTER)),
            ("nat-output", base(nat, "output", priority::DSTNAT)),
            (
                "nat-postrouting",
                base(nat, "postrouting", priority::SRCNAT),
            ),
            ("nat-prerouting", base(nat, "prerouting", priority::DSTNAT)),
        ];
        let regular = [
            "cluster-ips-check",
            "firewall-check",
            MARK_MASQ_CHAIN,
            "masquerading",
            "nodeport-endpoints-check",
            "services",
            "service-endpoints-check",
        ];
        for (name, b) in base_chains {
            tx.add_chain(name, b);
            tx.flush_chain(name);
        }
        for name in regular {
            tx.add_chain(name, None);
            tx.flush_chain(name);
        }
        tx.add_chain_with_comment(
            REJECT_CHAIN,
            "helper for @no-endpoint-services / @no-endpoint-nodeports",
        );
        tx.flush_chain(REJECT_CHAIN);

        let mark = format!("{:#x}", self.config.masquerade_mark);
        tx.add_rule(
            "cluster-ips-check",
            &format!(
                "{ip} daddr @cluster-ips reject comment \"Reject traffic to invalid ports of ClusterIPs\""
            ),
        );
        let cidrs: Vec<String> = self
            .config
            .service_cidrs
            .iter()
            .filter(|c| self.config.family.matches(&c.addr()))
            .map(|c| c.to_string())
            .collect();
        if !cidrs.is_empty() {
            tx.add_rule(
                "cluster-ips-check",
                &format!(
                    "{ip} daddr {{ {} }} drop comment \"Drop traffic to unallocated ClusterIPs\"",
                    cidrs.join(", ")
                ),
            );
        }
        let jumps = [
            (
                "filter-prerouting-pre-dnat",
                "ct state new jump firewall-check",
            ),
            (
                "filter-forward",
                "ct state new jump service-endpoints-check",
            ),
            ("filter-forward", "ct state new jump cluster-ips-check"),
            ("filter-input", "ct state new jump nodeport-endpoints-check"),
            ("filter-input", "ct state new jump service-endpoints-check"),
            ("filter-output", "ct state new jump service-endpoints-check"),
            ("filter-output-pre-dnat", "ct state new jump firewall-check"),
            ("filter-output", "ct state new jump cluster-ips-check"),
            ("nat-output", "jump services"),
            ("nat-postrouting", "jump masquerading"),
            ("nat-prerouting", "jump services"),
        ];
        for (chain, rule) in jumps {
            tx.add_rule(chain, rule);
        }
        tx.add_rule(
            "firewall-check",
            &format!("{ip} daddr . meta l4proto . th dport vmap @firewall-ips"),
        );
        tx.add_rule(MARK_MASQ_CHAIN, &format!("mark set mark or {mark}"));
        tx.add_rule("masquerading", &format!("mark and {mark} == 0 return"));
        tx.add_rule("masquerading", &format!("mark set mark xor {mark}"));
        tx.add_rule("masquerading", "masquerade fully-random");
        let no_localhost = match self.config.family {
            IpFamily::V4 => "ip daddr != 127.0.0.0/8",
            IpFamily::V6 => "ip6 daddr != ::1",
        };
        match &self.config.node_port_addresses {
            Some(addrs) => {
                tx.add_rule(
                    "nodeport-endpoints-check",
                    &format!("{ip} daddr @nodeport-ips meta l4proto . th dport vmap @no-endpoint-nodeports"),
                );
                for a in addrs.iter().filter(|a| self.config.family.matches(a)) {
                    if a.is_loopback() {
                        tracing::warn!(address = %a, "localhost NodePorts are not supported");
                        continue;
                    }
                    tx.add_element("nodeport-ips", &a.to_string(), None, None);
                }
            }
            None => tx.add_rule(
                "nodeport-endpoints-check",
                &format!("{no_localhost} meta l4proto . th dport vmap @no-endpoint-nodeports"),
            ),
        }
        tx.add_rule(REJECT_CHAIN, "reject");
        tx.add_rule(
            "services",
            &format!("{ip} daddr . meta l4proto . th dport vmap @service-ips"),
        );
        match &self.config.node_port_addresses {
            Some(_) => tx.add_rule(
                "services",
                &format!("{ip} daddr @nodeport-ips meta l4proto . th dport vmap @service-nodeports"),
            ),
            None => tx.add_rule(
                "services",
                &format!(
                    "fib daddr type local {no_localhost} meta l4proto . th dport vmap @service-nodeports"
                ),
            ),
        }
        tx.add_rule(
            "service-endpoints-check",
            &format!("{ip} daddr . meta l4proto . th dport vmap @no-endpoint-services"),
        );
    }

    /// How many elements a container holds (for tests and logs).
    pub fn element_count(&self, c: Container) -> usize {
        self.elements.len(c)
    }
}
