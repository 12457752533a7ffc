//! Security contexts as CRI expects them: the container's `LinuxContainerSecurityContext` and
//! the sandbox's `LinuxPodSandboxConfig` (upstream `pkg/kubelet/kuberuntime/security_context.go`,
//! `kuberuntime_sandbox.go`, `pkg/securitycontext`, `pkg/kubelet/sysctl`).
//!
//! - The effective context is the container's over the pod's (`runAsUser`, `runAsGroup`,
//!   `runAsNonRoot`, SELinux options); capabilities, `privileged`, `readOnlyRootFilesystem`,
//!   `allowPrivilegeEscalation: false` (→ `no_new_privs`) and `procMount` come from the
//!   container.
//! - `runAsNonRoot` is checked against the image's user ([`verify_run_as_non_root`]); without
//!   `runAsUser` the image's numeric user or user name is passed on.
//! - Supplemental groups: `fsGroup` first, then `supplementalGroups`.
//! - Seccomp: container field, then pod field, else `RuntimeDefault` when the node defaults to
//!   it, else `Unconfined`; the sandbox always runs `RuntimeDefault`. AppArmor: container
//!   field, the beta annotation, the pod field; unset leaves the runtime's default.
//! - Sysctls go to the sandbox; [`sysctl::admit_sysctls`] is the kubelet's admission check.
//!
//! Errors make the container wait with `CreateContainerConfigError`.

use std::collections::HashMap;
use std::path::PathBuf;

pub mod sysctl;

pub use sysctl::{Rejection, SAFE_SYSCTLS, admit_sysctls, dotted_sysctl_name};

use k8s_cri::v1::{
    Capability, Int64Value, LinuxContainerSecurityContext, LinuxPodSandboxConfig,
    LinuxSandboxSecurityContext, NamespaceMode, NamespaceOption, SeLinuxOption, SecurityProfile,
    SupplementalGroupsPolicy, UserNamespace, security_profile::ProfileType,
};
use k8s_openapi::api::core::v1::{Container, Pod, SELinuxOptions, SecurityContext};

/// Paths the runtime masks in every unprivileged container (kept in sync with moby).
pub const DEFAULT_MASKED_PATHS: [&str; 11] = [
    "/proc/asound",
    "/proc/acpi",
    "/proc/kcore",
    "/proc/keys",
    "/proc/latency_stats",
    "/proc/timer_list",
    "/proc/timer_stats",
    "/proc/sched_debug",
    "/proc/scsi",
    "/sys/firmware",
    "/sys/devices/virtual/powercap",
];

/// Paths the runtime mounts read-only in every unprivileged container.
pub const DEFAULT_READONLY_PATHS: [&str; 5] = [
    "/proc/bus",
    "/proc/fs",
    "/proc/irq",
    "/proc/sys",
    "/proc/sysrq-trigger",
];

/// The annotation prefix of the beta AppArmor profiles, per container.
pub const APPARMOR_ANNOTATION_PREFIX: &str = "container.apparmor.security.beta.kubernetes.io/";

/// The node's security settings.
#[derive(Debug, Clone, Default)]
pub struct SecurityOptions {
    /// `seccompDefault`: containers without a profile run `RuntimeDefault` (kubelet default:
    /// false, `Unconfined`).
    pub seccomp_default: bool,
    /// Where `Localhost` seccomp profiles live (`<root-dir>/seccomp`).
    pub seccomp_profile_root: PathBuf,
}

/// The user an image runs as (CRI `Image.uid` / `Image.username`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImageUser {
    pub uid: Option<i64>,
    pub username: String,
}

impl ImageUser {
    /// From the CRI image status.
    pub fn from_image(image: &k8s_cri::v1::Image) -> Self {
        ImageUser {
            uid: image.uid.as_ref().map(|u| u.value),
            username: image.username.clone(),
        }
    }
}

/// Why a container's security context cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecurityError {
    /// `runAsNonRoot` is violated or cannot be verified: upstream's message.
    #[error("{0}")]
    NonRoot(String),
    /// A profile is incomplete or unknown.
    #[error("{0}")]
    Profile(String),
}

/// The container's security context over the pod's (upstream `DetermineEffectiveSecurityContext`).
pub fn effective_security_context(pod: &Pod, container: &Container) -> Option<SecurityContext> {
    let pod_sc = pod.spec.as_ref().and_then(|s| s.security_context.as_ref());
    let from_pod = pod_sc.map(|p| SecurityContext {
        se_linux_options: p.se_linux_options.clone(),
        windows_options: p.windows_options.clone(),
        run_as_user: p.run_as_user,
        run_as_group: p.run_as_group,
        run_as_non_root: p.run_as_non_root,
        ..Default::default()
    });
    let Some(c) = container.security_context.as_ref() else {
        return from_pod;
    };
    let Some(mut eff) = from_pod else {
        return Some(c.clone());
    };
    macro_rules! over {
        ($($f:ident),*) => { $( if c.$f.is_some() { eff.$f = c.$f.clone(); } )* };
    }
    over!(
        se_linux_options,
        windows_options,
        capabilities,
        privileged,
        run_as_user,
        run_as_group,
        run_as_non_root,
        read_only_root_filesystem,
        allow_privilege_escalation,
        proc_mount
    );
    Some(eff)
}

/// The container's effective `runAsUser`.
pub fn effective_run_as_user(pod: &Pod, container: &Container) -> Option<i64> {
    effective_security_context(pod, container).and_then(|s| s.run_as_user)
}

/// The one user every container of the pod runs as, if they all set the same one (upstream
/// `FsUserFrom`): projected token files are given to it.
pub fn fs_user(pod: &Pod) -> Option<i64> {
    let spec = pod.spec.as_ref()?;
    let mut user = None;
    let regular = spec
        .init_containers
        .iter()
        .flatten()
        .chain(&spec.containers);
    for c in regular {
        let u = effective_run_as_user(pod, c)?;
        if user.is_some_and(|x| x != u) {
            return None;
        }
        user = Some(u);
    }
    for e in spec.ephemeral_containers.iter().flatten() {
        let as_container = Container {
            name: e.name.clone(),
            security_context: e.security_context.clone(),
            ..Default::default()
        };
        let u = effective_run_as_user(pod, &as_container)?;
        if user.is_some_and(|x| x != u) {
            return None;
        }
        user = Some(u);
    }
    user
}

/// `name_namespace(uid)`, as upstream's `format.Pod`.
fn format_pod(pod: &Pod) -> String {
    format!(
        "{}_{}({})",
        pod.metadata.name.as_deref().unwrap_or_default(),
        pod.metadata.namespace.as_deref().unwrap_or_default(),
        pod.metadata.uid.as_deref().unwrap_or_default()
    )
}

/// The `runAsNonRoot` check against the image's user (upstream `verifyRunAsNonRoot`).
pub fn verify_run_as_non_root(
    pod: &Pod,
    container: &Container,
    image: &ImageUser,
) -> Result<(), SecurityError> {
    let Some(eff) = effective_security_context(pod, container) else {
        return Ok(());
    };
    if eff.run_as_non_root != Some(true) {
        return Ok(());
    }
    let who = format!(
        "(pod: {:?}, container: {})",
        format_pod(pod),
        container.name
    );
    if let Some(uid) = eff.run_as_user {
        if uid == 0 {
            return Err(SecurityError::NonRoot(format!(
                "container's runAsUser breaks non-root policy {who}"
            )));
        }
        return Ok(());
    }
    match (image.uid, image.username.as_str()) {
        (Some(0), _) => Err(SecurityError::NonRoot(format!(
            "container has runAsNonRoot and image will run as root {who}"
        ))),
        (None, name) if !name.is_empty() => Err(SecurityError::NonRoot(format!(
            "container has runAsNonRoot and image has non-numeric user ({name}), cannot verify user is non-root {who}"
        ))),
        _ => Ok(()),
    }
}

/// The container's CRI security context (upstream `determineEffectiveSecurityContext`), after
/// the `runAsNonRoot` check.
pub fn container_security(
    pod: &Pod,
    container: &Container,
    image: &ImageUser,
    opts: &SecurityOptions,
) -> Result<LinuxContainerSecurityContext, SecurityError> {
    verify_run_as_non_root(pod, container, image)?;
    let eff = effective_security_context(pod, container);
    let mut sc = LinuxContainerSecurityContext::default();
    if let Some(e) = &eff {
        sc.capabilities = e.capabilities.as_ref().map(|c| Capability {
            add_capabilities: c.add.clone().unwrap_or_default(),
            drop_capabilities: c.drop.clone().unwrap_or_default(),
            add_ambient_capabilities: Vec::new(),
        });
        sc.selinux_options = e.se_linux_options.as_ref().map(selinux);
        sc.run_as_user = e.run_as_user.map(|value| Int64Value { value });
        sc.run_as_group = e.run_as_group.map(|value| Int64Value { value });
        sc.privileged = e.privileged.unwrap_or(false);
        sc.readonly_rootfs = e.read_only_root_filesystem.unwrap_or(false);
        sc.no_new_privs = e.allow_privilege_escalation == Some(false);
    }
    let unmasked = eff.as_ref().and_then(|e| e.proc_mount.as_deref()) == Some("Unmasked");
    if !unmasked {
        sc.masked_paths = DEFAULT_MASKED_PATHS.iter().map(|s| s.to_string()).collect();
        sc.readonly_paths = DEFAULT_READONLY_PATHS
            .iter()
            .map(|s| s.to_string())
            .collect();
    }
    sc.seccomp = Some(seccomp_profile(pod, container, opts)?);
    if let Some((profile, deprecated)) = apparmor_profile(pod, container)? {
        sc.apparmor = Some(profile);
        #[allow(deprecated)]
        {
            sc.apparmor_profile = deprecated;
        }
    }
    if sc.run_as_user.is_none() {
        sc.run_as_user = image.uid.map(|value| Int64Value { value });
        sc.run_as_username = image.username.clone();
    }
    sc.namespace_options = Some(namespace_options(pod));
    let pod_sc = pod.spec.as_ref().and_then(|s| s.security_context.as_ref());
    if let Some(p) = pod_sc {
        sc.supplemental_groups.extend(p.fs_group);
        sc.supplemental_groups
            .extend(p.supplemental_groups.iter().flatten());
        sc.supplemental_groups_policy =
            supplemental_groups_policy(p.supplemental_groups_policy.as_deref())? as i32;
    }
    Ok(sc)
}

fn supplemental_groups_policy(p: Option<&str>) -> Result<SupplementalGroupsPolicy, SecurityError> {
    match p {
        None | Some("Merge") => Ok(SupplementalGroupsPolicy::Merge),
        Some("Strict") => Ok(SupplementalGroupsPolicy::Strict),
        Some(other) => Err(SecurityError::Profile(format!(
            "unsupported supplementalGroupsPolicy: {other}"
        ))),
    }
}

fn selinux(o: &SELinuxOptions) -> SeLinuxOption {
    SeLinuxOption {
        user: o.user.clone().unwrap_or_default(),
        role: o.role.clone().unwrap_or_default(),
        r#type: o.type_.clone().unwrap_or_default(),
        level: o.level.clone().unwrap_or_default(),
    }
}

fn profile(t: ProfileType, localhost_ref: String) -> SecurityProfile {
    SecurityProfile {
        profile_type: t as i32,
        localhost_ref,
    }
}

/// The container's seccomp profile (upstream `getSeccompProfile`).
pub fn seccomp_profile(
    pod: &Pod,
    container: &Container,
    opts: &SecurityOptions,
) -> Result<SecurityProfile, SecurityError> {
    let from_container = container
        .security_context
        .as_ref()
        .and_then(|s| s.seccomp_profile.as_ref());
    let from_pod = pod
        .spec
        .as_ref()
        .and_then(|s| s.security_context.as_ref())
        .and_then(|s| s.seccomp_profile.as_ref());
    let Some(p) = from_container.or(from_pod) else {
        return Ok(if opts.seccomp_default {
            profile(ProfileType::RuntimeDefault, String::new())
        } else {
            profile(ProfileType::Unconfined, String::new())
        });
    };
    match p.type_.as_str() {
        "RuntimeDefault" => Ok(profile(ProfileType::RuntimeDefault, String::new())),
        "Localhost" => match p.localhost_profile.as_deref().filter(|s| !s.is_empty()) {
            Some(name) => Ok(profile(
                ProfileType::Localhost,
                opts.seccomp_profile_root.join(name).display().to_string(),
            )),
            None => Err(SecurityError::Profile(
                "localhostProfile must be set if seccompProfile type is Localhost.".into(),
            )),
        },
        _ => Ok(profile(ProfileType::Unconfined, String::new())),
    }
}

/// The container's AppArmor profile and its deprecated string form (upstream
/// `getAppArmorProfile`); `None` leaves the runtime's default.
pub fn apparmor_profile(
    pod: &Pod,
    container: &Container,
) -> Result<Option<(SecurityProfile, String)>, SecurityError> {
    let field = |p: &k8s_openapi::api::core::v1::AppArmorProfile| {
        (p.type_.clone(), p.localhost_profile.clone())
    };
    let from_container = container
        .security_context
        .as_ref()
        .and_then(|s| s.app_armor_profile.as_ref())
        .map(field);
    let from_annotation = || {
        let key = format!("{APPARMOR_ANNOTATION_PREFIX}{}", container.name);
        let v = pod.metadata.annotations.as_ref()?.get(&key)?;
        Some(match v.as_str() {
            "runtime/default" => ("RuntimeDefault".to_string(), None),
            "unconfined" => ("Unconfined".to_string(), None),
            other => match other.strip_prefix("localhost/") {
                Some(name) => ("Localhost".to_string(), Some(name.to_string())),
                None => (other.to_string(), None),
            },
        })
    };
    let from_pod = || {
        pod.spec
            .as_ref()?
            .security_context
            .as_ref()?
            .app_armor_profile
            .as_ref()
            .map(field)
    };
    let Some((ty, local)) = from_container.or_else(from_annotation).or_else(from_pod) else {
        return Ok(None);
    };
    match ty.as_str() {
        "RuntimeDefault" => Ok(Some((
            profile(ProfileType::RuntimeDefault, String::new()),
            "runtime/default".into(),
        ))),
        "Unconfined" => Ok(Some((
            profile(ProfileType::Unconfined, String::new()),
            "unconfined".into(),
        ))),
        "Localhost" => match local {
            Some(name) => Ok(Some((
                profile(ProfileType::Localhost, name.clone()),
                format!("localhost/{name}"),
            ))),
            None => Err(SecurityError::Profile(
                "missing localhost apparmor profile name".into(),
            )),
        },
        other => Err(SecurityError::Profile(format!(
            "unknown apparmor profile type: {other:?}"
        ))),
    }
}

/// The pod's namespaces (upstream `NamespacesForPod`): network and IPC of the node with
/// `hostNetwork`/`hostIPC`; PID of the node, of the pod (`shareProcessNamespace`) or per
/// container; the node's user namespace.
pub fn namespace_options(pod: &Pod) -> NamespaceOption {
    let spec = pod.spec.as_ref();
    let flag = |f: fn(&k8s_openapi::api::core::v1::PodSpec) -> Option<bool>| {
        spec.and_then(f).unwrap_or(false)
    };
    let mode = |node: bool| {
        if node {
            NamespaceMode::Node
        } else {
            NamespaceMode::Pod
        }
    };
    let pid = if flag(|s| s.host_pid) {
        NamespaceMode::Node
    } else if flag(|s| s.share_process_namespace) {
        NamespaceMode::Pod
    } else {
        NamespaceMode::Container
    };
    NamespaceOption {
        network: mode(flag(|s| s.host_network)) as i32,
        pid: pid as i32,
        ipc: mode(flag(|s| s.host_ipc)) as i32,
        target_id: String::new(),
        userns_options: Some(UserNamespace {
            mode: NamespaceMode::Node as i32,
            ..Default::default()
        }),
    }
}

/// Whether any container of the pod is privileged (the sandbox is then privileged too).
fn has_privileged_container(pod: &Pod) -> bool {
    let Some(spec) = pod.spec.as_ref() else {
        return false;
    };
    let privileged = |sc: Option<&SecurityContext>| sc.and_then(|s| s.privileged) == Some(true);
    spec.containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .any(|c| privileged(c.security_context.as_ref()))
        || spec
            .ephemeral_containers
            .iter()
            .flatten()
            .any(|c| privileged(c.security_context.as_ref()))
}

/// The sandbox's Linux configuration (upstream `generatePodSandboxLinuxConfig`): the cgroup
/// parent, the security context (always `RuntimeDefault` seccomp) and the sysctls.
pub fn sandbox_linux_config(
    pod: &Pod,
    cgroup_parent: &str,
) -> Result<LinuxPodSandboxConfig, SecurityError> {
    let mut sc = LinuxSandboxSecurityContext {
        privileged: has_privileged_container(pod),
        seccomp: Some(profile(ProfileType::RuntimeDefault, String::new())),
        namespace_options: Some(namespace_options(pod)),
        ..Default::default()
    };
    let pod_sc = pod.spec.as_ref().and_then(|s| s.security_context.as_ref());
    let mut sysctls = HashMap::new();
    if let Some(p) = pod_sc {
        sc.run_as_user = p.run_as_user.map(|value| Int64Value { value });
        sc.run_as_group = p.run_as_group.map(|value| Int64Value { value });
        sc.supplemental_groups.extend(p.fs_group);
        sc.supplemental_groups
            .extend(p.supplemental_groups.iter().flatten());
        sc.supplemental_groups_policy =
            supplemental_groups_policy(p.supplemental_groups_policy.as_deref())? as i32;
        sc.selinux_options = p.se_linux_options.as_ref().map(selinux);
        for s in p.sysctls.iter().flatten() {
            sysctls.insert(dotted_sysctl_name(&s.name), s.value.clone());
        }
    }
    Ok(LinuxPodSandboxConfig {
        cgroup_parent: cgroup_parent.to_string(),
        security_context: Some(sc),
        sysctls,
        ..Default::default()
    })
}

#[cfg(test)]
#[path = "security_tests.rs"]
mod tests;
