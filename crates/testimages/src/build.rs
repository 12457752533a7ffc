//! Building images: reproducible layers (fixed times and owners, entries in the order given)
//! and the archives that carry them — an OCI image layout tarball (what `skopeo` writes as
//! `oci-archive`) or a legacy `docker save` tarball.

use std::io::Write;
use std::path::Path;

use oci::layer::header;
use serde_json::{Value, json};
use sha2::Digest as _;

/// Errors building an image.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("writing {what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Other(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
    let what = what.into();
    move |source| Error::Io { what, source }
}

pub fn sha256_hex(b: &[u8]) -> String {
    let d = sha2::Sha256::digest(b);
    d.iter().map(|x| format!("{x:02x}")).collect()
}

/// A layer being assembled, as an uncompressed tar in memory.
pub struct Layer {
    tar: tar::Builder<Vec<u8>>,
}

impl Default for Layer {
    fn default() -> Self {
        Layer::new()
    }
}

impl Layer {
    pub fn new() -> Layer {
        Layer {
            tar: tar::Builder::new(Vec::new()),
        }
    }

    pub fn dir(mut self, path: &str, mode: u32) -> Result<Layer> {
        let mut h = header(tar::EntryType::Directory, mode, 0);
        self.tar
            .append_data(
                &mut h,
                format!("{}/", path.trim_matches('/')),
                std::io::empty(),
            )
            .map_err(io(format!("layer directory {path}")))?;
        Ok(self)
    }

    pub fn file(mut self, path: &str, mode: u32, content: &[u8]) -> Result<Layer> {
        let mut h = header(tar::EntryType::Regular, mode, content.len() as u64);
        self.tar
            .append_data(&mut h, path.trim_start_matches('/'), content)
            .map_err(io(format!("layer file {path}")))?;
        Ok(self)
    }

    pub fn symlink(mut self, path: &str, target: &str) -> Result<Layer> {
        let mut h = header(tar::EntryType::Symlink, 0o777, 0);
        self.tar
            .append_link(&mut h, path.trim_start_matches('/'), target)
            .map_err(io(format!("layer link {path}")))?;
        Ok(self)
    }

    /// The uncompressed tar.
    pub fn finish(self) -> Result<Vec<u8>> {
        self.tar.into_inner().map_err(io("a layer"))
    }
}

/// The runtime configuration of an image.
#[derive(Debug, Clone, Default)]
pub struct Config {
    pub entrypoint: Vec<String>,
    pub cmd: Vec<String>,
    pub env: Vec<String>,
    pub labels: Vec<(String, String)>,
    pub working_dir: Option<String>,
}

/// An image: layers (uncompressed tars), its configuration and the names it is recorded under.
pub struct Image {
    pub layers: Vec<Vec<u8>>,
    pub config: Config,
    /// Full references (`docker.io/library/busybox:1.35`).
    pub names: Vec<String>,
}

/// What an archive holds: the digest of its image manifest (OCI archives) and its names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    pub manifest_digest: String,
    pub config_digest: String,
}

fn gzip(b: &[u8]) -> Result<Vec<u8>> {
    // No name and no time in the header: the same input gives the same bytes.
    let mut z = flate2::GzBuilder::new()
        .mtime(0)
        .write(Vec::with_capacity(b.len() / 2), flate2::Compression::fast());
    z.write_all(b).map_err(io("a compressed layer"))?;
    z.finish().map_err(io("a compressed layer"))
}

fn add(tar: &mut tar::Builder<std::fs::File>, path: &str, content: &[u8]) -> Result<()> {
    let mut h = header(tar::EntryType::Regular, 0o644, content.len() as u64);
    tar.append_data(&mut h, path, content)
        .map_err(io(format!("archive entry {path}")))
}

impl Image {
    fn config_json(&self) -> Value {
        let diff_ids: Vec<String> = self
            .layers
            .iter()
            .map(|l| format!("sha256:{}", sha256_hex(l)))
            .collect();
        let mut c = json!({});
        if !self.config.entrypoint.is_empty() {
            c["Entrypoint"] = json!(self.config.entrypoint);
        }
        if !self.config.cmd.is_empty() {
            c["Cmd"] = json!(self.config.cmd);
        }
        if !self.config.env.is_empty() {
            c["Env"] = json!(self.config.env);
        }
        if !self.config.labels.is_empty() {
            c["Labels"] = Value::Object(
                self.config
                    .labels
                    .iter()
                    .map(|(k, v)| (k.clone(), json!(v)))
                    .collect(),
            );
        }
        if let Some(w) = &self.config.working_dir {
            c["WorkingDir"] = json!(w);
        }
        json!({
            "created": "1970-01-01T00:00:00Z",
            "architecture": "amd64",
            "os": "linux",
            "config": c,
            "rootfs": {"type": "layers", "diff_ids": diff_ids},
            "history": self.layers.iter().map(|_| json!({"created": "1970-01-01T00:00:00Z", "created_by": "testimages"})).collect::<Vec<_>>(),
        })
    }

    /// Writes an OCI image layout tarball (gzipped layers) to `path`, atomically.
    pub fn write_oci_archive(&self, path: &Path) -> Result<Written> {
        let config =
            serde_json::to_vec(&self.config_json()).map_err(|e| Error::Other(e.to_string()))?;
        let config_digest = sha256_hex(&config);
        let mut blobs: Vec<(String, Vec<u8>)> = Vec::new();
        let mut layer_descs = Vec::new();
        for l in &self.layers {
            let z = gzip(l)?;
            let d = sha256_hex(&z);
            layer_descs.push(json!({
                "mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                "digest": format!("sha256:{d}"),
                "size": z.len(),
            }));
            blobs.push((d, z));
        }
        let manifest = json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {
                "mediaType": "application/vnd.oci.image.config.v1+json",
                "digest": format!("sha256:{config_digest}"),
                "size": config.len(),
            },
            "layers": layer_descs,
        });
        let manifest = serde_json::to_vec(&manifest).map_err(|e| Error::Other(e.to_string()))?;
        let manifest_digest = sha256_hex(&manifest);
        let index = json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.index.v1+json",
            "manifests": self.names.iter().map(|n| {
                let tag = n.rsplit_once(':').map(|(_, t)| t).unwrap_or("latest");
                json!({
                    "mediaType": "application/vnd.oci.image.manifest.v1+json",
                    "digest": format!("sha256:{manifest_digest}"),
                    "size": manifest.len(),
                    "annotations": {
                        "io.containerd.image.name": n,
                        "org.opencontainers.image.ref.name": tag,
                    },
                    "platform": {"architecture": "amd64", "os": "linux"},
                })
            }).collect::<Vec<_>>(),
        });
        blobs.push((config_digest.clone(), config));
        blobs.push((manifest_digest.clone(), manifest));
        write_tar(path, |tar| {
            add(tar, "oci-layout", br#"{"imageLayoutVersion":"1.0.0"}"#)?;
            let index = serde_json::to_vec(&index).map_err(|e| Error::Other(e.to_string()))?;
            add(tar, "index.json", &index)?;
            for (d, b) in &blobs {
                add(tar, &format!("blobs/sha256/{d}"), b)?;
            }
            Ok(())
        })?;
        Ok(Written {
            manifest_digest: format!("sha256:{manifest_digest}"),
            config_digest: format!("sha256:{config_digest}"),
        })
    }

    /// Writes a legacy `docker save` tarball (uncompressed layers in `<id>/layer.tar`).
    pub fn write_docker_archive(&self, path: &Path) -> Result<Written> {
        let config =
            serde_json::to_vec(&self.config_json()).map_err(|e| Error::Other(e.to_string()))?;
        let config_digest = sha256_hex(&config);
        let layer_paths: Vec<String> = self
            .layers
            .iter()
            .map(|l| format!("{}/layer.tar", sha256_hex(l)))
            .collect();
        let tags: Vec<String> = self
            .names
            .iter()
            .map(|n| {
                n.strip_prefix("docker.io/library/")
                    .or_else(|| n.strip_prefix("docker.io/"))
                    .unwrap_or(n)
                    .to_string()
            })
            .collect();
        let manifest = json!([{
            "Config": format!("{config_digest}.json"),
            "RepoTags": tags,
            "Layers": layer_paths,
        }]);
        write_tar(path, |tar| {
            add(tar, &format!("{config_digest}.json"), &config)?;
            for (p, l) in layer_paths.iter().zip(&self.layers) {
                add(tar, p, l)?;
            }
            let m = serde_json::to_vec(&manifest).map_err(|e| Error::Other(e.to_string()))?;
            add(tar, "manifest.json", &m)
        })?;
        Ok(Written {
            manifest_digest: String::new(),
            config_digest: format!("sha256:{config_digest}"),
        })
    }
}

/// Writes a tarball through a temporary file renamed onto `path`.
fn write_tar(
    path: &Path,
    fill: impl FnOnce(&mut tar::Builder<std::fs::File>) -> Result<()>,
) -> Result<()> {
    let what = || path.display().to_string();
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(io(what()))?;
    }
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let file = std::fs::File::create(&tmp).map_err(io(what()))?;
    let mut tar = tar::Builder::new(file);
    let filled = fill(&mut tar);
    let finished = filled.and_then(|()| tar.into_inner().map_err(io(what())));
    match finished.and_then(|f| f.sync_all().map_err(io(what()))) {
        Ok(()) => std::fs::rename(&tmp, path).map_err(io(what())),
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err(e)
        }
    }
}
