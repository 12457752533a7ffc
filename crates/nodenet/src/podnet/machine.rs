//! Machines on one host: each a network namespace with an uplink, as separate hosts on one
//! LAN are.
//!
//! A [`Fabric`] is the LAN: a Linux bridge with the first address of the machine subnet
//! (default `10.99.0.0/16`, gateway `10.99.0.1`: private, off any real network), living in
//! the host's namespace (the process-machine provider: machines then reach the API server at
//! the gateway address) or in a namespace of its own (tests: nothing touches the host). A
//! [`Machine`] is a namespace whose `eth0` is one end of a veth pair, the other end a port
//! of the bridge; it gets an address of the subnet, a default route via the gateway, IP
//! forwarding and `bridge-nf-call-iptables` (a node routes for its pods, and its bridged pod
//! traffic must pass netfilter for Services and NetworkPolicy).
//!
//! Dropping a machine deletes its namespace (the veth pair goes with it); dropping a fabric
//! deletes its bridge (and its namespace, if it has one).

use std::net::Ipv4Addr;

use ipnet::Ipv4Net;
use sha2::{Digest, Sha256};

use super::netns::Netns;
use crate::error::{Error, Result};
use crate::exec;

/// A fabric's addressing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FabricConfig {
    /// The bridge's name (at most 15 characters).
    pub bridge: String,
    /// The machines' subnet; the bridge has its first address.
    pub subnet: Ipv4Net,
}

impl Default for FabricConfig {
    fn default() -> Self {
        FabricConfig {
            bridge: "mtk0".into(),
            subnet: Ipv4Net::new(Ipv4Addr::new(10, 99, 0, 0), 16).expect("a valid network"),
        }
    }
}

impl FabricConfig {
    /// The bridge's address: the machines' gateway.
    pub fn gateway(&self) -> Ipv4Addr {
        self.subnet.hosts().next().unwrap_or(self.subnet.network())
    }

    /// The address of machine `index` (0 is the first after the gateway).
    pub fn machine_address(&self, index: u32) -> Option<Ipv4Addr> {
        let a = u32::from(self.gateway()).checked_add(index + 1)?;
        let a = Ipv4Addr::from(a);
        (self.subnet.contains(&a) && a != self.subnet.broadcast()).then_some(a)
    }
}

/// The machines' LAN.
#[derive(Debug)]
pub struct Fabric {
    config: FabricConfig,
    /// The namespace the bridge lives in (none: the host's).
    netns: Option<Netns>,
    deleted: bool,
}

/// `ip` arguments run in `ns` (or the current namespace).
async fn ip_in(ns: Option<&Netns>, args: &[&str]) -> Result<exec::Output> {
    match ns {
        Some(ns) => {
            let mut all = vec!["-n", ns.name()];
            all.extend_from_slice(args);
            exec::ip(&all).await
        }
        None => exec::ip(args).await,
    }
}

impl Fabric {
    /// Creates the bridge in `netns` (the host's namespace when `None`).
    pub async fn create(config: FabricConfig, netns: Option<Netns>) -> Result<Fabric> {
        if config.bridge.len() > 15 {
            return Err(Error::Config(format!(
                "bridge name {:?} is longer than 15 characters",
                config.bridge
            )));
        }
        let gw = format!("{}/{}", config.gateway(), config.subnet.prefix_len());
        let fabric = Fabric {
            config,
            netns,
            deleted: false,
        };
        let ns = fabric.netns.as_ref();
        let br = fabric.config.bridge.as_str();
        ip_in(ns, &["link", "add", br, "type", "bridge"]).await?;
        ip_in(ns, &["addr", "add", &gw, "dev", br]).await?;
        ip_in(ns, &["link", "set", br, "up"]).await?;
        Ok(fabric)
    }

    pub fn config(&self) -> &FabricConfig {
        &self.config
    }

    /// The namespace the bridge is in (`None`: the host's).
    pub fn netns(&self) -> Option<&Netns> {
        self.netns.as_ref()
    }

    /// Creates machine `name` (its namespace's name) at `address`.
    pub async fn add_machine(&self, name: &str, address: Ipv4Addr) -> Result<Machine> {
        if !self.config.subnet.contains(&address) || address == self.config.gateway() {
            return Err(Error::Config(format!(
                "machine address {address} is not a host of {} other than its gateway",
                self.config.subnet
            )));
        }
        let netns = Netns::create(name).await?;
        let hash = Sha256::digest(format!("{}/{name}", self.config.bridge).as_bytes());
        let host_end = format!(
            "mv{}",
            hash[..6]
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
        );
        let ns = self.netns.as_ref();
        ip_in(
            ns,
            &[
                "link", "add", &host_end, "type", "veth", "peer", "name", "eth0", "netns", name,
            ],
        )
        .await?;
        ip_in(
            ns,
            &[
                "link",
                "set",
                &host_end,
                "master",
                &self.config.bridge,
                "up",
            ],
        )
        .await?;
        let cidr = format!("{address}/{}", self.config.subnet.prefix_len());
        let gw = self.config.gateway().to_string();
        netns
            .exec("ip", &["addr", "add", &cidr, "dev", "eth0"])
            .await?;
        netns.exec("ip", &["link", "set", "eth0", "up"]).await?;
        netns
            .exec("ip", &["route", "add", "default", "via", &gw])
            .await?;
        netns.sysctl("net.ipv4.ip_forward", "1").await?;
        netns
            .sysctl("net.bridge.bridge-nf-call-iptables", "1")
            .await?;
        Ok(Machine {
            netns,
            address,
            uplink: "eth0".into(),
        })
    }

    /// Deletes the bridge (and the fabric's namespace).
    pub async fn delete(mut self) -> Result<()> {
        self.deleted = true;
        let r = ip_in(self.netns.as_ref(), &["link", "del", &self.config.bridge]).await;
        if let Some(ns) = self.netns.take() {
            ns.delete().await?;
        }
        r.map(|_| ())
    }
}

impl Drop for Fabric {
    fn drop(&mut self) {
        if self.deleted {
            return;
        }
        // A fabric namespace of our own takes the bridge with it when dropped; in the host
        // namespace the bridge must be deleted itself.
        if self.netns.is_none() {
            let _ = std::process::Command::new("ip")
                .args(["link", "del", &self.config.bridge])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status();
        }
    }
}

/// A machine: a namespace with an uplink on a fabric.
#[derive(Debug)]
pub struct Machine {
    netns: Netns,
    address: Ipv4Addr,
    uplink: String,
}

impl Machine {
    pub fn netns(&self) -> &Netns {
        &self.netns
    }

    /// The machine's address (its node's InternalIP).
    pub fn address(&self) -> Ipv4Addr {
        self.address
    }

    /// The uplink's name inside the namespace (`eth0`).
    pub fn uplink(&self) -> &str {
        &self.uplink
    }

    /// Deletes the machine's namespace (dropping does the same).
    pub async fn delete(self) -> Result<()> {
        self.netns.delete().await
    }
}
