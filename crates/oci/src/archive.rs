//! Image archives to import: an OCI image layout in a tarball (`oci-archive`, what `skopeo`
//! and `ctr export` write) or a `docker save` tarball (legacy layout, or Docker 25's with an
//! OCI layout inside). [`Archive::open`] indexes the tarball's entries without unpacking it;
//! [`Archive::images`] says, for every image in it, which blobs and manifests to push in
//! which order and under which names.
//!
//! A `docker save` image becomes an OCI image manifest over its layers as they are
//! (uncompressed tars, whose digests are the config's `diff_ids`) and its config — what
//! containerd's own importer does, with no recompression.

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use bytes::Bytes;
use serde_json::{Value, json};

use crate::digest::{Algorithm, Digest, Hasher};
use crate::manifest::{self, OCI_CONFIG, OCI_LAYER, OCI_MANIFEST};
use crate::name::{ImageRef, RefError, valid_tag};

/// Errors reading an archive.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    #[error("reading the archive {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "the archive is neither an OCI layout (index.json) nor a docker save tarball (manifest.json)"
    )]
    UnknownFormat,
    #[error("the archive has no entry {0:?}")]
    Missing(String),
    #[error("the archive's {entry} is invalid: {why}")]
    Invalid { entry: String, why: String },
    #[error("the archive's {entry} names an invalid image reference: {source}")]
    Name {
        entry: String,
        #[source]
        source: RefError,
    },
    #[error("the archive's {entry} names no image; give the image a name (--name)")]
    Unnamed { entry: String },
    #[error("the archive holds {0} images; a name (--name) can only be given to one")]
    Ambiguous(usize),
    #[error("blob {path} of the archive has digest {actual}, its name says {expected}")]
    Corrupt {
        path: String,
        expected: String,
        actual: String,
    },
}

type Result<T, E = ArchiveError> = std::result::Result<T, E>;

/// Where an entry's content is in the (uncompressed) tarball.
#[derive(Debug, Clone)]
struct Entry {
    offset: u64,
    size: u64,
    /// A link's target as written in the archive, and whether it is a hard link (whose
    /// target is relative to the archive root; a symbolic link's is relative to its own
    /// directory).
    link: Option<(String, bool)>,
}

/// A blob to push: where it is in the archive.
#[derive(Debug, Clone)]
pub struct BlobEntry {
    pub digest: Digest,
    pub size: u64,
    /// The archive entry holding it.
    pub path: String,
}

/// A manifest to push.
#[derive(Debug, Clone)]
pub struct ManifestEntry {
    pub digest: Digest,
    pub media_type: String,
    pub bytes: Bytes,
}

/// One image of an archive: its names, then what to push, in order (blobs first, then the
/// manifests children first; the last manifest is the image's own).
#[derive(Debug, Clone)]
pub struct Image {
    pub names: Vec<ImageRef>,
    pub blobs: Vec<BlobEntry>,
    pub manifests: Vec<ManifestEntry>,
}

impl Image {
    /// The manifest the names point at.
    pub fn top(&self) -> Option<&ManifestEntry> {
        self.manifests.last()
    }
}

/// An indexed archive.
pub struct Archive {
    path: PathBuf,
    entries: HashMap<String, Entry>,
    /// A decompressed copy, when the archive was gzipped.
    _unpacked: Option<tempfile::TempPath>,
}

fn clean(p: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for c in p.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            c => parts.push(c),
        }
    }
    parts.join("/")
}

impl Archive {
    /// Indexes the tarball at `path` (gzipped or not).
    pub fn open(path: &Path) -> Result<Archive> {
        let err = |source| ArchiveError::Io {
            path: path.to_path_buf(),
            source,
        };
        let mut f = std::fs::File::open(path).map_err(err)?;
        let mut magic = [0u8; 2];
        let n = f.read(&mut magic).map_err(err)?;
        f.seek(SeekFrom::Start(0)).map_err(err)?;
        let (tar_path, unpacked) = if n == 2 && magic == [0x1f, 0x8b] {
            let mut tmp = tempfile::NamedTempFile::new().map_err(err)?;
            std::io::copy(&mut flate2::read::GzDecoder::new(f), &mut tmp).map_err(err)?;
            let p = tmp.into_temp_path();
            (p.to_path_buf(), Some(p))
        } else {
            (path.to_path_buf(), None)
        };
        let file = std::fs::File::open(&tar_path).map_err(err)?;
        let mut ar = tar::Archive::new(file);
        let mut entries = HashMap::new();
        for e in ar.entries().map_err(err)? {
            let e = e.map_err(err)?;
            let name = clean(&e.path().map_err(err)?.to_string_lossy());
            let kind = e.header().entry_type();
            let link = if kind.is_symlink() || kind.is_hard_link() {
                e.link_name()
                    .map_err(err)?
                    .map(|l| (l.to_string_lossy().into_owned(), kind.is_hard_link()))
            } else if kind.is_file() {
                None
            } else {
                continue;
            };
            entries.insert(
                name,
                Entry {
                    offset: e.raw_file_position(),
                    size: e.size(),
                    link,
                },
            );
        }
        Ok(Archive {
            path: tar_path,
            entries,
            _unpacked: unpacked,
        })
    }

    /// The entry `name` refers to, following links (relative to the linking entry for
    /// symbolic links, to the archive root for hard links).
    fn resolve(&self, name: &str) -> Result<(String, Entry)> {
        let mut name = clean(name);
        for _ in 0..16 {
            let e = self
                .entries
                .get(&name)
                .ok_or_else(|| ArchiveError::Missing(name.clone()))?;
            match &e.link {
                None => return Ok((name, e.clone())),
                Some((target, hard)) => {
                    name = if target.starts_with('/') || *hard {
                        clean(target)
                    } else {
                        let dir = name.rsplit_once('/').map_or("", |(d, _)| d);
                        clean(&format!("{dir}/{target}"))
                    };
                }
            }
        }
        Err(ArchiveError::Invalid {
            entry: name,
            why: "too many links".into(),
        })
    }

    /// Reads `len` bytes of entry `name` from `offset` within it.
    pub fn read_range(&self, name: &str, offset: u64, len: u64) -> Result<Vec<u8>> {
        let (_, e) = self.resolve(name)?;
        let err = |source| ArchiveError::Io {
            path: self.path.clone(),
            source,
        };
        let len = len.min(e.size.saturating_sub(offset));
        let mut f = std::fs::File::open(&self.path).map_err(err)?;
        f.seek(SeekFrom::Start(e.offset + offset)).map_err(err)?;
        let mut buf = vec![0u8; len as usize];
        f.read_exact(&mut buf).map_err(err)?;
        Ok(buf)
    }

    /// Reads a whole (small) entry.
    pub fn read(&self, name: &str) -> Result<Vec<u8>> {
        let (_, e) = self.resolve(name)?;
        self.read_range(name, 0, e.size)
    }

    /// The size of an entry.
    pub fn size(&self, name: &str) -> Result<u64> {
        Ok(self.resolve(name)?.1.size)
    }

    /// Hashes an entry.
    fn digest_of(&self, name: &str) -> Result<(Digest, u64)> {
        let (_, e) = self.resolve(name)?;
        let err = |source| ArchiveError::Io {
            path: self.path.clone(),
            source,
        };
        let mut f = std::fs::File::open(&self.path).map_err(err)?;
        f.seek(SeekFrom::Start(e.offset)).map_err(err)?;
        let mut r = f.take(e.size);
        let mut h = Hasher::new(Algorithm::Sha256);
        let mut buf = vec![0u8; 256 * 1024];
        loop {
            let n = r.read(&mut buf).map_err(err)?;
            if n == 0 {
                break;
            }
            h.update(&buf[..n]);
        }
        Ok((h.finish(), e.size))
    }

    fn json(&self, name: &str) -> Result<Value> {
        let bytes = self.read(name)?;
        serde_json::from_slice(&bytes).map_err(|e| ArchiveError::Invalid {
            entry: name.to_string(),
            why: e.to_string(),
        })
    }

    /// Every image in the archive with what to push. `name` renames the one image.
    pub fn images(&self, name: Option<&ImageRef>) -> Result<Vec<Image>> {
        let mut images = if self.entries.contains_key("index.json") {
            self.oci_images()?
        } else if self.entries.contains_key("manifest.json") {
            self.docker_images()?
        } else {
            return Err(ArchiveError::UnknownFormat);
        };
        if let Some(n) = name {
            if images.len() != 1 {
                return Err(ArchiveError::Ambiguous(images.len()));
            }
            images[0].names = vec![n.clone()];
        }
        for (i, img) in images.iter().enumerate() {
            if img.names.is_empty() {
                return Err(ArchiveError::Unnamed {
                    entry: format!(
                        "image {} ({})",
                        i + 1,
                        img.top().map(|m| m.digest.to_string()).unwrap_or_default()
                    ),
                });
            }
        }
        Ok(images)
    }

    fn blob_path(d: &Digest) -> String {
        format!("blobs/{}/{}", d.algorithm().as_str(), d.hex())
    }

    fn blob_entry(&self, d: &Digest, verify: bool) -> Result<BlobEntry> {
        let path = Self::blob_path(d);
        let size = self.size(&path)?;
        if verify {
            let (actual, _) = self.digest_of(&path)?;
            if &actual != d {
                return Err(ArchiveError::Corrupt {
                    path,
                    expected: d.to_string(),
                    actual: actual.to_string(),
                });
            }
        }
        Ok(BlobEntry {
            digest: d.clone(),
            size,
            path,
        })
    }

    /// The manifest `d` and everything under it, appended children first.
    fn collect_oci(
        &self,
        d: &Digest,
        media_type: &str,
        blobs: &mut Vec<BlobEntry>,
        manifests: &mut Vec<ManifestEntry>,
    ) -> Result<()> {
        let path = Self::blob_path(d);
        let bytes = self.read(&path)?;
        let actual = Digest::sha256(&bytes);
        if d.algorithm() == Algorithm::Sha256 && &actual != d {
            return Err(ArchiveError::Corrupt {
                path,
                expected: d.to_string(),
                actual: actual.to_string(),
            });
        }
        let parsed =
            manifest::parse(Some(media_type), &bytes).map_err(|e| ArchiveError::Invalid {
                entry: path.clone(),
                why: e.to_string(),
            })?;
        for b in &parsed.blobs {
            if !blobs.iter().any(|x| x.digest == b.digest) {
                blobs.push(self.blob_entry(&b.digest, true)?);
            }
        }
        for c in &parsed.manifests {
            if !manifests.iter().any(|m| m.digest == c.digest) {
                self.collect_oci(&c.digest, &c.media_type, blobs, manifests)?;
            }
        }
        manifests.push(ManifestEntry {
            digest: d.clone(),
            media_type: parsed.media_type,
            bytes: Bytes::from(bytes),
        });
        Ok(())
    }

    fn oci_images(&self) -> Result<Vec<Image>> {
        let index = self.json("index.json")?;
        let list = index
            .get("manifests")
            .and_then(Value::as_array)
            .ok_or_else(|| ArchiveError::Invalid {
                entry: "index.json".into(),
                why: "no manifests".into(),
            })?;
        // Descriptors of the same manifest are one image with several names.
        let mut images: Vec<Image> = Vec::new();
        for desc in list {
            let invalid = |why: &str| ArchiveError::Invalid {
                entry: "index.json".into(),
                why: why.into(),
            };
            let digest = desc
                .get("digest")
                .and_then(Value::as_str)
                .ok_or_else(|| invalid("a descriptor without a digest"))?;
            let digest = Digest::parse(digest).map_err(|e| invalid(&e.to_string()))?;
            let media_type = desc
                .get("mediaType")
                .and_then(Value::as_str)
                .unwrap_or(OCI_MANIFEST)
                .to_string();
            let annotations = desc.get("annotations");
            let ann = |k: &str| {
                annotations
                    .and_then(|a| a.get(k))
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty())
            };
            let name = match ann("io.containerd.image.name") {
                Some(full) => Some(full.to_string()),
                // A bare tag names no repository.
                None => ann("org.opencontainers.image.ref.name")
                    .filter(|r| !valid_tag(r))
                    .map(String::from),
            };
            let name = name
                .map(|n| {
                    ImageRef::parse_normalized(&n).map_err(|source| ArchiveError::Name {
                        entry: "index.json".into(),
                        source,
                    })
                })
                .transpose()?;
            if let Some(img) = images
                .iter_mut()
                .find(|i| i.top().is_some_and(|m| m.digest == digest))
            {
                img.names.extend(name);
                continue;
            }
            let mut blobs = Vec::new();
            let mut manifests = Vec::new();
            self.collect_oci(&digest, &media_type, &mut blobs, &mut manifests)?;
            images.push(Image {
                names: name.into_iter().collect(),
                blobs,
                manifests,
            });
        }
        Ok(images)
    }

    fn docker_images(&self) -> Result<Vec<Image>> {
        let list = self.json("manifest.json")?;
        let list = list.as_array().ok_or_else(|| ArchiveError::Invalid {
            entry: "manifest.json".into(),
            why: "not a list".into(),
        })?;
        let mut images = Vec::new();
        for item in list {
            let invalid = |why: &str| ArchiveError::Invalid {
                entry: "manifest.json".into(),
                why: why.into(),
            };
            let config_path = item
                .get("Config")
                .and_then(Value::as_str)
                .ok_or_else(|| invalid("an image without Config"))?;
            let (config_digest, config_size) = self.digest_of(config_path)?;
            let mut blobs = vec![BlobEntry {
                digest: config_digest.clone(),
                size: config_size,
                path: self.resolve(config_path)?.0,
            }];
            let mut layers = Vec::new();
            for l in item
                .get("Layers")
                .and_then(Value::as_array)
                .ok_or_else(|| invalid("an image without Layers"))?
            {
                let p = l
                    .as_str()
                    .ok_or_else(|| invalid("a layer that is not a path"))?;
                let (d, size) = self.digest_of(p)?;
                layers.push(json!({"mediaType": OCI_LAYER, "digest": d.to_string(), "size": size}));
                if !blobs.iter().any(|b| b.digest == d) {
                    blobs.push(BlobEntry {
                        digest: d,
                        size,
                        path: self.resolve(p)?.0,
                    });
                }
            }
            let manifest = json!({
                "schemaVersion": 2,
                "mediaType": OCI_MANIFEST,
                "config": {"mediaType": OCI_CONFIG, "digest": config_digest.to_string(), "size": config_size},
                "layers": layers,
            });
            let bytes = serde_json::to_vec(&manifest).map_err(|e| invalid(&e.to_string()))?;
            let mut names = Vec::new();
            for t in item
                .get("RepoTags")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
            {
                names.push(
                    ImageRef::parse_normalized(t).map_err(|source| ArchiveError::Name {
                        entry: "manifest.json".into(),
                        source,
                    })?,
                );
            }
            images.push(Image {
                names,
                blobs,
                manifests: vec![ManifestEntry {
                    digest: Digest::sha256(&bytes),
                    media_type: OCI_MANIFEST.into(),
                    bytes: Bytes::from(bytes),
                }],
            });
        }
        Ok(images)
    }
}
