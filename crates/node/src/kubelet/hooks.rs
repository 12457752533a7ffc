//! Container lifecycle hooks, as upstream's handler runner runs them: `exec` through CRI
//! `ExecSync`, `httpGet` against the pod IP (as probes do), and `sleep`; `tcpSocket` is
//! deprecated and refused. A `postStart` failure kills the container (waiting reason
//! `PostStartHookError`, event `FailedPostStartHook`); a `preStop` failure is an event
//! (`FailedPreStopHook`) and the stop goes on.

use std::net::IpAddr;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, LifecycleHandler, Pod};

use super::cri::CriClient;
use super::probes::handlers::{self, Outcome};

fn pod_desc(pod: &Pod) -> String {
    format!(
        "{}_{}({})",
        pod.metadata.name.as_deref().unwrap_or(""),
        pod.metadata.namespace.as_deref().unwrap_or(""),
        pod.metadata.uid.as_deref().unwrap_or("")
    )
}

/// The container instance a hook runs for.
pub struct HookTarget<'a> {
    pub cri: &'a CriClient,
    pub pod: &'a Pod,
    pub container: &'a Container,
    pub container_id: &'a str,
    pub pod_ip: Option<IpAddr>,
    /// The kubelet's `major.minor` (`User-Agent` of HTTP hooks).
    pub version: &'a str,
}

/// Runs `handler` for `target` within `timeout`; the failure message upstream reports.
pub async fn run(
    target: &HookTarget<'_>,
    handler: &LifecycleHandler,
    timeout: Duration,
) -> Result<(), String> {
    let HookTarget {
        cri,
        pod,
        container,
        container_id,
        pod_ip,
        version,
    } = *target;
    let who = format!(
        "for Container {:?} in Pod {:?}",
        container.name,
        pod_desc(pod)
    );
    if let Some(e) = &handler.exec {
        let cmd = e.command.clone().unwrap_or_default();
        return match cri.exec_sync(container_id, cmd.clone(), timeout).await {
            Ok(r) if r.exit_code == 0 => Ok(()),
            Ok(r) => {
                let mut out = r.stdout;
                out.extend_from_slice(&r.stderr);
                Err(format!(
                    "Exec lifecycle hook ({cmd:?}) {who} failed - error: command '{}' exited with {}: {}, message: {:?}",
                    cmd.join(" "),
                    r.exit_code,
                    String::from_utf8_lossy(&out),
                    String::from_utf8_lossy(&out)
                ))
            }
            Err(err) => Err(format!(
                "Exec lifecycle hook ({cmd:?}) {who} failed - error: {}, message: \"\"",
                err.message()
            )),
        };
    }
    if let Some(h) = &handler.http_get {
        return match handlers::http_get(h, container, pod_ip, timeout, version).await {
            Outcome::Success => Ok(()),
            Outcome::Failure(m) => Err(format!(
                "HTTP lifecycle hook ({}) {who} failed - error: {m}",
                h.path.as_deref().unwrap_or("")
            )),
        };
    }
    if let Some(s) = &handler.sleep {
        let d = Duration::from_secs(u64::try_from(s.seconds.max(0)).unwrap_or(0));
        tokio::time::sleep(d.min(timeout)).await;
        return Ok(());
    }
    if handler.tcp_socket.is_some() {
        return Err(format!(
            "TCPSocket lifecycle hook {who} is deprecated and not supported"
        ));
    }
    Err(format!("invalid lifecycle hook {who}: no handler"))
}
