//! A container's volume mounts as CRI `Mount`s (upstream `makeMounts` in
//! `pkg/kubelet/kubelet_pods.go`, without the `/etc/hosts` mount, which is in
//! [`crate::kubelet::dns`]).
//!
//! `subPath` (or `subPathExpr`, expanded from the container's final environment) selects a
//! part of the volume, bound through [`super::subpath`]; `readOnly` or a read-only volume
//! mounts read-only; `mountPropagation` maps to CRI's propagation; `recursiveReadOnly` needs
//! a runtime that supports it. Errors are upstream's and make the container wait with
//! `CreateContainerConfigError`.

use std::collections::{BTreeSet, HashMap};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use k8s_cri::v1::{KeyValue, Mount, MountPropagation};
use k8s_openapi::api::core::v1::{Container, VolumeMount};

use super::{PodVolumes, subpath};
use crate::kubelet::env::expand::expand;

/// What the runtime can do with mounts.
#[derive(Debug, Clone, Copy, Default)]
pub struct MountOptions {
    /// The runtime supports recursive read-only mounts (containerd 2 with a recent kernel;
    /// containerd 1.6 does not).
    pub supports_recursive_read_only: bool,
}

impl PodVolumes {
    /// The CRI mounts of `container`'s volumeMounts. `envs` is the container's final
    /// environment (for `subPathExpr`).
    pub fn mounts_for(
        &self,
        container: &Container,
        envs: &[KeyValue],
        opts: &MountOptions,
    ) -> Result<Vec<Mount>, String> {
        let mut out = Vec::new();
        for (index, m) in container.volume_mounts.iter().flatten().enumerate() {
            out.push(self.mount_one(container, index, m, envs, opts)?);
        }
        Ok(out)
    }

    fn mount_one(
        &self,
        container: &Container,
        index: usize,
        m: &VolumeMount,
        envs: &[KeyValue],
        opts: &MountOptions,
    ) -> Result<Mount, String> {
        let vol = self.volumes.get(&m.name).ok_or_else(|| {
            format!(
                "cannot find volume {:?} to mount into container {:?}",
                m.name, container.name
            )
        })?;
        let mut sub = m.sub_path.clone().unwrap_or_default();
        if let Some(expr) = m.sub_path_expr.as_deref().filter(|e| !e.is_empty()) {
            sub = expand_sub_path_expr(expr, envs)?;
        }
        let mut host_path = vol.path.clone();
        if !sub.is_empty() {
            if sub.starts_with('/') {
                return Err(format!(
                    "error SubPath `{sub}` must not be an absolute path"
                ));
            }
            if sub.split('/').any(|c| c == "..") {
                return Err(format!(
                    "unable to provision SubPath `{sub}`: must not contain '..'"
                ));
            }
            let sub_path = Path::new(&sub);
            let full = vol.path.join(sub_path);
            if std::fs::symlink_metadata(&full).is_err() {
                let perm = std::fs::metadata(&vol.path)
                    .map(|m| m.permissions().mode() & 0o7777)
                    .unwrap_or(0o755);
                if let Err(e) = subpath::safe_make_dir(&vol.path, sub_path, perm) {
                    tracing::warn!(volume = %m.name, container = %container.name, error = %e, "creating subPath");
                    return Err(format!(
                        "failed to create subPath directory for volumeMount {:?} of container {:?}",
                        m.name, container.name
                    ));
                }
            }
            let target = self
                .pod_dir
                .join("volume-subpaths")
                .join(&m.name)
                .join(&container.name)
                .join(index.to_string());
            host_path = subpath::bind_subpath(&vol.path, sub_path, &target).map_err(|e| {
                tracing::warn!(volume = %m.name, container = %container.name, error = %e, "preparing subPath");
                format!(
                    "failed to prepare subPath for volumeMount {:?} of container {:?}",
                    m.name, container.name
                )
            })?;
        }
        let propagation = propagation(m.mount_propagation.as_deref())?;
        let read_only = m.read_only.unwrap_or(false) || vol.read_only;
        let rro = recursive_read_only(m, opts.supports_recursive_read_only)?;
        Ok(Mount {
            container_path: m.mount_path.clone(),
            host_path: host_path.to_string_lossy().into_owned(),
            readonly: read_only,
            propagation: propagation as i32,
            recursive_read_only: rro,
            ..Default::default()
        })
    }
}

/// `subPathExpr` against the container's environment: every reference must have a non-empty
/// value (upstream `ExpandContainerVolumeMounts`).
pub fn expand_sub_path_expr(expr: &str, envs: &[KeyValue]) -> Result<String, String> {
    let map: HashMap<&str, &str> = envs
        .iter()
        .map(|kv| (kv.key.as_str(), kv.value.as_str()))
        .collect();
    let mut missing = BTreeSet::new();
    let out = expand(expr, |name| match map.get(name) {
        Some(v) if !v.is_empty() => v.to_string(),
        _ => {
            missing.insert(name.to_string());
            String::new()
        }
    });
    if missing.is_empty() {
        Ok(out)
    } else {
        Err(format!(
            "missing value for {}",
            missing.into_iter().collect::<Vec<_>>().join(", ")
        ))
    }
}

/// A volumeMount's propagation in CRI terms (upstream `translateMountPropagation`).
fn propagation(mode: Option<&str>) -> Result<MountPropagation, String> {
    match mode {
        None | Some("None") => Ok(MountPropagation::PropagationPrivate),
        Some("HostToContainer") => Ok(MountPropagation::PropagationHostToContainer),
        Some("Bidirectional") => Ok(MountPropagation::PropagationBidirectional),
        Some(other) => Err(format!("invalid MountPropagation mode: {other:?}")),
    }
}

/// Whether the mount is recursively read-only (upstream `resolveRecursiveReadOnly`).
fn recursive_read_only(m: &VolumeMount, supported: bool) -> Result<bool, String> {
    let mode = match m.recursive_read_only.as_deref() {
        None | Some("Disabled") => return Ok(false),
        Some(mode) => mode,
    };
    if !m.read_only.unwrap_or(false) {
        return Err(format!(
            "failed to resolve recursive read-only mode: volume {:?} requested recursive read-only mode, but it is not read-only",
            m.name
        ));
    }
    if let Some(p) = m.mount_propagation.as_deref().filter(|p| *p != "None") {
        return Err(format!(
            "failed to resolve recursive read-only mode: volume {:?} requested recursive read-only mode, but it is not compatible with propagation {p:?}",
            m.name
        ));
    }
    match mode {
        "IfPossible" => Ok(supported),
        "Enabled" if supported => Ok(true),
        "Enabled" => Err(format!(
            "failed to resolve recursive read-only mode: volume {:?} requested recursive read-only mode, but it is not supported by the runtime",
            m.name
        )),
        other => Err(format!(
            "failed to resolve recursive read-only mode: unknown recursive read-only mode {other:?}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubelet::volumes::{MountedVolume, VolumeKind};
    use std::collections::BTreeMap;
    use std::path::PathBuf;

    fn kv(k: &str, v: &str) -> KeyValue {
        KeyValue {
            key: k.into(),
            value: v.into(),
        }
    }

    fn volumes(dir: &Path) -> PodVolumes {
        let mut volumes = BTreeMap::new();
        for (name, ro) in [("data", false), ("cfg", true)] {
            volumes.insert(
                name.to_string(),
                MountedVolume {
                    name: name.into(),
                    kind: VolumeKind::HostPath,
                    path: dir.join(name),
                    read_only: ro,
                },
            );
        }
        PodVolumes {
            uid: "u".into(),
            pod_dir: dir.join("pod"),
            volumes,
        }
    }

    fn container(mounts: serde_json::Value) -> Container {
        serde_json::from_value(serde_json::json!({"name": "c", "volumeMounts": mounts})).unwrap()
    }

    #[test]
    fn plain_mounts_carry_paths_read_only_and_propagation() {
        let dir = tempfile::tempdir().unwrap();
        let pv = volumes(dir.path());
        let c = container(serde_json::json!([
            {"name": "data", "mountPath": "/data", "mountPropagation": "HostToContainer"},
            {"name": "cfg", "mountPath": "/etc/cfg"},
            {"name": "data", "mountPath": "/ro", "readOnly": true}
        ]));
        let m = pv.mounts_for(&c, &[], &MountOptions::default()).unwrap();
        assert_eq!(
            m[0].host_path,
            dir.path().join("data").display().to_string()
        );
        assert_eq!(m[0].container_path, "/data");
        assert!(!m[0].readonly);
        assert_eq!(
            m[0].propagation,
            MountPropagation::PropagationHostToContainer as i32
        );
        assert!(m[1].readonly, "a read-only volume mounts read-only");
        assert!(m[2].readonly);
        assert_eq!(
            m[2].propagation,
            MountPropagation::PropagationPrivate as i32
        );
    }

    #[test]
    fn mount_errors_are_upstreams() {
        let dir = tempfile::tempdir().unwrap();
        let pv = volumes(dir.path());
        let err = |mounts: serde_json::Value| {
            pv.mounts_for(
                &container(mounts),
                &[kv("EMPTY", "")],
                &MountOptions::default(),
            )
            .unwrap_err()
        };
        assert_eq!(
            err(serde_json::json!([{"name": "nope", "mountPath": "/x"}])),
            "cannot find volume \"nope\" to mount into container \"c\""
        );
        assert_eq!(
            err(serde_json::json!([{"name": "data", "mountPath": "/x", "subPath": "/abs"}])),
            "error SubPath `/abs` must not be an absolute path"
        );
        assert_eq!(
            err(serde_json::json!([{"name": "data", "mountPath": "/x", "subPath": "a/../.."}])),
            "unable to provision SubPath `a/../..`: must not contain '..'"
        );
        assert_eq!(
            err(
                serde_json::json!([{"name": "data", "mountPath": "/x", "subPathExpr": "$(NOPE)/$(EMPTY)"}])
            ),
            "missing value for EMPTY, NOPE"
        );
        assert_eq!(
            err(
                serde_json::json!([{"name": "data", "mountPath": "/x", "mountPropagation": "Sideways"}])
            ),
            "invalid MountPropagation mode: \"Sideways\""
        );
        assert!(
            err(serde_json::json!([{"name": "data", "mountPath": "/x", "readOnly": true, "recursiveReadOnly": "Enabled"}]))
                .ends_with("but it is not supported by the runtime")
        );
        assert!(
            err(serde_json::json!([{"name": "data", "mountPath": "/x", "recursiveReadOnly": "IfPossible"}]))
                .ends_with("but it is not read-only")
        );
    }

    #[test]
    fn recursive_read_only_if_possible_follows_the_runtime() {
        let dir = tempfile::tempdir().unwrap();
        let pv = volumes(dir.path());
        let c = container(serde_json::json!([
            {"name": "data", "mountPath": "/x", "readOnly": true, "recursiveReadOnly": "IfPossible"}
        ]));
        let off = pv.mounts_for(&c, &[], &MountOptions::default()).unwrap();
        assert!(!off[0].recursive_read_only);
        let on = pv
            .mounts_for(
                &c,
                &[],
                &MountOptions {
                    supports_recursive_read_only: true,
                },
            )
            .unwrap();
        assert!(on[0].recursive_read_only);
        let _ = PathBuf::new();
    }

    #[test]
    fn sub_path_exprs_expand_from_the_environment() {
        assert_eq!(
            expand_sub_path_expr("logs/$(POD_NAME)", &[kv("POD_NAME", "web-0")]).unwrap(),
            "logs/web-0"
        );
        assert_eq!(expand_sub_path_expr("$$(X)", &[]).unwrap(), "$(X)");
    }
}
