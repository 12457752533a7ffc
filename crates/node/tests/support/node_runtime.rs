//! A real container runtime for a test: the agent's containerd supervisor on a fresh data
//! directory, the test images imported, and a guard that leaves nothing behind — on success
//! and on failure alike: every sandbox stopped and removed through CRI (containerd is started
//! again for that if it is down), containerd stopped, shims of this containerd ended, mounts
//! under the data directory detached, the test's cgroups and bridge removed, the directory
//! deleted.

use std::path::{Path, PathBuf};
use std::time::Duration;

use node::kubelet::Layout;
use node::kubelet::containerd::{Containerd, ContainerdOptions};
use node::kubelet::cri::CriClient;

use super::images;

/// A unique short suffix for names that must not clash between tests (bridges, cgroups).
pub fn unique() -> String {
    uuid::Uuid::new_v4().simple().to_string()[..8].to_string()
}

/// A test's runtime: data directory, containerd, bridge and cgroup root names.
pub struct TestRuntime {
    pub layout: Layout,
    pub containerd: Option<Containerd>,
    pub options: ContainerdOptions,
    /// The bridge pods attach to (`mk<suffix>`).
    pub bridge: String,
    /// The cgroup root of the test's pods (`/mtest-<suffix>`).
    pub cgroup_root: String,
    dir: Option<tempfile::TempDir>,
}

impl TestRuntime {
    /// Starts containerd on a fresh data directory with the test images.
    pub async fn start() -> TestRuntime {
        let mut rt = TestRuntime::prepare();
        rt.start_containerd().await;
        rt
    }

    /// A data directory and options, containerd not started (the agent starts it).
    pub fn prepare() -> TestRuntime {
        // Short paths: unix socket paths are limited to 108 bytes.
        let dir = tempfile::Builder::new()
            .prefix("mk")
            .tempdir_in("/tmp")
            .expect("tempdir");
        let layout = Layout::new(dir.path());
        let preload = images::test_images();
        let id = unique();
        TestRuntime {
            layout,
            containerd: None,
            options: ContainerdOptions {
                sandbox_image: images::PAUSE.to_string(),
                preload,
                ..ContainerdOptions::default()
            },
            bridge: format!("mk{id}"),
            cgroup_root: format!("/mtest-{id}"),
            dir: Some(dir),
        }
    }

    pub async fn start_containerd(&mut self) {
        let c = Containerd::start(&self.layout, &self.options)
            .await
            .expect("containerd starts");
        self.containerd = Some(c);
    }

    pub fn endpoint(&self) -> String {
        format!("unix://{}", self.layout.containerd_socket().display())
    }

    pub fn cri(&self) -> CriClient {
        CriClient::new(&self.endpoint()).expect("cri client")
    }

    pub fn root(&self) -> &Path {
        self.layout.root()
    }
}

/// Everything left of a runtime, for assertions: sandboxes, network namespaces, pod cgroups,
/// mounts under the data directory.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Leftovers {
    pub sandboxes: Vec<String>,
    pub netns: Vec<PathBuf>,
    pub cgroups: Vec<PathBuf>,
    pub mounts: Vec<String>,
}

impl Leftovers {
    pub fn is_empty(&self) -> bool {
        *self == Leftovers::default()
    }
}

/// Network namespaces containerd created for this runtime.
pub fn netns_of(layout: &Layout) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let dir = layout.containerd_state().join("netns");
    if let Ok(rd) = std::fs::read_dir(&dir) {
        out.extend(rd.flatten().map(|e| e.path()));
    }
    out
}

/// Pod cgroup directories (`pod<uid>`) below `root` in every v1 hierarchy.
pub fn pod_cgroups(root: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for h in cgroup_hierarchies() {
        let base = h.join(root.trim_start_matches('/'));
        walk(&base, &mut |p| {
            if p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("pod"))
            {
                out.push(p.to_path_buf());
            }
        });
    }
    out
}

fn walk(dir: &Path, f: &mut dyn FnMut(&Path)) {
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                f(&e.path());
                walk(&e.path(), f);
            }
        }
    }
}

fn cgroup_hierarchies() -> Vec<PathBuf> {
    std::fs::read_dir("/sys/fs/cgroup")
        .map(|rd| rd.flatten().map(|e| e.path()).collect())
        .unwrap_or_default()
}

/// Mount points at or below `dir`, from this process's mount table.
pub fn mounts_below(dir: &Path) -> Vec<String> {
    let table = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let prefix = dir.display().to_string();
    table
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .filter(|m| m.starts_with(&prefix))
        .map(str::to_string)
        .collect()
}

/// What the runtime still holds.
pub async fn leftovers(rt: &TestRuntime) -> Leftovers {
    let sandboxes = rt
        .cri()
        .list_pod_sandboxes()
        .await
        .expect("list sandboxes")
        .into_iter()
        .map(|s| s.id)
        .collect();
    Leftovers {
        sandboxes,
        netns: netns_of(&rt.layout),
        cgroups: pod_cgroups(&rt.cgroup_root),
        mounts: mounts_below(rt.root())
            .into_iter()
            // containerd's own state mounts (the sandbox shm of running pods excluded by the
            // sandbox check) are not the pods'.
            .filter(|m| m.contains("/pods/") || m.contains("/netns/") || m.contains("/shm"))
            .collect(),
    }
}

async fn remove_all_sandboxes(cri: &CriClient) {
    let Ok(list) = cri.list_pod_sandboxes().await else {
        return;
    };
    for s in list {
        let _ = cri.stop_pod_sandbox(&s.id).await;
        let _ = cri.remove_pod_sandbox(&s.id).await;
    }
}

impl Drop for TestRuntime {
    fn drop(&mut self) {
        let Some(dir) = self.dir.take() else { return };
        let layout = self.layout.clone();
        let options = self.options.clone();
        let containerd = self.containerd.take();
        let bridge = self.bridge.clone();
        let cgroup_root = self.cgroup_root.clone();
        // A runtime of our own: Drop may run inside a test's runtime, which cannot block.
        let done = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("cleanup runtime");
            let l = layout.clone();
            rt.block_on(async move {
                let layout = l;
                let mut containerd = containerd;
                let cri =
                    CriClient::new(&format!("unix://{}", layout.containerd_socket().display()))
                        .expect("client");
                let alive = cri.ping(Duration::from_secs(2)).await.is_ok();
                if !alive {
                    // Sandboxes may outlive a stopped containerd: start it to remove them.
                    let opts = ContainerdOptions {
                        preload: Vec::new(),
                        ..options
                    };
                    containerd = Containerd::start(&layout, &opts).await.ok();
                }
                remove_all_sandboxes(&cri).await;
                if let Some(mut c) = containerd {
                    c.stop().await;
                }
            });
            kill_shims(&layout.containerd_socket());
            for m in mounts_below(layout.root()).into_iter().rev() {
                let _ = rustix::mount::unmount(m.as_str(), rustix::mount::UnmountFlags::DETACH);
            }
            for h in cgroup_hierarchies() {
                remove_tree(&h.join(cgroup_root.trim_start_matches('/')));
            }
            let _ = std::process::Command::new("ip")
                .args(["link", "delete", &bridge])
                .stderr(std::process::Stdio::null())
                .status();
            drop(dir);
        });
        let _ = done.join();
    }
}

/// Removes a cgroup directory tree (cgroup directories are removed with rmdir, deepest first).
fn remove_tree(dir: &Path) {
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                remove_tree(&e.path());
            }
        }
    }
    let _ = std::fs::remove_dir(dir);
}

/// Ends the shims this test's containerd started (found by the containerd address in their
/// command line): a containerd killed mid-test leaves them behind.
fn kill_shims(socket: &Path) {
    let want = socket.display().to_string();
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return;
    };
    for e in rd.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(cmd) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<String> = cmd
            .split(|b| *b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        if args.first().is_some_and(|a| a.contains("containerd-shim"))
            && args.iter().any(|a| a == &want)
            && let Some(pid) = rustix::process::Pid::from_raw(pid)
        {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        }
    }
}
