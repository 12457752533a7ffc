//! The atomic writer: how configMap, secret, downwardAPI and projected volumes change their
//! files so that a reader never sees a half-written update (upstream
//! `pkg/volume/util/atomic_writer.go`).
//!
//! The real files live in a hidden timestamped directory `..<UTC 2006_01_02_15_04_05>.<rand>`;
//! `..data` is a symlink to it and each user-visible top-level name is a symlink
//! `<name> → ..data/<name>`. An update writes a fresh timestamped directory, points a new
//! symlink `..data_tmp` at it and renames that over `..data` (rename(2) is atomic), removes
//! top-level names no longer in the payload, then the old directory. Names starting with
//! `..` are reserved. Consumers that watch files follow `..data`.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Component, Path, PathBuf};

const DATA_DIR: &str = "..data";
const NEW_DATA_DIR: &str = "..data_tmp";
const MAX_FILE_NAME_LENGTH: usize = 255;
const MAX_PATH_LENGTH: usize = 4096;

/// One file of a volume's payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileProjection {
    pub data: Vec<u8>,
    /// Permission bits (`defaultMode` or the item's `mode`).
    pub mode: u32,
    /// The owner to give the file (the pod's single non-root user, for token files).
    pub fs_user: Option<u32>,
}

impl FileProjection {
    pub fn new(data: impl Into<Vec<u8>>, mode: u32) -> Self {
        FileProjection {
            data: data.into(),
            mode,
            fs_user: None,
        }
    }
}

/// A hook run on a new timestamped directory before it becomes visible.
pub type SetPerms<'a> = &'a dyn Fn(&Path) -> io::Result<()>;

/// A volume's content: relative path → file.
pub type Payload = BTreeMap<String, FileProjection>;

/// Why a payload could not be written.
#[derive(Debug, thiserror::Error)]
pub enum AtomicError {
    /// A payload path is absolute, contains `..`, starts with `..` or is too long.
    #[error("invalid path: {0}")]
    InvalidPath(String),
    #[error("{what} {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

fn io_err<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> AtomicError + 'a {
    move |source| AtomicError::Io {
        what,
        path: path.to_path_buf(),
        source,
    }
}

/// Checks one payload path (upstream `validatePath`).
pub fn validate_path(p: &str) -> Result<(), AtomicError> {
    if p.is_empty() {
        return Err(AtomicError::InvalidPath(format!(
            "must not be empty: {p:?}"
        )));
    }
    if p.starts_with('/') {
        return Err(AtomicError::InvalidPath(format!(
            "must be relative path: {p}"
        )));
    }
    if p.len() > MAX_PATH_LENGTH {
        return Err(AtomicError::InvalidPath(format!(
            "must be less than or equal to {MAX_PATH_LENGTH} characters"
        )));
    }
    let items: Vec<&str> = p.split('/').collect();
    for item in &items {
        if *item == ".." {
            return Err(AtomicError::InvalidPath(format!(
                "must not contain '..': {p}"
            )));
        }
        if item.len() > MAX_FILE_NAME_LENGTH {
            return Err(AtomicError::InvalidPath(format!(
                "filenames must be less than or equal to {MAX_FILE_NAME_LENGTH} characters"
            )));
        }
    }
    if items[0].starts_with("..") && items[0].len() > 2 {
        return Err(AtomicError::InvalidPath(format!(
            "must not start with '..': {p}"
        )));
    }
    Ok(())
}

/// A relative path cleaned as Go's `filepath.Clean` does once `..` is excluded.
fn clean(p: &str) -> String {
    let parts: Vec<&str> = Path::new(p)
        .components()
        .filter_map(|c| match c {
            Component::Normal(s) => s.to_str(),
            _ => None,
        })
        .collect();
    parts.join("/")
}

/// Writes `payload` into `target` (which must exist). `set_perms` runs on the new content
/// before it becomes visible (fsGroup ownership). Returns whether anything changed: an
/// identical payload writes nothing.
pub fn write(
    target: &Path,
    payload: &Payload,
    set_perms: Option<SetPerms<'_>>,
) -> Result<bool, AtomicError> {
    let mut clean_payload: BTreeMap<String, &FileProjection> = BTreeMap::new();
    for (k, v) in payload {
        validate_path(k)?;
        clean_payload.insert(clean(k), v);
    }

    let data_dir = target.join(DATA_DIR);
    let old_ts = match fs::read_link(&data_dir) {
        Ok(p) => Some(p),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(io_err("reading link", &data_dir)(e)),
    };
    let old_ts_path = old_ts.as_ref().map(|p| target.join(p));

    let mut to_remove = BTreeSet::new();
    if let Some(old) = &old_ts_path {
        to_remove = paths_to_remove(&clean_payload, old)?;
        if !should_write(&clean_payload, old)? && to_remove.is_empty() {
            return Ok(false);
        }
    }

    let ts_dir = new_timestamp_dir(target)?;
    let ts_name = ts_dir.file_name().map(PathBuf::from).unwrap_or_default();
    let written = write_payload(&clean_payload, &ts_dir).and_then(|()| {
        if let Some(f) = set_perms {
            f(&ts_dir).map_err(io_err("setting permissions in", &ts_dir))?;
        }
        create_user_visible_files(target, &clean_payload)
    });
    if let Err(e) = written {
        let _ = fs::remove_dir_all(&ts_dir);
        return Err(e);
    }

    let new_data_dir = target.join(NEW_DATA_DIR);
    let _ = fs::remove_file(&new_data_dir);
    if let Err(e) = symlink(&ts_name, &new_data_dir) {
        let _ = fs::remove_dir_all(&ts_dir);
        return Err(io_err("creating symlink", &new_data_dir)(e));
    }
    if let Err(e) = fs::rename(&new_data_dir, &data_dir) {
        let _ = fs::remove_file(&new_data_dir);
        let _ = fs::remove_dir_all(&ts_dir);
        return Err(io_err("renaming symlink to", &data_dir)(e));
    }

    for p in to_remove.iter().filter(|p| !p.contains('/')) {
        let path = target.join(p);
        match fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_err("removing old user-visible path", &path)(e)),
        }
    }
    if let Some(old) = old_ts_path.filter(|old| *old != ts_dir) {
        fs::remove_dir_all(&old).map_err(io_err("removing old data directory", &old))?;
    }
    Ok(true)
}

/// Paths of the old version that the new payload no longer has (upstream `pathsToRemove`):
/// every file and directory under the old timestamped directory minus the new payload's
/// paths and their parents.
fn paths_to_remove(
    payload: &BTreeMap<String, &FileProjection>,
    old: &Path,
) -> Result<BTreeSet<String>, AtomicError> {
    let mut current = BTreeSet::new();
    walk(old, old, &mut current)?;
    let mut new_paths = BTreeSet::new();
    for file in payload.keys() {
        let mut p = file.as_str();
        loop {
            new_paths.insert(p.to_string());
            match p.rfind('/') {
                Some(i) => p = &p[..i],
                None => break,
            }
        }
    }
    Ok(current.difference(&new_paths).cloned().collect())
}

fn walk(root: &Path, dir: &Path, out: &mut BTreeSet<String>) -> Result<(), AtomicError> {
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io_err("reading", dir)(e)),
    };
    for entry in entries {
        let entry = entry.map_err(io_err("reading", dir))?;
        let path = entry.path();
        if let Ok(rel) = path.strip_prefix(root) {
            out.insert(rel.to_string_lossy().into_owned());
        }
        let ty = entry.file_type().map_err(io_err("reading", &path))?;
        if ty.is_dir() {
            walk(root, &path, out)?;
        }
    }
    Ok(())
}

/// Whether any file of the payload differs from the old version: missing or other content
/// (upstream compares content only; modes come from the pod spec, which does not change, and
/// fsGroup ownership adjusts them after writing).
fn should_write(
    payload: &BTreeMap<String, &FileProjection>,
    old: &Path,
) -> Result<bool, AtomicError> {
    for (p, f) in payload {
        let path = old.join(p);
        match fs::read(&path) {
            Ok(on_disk) if on_disk == f.data => {}
            Ok(_) => return Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(true),
            Err(e) => return Err(io_err("reading", &path)(e)),
        }
    }
    Ok(false)
}

/// `..<UTC 2006_01_02_15_04_05>.<random>`, mode 0755 whatever the umask.
fn new_timestamp_dir(target: &Path) -> Result<PathBuf, AtomicError> {
    let stamp = jiff::Timestamp::now().strftime("%Y_%m_%d_%H_%M_%S");
    for _ in 0..100 {
        let name = format!("..{stamp}.{}", rand::random::<u32>());
        let dir = target.join(name);
        match fs::create_dir(&dir) {
            Ok(()) => {
                fs::set_permissions(&dir, fs::Permissions::from_mode(0o755))
                    .map_err(io_err("setting mode of", &dir))?;
                return Ok(dir);
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(io_err("creating", &dir)(e)),
        }
    }
    Err(AtomicError::Io {
        what: "creating a timestamped directory in",
        path: target.to_path_buf(),
        source: io::Error::from(io::ErrorKind::AlreadyExists),
    })
}

fn write_payload(
    payload: &BTreeMap<String, &FileProjection>,
    dir: &Path,
) -> Result<(), AtomicError> {
    for (p, f) in payload {
        let full = dir.join(p);
        if let Some(parent) = full.parent() {
            create_dirs(dir, parent)?;
        }
        fs::write(&full, &f.data).map_err(io_err("writing", &full))?;
        // Explicitly, so that the umask does not matter.
        fs::set_permissions(&full, fs::Permissions::from_mode(f.mode & 0o7777))
            .map_err(io_err("setting mode of", &full))?;
        if let Some(uid) = f.fs_user {
            std::os::unix::fs::chown(&full, Some(uid), None).map_err(io_err("chowning", &full))?;
        }
    }
    Ok(())
}

/// Creates `dir` and its parents below `root` with mode 0755.
fn create_dirs(root: &Path, dir: &Path) -> Result<(), AtomicError> {
    if dir == root || dir.is_dir() {
        return Ok(());
    }
    if let Some(parent) = dir.parent() {
        create_dirs(root, parent)?;
    }
    match fs::create_dir(dir) {
        Ok(()) => fs::set_permissions(dir, fs::Permissions::from_mode(0o755))
            .map_err(io_err("setting mode of", dir)),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(io_err("creating", dir)(e)),
    }
}

/// The top-level symlinks `<name> → ..data/<name>` that do not exist yet.
fn create_user_visible_files(
    target: &Path,
    payload: &BTreeMap<String, &FileProjection>,
) -> Result<(), AtomicError> {
    let tops: BTreeSet<&str> = payload
        .keys()
        .map(|p| p.split('/').next().unwrap_or(p))
        .collect();
    for top in tops {
        let visible = target.join(top);
        match fs::symlink_metadata(&visible) {
            Ok(_) => continue,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_err("reading", &visible)(e)),
        }
        symlink(Path::new(DATA_DIR).join(top), &visible)
            .map_err(io_err("creating symlink", &visible))?;
    }
    Ok(())
}

#[cfg(test)]
#[path = "atomic_tests.rs"]
mod tests;
