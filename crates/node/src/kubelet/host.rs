//! Whether this machine can run a real node, and why (or why not): the reasons `matryoshka
//! up --node auto` logs when it picks a real node or none. A real node needs root (network
//! namespaces, cgroups, mounts), a CRI runtime that answers or a `containerd` and `runc` to
//! start, and the CNI plugins.

use std::path::{Path, PathBuf};

use super::config::DEFAULT_CRI_ENDPOINT;

fn in_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// `Ok(why)` when a real node can run here, else `Err(why not)`.
pub async fn real_node_usable(cri_endpoint: Option<&str>) -> Result<String, String> {
    if !rustix::process::geteuid().is_root() {
        return Err(
            "not running as root (a real node needs network namespaces, cgroups and mounts)".into(),
        );
    }
    if !Path::new("/sys/fs/cgroup").is_dir() {
        return Err("no cgroup filesystem at /sys/fs/cgroup".into());
    }
    let cni = ["/usr/lib/cni/bridge", "/opt/cni/bin/bridge"]
        .iter()
        .find(|p| Path::new(p).exists());
    let Some(cni) = cni else {
        return Err("the CNI plugins are not installed (containernetworking-plugins)".into());
    };
    let endpoint = cri_endpoint.unwrap_or(DEFAULT_CRI_ENDPOINT);
    if super::runtime_answers(endpoint).await {
        return Ok(format!(
            "a CRI runtime answers at {endpoint}, CNI plugins at {cni}"
        ));
    }
    let containerd =
        in_path("containerd").ok_or("containerd is not installed and no CRI runtime answers")?;
    let runc = in_path("runc")
        .or_else(|| {
            ["/usr/sbin/runc", "/usr/bin/runc"]
                .iter()
                .map(PathBuf::from)
                .find(|p| p.exists())
        })
        .ok_or("runc is not installed")?;
    Ok(format!(
        "running as root with {} and {}, CNI plugins at {cni}",
        containerd.display(),
        runc.display()
    ))
}
