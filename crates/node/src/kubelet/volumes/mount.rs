//! The mounts volumes make on the node: tmpfs for memory-backed volumes, and finding and
//! removing every mount below a directory (teardown, and tests cleaning up after
//! themselves).
//!
//! mount(2) and umount(2) go through `rustix`, so this crate keeps `unsafe_code` forbidden.
//! What is mounted is read from `/proc/self/mountinfo`, the kernel's own table (a directory on
//! a tmpfs `/tmp` is not itself a tmpfs mount, so `statfs` would not do).

use std::io;
use std::path::{Path, PathBuf};

use rustix::mount::{MountFlags, UnmountFlags};

/// Mounts a tmpfs on `dir` with `size=<bytes>` when a size is given (upstream emptyDir
/// `setupTmpfs`: no mode option, so the root of the tmpfs is 1777).
pub fn mount_tmpfs(dir: &Path, size: Option<i64>) -> io::Result<()> {
    let data = size
        .filter(|s| *s > 0)
        .map(|s| std::ffi::CString::new(format!("size={s}")))
        .transpose()
        .map_err(io::Error::other)?;
    rustix::mount::mount("tmpfs", dir, "tmpfs", MountFlags::empty(), data.as_deref())
        .map_err(io::Error::from)
}

/// One line of `/proc/self/mountinfo`: the mount point and the file system type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountEntry {
    pub mount_point: PathBuf,
    pub fs_type: String,
}

/// Every mount of this process's mount namespace, in mount order.
pub fn mount_table() -> io::Result<Vec<MountEntry>> {
    let text = std::fs::read_to_string("/proc/self/mountinfo")?;
    Ok(text.lines().filter_map(parse_mountinfo_line).collect())
}

/// `36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue`: the
/// fifth field is the mount point (octal escapes for space, tab, newline and backslash), the
/// first after ` - ` the file system type.
fn parse_mountinfo_line(line: &str) -> Option<MountEntry> {
    let (left, right) = line.split_once(" - ")?;
    let mount_point = left.split(' ').nth(4)?;
    let fs_type = right.split(' ').next()?;
    Some(MountEntry {
        mount_point: PathBuf::from(unescape_octal(mount_point)),
        fs_type: fs_type.to_string(),
    })
}

fn unescape_octal(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let digit = |c: u8| u32::from(c - b'0');
            let v = digit(b[i + 1]) * 64 + digit(b[i + 2]) * 8 + digit(b[i + 3]);
            out.push(u8::try_from(v).unwrap_or(b'?'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Whether `dir` itself is a mount point of type `fs_type`.
pub fn is_mounted_as(dir: &Path, fs_type: &str) -> io::Result<bool> {
    let dir = std::fs::canonicalize(dir)?;
    Ok(mount_table()?
        .iter()
        .any(|m| m.mount_point == dir && m.fs_type == fs_type))
}

/// Whether `path` is a mount point (of any type).
pub fn is_mounted(path: &Path) -> io::Result<bool> {
    let path = match std::fs::canonicalize(path) {
        Ok(p) => p,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    Ok(mount_table()?.iter().any(|m| m.mount_point == path))
}

/// Every mount point at or below `root`, deepest (latest) first.
pub fn mounts_under(root: &Path) -> io::Result<Vec<PathBuf>> {
    let root = match std::fs::canonicalize(root) {
        Ok(r) => r,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut found: Vec<PathBuf> = mount_table()?
        .into_iter()
        .map(|m| m.mount_point)
        .filter(|p| p.starts_with(&root))
        .collect();
    found.reverse();
    Ok(found)
}

/// Unmounts `dir` (falling back to a lazy detach when it is busy).
pub fn unmount(dir: &Path) -> io::Result<()> {
    match rustix::mount::unmount(dir, UnmountFlags::empty()) {
        Ok(()) => Ok(()),
        Err(rustix::io::Errno::BUSY) => {
            rustix::mount::unmount(dir, UnmountFlags::DETACH).map_err(io::Error::from)
        }
        Err(e) => Err(e.into()),
    }
}

/// Unmounts everything mounted at or below `root` (stacked mounts included), deepest first.
pub fn unmount_all_under(root: &Path) -> io::Result<()> {
    // A mount point can carry several stacked mounts; go until none is left.
    for _ in 0..64 {
        let mounts = mounts_under(root)?;
        if mounts.is_empty() {
            return Ok(());
        }
        for m in mounts {
            match unmount(&m) {
                Ok(()) => {}
                // Already gone (a parent's lazy detach took it along).
                Err(e) if e.raw_os_error() == Some(rustix::io::Errno::INVAL.raw_os_error()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
    }
    Err(io::Error::other(format!(
        "mounts below {} remain after repeated unmounting",
        root.display()
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_lines_give_the_mount_point_and_type() {
        let e = parse_mountinfo_line(
            "36 35 98:0 /mnt1 /var/lib/a\\040b rw,noatime master:1 - tmpfs tmpfs rw,size=1024k",
        )
        .unwrap();
        assert_eq!(e.mount_point, PathBuf::from("/var/lib/a b"));
        assert_eq!(e.fs_type, "tmpfs");
        assert!(parse_mountinfo_line("garbage").is_none());
    }
}
