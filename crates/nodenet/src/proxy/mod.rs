//! Services on a node, as kube-proxy's nftables mode programs them.
//!
//! [`Proxier::start`] watches the cluster's Services and EndpointSlices through the node's
//! client and keeps table `ip kube-proxy` (and `ip6 kube-proxy` for IPv6) in line with them:
//!
//! - [`service`] and [`endpoints`] reduce the objects to service ports and endpoints and
//!   choose the endpoints each traffic policy uses; [`names`] names their chains;
//! - [`rules`] writes the table (full and partial syncs, see there) keeping its elements in
//!   [`store`];
//! - [`runner`] decides when to sync: at once for a lone change, at most one sync per
//!   `min_sync_period` (after a burst of two) under a stream of changes, as upstream;
//! - [`conntrack`] clears stale UDP entries after a sync; [`metrics`] measures syncs.
//!
//! One sync is one `nft -f` transaction. A change touches only its Service's chains and map
//! elements. Nothing is programmed until both watches have listed once (a restart must not
//! program half a cluster). [`Proxier::shutdown`] deletes the tables.

pub mod conntrack;
pub mod endpoints;
pub mod metrics;
pub mod names;
pub mod rules;
pub mod runner;
pub mod service;
pub mod store;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use ipnet::IpNet;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::Api;
use kube::runtime::watcher;
use tokio::sync::watch as tokio_watch;
use tokio::task::JoinHandle;

use crate::error::{Error, Result};
use crate::nft::Nft;
use crate::watch::{Change, watch};
use endpoints::{Endpoint, SliceCache, categorize};
pub use metrics::Metrics;
use rules::{RuleConfig, Rules, SyncInput};
use runner::Runner;
pub use service::{IpFamily, ServiceName, ServicePort, ServicePortName};

/// Upstream's label selectors: Services and slices handled by another proxy
/// (`service.kubernetes.io/service-proxy-name`) and headless ones are not watched.
const SERVICE_SELECTOR: &str = "!service.kubernetes.io/service-proxy-name";
const SLICE_SELECTOR: &str =
    "!service.kubernetes.io/headless,!service.kubernetes.io/service-proxy-name";

/// A proxier's settings.
#[derive(Debug, Clone)]
pub struct ProxyConfig {
    /// This node's name: endpoints with this `nodeName` are local.
    pub node_name: String,
    /// This node's addresses (primary first).
    pub node_ips: Vec<IpAddr>,
    /// Where NodePorts answer: `None` for the node's IPs (`node_ips`, nftables mode's
    /// default `--nodeport-addresses primary`), `Some(vec![])` for every local address.
    pub node_port_addresses: Option<Vec<IpAddr>>,
    /// The pod networks (upstream `--cluster-cidr`, the local traffic detector).
    pub cluster_cidrs: Vec<IpNet>,
    /// The ServiceCIDRs (unallocated addresses in them are dropped).
    pub service_cidrs: Vec<IpNet>,
    pub masquerade_all: bool,
    /// Families to program (IPv4 only unless the cluster is dual-stack).
    pub families: Vec<IpFamily>,
    /// At most one sync per this, after a burst of two (upstream `minSyncPeriod`, 1 s).
    pub min_sync_period: Duration,
    /// How long after a failed sync it is retried (upstream `syncPeriod`, 30 s).
    pub retry_period: Duration,
    /// How often the whole table is rewritten to repair drift (upstream: 1 h).
    pub full_sync_period: Duration,
    pub nft: Nft,
    /// The `conntrack` program.
    pub conntrack: String,
}

impl ProxyConfig {
    /// Upstream's defaults for node `node_name` at `node_ips`, pods in `cluster_cidrs`.
    pub fn new(node_name: &str, node_ips: Vec<IpAddr>, cluster_cidrs: Vec<IpNet>) -> Self {
        ProxyConfig {
            node_name: node_name.to_string(),
            node_ips,
            node_port_addresses: None,
            cluster_cidrs,
            service_cidrs: Vec::new(),
            masquerade_all: false,
            families: vec![IpFamily::V4],
            min_sync_period: Duration::from_secs(1),
            retry_period: Duration::from_secs(30),
            full_sync_period: Duration::from_secs(3600),
            nft: Nft::default(),
            conntrack: "conntrack".into(),
        }
    }

    fn rule_config(&self, family: IpFamily) -> RuleConfig {
        let node_ips: Vec<IpAddr> = self
            .node_ips
            .iter()
            .filter(|i| family.matches(i))
            .copied()
            .collect();
        let node_port_addresses = match &self.node_port_addresses {
            None => Some(node_ips.clone()),
            Some(v) if v.is_empty() => None,
            Some(v) => Some(v.clone()),
        };
        RuleConfig {
            family,
            masquerade_all: self.masquerade_all,
            masquerade_mark: rules::MASQUERADE_MARK,
            local_cidrs: self.cluster_cidrs.clone(),
            node_ips,
            node_port_addresses,
            service_cidrs: self.service_cidrs.clone(),
        }
    }
}

/// What the proxier has done so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Status {
    /// Successful syncs (a family's sync counts once).
    pub syncs: u64,
    pub failures: u64,
}

/// A running proxier.
#[derive(Debug)]
pub struct Proxier {
    stop: tokio_watch::Sender<bool>,
    status: tokio_watch::Receiver<Status>,
    metrics: Arc<Metrics>,
    task: Option<JoinHandle<()>>,
    config: ProxyConfig,
}

impl Proxier {
    /// Starts watching through `client` (one cluster's client) and programming the node.
    pub fn start(client: kube::Client, config: ProxyConfig) -> Proxier {
        let (stop, stopped) = tokio_watch::channel(false);
        let (status_tx, status) = tokio_watch::channel(Status::default());
        let metrics = Arc::new(Metrics::default());
        let task = tokio::spawn(run(
            client,
            config.clone(),
            metrics.clone(),
            stopped,
            status_tx,
        ));
        Proxier {
            stop,
            status,
            metrics,
            task: Some(task),
            config,
        }
    }

    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// The progress of syncs.
    pub fn status(&self) -> tokio_watch::Receiver<Status> {
        self.status.clone()
    }

    /// Waits until the first sync has programmed the rules, at most `timeout`.
    pub async fn synced(&self, timeout: Duration) -> Result<()> {
        let mut rx = self.status.clone();
        tokio::time::timeout(timeout, rx.wait_for(|s| s.syncs > 0))
            .await
            .map_err(|_| Error::SyncTimeout {
                component: "service proxy",
                timeout,
            })?
            .map_err(|_| Error::Stopped("service proxy"))?;
        Ok(())
    }

    /// Stops and removes every rule of the proxier from the kernel.
    pub async fn shutdown(mut self) -> Result<()> {
        let _ = self.stop.send(true);
        if let Some(t) = self.task.take() {
            let _ = t.await;
        }
        cleanup(&self.config.nft).await
    }
}

impl Drop for Proxier {
    fn drop(&mut self) {
        if let Some(t) = self.task.take() {
            t.abort();
        }
    }
}

/// Deletes the proxier's tables of both families (also what a previous run left).
pub async fn cleanup(nft: &Nft) -> Result<()> {
    for f in [IpFamily::V4, IpFamily::V6] {
        nft.delete_table(f.nft_family(), rules::TABLE).await?;
    }
    Ok(())
}

/// One family's rules and the state they were written from.
struct FamilyProxier {
    family: IpFamily,
    rules: Rules,
    slices: SliceCache,
    /// Service ports as last synced, and each Service's port names.
    ports: BTreeMap<ServicePortName, ServicePort>,
    /// Endpoints as last synced.
    endpoints: HashMap<ServicePortName, Vec<Endpoint>>,
    /// Services as watched (not yet synced).
    services: HashMap<ServiceName, BTreeMap<ServicePortName, ServicePort>>,
    changed: BTreeSet<ServiceName>,
    triggers: Vec<Timestamp>,
    need_full: bool,
    last_full: Option<Instant>,
}

impl FamilyProxier {
    fn new(family: IpFamily, config: &ProxyConfig) -> Self {
        FamilyProxier {
            family,
            rules: Rules::new(config.rule_config(family)),
            slices: SliceCache::default(),
            ports: BTreeMap::new(),
            endpoints: HashMap::new(),
            services: HashMap::new(),
            changed: BTreeSet::new(),
            triggers: Vec::new(),
            need_full: true,
            last_full: None,
        }
    }

    fn service(&mut self, svc: &Service, deleted: bool) -> bool {
        let name = ServiceName::new(
            svc.metadata.namespace.as_deref().unwrap_or_default(),
            svc.metadata.name.as_deref().unwrap_or_default(),
        );
        let ports = if deleted {
            BTreeMap::new()
        } else {
            service::service_ports(svc, self.family)
        };
        let old = if ports.is_empty() {
            self.services.remove(&name)
        } else {
            self.services.insert(name.clone(), ports.clone())
        };
        let changed = old.unwrap_or_default() != ports;
        if changed {
            self.changed.insert(name);
        }
        changed
    }

    fn relist_services(&mut self, all: &[Service]) -> bool {
        let mut seen = BTreeSet::new();
        let mut changed = false;
        for s in all {
            changed |= self.service(s, false);
            seen.insert(ServiceName::new(
                s.metadata.namespace.as_deref().unwrap_or_default(),
                s.metadata.name.as_deref().unwrap_or_default(),
            ));
        }
        let gone: Vec<ServiceName> = self
            .services
            .keys()
            .filter(|k| !seen.contains(*k))
            .cloned()
            .collect();
        for g in gone {
            self.services.remove(&g);
            self.changed.insert(g);
            changed = true;
        }
        changed
    }

    fn slice(&mut self, slice: &EndpointSlice, deleted: bool) -> bool {
        match self.slices.update(slice, deleted, self.family) {
            Some((svc, trigger)) => {
                self.changed.insert(svc);
                self.triggers.extend(trigger);
                true
            }
            None => false,
        }
    }

    fn relist_slices(&mut self, all: &[EndpointSlice]) -> bool {
        let changed = self.slices.replace(all, self.family);
        let any = !changed.is_empty();
        self.changed.extend(changed);
        any
    }

    /// Usable endpoints of every UDP port of `svcs`, as last synced.
    fn udp_snapshot(
        &self,
        svcs: &BTreeSet<ServiceName>,
    ) -> HashMap<ServicePortName, BTreeSet<IpAddr>> {
        let mut out = HashMap::new();
        for (spn, sp) in &self.ports {
            if spn.protocol != service::Protocol::Udp || !svcs.contains(&spn.service) {
                continue;
            }
            let eps = self
                .endpoints
                .get(spn)
                .map(Vec::as_slice)
                .unwrap_or_default();
            let reachable = categorize(eps, sp).reachable.iter().map(|e| e.ip).collect();
            out.insert(spn.clone(), reachable);
        }
        out
    }

    /// Takes the watched state of changed Services into the synced view.
    fn absorb(&mut self, node: &str) -> BTreeSet<ServiceName> {
        let changed = std::mem::take(&mut self.changed);
        for svc in &changed {
            let stale: Vec<ServicePortName> = self
                .ports
                .keys()
                .filter(|k| &k.service == svc)
                .cloned()
                .collect();
            for k in stale {
                self.ports.remove(&k);
                self.endpoints.remove(&k);
            }
            if let Some(ports) = self.services.get(svc) {
                self.ports.extend(ports.clone());
            }
            for (spn, eps) in self.slices.endpoints(svc, node) {
                self.endpoints.insert(spn, eps);
            }
        }
        changed
    }

    /// The stale UDP flows after a sync that changed `svcs` (`before` as snapshotted).
    fn stale_flows(
        &self,
        svcs: &BTreeSet<ServiceName>,
        before: &HashMap<ServicePortName, BTreeSet<IpAddr>>,
        old_ports: &HashMap<ServicePortName, ServicePort>,
    ) -> BTreeSet<conntrack::Flow> {
        let after = self.udp_snapshot(svcs);
        let mut flows = BTreeSet::new();
        let empty = BTreeSet::new();
        for (spn, old) in before {
            let new = after.get(spn).unwrap_or(&empty);
            let sp = self.ports.get(spn).or_else(|| old_ports.get(spn));
            if let Some(sp) = sp {
                let addrs: Vec<IpAddr> = sp.addresses().collect();
                flows.extend(conntrack::stale_flows(&addrs, sp.node_port, old, new));
            }
        }
        for (spn, new) in &after {
            if !before.contains_key(spn)
                && let Some(sp) = self.ports.get(spn)
            {
                let addrs: Vec<IpAddr> = sp.addresses().collect();
                flows.extend(conntrack::stale_flows(&addrs, sp.node_port, &empty, new));
            }
        }
        flows
    }
}

async fn run(
    client: kube::Client,
    config: ProxyConfig,
    metrics: Arc<Metrics>,
    mut stopped: tokio_watch::Receiver<bool>,
    status: tokio_watch::Sender<Status>,
) {
    let services = watch(
        Api::<Service>::all(client.clone()),
        watcher::Config::default().labels(SERVICE_SELECTOR),
        "services",
    );
    let slices = watch(
        Api::<EndpointSlice>::all(client),
        watcher::Config::default().labels(SLICE_SELECTOR),
        "endpointslices",
    );
    futures::pin_mut!(services, slices);
    let mut families: Vec<FamilyProxier> = config
        .families
        .iter()
        .map(|f| FamilyProxier::new(*f, &config))
        .collect();
    // Tables of a family this run does not program are a previous run's.
    for f in [IpFamily::V4, IpFamily::V6] {
        if !config.families.contains(&f)
            && let Err(e) = config.nft.delete_table(f.nft_family(), rules::TABLE).await
        {
            tracing::warn!(error = %e, "failed to delete a stale kube-proxy table");
        }
    }
    let mut runner = Runner::new(config.min_sync_period, 2, Instant::now());
    let (mut services_listed, mut slices_listed) = (false, false);
    let mut counts = Status::default();
    loop {
        let now = Instant::now();
        let stale_due = families
            .iter()
            .filter_map(|f| f.rules.next_stale_deadline())
            .min();
        let full_due = families
            .iter()
            .filter_map(|f| f.last_full.map(|t| t + config.full_sync_period))
            .min();
        let initialized = services_listed && slices_listed;
        let mut deadline = if initialized {
            runner.deadline(now)
        } else {
            None
        };
        for extra in [stale_due, full_due].into_iter().flatten() {
            if initialized {
                deadline = Some(deadline.map_or(extra, |d| d.min(extra)));
            }
        }
        let sleep = async {
            match deadline {
                Some(d) => tokio::time::sleep_until(d.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            _ = stopped.changed() => break,
            ev = services.next() => {
                let Some(ev) = ev else { break };
                let mut changed = false;
                for f in &mut families {
                    changed |= match &ev {
                        Change::Apply(s) => f.service(s, false),
                        Change::Delete(s) => f.service(s, true),
                        Change::Relisted(all) => f.relist_services(all),
                    };
                }
                if matches!(ev, Change::Relisted(_)) {
                    services_listed = true;
                }
                if changed || matches!(ev, Change::Relisted(_)) {
                    runner.request();
                }
            }
            ev = slices.next() => {
                let Some(ev) = ev else { break };
                let mut changed = false;
                for f in &mut families {
                    changed |= match &ev {
                        Change::Apply(s) => f.slice(s, false),
                        Change::Delete(s) => f.slice(s, true),
                        Change::Relisted(all) => f.relist_slices(all),
                    };
                }
                if matches!(ev, Change::Relisted(_)) {
                    slices_listed = true;
                }
                if changed || matches!(ev, Change::Relisted(_)) {
                    runner.request();
                }
            }
            _ = sleep => {
                runner.start(Instant::now());
                let mut ok = true;
                for f in &mut families {
                    ok &= sync(f, &config, &metrics).await;
                }
                if ok {
                    counts.syncs += 1;
                } else {
                    counts.failures += 1;
                    runner.retry(Instant::now(), config.retry_period);
                }
                let _ = status.send(counts);
            }
        }
    }
    if let Err(e) = cleanup(&config.nft).await {
        tracing::warn!(error = %e, "failed to remove the service rules");
    }
}

/// One sync of one family; returns whether it succeeded.
async fn sync(f: &mut FamilyProxier, config: &ProxyConfig, metrics: &Metrics) -> bool {
    let start = Instant::now();
    let stale = f.rules.stale_deletions(start);
    if let Err(e) = config.nft.run(&stale).await {
        tracing::warn!(error = %e, "failed to delete stale chains; a full sync will retry");
        f.need_full = true;
    }
    let full = f.need_full
        || f.last_full
            .is_none_or(|t| start.duration_since(t) >= config.full_sync_period);
    let pending: BTreeSet<ServiceName> = f.changed.clone();
    let before = f.udp_snapshot(&pending);
    let old_ports: HashMap<ServicePortName, ServicePort> = f
        .ports
        .iter()
        .filter(|(k, _)| pending.contains(&k.service))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let changed = f.absorb(&config.node_name);
    let triggers = std::mem::take(&mut f.triggers);
    let input = SyncInput {
        ports: &f.ports,
        endpoints: &f.endpoints,
        changed: &changed,
    };
    let (tx, stats) = if full {
        let existing = if f.rules.will_replace() {
            (Vec::new(), Vec::new())
        } else {
            let fam = f.family.nft_family();
            let chains = config
                .nft
                .chains(fam, rules::TABLE)
                .await
                .unwrap_or_default();
            let sets = config.nft.sets(fam, rules::TABLE).await.unwrap_or_default();
            (chains, sets)
        };
        f.rules.full(&input, (&existing.0, &existing.1), start)
    } else {
        f.rules.partial(&input, start)
    };
    let result = config.nft.run(&tx).await;
    let ok = match result {
        Ok(()) => {
            f.need_full = false;
            if full {
                f.last_full = Some(start);
            }
            let flows = f.stale_flows(&changed, &before, &old_ports);
            conntrack::clear(&config.conntrack, &flows).await;
            let done = Timestamp::now();
            for t in &triggers {
                if let Ok(d) = Duration::try_from(done.duration_since(*t)) {
                    metrics.network_programming.observe(d);
                }
            }
            tracing::debug!(
                family = ?f.family, full, commands = tx.len(), ?stats,
                elapsed = ?start.elapsed(), "synced service rules"
            );
            true
        }
        Err(e) => {
            tracing::error!(error = %e, full, "service rules sync failed");
            metrics.failed();
            f.rules.invalidate(full);
            f.need_full = true;
            f.triggers = triggers;
            false
        }
    };
    let elapsed = start.elapsed();
    metrics.sync_duration.observe(elapsed);
    if full {
        metrics.sync_full_duration.observe(elapsed);
    } else {
        metrics.sync_partial_duration.observe(elapsed);
    }
    ok
}
