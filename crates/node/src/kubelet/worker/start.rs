//! Starting one container, upstream's `startContainer`: the image (pull policy, secrets,
//! back-off), the configuration (environment, mounts with `/etc/hosts` and the termination
//! message file, security context, resources, `$(VAR)` expansion of command and args), CRI
//! `CreateContainer` and `StartContainer`, the log link, then `postStart`. Each failure
//! names the waiting reason upstream gives and records its events.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;

use k8s_cri::v1 as cri;
use k8s_openapi::api::core::v1::{Container, Pod};

use crate::kubelet::agent::Agent;
use crate::kubelet::context::PodContext;
use crate::kubelet::events;
use crate::kubelet::expansion::expand;
use crate::kubelet::layout::container_log_path;
use crate::kubelet::runtime_state::State;
use crate::kubelet::security::{self, ImageUser};
use crate::kubelet::status::SyncReason;
use crate::kubelet::{dns, hooks, labels, resources};

use super::kill;

/// Why a start failed: the container's waiting reason and message.
pub type StartError = SyncReason;

fn fail(agent: &Agent, pod: &Pod, c: &Container, reason: &str, message: String) -> StartError {
    agent.recorder.pod(
        pod,
        Some(events::container_path(pod, &c.name)),
        events::WARNING,
        "Failed",
        // Image failures name the reason (`Error: ErrImagePull`), others the message.
        format!(
            "Error: {}",
            if image_reason(reason) {
                reason.to_string()
            } else {
                message.clone()
            }
        ),
    );
    SyncReason {
        reason: reason.to_string(),
        message,
    }
}

fn image_reason(reason: &str) -> bool {
    matches!(
        reason,
        "ErrImagePull"
            | "ImagePullBackOff"
            | "ErrImageNeverPull"
            | "InvalidImageName"
            | "ImageInspectError"
    )
}

/// The restart count of the next instance: one more than the newest instance's, else one
/// more than the newest log file's (the runtime may have lost its instances), else 0.
pub fn next_attempt(agent: &Agent, pod: &Pod, name: &str, latest: Option<u32>) -> u32 {
    if let Some(a) = latest {
        return a + 1;
    }
    let dir = agent
        .layout
        .pod_log_dir(
            pod.metadata.namespace.as_deref().unwrap_or("default"),
            pod.metadata.name.as_deref().unwrap_or(""),
            pod.metadata.uid.as_deref().unwrap_or(""),
        )
        .join(name);
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            e.file_name()
                .to_str()?
                .strip_suffix(".log")?
                .parse::<u32>()
                .ok()
        })
        .max()
        .map_or(0, |n| n + 1)
}

/// Creates the termination message file of an instance (writable by any user, as upstream
/// makes it) and returns its mount.
fn termination_mount(
    agent: &Agent,
    uid: &str,
    c: &Container,
) -> std::io::Result<Option<cri::Mount>> {
    let path = c
        .termination_message_path
        .clone()
        .unwrap_or_else(|| "/dev/termination-log".into());
    if path.is_empty() {
        return Ok(None);
    }
    let instance = uuid::Uuid::new_v4().simple().to_string()[..8].to_string();
    let file = agent
        .layout
        .termination_message_file(uid, &c.name, &instance);
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&file, b"")?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o666))?;
    Ok(Some(cri::Mount {
        container_path: path,
        host_path: file.display().to_string(),
        ..cri::Mount::default()
    }))
}

/// Writes the pod's `/etc/hosts` and returns its mount.
fn hosts_mount(agent: &Agent, ctx: &PodContext<'_>) -> Result<cri::Mount, String> {
    let content = dns::hosts_file(ctx, &agent.config.dns).map_err(|e| e.to_string())?;
    let path = agent.layout.pod_hosts_file(ctx.uid());
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    }
    std::fs::write(&path, content).map_err(|e| e.to_string())?;
    Ok(cri::Mount {
        container_path: "/etc/hosts".into(),
        host_path: path.display().to_string(),
        ..cri::Mount::default()
    })
}

/// Starts container `c` of `pod` in sandbox `sandbox_id`.
#[allow(clippy::too_many_arguments)]
pub async fn start_container(
    agent: &Arc<Agent>,
    pod: &Pod,
    c: &Container,
    init: bool,
    attempt: u32,
    sandbox_id: &str,
    sandbox: &cri::PodSandboxConfig,
    pod_ips: &[IpAddr],
) -> Result<String, StartError> {
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    let path = Some(events::container_path(pod, &c.name));
    // The image.
    let image_ref = agent
        .images
        .ensure(pod, c, sandbox)
        .await
        .map_err(|e| fail(agent, pod, c, e.reason(), e.to_string()))?;
    let facts = agent.facts();
    let host_ips: Vec<IpAddr> = facts
        .host_ips
        .iter()
        .filter_map(|ip| ip.parse().ok())
        .collect();
    let ctx = PodContext {
        pod,
        node_name: &agent.config.node_name,
        pod_ips,
        host_ips: &host_ips,
        node_allocatable: &facts.allocatable,
        cluster_domain: &agent.config.dns.domain,
    };
    let config_error = |m: String| fail(agent, pod, c, "CreateContainerConfigError", m);
    // The configuration.
    let envs = agent
        .env
        .container_env(&ctx, c)
        .await
        .map_err(|e| config_error(e.to_string()))?;
    let mut mounts = agent
        .volumes
        .container_mounts(&ctx, c, &envs)
        .map_err(|e| config_error(e.to_string()))?;
    let mounts_hosts = mounts.iter().any(|m| m.container_path == "/etc/hosts");
    let host_network = pod
        .spec
        .as_ref()
        .and_then(|s| s.host_network)
        .unwrap_or(false);
    if !mounts_hosts && (!pod_ips.is_empty() || host_network) {
        mounts.push(hosts_mount(agent, &ctx).map_err(config_error)?);
    }
    if let Some(m) = termination_mount(agent, &uid, c).map_err(|e| config_error(e.to_string()))? {
        mounts.push(m);
    }
    let image_user = agent
        .cri
        .image_status(&image_ref)
        .await
        .ok()
        .flatten()
        .map(|i| ImageUser {
            uid: i.uid.map(|u| u.value),
            username: i.username,
        });
    let security = security::container_linux(pod, c, image_user.as_ref())
        .map_err(|e| config_error(e.to_string()))?;
    let env_map: HashMap<String, String> = envs
        .iter()
        .map(|kv| (kv.key.clone(), kv.value.clone()))
        .collect();
    let lookup = |k: &str| env_map.get(k).cloned();
    let expand_all = |v: &Option<Vec<String>>| -> Vec<String> {
        v.iter().flatten().map(|s| expand(s, &lookup)).collect()
    };
    let config = cri::ContainerConfig {
        metadata: Some(cri::ContainerMetadata {
            name: c.name.clone(),
            attempt,
        }),
        image: Some(cri::ImageSpec {
            image: image_ref.clone(),
            user_specified_image: c.image.clone().unwrap_or_default(),
            ..cri::ImageSpec::default()
        }),
        command: expand_all(&c.command),
        args: expand_all(&c.args),
        working_dir: c.working_dir.clone().unwrap_or_default(),
        envs,
        mounts,
        labels: labels::container_labels(pod, c),
        annotations: labels::container_annotations(pod, c, attempt, init),
        log_path: container_log_path(&c.name, attempt),
        stdin: c.stdin.unwrap_or(false),
        stdin_once: c.stdin_once.unwrap_or(false),
        tty: c.tty.unwrap_or(false),
        linux: Some(cri::LinuxContainerConfig {
            resources: Some(resources::linux_resources(
                pod,
                c,
                facts.memory_bytes,
                agent.oom_floor,
            )),
            security_context: Some(security),
        }),
        ..cri::ContainerConfig::default()
    };
    // Create and start.
    let id = agent
        .cri
        .create_container(sandbox_id, config, sandbox.clone())
        .await
        .map_err(|e| fail(agent, pod, c, "CreateContainerError", e.message()))?;
    agent.recorder.pod(
        pod,
        path.clone(),
        events::NORMAL,
        "Created",
        format!("Created container: {}", c.name),
    );
    if let Err(e) = agent.cri.start_container(&id).await {
        return Err(fail(
            agent,
            pod,
            c,
            "RunContainerError",
            format!("failed to start container {id:?}: {}", e.message()),
        ));
    }
    agent.recorder.pod(
        pod,
        path.clone(),
        events::NORMAL,
        "Started",
        format!("Started container {}", c.name),
    );
    link_log(agent, pod, c, &id, attempt);
    // postStart: the container counts as started only once it returns.
    if let Some(post) = c.lifecycle.as_ref().and_then(|l| l.post_start.as_ref()) {
        let ip = pod_ips.first().copied();
        let grace = kill::grace_period(pod);
        if let Err(msg) = hooks::run(&agent.cri, pod, c, &id, post, ip, grace, &agent.version).await
        {
            agent.recorder.pod(
                pod,
                path.clone(),
                events::WARNING,
                "FailedPostStartHook",
                msg.clone(),
            );
            let record = crate::kubelet::runtime_state::ContainerRecord {
                id: id.clone(),
                name: c.name.clone(),
                attempt,
                state: State::Running,
                sandbox_id: sandbox_id.to_string(),
                created_at: 0,
                started_at: 0,
                finished_at: 0,
                exit_code: 0,
                reason: String::new(),
                message: String::new(),
                image: String::new(),
                image_ref: String::new(),
                hash: String::new(),
                log_path: String::new(),
            };
            kill::kill_container(
                agent,
                pod,
                &record,
                grace,
                Some(format!("FailedPostStartHook: {msg}")),
                ip,
            )
            .await;
            return Err(SyncReason {
                reason: "PostStartHookError".into(),
                message: msg,
            });
        }
    }
    Ok(id)
}

/// Links the instance's log as `<pod>_<ns>_<container>-<id>.log`.
fn link_log(agent: &Agent, pod: &Pod, c: &Container, id: &str, attempt: u32) {
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    let name = pod.metadata.name.as_deref().unwrap_or("");
    let uid = pod.metadata.uid.as_deref().unwrap_or("");
    let target = agent
        .layout
        .container_log_file(ns, name, uid, &c.name, attempt);
    let dir = agent.layout.container_links_dir();
    let _ = std::fs::create_dir_all(&dir);
    let link = dir.join(format!("{name}_{ns}_{}-{id}.log", c.name));
    let _ = std::fs::remove_file(&link);
    let _ = std::os::unix::fs::symlink(target, link);
}
