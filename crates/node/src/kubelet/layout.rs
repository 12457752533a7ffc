//! Where the agent keeps its files: one data directory holds containerd's root and state,
//! the CNI configuration, the pod directories (volumes, `/etc/hosts`, termination message
//! files) and the CRI container logs, so that two agents on one machine (tests) never share
//! a path and removing the directory removes the node.
//!
//! The shapes below the pod and log directories are upstream kubelet's
//! (`/var/lib/kubelet/pods/<uid>/...`, `/var/log/pods/<ns>_<name>_<uid>/<container>/<n>.log`,
//! `/var/log/containers/<pod>_<ns>_<container>-<id>.log`), rooted in the data directory.

use std::path::{Path, PathBuf};

/// The longest unix socket path containerd accepts (it refuses more than 104 bytes, the
/// portable `sun_path` size).
const MAX_SOCKET_PATH: usize = 104;

/// The data directory's layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    root: PathBuf,
}

impl Layout {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Layout { root: root.into() }
    }

    /// The data directory itself.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// containerd's persistent root (images, snapshots, metadata).
    pub fn containerd_root(&self) -> PathBuf {
        self.root.join("containerd/root")
    }

    /// containerd's state directory (sockets, runc state, network namespaces).
    pub fn containerd_state(&self) -> PathBuf {
        self.root.join("containerd/state")
    }

    /// The socket of a containerd the agent starts itself: in the data directory, unless that
    /// path is too long for a unix socket (104 bytes with containerd's `.ttrpc` sibling), then
    /// `/run/matryoshka/containerd-<hash of the data directory>.sock`.
    pub fn containerd_socket(&self) -> PathBuf {
        let beside = self.root.join("containerd/containerd.sock");
        if beside.as_os_str().len() + ".ttrpc".len() <= MAX_SOCKET_PATH {
            return beside;
        }
        let mut h: u32 = 0x811c_9dc5;
        for b in self.root.as_os_str().as_encoded_bytes() {
            h = (h ^ u32::from(*b)).wrapping_mul(0x0100_0193);
        }
        PathBuf::from(format!("/run/matryoshka/containerd-{h:08x}.sock"))
    }

    /// The generated containerd configuration.
    pub fn containerd_config(&self) -> PathBuf {
        self.root.join("containerd/config.toml")
    }

    /// containerd's registry host configuration (`certs.d`: one directory per registry host,
    /// each with a `hosts.toml`), where the platform registry's mirror configuration goes.
    pub fn registry_hosts(&self) -> PathBuf {
        self.root.join("containerd/certs.d")
    }

    /// The CNI configuration directory (`net.d`).
    pub fn cni_conf_dir(&self) -> PathBuf {
        self.root.join("cni/net.d")
    }

    /// The host-local IPAM allocations.
    pub fn cni_ipam_dir(&self) -> PathBuf {
        self.root.join("cni/networks")
    }

    /// Pod directories (upstream `/var/lib/kubelet/pods`).
    pub fn pods_dir(&self) -> PathBuf {
        self.root.join("pods")
    }

    /// The directory of pod `uid`.
    pub fn pod_dir(&self, uid: &str) -> PathBuf {
        self.pods_dir().join(uid)
    }

    /// Pod `uid`'s volumes: `volumes/<plugin>/<name>` below it (`kubernetes.io~empty-dir`...).
    pub fn pod_volumes_dir(&self, uid: &str) -> PathBuf {
        self.pod_dir(uid).join("volumes")
    }

    /// The `/etc/hosts` file the agent writes for pod `uid`.
    pub fn pod_hosts_file(&self, uid: &str) -> PathBuf {
        self.pod_dir(uid).join("etc-hosts")
    }

    /// The termination message file of one container instance, bind-mounted at its
    /// `terminationMessagePath` (upstream `containers/<name>/<random id>`).
    pub fn termination_message_file(&self, uid: &str, container: &str, instance: &str) -> PathBuf {
        self.pod_dir(uid)
            .join("containers")
            .join(container)
            .join(instance)
    }

    /// Pod log directories (upstream `/var/log/pods`).
    pub fn pod_logs_root(&self) -> PathBuf {
        self.root.join("logs/pods")
    }

    /// The log directory of a pod, the sandbox's `log_directory`
    /// (`<ns>_<name>_<uid>`).
    pub fn pod_log_dir(&self, namespace: &str, name: &str, uid: &str) -> PathBuf {
        self.pod_logs_root()
            .join(format!("{namespace}_{name}_{uid}"))
    }

    /// The CRI log file of instance `restart_count` of a container (relative to the pod log
    /// directory it is `<container>/<restart_count>.log`, the container's `log_path`).
    pub fn container_log_file(
        &self,
        namespace: &str,
        name: &str,
        uid: &str,
        container: &str,
        restart_count: u32,
    ) -> PathBuf {
        self.pod_log_dir(namespace, name, uid)
            .join(container_log_path(container, restart_count))
    }

    /// The directory of the `<pod>_<ns>_<container>-<id>.log` symlinks (upstream
    /// `/var/log/containers`).
    pub fn container_links_dir(&self) -> PathBuf {
        self.root.join("logs/containers")
    }
}

/// A container's `log_path` relative to its sandbox's log directory.
pub fn container_log_path(container: &str, restart_count: u32) -> String {
    format!("{container}/{restart_count}.log")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_files_have_the_kubelets_shape() {
        let l = Layout::new("/d");
        assert_eq!(
            l.container_log_file("ns", "web", "u-1", "main", 2),
            PathBuf::from("/d/logs/pods/ns_web_u-1/main/2.log")
        );
        assert_eq!(
            l.pod_hosts_file("u-1"),
            PathBuf::from("/d/pods/u-1/etc-hosts")
        );
    }
}

#[cfg(test)]
mod socket_tests {
    use super::*;

    #[test]
    fn a_data_directory_too_deep_for_a_unix_socket_puts_containerds_socket_under_run() {
        let short = Layout::new("/var/lib/matryoshka/node");
        assert_eq!(
            short.containerd_socket(),
            PathBuf::from("/var/lib/matryoshka/node/containerd/containerd.sock")
        );
        let deep = Layout::new(format!("/work/{}/machines/m/data", "x".repeat(80)));
        let s = deep.containerd_socket();
        assert!(s.starts_with("/run/matryoshka/"), "{}", s.display());
        assert_eq!(s, deep.containerd_socket(), "stable");
        assert_ne!(
            s,
            Layout::new(format!("/work/{}/machines/n/data", "x".repeat(80))).containerd_socket()
        );
    }
}
