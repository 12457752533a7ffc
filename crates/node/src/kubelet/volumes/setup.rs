//! Setting up each kind of volume, and refreshing the content of the updatable ones
//! (upstream's volume plugins' `SetUpAt`: emptyDir, configMap, secret, downwardAPI, projected,
//! hostPath, local and claims).

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use apimachinery::quantity::Quantity as Q;
use k8s_openapi::api::core::v1::{Container, Pod, Volume};

use super::source::ObjectSource;
use super::token::TokenManager;
use super::{
    CONFIG_MAP_PLUGIN, DOWNWARD_API_PLUGIN, EMPTY_DIR_PLUGIN, MountedVolume, ObjectRef,
    PROJECTED_PLUGIN, PodVolumes, SECRET_PLUGIN, SetUpFailure, VolumeConfig, VolumeKind, hostpath,
    mount, ownership,
};
use crate::kubelet::env::fieldpath::go_quote;
use crate::kubelet::security;

/// emptyDir directories are world-writable (upstream `perm`).
const EMPTY_DIR_MODE: u32 = 0o777;
/// The pod's own directories (upstream `makePodDataDirs`).
const POD_DIR_MODE: u32 = 0o750;

pub(super) use super::content::Cached;

pub(super) struct Ctx<'a> {
    pub pod: &'a Pod,
    pub pod_dir: PathBuf,
    pub config: &'a VolumeConfig,
    pub source: &'a dyn ObjectSource,
    pub tokens: &'a TokenManager,
    pub cached: BTreeMap<ObjectRef, Cached>,
}

pub(super) struct Outcome {
    pub volumes: PodVolumes,
    pub objects: BTreeMap<ObjectRef, Cached>,
    pub failures: Vec<SetUpFailure>,
    pub changed: bool,
}

/// Per-call state: the objects read, what the pod's security context asks of volume files.
pub(super) struct Run<'a> {
    pub ctx: Ctx<'a>,
    pub objects: BTreeMap<ObjectRef, Cached>,
    pub fs_group: Option<u32>,
    pub fs_user: Option<u32>,
    pub on_root_mismatch: bool,
}

pub(super) async fn setup_all(ctx: Ctx<'_>) -> Outcome {
    let uid = ctx.pod.metadata.uid.clone().unwrap_or_default();
    let pod_dir = ctx.pod_dir.clone();
    let mut volumes = PodVolumes {
        uid,
        pod_dir: pod_dir.clone(),
        volumes: BTreeMap::new(),
    };
    let mut failures = Vec::new();
    if let Err(e) = make_pod_dirs(&pod_dir) {
        failures.push(SetUpFailure {
            volume: String::new(),
            message: format!(
                "creating {}: {}",
                pod_dir.display(),
                hostpath::os_message(&e)
            ),
            unprocessed: false,
        });
        return Outcome {
            volumes,
            objects: BTreeMap::new(),
            failures,
            changed: false,
        };
    }
    let mut run = Run::new(ctx);
    let mut changed = false;
    let specs = run
        .ctx
        .pod
        .spec
        .as_ref()
        .and_then(|s| s.volumes.clone())
        .unwrap_or_default();
    for v in &specs {
        match run.setup_one(v).await {
            Ok((mounted, c)) => {
                changed |= c;
                volumes.volumes.insert(v.name.clone(), mounted);
            }
            Err(f) => failures.push(f),
        }
    }
    Outcome {
        volumes,
        objects: run.objects,
        failures,
        changed,
    }
}

/// Rewrites the content of the updatable volumes among `volumes`.
pub(super) async fn refresh_all(ctx: Ctx<'_>, volumes: &PodVolumes) -> Outcome {
    let mut run = Run::new(ctx);
    let mut failures = Vec::new();
    let mut changed = false;
    let specs = run
        .ctx
        .pod
        .spec
        .as_ref()
        .and_then(|s| s.volumes.clone())
        .unwrap_or_default();
    for v in &specs {
        let Some(mounted) = volumes.volumes.get(&v.name) else {
            continue;
        };
        let updatable = matches!(
            mounted.kind,
            VolumeKind::ConfigMap
                | VolumeKind::Secret
                | VolumeKind::DownwardApi
                | VolumeKind::Projected
        );
        if !updatable {
            continue;
        }
        match run.write_content(v, &mounted.path).await {
            Ok(c) => changed |= c,
            Err(message) => failures.push(SetUpFailure {
                volume: v.name.clone(),
                message,
                unprocessed: false,
            }),
        }
    }
    // Objects of volumes not rewritten keep their entries.
    let mut objects = run.ctx.cached.clone();
    objects.extend(run.objects);
    Outcome {
        volumes: volumes.clone(),
        objects,
        failures,
        changed,
    }
}

fn make_pod_dirs(pod_dir: &Path) -> io::Result<()> {
    for d in [
        pod_dir.to_path_buf(),
        pod_dir.join("volumes"),
        pod_dir.join("plugins"),
    ] {
        if !d.is_dir() {
            fs::create_dir_all(&d)?;
            fs::set_permissions(&d, fs::Permissions::from_mode(POD_DIR_MODE))?;
        }
    }
    Ok(())
}

impl<'a> Run<'a> {
    fn new(ctx: Ctx<'a>) -> Self {
        let sc = ctx
            .pod
            .spec
            .as_ref()
            .and_then(|s| s.security_context.as_ref());
        let fs_group = sc
            .and_then(|s| s.fs_group)
            .and_then(|g| u32::try_from(g).ok());
        let on_root_mismatch =
            sc.and_then(|s| s.fs_group_change_policy.as_deref()) == Some("OnRootMismatch");
        let fs_user = security::fs_user(ctx.pod).and_then(|u| u32::try_from(u).ok());
        Run {
            ctx,
            objects: BTreeMap::new(),
            fs_group,
            fs_user,
            on_root_mismatch,
        }
    }

    fn plugin_dir(&self, plugin: &str, name: &str) -> PathBuf {
        self.ctx.pod_dir.join("volumes").join(plugin).join(name)
    }

    pub(super) fn namespace(&self) -> &str {
        self.ctx
            .pod
            .metadata
            .namespace
            .as_deref()
            .unwrap_or("default")
    }

    async fn setup_one(&mut self, v: &Volume) -> Result<(MountedVolume, bool), SetUpFailure> {
        let fail = |message: String| SetUpFailure {
            volume: v.name.clone(),
            message,
            unprocessed: false,
        };
        let unprocessed = |message: String| SetUpFailure {
            volume: v.name.clone(),
            message,
            unprocessed: true,
        };
        let mounted = |kind: VolumeKind, path: PathBuf, read_only: bool| MountedVolume {
            name: v.name.clone(),
            kind,
            path,
            read_only,
        };
        if let Some(ed) = &v.empty_dir {
            let medium = ed.medium.as_deref().unwrap_or_default();
            let size_limit = ed
                .size_limit
                .as_ref()
                .and_then(|q| Q::parse(&q.0).ok())
                .map(|q| q.value());
            let dir = self.plugin_dir(EMPTY_DIR_PLUGIN, &v.name);
            let (memory, tmpfs_size) = match medium {
                "" => {
                    setup_dir(&dir).map_err(|e| fail(io_msg(&dir, &e)))?;
                    (false, None)
                }
                "Memory" => {
                    let size = self.memory_volume_size(size_limit);
                    setup_tmpfs(&dir, size).map_err(|e| fail(io_msg(&dir, &e)))?;
                    (true, size)
                }
                other => {
                    return Err(fail(format!("unknown storage medium {}", go_quote(other))));
                }
            };
            if let Some(gid) = self.fs_group {
                ownership::set_volume_ownership(&dir, gid, false, false)
                    .map_err(|e| fail(io_msg(&dir, &e)))?;
            }
            let kind = VolumeKind::EmptyDir {
                memory,
                size_limit,
                tmpfs_size,
            };
            return Ok((mounted(kind, dir, false), false));
        }
        if v.config_map.is_some()
            || v.secret.is_some()
            || v.downward_api.is_some()
            || v.projected.is_some()
        {
            let (plugin, kind, on_tmpfs) = if v.config_map.is_some() {
                (CONFIG_MAP_PLUGIN, VolumeKind::ConfigMap, false)
            } else if v.secret.is_some() {
                (SECRET_PLUGIN, VolumeKind::Secret, true)
            } else if v.downward_api.is_some() {
                (DOWNWARD_API_PLUGIN, VolumeKind::DownwardApi, true)
            } else {
                (PROJECTED_PLUGIN, VolumeKind::Projected, true)
            };
            let dir = self.plugin_dir(plugin, &v.name);
            let prepared = if on_tmpfs {
                setup_tmpfs(&dir, self.memory_volume_size(None))
            } else {
                setup_dir(&dir)
            };
            prepared.map_err(|e| fail(io_msg(&dir, &e)))?;
            let changed = self.write_content(v, &dir).await.map_err(fail)?;
            return Ok((mounted(kind, dir, true), changed));
        }
        if let Some(hp) = &v.host_path {
            let path = PathBuf::from(&hp.path);
            hostpath::check_type(&path, hp.type_.as_deref()).map_err(fail)?;
            return Ok((mounted(VolumeKind::HostPath, path, false), false));
        }
        let claim = if let Some(c) = &v.persistent_volume_claim {
            Some((c.claim_name.clone(), c.read_only.unwrap_or(false), false))
        } else if v.ephemeral.is_some() {
            let pod_name = self.ctx.pod.metadata.name.clone().unwrap_or_default();
            Some((format!("{pod_name}-{}", v.name), false, true))
        } else {
            None
        };
        if let Some((claim, read_only, ephemeral)) = claim {
            let owner = ephemeral.then(|| {
                (
                    self.ctx.pod.metadata.name.clone().unwrap_or_default(),
                    self.ctx.pod.metadata.uid.clone().unwrap_or_default(),
                )
            });
            let ns = self.namespace().to_string();
            let node = self
                .ctx
                .pod
                .spec
                .as_ref()
                .and_then(|s| s.node_name.clone())
                .unwrap_or_default();
            let cv = hostpath::resolve_claim(
                self.ctx.source,
                &ns,
                &claim,
                owner.as_ref().map(|(n, u)| (n.as_str(), u.as_str())),
                &node,
            )
            .await
            .map_err(unprocessed)?;
            match &cv.host_path_type {
                Some(ty) => hostpath::check_type(&cv.path, Some(ty)).map_err(fail)?,
                None if !cv.path.exists() => {
                    return Err(fail(format!(
                        "path {} does not exist",
                        go_quote(&cv.path.display().to_string())
                    )));
                }
                None => {}
            }
            if let (Some(gid), true) = (self.fs_group, cv.supports_ownership) {
                ownership::set_volume_ownership(&cv.path, gid, read_only, self.on_root_mismatch)
                    .map_err(|e| fail(io_msg(&cv.path, &e)))?;
            }
            let kind = VolumeKind::Claim {
                claim,
                volume: cv.volume_name.clone(),
            };
            return Ok((mounted(kind, cv.path, read_only), false));
        }
        Err(unprocessed(format!(
            "failed to get Plugin from volumeSpec for volume {} err=no volume plugin matched",
            go_quote(&v.name)
        )))
    }

    /// The size of a memory-backed volume (upstream `calculateEmptyDirMemorySize`): node
    /// allocatable memory, or the pod's memory limit when lower, or `sizeLimit` when lower
    /// still.
    fn memory_volume_size(&self, size_limit: Option<i64>) -> Option<i64> {
        let mut size = self
            .ctx
            .config
            .node_allocatable
            .get("memory")
            .and_then(|q| Q::parse(&q.0).ok())
            .map(|q| q.value());
        for candidate in [pod_memory_limit(self.ctx.pod), size_limit]
            .into_iter()
            .flatten()
        {
            if candidate > 0 && size.is_none_or(|s| candidate <= s) {
                size = Some(candidate);
            }
        }
        size
    }
}

fn io_msg(path: &Path, e: &io::Error) -> String {
    format!("{}: {}", path.display(), hostpath::os_message(e))
}

/// An emptyDir directory with mode 0777 whatever the umask (upstream `setupDir`).
fn setup_dir(dir: &Path) -> io::Result<()> {
    fs::create_dir_all(dir)?;
    let mode = fs::symlink_metadata(dir)?.permissions().mode() & 0o777;
    if mode != EMPTY_DIR_MODE {
        fs::set_permissions(dir, fs::Permissions::from_mode(EMPTY_DIR_MODE))?;
    }
    Ok(())
}

/// A directory with a tmpfs mounted on it, unless one already is (upstream `setupTmpfs`).
fn setup_tmpfs(dir: &Path, size: Option<i64>) -> io::Result<()> {
    setup_dir(dir)?;
    if mount::is_mounted_as(dir, "tmpfs")? {
        return Ok(());
    }
    mount::mount_tmpfs(dir, size)
}

/// The pod's memory limit, when every container has one (upstream `ResourceConfigForPod` with
/// `PodLimits`): regular containers and sidecars add up; an init container needs its own limit
/// plus the sidecars started before it; the larger of the two, plus the pod overhead.
pub fn pod_memory_limit(pod: &Pod) -> Option<i64> {
    let spec = pod.spec.as_ref()?;
    let limit = |c: &Container| -> Option<i64> {
        let q = c.resources.as_ref()?.limits.as_ref()?.get("memory")?;
        Q::parse(&q.0).ok().map(|q| q.value())
    };
    let mut regular = 0i64;
    for c in &spec.containers {
        regular = regular.saturating_add(limit(c)?);
    }
    let mut sidecars = 0i64;
    let mut init_peak = 0i64;
    for c in spec.init_containers.iter().flatten() {
        let l = limit(c)?;
        if c.restart_policy.as_deref() == Some("Always") {
            sidecars = sidecars.saturating_add(l);
        } else {
            init_peak = init_peak.max(l.saturating_add(sidecars));
        }
    }
    let overhead = spec
        .overhead
        .as_ref()
        .and_then(|o| o.get("memory"))
        .and_then(|q| Q::parse(&q.0).ok())
        .map(|q| q.value())
        .unwrap_or(0);
    Some(
        regular
            .saturating_add(sidecars)
            .max(init_peak)
            .saturating_add(overhead),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(v: serde_json::Value) -> Pod {
        serde_json::from_value(serde_json::json!({"metadata": {"name": "p"}, "spec": v})).unwrap()
    }

    #[test]
    fn the_pod_memory_limit_needs_every_container_limited() {
        let p = pod(serde_json::json!({
            "containers": [
                {"name": "a", "resources": {"limits": {"memory": "100Mi"}}},
                {"name": "b", "resources": {"limits": {"memory": "50Mi"}}}
            ],
            "initContainers": [
                {"name": "side", "restartPolicy": "Always", "resources": {"limits": {"memory": "10Mi"}}},
                {"name": "big", "resources": {"limits": {"memory": "300Mi"}}}
            ],
            "overhead": {"memory": "1Mi"}
        }));
        assert_eq!(pod_memory_limit(&p), Some((310 + 1) * 1024 * 1024));
        let unlimited = pod(serde_json::json!({"containers": [
            {"name": "a", "resources": {"limits": {"memory": "100Mi"}}},
            {"name": "b"}
        ]}));
        assert_eq!(pod_memory_limit(&unlimited), None);
    }
}
