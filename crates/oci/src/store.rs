//! The content store: every blob once, by digest, under a directory; repositories link to the
//! blobs they hold, and keep their manifests' revisions and tags.
//!
//! ```text
//! <root>/blobs/sha256/<hex>                                 content (layers, configs, manifests)
//! <root>/repositories/<name>/_layers/sha256/<hex>           the repository holds this blob
//! <root>/repositories/<name>/_manifests/revisions/sha256/<hex>   a manifest (file: its media type)
//! <root>/repositories/<name>/_manifests/tags/<tag>          a tag (file: the manifest digest)
//! <root>/uploads/<uuid>/{data,repository}                   uploads in progress
//! <root>/tmp/                                               files being written
//! ```
//!
//! Content is hashed as it is written and checked against the digest the client names before
//! it becomes visible; every file appears by an atomic rename of a fully written, synced
//! temporary file. Concurrent pushes are safe without locks across requests: two uploads of
//! the same blob each write their own file and rename onto the same (identical) target, two
//! pushes of a tag rename onto it in turn (the last one wins). Chunks of one upload are
//! serialised by a per-upload lock. No garbage collection yet: deleting a manifest or a blob
//! unlinks it from its repository, the content stays.

use std::collections::HashMap;
use std::io::SeekFrom;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use futures::{Stream, StreamExt};
use tokio::fs;
use tokio::io::{AsyncReadExt, AsyncSeekExt, AsyncWriteExt};

use crate::digest::{Algorithm, Digest, Hasher};
use crate::error::{Error, ErrorCode, Result};
use crate::manifest::{self, Parsed};
use crate::name::Reference;

/// Uploads untouched this long are removed when the store opens.
pub const STALE_UPLOAD: Duration = Duration::from_secs(24 * 3600);

/// An upload in progress: its repository, how much it holds, and the running sha256 of that.
struct Upload {
    repository: String,
    size: u64,
    hasher: Hasher,
}

/// Where an upload stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UploadStatus {
    pub id: String,
    /// Bytes received so far.
    pub size: u64,
}

/// An open blob to stream out.
pub struct Blob {
    pub file: fs::File,
    pub size: u64,
}

/// A stored manifest.
#[derive(Debug, Clone)]
pub struct StoredManifest {
    pub digest: Digest,
    pub media_type: String,
    pub bytes: Bytes,
}

/// The content store under one directory.
pub struct Store {
    root: PathBuf,
    uploads: Mutex<HashMap<String, Arc<tokio::sync::Mutex<Option<Upload>>>>>,
}

fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
    Error::io(context)
}

fn not_found(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::NotFound
}

/// Appends `body` to `file`, feeding `hasher`; returns the bytes written.
async fn append<S>(file: &mut fs::File, hasher: &mut Hasher, mut body: S) -> Result<u64>
where
    S: Stream<Item = std::io::Result<Bytes>> + Unpin,
{
    let mut written = 0u64;
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|e| {
            Error::new(
                ErrorCode::BlobUploadInvalid,
                format!("reading the request body failed: {e}"),
            )
        })?;
        file.write_all(&chunk)
            .await
            .map_err(io("writing an upload"))?;
        hasher.update(&chunk);
        written += chunk.len() as u64;
    }
    file.flush().await.map_err(io("writing an upload"))?;
    Ok(written)
}

/// Hashes a file from the start.
async fn hash_file(path: &Path, algorithm: Algorithm) -> Result<(Hasher, u64)> {
    let mut f = fs::File::open(path)
        .await
        .map_err(io("reading an upload"))?;
    let mut h = Hasher::new(algorithm);
    let mut buf = vec![0u8; 256 * 1024];
    let mut n = 0u64;
    loop {
        let r = f.read(&mut buf).await.map_err(io("reading an upload"))?;
        if r == 0 {
            return Ok((h, n));
        }
        h.update(&buf[..r]);
        n += r as u64;
    }
}

impl Store {
    /// Opens (creating) the store under `root`; leftovers of interrupted writes are removed,
    /// and so are uploads untouched for a day.
    pub async fn open(root: impl Into<PathBuf>) -> Result<Store> {
        let root = root.into();
        for d in ["blobs", "repositories", "uploads", "tmp"] {
            fs::create_dir_all(root.join(d))
                .await
                .map_err(io(format!("creating {}", root.join(d).display())))?;
        }
        let _ = fs::remove_dir_all(root.join("tmp")).await;
        fs::create_dir_all(root.join("tmp"))
            .await
            .map_err(io("creating the temporary directory"))?;
        let mut uploads = fs::read_dir(root.join("uploads"))
            .await
            .map_err(io("listing uploads"))?;
        while let Ok(Some(e)) = uploads.next_entry().await {
            let old = e
                .metadata()
                .await
                .ok()
                .and_then(|m| m.modified().ok())
                .and_then(|t| SystemTime::now().duration_since(t).ok())
                .is_some_and(|age| age > STALE_UPLOAD);
            if old {
                let _ = fs::remove_dir_all(e.path()).await;
            }
        }
        Ok(Store {
            root,
            uploads: Mutex::new(HashMap::new()),
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    fn blob_path(&self, d: &Digest) -> PathBuf {
        self.root
            .join("blobs")
            .join(d.algorithm().as_str())
            .join(d.hex())
    }

    fn repo_dir(&self, repo: &str) -> PathBuf {
        self.root.join("repositories").join(repo)
    }

    fn layer_link(&self, repo: &str, d: &Digest) -> PathBuf {
        self.repo_dir(repo)
            .join("_layers")
            .join(d.algorithm().as_str())
            .join(d.hex())
    }

    fn revision(&self, repo: &str, d: &Digest) -> PathBuf {
        self.repo_dir(repo)
            .join("_manifests/revisions")
            .join(d.algorithm().as_str())
            .join(d.hex())
    }

    fn tags_dir(&self, repo: &str) -> PathBuf {
        self.repo_dir(repo).join("_manifests/tags")
    }

    fn upload_dir(&self, id: &str) -> PathBuf {
        self.root.join("uploads").join(id)
    }

    fn tmp_path(&self) -> PathBuf {
        self.root.join("tmp").join(uuid::Uuid::new_v4().to_string())
    }

    /// Writes `bytes` to `path` atomically (a synced temporary file renamed into place).
    async fn write_atomic(&self, path: &Path, bytes: &[u8]) -> Result<()> {
        let what = || format!("writing {}", path.display());
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).await.map_err(io(what()))?;
        }
        let tmp = self.tmp_path();
        let mut f = fs::File::create(&tmp).await.map_err(io(what()))?;
        f.write_all(bytes).await.map_err(io(what()))?;
        f.sync_data().await.map_err(io(what()))?;
        drop(f);
        if let Err(e) = fs::rename(&tmp, path).await {
            let _ = fs::remove_file(&tmp).await;
            return Err(io(what())(e));
        }
        Ok(())
    }

    /// Whether the repository exists (holds a blob or a manifest).
    pub async fn repository_exists(&self, repo: &str) -> bool {
        let d = self.repo_dir(repo);
        fs::metadata(d.join("_manifests")).await.is_ok()
            || fs::metadata(d.join("_layers")).await.is_ok()
    }

    /// The size of a blob the repository holds (as a layer or as a manifest).
    pub async fn blob_size(&self, repo: &str, d: &Digest) -> Result<u64> {
        let linked = fs::metadata(self.layer_link(repo, d)).await.is_ok()
            || fs::metadata(self.revision(repo, d)).await.is_ok();
        let unknown = || Error::new(ErrorCode::BlobUnknown, d.to_string());
        if !linked {
            return Err(unknown());
        }
        match fs::metadata(self.blob_path(d)).await {
            Ok(m) => Ok(m.len()),
            Err(e) if not_found(&e) => Err(unknown()),
            Err(e) => Err(io("reading a blob")(e)),
        }
    }

    /// Opens a blob of the repository, positioned at `offset`.
    pub async fn open_blob(&self, repo: &str, d: &Digest, offset: u64) -> Result<Blob> {
        let size = self.blob_size(repo, d).await?;
        let mut file = fs::File::open(self.blob_path(d))
            .await
            .map_err(io("opening a blob"))?;
        if offset > 0 {
            file.seek(SeekFrom::Start(offset))
                .await
                .map_err(io("seeking in a blob"))?;
        }
        Ok(Blob { file, size })
    }

    /// Whether the store holds a blob at all (in any repository).
    pub async fn blob_stored(&self, d: &Digest) -> bool {
        fs::metadata(self.blob_path(d)).await.is_ok()
    }

    async fn link_layer(&self, repo: &str, d: &Digest) -> Result<()> {
        let link = self.layer_link(repo, d);
        if fs::metadata(&link).await.is_ok() {
            return Ok(());
        }
        self.write_atomic(&link, b"").await
    }

    /// Links a blob another repository holds into `repo` (cross-repository mount); `from:
    /// None` mounts any blob the store holds. Returns whether it was mounted.
    pub async fn mount(&self, repo: &str, from: Option<&str>, d: &Digest) -> Result<bool> {
        let available = match from {
            Some(from) => self.blob_size(from, d).await.is_ok(),
            None => self.blob_stored(d).await,
        };
        if !available {
            return Ok(false);
        }
        self.link_layer(repo, d).await?;
        Ok(true)
    }

    /// Unlinks a blob from the repository.
    pub async fn delete_blob(&self, repo: &str, d: &Digest) -> Result<()> {
        match fs::remove_file(self.layer_link(repo, d)).await {
            Ok(()) => Ok(()),
            Err(e) if not_found(&e) => Err(Error::new(ErrorCode::BlobUnknown, d.to_string())),
            Err(e) => Err(io("deleting a blob link")(e)),
        }
    }

    /// Starts an upload into `repo`.
    pub async fn start_upload(&self, repo: &str) -> Result<UploadStatus> {
        let id = uuid::Uuid::new_v4().to_string();
        let dir = self.upload_dir(&id);
        fs::create_dir_all(&dir)
            .await
            .map_err(io("starting an upload"))?;
        fs::write(dir.join("repository"), repo)
            .await
            .map_err(io("starting an upload"))?;
        fs::File::create(dir.join("data"))
            .await
            .map_err(io("starting an upload"))?;
        let upload = Upload {
            repository: repo.to_string(),
            size: 0,
            hasher: Hasher::new(Algorithm::Sha256),
        };
        self.uploads
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id.clone(), Arc::new(tokio::sync::Mutex::new(Some(upload))));
        Ok(UploadStatus { id, size: 0 })
    }

    /// The lock of an upload of `repo`, loading it from disk after a restart.
    async fn upload(
        &self,
        repo: &str,
        id: &str,
    ) -> Result<Arc<tokio::sync::Mutex<Option<Upload>>>> {
        let unknown = || Error::new(ErrorCode::BlobUploadUnknown, id.to_string());
        if uuid::Uuid::parse_str(id).is_err() {
            return Err(unknown());
        }
        let slot = {
            let mut map = self.uploads.lock().unwrap_or_else(|p| p.into_inner());
            map.entry(id.to_string())
                .or_insert_with(|| Arc::new(tokio::sync::Mutex::new(None)))
                .clone()
        };
        {
            let mut guard = slot.lock().await;
            if guard.is_none() {
                let dir = self.upload_dir(id);
                let Ok(repository) = fs::read_to_string(dir.join("repository")).await else {
                    self.forget_upload(id);
                    return Err(unknown());
                };
                let (hasher, size) = hash_file(&dir.join("data"), Algorithm::Sha256).await?;
                *guard = Some(Upload {
                    repository,
                    size,
                    hasher,
                });
            }
            if guard.as_ref().is_some_and(|u| u.repository != repo) {
                return Err(unknown());
            }
        }
        Ok(slot)
    }

    fn forget_upload(&self, id: &str) {
        self.uploads
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(id);
    }

    /// Where an upload stands.
    pub async fn upload_status(&self, repo: &str, id: &str) -> Result<UploadStatus> {
        let slot = self.upload(repo, id).await?;
        let guard = slot.lock().await;
        let size = guard.as_ref().map_or(0, |u| u.size);
        Ok(UploadStatus {
            id: id.to_string(),
            size,
        })
    }

    /// Appends a chunk. `start`, when the client said where the chunk begins
    /// (`Content-Range`), must be where the upload stands (`RANGE_INVALID` otherwise); a
    /// failed chunk leaves the upload as it was before it.
    pub async fn append_chunk<S>(
        &self,
        repo: &str,
        id: &str,
        start: Option<u64>,
        body: S,
    ) -> Result<UploadStatus>
    where
        S: Stream<Item = std::io::Result<Bytes>> + Unpin,
    {
        let slot = self.upload(repo, id).await?;
        let mut guard = slot.lock().await;
        let Some(upload) = guard.as_mut() else {
            return Err(Error::new(ErrorCode::BlobUploadUnknown, id.to_string()));
        };
        if let Some(s) = start
            && s != upload.size
        {
            return Err(Error::new(
                ErrorCode::RangeInvalid,
                format!(
                    "the chunk starts at {s}, the upload holds {} bytes",
                    upload.size
                ),
            ));
        }
        let path = self.upload_dir(id).join("data");
        let mut file = fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .await
            .map_err(io("opening an upload"))?;
        let before = upload.hasher.clone();
        match append(&mut file, &mut upload.hasher, body).await {
            Ok(n) => {
                upload.size += n;
                Ok(UploadStatus {
                    id: id.to_string(),
                    size: upload.size,
                })
            }
            Err(e) => {
                upload.hasher = before;
                let _ = file.set_len(upload.size).await;
                Err(e)
            }
        }
    }

    /// Finishes an upload: the content must have `digest`; the blob then belongs to `repo`.
    /// A mismatch ends the upload (`DIGEST_INVALID`).
    pub async fn finish_upload(&self, repo: &str, id: &str, digest: &Digest) -> Result<u64> {
        let slot = self.upload(repo, id).await?;
        let mut guard = slot.lock().await;
        let Some(upload) = guard.take() else {
            return Err(Error::new(ErrorCode::BlobUploadUnknown, id.to_string()));
        };
        let dir = self.upload_dir(id);
        let data = dir.join("data");
        let actual = match digest.algorithm() {
            Algorithm::Sha256 => upload.hasher.finish(),
            other => hash_file(&data, other).await?.0.finish(),
        };
        let result = if &actual != digest {
            Err(Error::new(
                ErrorCode::DigestInvalid,
                format!("the content's digest is {actual}, not {digest}"),
            ))
        } else {
            self.commit_file(&data, digest, repo).await
        };
        let _ = fs::remove_dir_all(&dir).await;
        drop(guard);
        self.forget_upload(id);
        result.map(|()| upload.size)
    }

    /// Moves a verified file into the blob store and links it into `repo`.
    async fn commit_file(&self, file: &Path, d: &Digest, repo: &str) -> Result<()> {
        let what = || format!("storing blob {d}");
        if !self.blob_stored(d).await {
            let f = fs::OpenOptions::new()
                .write(true)
                .open(file)
                .await
                .map_err(io(what()))?;
            f.sync_data().await.map_err(io(what()))?;
            drop(f);
            let target = self.blob_path(d);
            if let Some(parent) = target.parent() {
                fs::create_dir_all(parent).await.map_err(io(what()))?;
            }
            fs::rename(file, &target).await.map_err(io(what()))?;
        }
        self.link_layer(repo, d).await
    }

    /// Cancels an upload.
    pub async fn cancel_upload(&self, repo: &str, id: &str) -> Result<()> {
        let slot = self.upload(repo, id).await?;
        let mut guard = slot.lock().await;
        *guard = None;
        let _ = fs::remove_dir_all(self.upload_dir(id)).await;
        drop(guard);
        self.forget_upload(id);
        Ok(())
    }

    /// Stores a whole blob in one go (a monolithic upload), verifying `digest`.
    pub async fn put_blob<S>(&self, repo: &str, digest: &Digest, body: S) -> Result<u64>
    where
        S: Stream<Item = std::io::Result<Bytes>> + Unpin,
    {
        let tmp = self.tmp_path();
        let mut file = fs::File::create(&tmp).await.map_err(io("writing a blob"))?;
        let mut hasher = Hasher::new(digest.algorithm());
        let written = append(&mut file, &mut hasher, body).await;
        drop(file);
        let result = match written {
            Ok(n) => {
                let actual = hasher.finish();
                if &actual == digest {
                    self.commit_file(&tmp, digest, repo).await.map(|()| n)
                } else {
                    Err(Error::new(
                        ErrorCode::DigestInvalid,
                        format!("the content's digest is {actual}, not {digest}"),
                    ))
                }
            }
            Err(e) => Err(e),
        };
        let _ = fs::remove_file(&tmp).await;
        result
    }

    /// Stores a manifest under `reference` after checking it refers only to content the
    /// repository holds. Returns its digest and what it is.
    pub async fn put_manifest(
        &self,
        repo: &str,
        reference: &Reference,
        content_type: Option<&str>,
        body: &[u8],
    ) -> Result<(Digest, Parsed)> {
        let parsed = manifest::parse(content_type, body)?;
        let digest = match reference {
            Reference::Digest(want) => {
                let mut h = Hasher::new(want.algorithm());
                h.update(body);
                let actual = h.finish();
                if &actual != want {
                    return Err(Error::new(
                        ErrorCode::DigestInvalid,
                        format!("the manifest's digest is {actual}, not {want}"),
                    ));
                }
                actual
            }
            Reference::Tag(_) => Digest::sha256(body),
        };
        for b in &parsed.blobs {
            match self.blob_size(repo, &b.digest).await {
                Ok(size) if size == b.size => {}
                Ok(size) => {
                    return Err(Error::new(
                        ErrorCode::ManifestInvalid,
                        format!(
                            "blob {} has {size} bytes, the manifest says {}",
                            b.digest, b.size
                        ),
                    ));
                }
                Err(_) => {
                    return Err(Error::new(
                        ErrorCode::ManifestBlobUnknown,
                        b.digest.to_string(),
                    ));
                }
            }
        }
        for m in &parsed.manifests {
            if fs::metadata(self.revision(repo, &m.digest)).await.is_err() {
                return Err(Error::new(
                    ErrorCode::ManifestBlobUnknown,
                    m.digest.to_string(),
                ));
            }
        }
        if !self.blob_stored(&digest).await {
            self.write_atomic(&self.blob_path(&digest), body).await?;
        }
        self.write_atomic(&self.revision(repo, &digest), parsed.media_type.as_bytes())
            .await?;
        if let Reference::Tag(tag) = reference {
            self.write_atomic(
                &self.tags_dir(repo).join(tag),
                digest.to_string().as_bytes(),
            )
            .await?;
        }
        Ok((digest, parsed))
    }

    async fn resolve(&self, repo: &str, reference: &Reference) -> Result<Digest> {
        let unknown = || Error::new(ErrorCode::ManifestUnknown, reference.to_string());
        if !self.repository_exists(repo).await {
            return Err(Error::new(ErrorCode::NameUnknown, repo.to_string()));
        }
        match reference {
            Reference::Digest(d) => Ok(d.clone()),
            Reference::Tag(t) => match fs::read_to_string(self.tags_dir(repo).join(t)).await {
                Ok(s) => Digest::parse(s.trim()).map_err(|_| unknown()),
                Err(e) if not_found(&e) => Err(unknown()),
                Err(e) => Err(io("reading a tag")(e)),
            },
        }
    }

    /// A manifest of the repository by tag or digest.
    pub async fn manifest(&self, repo: &str, reference: &Reference) -> Result<StoredManifest> {
        let unknown = || Error::new(ErrorCode::ManifestUnknown, reference.to_string());
        let digest = self.resolve(repo, reference).await?;
        let media_type = match fs::read_to_string(self.revision(repo, &digest)).await {
            Ok(t) => t,
            Err(e) if not_found(&e) => return Err(unknown()),
            Err(e) => return Err(io("reading a manifest")(e)),
        };
        let bytes = match fs::read(self.blob_path(&digest)).await {
            Ok(b) => b,
            Err(e) if not_found(&e) => return Err(unknown()),
            Err(e) => return Err(io("reading a manifest")(e)),
        };
        Ok(StoredManifest {
            digest,
            media_type,
            bytes: Bytes::from(bytes),
        })
    }

    /// Deletes a tag, or a manifest by digest together with the tags naming it.
    pub async fn delete_manifest(&self, repo: &str, reference: &Reference) -> Result<()> {
        let unknown = || Error::new(ErrorCode::ManifestUnknown, reference.to_string());
        let digest = self.resolve(repo, reference).await?;
        match reference {
            Reference::Tag(t) => fs::remove_file(self.tags_dir(repo).join(t))
                .await
                .map_err(|e| {
                    if not_found(&e) {
                        unknown()
                    } else {
                        io("deleting a tag")(e)
                    }
                }),
            Reference::Digest(_) => {
                match fs::remove_file(self.revision(repo, &digest)).await {
                    Ok(()) => {}
                    Err(e) if not_found(&e) => return Err(unknown()),
                    Err(e) => return Err(io("deleting a manifest")(e)),
                }
                for tag in self.tags(repo).await.unwrap_or_default() {
                    if self
                        .resolve(repo, &Reference::Tag(tag.clone()))
                        .await
                        .ok()
                        .as_ref()
                        == Some(&digest)
                    {
                        let _ = fs::remove_file(self.tags_dir(repo).join(&tag)).await;
                    }
                }
                Ok(())
            }
        }
    }

    /// The repository's tags, sorted.
    pub async fn tags(&self, repo: &str) -> Result<Vec<String>> {
        if !self.repository_exists(repo).await {
            return Err(Error::new(ErrorCode::NameUnknown, repo.to_string()));
        }
        let mut tags = Vec::new();
        match fs::read_dir(self.tags_dir(repo)).await {
            Ok(mut rd) => {
                while let Some(e) = rd.next_entry().await.map_err(io("listing tags"))? {
                    if let Some(n) = e.file_name().to_str() {
                        tags.push(n.to_string());
                    }
                }
            }
            Err(e) if not_found(&e) => {}
            Err(e) => return Err(io("listing tags")(e)),
        }
        tags.sort();
        Ok(tags)
    }

    /// Every repository, sorted.
    pub async fn repositories(&self) -> Result<Vec<String>> {
        let base = self.root.join("repositories");
        let mut out = Vec::new();
        let mut stack = vec![base.clone()];
        while let Some(dir) = stack.pop() {
            let mut rd = match fs::read_dir(&dir).await {
                Ok(rd) => rd,
                Err(e) if not_found(&e) => continue,
                Err(e) => return Err(io("listing repositories")(e)),
            };
            while let Some(e) = rd.next_entry().await.map_err(io("listing repositories"))? {
                let name = e.file_name();
                let Some(name) = name.to_str() else { continue };
                if name == "_manifests" {
                    if let Ok(rel) = dir.strip_prefix(&base) {
                        out.push(rel.to_string_lossy().into_owned());
                    }
                } else if !name.starts_with('_') && e.file_type().await.is_ok_and(|t| t.is_dir()) {
                    stack.push(e.path());
                }
            }
        }
        out.sort();
        Ok(out)
    }
}
