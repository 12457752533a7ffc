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
use crate::kubelet::env::{self, EnvContext};
use crate::kubelet::events;
use crate::kubelet::layout::container_log_path;
use crate::kubelet::runtime_state::State;
use crate::kubelet::security::{self, ImageUser};
use crate::kubelet::status::SyncReason;
use crate::kubelet::volumes::MountOptions;
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
    let config_error = |m: String| fail(agent, pod, c, "CreateContainerConfigError", m);
    let ip_strings: Vec<String> = pod_ips.iter().map(|ip| ip.to_string()).collect();
    // The environment: ConfigMaps and Secrets read now, Services from the agent's watch.
    let mut env_ctx = EnvContext {
        services: agent
            .services
            .read()
            .as_ref()
            .map(|m| m.values().cloned().collect()),
        pod_ips: ip_strings.clone(),
        host_ips: facts.host_ips.clone(),
        node_allocatable: facts.allocatable.clone(),
        ..EnvContext::default()
    };
    env_ctx.load(agent.objects.as_ref(), pod).await;
    let envs = env::container_env(pod, c, &env_ctx).map_err(|e| config_error(e.to_string()))?;
    // The mounts: volumes, then /etc/hosts, resolv.conf, hostname, the termination message.
    let volumes = agent
        .volumes
        .volumes(&uid)
        .ok_or_else(|| config_error(format!("the volumes of pod {uid} are not set up")))?;
    let mut mounts = volumes
        .mounts_for(c, &envs, &MountOptions::default())
        .map_err(config_error)?;
    let pod_dir = agent.layout.pod_dir(&uid);
    let (hostname, domain) =
        dns::hostname_and_domain(pod, &agent.config.dns.domain).map_err(config_error)?;
    let files = dns::PodFiles {
        pod,
        pod_dir: &pod_dir,
        pod_ips: &ip_strings,
        hostname: &hostname,
        domain: &domain,
        node_hosts: &agent.config.dns.host_hosts_file,
    };
    mounts.extend(dns::hosts_mount(&files, c).map_err(|e| config_error(e.to_string()))?);
    if let Some((m, _)) =
        dns::termination_message_mount(&pod_dir, c).map_err(|e| config_error(e.to_string()))?
    {
        mounts.push(m);
    }
    let image_user = agent
        .cri
        .image_status(&image_ref)
        .await
        .ok()
        .flatten()
        .map(|i| ImageUser::from_image(&i))
        .unwrap_or_default();
    let security = security::container_security(pod, c, &image_user, &agent.security)
        .map_err(|e| config_error(e.to_string()))?;
    let (command, args) = expand_command(c, &envs);
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
        command,
        args,
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
        let target = hooks::HookTarget {
            cri: &agent.cri,
            pod,
            container: c,
            container_id: &id,
            pod_ip: ip,
            version: &agent.version,
        };
        if let Err(msg) = hooks::run(&target, post, grace).await {
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

/// The container's command and args with `$(VAR)` expanded from its environment.
fn expand_command(c: &Container, envs: &[cri::KeyValue]) -> (Vec<String>, Vec<String>) {
    let env_map: HashMap<&str, &str> = envs
        .iter()
        .map(|kv| (kv.key.as_str(), kv.value.as_str()))
        .collect();
    let lookup = |k: &str| env_map.get(k).map(|v| v.to_string());
    let contexts: [env::expand::Context<'_>; 1] = [&lookup];
    let all = |v: &Option<Vec<String>>| -> Vec<String> {
        v.iter()
            .flatten()
            .map(|s| env::expand::expand(s, env::expand::lookup_in(&contexts)))
            .collect()
    };
    (all(&c.command), all(&c.args))
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
