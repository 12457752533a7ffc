//! Security settings as CRI wants them: the sandbox's Linux configuration (namespaces from
//! `hostNetwork`/`hostPID`/`hostIPC`, the pod security context, sysctls) and each container's
//! security context (runAsUser/Group, readOnlyRootFilesystem, capabilities, privileged,
//! `allowPrivilegeEscalation`, seccomp, the `runAsNonRoot` check against the image's user).
//!
//! Owned by the "podconfig" work; this is the interface the pod workers call, with
//! placeholders until the full version lands. The agent fills in the cgroup parent and the
//! resources itself.

use k8s_cri::v1::{
    Capability, Int64Value, LinuxContainerSecurityContext, LinuxPodSandboxConfig,
    LinuxSandboxSecurityContext, NamespaceMode, NamespaceOption,
};
use k8s_openapi::api::core::v1::{Container, Pod};

/// The user an image runs as by default (CRI `ImageStatus`: a numeric UID or a name).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ImageUser {
    pub uid: Option<i64>,
    pub username: String,
}

/// Why a container's security context cannot be applied: the message becomes the waiting
/// message with reason `CreateContainerConfigError` (upstream: `container has runAsNonRoot
/// and image will run as root (pod: "p_ns(uid)", container: c)`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecurityError {
    #[error("{0}")]
    Config(String),
}

fn namespaces(pod: &Pod) -> NamespaceOption {
    let spec = pod.spec.as_ref();
    let mode = |host: Option<bool>, otherwise: NamespaceMode| {
        if host.unwrap_or(false) {
            NamespaceMode::Node as i32
        } else {
            otherwise as i32
        }
    };
    let share_pid = spec
        .and_then(|s| s.share_process_namespace)
        .unwrap_or(false);
    NamespaceOption {
        network: mode(spec.and_then(|s| s.host_network), NamespaceMode::Pod),
        pid: mode(
            spec.and_then(|s| s.host_pid),
            if share_pid {
                NamespaceMode::Pod
            } else {
                NamespaceMode::Container
            },
        ),
        ipc: mode(spec.and_then(|s| s.host_ipc), NamespaceMode::Pod),
        ..NamespaceOption::default()
    }
}

/// The sandbox's Linux configuration, without `cgroup_parent` and resources.
pub fn sandbox_linux(pod: &Pod) -> LinuxPodSandboxConfig {
    // Placeholder: namespaces and the pod's user only.
    let psc = pod
        .spec
        .as_ref()
        .and_then(|s| s.security_context.clone())
        .unwrap_or_default();
    LinuxPodSandboxConfig {
        security_context: Some(LinuxSandboxSecurityContext {
            namespace_options: Some(namespaces(pod)),
            run_as_user: psc.run_as_user.map(|value| Int64Value { value }),
            run_as_group: psc.run_as_group.map(|value| Int64Value { value }),
            supplemental_groups: psc.supplemental_groups.unwrap_or_default(),
            ..LinuxSandboxSecurityContext::default()
        }),
        ..LinuxPodSandboxConfig::default()
    }
}

/// The security context of `container` in `pod`; `image_user` is who the image runs as.
pub fn container_linux(
    pod: &Pod,
    container: &Container,
    image_user: Option<&ImageUser>,
) -> Result<LinuxContainerSecurityContext, SecurityError> {
    let _ = image_user;
    // Placeholder: user, privileged, read-only root, capabilities; no runAsNonRoot check.
    let psc = pod
        .spec
        .as_ref()
        .and_then(|s| s.security_context.clone())
        .unwrap_or_default();
    let csc = container.security_context.clone().unwrap_or_default();
    let caps = csc.capabilities.clone().unwrap_or_default();
    Ok(LinuxContainerSecurityContext {
        namespace_options: Some(namespaces(pod)),
        privileged: csc.privileged.unwrap_or(false),
        run_as_user: csc
            .run_as_user
            .or(psc.run_as_user)
            .map(|value| Int64Value { value }),
        run_as_group: csc
            .run_as_group
            .or(psc.run_as_group)
            .map(|value| Int64Value { value }),
        readonly_rootfs: csc.read_only_root_filesystem.unwrap_or(false),
        supplemental_groups: psc.supplemental_groups.unwrap_or_default(),
        capabilities: Some(Capability {
            add_capabilities: caps.add.unwrap_or_default(),
            drop_capabilities: caps.drop.unwrap_or_default(),
            ..Capability::default()
        }),
        no_new_privs: csc.allow_privilege_escalation == Some(false),
        ..LinuxContainerSecurityContext::default()
    })
}
