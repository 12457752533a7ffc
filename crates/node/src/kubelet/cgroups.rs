//! Pod cgroups on the node. With the cgroupfs driver runc creates a pod's cgroup
//! (`<root>/kubepods/<qos>/pod<uid>`) in every hierarchy as containers start and removes only
//! each container's own; the kubelet removes the pod level once the pod is gone, as this
//! module does, in every v1 hierarchy and in the unified one.

use std::path::{Path, PathBuf};

/// The cgroup filesystem's mount point.
const CGROUP_FS: &str = "/sys/fs/cgroup";

fn hierarchies() -> Vec<PathBuf> {
    let base = Path::new(CGROUP_FS);
    // cgroup v2 alone: the root itself is the hierarchy.
    if base.join("cgroup.controllers").exists() {
        return vec![base.to_path_buf()];
    }
    std::fs::read_dir(base)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| p.is_dir())
                .collect()
        })
        .unwrap_or_default()
}

/// Removes a cgroup directory and the (empty) cgroups below it, deepest first.
fn remove_tree(dir: &Path) -> bool {
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                remove_tree(&e.path());
            }
        }
    }
    match std::fs::remove_dir(dir) {
        Ok(()) => true,
        Err(e) => e.kind() == std::io::ErrorKind::NotFound,
    }
}

/// Removes pod `uid`'s cgroups below `cgroup_root`, whatever its QoS class was; whether
/// none is left.
pub fn remove_pod(cgroup_root: &str, uid: &str) -> bool {
    let root = cgroup_root.trim_matches('/');
    let mut ok = true;
    for h in hierarchies() {
        for qos in ["", "burstable", "besteffort"] {
            let mut p = h.clone();
            if !root.is_empty() {
                p.push(root);
            }
            p.push("kubepods");
            if !qos.is_empty() {
                p.push(qos);
            }
            p.push(format!("pod{uid}"));
            if p.exists() {
                ok &= remove_tree(&p);
            }
        }
    }
    ok
}

/// The UIDs of pods with cgroups below `cgroup_root` (found after an agent restart).
pub fn pods_on_node(cgroup_root: &str) -> Vec<String> {
    let root = cgroup_root.trim_matches('/');
    let mut out = Vec::new();
    for h in hierarchies() {
        let mut base = h.clone();
        if !root.is_empty() {
            base.push(root);
        }
        base.push("kubepods");
        for dir in [
            base.clone(),
            base.join("burstable"),
            base.join("besteffort"),
        ] {
            for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                if let Some(uid) = e.file_name().to_str().and_then(|n| n.strip_prefix("pod")) {
                    out.push(uid.to_string());
                }
            }
        }
    }
    out.sort();
    out.dedup();
    out
}
