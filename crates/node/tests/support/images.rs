//! Test images built from Debian's `busybox-static`, as OCI archives that containerd's `ctr`
//! imports into CRI's namespace (CRI itself has no import; nothing here reaches a registry).
//!
//! One uncompressed layer holds `/bin/busybox`, a symlink per applet, `/etc/passwd` and
//! `/etc/group`; the pause image is the same layer with `sleep infinity` as its entrypoint
//! (containerd stops sandboxes with SIGKILL, so it needs no signal handling).

use std::path::Path;

use serde_json::json;
use sha2::{Digest, Sha256};

/// The busybox image tests run.
pub const BUSYBOX: &str = "docker.io/library/busybox:1.36";
/// The pause image the test containerd is configured with.
pub const PAUSE: &str = "registry.k8s.io/pause:3.9";

/// A minimal ustar writer: regular files, directories and symlinks.
struct Tar(Vec<u8>);

impl Tar {
    fn entry(&mut self, name: &str, mode: u32, kind: u8, link: &str, data: &[u8]) {
        let mut h = [0u8; 512];
        let put = |h: &mut [u8; 512], at: usize, len: usize, v: &[u8]| {
            h[at..at + v.len().min(len)].copy_from_slice(&v[..v.len().min(len)]);
        };
        let octal = |n: u64, width: usize| format!("{n:0w$o}\0", w = width - 1);
        put(&mut h, 0, 100, name.as_bytes());
        put(&mut h, 100, 8, octal(u64::from(mode), 8).as_bytes());
        put(&mut h, 108, 8, octal(0, 8).as_bytes());
        put(&mut h, 116, 8, octal(0, 8).as_bytes());
        put(&mut h, 124, 12, octal(data.len() as u64, 12).as_bytes());
        put(&mut h, 136, 12, octal(1_700_000_000, 12).as_bytes());
        h[148..156].copy_from_slice(b"        ");
        h[156] = kind;
        put(&mut h, 157, 100, link.as_bytes());
        put(&mut h, 257, 6, b"ustar\0");
        put(&mut h, 263, 2, b"00");
        let sum: u32 = h.iter().map(|b| u32::from(*b)).sum();
        put(&mut h, 148, 8, format!("{sum:06o}\0 ").as_bytes());
        self.0.extend_from_slice(&h);
        self.0.extend_from_slice(data);
        let pad = (512 - data.len() % 512) % 512;
        self.0.extend(std::iter::repeat_n(0u8, pad));
    }
    fn dir(&mut self, name: &str) {
        self.entry(&format!("{name}/"), 0o755, b'5', "", &[]);
    }
    fn file(&mut self, name: &str, mode: u32, data: &[u8]) {
        self.entry(name, mode, b'0', "", data);
    }
    fn symlink(&mut self, name: &str, target: &str) {
        self.entry(name, 0o777, b'2', target, &[]);
    }
    fn finish(mut self) -> Vec<u8> {
        self.0.extend(std::iter::repeat_n(0u8, 1024));
        self.0
    }
}

fn digest(b: &[u8]) -> String {
    format!(
        "sha256:{}",
        Sha256::digest(b)
            .iter()
            .map(|x| format!("{x:02x}"))
            .collect::<String>()
    )
}

/// The busybox root filesystem layer (an uncompressed tar).
pub fn busybox_layer() -> Vec<u8> {
    let bin =
        std::fs::read("/bin/busybox").expect("busybox-static is installed (scripts/ensure-deps)");
    let list = std::process::Command::new("/bin/busybox")
        .arg("--list")
        .output()
        .expect("busybox --list");
    let mut t = Tar(Vec::new());
    for d in ["bin", "etc", "tmp", "root", "var", "dev", "proc", "sys"] {
        t.dir(d);
    }
    t.file("bin/busybox", 0o755, &bin);
    for applet in String::from_utf8_lossy(&list.stdout).lines() {
        let applet = applet.trim();
        if !applet.is_empty() && applet != "busybox" {
            t.symlink(&format!("bin/{applet}"), "busybox");
        }
    }
    t.file(
        "etc/passwd",
        0o644,
        b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n",
    );
    t.file("etc/group", 0o644, b"root:x:0:\nnobody:x:65534:\n");
    t.finish()
}

/// An OCI image-layout archive of one image named `name` with `layer`, `entrypoint` and `cmd`.
pub fn oci_archive(name: &str, layer: &[u8], entrypoint: &[&str], cmd: &[&str]) -> Vec<u8> {
    let layer_digest = digest(layer);
    let config = serde_json::to_vec(&json!({
        "architecture": "amd64",
        "os": "linux",
        "config": {
            "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
            "Entrypoint": if entrypoint.is_empty() { serde_json::Value::Null } else { json!(entrypoint) },
            "Cmd": cmd,
        },
        "rootfs": {"type": "layers", "diff_ids": [layer_digest]},
    }))
    .expect("json");
    let manifest = serde_json::to_vec(&json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": digest(&config), "size": config.len()},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": layer_digest, "size": layer.len()}],
    }))
    .expect("json");
    let tag = name.rsplit_once(':').map_or("latest", |(_, t)| t);
    let index = serde_json::to_vec(&json!({
        "schemaVersion": 2,
        "manifests": [{
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "digest": digest(&manifest),
            "size": manifest.len(),
            "annotations": {
                "io.containerd.image.name": name,
                "org.opencontainers.image.ref.name": tag,
            },
        }],
    }))
    .expect("json");
    let mut t = Tar(Vec::new());
    t.file("oci-layout", 0o644, br#"{"imageLayoutVersion":"1.0.0"}"#);
    t.file("index.json", 0o644, &index);
    t.dir("blobs");
    t.dir("blobs/sha256");
    for blob in [&config, &manifest, &layer.to_vec()] {
        let d = digest(blob);
        t.file(
            &format!("blobs/sha256/{}", &d["sha256:".len()..]),
            0o644,
            blob,
        );
    }
    t.finish()
}

/// Writes the busybox and pause archives into `dir`; their paths.
pub fn write_test_images(dir: &Path) -> Vec<std::path::PathBuf> {
    std::fs::create_dir_all(dir).expect("image dir");
    let layer = busybox_layer();
    let images = [
        ("busybox.tar", oci_archive(BUSYBOX, &layer, &[], &["sh"])),
        (
            "pause.tar",
            oci_archive(PAUSE, &layer, &["/bin/sleep", "infinity"], &[]),
        ),
    ];
    images
        .into_iter()
        .map(|(file, bytes)| {
            let p = dir.join(file);
            std::fs::write(&p, bytes).expect("write archive");
            p
        })
        .collect()
}
