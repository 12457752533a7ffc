//! What the agent's eviction and housekeeping need from volumes: emptyDir usage against
//! `sizeLimit` (upstream's eviction manager, `localVolumeEviction`), and the periodic resync
//! that keeps updatable volumes and service-account tokens fresh.

use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use apimachinery::quantity::{Format, Quantity};

use super::{PodVolumes, VolumeKind, VolumeManager};
use crate::kubelet::env::fieldpath::go_quote;

/// Bytes a directory tree occupies on disk (allocated blocks, as `du`), not following
/// symlinks or crossing into other mounts.
pub fn disk_usage(dir: &Path) -> io::Result<u64> {
    let root = fs::symlink_metadata(dir)?;
    let mut total = root.blocks() * 512;
    if root.is_dir() {
        walk(dir, root.dev(), &mut total)?;
    }
    Ok(total)
}

fn walk(dir: &Path, dev: u64, total: &mut u64) -> io::Result<()> {
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let meta = entry.metadata()?;
        if meta.dev() != dev {
            continue;
        }
        *total += meta.blocks() * 512;
        if meta.is_dir() {
            walk(&entry.path(), dev, total)?;
        }
    }
    Ok(())
}

impl PodVolumes {
    /// The emptyDir volumes using more than their `sizeLimit`, each with upstream's eviction
    /// message (`Usage of EmptyDir volume "x" exceeds the limit "1Gi". `). The pod is then
    /// evicted with reason `Evicted`.
    pub fn empty_dirs_over_limit(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for v in self.volumes.values() {
            let VolumeKind::EmptyDir {
                size_limit: Some(limit),
                ..
            } = v.kind
            else {
                continue;
            };
            let Ok(used) = disk_usage(&v.path) else {
                continue;
            };
            if used > u64::try_from(limit).unwrap_or(u64::MAX) {
                let q = Quantity::new(limit, Format::BinarySI).canonical();
                out.push((
                    v.name.clone(),
                    format!(
                        "Usage of EmptyDir volume {} exceeds the limit {}. ",
                        go_quote(&v.name),
                        go_quote(&q)
                    ),
                ));
            }
        }
        out
    }
}

impl VolumeManager {
    /// Resyncs every pod's updatable volumes every `period` (upstream's sync frequency, 1 min)
    /// and early when a service-account token is due; drops expired tokens. Abort the handle
    /// to stop it.
    pub fn spawn_resync(self: &Arc<Self>, period: Duration) -> tokio::task::JoinHandle<()> {
        let manager = Arc::clone(self);
        tokio::spawn(async move {
            loop {
                let mut wait = period;
                if let Some(due) = manager.next_token_refresh() {
                    let until = due.duration_since(jiff::Timestamp::now());
                    let until = Duration::try_from(until).unwrap_or(Duration::ZERO);
                    wait = wait.min(until.max(Duration::from_secs(1)));
                }
                tokio::time::sleep(wait).await;
                for (uid, r) in manager.resync_all().await {
                    if let Err(e) = r {
                        tracing::warn!(pod = %uid, error = %e, "resyncing volumes");
                    }
                }
                manager.tokens().collect_expired();
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubelet::volumes::MountedVolume;
    use std::collections::BTreeMap;

    #[test]
    fn an_empty_dir_over_its_size_limit_is_reported_with_upstreams_message() {
        let dir = tempfile::tempdir().unwrap();
        let vol = dir.path().join("scratch");
        fs::create_dir(&vol).unwrap();
        fs::write(vol.join("big"), vec![1u8; 64 * 1024]).unwrap();
        let mut volumes = BTreeMap::new();
        for (name, limit) in [("scratch", 1024), ("roomy", 1 << 30)] {
            volumes.insert(
                name.to_string(),
                MountedVolume {
                    name: name.into(),
                    kind: VolumeKind::EmptyDir {
                        memory: false,
                        size_limit: Some(limit),
                        tmpfs_size: None,
                    },
                    path: vol.clone(),
                    read_only: false,
                },
            );
        }
        let pv = PodVolumes {
            uid: "u".into(),
            pod_dir: dir.path().into(),
            volumes,
        };
        assert!(disk_usage(&vol).unwrap() >= 64 * 1024);
        assert_eq!(
            pv.empty_dirs_over_limit(),
            vec![(
                "scratch".to_string(),
                "Usage of EmptyDir volume \"scratch\" exceeds the limit \"1Ki\". ".to_string()
            )]
        );
    }
}
