//! Volumes that are paths of the node: `hostPath` (with its `type` checks and creation) and
//! `persistentVolumeClaim`s bound to `local` or `hostPath` PersistentVolumes.
//!
//! Upstream: `pkg/volume/hostpath/host_path.go` (`checkType`), the local volume plugin, and the
//! claim → volume resolution of the kubelet's desired-state populator
//! (`createVolumeSpec`, `getPVCExtractPV`, `getPVSpec`), with their messages.

use std::fs;
use std::io;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::PersistentVolume;

use super::source::ObjectSource;
use crate::kubelet::env::fieldpath::go_quote;

/// Checks (and for the `...OrCreate` types creates) a hostPath of `type`.
pub fn check_type(path: &Path, ty: Option<&str>) -> Result<(), String> {
    let ty = ty.unwrap_or_default();
    let p = path.display();
    let meta = fs::metadata(path).ok();
    let is = |f: &dyn Fn(&fs::Metadata) -> bool| meta.as_ref().is_some_and(f);
    match ty {
        "" => Ok(()),
        "DirectoryOrCreate" if meta.is_none() => make_dir(path),
        "DirectoryOrCreate" | "Directory" => {
            if is(&|m| m.is_dir()) {
                Ok(())
            } else {
                Err(format!(
                    "hostPath type check failed: {p} is not a directory"
                ))
            }
        }
        "FileOrCreate" if meta.is_none() => make_file(path),
        "FileOrCreate" | "File" => {
            if is(&|m| m.file_type().is_file()) {
                Ok(())
            } else {
                Err(format!("hostPath type check failed: {p} is not a file"))
            }
        }
        "Socket" => ok_if(is(&|m| m.file_type().is_socket()), || {
            format!("hostPath type check failed: {p} is not a socket file")
        }),
        "CharDevice" => ok_if(is(&|m| m.file_type().is_char_device()), || {
            format!("hostPath type check failed: {p} is not a character device")
        }),
        "BlockDevice" => ok_if(is(&|m| m.file_type().is_block_device()), || {
            format!("hostPath type check failed: {p} is not a block device")
        }),
        other => Err(format!("{other} is an invalid volume type")),
    }
}

fn ok_if(ok: bool, msg: impl FnOnce() -> String) -> Result<(), String> {
    if ok { Ok(()) } else { Err(msg()) }
}

/// `mkdir -p` with 0755 (upstream `MakeDir`; the kubelet runs with umask 022).
fn make_dir(path: &Path) -> Result<(), String> {
    fs::create_dir_all(path)
        .map_err(|e| format!("mkdir {}: {}", path.display(), os_message(&e)))?;
    fs::set_permissions(path, fs::Permissions::from_mode(0o755))
        .map_err(|e| format!("chmod {}: {}", path.display(), os_message(&e)))
}

/// An empty file with 0644; its directory must exist (upstream `MakeFile`).
fn make_file(path: &Path) -> Result<(), String> {
    fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| format!("open {}: {}", path.display(), os_message(&e)))?;
    fs::set_permissions(path, fs::Permissions::from_mode(0o644))
        .map_err(|e| format!("chmod {}: {}", path.display(), os_message(&e)))
}

/// An OS error as Go prints it (`no such file or directory`), without Rust's `(os error 2)`.
pub fn os_message(e: &io::Error) -> String {
    let s = e.to_string();
    let s = match s.find(" (os error") {
        Some(i) => &s[..i],
        None => &s,
    };
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_lowercase().collect::<String>() + c.as_str(),
        None => String::new(),
    }
}

/// What a claim resolved to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimedVolume {
    /// The PersistentVolume's name.
    pub volume_name: String,
    /// The node path holding the data.
    pub path: PathBuf,
    /// `local` volumes support fsGroup; `hostPath` ones do not (upstream plugin attributes).
    pub supports_ownership: bool,
    /// The hostPath `type` to check, for hostPath volumes.
    pub host_path_type: Option<String>,
}

/// The provisioner of the platform's volumes (tenant clusters' default StorageClass).
pub const PLATFORM_PROVISIONER: &str = "volumes.platform.matryoshka.dev";
/// On a platform volume: the node it is attached to (written by the platform's attacher).
pub const ATTACHED_NODE_ANNOTATION: &str = "volumes.platform.matryoshka.dev/attached-node";

/// Whether only one node may use `pv` at a time (`ReadWriteOnce`, `ReadWriteOncePod`).
pub fn exclusive(pv: &PersistentVolume) -> bool {
    pv.spec
        .as_ref()
        .and_then(|s| s.access_modes.as_ref())
        .is_some_and(|m| {
            !m.is_empty()
                && m.iter()
                    .all(|m| m == "ReadWriteOnce" || m == "ReadWriteOncePod")
        })
}

/// Whether a platform volume may be used on `node`: one that only one node may use
/// (`ReadWriteOnce`, `ReadWriteOncePod`) must be attached to it first, as a CSI volume with
/// `attachRequired` is.
pub fn check_attached(pv: &PersistentVolume, node: &str) -> Result<(), String> {
    let ann = pv.metadata.annotations.as_ref();
    let ours = ann
        .and_then(|a| a.get("pv.kubernetes.io/provisioned-by"))
        .is_some_and(|p| p == PLATFORM_PROVISIONER);
    if !ours || !exclusive(pv) {
        return Ok(());
    }
    let name = pv.metadata.name.clone().unwrap_or_default();
    match ann.and_then(|a| a.get(ATTACHED_NODE_ANNOTATION)) {
        Some(n) if n == node => Ok(()),
        Some(n) => Err(format!(
            "volume {} is attached to node {}, not to this node {}",
            go_quote(&name),
            go_quote(n),
            go_quote(node)
        )),
        None => Err(format!(
            "volume {} is not attached to node {} yet",
            go_quote(&name),
            go_quote(node)
        )),
    }
}

/// Resolves claim `namespace/claim` to its bound volume's node path on `node`. `owner`
/// (name, uid) is the pod that must control the claim (generic ephemeral volumes).
pub async fn resolve_claim(
    source: &dyn ObjectSource,
    namespace: &str,
    claim: &str,
    owner: Option<(&str, &str)>,
    node: &str,
) -> Result<ClaimedVolume, String> {
    let wrap = |msg: String| format!("error processing PVC {namespace}/{claim}: {msg}");
    let pvc = match source.persistent_volume_claim(namespace, claim).await {
        Ok(Some(pvc)) => pvc,
        Ok(None) => {
            return Err(wrap(format!(
                "failed to fetch PVC from API server: persistentvolumeclaims {} not found",
                go_quote(claim)
            )));
        }
        Err(e) => return Err(wrap(format!("failed to fetch PVC from API server: {e}"))),
    };
    if let Some((pod_name, pod_uid)) = owner {
        let controlled = pvc
            .metadata
            .owner_references
            .iter()
            .flatten()
            .any(|r| r.controller == Some(true) && r.uid == pod_uid);
        if !controlled {
            return Err(format!(
                "PVC {namespace}/{claim} was not created for pod {namespace}/{pod_name} (pod is not owner)"
            ));
        }
    }
    if pvc.metadata.deletion_timestamp.is_some() {
        return Err(wrap(format!(
            "can't start pod because PVC {namespace}/{claim} is being deleted"
        )));
    }
    let phase = pvc
        .status
        .as_ref()
        .and_then(|s| s.phase.clone())
        .unwrap_or_default();
    let volume_name = pvc
        .spec
        .as_ref()
        .and_then(|s| s.volume_name.clone())
        .unwrap_or_default();
    if phase != "Bound" || volume_name.is_empty() {
        return Err(wrap(format!(
            "PVC {namespace}/{claim} has non-bound phase ({}) or empty pvc.Spec.VolumeName ({})",
            go_quote(&phase),
            go_quote(&volume_name)
        )));
    }
    let pv = match source.persistent_volume(&volume_name).await {
        Ok(Some(pv)) => pv,
        Ok(None) => {
            return Err(wrap(format!(
                "failed to fetch PV {volume_name} from API server: persistentvolumes {} not found",
                go_quote(&volume_name)
            )));
        }
        Err(e) => {
            return Err(wrap(format!(
                "failed to fetch PV {volume_name} from API server: {e}"
            )));
        }
    };
    let claim_uid = pvc.metadata.uid.clone().unwrap_or_default();
    check_claim_ref(&pv, &volume_name, &claim_uid).map_err(wrap)?;
    check_attached(&pv, node).map_err(wrap)?;
    volume_path(&pv).map_err(wrap)
}

fn check_claim_ref(pv: &PersistentVolume, name: &str, claim_uid: &str) -> Result<(), String> {
    let Some(r) = pv.spec.as_ref().and_then(|s| s.claim_ref.as_ref()) else {
        return Err(format!(
            "found PV object {} but it has a nil pv.Spec.ClaimRef indicating it is not yet bound to the claim",
            go_quote(name)
        ));
    };
    let uid = r.uid.clone().unwrap_or_default();
    if uid != claim_uid {
        return Err(format!(
            "found PV object {} but its pv.Spec.ClaimRef.UID ({}) does not point to claim.UID ({})",
            go_quote(name),
            go_quote(&uid),
            go_quote(claim_uid)
        ));
    }
    Ok(())
}

/// The node path of a `local` or `hostPath` volume.
pub fn volume_path(pv: &PersistentVolume) -> Result<ClaimedVolume, String> {
    let name = pv.metadata.name.clone().unwrap_or_default();
    let spec = pv.spec.as_ref();
    if spec.and_then(|s| s.volume_mode.as_deref()) == Some("Block") {
        return Err(format!(
            "volume {} has volumeMode Block, which this node does not support",
            go_quote(&name)
        ));
    }
    if let Some(local) = spec.and_then(|s| s.local.as_ref()) {
        return Ok(ClaimedVolume {
            volume_name: name,
            path: PathBuf::from(&local.path),
            supports_ownership: true,
            host_path_type: None,
        });
    }
    if let Some(hp) = spec.and_then(|s| s.host_path.as_ref()) {
        return Ok(ClaimedVolume {
            volume_name: name,
            path: PathBuf::from(&hp.path),
            supports_ownership: false,
            host_path_type: hp.type_.clone(),
        });
    }
    Err(format!(
        "failed to get Plugin from volumeSpec for volume {} err=no volume plugin matched",
        go_quote(&name)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixListener;

    #[test]
    fn a_platform_volume_one_node_may_use_waits_for_its_attachment_to_this_node() {
        let pv = |modes: &[&str], attached: Option<&str>| -> PersistentVolume {
            let mut ann =
                serde_json::json!({"pv.kubernetes.io/provisioned-by": PLATFORM_PROVISIONER});
            if let Some(n) = attached {
                ann[ATTACHED_NODE_ANNOTATION] = n.into();
            }
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": "pvc-1", "annotations": ann},
                "spec": {"accessModes": modes},
            }))
            .unwrap()
        };
        assert!(check_attached(&pv(&["ReadWriteOnce"], Some("a")), "a").is_ok());
        assert_eq!(
            check_attached(&pv(&["ReadWriteOnce"], Some("a")), "b").unwrap_err(),
            r#"volume "pvc-1" is attached to node "a", not to this node "b""#
        );
        assert!(check_attached(&pv(&["ReadWriteOnce"], None), "b").is_err());
        assert!(check_attached(&pv(&["ReadWriteMany"], None), "b").is_ok());
        let other: PersistentVolume = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "x"}, "spec": {"accessModes": ["ReadWriteOnce"]},
        }))
        .unwrap();
        assert!(check_attached(&other, "b").is_ok());
    }

    #[test]
    fn every_type_is_checked_with_upstreams_message() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let file = d.join("f");
        fs::write(&file, "x").unwrap();
        let sock = d.join("s.sock");
        let _l = UnixListener::bind(&sock).unwrap();

        assert!(check_type(&d.join("nowhere"), None).is_ok());
        assert!(check_type(d, Some("Directory")).is_ok());
        assert_eq!(
            check_type(&file, Some("Directory")).unwrap_err(),
            format!(
                "hostPath type check failed: {} is not a directory",
                file.display()
            )
        );
        assert_eq!(
            check_type(&d.join("missing"), Some("Directory")).unwrap_err(),
            format!(
                "hostPath type check failed: {} is not a directory",
                d.join("missing").display()
            )
        );
        assert!(check_type(&file, Some("File")).is_ok());
        assert_eq!(
            check_type(d, Some("File")).unwrap_err(),
            format!("hostPath type check failed: {} is not a file", d.display())
        );
        assert!(check_type(&sock, Some("Socket")).is_ok());
        assert_eq!(
            check_type(&file, Some("Socket")).unwrap_err(),
            format!(
                "hostPath type check failed: {} is not a socket file",
                file.display()
            )
        );
        assert!(check_type(Path::new("/dev/null"), Some("CharDevice")).is_ok());
        assert_eq!(
            check_type(&file, Some("CharDevice")).unwrap_err(),
            format!(
                "hostPath type check failed: {} is not a character device",
                file.display()
            )
        );
        assert_eq!(
            check_type(&file, Some("BlockDevice")).unwrap_err(),
            format!(
                "hostPath type check failed: {} is not a block device",
                file.display()
            )
        );
        assert_eq!(
            check_type(&file, Some("Weird")).unwrap_err(),
            "Weird is an invalid volume type"
        );
    }

    #[test]
    fn or_create_types_create_what_is_missing() {
        let dir = tempfile::tempdir().unwrap();
        let new_dir = dir.path().join("a/b/c");
        check_type(&new_dir, Some("DirectoryOrCreate")).unwrap();
        assert_eq!(
            fs::metadata(&new_dir).unwrap().permissions().mode() & 0o777,
            0o755
        );
        let new_file = dir.path().join("a/file");
        check_type(&new_file, Some("FileOrCreate")).unwrap();
        let m = fs::metadata(&new_file).unwrap();
        assert!(m.is_file());
        assert_eq!(m.permissions().mode() & 0o777, 0o644);
        // Existing ones must be of the type.
        assert!(check_type(&new_file, Some("DirectoryOrCreate")).is_err());
        assert!(check_type(&new_dir, Some("FileOrCreate")).is_err());
        assert_eq!(
            check_type(&dir.path().join("no/such/file"), Some("FileOrCreate")).unwrap_err(),
            format!(
                "open {}: no such file or directory",
                dir.path().join("no/such/file").display()
            )
        );
    }
}
