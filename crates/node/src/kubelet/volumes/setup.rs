//! Setting up each kind of volume, and refreshing the content of the updatable ones
//! (upstream's volume plugins' `SetUpAt`: emptyDir, configMap, secret, downwardAPI, projected,
//! hostPath, local and claims).

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use apimachinery::quantity::Quantity as Q;
use k8s_openapi::api::authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Container, Pod, Secret, Volume};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::atomic::{self, FileProjection, Payload};
use super::payload::{self, aggregate, mode_or_default};
use super::source::{ObjectSource, SourceError};
use super::token::TokenManager;
use super::{
    CONFIG_MAP_PLUGIN, DOWNWARD_API_PLUGIN, EMPTY_DIR_PLUGIN, MountedVolume, ObjectKind, ObjectRef,
    PROJECTED_PLUGIN, PodVolumes, SECRET_PLUGIN, SetUpFailure, VolumeConfig, VolumeKind, hostpath,
    mount, ownership,
};
use crate::kubelet::env::fieldpath::go_quote;
use crate::kubelet::security;

/// emptyDir directories are world-writable (upstream `perm`).
const EMPTY_DIR_MODE: u32 = 0o777;
/// The pod's own directories (upstream `makePodDataDirs`).
const POD_DIR_MODE: u32 = 0o750;

/// What a volume read last time.
#[derive(Debug, Clone)]
pub(super) struct Cached {
    pub immutable: bool,
    /// The object, kept only when immutable (it is never read again).
    object: Option<CachedObject>,
}

#[derive(Debug, Clone)]
enum CachedObject {
    ConfigMap(ConfigMap),
    Secret(Secret),
}

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
struct Run<'a> {
    ctx: Ctx<'a>,
    objects: BTreeMap<ObjectRef, Cached>,
    fs_group: Option<u32>,
    fs_user: Option<u32>,
    on_root_mismatch: bool,
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

    fn namespace(&self) -> &str {
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
            let cv = hostpath::resolve_claim(
                self.ctx.source,
                &ns,
                &claim,
                owner.as_ref().map(|(n, u)| (n.as_str(), u.as_str())),
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

    /// Writes the payload of a configMap, secret, downwardAPI or projected volume.
    async fn write_content(&mut self, v: &Volume, dir: &Path) -> Result<bool, String> {
        let payload = self.payload(v).await?;
        let fs_group = self.fs_group;
        let set_perms = |_: &Path| -> io::Result<()> {
            match fs_group {
                Some(gid) => ownership::set_volume_ownership(dir, gid, true, false),
                None => Ok(()),
            }
        };
        atomic::write(dir, &payload, Some(&set_perms)).map_err(|e| e.to_string())
    }

    async fn payload(&mut self, v: &Volume) -> Result<Payload, String> {
        if let Some(s) = &v.config_map {
            let optional = s.optional.unwrap_or(false);
            let cm = self.config_map(&s.name, optional).await?;
            return payload::config_map_payload(
                s.items.as_deref(),
                cm.as_ref(),
                mode_or_default(s.default_mode),
                optional,
            );
        }
        if let Some(s) = &v.secret {
            let name = s.secret_name.clone().unwrap_or_default();
            let optional = s.optional.unwrap_or(false);
            let secret = self.secret(&name, optional).await?;
            return payload::secret_payload(
                s.items.as_deref(),
                secret.as_ref(),
                mode_or_default(s.default_mode),
                optional,
            );
        }
        if let Some(d) = &v.downward_api {
            return payload::downward_api_payload(
                d.items.as_deref().unwrap_or_default(),
                self.ctx.pod,
                &self.ctx.config.node_allocatable,
                mode_or_default(d.default_mode),
            );
        }
        if let Some(p) = &v.projected {
            return self.projected_payload(p).await;
        }
        Ok(Payload::new())
    }

    /// Every source of a projected volume in one payload (upstream `collectData`): each source
    /// is attempted and the errors are reported together.
    async fn projected_payload(
        &mut self,
        p: &k8s_openapi::api::core::v1::ProjectedVolumeSource,
    ) -> Result<Payload, String> {
        let default_mode = mode_or_default(p.default_mode);
        let mut out = Payload::new();
        let mut errs = Vec::new();
        for s in p.sources.iter().flatten() {
            let part = if let Some(c) = &s.config_map {
                let optional = c.optional.unwrap_or(false);
                match self.config_map(&c.name, optional).await {
                    Ok(cm) => payload::config_map_payload(
                        c.items.as_deref(),
                        cm.as_ref(),
                        default_mode,
                        optional,
                    ),
                    Err(e) => Err(e),
                }
            } else if let Some(c) = &s.secret {
                let optional = c.optional.unwrap_or(false);
                match self.secret(&c.name, optional).await {
                    Ok(secret) => payload::secret_payload(
                        c.items.as_deref(),
                        secret.as_ref(),
                        default_mode,
                        optional,
                    ),
                    Err(e) => Err(e),
                }
            } else if let Some(d) = &s.downward_api {
                payload::downward_api_payload(
                    d.items.as_deref().unwrap_or_default(),
                    self.ctx.pod,
                    &self.ctx.config.node_allocatable,
                    default_mode,
                )
            } else if let Some(t) = &s.service_account_token {
                self.token_payload(t, default_mode).await
            } else if s.cluster_trust_bundle.is_some() {
                Err("clusterTrustBundle projections are not supported on this node".to_string())
            } else {
                Ok(Payload::new())
            };
            match part {
                Ok(files) => out.extend(files),
                Err(e) => errs.push(e),
            }
        }
        if errs.is_empty() {
            Ok(out)
        } else {
            Err(aggregate(&errs))
        }
    }

    async fn token_payload(
        &mut self,
        t: &k8s_openapi::api::core::v1::ServiceAccountTokenProjection,
        default_mode: u32,
    ) -> Result<Payload, String> {
        let pod = self.ctx.pod;
        let sa = pod
            .spec
            .as_ref()
            .and_then(|s| s.service_account_name.clone())
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "default".to_string());
        let request = TokenRequest {
            metadata: ObjectMeta::default(),
            spec: TokenRequestSpec {
                audiences: t
                    .audience
                    .iter()
                    .filter(|a| !a.is_empty())
                    .cloned()
                    .collect(),
                expiration_seconds: t.expiration_seconds,
                bound_object_ref: Some(BoundObjectReference {
                    api_version: Some("v1".into()),
                    kind: Some("Pod".into()),
                    name: pod.metadata.name.clone(),
                    uid: pod.metadata.uid.clone(),
                }),
            },
            status: None,
        };
        let ns = self.namespace().to_string();
        let tr = self
            .ctx
            .tokens
            .get(self.ctx.source, &ns, &sa, &request)
            .await?;
        let token = tr.status.map(|s| s.token).unwrap_or_default();
        // With an fsGroup, ownership adds group read (0640) after writing.
        let mode = if self.fs_user.is_some() || self.fs_group.is_some() {
            0o600
        } else {
            default_mode
        };
        let mut file = FileProjection::new(token, mode);
        file.fs_user = self.fs_user;
        Ok([(t.path.clone(), file)].into())
    }

    /// ConfigMap `name`: `None` when missing and optional; missing and required is upstream's
    /// `configmap "<name>" not found`.
    async fn config_map(
        &mut self,
        name: &str,
        optional: bool,
    ) -> Result<Option<ConfigMap>, String> {
        let key = self.key(ObjectKind::ConfigMap, name);
        if let Some(Cached {
            object: Some(CachedObject::ConfigMap(cm)),
            ..
        }) = self.ctx.cached.get(&key)
        {
            let cm = cm.clone();
            self.objects.insert(
                key,
                Cached {
                    immutable: true,
                    object: Some(CachedObject::ConfigMap(cm.clone())),
                },
            );
            return Ok(Some(cm));
        }
        let found = self.ctx.source.config_map(self.namespace(), name).await;
        let found = self.record(
            key,
            found,
            |cm: &ConfigMap| cm.immutable == Some(true),
            CachedObject::ConfigMap,
        )?;
        match found {
            Some(cm) => Ok(Some(cm)),
            None if optional => Ok(None),
            None => Err(format!("configmap {} not found", go_quote(name))),
        }
    }

    /// Secret `name`, as [`config_map`](Self::config_map) (`secret "<name>" not found`).
    async fn secret(&mut self, name: &str, optional: bool) -> Result<Option<Secret>, String> {
        let key = self.key(ObjectKind::Secret, name);
        if let Some(Cached {
            object: Some(CachedObject::Secret(s)),
            ..
        }) = self.ctx.cached.get(&key)
        {
            let s = s.clone();
            self.objects.insert(
                key,
                Cached {
                    immutable: true,
                    object: Some(CachedObject::Secret(s.clone())),
                },
            );
            return Ok(Some(s));
        }
        let found = self.ctx.source.secret(self.namespace(), name).await;
        let found = self.record(
            key,
            found,
            |s: &Secret| s.immutable == Some(true),
            CachedObject::Secret,
        )?;
        match found {
            Some(s) => Ok(Some(s)),
            None if optional => Ok(None),
            None => Err(format!("secret {} not found", go_quote(name))),
        }
    }

    fn key(&self, kind: ObjectKind, name: &str) -> ObjectRef {
        ObjectRef {
            kind,
            namespace: self.namespace().to_string(),
            name: name.to_string(),
        }
    }

    /// Remembers what a lookup found (watched unless immutable).
    fn record<T: Clone>(
        &mut self,
        key: ObjectRef,
        found: Result<Option<T>, SourceError>,
        immutable: impl Fn(&T) -> bool,
        wrap: impl Fn(T) -> CachedObject,
    ) -> Result<Option<T>, String> {
        let found = found.map_err(|e| e.to_string());
        let entry = match &found {
            Ok(Some(o)) if immutable(o) => Cached {
                immutable: true,
                object: Some(wrap(o.clone())),
            },
            _ => Cached {
                immutable: false,
                object: None,
            },
        };
        self.objects.insert(key, entry);
        found
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
