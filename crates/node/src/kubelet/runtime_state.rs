//! A pod as the runtime has it: its sandboxes and container instances, found by the labels
//! the kubelet puts on them, with what each instance's CRI status says (state, times, exit
//! code and reason, the termination message).
//!
//! A pod worker reads this afresh at every sync (upstream's `GetPodStatus`): two filtered
//! list calls and a status call per live container. Exited instances never change, so their
//! records are cached by container ID until the instance is removed.

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::Arc;

use k8s_cri::v1 as cri;
use parking_lot::Mutex;

use super::cri::{CriClient, Result};
use super::labels;

/// A container instance's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Created,
    Running,
    Exited,
    Unknown,
}

/// One container instance.
#[derive(Debug, Clone, PartialEq)]
pub struct ContainerRecord {
    pub id: String,
    /// The name of the container in the pod spec.
    pub name: String,
    /// CRI `metadata.attempt`: the restart count this instance was created with.
    pub attempt: u32,
    pub state: State,
    pub sandbox_id: String,
    /// Unix nanoseconds; 0 when unknown.
    pub created_at: i64,
    pub started_at: i64,
    pub finished_at: i64,
    pub exit_code: i32,
    /// The runtime's reason (`Completed`, `Error`, `OOMKilled`, `StartError`...).
    pub reason: String,
    /// The termination message (file, or log tail with `FallbackToLogsOnError`), or the
    /// runtime's message.
    pub message: String,
    /// The image as the runtime names it (`docker.io/library/busybox:1.36`).
    pub image: String,
    /// The image's digest reference or ID.
    pub image_ref: String,
    /// The spec hash the instance was created from.
    pub hash: String,
    pub log_path: String,
}

/// One sandbox.
#[derive(Debug, Clone, PartialEq)]
pub struct SandboxRecord {
    pub id: String,
    pub attempt: u32,
    pub ready: bool,
    pub created_at: i64,
    /// The pod IPs (primary first), read from the sandbox status when it is ready.
    pub ips: Vec<String>,
}

/// The runtime side of one pod.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodRuntime {
    /// Newest first.
    pub sandboxes: Vec<SandboxRecord>,
    /// Newest first.
    pub containers: Vec<ContainerRecord>,
}

impl PodRuntime {
    /// The newest instance of container `name`.
    pub fn latest(&self, name: &str) -> Option<&ContainerRecord> {
        self.containers.iter().find(|c| c.name == name)
    }

    /// The instance before the newest of container `name`.
    pub fn previous(&self, name: &str) -> Option<&ContainerRecord> {
        self.containers.iter().filter(|c| c.name == name).nth(1)
    }

    /// The newest sandbox, if it is ready.
    pub fn ready_sandbox(&self) -> Option<&SandboxRecord> {
        self.sandboxes.first().filter(|s| s.ready)
    }

    /// Whether anything of the pod still runs.
    pub fn any_running(&self) -> bool {
        self.sandboxes.iter().any(|s| s.ready)
            || self
                .containers
                .iter()
                .any(|c| matches!(c.state, State::Running | State::Unknown))
    }

    pub fn is_empty(&self) -> bool {
        self.sandboxes.is_empty() && self.containers.is_empty()
    }
}

fn state_of(s: i32) -> State {
    match cri::ContainerState::try_from(s) {
        Ok(cri::ContainerState::ContainerCreated) => State::Created,
        Ok(cri::ContainerState::ContainerRunning) => State::Running,
        Ok(cri::ContainerState::ContainerExited) => State::Exited,
        _ => State::Unknown,
    }
}

/// Upstream's cap on a termination message file, bytes.
pub const MAX_TERMINATION_MESSAGE: u64 = 4096;
/// `FallbackToLogsOnError` reads the last 80 lines, at most 2048 bytes, of the log.
pub const FALLBACK_LOG_LINES: usize = 80;
pub const FALLBACK_LOG_BYTES: u64 = 2048;

/// Reads up to [`MAX_TERMINATION_MESSAGE`] bytes of a termination message file.
fn read_message_file(path: &Path) -> String {
    let Ok(f) = std::fs::File::open(path) else {
        return String::new();
    };
    let mut buf = Vec::new();
    let _ = f.take(MAX_TERMINATION_MESSAGE).read_to_end(&mut buf);
    String::from_utf8_lossy(&buf).into_owned()
}

/// The last lines of a CRI log file, message text only (upstream's
/// `ReadLastStringFromContainerLogs`).
pub fn log_tail(path: &Path, lines: usize, max_bytes: u64) -> String {
    let Ok(mut f) = std::fs::File::open(path) else {
        return String::new();
    };
    // CRI lines carry a ~40-byte prefix; read enough of the end for `max_bytes` of text.
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let window = (max_bytes * 4 + 64 * lines as u64).min(len);
    let _ = f.seek(SeekFrom::Start(len - window));
    let mut raw = Vec::new();
    let _ = f.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw);
    let mut out: Vec<String> = Vec::new();
    let mut partial = String::new();
    for line in text.lines().skip(usize::from(window < len)) {
        let mut parts = line.splitn(4, ' ');
        let (_, _, tag, msg) = (parts.next(), parts.next(), parts.next(), parts.next());
        partial.push_str(msg.unwrap_or(""));
        if tag != Some("P") {
            out.push(std::mem::take(&mut partial));
        }
    }
    let start = out.len().saturating_sub(lines);
    let mut s = out[start..].join("\n");
    if !s.is_empty() {
        s.push('\n');
    }
    let cut = s.len().saturating_sub(max_bytes as usize);
    let cut = (cut..s.len())
        .find(|i| s.is_char_boundary(*i))
        .unwrap_or(s.len());
    s[cut..].to_string()
}

fn termination_message(st: &cri::ContainerStatus) -> String {
    let path = st
        .annotations
        .get(labels::TERMINATION_MESSAGE_PATH)
        .cloned()
        .unwrap_or_default();
    let policy = st
        .annotations
        .get(labels::TERMINATION_MESSAGE_POLICY)
        .map(String::as_str);
    let mut msg = String::new();
    if !path.is_empty()
        && let Some(m) = st.mounts.iter().find(|m| m.container_path == path)
    {
        msg = read_message_file(Path::new(&m.host_path));
    }
    if msg.is_empty() && policy == Some("FallbackToLogsOnError") && st.exit_code != 0 {
        msg = log_tail(
            Path::new(&st.log_path),
            FALLBACK_LOG_LINES,
            FALLBACK_LOG_BYTES,
        );
    }
    if msg.is_empty() {
        msg = st.message.clone();
    }
    msg
}

fn record(c: &cri::Container, st: Option<&cri::ContainerStatus>) -> ContainerRecord {
    let name = c
        .labels
        .get(labels::CONTAINER_NAME)
        .cloned()
        .or_else(|| c.metadata.as_ref().map(|m| m.name.clone()))
        .unwrap_or_default();
    let mut r = ContainerRecord {
        id: c.id.clone(),
        name,
        attempt: c.metadata.as_ref().map_or(0, |m| m.attempt),
        state: state_of(c.state),
        sandbox_id: c.pod_sandbox_id.clone(),
        created_at: c.created_at,
        started_at: 0,
        finished_at: 0,
        exit_code: 0,
        reason: String::new(),
        message: String::new(),
        image: c
            .image
            .as_ref()
            .map(|i| i.image.clone())
            .unwrap_or_default(),
        image_ref: c.image_ref.clone(),
        hash: c
            .annotations
            .get(labels::CONTAINER_HASH)
            .cloned()
            .unwrap_or_default(),
        log_path: String::new(),
    };
    if let Some(st) = st {
        r.state = state_of(st.state);
        r.started_at = st.started_at;
        r.finished_at = st.finished_at;
        r.exit_code = st.exit_code;
        r.reason = st.reason.clone();
        r.log_path = st.log_path.clone();
        if let Some(i) = st.image.as_ref().filter(|i| !i.image.is_empty()) {
            r.image = i.image.clone();
        }
        if !st.image_ref.is_empty() {
            r.image_ref = st.image_ref.clone();
        }
        r.message = if r.state == State::Exited {
            termination_message(st)
        } else {
            st.message.clone()
        };
    }
    r
}

/// Reads pods' runtime state; caches exited instances.
#[derive(Clone)]
pub struct RuntimeReader {
    cri: CriClient,
    exited: Arc<Mutex<HashMap<String, ContainerRecord>>>,
}

impl RuntimeReader {
    pub fn new(cri: CriClient) -> Self {
        RuntimeReader {
            cri,
            exited: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    /// The runtime state of pod `uid`.
    pub async fn pod(&self, uid: &str) -> Result<PodRuntime> {
        let (sandboxes, containers) = tokio::try_join!(
            self.cri.list_pod_sandboxes_of(uid),
            self.cri.list_containers_of(uid)
        )?;
        let mut out = PodRuntime::default();
        let mut sandboxes = sandboxes;
        sandboxes.sort_by_key(|s| std::cmp::Reverse(s.created_at));
        for (i, s) in sandboxes.iter().enumerate() {
            let ready = s.state == cri::PodSandboxState::SandboxReady as i32;
            let mut ips = Vec::new();
            if i == 0 && ready {
                match self.cri.pod_sandbox_status(&s.id).await {
                    Ok(st) => {
                        if let Some(n) = st.network {
                            if !n.ip.is_empty() {
                                ips.push(n.ip);
                            }
                            ips.extend(n.additional_ips.into_iter().map(|p| p.ip));
                        }
                    }
                    Err(e) if e.is_not_found() => continue,
                    Err(e) => return Err(e),
                }
            }
            out.sandboxes.push(SandboxRecord {
                id: s.id.clone(),
                attempt: s.metadata.as_ref().map_or(0, |m| m.attempt),
                ready,
                created_at: s.created_at,
                ips,
            });
        }
        let mut containers = containers;
        containers.sort_by_key(|c| std::cmp::Reverse(c.created_at));
        for c in &containers {
            if let Some(r) = self.exited.lock().get(&c.id) {
                out.containers.push(r.clone());
                continue;
            }
            let st = match self.cri.container_status(&c.id).await {
                Ok(st) => Some(st),
                // Removed between the list and the status call.
                Err(e) if e.is_not_found() => continue,
                Err(e) => return Err(e),
            };
            let r = record(c, st.as_ref());
            if r.state == State::Exited {
                self.exited.lock().insert(r.id.clone(), r.clone());
            }
            out.containers.push(r);
        }
        Ok(out)
    }

    /// Forgets a removed container.
    pub fn forget(&self, container_id: &str) {
        self.exited.lock().remove(container_id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_tail_joins_partial_lines_and_keeps_the_last_ones() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("0.log");
        let mut text = String::new();
        for i in 0..100 {
            text.push_str(&format!(
                "2024-01-01T00:00:00.000000000Z stdout F line {i}\n"
            ));
        }
        text.push_str("2024-01-01T00:00:00.000000000Z stderr P par\n");
        text.push_str("2024-01-01T00:00:00.000000000Z stderr F tial\n");
        std::fs::write(&p, text).expect("write");
        let tail = log_tail(&p, 3, 2048);
        assert_eq!(tail, "line 98\nline 99\npartial\n");
        let short = log_tail(&p, 80, 10);
        assert_eq!(short.len(), 10);
        assert!(short.ends_with("partial\n"));
    }
}
