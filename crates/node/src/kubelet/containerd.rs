//! The containerd supervisor: when nothing answers at the CRI endpoint, the agent runs its
//! own `containerd` with a configuration generated under the data directory, waits until
//! CRI answers, and stops it on exit.
//!
//! The configuration is containerd 1.x's `version = 2` with what this machine kind needs:
//! runc through `io.containerd.runc.v2` with the cgroupfs driver (there is no systemd),
//! `restrict_oom_score_adj = true` (no CAP_SYS_RESOURCE to lower scores), a `sandbox_image`
//! that is present locally (imported with `ctr` before the first pod), the CNI plugins of
//! Debian's `containernetworking-plugins` and our own `net.d`, network namespaces under the
//! state directory, and registry host configuration in `certs.d` (where the platform
//! registry's mirror configuration is written). Everything it writes is under
//! [`Layout`]'s `containerd/` directory.
//!
//! Stopping containerd does not stop containers: each runs under its own shim, which outlives
//! containerd, and a containerd started again on the same root and state reconnects to them.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::process::{Child, Command};

use super::cri::{CriClient, CriError};
use super::layout::Layout;

/// The pause image CRI sandboxes run unless configured otherwise (containerd 1.7's
/// default; it must be present locally, nothing here reaches a registry).
pub const DEFAULT_SANDBOX_IMAGE: &str = "registry.k8s.io/pause:3.9";

/// How long containerd may take to answer CRI after it starts.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// How long containerd may take to exit after SIGTERM before it is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);

/// Why containerd could not be run.
#[derive(Debug, thiserror::Error)]
pub enum ContainerdError {
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("containerd exited during start-up ({status}); its log ends with:\n{log}")]
    Exited { status: String, log: String },
    #[error("containerd runs without its CRI plugin; its log ends with:\n{0}")]
    NoCri(String),
    #[error("containerd did not answer CRI within {0:?}; its log ends with:\n{1}")]
    Timeout(Duration, String),
    #[error("importing {archive} with ctr failed: {message}")]
    Import { archive: String, message: String },
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> ContainerdError {
    let what = what.into();
    move |source| ContainerdError::Io { what, source }
}

/// What the agent's own containerd is made of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerdOptions {
    /// The `containerd` binary.
    pub binary: PathBuf,
    /// The `ctr` binary (image imports).
    pub ctr: PathBuf,
    /// The `runc` binary.
    pub runc: PathBuf,
    /// Where the CNI plugin binaries are.
    pub cni_bin_dir: PathBuf,
    /// The image of every sandbox's pause container.
    pub sandbox_image: String,
    /// OCI or docker archives imported into CRI's namespace (`k8s.io`) once containerd
    /// answers: the pause image, and images for air-gapped nodes.
    pub preload: Vec<PathBuf>,
    /// containerd's log level (`info`, `debug`...).
    pub log_level: String,
    /// The platform registry every registry is mirrored to (`hosts.toml` files in
    /// `certs.d`); `None`: images come from wherever their names say.
    pub registry_mirror: Option<oci::hosts::Mirror>,
}

impl Default for ContainerdOptions {
    fn default() -> Self {
        ContainerdOptions {
            binary: PathBuf::from("containerd"),
            ctr: PathBuf::from("ctr"),
            runc: find_binary("runc", &["/usr/sbin/runc", "/usr/bin/runc"]),
            cni_bin_dir: ["/usr/lib/cni", "/opt/cni/bin"]
                .iter()
                .map(PathBuf::from)
                .find(|p| p.join("bridge").exists())
                .unwrap_or_else(|| PathBuf::from("/usr/lib/cni")),
            sandbox_image: DEFAULT_SANDBOX_IMAGE.to_string(),
            preload: Vec::new(),
            log_level: "info".to_string(),
            registry_mirror: None,
        }
    }
}

fn find_binary(name: &str, candidates: &[&str]) -> PathBuf {
    candidates
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .unwrap_or_else(|| PathBuf::from(name))
}

fn toml_str(p: &Path) -> String {
    toml_string(&p.display().to_string())
}

fn toml_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The configuration file of the agent's containerd.
pub fn config(layout: &Layout, opts: &ContainerdOptions) -> String {
    let state = layout.containerd_state();
    let cri = "plugins.\"io.containerd.grpc.v1.cri\"";
    format!(
        r#"# Generated by the matryoshka node agent; rewritten at every start.
version = 2
root = {root}
state = {state}
oom_score = 0
# Snapshotters and runtimes this machine kind cannot or need not use.
disabled_plugins = [
  "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.zfs",
  "io.containerd.tracing.processor.v1.otlp",
  "io.containerd.internal.v1.tracing",
]

[grpc]
  address = {socket}

[ttrpc]
  address = {ttrpc}

[debug]
  level = {level}

[{cri}]
  sandbox_image = {sandbox}
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  disable_apparmor = true
  tolerate_missing_hugetlb_controller = true
  disable_hugetlb_controller = true
  max_container_log_line_size = 16384

  [{cri}.containerd]
    default_runtime_name = "runc"
    snapshotter = "overlayfs"

    [{cri}.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"

      [{cri}.containerd.runtimes.runc.options]
        BinaryName = {runc}
        Root = {runc_root}
        SystemdCgroup = false

  [{cri}.cni]
    bin_dir = {cni_bin}
    conf_dir = {cni_conf}
    max_conf_num = 1

  [{cri}.registry]
    config_path = {certs}

[plugins."io.containerd.internal.v1.opt"]
  path = {opt}
"#,
        root = toml_str(&layout.containerd_root()),
        state = toml_str(&state),
        socket = toml_str(&layout.containerd_socket()),
        ttrpc = toml_str(&std::path::PathBuf::from(format!(
            "{}.ttrpc",
            layout.containerd_socket().display()
        ))),
        level = toml_string(&opts.log_level),
        sandbox = toml_string(&opts.sandbox_image),
        runc = toml_str(&opts.runc),
        runc_root = toml_str(&state.join("runc")),
        cni_bin = toml_str(&opts.cni_bin_dir),
        cni_conf = toml_str(&layout.cni_conf_dir()),
        certs = toml_str(&layout.registry_hosts()),
        opt = toml_str(&layout.root().join("containerd/opt")),
    )
}

/// The agent's own containerd process.
pub struct Containerd {
    child: Option<Child>,
    socket: PathBuf,
    log: PathBuf,
}

impl Containerd {
    /// Writes the configuration, starts containerd, waits until CRI answers, then imports
    /// `opts.preload`.
    pub async fn start(layout: &Layout, opts: &ContainerdOptions) -> Result<Self, ContainerdError> {
        for dir in [
            layout.containerd_root(),
            layout.containerd_state(),
            layout.cni_conf_dir(),
            layout.registry_hosts(),
        ] {
            std::fs::create_dir_all(&dir).map_err(io(format!("creating {}", dir.display())))?;
        }
        if let Some(mirror) = &opts.registry_mirror {
            oci::hosts::write_hosts_dir(&layout.registry_hosts(), mirror).map_err(io(format!(
                "writing the registry mirror configuration in {}",
                layout.registry_hosts().display()
            )))?;
        }
        let path = layout.containerd_config();
        std::fs::write(&path, config(layout, opts))
            .map_err(io(format!("writing {}", path.display())))?;
        let socket = layout.containerd_socket();
        if let Some(dir) = socket.parent() {
            std::fs::create_dir_all(dir).map_err(io(format!("creating {}", dir.display())))?;
        }
        // A socket left by a containerd that died would make it refuse to start.
        let _ = std::fs::remove_file(&socket);
        let log = layout.root().join("containerd/containerd.log");
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .map_err(io(format!("opening {}", log.display())))?;
        let err = out.try_clone().map_err(io("duplicating the log file"))?;
        let child = Command::new(&opts.binary)
            .arg("--config")
            .arg(&path)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            // Its own process group: a terminal's Ctrl-C reaches the agent, which then stops
            // containerd in order.
            .process_group(0)
            .spawn()
            .map_err(io(format!("starting {}", opts.binary.display())))?;
        let mut me = Containerd {
            child: Some(child),
            socket,
            log,
        };
        if let Err(e) = me.wait_ready().await {
            me.stop().await;
            return Err(e);
        }
        for archive in &opts.preload {
            if let Err(e) = import(&opts.ctr, &me.socket, archive).await {
                me.stop().await;
                return Err(e);
            }
        }
        tracing::info!(socket = %me.socket.display(), "containerd is running");
        Ok(me)
    }

    /// The CRI endpoint (`unix://<socket>`).
    pub fn endpoint(&self) -> String {
        format!("unix://{}", self.socket.display())
    }

    /// The process ID, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().and_then(|c| c.id())
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(15)..].join("\n")
    }

    async fn wait_ready(&mut self) -> Result<(), ContainerdError> {
        let client = CriClient::new(&self.endpoint()).map_err(|e| ContainerdError::Io {
            what: "the containerd endpoint".to_string(),
            source: std::io::Error::other(e.to_string()),
        })?;
        let deadline = tokio::time::Instant::now() + START_TIMEOUT;
        let mut wait = Duration::from_millis(20);
        loop {
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                self.child = None;
                return Err(ContainerdError::Exited {
                    status: status.to_string(),
                    log: self.log_tail(),
                });
            }
            if self.socket.exists() {
                match client.ping(Duration::from_secs(2)).await {
                    Ok(_) => return Ok(()),
                    // containerd answers, its CRI plugin does not: a configuration it refused.
                    Err(CriError::Runtime {
                        code: tonic::Code::Unimplemented,
                        ..
                    }) => return Err(ContainerdError::NoCri(self.log_tail())),
                    Err(_) => {}
                }
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(ContainerdError::Timeout(START_TIMEOUT, self.log_tail()));
            }
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(Duration::from_millis(250));
        }
    }

    /// Stops containerd: SIGTERM, then SIGKILL after 10 s. Containers keep running under
    /// their shims.
    pub async fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        if let Some(pid) = child.id() {
            signal(pid, rustix::process::Signal::TERM);
        }
        match tokio::time::timeout(STOP_TIMEOUT, child.wait()).await {
            Ok(_) => {}
            Err(_) => {
                tracing::warn!("containerd did not stop within {STOP_TIMEOUT:?}; killing it");
                let _ = child.kill().await;
            }
        }
        tracing::info!("containerd stopped");
    }

    /// Kills containerd at once (tests: a runtime crash).
    pub async fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill().await;
        }
    }
}

impl Drop for Containerd {
    fn drop(&mut self) {
        // Not stopped in order (a panic, or an abort): ask it to exit and give it a moment,
        // so that whoever comes next finds the socket free.
        let Some(mut child) = self.child.take() else {
            return;
        };
        if let Some(pid) = child.id() {
            signal(pid, rustix::process::Signal::TERM);
        }
        let deadline = std::time::Instant::now() + STOP_TIMEOUT;
        while std::time::Instant::now() < deadline {
            if !matches!(child.try_wait(), Ok(None)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.start_kill();
    }
}

fn signal(pid: u32, sig: rustix::process::Signal) {
    if let Some(pid) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    {
        let _ = rustix::process::kill_process(pid, sig);
    }
}

/// Imports an OCI or docker archive into CRI's image namespace (`k8s.io`) with `ctr`, as
/// CRI itself has no import.
pub async fn import(ctr: &Path, socket: &Path, archive: &Path) -> Result<(), ContainerdError> {
    let out = Command::new(ctr)
        .arg("--address")
        .arg(socket)
        .args(["--namespace", "k8s.io", "images", "import"])
        .arg(archive)
        .stdin(Stdio::null())
        .output()
        .await
        .map_err(io(format!("running {}", ctr.display())))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(ContainerdError::Import {
            archive: archive.display().to_string(),
            message: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_keeps_everything_under_the_data_directory() {
        let layout = Layout::new("/data");
        let opts = ContainerdOptions {
            runc: "/usr/sbin/runc".into(),
            cni_bin_dir: "/usr/lib/cni".into(),
            ..ContainerdOptions::default()
        };
        let c = config(&layout, &opts);
        for want in [
            "root = \"/data/containerd/root\"",
            "state = \"/data/containerd/state\"",
            "address = \"/data/containerd/containerd.sock\"",
            "restrict_oom_score_adj = true",
            "SystemdCgroup = false",
            "sandbox_image = \"registry.k8s.io/pause:3.9\"",
            "conf_dir = \"/data/cni/net.d\"",
            "bin_dir = \"/usr/lib/cni\"",
            "config_path = \"/data/containerd/certs.d\"",
            "netns_mounts_under_state_dir = true",
        ] {
            assert!(c.contains(want), "{want} missing from:\n{c}");
        }
    }

    #[test]
    fn strings_are_quoted_for_toml() {
        assert_eq!(toml_string("a\"b\\c"), "\"a\\\"b\\\\c\"");
    }
}
