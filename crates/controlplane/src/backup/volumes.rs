//! The data of a cluster's volumes in its backups.
//!
//! A volume of a logical cluster lives on the platform when its PersistentVolume's `hostPath`
//! is a directory the platform keeps ([`crate::Config::volumes_dir`]): one the platform
//! provisioned for the cluster (a root-cluster PersistentVolume of the same name, labelled
//! [`cluster::VOLUME_OF_LABEL`] with the cluster, at the same path) or one a restore of the
//! cluster wrote (`<volumes dir>/restored/<cluster>/<volume>`). A tenant writes its own
//! PersistentVolumes, so a path is trusted only when it is one of these two: a backup never
//! reads another tenant's directory.
//!
//! In a backup, after the keys, each such volume is a `{"volume":{"name":…}}` line followed by
//! its entries, depth first in name order (`{"file":{"volume":…,"path":"a/b","type":…}}`): a
//! directory with its mode, a file in pieces of [`PIECE`] bytes (`offset`, base64 `data`), a
//! symbolic link with its target (never followed). Sockets, pipes and devices are not data
//! and are left out. Files are read after the keys, live, as a file-system backup of a running
//! workload reads them (Velero's): each file as it is when read.
//!
//! A restore writes each volume to `<volumes dir>/restored/<new cluster>/<volume>`, never
//! through a symbolic link, and once complete points the restored PersistentVolume there; the
//! directory goes with the cluster.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};

use apimachinery::cluster;
use apimachinery::status::ApiError;
use base64::Engine;
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::mpsc;

use crate::ControlPlane;

/// The bytes of a file one line carries (under 700 KiB in base64: a restore chunk of
/// [`super::CHUNK_BYTES`] plus one line stays below the API server's body limit).
pub const PIECE: usize = 512 * 1024;
/// Directories nested deeper than this are refused (a backup is bounded work).
const MAX_DEPTH: usize = 128;
/// The key of a cluster's PersistentVolumes below its prefix.
pub(crate) const PV_KEYS: &str = "core/persistentvolumes/";
/// Where restores write volumes, below the volumes directory.
const RESTORED: &str = "restored";

/// One line of a backup's volume part.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum Item {
    /// A volume begins: its PersistentVolume's name.
    Volume { name: String },
    /// An entry of the volume last begun.
    File(FileEntry),
}

/// A directory, a piece of a file, or a symbolic link of a volume.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct FileEntry {
    pub volume: String,
    /// Relative to the volume's directory, `/`-separated.
    pub path: String,
    #[serde(rename = "type")]
    pub kind: Kind,
    /// Permission bits (directories and a file's first piece).
    #[serde(default)]
    pub mode: u32,
    /// A file's piece: where it starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
    /// A file's piece: its bytes, base64.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<String>,
    /// A symbolic link's target, as it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Dir,
    File,
    Symlink,
}

/// The directory of `cluster`'s volume `name` if the platform keeps it: the `hostPath` of the
/// cluster's stored PersistentVolume `pv` when that path is trusted (see the module's docs).
pub(crate) fn trusted_directory(
    cp: &ControlPlane,
    cluster_name: &str,
    name: &str,
    pv: &[u8],
) -> Option<PathBuf> {
    let dir = cp.config.volumes_dir.as_ref()?;
    let pv: Value = serde_json::from_slice(pv).ok()?;
    let path = PathBuf::from(pv.pointer("/spec/hostPath/path")?.as_str()?);
    if path.components().any(|c| matches!(c, Component::ParentDir)) {
        return None;
    }
    if path == restored_dir(dir, cluster_name).join(name) {
        return Some(path);
    }
    let root = cp
        .store
        .shared_cache()
        .get("", "persistentvolumes", cluster::ROOT, "", name)?;
    let root = root.value();
    let ours = apimachinery::meta::label(&root, cluster::VOLUME_OF_LABEL) == Some(cluster_name);
    let same = root.pointer("/spec/hostPath/path").and_then(Value::as_str) == path.to_str();
    (ours && same && path.starts_with(dir)).then_some(path)
}

/// Where restores of `cluster` write its volumes.
fn restored_dir(volumes_dir: &Path, cluster_name: &str) -> PathBuf {
    volumes_dir.join(RESTORED).join(cluster_name)
}

/// Streams one volume (its line, then its entries) into `tx`; returns how many entries went.
pub(crate) async fn send_volume(
    tx: mpsc::Sender<Bytes>,
    name: String,
    dir: PathBuf,
) -> Result<u64, ApiError> {
    let what = name.clone();
    tokio::task::spawn_blocking(move || {
        let send = |item: &Item| -> Result<(), String> {
            let mut line = serde_json::to_vec(item).map_err(|e| e.to_string())?;
            line.push(b'\n');
            tx.blocking_send(Bytes::from(line))
                .map_err(|_| "the client went away".to_string())
        };
        send(&Item::Volume { name: name.clone() })?;
        let mut entries = 0;
        walk(&name, &dir, Path::new(""), 0, &send, &mut entries)?;
        Ok(entries)
    })
    .await
    .map_err(ApiError::internal)?
    .map_err(|e: String| ApiError::internal(format!("backing up volume {what}: {e}")))
}

fn walk(
    volume: &str,
    root: &Path,
    rel: &Path,
    depth: usize,
    send: &dyn Fn(&Item) -> Result<(), String>,
    entries: &mut u64,
) -> Result<(), String> {
    if depth > MAX_DEPTH {
        return Err(format!(
            "{} is nested deeper than {MAX_DEPTH} directories",
            rel.display()
        ));
    }
    let here = root.join(rel);
    let mut names: Vec<_> = std::fs::read_dir(&here)
        .map_err(|e| format!("reading {}: {e}", here.display()))?
        .map(|e| e.map(|e| e.file_name()))
        .collect::<Result<_, _>>()
        .map_err(|e| format!("reading {}: {e}", here.display()))?;
    names.sort();
    for n in names {
        let rel = rel.join(&n);
        let path = root.join(&rel);
        let text = rel
            .to_str()
            .ok_or_else(|| format!("{} is not a UTF-8 name", rel.display()))?
            .to_string();
        let meta = std::fs::symlink_metadata(&path)
            .map_err(|e| format!("reading {}: {e}", path.display()))?;
        let mode = meta.permissions().mode() & 0o7777;
        let entry = |kind| FileEntry {
            volume: volume.to_string(),
            path: text.clone(),
            kind,
            mode,
            offset: None,
            data: None,
            target: None,
        };
        let ft = meta.file_type();
        if ft.is_symlink() {
            let target = std::fs::read_link(&path)
                .map_err(|e| format!("reading {}: {e}", path.display()))?;
            let target = target
                .to_str()
                .ok_or_else(|| format!("the target of {text} is not UTF-8"))?
                .to_string();
            send(&Item::File(FileEntry {
                target: Some(target),
                ..entry(Kind::Symlink)
            }))?;
        } else if ft.is_dir() {
            send(&Item::File(entry(Kind::Dir)))?;
            walk(volume, root, &rel, depth + 1, send, entries)?;
        } else if ft.is_file() {
            let mut f = std::fs::File::open(&path)
                .map_err(|e| format!("opening {}: {e}", path.display()))?;
            let mut buf = vec![0u8; PIECE];
            let mut offset = 0u64;
            loop {
                let n = read_full(&mut f, &mut buf)
                    .map_err(|e| format!("reading {}: {e}", path.display()))?;
                if n > 0 || offset == 0 {
                    send(&Item::File(FileEntry {
                        offset: Some(offset),
                        data: Some(base64::engine::general_purpose::STANDARD.encode(&buf[..n])),
                        ..entry(Kind::File)
                    }))?;
                }
                offset += n as u64;
                if n < PIECE {
                    break;
                }
            }
        } else {
            continue;
        }
        *entries += 1;
    }
    Ok(())
}

/// Reads until `buf` is full or the file ends.
fn read_full(f: &mut std::fs::File, buf: &mut [u8]) -> std::io::Result<usize> {
    use std::io::Read;
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// The volumes directory, or the refusal of a restore that carries volume data here.
fn volumes_dir(cp: &ControlPlane) -> Result<&Path, ApiError> {
    cp.config.volumes_dir.as_deref().ok_or_else(|| {
        ApiError::bad_request(
            "the backup holds volume data, and this server keeps no volumes (no volumes directory)",
        )
    })
}

/// Forgets what an earlier restore under `name` left (nothing owns it: the cluster has no keys).
pub(crate) async fn clear(cp: &ControlPlane, name: &str) -> Result<(), ApiError> {
    let Some(dir) = cp.config.volumes_dir.as_deref() else {
        return Ok(());
    };
    let dir = restored_dir(dir, name);
    match tokio::fs::remove_dir_all(&dir).await {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(ApiError::internal(format!(
            "removing {}: {e}",
            dir.display()
        ))),
    }
}

/// Writes a restore chunk's volume lines for the cluster `name`.
pub(crate) async fn restore(
    cp: &ControlPlane,
    name: &str,
    items: Vec<Item>,
) -> Result<(), ApiError> {
    if items.is_empty() {
        return Ok(());
    }
    let base = restored_dir(volumes_dir(cp)?, name);
    tokio::task::spawn_blocking(move || {
        for item in &items {
            write_item(&base, item)?;
        }
        Ok::<_, String>(())
    })
    .await
    .map_err(ApiError::internal)?
    .map_err(|e| ApiError::bad_request(format!("restoring volume data: {e}")))
}

/// A volume's name as a single path component.
fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 253
        && name != "."
        && name != ".."
        && !name.contains('/')
        && !name.contains('\0');
    ok.then_some(())
        .ok_or_else(|| format!("invalid volume name {name:?}"))
}

/// A path below a volume: relative, only names.
fn check_path(path: &str) -> Result<PathBuf, String> {
    let p = PathBuf::from(path);
    let ok = !path.is_empty()
        && !path.contains('\0')
        && p.components().all(|c| matches!(c, Component::Normal(_)));
    ok.then_some(p)
        .ok_or_else(|| format!("invalid path {path:?}"))
}

fn write_item(base: &Path, item: &Item) -> Result<(), String> {
    let io = |what: &Path| {
        let what = what.display().to_string();
        move |e: std::io::Error| format!("{what}: {e}")
    };
    match item {
        Item::Volume { name } => {
            check_name(name)?;
            let dir = base.join(name);
            std::fs::create_dir_all(&dir).map_err(io(&dir))?;
            // Containers of any user write there, as in a provisioned volume.
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777))
                .map_err(io(&dir))?;
            Ok(())
        }
        Item::File(f) => {
            check_name(&f.volume)?;
            let volume = base.join(&f.volume);
            if !volume.is_dir() {
                return Err(format!("{}: an entry before its volume", f.path));
            }
            let rel = check_path(&f.path)?;
            // Never through a symbolic link: every directory on the way is a real one.
            let mut parent = volume.clone();
            if let Some(up) = rel.parent() {
                for c in up.components() {
                    parent.push(c);
                    let meta = std::fs::symlink_metadata(&parent).map_err(io(&parent))?;
                    if !meta.file_type().is_dir() {
                        return Err(format!(
                            "{}: {} is not a directory",
                            f.path,
                            parent.display()
                        ));
                    }
                }
            }
            let target = volume.join(&rel);
            let existing = std::fs::symlink_metadata(&target).ok();
            if existing
                .as_ref()
                .is_some_and(|m| m.file_type().is_symlink())
            {
                return Err(format!("{}: already a symbolic link", f.path));
            }
            let mode = std::fs::Permissions::from_mode(f.mode & 0o7777);
            match f.kind {
                Kind::Dir => {
                    if existing.is_none() {
                        std::fs::create_dir(&target).map_err(io(&target))?;
                    }
                    std::fs::set_permissions(&target, mode).map_err(io(&target))
                }
                Kind::File => {
                    let data = base64::engine::general_purpose::STANDARD
                        .decode(f.data.as_deref().unwrap_or_default())
                        .map_err(|e| format!("{}: {e}", f.path))?;
                    let offset = f.offset.unwrap_or(0);
                    let mut file = if offset == 0 {
                        std::fs::File::create(&target).map_err(io(&target))?
                    } else {
                        let len = existing.map(|m| m.len());
                        if len != Some(offset) {
                            return Err(format!(
                                "{}: the piece at {offset} follows {len:?} bytes",
                                f.path
                            ));
                        }
                        std::fs::OpenOptions::new()
                            .append(true)
                            .open(&target)
                            .map_err(io(&target))?
                    };
                    file.write_all(&data).map_err(io(&target))?;
                    if offset == 0 {
                        std::fs::set_permissions(&target, mode).map_err(io(&target))?;
                    }
                    Ok(())
                }
                Kind::Symlink => {
                    if existing.is_some() {
                        return Err(format!("{}: already exists", f.path));
                    }
                    let to = f.target.as_deref().unwrap_or_default();
                    if to.is_empty() || to.contains('\0') {
                        return Err(format!("{}: invalid link target", f.path));
                    }
                    std::os::unix::fs::symlink(to, &target).map_err(io(&target))
                }
            }
        }
    }
}

/// The volumes a restore of `name` wrote, by name.
pub(crate) async fn restored(cp: &ControlPlane, name: &str) -> Vec<(String, PathBuf)> {
    let Some(dir) = cp.config.volumes_dir.as_deref() else {
        return Vec::new();
    };
    let dir = restored_dir(dir, name);
    let mut out = Vec::new();
    if let Ok(mut rd) = tokio::fs::read_dir(&dir).await {
        while let Ok(Some(e)) = rd.next_entry().await {
            if let Some(n) = e.file_name().to_str() {
                out.push((n.to_string(), e.path()));
            }
        }
    }
    out.sort();
    out
}

/// `pv` (a stored PersistentVolume) pointed at `dir`.
pub(crate) fn repoint(pv: &[u8], dir: &Path) -> Result<Bytes, String> {
    let mut v: Value = serde_json::from_slice(pv).map_err(|e| e.to_string())?;
    let path = v
        .pointer_mut("/spec/hostPath/path")
        .ok_or("the volume has no hostPath")?;
    *path = Value::String(dir.to_string_lossy().into_owned());
    serde_json::to_vec(&v)
        .map(Bytes::from)
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str, kind: Kind) -> Item {
        Item::File(FileEntry {
            volume: "v".into(),
            path: path.into(),
            kind,
            mode: 0o644,
            offset: Some(0),
            data: Some(String::new()),
            target: Some("/etc".into()),
        })
    }

    #[test]
    fn a_volume_walked_and_written_back_is_the_same_tree_with_its_links_and_modes() {
        let src = tempfile::tempdir().unwrap();
        std::fs::create_dir(src.path().join("sub")).unwrap();
        std::fs::write(src.path().join("a.txt"), b"hello").unwrap();
        let big: Vec<u8> = (0..PIECE * 2 + 17).map(|i| (i % 251) as u8).collect();
        std::fs::write(src.path().join("sub/big"), &big).unwrap();
        std::fs::write(src.path().join("empty"), b"").unwrap();
        std::fs::set_permissions(
            src.path().join("a.txt"),
            std::fs::Permissions::from_mode(0o600),
        )
        .unwrap();
        std::os::unix::fs::symlink("a.txt", src.path().join("link")).unwrap();
        let lines = std::sync::Mutex::new(Vec::new());
        let send = |i: &Item| {
            lines.lock().unwrap().push(i.clone());
            Ok(())
        };
        let mut n = 0;
        walk("v", src.path(), Path::new(""), 0, &send, &mut n).unwrap();
        assert_eq!(n, 5);
        let lines = lines.into_inner().unwrap();
        // Three pieces of the big file, one line each for the others.
        assert_eq!(lines.len(), 7, "{lines:?}");

        let dst = tempfile::tempdir().unwrap();
        write_item(dst.path(), &Item::Volume { name: "v".into() }).unwrap();
        for l in &lines {
            // Through JSON, as a restore reads them.
            let back: Item = serde_json::from_slice(&serde_json::to_vec(l).unwrap()).unwrap();
            write_item(dst.path(), &back).unwrap();
        }
        let v = dst.path().join("v");
        assert_eq!(std::fs::read(v.join("a.txt")).unwrap(), b"hello");
        assert_eq!(std::fs::read(v.join("sub/big")).unwrap(), big);
        assert_eq!(std::fs::read(v.join("empty")).unwrap(), b"");
        assert_eq!(
            std::fs::read_link(v.join("link")).unwrap(),
            Path::new("a.txt")
        );
        let mode = std::fs::metadata(v.join("a.txt"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn a_restore_never_writes_outside_its_volume_nor_through_a_link() {
        let dst = tempfile::tempdir().unwrap();
        write_item(dst.path(), &Item::Volume { name: "v".into() }).unwrap();
        for bad in ["../x", "/etc/passwd", "a/../../x", ""] {
            assert!(
                write_item(dst.path(), &file(bad, Kind::File)).is_err(),
                "{bad}"
            );
        }
        assert!(write_item(dst.path(), &Item::Volume { name: "..".into() }).is_err());
        // A link to /etc, then a file "below" it: refused, /etc untouched.
        write_item(dst.path(), &file("l", Kind::Symlink)).unwrap();
        let err = write_item(dst.path(), &file("l/passwd-copy", Kind::File)).unwrap_err();
        assert!(err.contains("not a directory"), "{err}");
        assert!(!Path::new("/etc/passwd-copy").exists());
        // Nor is the link itself written through.
        assert!(write_item(dst.path(), &file("l", Kind::File)).is_err());
        // A file whose volume never began.
        let mut orphan = file("x", Kind::File);
        if let Item::File(f) = &mut orphan {
            f.volume = "w".into();
        }
        assert!(write_item(dst.path(), &orphan).is_err());
    }
}
