//! `fsGroup`: volume files owned by the pod's group (upstream `SetVolumeOwnership` in
//! `pkg/volume/volume_linux.go`).
//!
//! Every file and directory of the volume gets the group; files gain `rw` for the group
//! (`r` for read-only volumes such as configMap and secret), directories also the setgid bit
//! and `x`, so that new files inherit the group. Symlinks only change group.
//! `fsGroupChangePolicy: OnRootMismatch` skips the walk when the volume's root already has
//! the group, the permissions and the setgid bit.

use std::fs;
use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

const RW_MASK: u32 = 0o660;
const RO_MASK: u32 = 0o440;
const EXEC_MASK: u32 = 0o110;
const SETGID: u32 = 0o2000;

/// Applies `fs_group` to everything under `dir` (`dir` included).
pub fn set_volume_ownership(
    dir: &Path,
    fs_group: u32,
    read_only: bool,
    on_root_mismatch: bool,
) -> io::Result<()> {
    if on_root_mismatch && !requires_permission_change(dir, fs_group, read_only) {
        return Ok(());
    }
    walk(dir, fs_group, read_only)
}

fn walk(path: &Path, gid: u32, read_only: bool) -> io::Result<()> {
    let meta = fs::symlink_metadata(path)?;
    change(path, &meta, gid, read_only)?;
    if meta.is_dir() {
        for entry in fs::read_dir(path)? {
            walk(&entry?.path(), gid, read_only)?;
        }
    }
    Ok(())
}

fn change(path: &Path, meta: &fs::Metadata, gid: u32, read_only: bool) -> io::Result<()> {
    std::os::unix::fs::lchown(path, None, Some(gid))?;
    if meta.file_type().is_symlink() {
        return Ok(());
    }
    let mut mask = if read_only { RO_MASK } else { RW_MASK };
    if meta.is_dir() {
        mask |= SETGID | EXEC_MASK;
    }
    let mode = meta.permissions().mode() & 0o7777;
    if mode | mask != mode {
        fs::set_permissions(path, fs::Permissions::from_mode(mode | mask))?;
    }
    Ok(())
}

/// Whether the root of the volume lacks the group, the permissions or the setgid bit
/// (upstream `requiresPermissionChange`).
fn requires_permission_change(dir: &Path, gid: u32, read_only: bool) -> bool {
    let Ok(meta) = fs::metadata(dir) else {
        return true;
    };
    if meta.gid() != gid || !meta.is_dir() {
        return true;
    }
    let want = (if read_only { RO_MASK } else { RW_MASK }) | EXEC_MASK;
    let perm = meta.permissions().mode();
    perm & want != want || perm & SETGID == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn mode(p: &Path) -> u32 {
        fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn files_and_directories_take_the_group_and_its_permissions() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("vol");
        fs::create_dir_all(root.join("sub")).unwrap();
        fs::set_permissions(&root, fs::Permissions::from_mode(0o755)).unwrap();
        fs::set_permissions(root.join("sub"), fs::Permissions::from_mode(0o700)).unwrap();
        fs::write(root.join("sub/f"), "x").unwrap();
        fs::set_permissions(root.join("sub/f"), fs::Permissions::from_mode(0o600)).unwrap();
        symlink("sub/f", root.join("link")).unwrap();

        set_volume_ownership(&root, 2345, false, false).unwrap();
        for p in [
            root.clone(),
            root.join("sub"),
            root.join("sub/f"),
            root.join("link"),
        ] {
            assert_eq!(
                fs::symlink_metadata(&p).unwrap().gid(),
                2345,
                "{}",
                p.display()
            );
        }
        assert_eq!(mode(&root), 0o2775);
        assert_eq!(mode(&root.join("sub")), 0o2770);
        assert_eq!(mode(&root.join("sub/f")), 0o660);
    }

    #[test]
    fn read_only_volumes_get_group_read_only() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("token");
        fs::write(&f, "t").unwrap();
        fs::set_permissions(&f, fs::Permissions::from_mode(0o600)).unwrap();
        set_volume_ownership(dir.path(), 77, true, false).unwrap();
        assert_eq!(mode(&f), 0o640);
    }

    #[test]
    fn on_root_mismatch_skips_a_volume_whose_root_already_matches() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("vol");
        fs::create_dir(&root).unwrap();
        set_volume_ownership(&root, 88, false, false).unwrap();
        fs::write(root.join("later"), "x").unwrap();
        fs::set_permissions(root.join("later"), fs::Permissions::from_mode(0o600)).unwrap();
        set_volume_ownership(&root, 88, false, true).unwrap();
        assert_eq!(mode(&root.join("later")), 0o600, "skipped");
        set_volume_ownership(&root, 89, false, true).unwrap();
        assert_eq!(mode(&root.join("later")), 0o660, "root mismatched: walked");
    }
}
