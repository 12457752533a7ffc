//! The per-pod volume manager: what each volume of a pod is on the node, set up before the
//! pod's containers are created, kept up to date while it runs, and removed when it is gone.
//!
//! Layout as the kubelet's: `<root>/pods/<uid>/volumes/<plugin>/<name>` with upstream's plugin
//! directory names (`kubernetes.io~empty-dir`, `~configmap`, `~secret`, `~projected`,
//! `~downward-api`); hostPath and claimed `local`/`hostPath` volumes are node paths used in
//! place. `emptyDir` is a directory (mode 0777) or, with `medium: Memory`, a tmpfs sized by
//! `sizeLimit` or the pod's memory limit; secret, projected and downwardAPI volumes live on
//! tmpfs, configMap volumes on disk. Their files are written by the [`atomic`] writer.
//!
//! - [`VolumeManager::setup`]: every volume of a pod; a missing non-optional source is a
//!   [`VolumeError::SetUp`] whose [`SetUpFailure::event_message`] is upstream's `FailedMount`
//!   event; the agent keeps the pod in `ContainerCreating` and calls again.
//! - [`PodVolumes::mounts_for`]: a container's CRI mounts (`subPath`, `subPathExpr`,
//!   `readOnly`, propagation).
//! - [`VolumeManager::resync`] / [`VolumeManager::object_changed`]: in-place updates of
//!   configMap, secret, downwardAPI and projected volumes (watch the objects of
//!   [`VolumeManager::watched_objects`]; immutable objects are read once), and the refresh of
//!   service-account tokens ([`token`]).
//! - [`VolumeManager::teardown`]: unmounts everything below the pod's directory, then removes
//!   it.

pub mod atomic;
mod content;
pub mod hostpath;
pub mod mount;
mod mounts;
pub mod ownership;
pub mod payload;
mod setup;
pub mod source;
pub mod subpath;
pub mod token;
pub mod usage;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use parking_lot::Mutex;

pub use mounts::MountOptions;
pub use source::{ApiSource, ObjectSource, SourceError};
pub use token::TokenManager;

use crate::kubelet::env::fieldpath::go_quote;

/// Plugin directory names under `volumes/` (upstream's escaped plugin names).
pub const EMPTY_DIR_PLUGIN: &str = "kubernetes.io~empty-dir";
pub const CONFIG_MAP_PLUGIN: &str = "kubernetes.io~configmap";
pub const SECRET_PLUGIN: &str = "kubernetes.io~secret";
pub const PROJECTED_PLUGIN: &str = "kubernetes.io~projected";
pub const DOWNWARD_API_PLUGIN: &str = "kubernetes.io~downward-api";

/// What the volume manager needs to know of its node.
#[derive(Debug, Clone, Default)]
pub struct VolumeConfig {
    /// The agent's data directory (the kubelet's `--root-dir`); pods live in `<root>/pods`.
    pub root_dir: PathBuf,
    /// The node's allocatable resources: the size of memory-backed volumes of pods without a
    /// memory limit, and the downward API's value for unset limits.
    pub node_allocatable: BTreeMap<String, Quantity>,
}

/// The kinds of objects volumes read that can change under a running pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ObjectKind {
    ConfigMap,
    Secret,
}

/// A ConfigMap or Secret some volume reads.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectRef {
    pub kind: ObjectKind,
    pub namespace: String,
    pub name: String,
}

/// What a volume is on the node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VolumeKind {
    /// `size_limit` is the volume's `sizeLimit` in bytes (what eviction compares usage with);
    /// `tmpfs_size` the size a memory-backed one was mounted with.
    EmptyDir {
        memory: bool,
        size_limit: Option<i64>,
        tmpfs_size: Option<i64>,
    },
    ConfigMap,
    Secret,
    DownwardApi,
    Projected,
    HostPath,
    /// A claim and the PersistentVolume it is bound to.
    Claim {
        claim: String,
        volume: String,
    },
}

/// One set-up volume of a pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountedVolume {
    pub name: String,
    pub kind: VolumeKind,
    /// The node path containers mount.
    pub path: PathBuf,
    /// Mounted read-only whatever the volumeMount says (configMap, secret, downwardAPI and
    /// projected volumes; claims with `readOnly`).
    pub read_only: bool,
}

/// The set-up volumes of one pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodVolumes {
    pub uid: String,
    /// `<root>/pods/<uid>`.
    pub pod_dir: PathBuf,
    pub volumes: BTreeMap<String, MountedVolume>,
}

/// One volume that could not be set up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetUpFailure {
    pub volume: String,
    /// Upstream's cause, e.g. `configmap "app" not found`.
    pub message: String,
    /// The volume could not even be resolved (a claim, an unsupported type) rather than mounted.
    pub unprocessed: bool,
}

impl SetUpFailure {
    /// The message of the `FailedMount` warning event upstream records for this failure.
    pub fn event_message(&self) -> String {
        if self.unprocessed {
            timeout_event_message(&[], std::slice::from_ref(&self.volume), &self.message)
        } else {
            format!(
                "MountVolume.SetUp failed for volume {} : {}",
                go_quote(&self.volume),
                self.message
            )
        }
    }
}

/// The `FailedMount` message upstream records when volumes are still not ready after its
/// wait (2 min 3 s): `Unable to attach or mount volumes: unmounted volumes=[a b], ...`.
pub fn timeout_event_message(unmounted: &[String], unprocessed: &[String], cause: &str) -> String {
    let list = |v: &[String]| {
        let mut v = v.to_vec();
        v.sort();
        format!("[{}]", v.join(" "))
    };
    let mut all = unmounted.to_vec();
    all.extend(unprocessed.iter().cloned());
    format!(
        "Unable to attach or mount volumes: unmounted volumes={}, unattached volumes=[], failed to process volumes={}: {cause}",
        list(&all),
        list(unprocessed)
    )
}

/// Why volumes could not be set up or torn down.
#[derive(Debug, thiserror::Error)]
pub enum VolumeError {
    /// Some volumes are not ready; the others are. Retrying is safe.
    #[error("{}", .0.iter().map(SetUpFailure::event_message).collect::<Vec<_>>().join("; "))]
    SetUp(Vec<SetUpFailure>),
    /// The pod has no UID.
    #[error("pod {0} has no uid")]
    NoUid(String),
    /// Unmounting or removing the pod's directory failed; nothing was removed below a mount.
    #[error("tearing down the volumes of pod {uid}: {source}")]
    TearDown {
        uid: String,
        #[source]
        source: io::Error,
    },
}

/// What the manager remembers of a pod between calls.
struct PodState {
    pod: Pod,
    volumes: PodVolumes,
    /// Objects read by updatable volumes, with the immutable ones' content kept.
    objects: BTreeMap<ObjectRef, setup::Cached>,
}

/// The volumes of every pod of a node.
pub struct VolumeManager {
    config: VolumeConfig,
    source: Arc<dyn ObjectSource>,
    tokens: TokenManager,
    pods: Mutex<HashMap<String, PodState>>,
    /// One lock per pod: set-up, updates and teardown of a pod never overlap.
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl VolumeManager {
    pub fn new(config: VolumeConfig, source: Arc<dyn ObjectSource>) -> Self {
        VolumeManager::with_tokens(config, source, TokenManager::default())
    }

    /// With a given token manager (tests inject a clock through it).
    pub fn with_tokens(
        config: VolumeConfig,
        source: Arc<dyn ObjectSource>,
        tokens: TokenManager,
    ) -> Self {
        VolumeManager {
            config,
            source,
            tokens,
            pods: Mutex::new(HashMap::new()),
            locks: Mutex::new(HashMap::new()),
        }
    }

    /// `<root>/pods/<uid>`: the pod's directory (volumes, `etc-hosts`, termination logs).
    pub fn pod_dir(&self, uid: &str) -> PathBuf {
        self.config.root_dir.join("pods").join(uid)
    }

    pub fn tokens(&self) -> &TokenManager {
        &self.tokens
    }

    fn lock_for(&self, uid: &str) -> Arc<tokio::sync::Mutex<()>> {
        self.locks
            .lock()
            .entry(uid.to_string())
            .or_default()
            .clone()
    }

    /// Sets up every volume of `pod` (idempotent: what is already set up is kept, updatable
    /// content is refreshed).
    pub async fn setup(&self, pod: &Pod) -> Result<PodVolumes, VolumeError> {
        let uid = pod_uid(pod)?;
        let lock = self.lock_for(&uid);
        let _guard = lock.lock().await;
        let previous = self.pods.lock().get(&uid).map(|s| s.objects.clone());
        let ctx = setup::Ctx {
            pod,
            pod_dir: self.pod_dir(&uid),
            config: &self.config,
            source: self.source.as_ref(),
            tokens: &self.tokens,
            cached: previous.unwrap_or_default(),
        };
        let outcome = setup::setup_all(ctx).await;
        self.pods.lock().insert(
            uid.clone(),
            PodState {
                pod: pod.clone(),
                volumes: outcome.volumes.clone(),
                objects: outcome.objects,
            },
        );
        if outcome.failures.is_empty() {
            Ok(outcome.volumes)
        } else {
            Err(VolumeError::SetUp(outcome.failures))
        }
    }

    /// The set-up volumes of pod `uid`, if [`setup`](Self::setup) ran for it.
    pub fn volumes(&self, uid: &str) -> Option<PodVolumes> {
        self.pods.lock().get(uid).map(|s| s.volumes.clone())
    }

    /// Rewrites the configMap, secret, downwardAPI and projected volumes of `pod` from their
    /// sources now (upstream's periodic remount; also after the pod's labels or annotations
    /// changed). Files change only when content does; a source that became unreadable leaves
    /// the old files. Returns whether any file changed.
    pub async fn resync(&self, pod: &Pod) -> Result<bool, VolumeError> {
        let uid = pod_uid(pod)?;
        let lock = self.lock_for(&uid);
        let _guard = lock.lock().await;
        let Some((volumes, cached)) = self
            .pods
            .lock()
            .get(&uid)
            .map(|s| (s.volumes.clone(), s.objects.clone()))
        else {
            return Ok(false);
        };
        let ctx = setup::Ctx {
            pod,
            pod_dir: self.pod_dir(&uid),
            config: &self.config,
            source: self.source.as_ref(),
            tokens: &self.tokens,
            cached,
        };
        let outcome = setup::refresh_all(ctx, &volumes).await;
        if let Some(state) = self.pods.lock().get_mut(&uid) {
            state.pod = pod.clone();
            state.objects = outcome.objects;
        }
        if outcome.failures.is_empty() {
            Ok(outcome.changed)
        } else {
            Err(VolumeError::SetUp(outcome.failures))
        }
    }

    /// Resyncs every pod whose volumes read `namespace/name` (call it from a ConfigMap or
    /// Secret watch). Returns each affected pod's UID with its outcome.
    pub async fn object_changed(
        &self,
        kind: ObjectKind,
        namespace: &str,
        name: &str,
    ) -> Vec<(String, Result<bool, VolumeError>)> {
        let key = ObjectRef {
            kind,
            namespace: namespace.to_string(),
            name: name.to_string(),
        };
        let pods: Vec<Pod> = self
            .pods
            .lock()
            .values()
            .filter(|s| s.objects.get(&key).is_some_and(|c| !c.immutable))
            .map(|s| s.pod.clone())
            .collect();
        let mut out = Vec::new();
        for pod in pods {
            let uid = pod.metadata.uid.clone().unwrap_or_default();
            out.push((uid, self.resync(&pod).await));
        }
        out
    }

    /// Resyncs every known pod with its last known spec (the agent's periodic sync, which also
    /// refreshes tokens that are due).
    pub async fn resync_all(&self) -> Vec<(String, Result<bool, VolumeError>)> {
        let pods: Vec<Pod> = self.pods.lock().values().map(|s| s.pod.clone()).collect();
        let mut out = Vec::new();
        for pod in pods {
            let uid = pod.metadata.uid.clone().unwrap_or_default();
            out.push((uid, self.resync(&pod).await));
        }
        out
    }

    /// The ConfigMaps and Secrets that updatable volumes of set-up pods read and that are not
    /// immutable: the objects to watch.
    pub fn watched_objects(&self) -> BTreeSet<ObjectRef> {
        self.pods
            .lock()
            .values()
            .flat_map(|s| s.objects.iter())
            .filter(|(_, c)| !c.immutable)
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// The earliest time a service-account token of any pod needs a refresh (when to call
    /// [`resync_all`](Self::resync_all) next at the latest).
    pub fn next_token_refresh(&self) -> Option<jiff::Timestamp> {
        let uids: Vec<String> = self.pods.lock().keys().cloned().collect();
        uids.iter()
            .filter_map(|u| self.tokens.next_refresh(u))
            .min()
    }

    /// Unmounts everything below the pod's directory and removes it; forgets the pod and its
    /// tokens. Nothing is removed while anything below is still mounted.
    pub async fn teardown(&self, uid: &str) -> Result<(), VolumeError> {
        let lock = self.lock_for(uid);
        let _guard = lock.lock().await;
        self.pods.lock().remove(uid);
        self.tokens.delete_pod(uid);
        remove_pod_dir(&self.pod_dir(uid)).map_err(|source| VolumeError::TearDown {
            uid: uid.to_string(),
            source,
        })?;
        self.locks.lock().remove(uid);
        Ok(())
    }

    /// Tears down the directories of pods not in `keep` (after an agent restart); returns their
    /// UIDs.
    pub async fn cleanup_orphans(
        &self,
        keep: &HashSet<String>,
    ) -> Result<Vec<String>, VolumeError> {
        let dir = self.config.root_dir.join("pods");
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(source) => {
                return Err(VolumeError::TearDown {
                    uid: String::new(),
                    source,
                });
            }
        };
        let mut removed = Vec::new();
        for entry in entries.flatten() {
            let uid = entry.file_name().to_string_lossy().into_owned();
            if !keep.contains(&uid) && entry.path().is_dir() {
                self.teardown(&uid).await?;
                removed.push(uid);
            }
        }
        Ok(removed)
    }
}

fn pod_uid(pod: &Pod) -> Result<String, VolumeError> {
    pod.metadata
        .uid
        .clone()
        .filter(|u| !u.is_empty())
        .ok_or_else(|| VolumeError::NoUid(pod.metadata.name.clone().unwrap_or_default()))
}

/// Unmounts everything under `dir`, checks nothing is left mounted, removes `dir`.
pub fn remove_pod_dir(dir: &Path) -> io::Result<()> {
    mount::unmount_all_under(dir)?;
    let left = mount::mounts_under(dir)?;
    if !left.is_empty() {
        return Err(io::Error::other(format!(
            "still mounted: {}",
            left.iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    match std::fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}
