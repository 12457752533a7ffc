//! Test images, built by the tests themselves (no registry is reachable): OCI archives of
//!
//! - [`busybox`]: Debian's static busybox with a link for every applet (`sh`, `tar` for
//!   `kubectl cp`, `nc`, `sleep`, …), `/etc/passwd`, `/etc/group`, `/tmp`;
//! - [`mtest`]: busybox plus the project's test program at `/mtest` (entrypoint; default
//!   command `serve-http`), see the `mtest` crate;
//! - [`pause`]: the test program alone as `/pause`, the sandbox image containerd needs.
//!
//! Each is built once per test run: the archive is cached under the target directory by a
//! hash of what went into it, so every test (and every test binary) after the first reuses
//! it. The `mtest` binary is built static (`+crt-static`, non-PIE: `ldd` says "not a dynamic
//! executable") by a nested `cargo build` into its own target directory, or taken from
//! `$MTEST_BINARY`.

pub mod build;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

pub use build::{Config, Error, Image, Layer, Result};

/// The names the images are recorded under (and pushed under by `matryoshka image import`).
pub const BUSYBOX: &str = "docker.io/library/busybox:1.35";
pub const BUSYBOX_NAMES: &[&str] = &[
    "docker.io/library/busybox:1.35",
    "docker.io/library/busybox:1",
    "docker.io/library/busybox:latest",
];
pub const MTEST: &str = "docker.io/matryoshka/mtest:1";
pub const MTEST_NAMES: &[&str] = &[
    "docker.io/matryoshka/mtest:1",
    "docker.io/matryoshka/mtest:latest",
];
/// The sandbox image (`sandbox_image`), and containerd 1.6's default one.
pub const PAUSE: &str = "registry.k8s.io/pause:3.9";
pub const PAUSE_NAMES: &[&str] = &["registry.k8s.io/pause:3.9", "registry.k8s.io/pause:3.6"];

/// Where Debian's busybox-static is.
pub const BUSYBOX_BINARY: &str = "/bin/busybox";

/// Bumped when the images' layout changes, so cached archives are rebuilt.
const FORMAT: &str = "testimages-1";

const PATH_ENV: &str = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// A built image archive.
#[derive(Debug, Clone)]
pub struct ImageArchive {
    /// The OCI archive (an oci-layout tarball).
    pub path: PathBuf,
    /// The names recorded in it.
    pub names: Vec<String>,
    /// The digest of its image manifest.
    pub manifest_digest: String,
}

fn workspace_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The target directory (`$CARGO_TARGET_DIR`, else the workspace's `target`).
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_dir().join("target"))
}

/// Where archives are cached.
pub fn cache_dir() -> PathBuf {
    target_dir().join("testimages")
}

/// The static `mtest` binary.
pub fn mtest_binary() -> Result<&'static Path> {
    static BIN: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    BIN.get_or_init(|| build_mtest().map_err(|e| e.to_string()))
        .as_ref()
        .map(PathBuf::as_path)
        .map_err(|e| Error::Other(e.clone()))
}

fn build_mtest() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("MTEST_BINARY") {
        return Ok(PathBuf::from(p));
    }
    let target = "x86_64-unknown-linux-gnu";
    let dir = target_dir().join("mtest-static");
    let flags = [
        "-C",
        "target-feature=+crt-static",
        "-C",
        "relocation-model=static",
        "-C",
        "strip=symbols",
    ]
    .join("\u{1f}");
    let out = Command::new(env!("CARGO"))
        .current_dir(workspace_dir())
        .args([
            "build",
            "--quiet",
            "--release",
            "-p",
            "mtest",
            "--target",
            target,
        ])
        .arg("--target-dir")
        .arg(&dir)
        .env("CARGO_ENCODED_RUSTFLAGS", flags)
        .env_remove("RUSTFLAGS")
        .output()
        .map_err(build::io("running cargo build -p mtest"))?;
    if !out.status.success() {
        return Err(Error::Other(format!(
            "building the static mtest binary failed ({}):\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    Ok(dir.join(target).join("release/mtest"))
}

fn read(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(build::io(format!("reading {}", path.display())))
}

/// The busybox layer: the binary, its applet links and a minimal `/etc`.
pub fn busybox_layer() -> Result<Vec<u8>> {
    let bin = read(Path::new(BUSYBOX_BINARY))?;
    let list = Command::new(BUSYBOX_BINARY)
        .arg("--list-full")
        .output()
        .map_err(build::io("listing busybox's applets"))?;
    let mut applets: Vec<String> = String::from_utf8_lossy(&list.stdout)
        .lines()
        .map(|l| l.trim().trim_start_matches('/').to_string())
        .filter(|l| !l.is_empty() && l != "bin/busybox")
        .collect();
    applets.sort();
    applets.dedup();
    if !applets.iter().any(|a| a == "bin/sh") {
        return Err(Error::Other(format!("{BUSYBOX_BINARY} has no sh applet")));
    }
    let mut l = Layer::new();
    for d in [
        "bin", "sbin", "usr", "usr/bin", "usr/sbin", "etc", "var", "home", "proc", "sys", "dev",
    ] {
        l = l.dir(d, 0o755)?;
    }
    l = l
        .dir("tmp", 0o1777)?
        .dir("var/tmp", 0o1777)?
        .dir("root", 0o700)?;
    l = l.file("bin/busybox", 0o755, &bin)?;
    for a in &applets {
        l = l.symlink(a, "/bin/busybox")?;
    }
    l = l
        .file(
            "etc/passwd",
            0o644,
            b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n",
        )?
        .file("etc/group", 0o644, b"root:x:0:\nnobody:x:65534:\n")?;
    l.finish()
}

fn mtest_layer(at: &str) -> Result<Vec<u8>> {
    let bin = read(mtest_binary()?)?;
    Layer::new().file(at, 0o755, &bin)?.finish()
}

/// Builds (or finds in the cache) the archive of `image`, named `name` plus a hash.
fn cached(name: &str, image: impl FnOnce() -> Result<Image>) -> Result<ImageArchive> {
    let image = image()?;
    let mut key = FORMAT.as_bytes().to_vec();
    for l in &image.layers {
        key.extend_from_slice(build::sha256_hex(l).as_bytes());
    }
    key.extend_from_slice(format!("{:?}{:?}", image.config, image.names).as_bytes());
    let hash = &build::sha256_hex(&key)[..16];
    let path = cache_dir().join(format!("{name}-{hash}.tar"));
    let digest_path = path.with_extension("digest");
    if let (true, Ok(d)) = (path.exists(), std::fs::read_to_string(&digest_path)) {
        return Ok(ImageArchive {
            path,
            names: image.names,
            manifest_digest: d,
        });
    }
    let written = image.write_oci_archive(&path)?;
    std::fs::write(&digest_path, &written.manifest_digest)
        .map_err(build::io(digest_path.display().to_string()))?;
    Ok(ImageArchive {
        path,
        names: image.names,
        manifest_digest: written.manifest_digest,
    })
}

fn once(
    cell: &'static OnceLock<Result<ImageArchive, String>>,
    f: impl FnOnce() -> Result<ImageArchive>,
) -> Result<&'static ImageArchive> {
    cell.get_or_init(|| f().map_err(|e| e.to_string()))
        .as_ref()
        .map_err(|e| Error::Other(e.clone()))
}

fn names(n: &[&str]) -> Vec<String> {
    n.iter().map(|s| s.to_string()).collect()
}

/// The busybox image.
pub fn busybox_image() -> Result<Image> {
    Ok(Image {
        layers: vec![busybox_layer()?],
        config: Config {
            cmd: vec!["sh".into()],
            env: vec![PATH_ENV.into()],
            ..Config::default()
        },
        names: names(BUSYBOX_NAMES),
    })
}

/// The busybox image's archive.
pub fn busybox() -> Result<&'static ImageArchive> {
    static CELL: OnceLock<Result<ImageArchive, String>> = OnceLock::new();
    once(&CELL, || cached("busybox", busybox_image))
}

/// The mtest image: busybox plus `/mtest`.
pub fn mtest_image() -> Result<Image> {
    Ok(Image {
        layers: vec![busybox_layer()?, mtest_layer("mtest")?],
        config: Config {
            entrypoint: vec!["/mtest".into()],
            cmd: vec!["serve-http".into()],
            env: vec![PATH_ENV.into()],
            labels: vec![("org.opencontainers.image.title".into(), "mtest".into())],
            working_dir: Some("/".into()),
        },
        names: names(MTEST_NAMES),
    })
}

/// The mtest image's archive.
pub fn mtest() -> Result<&'static ImageArchive> {
    static CELL: OnceLock<Result<ImageArchive, String>> = OnceLock::new();
    once(&CELL, || cached("mtest", mtest_image))
}

/// The pause image: the test program alone, as `/pause`.
pub fn pause_image() -> Result<Image> {
    Ok(Image {
        layers: vec![mtest_layer("pause")?],
        config: Config {
            entrypoint: vec!["/pause".into()],
            ..Config::default()
        },
        names: names(PAUSE_NAMES),
    })
}

/// The pause image's archive.
pub fn pause() -> Result<&'static ImageArchive> {
    static CELL: OnceLock<Result<ImageArchive, String>> = OnceLock::new();
    once(&CELL, || cached("pause", pause_image))
}

/// Unpacks the layers of an OCI archive's (first) image into `dir`, in order: a root
/// filesystem to `chroot` into.
pub fn unpack_rootfs(archive: &Path, dir: &Path) -> Result<()> {
    let other = |e: String| Error::Other(format!("{}: {e}", archive.display()));
    let entry = |name: &str| -> Result<Vec<u8>> {
        let f = std::fs::File::open(archive).map_err(build::io(archive.display().to_string()))?;
        let mut ar = tar::Archive::new(f);
        for e in ar.entries().map_err(build::io("reading the archive"))? {
            let mut e = e.map_err(build::io("reading the archive"))?;
            if e.path()
                .map(|p| p.to_string_lossy() == name)
                .unwrap_or(false)
            {
                let mut v = Vec::new();
                std::io::Read::read_to_end(&mut e, &mut v).map_err(build::io(name.to_string()))?;
                return Ok(v);
            }
        }
        Err(other(format!("no {name}")))
    };
    let blob = |d: &str| entry(&format!("blobs/{}", d.replace(':', "/")));
    let json = |b: Vec<u8>| {
        serde_json::from_slice::<serde_json::Value>(&b).map_err(|e| other(e.to_string()))
    };
    let index = json(entry("index.json")?)?;
    let m = index["manifests"][0]["digest"]
        .as_str()
        .ok_or_else(|| other("no manifest".into()))?;
    let manifest = json(blob(m)?)?;
    for l in manifest["layers"].as_array().into_iter().flatten() {
        let d = l["digest"]
            .as_str()
            .ok_or_else(|| other("a layer without digest".into()))?;
        let z = blob(d)?;
        let mut t = tar::Archive::new(flate2::read::GzDecoder::new(z.as_slice()));
        t.set_preserve_permissions(true);
        t.unpack(dir)
            .map_err(build::io(format!("unpacking into {}", dir.display())))?;
    }
    Ok(())
}
