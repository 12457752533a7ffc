//! `subPath` mounts that cannot escape their volume (upstream
//! `pkg/volume/util/subpath/subpath_linux.go`, the fix of CVE-2017-1002101).
//!
//! A container can put symlinks into a writable volume, so the path handed to the runtime must
//! not be one the container controls. The subpath is resolved (symlinks followed, as upstream),
//! must stay inside the volume, is opened component by component with `O_PATH|O_NOFOLLOW`, and
//! the opened file is bind-mounted at `pods/<uid>/volume-subpaths/<volume>/<container>/<index>`:
//! the runtime mounts that, whatever happens to the path afterwards. A missing subpath is
//! created as a directory with the volume root's mode. Pod teardown unmounts these binds.
//!
//! A subPath of a configMap or secret volume binds the file the `..data` link points at when
//! the container starts, so such mounts never see updates (as upstream).

use std::fs;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};

use rustix::fs::{Mode, OFlags};

use super::mount;

/// Why a subpath could not be prepared (logged; the user sees upstream's short message).
#[derive(Debug, thiserror::Error)]
pub enum SubpathError {
    #[error("subpath {path:?} not within volume path {volume:?}")]
    Escapes { path: PathBuf, volume: PathBuf },
    #[error("{what} {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

fn io_err<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> SubpathError + 'a {
    move |source| SubpathError::Io {
        what,
        path: path.to_path_buf(),
        source,
    }
}

/// Creates the missing directories of `sub` inside `volume` with mode `perm`, refusing any
/// existing component that resolves outside the volume (upstream `SafeMakeDir`).
pub fn safe_make_dir(volume: &Path, sub: &Path, perm: u32) -> Result<(), SubpathError> {
    let root = fs::canonicalize(volume).map_err(io_err("resolving", volume))?;
    let mut current = root.clone();
    for c in sub.components() {
        let Component::Normal(name) = c else { continue };
        let next = current.join(name);
        match fs::symlink_metadata(&next) {
            Ok(_) => {
                let resolved = fs::canonicalize(&next).map_err(io_err("resolving", &next))?;
                if !resolved.starts_with(&root) {
                    return Err(SubpathError::Escapes {
                        path: resolved,
                        volume: root,
                    });
                }
                current = resolved;
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                fs::create_dir(&next).map_err(io_err("creating", &next))?;
                fs::set_permissions(&next, fs::Permissions::from_mode(perm))
                    .map_err(io_err("setting mode of", &next))?;
                current = next;
            }
            Err(e) => return Err(io_err("reading", &next)(e)),
        }
    }
    Ok(())
}

/// Resolves `sub` inside `volume`, opens it without following symlinks, and bind-mounts it at
/// `target`. Returns `target`, the path to hand to the runtime.
pub fn bind_subpath(volume: &Path, sub: &Path, target: &Path) -> Result<PathBuf, SubpathError> {
    let root = fs::canonicalize(volume).map_err(io_err("resolving", volume))?;
    let joined = root.join(sub);
    let resolved = fs::canonicalize(&joined).map_err(io_err("resolving", &joined))?;
    if !resolved.starts_with(&root) {
        return Err(SubpathError::Escapes {
            path: resolved,
            volume: root,
        });
    }
    let fd = open_no_follow(&root, &resolved)?;
    let is_dir = fs::metadata(&resolved)
        .map_err(io_err("reading", &resolved))?
        .is_dir();

    if let Some(parent) = target.parent() {
        fs::create_dir_all(parent).map_err(io_err("creating", parent))?;
    }
    if mount::is_mounted(target).map_err(io_err("reading mounts for", target))? {
        mount::unmount(target).map_err(io_err("unmounting", target))?;
    }
    match (is_dir, fs::symlink_metadata(target)) {
        (_, Ok(m)) if m.is_dir() == is_dir => {}
        (_, Ok(_)) => {
            remove_any(target)?;
            create_target(target, is_dir)?;
        }
        (_, Err(_)) => create_target(target, is_dir)?,
    }
    let source = PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()));
    rustix::mount::mount_bind(&source, target)
        .map_err(|e| io_err("bind-mounting", target)(e.into()))?;
    Ok(target.to_path_buf())
}

/// Opens `path` (inside `root`) one component at a time with `O_NOFOLLOW`: a component
/// swapped for a symlink after resolution makes the open fail instead of escaping.
fn open_no_follow(root: &Path, path: &Path) -> Result<OwnedFd, SubpathError> {
    let flags = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mut fd = rustix::fs::open(root, flags | OFlags::DIRECTORY, Mode::empty())
        .map_err(|e| io_err("opening", root)(e.into()))?;
    let rel = path.strip_prefix(root).unwrap_or(Path::new(""));
    for c in rel.components() {
        let Component::Normal(name) = c else { continue };
        fd = rustix::fs::openat(fd.as_fd(), name, flags, Mode::empty())
            .map_err(|e| io_err("opening", path)(e.into()))?;
        let st = rustix::fs::fstat(&fd).map_err(|e| io_err("reading", path)(e.into()))?;
        if rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::Symlink {
            return Err(SubpathError::Escapes {
                path: path.to_path_buf(),
                volume: root.to_path_buf(),
            });
        }
    }
    Ok(fd)
}

fn create_target(target: &Path, is_dir: bool) -> Result<(), SubpathError> {
    if is_dir {
        fs::create_dir(target).map_err(io_err("creating", target))
    } else {
        fs::File::create(target)
            .map(drop)
            .map_err(io_err("creating", target))
    }
}

fn remove_any(p: &Path) -> Result<(), SubpathError> {
    let r = if p.is_dir() {
        fs::remove_dir(p)
    } else {
        fs::remove_file(p)
    };
    r.map_err(io_err("removing", p))
}
