//! The ingress controller's image, made from this very binary: a layer holding it as
//! `/matryoshka` with the shared libraries it loads (as `ldd` lists them), an entrypoint of
//! `/matryoshka`, pushed into the platform's registry under
//! `docker.io/matryoshka/ingress-controller:<version>-<layer digest>` — so every node pulls
//! the controller of the platform that runs it, and a rebuilt binary is a new tag. Made on
//! first use (a tenant cluster enabling `addons.ingressNginx`), then remembered.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, bail};
use bytes::Bytes;
use oci::digest::{Algorithm, Hasher};
use oci::layer::header;
use oci::name::Reference;
use serde_json::json;

pub const REPOSITORY: &str = "docker.io/matryoshka/ingress-controller";
const LAYER_MEDIA_TYPE: &str = "application/vnd.oci.image.layer.v1.tar";
const MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
const CONFIG_MEDIA_TYPE: &str = "application/vnd.oci.image.config.v1+json";
const CHUNK: usize = 4 << 20;

/// The image source the platform asks when it installs the addon.
pub fn source(registry: Arc<oci::Registry>, scratch: PathBuf) -> platform::addons::ImageSource {
    let made: Arc<tokio::sync::OnceCell<String>> = Arc::default();
    platform::addons::ImageSource::new(move || {
        let registry = registry.clone();
        let scratch = scratch.clone();
        let made = made.clone();
        Box::pin(async move {
            made.get_or_try_init(|| push(&registry, &scratch))
                .await
                .cloned()
                .map_err(|e| format!("{e:#}"))
        })
    })
}

/// The shared libraries `exe` loads, with the dynamic loader.
fn libraries(exe: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let out = std::process::Command::new("ldd")
        .arg(exe)
        .output()
        .context("running ldd")?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        // A static binary: ldd says so and fails.
        if text.contains("not a dynamic executable")
            || String::from_utf8_lossy(&out.stderr).contains("not a dynamic executable")
        {
            return Ok(Vec::new());
        }
        bail!(
            "ldd {}: {}",
            exe.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(parse_ldd(&text))
}

fn parse_ldd(text: &str) -> Vec<PathBuf> {
    let mut libs = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        let path = match line.split_once("=>") {
            Some((_, right)) => right.split_whitespace().next(),
            None => line.split_whitespace().next(),
        };
        if let Some(p) = path.filter(|p| p.starts_with('/')) {
            libs.push(PathBuf::from(p));
        }
    }
    libs
}

struct Hashing<W> {
    inner: W,
    hasher: Hasher,
    size: u64,
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.size += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Writes the layer to `path`; answers its digest and size.
fn build_layer(exe: &Path, path: &Path) -> anyhow::Result<(oci::Digest, u64)> {
    let libs = libraries(exe)?;
    let file =
        std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut tar = tar::Builder::new(Hashing {
        inner: std::io::BufWriter::new(file),
        hasher: Hasher::new(Algorithm::Sha256),
        size: 0,
    });
    let mut dirs = std::collections::BTreeSet::new();
    dirs.insert(PathBuf::from("tmp"));
    for l in &libs {
        let mut p = l.parent();
        while let Some(d) = p.filter(|d| *d != Path::new("/")) {
            dirs.insert(d.strip_prefix("/").unwrap_or(d).to_path_buf());
            p = d.parent();
        }
    }
    for d in &dirs {
        let mut h = header(
            tar::EntryType::Directory,
            if d == Path::new("tmp") { 0o1777 } else { 0o755 },
            0,
        );
        tar.append_data(&mut h, format!("{}/", d.display()), std::io::empty())?;
    }
    let mut add = |from: &Path, to: &str| -> anyhow::Result<()> {
        let mut f =
            std::fs::File::open(from).with_context(|| format!("reading {}", from.display()))?;
        let size = f.metadata()?.len();
        let mut h = header(tar::EntryType::Regular, 0o755, size);
        tar.append_data(&mut h, to, &mut f)?;
        Ok(())
    };
    add(exe, "matryoshka")?;
    for l in &libs {
        let to = l.strip_prefix("/").unwrap_or(l).display().to_string();
        add(l, &to)?;
    }
    let mut w = tar.into_inner()?;
    w.flush()?;
    Ok((w.hasher.finish(), w.size))
}

async fn put_file(
    registry: &oci::Registry,
    repo: &str,
    digest: &oci::Digest,
    path: &Path,
) -> anyhow::Result<()> {
    use tokio::io::AsyncReadExt;
    let file = tokio::fs::File::open(path).await?;
    let body = futures::stream::unfold(file, |mut f| async move {
        let mut buf = vec![0u8; CHUNK];
        match f.read(&mut buf).await {
            Ok(0) => None,
            Ok(n) => {
                buf.truncate(n);
                Some((Ok(Bytes::from(buf)), f))
            }
            Err(e) => Some((Err(e), f)),
        }
    });
    registry
        .store
        .put_blob(repo, digest, Box::pin(body))
        .await
        .map_err(|e| anyhow::anyhow!("storing the layer: {e}"))?;
    Ok(())
}

/// Makes the image and pushes it; answers its reference.
pub async fn push(registry: &oci::Registry, scratch: &Path) -> anyhow::Result<String> {
    let exe = std::env::current_exe().context("finding this binary")?;
    tokio::fs::create_dir_all(scratch).await?;
    let layer_path = scratch.join(format!("ingress-layer-{}.tar", std::process::id()));
    let (digest, size) = {
        let (exe, p) = (exe.clone(), layer_path.clone());
        tokio::task::spawn_blocking(move || build_layer(&exe, &p)).await??
    };
    let tag = format!("{}-{}", env!("CARGO_PKG_VERSION"), &digest.hex()[..12]);
    let image = format!("{REPOSITORY}:{tag}");
    let repo = oci::ImageRef::parse_normalized(&image)
        .map_err(|e| anyhow::anyhow!("{e}"))?
        .repository();
    let stored = registry.store.blob_size(&repo, &digest).await.is_ok();
    let result = if stored {
        Ok(())
    } else {
        put_file(registry, &repo, &digest, &layer_path).await
    };
    let _ = tokio::fs::remove_file(&layer_path).await;
    result?;
    let config = serde_json::to_vec(&json!({
        "architecture": "amd64",
        "os": "linux",
        "config": {
            "Entrypoint": ["/matryoshka"],
            "Cmd": ["ingress-controller"],
            "Env": ["PATH=/"],
            "Labels": {"org.opencontainers.image.title": "matryoshka ingress controller"},
        },
        "rootfs": {"type": "layers", "diff_ids": [digest.to_string()]},
    }))?;
    let config_digest = oci::Digest::sha256(&config);
    let config_len = config.len();
    registry
        .store
        .put_blob(
            &repo,
            &config_digest,
            Box::pin(futures::stream::iter([Ok(Bytes::from(config))])),
        )
        .await
        .map_err(|e| anyhow::anyhow!("storing the image config: {e}"))?;
    let manifest = serde_json::to_vec(&json!({
        "schemaVersion": 2,
        "mediaType": MANIFEST_MEDIA_TYPE,
        "config": {"mediaType": CONFIG_MEDIA_TYPE, "digest": config_digest.to_string(), "size": config_len},
        "layers": [{"mediaType": LAYER_MEDIA_TYPE, "digest": digest.to_string(), "size": size}],
    }))?;
    registry
        .store
        .put_manifest(
            &repo,
            &Reference::Tag(tag),
            Some(MANIFEST_MEDIA_TYPE),
            &manifest,
        )
        .await
        .map_err(|e| anyhow::anyhow!("storing the manifest: {e}"))?;
    tracing::info!(%image, bytes = size, "pushed the ingress controller's image");
    Ok(image)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ldd_output_gives_every_library_and_the_loader() {
        let text = "\tlinux-vdso.so.1 (0x00007ffd)\n\tlibgcc_s.so.1 => /lib/x86_64-linux-gnu/libgcc_s.so.1 (0x00007f)\n\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f)\n\t/lib64/ld-linux-x86-64.so.2 (0x00007f)\n";
        assert_eq!(
            parse_ldd(text),
            vec![
                PathBuf::from("/lib/x86_64-linux-gnu/libgcc_s.so.1"),
                PathBuf::from("/lib/x86_64-linux-gnu/libc.so.6"),
                PathBuf::from("/lib64/ld-linux-x86-64.so.2"),
            ]
        );
    }
}
