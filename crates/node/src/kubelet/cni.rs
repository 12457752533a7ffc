//! The node's pod network, as a node's network add-on writes it: one CNI configuration list
//! (`10-matryoshka.conflist`) with a `bridge` on the node's podCIDR (addresses from
//! `host-local`, the bridge as the pods' gateway, masquerading of traffic leaving the
//! cluster, hairpin so a pod reaches itself through a Service) and `portmap` for `hostPort`s.
//! containerd brings every sandbox's loopback up itself with the `loopback` plugin of the
//! same directory, so the list does not repeat it. The plugins are Debian's
//! `containernetworking-plugins` (spec 1.0.0).
//!
//! The file is written atomically (a temporary file renamed into place), and only when its
//! content changes, because containerd reloads the directory on every change.

use std::path::{Path, PathBuf};

use serde_json::json;

use crate::net::Ipv4Cidr;

/// The configuration file's name: lexically first wins in containerd, so a low number.
pub const CONFLIST_NAME: &str = "10-matryoshka.conflist";
/// The bridge of a node unless configured otherwise (upstream's conventional `cni0`).
pub const DEFAULT_BRIDGE: &str = "cni0";

/// The node's network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodNetwork {
    /// The CNI network's name (also host-local's allocation directory name).
    pub name: String,
    /// The Linux bridge pods attach to (15 characters at most).
    pub bridge: String,
    /// The node's pod subnet (`spec.podCIDR`).
    pub subnet: Ipv4Cidr,
    /// Where host-local records its allocations.
    pub ipam_dir: PathBuf,
    /// The MTU of the pods' interfaces (0: the kernel's default).
    pub mtu: u32,
    /// The bridge plugin masquerades traffic leaving the pod subnet (`ipMasq`); off when
    /// the node network masquerades only what leaves the cluster, so that pods of other
    /// nodes see a pod's own address.
    pub masquerade: bool,
}

/// The configuration list of `net`.
pub fn conflist(net: &PodNetwork) -> serde_json::Value {
    let mut bridge = json!({
        "type": "bridge",
        "bridge": net.bridge,
        "isGateway": true,
        "isDefaultGateway": true,
        "ipMasq": net.masquerade,
        "hairpinMode": true,
        "ipam": {
            "type": "host-local",
            "ranges": [[{"subnet": net.subnet.to_string()}]],
            "dataDir": net.ipam_dir.display().to_string(),
        },
    });
    if net.mtu > 0 {
        bridge["mtu"] = json!(net.mtu);
    }
    json!({
        "cniVersion": "1.0.0",
        "name": net.name,
        "plugins": [
            bridge,
            {"type": "portmap", "capabilities": {"portMappings": true}, "snat": true},
        ],
    })
}

/// Writes the configuration list into `conf_dir` unless it is already there; whether it
/// wrote.
pub fn write(conf_dir: &Path, net: &PodNetwork) -> std::io::Result<bool> {
    std::fs::create_dir_all(conf_dir)?;
    std::fs::create_dir_all(&net.ipam_dir)?;
    let path = conf_dir.join(CONFLIST_NAME);
    let text = serde_json::to_string_pretty(&conflist(net)).map_err(std::io::Error::other)?;
    if std::fs::read_to_string(&path).is_ok_and(|old| old == text) {
        return Ok(false);
    }
    let tmp = conf_dir.join(format!(".{CONFLIST_NAME}.tmp"));
    std::fs::write(&tmp, &text)?;
    std::fs::rename(&tmp, &path)?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net() -> PodNetwork {
        PodNetwork {
            name: "matryoshka".into(),
            bridge: "cni0".into(),
            subnet: "10.244.1.0/24".parse().expect("cidr"),
            ipam_dir: "/d/cni/networks".into(),
            mtu: 0,
            masquerade: true,
        }
    }

    #[test]
    fn the_list_bridges_pods_on_the_node_subnet_and_maps_host_ports() {
        let c = conflist(&net());
        assert_eq!(c["cniVersion"], "1.0.0");
        let plugins = c["plugins"].as_array().expect("plugins");
        assert_eq!(plugins[0]["type"], "bridge");
        assert_eq!(plugins[0]["ipam"]["type"], "host-local");
        assert_eq!(
            plugins[0]["ipam"]["ranges"][0][0]["subnet"],
            "10.244.1.0/24"
        );
        assert_eq!(plugins[0]["isGateway"], true);
        assert_eq!(plugins[1]["type"], "portmap");
        assert_eq!(plugins[1]["capabilities"]["portMappings"], true);
        assert!(plugins[0].get("mtu").is_none());
    }

    #[test]
    fn the_file_is_rewritten_only_when_it_changes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut n = net();
        n.ipam_dir = dir.path().join("ipam");
        assert!(write(dir.path(), &n).expect("write"));
        assert!(!write(dir.path(), &n).expect("write"));
        n.subnet = "10.244.2.0/24".parse().expect("cidr");
        assert!(write(dir.path(), &n).expect("write"));
        let text = std::fs::read_to_string(dir.path().join(CONFLIST_NAME)).expect("read");
        assert!(text.contains("10.244.2.0/24"));
    }
}
