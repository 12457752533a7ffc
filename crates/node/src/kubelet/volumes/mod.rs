//! A pod's volumes on the node: set up before its containers start, as CRI mounts per
//! container, torn down after the pod is gone. Kinds: emptyDir (also `medium: Memory`,
//! `sizeLimit`), configMap, secret, projected (the service-account volume
//! `kube-api-access-*`: a bound token from TokenRequest refreshed before expiry, `ca.crt`,
//! `namespace`), downwardAPI, hostPath, persistentVolumeClaim (local PVs); `subPath`,
//! `subPathExpr`, `readOnly`, `defaultMode`; configMap, secret, downwardAPI and projected
//! contents written atomically (the `..data` symlink swap) and refreshed on every sync.
//!
//! Directories follow upstream's `pods/<uid>/volumes/<plugin>/<name>` under the agent's
//! [`Layout`].
//!
//! Owned by the "podconfig" work; this is the interface the pod workers call, with a
//! placeholder (emptyDir only) until the full version lands.

use std::path::PathBuf;

use k8s_cri::v1::{KeyValue, Mount};
use k8s_openapi::api::core::v1::Container;

use super::context::PodContext;
use super::layout::Layout;

/// Why a pod's volumes cannot be set up. The pod stays `ContainerCreating`; the agent emits
/// a `FailedMount` Warning event with the message, in upstream's wording
/// (`MountVolume.SetUp failed for volume "cfg" : configmap "x" not found`).
#[derive(Debug, thiserror::Error)]
pub enum VolumeError {
    #[error("MountVolume.SetUp failed for volume \"{volume}\" : {message}")]
    SetUp { volume: String, message: String },
    /// A container mounts a volume the pod does not have, or a subPath is invalid (reason
    /// `CreateContainerConfigError` for the container).
    #[error("{0}")]
    Container(String),
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
}

/// Sets up and tears down pod volumes. One per agent.
pub struct VolumeManager {
    #[allow(dead_code)]
    client: kube::Client,
    layout: Layout,
}

impl VolumeManager {
    /// A manager writing under `layout`'s pod directories, reading objects (and requesting
    /// tokens) through `client`. Tasks it starts end when it is dropped.
    pub fn new(client: kube::Client, layout: Layout) -> Self {
        VolumeManager { client, layout }
    }

    /// Makes every volume of the pod ready. Idempotent; called on every sync of a running
    /// pod, so that configMap, secret, downwardAPI and token contents stay current.
    pub async fn setup(&self, ctx: &PodContext<'_>) -> Result<(), VolumeError> {
        // Placeholder: every emptyDir as a plain directory; other kinds are skipped.
        for v in ctx.pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
            if v.empty_dir.is_some() {
                let dir = self.empty_dir(ctx.uid(), &v.name);
                std::fs::create_dir_all(&dir).map_err(|e| VolumeError::Io {
                    what: format!("creating {}", dir.display()),
                    source: e,
                })?;
            }
        }
        Ok(())
    }

    fn empty_dir(&self, uid: &str, name: &str) -> PathBuf {
        self.layout
            .pod_volumes_dir(uid)
            .join("kubernetes.io~empty-dir")
            .join(name)
    }

    /// The CRI mounts of `container` (its `volumeMounts`; `env` is its environment, for
    /// `subPathExpr`). The agent adds `/etc/hosts` and the termination message file itself.
    pub fn container_mounts(
        &self,
        ctx: &PodContext<'_>,
        container: &Container,
        env: &[KeyValue],
    ) -> Result<Vec<Mount>, VolumeError> {
        let _ = env;
        let volumes = ctx
            .pod
            .spec
            .as_ref()
            .and_then(|s| s.volumes.clone())
            .unwrap_or_default();
        let mut out = Vec::new();
        for m in container.volume_mounts.iter().flatten() {
            let Some(v) = volumes.iter().find(|v| v.name == m.name) else {
                return Err(VolumeError::Container(format!(
                    "cannot find volume \"{}\" to mount into container \"{}\"",
                    m.name, container.name
                )));
            };
            if v.empty_dir.is_none() {
                continue;
            }
            out.push(Mount {
                container_path: m.mount_path.clone(),
                host_path: self.empty_dir(ctx.uid(), &v.name).display().to_string(),
                readonly: m.read_only.unwrap_or(false),
                ..Mount::default()
            });
        }
        Ok(out)
    }

    /// Unmounts and removes every volume of pod `uid` (also after an agent restart, from
    /// what is on disk). Idempotent.
    pub async fn teardown(&self, uid: &str) -> Result<(), VolumeError> {
        let dir = self.layout.pod_volumes_dir(uid);
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(VolumeError::Io {
                what: format!("removing {}", dir.display()),
                source: e,
            }),
        }
    }
}
