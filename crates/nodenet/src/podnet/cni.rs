//! The node's CNI network and a minimal CNI runtime.
//!
//! [`conflist`] is the network every Matryoshka node gives its pods: the `bridge` plugin
//! (`cni0`, the pods' gateway, hairpin mode so a pod reaches itself through its Service,
//! **`ipMasq: false`** because [`super::masq`] masquerades only traffic leaving the pod
//! network, keeping pod source addresses between nodes for NetworkPolicy), `host-local`
//! addresses from the node's podCIDR, `portmap` for `hostPort`s and `loopback`.
//!
//! [`Cni`] runs a conflist's plugins as the CNI specification (1.0) says — ADD in order
//! with each plugin's result as the next one's `prevResult`, DEL in reverse — for tools
//! and tests that wire a namespace without containerd (containerd runs the same conflist
//! for real pods).

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use ipnet::Ipv4Net;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;

use super::netns::Netns;
use crate::error::{Error, Result};

/// The CNI version the conflist declares.
pub const CNI_VERSION: &str = "1.0.0";
/// Where Debian installs the plugins.
pub const DEFAULT_BIN_DIR: &str = "/usr/lib/cni";
/// The node bridge.
pub const BRIDGE: &str = "cni0";

/// The node's network `name` on `pod_cidr`; `data_dir` overrides host-local's
/// `/var/lib/cni/networks`.
pub fn conflist(name: &str, pod_cidr: Ipv4Net, data_dir: Option<&Path>) -> Value {
    let mut ipam = json!({
        "type": "host-local",
        "ranges": [[{"subnet": pod_cidr.to_string()}]],
        "routes": [{"dst": "0.0.0.0/0"}],
    });
    if let Some(d) = data_dir {
        ipam["dataDir"] = json!(d.display().to_string());
    }
    json!({
        "cniVersion": CNI_VERSION,
        "name": name,
        "plugins": [
            {
                "type": "bridge",
                "bridge": BRIDGE,
                "isGateway": true,
                "ipMasq": false,
                "hairpinMode": true,
                "ipam": ipam,
            },
            {"type": "portmap", "capabilities": {"portMappings": true}},
            {"type": "loopback"},
        ],
    })
}

/// Runs CNI plugins from `bin_dir` inside a node's namespace.
#[derive(Debug, Clone)]
pub struct Cni {
    bin_dir: PathBuf,
    /// The node's namespace (where the bridge is); `None`: the current one.
    node: Option<String>,
}

/// One attachment: what DEL needs.
#[derive(Debug, Clone)]
pub struct Attachment {
    pub container_id: String,
    pub netns: PathBuf,
    pub ifname: String,
    /// The last plugin's result.
    pub result: Value,
}

impl Attachment {
    /// The first IPv4 address of the result.
    pub fn ipv4(&self) -> Option<Ipv4Addr> {
        self.result
            .get("ips")?
            .as_array()?
            .iter()
            .filter_map(|ip| ip.get("address")?.as_str())
            .filter_map(|a| a.split('/').next()?.parse().ok())
            .next()
    }
}

impl Cni {
    pub fn new(bin_dir: impl Into<PathBuf>, node: Option<&Netns>) -> Self {
        Cni {
            bin_dir: bin_dir.into(),
            node: node.map(|n| n.name().to_string()),
        }
    }

    async fn plugin(&self, command: &str, a: &Attachment, config: &Value) -> Result<Value> {
        let kind = config
            .get("type")
            .and_then(Value::as_str)
            .ok_or_else(|| Error::Config("a CNI plugin without a type".into()))?;
        let program = self.bin_dir.join(kind);
        let program = program.display().to_string();
        let mut cmd = match &self.node {
            Some(ns) => {
                let mut c = tokio::process::Command::new("ip");
                c.args(["netns", "exec", ns, &program]);
                c
            }
            None => tokio::process::Command::new(&program),
        };
        cmd.env("CNI_COMMAND", command)
            .env("CNI_CONTAINERID", &a.container_id)
            .env("CNI_NETNS", &a.netns)
            .env("CNI_IFNAME", &a.ifname)
            .env("CNI_PATH", &self.bin_dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let spawn = |source| Error::Spawn {
            program: program.clone(),
            source,
        };
        let mut child = cmd.spawn().map_err(spawn)?;
        if let Some(mut stdin) = child.stdin.take() {
            let _ = stdin.write_all(config.to_string().as_bytes()).await;
        }
        let out = child.wait_with_output().await.map_err(spawn)?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() {
            return Err(Error::Command {
                command: format!("CNI {command} {kind}"),
                status: out.status.to_string(),
                stderr: format!(
                    "{} {}",
                    stdout.trim(),
                    String::from_utf8_lossy(&out.stderr).trim()
                ),
            });
        }
        if stdout.trim().is_empty() {
            return Ok(Value::Null);
        }
        serde_json::from_str(&stdout)
            .map_err(|e| Error::Config(format!("CNI {kind} printed no result: {e}: {stdout}")))
    }

    fn plugin_config(list: &Value, plugin: &Value, prev: &Value) -> Value {
        let mut c = plugin.clone();
        c["cniVersion"] = list["cniVersion"].clone();
        c["name"] = list["name"].clone();
        if !prev.is_null() {
            c["prevResult"] = prev.clone();
        }
        c
    }

    /// Attaches namespace `netns` (a path) as `ifname` through every plugin of `list`.
    pub async fn add(
        &self,
        list: &Value,
        container_id: &str,
        netns: &Path,
        ifname: &str,
    ) -> Result<Attachment> {
        let mut a = Attachment {
            container_id: container_id.to_string(),
            netns: netns.to_path_buf(),
            ifname: ifname.to_string(),
            result: Value::Null,
        };
        for p in list["plugins"].as_array().into_iter().flatten() {
            let config = Self::plugin_config(list, p, &a.result);
            let r = self.plugin("ADD", &a, &config).await?;
            if !r.is_null() {
                a.result = r;
            }
        }
        Ok(a)
    }

    /// Detaches, plugins in reverse order; DEL of what is already gone succeeds.
    pub async fn del(&self, list: &Value, a: &Attachment) -> Result<()> {
        let plugins: Vec<&Value> = list["plugins"].as_array().into_iter().flatten().collect();
        let mut first_err = None;
        for p in plugins.into_iter().rev() {
            let config = Self::plugin_config(list, p, &a.result);
            if let Err(e) = self.plugin("DEL", a, &config).await {
                first_err.get_or_insert(e);
            }
        }
        first_err.map_or(Ok(()), Err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_node_network_bridges_pods_without_masquerading_them() {
        let l = conflist("matryoshka", "10.244.1.0/24".parse().unwrap(), None);
        assert_eq!(l["plugins"][0]["type"], "bridge");
        assert_eq!(l["plugins"][0]["ipMasq"], false);
        assert_eq!(l["plugins"][0]["hairpinMode"], true);
        assert_eq!(
            l["plugins"][0]["ipam"]["ranges"][0][0]["subnet"],
            "10.244.1.0/24"
        );
        let c = Cni::plugin_config(&l, &l["plugins"][1], &json!({"ips": []}));
        assert_eq!(c["name"], "matryoshka");
        assert_eq!(c["cniVersion"], CNI_VERSION);
        assert!(c.get("prevResult").is_some());
    }
}
