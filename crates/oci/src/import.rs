//! Importing an archive straight into a local store, without HTTP: what an in-process
//! platform (or a test of one) does to have an image, such as the sandbox's pause image, in
//! its registry before any node asks. `matryoshka image import` does the same over the API.

use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use futures::StreamExt as _;

use crate::api::Registry;
use crate::archive::{Archive, ArchiveError};
use crate::digest::Digest;
use crate::name::{ImageRef, Reference};

/// Errors importing an archive.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error(transparent)]
    Archive(#[from] ArchiveError),
    #[error("storing {name}: {source}")]
    Store {
        name: String,
        #[source]
        source: crate::error::Error,
    },
    #[error("reading the archive failed: {0}")]
    Task(String),
}

/// Chunks read from the archive at a time.
const CHUNK: u64 = 4 << 20;

impl Registry {
    /// Imports every image of the archive at `path` (renamed to `name` if given); returns
    /// each name with the digest it now points at.
    pub async fn import(
        &self,
        path: &Path,
        name: Option<&ImageRef>,
    ) -> Result<Vec<(ImageRef, Digest)>, ImportError> {
        let path = path.to_path_buf();
        let name = name.cloned();
        let (archive, images) = tokio::task::spawn_blocking(move || {
            let archive = Archive::open(&path)?;
            let images = archive.images(name.as_ref())?;
            Ok::<_, ArchiveError>((Arc::new(archive), images))
        })
        .await
        .map_err(|e| ImportError::Task(e.to_string()))??;
        let mut out = Vec::new();
        for image in &images {
            for n in &image.names {
                let repo = n.repository();
                let store_err = |source| ImportError::Store {
                    name: n.to_string(),
                    source,
                };
                for b in &image.blobs {
                    if self.store.blob_size(&repo, &b.digest).await.is_ok() {
                        continue;
                    }
                    let chunks = (0..b.size.div_ceil(CHUNK).max(1)).map(|i| {
                        let archive = archive.clone();
                        let entry = b.path.clone();
                        async move {
                            tokio::task::spawn_blocking(move || {
                                archive.read_range(&entry, i * CHUNK, CHUNK)
                            })
                            .await
                            .map_err(std::io::Error::other)?
                            .map(Bytes::from)
                            .map_err(std::io::Error::other)
                        }
                    });
                    let body = Box::pin(futures::stream::iter(chunks).then(|f| f));
                    self.store
                        .put_blob(&repo, &b.digest, body)
                        .await
                        .map_err(store_err)?;
                }
                let Some(top) = image.top() else { continue };
                for m in &image.manifests {
                    let reference = match (&n.tag, m.digest == top.digest) {
                        (Some(t), true) => Reference::Tag(t.clone()),
                        _ => Reference::Digest(m.digest.clone()),
                    };
                    self.store
                        .put_manifest(&repo, &reference, Some(&m.media_type), &m.bytes)
                        .await
                        .map_err(store_err)?;
                }
                out.push((n.clone(), top.digest.clone()));
            }
        }
        Ok(out)
    }
}
