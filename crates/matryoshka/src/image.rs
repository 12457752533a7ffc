//! `matryoshka image import`: pushes the images of an OCI archive or a `docker save` tarball
//! into the registry of the platform running on a data directory, through its endpoint and
//! with its admin credentials (`<data-dir>/admin.conf`), under the names the archive records
//! (or `--name`), normalised as containerd does (`busybox:1` is `docker.io/library/busybox:1`).
//!
//! It speaks the distribution API as any client does: blobs the repository already holds are
//! skipped, blobs another repository of the run holds are mounted, small blobs go in one
//! request, large ones in chunks (so memory stays bounded whatever the layer size), then the
//! manifests, children first.

use std::path::PathBuf;

use anyhow::{Context, bail};
use bytes::Bytes;
use http::{Method, Request, StatusCode};
use http_body_util::BodyExt;
use oci::archive::{Archive, BlobEntry, Image};
use oci::{Digest, ImageRef};

/// Blobs up to this size are pushed in one request, larger ones in chunks of it.
const CHUNK: u64 = 8 << 20;

#[derive(clap::Subcommand, Debug)]
pub enum ImageCommand {
    /// Pushes an OCI archive or a `docker save` tarball into the platform's registry.
    Import(ImportArgs),
}

#[derive(clap::Args, Debug)]
pub struct ImportArgs {
    /// The data directory of the running platform (its admin.conf is used).
    #[arg(long, default_value = "./matryoshka-data")]
    pub data_dir: PathBuf,
    /// The archive.
    pub file: PathBuf,
    /// The name to push the archive's one image under, instead of the names it records.
    #[arg(long)]
    pub name: Option<String>,
}

pub async fn run(cmd: ImageCommand) -> anyhow::Result<()> {
    match cmd {
        ImageCommand::Import(args) => import(args).await,
    }
}

async fn client(data_dir: &std::path::Path) -> anyhow::Result<kube::Client> {
    let path = data_dir.join("admin.conf");
    let kubeconfig = kube::config::Kubeconfig::read_from(&path).with_context(|| {
        format!(
            "reading {} (is `matryoshka up --data-dir {}` running?)",
            path.display(),
            data_dir.display()
        )
    })?;
    let config = kube::Config::from_custom_kubeconfig(
        kubeconfig,
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .with_context(|| format!("loading {}", path.display()))?;
    kube::Client::try_from(config).context("creating a client")
}

async fn import(args: ImportArgs) -> anyhow::Result<()> {
    let name = args
        .name
        .as_deref()
        .map(ImageRef::parse_normalized)
        .transpose()?;
    let file = args.file.clone();
    let (archive, images) = tokio::task::spawn_blocking(move || {
        let archive = Archive::open(&file)?;
        let images = archive.images(name.as_ref())?;
        Ok::<_, oci::archive::ArchiveError>((archive, images))
    })
    .await?
    .with_context(|| format!("reading {}", args.file.display()))?;
    let pusher = Pusher {
        client: client(&args.data_dir).await?,
        archive: std::sync::Arc::new(archive),
        pushed: Vec::new(),
    };
    let mut pusher = pusher;
    for image in &images {
        for name in &image.names {
            let digest = pusher.push(image, name).await?;
            println!("imported {name} ({digest})");
        }
    }
    Ok(())
}

/// A response's status, headers and (small) body.
struct Answer {
    status: StatusCode,
    headers: http::HeaderMap,
    body: Bytes,
}

impl Answer {
    fn fail(&self, what: &str) -> anyhow::Error {
        anyhow::anyhow!(
            "{what}: {} {}",
            self.status,
            String::from_utf8_lossy(&self.body).trim()
        )
    }

    fn location(&self, what: &str) -> anyhow::Result<String> {
        self.headers
            .get(http::header::LOCATION)
            .and_then(|v| v.to_str().ok())
            .map(String::from)
            .ok_or_else(|| anyhow::anyhow!("{what}: the registry sent no Location"))
    }
}

struct Pusher {
    client: kube::Client,
    archive: std::sync::Arc<Archive>,
    /// (repository, blob) pairs pushed in this run, to mount instead of upload again.
    pushed: Vec<(String, Digest)>,
}

/// `location` with more query parameters.
fn with_query(location: &str, query: &str) -> String {
    let sep = if location.contains('?') { '&' } else { '?' };
    format!("{location}{sep}{query}")
}

impl Pusher {
    async fn call(
        &self,
        method: Method,
        uri: &str,
        headers: &[(&str, String)],
        body: Vec<u8>,
    ) -> anyhow::Result<Answer> {
        let mut req = Request::builder().method(method.clone()).uri(uri);
        for (k, v) in headers {
            req = req.header(*k, v);
        }
        let req = req
            .body(kube::client::Body::from(body))
            .with_context(|| format!("building {method} {uri}"))?;
        let resp = self
            .client
            .send(req)
            .await
            .with_context(|| format!("{method} {uri}"))?;
        let (parts, body) = resp.into_parts();
        let body = body
            .collect()
            .await
            .map(|c| c.to_bytes())
            .unwrap_or_default();
        Ok(Answer {
            status: parts.status,
            headers: parts.headers,
            body,
        })
    }

    async fn read(&self, path: &str, offset: u64, len: u64) -> anyhow::Result<Vec<u8>> {
        let archive = self.archive.clone();
        let path = path.to_string();
        Ok(tokio::task::spawn_blocking(move || archive.read_range(&path, offset, len)).await??)
    }

    async fn push_blob(&mut self, repo: &str, blob: &BlobEntry) -> anyhow::Result<()> {
        let d = &blob.digest;
        let head = self
            .call(
                Method::HEAD,
                &format!("/v2/{repo}/blobs/{d}"),
                &[],
                Vec::new(),
            )
            .await?;
        if head.status == StatusCode::OK {
            return Ok(());
        }
        let uploads = format!("/v2/{repo}/blobs/uploads/");
        if let Some((from, _)) = self.pushed.iter().find(|(_, x)| x == d) {
            let a = self
                .call(
                    Method::POST,
                    &format!("{uploads}?mount={d}&from={from}"),
                    &[],
                    Vec::new(),
                )
                .await?;
            if a.status == StatusCode::CREATED {
                return Ok(());
            }
        }
        let what = format!("pushing blob {d} to {repo}");
        if blob.size <= CHUNK {
            let bytes = self.read(&blob.path, 0, blob.size).await?;
            let a = self
                .call(
                    Method::POST,
                    &format!("{uploads}?digest={d}"),
                    &[("content-type", "application/octet-stream".into())],
                    bytes,
                )
                .await?;
            if a.status != StatusCode::CREATED {
                return Err(a.fail(&what));
            }
        } else {
            let a = self.call(Method::POST, &uploads, &[], Vec::new()).await?;
            if a.status != StatusCode::ACCEPTED {
                return Err(a.fail(&what));
            }
            let mut location = a.location(&what)?;
            let mut offset = 0;
            while offset < blob.size {
                let chunk = self.read(&blob.path, offset, CHUNK).await?;
                let end = offset + chunk.len() as u64 - 1;
                let a = self
                    .call(
                        Method::PATCH,
                        &location,
                        &[
                            ("content-type", "application/octet-stream".into()),
                            ("content-range", format!("{offset}-{end}")),
                        ],
                        chunk,
                    )
                    .await?;
                if a.status != StatusCode::ACCEPTED {
                    return Err(a.fail(&what));
                }
                location = a.location(&what)?;
                offset = end + 1;
            }
            let a = self
                .call(
                    Method::PUT,
                    &with_query(&location, &format!("digest={d}")),
                    &[],
                    Vec::new(),
                )
                .await?;
            if a.status != StatusCode::CREATED {
                return Err(a.fail(&what));
            }
        }
        self.pushed.push((repo.to_string(), d.clone()));
        Ok(())
    }

    /// Pushes `image` as `name`; returns the digest its name now points at.
    async fn push(&mut self, image: &Image, name: &ImageRef) -> anyhow::Result<Digest> {
        let repo = name.repository();
        for blob in &image.blobs {
            self.push_blob(&repo, blob).await?;
        }
        let Some(top) = image.top() else {
            bail!("the archive's image {name} has no manifest");
        };
        if let Some(want) = &name.digest
            && want != &top.digest
        {
            bail!(
                "{name} names digest {want}, the archive's image is {}",
                top.digest
            );
        }
        for m in &image.manifests {
            let reference = if m.digest == top.digest
                && let Some(tag) = &name.tag
            {
                tag.clone()
            } else {
                m.digest.to_string()
            };
            let a = self
                .call(
                    Method::PUT,
                    &format!("/v2/{repo}/manifests/{reference}"),
                    &[("content-type", m.media_type.clone())],
                    m.bytes.to_vec(),
                )
                .await?;
            if a.status != StatusCode::CREATED {
                return Err(a.fail(&format!("pushing manifest {} to {repo}", m.digest)));
            }
        }
        Ok(top.digest.clone())
    }
}
