//! The OCI distribution API as plain functions: a request (method, path, query, the headers
//! that matter) is routed to an [`Endpoint`], which says what permission it needs
//! ([`Action`]), and [`Registry::serve`] answers it with a [`Response`] of plain status,
//! headers and body. The HTTP server (the `apiserver` crate) copies these to and from the
//! wire and decides who may do what; nothing here knows about sockets.
//!
//! Served: `GET /v2/` (the version check), manifests (`GET`/`HEAD`/`PUT`/`DELETE` by tag or
//! digest, `Accept` negotiation), blobs (`GET`/`HEAD` with single byte ranges, `DELETE`),
//! uploads (`POST` to start, monolithic with `?digest=`, cross-repository `?mount=&from=`;
//! `PATCH` chunks, checked against `Content-Range`; `PUT ?digest=` to finish; `GET` status;
//! `DELETE` to cancel), tag lists and the catalog with `n`/`last` pagination. A mirroring
//! client's `?ns=<registry>` puts the path under that registry's name.

use bytes::Bytes;
use futures::{Stream, StreamExt};
use serde_json::json;

use crate::digest::Digest;
use crate::error::{Error, ErrorCode, Result};
use crate::manifest::{self, MAX_MANIFEST};
use crate::name::{self, Reference};
use crate::store::{Blob, Store};

/// The request methods the API uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Get,
    Head,
    Post,
    Put,
    Patch,
    Delete,
    Other,
}

impl Method {
    pub fn parse(m: &str) -> Method {
        match m {
            "GET" => Method::Get,
            "HEAD" => Method::Head,
            "POST" => Method::Post,
            "PUT" => Method::Put,
            "PATCH" => Method::Patch,
            "DELETE" => Method::Delete,
            _ => Method::Other,
        }
    }
}

/// What a request addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// `/v2/`
    Base,
    /// `/v2/_catalog`
    Catalog,
    /// `/v2/<name>/tags/list`
    Tags,
    /// `/v2/<name>/manifests/<reference>`
    Manifest(Reference),
    /// `/v2/<name>/blobs/<digest>`
    Blob(Digest),
    /// `/v2/<name>/blobs/uploads/`
    Uploads,
    /// `/v2/<name>/blobs/uploads/<id>`
    Upload(String),
}

/// The permission a request needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Reading: the version check, pulls, tag lists, the catalog.
    Pull,
    /// Writing blobs, uploads and manifests.
    Push,
    /// Deleting manifests, tags and blob links.
    Delete,
}

/// A request, with the headers the API reads.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: Method,
    pub endpoint: Endpoint,
    /// The repository as the path names it (for `Location` headers).
    pub path_name: String,
    /// The repository in the store (the path under `?ns=`, if given).
    pub repository: String,
    /// `?ns=`, kept for `Location` headers.
    pub ns: Option<String>,
    pub query: Vec<(String, String)>,
    pub accept: Vec<String>,
    pub content_type: Option<String>,
    pub content_length: Option<u64>,
    pub content_range: Option<String>,
    pub range: Option<String>,
}

impl Request {
    /// Routes `method path?query`. Errors are the spec's (`NAME_INVALID`, `DIGEST_INVALID`,
    /// `UNSUPPORTED` for a method an endpoint lacks, 404 `NAME_UNKNOWN` for other paths).
    pub fn route(method: &str, path: &str, query: Option<&str>) -> Result<Request> {
        let method = Method::parse(method);
        let query: Vec<(String, String)> = query
            .map(|q| {
                q.split('&')
                    .filter(|kv| !kv.is_empty())
                    .map(|kv| {
                        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
                        (percent_decode(k), percent_decode(v))
                    })
                    .collect()
            })
            .unwrap_or_default();
        let get = |k: &str| query.iter().find(|(q, _)| q == k).map(|(_, v)| v.clone());
        let ns = get("ns").filter(|s| !s.is_empty());
        let rest = path
            .strip_prefix("/v2")
            .ok_or_else(|| Error::new(ErrorCode::NameUnknown, path.to_string()))?;
        let base = |endpoint| Request {
            method,
            endpoint,
            path_name: String::new(),
            repository: String::new(),
            ns: ns.clone(),
            query: query.clone(),
            accept: Vec::new(),
            content_type: None,
            content_length: None,
            content_range: None,
            range: None,
        };
        if rest.is_empty() || rest == "/" {
            return Ok(base(Endpoint::Base));
        }
        if rest == "/_catalog" {
            return Ok(base(Endpoint::Catalog));
        }
        let rest = rest.strip_prefix('/').unwrap_or(rest);
        let (name, endpoint) = if let Some(n) = rest.strip_suffix("/tags/list") {
            (n, Endpoint::Tags)
        } else if let Some((n, r)) = rest.rsplit_once("/manifests/") {
            (n, Endpoint::Manifest(Reference::parse(r)?))
        } else if let Some(n) = rest
            .strip_suffix("/blobs/uploads/")
            .or_else(|| rest.strip_suffix("/blobs/uploads"))
        {
            (n, Endpoint::Uploads)
        } else if let Some((n, id)) = rest.rsplit_once("/blobs/uploads/") {
            (n, Endpoint::Upload(id.to_string()))
        } else if let Some((n, d)) = rest.rsplit_once("/blobs/") {
            (n, Endpoint::Blob(Digest::parse(d)?))
        } else {
            return Err(Error::new(ErrorCode::NameUnknown, path.to_string()));
        };
        let repository = name::repository(ns.as_deref(), name)?;
        let mut r = base(endpoint);
        r.path_name = name.to_string();
        r.repository = repository;
        Ok(r)
    }

    /// The permission this request needs.
    pub fn action(&self) -> Action {
        match self.method {
            Method::Get | Method::Head | Method::Other => Action::Pull,
            Method::Delete if matches!(self.endpoint, Endpoint::Upload(_)) => Action::Push,
            Method::Delete => Action::Delete,
            Method::Post | Method::Put | Method::Patch => Action::Push,
        }
    }

    fn param(&self, k: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(q, _)| q == k)
            .map(|(_, v)| v.as_str())
    }

    fn location(&self, tail: &str) -> String {
        let mut l = format!("/v2/{}/{tail}", self.path_name);
        if let Some(ns) = &self.ns {
            l.push_str("?ns=");
            l.push_str(&percent_encode(ns));
        }
        l
    }
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' if i + 3 <= b.len() => {
                let hex = std::str::from_utf8(&b[i + 1..i + 3]).ok();
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(v) => {
                        out.push(v);
                        i += 3;
                    }
                    None => {
                        out.push(b'%');
                        i += 1;
                    }
                }
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn percent_encode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b':') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A response body.
pub enum Body {
    Empty,
    Bytes(Bytes),
    /// `len` bytes of an open file, from where it is positioned.
    File {
        file: tokio::fs::File,
        len: u64,
    },
}

/// An answer: status, headers, body.
pub struct Response {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    pub body: Body,
}

impl Response {
    fn new(status: u16) -> Response {
        Response {
            status,
            headers: vec![("Docker-Distribution-API-Version", "registry/2.0".into())],
            body: Body::Empty,
        }
    }

    fn header(mut self, name: &'static str, value: impl Into<String>) -> Response {
        self.headers.push((name, value.into()));
        self
    }

    fn json(status: u16, value: &serde_json::Value) -> Response {
        let bytes = serde_json::to_vec(value).unwrap_or_default();
        let mut r = Response::new(status)
            .header("Content-Type", "application/json")
            .header("Content-Length", bytes.len().to_string());
        r.body = Body::Bytes(Bytes::from(bytes));
        r
    }

    /// The spec's error response.
    pub fn error(e: &Error) -> Response {
        if let Error::Io { .. } = e {
            tracing::warn!(error = %e, "registry request failed");
        }
        Response::json(e.status(), &e.body())
    }

    /// The value of a header (first match, case-insensitive).
    pub fn header_value(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// A single byte range `bytes=a-b` / `bytes=a-` / `bytes=-n` of a `size`-byte blob, as
/// (start, length). `None`: no usable range (serve the whole blob).
fn byte_range(header: &str, size: u64) -> Option<Result<(u64, u64)>> {
    let spec = header.trim().strip_prefix("bytes=")?;
    if spec.contains(',') {
        return None;
    }
    let (a, b) = spec.split_once('-')?;
    let unsatisfiable = || {
        Err(Error::new(
            ErrorCode::RangeInvalid,
            format!("{header:?} is outside the blob's {size} bytes"),
        ))
    };
    let (start, end) = match (a.trim(), b.trim()) {
        ("", n) => {
            let n: u64 = n.parse().ok()?;
            if n == 0 {
                return Some(unsatisfiable());
            }
            (size.saturating_sub(n), size.saturating_sub(1))
        }
        (s, "") => (s.parse().ok()?, size.saturating_sub(1)),
        (s, e) => {
            let (s, e): (u64, u64) = (s.parse().ok()?, e.parse().ok()?);
            (s, e.min(size.saturating_sub(1)))
        }
    };
    if start >= size || end < start {
        return Some(unsatisfiable());
    }
    Some(Ok((start, end - start + 1)))
}

/// `Content-Range` of a chunk: `<start>-<end>` (also with a `bytes ` prefix or `/<total>`).
fn chunk_range(header: &str) -> Result<(u64, u64)> {
    let invalid = || {
        Error::new(
            ErrorCode::RangeInvalid,
            format!("malformed Content-Range {header:?}"),
        )
    };
    let s = header.trim();
    let s = s.strip_prefix("bytes ").unwrap_or(s);
    let s = s.split('/').next().unwrap_or(s);
    let (a, b) = s.split_once('-').ok_or_else(invalid)?;
    let a: u64 = a.trim().parse().map_err(|_| invalid())?;
    let b: u64 = b.trim().parse().map_err(|_| invalid())?;
    if b < a {
        return Err(invalid());
    }
    Ok((a, b))
}

/// A page of a sorted list after `last`, at most `n` long; whether more follow.
fn page(items: Vec<String>, last: Option<&str>, n: Option<usize>) -> (Vec<String>, bool) {
    let mut it: Vec<String> = match last {
        Some(l) => items.into_iter().filter(|i| i.as_str() > l).collect(),
        None => items,
    };
    match n {
        Some(n) if it.len() > n => {
            it.truncate(n);
            (it, true)
        }
        _ => (it, false),
    }
}

/// Counts what a stream yields, so a declared `Content-Length` can be checked.
struct Counted<S> {
    inner: S,
    seen: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl<S: Stream<Item = std::io::Result<Bytes>> + Unpin> Stream for Counted<S> {
    type Item = std::io::Result<Bytes>;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        let r = self.inner.poll_next_unpin(cx);
        if let std::task::Poll::Ready(Some(Ok(b))) = &r {
            self.seen
                .fetch_add(b.len() as u64, std::sync::atomic::Ordering::Relaxed);
        }
        r
    }
}

/// The registry: the distribution API over a [`Store`].
pub struct Registry {
    pub store: Store,
}

impl Registry {
    /// Opens the registry over a store under `root`.
    pub async fn open(root: impl Into<std::path::PathBuf>) -> Result<Registry> {
        Ok(Registry {
            store: Store::open(root).await?,
        })
    }

    /// Answers one request; `body` is the request body as it arrives.
    pub async fn serve<S>(&self, req: &Request, body: S) -> Response
    where
        S: Stream<Item = std::io::Result<Bytes>> + Unpin + Send,
    {
        match self.dispatch(req, body).await {
            Ok(r) => r,
            Err(e) => {
                let mut r = Response::error(&e);
                if e.code() == ErrorCode::RangeInvalid
                    && let Endpoint::Upload(id) = &req.endpoint
                    && let Ok(s) = self.store.upload_status(&req.repository, id).await
                {
                    r = r
                        .header("Location", req.location(&format!("blobs/uploads/{id}")))
                        .header("Range", format!("0-{}", s.size.saturating_sub(1)))
                        .header("Docker-Upload-UUID", id.clone());
                }
                r
            }
        }
    }

    async fn dispatch<S>(&self, req: &Request, body: S) -> Result<Response>
    where
        S: Stream<Item = std::io::Result<Bytes>> + Unpin + Send,
    {
        use Method::*;
        let unsupported = || {
            Err(Error::new(
                ErrorCode::Unsupported,
                format!("{:?} is not served here", req.method),
            ))
        };
        match (&req.endpoint, req.method) {
            (Endpoint::Base, Get | Head) => Ok(Response::json(200, &json!({}))),
            (Endpoint::Catalog, Get) => self.catalog(req).await,
            (Endpoint::Tags, Get) => self.tags(req).await,
            (Endpoint::Manifest(r), Get | Head) => self.get_manifest(req, r).await,
            (Endpoint::Manifest(r), Put) => self.put_manifest(req, r, body).await,
            (Endpoint::Manifest(r), Delete) => {
                self.store.delete_manifest(&req.repository, r).await?;
                Ok(Response::new(202).header("Content-Length", "0"))
            }
            (Endpoint::Blob(d), Get | Head) => self.get_blob(req, d).await,
            (Endpoint::Blob(d), Delete) => {
                self.store.delete_blob(&req.repository, d).await?;
                Ok(Response::new(202).header("Content-Length", "0"))
            }
            (Endpoint::Uploads, Post) => self.start_upload(req, body).await,
            (Endpoint::Upload(id), Get) => {
                let s = self.store.upload_status(&req.repository, id).await?;
                Ok(self.upload_response(req, 204, &s.id, s.size))
            }
            (Endpoint::Upload(id), Patch) => self.patch(req, id, body).await,
            (Endpoint::Upload(id), Put) => self.finish(req, id, body).await,
            (Endpoint::Upload(id), Delete) => {
                self.store.cancel_upload(&req.repository, id).await?;
                Ok(Response::new(204))
            }
            _ => unsupported(),
        }
    }

    fn upload_response(&self, req: &Request, status: u16, id: &str, size: u64) -> Response {
        Response::new(status)
            .header("Location", req.location(&format!("blobs/uploads/{id}")))
            .header("Range", format!("0-{}", size.saturating_sub(1)))
            .header("Docker-Upload-UUID", id.to_string())
            .header("Content-Length", "0")
    }

    fn blob_created(&self, req: &Request, d: &Digest) -> Response {
        Response::new(201)
            .header("Location", req.location(&format!("blobs/{d}")))
            .header("Docker-Content-Digest", d.to_string())
            .header("Content-Length", "0")
    }

    async fn catalog(&self, req: &Request) -> Result<Response> {
        let n = self.page_size(req)?;
        let all = self.store.repositories().await?;
        let (repos, more) = page(all, req.param("last"), n);
        let mut r = Response::json(200, &json!({ "repositories": repos }));
        if more && let (Some(last), Some(n)) = (repos.last(), n) {
            r = r.header(
                "Link",
                format!(
                    "</v2/_catalog?last={}&n={n}>; rel=\"next\"",
                    percent_encode(last)
                ),
            );
        }
        Ok(r)
    }

    fn page_size(&self, req: &Request) -> Result<Option<usize>> {
        req.param("n")
            .filter(|n| !n.is_empty())
            .map(|n| {
                n.parse::<usize>().map_err(|_| {
                    Error::new(
                        ErrorCode::Unsupported,
                        format!("n={n:?} is not a number of results"),
                    )
                })
            })
            .transpose()
    }

    async fn tags(&self, req: &Request) -> Result<Response> {
        let n = self.page_size(req)?;
        let all = self.store.tags(&req.repository).await?;
        let (tags, more) = page(all, req.param("last"), n);
        let mut r = Response::json(200, &json!({ "name": req.path_name, "tags": tags }));
        if more && let (Some(last), Some(n)) = (tags.last(), n) {
            r = r.header(
                "Link",
                format!(
                    "</v2/{}/tags/list?last={}&n={n}>; rel=\"next\"",
                    req.path_name,
                    percent_encode(last)
                ),
            );
        }
        Ok(r)
    }

    async fn get_manifest(&self, req: &Request, reference: &Reference) -> Result<Response> {
        let mut m = self.store.manifest(&req.repository, reference).await?;
        let accept = manifest::accepted(&req.accept);
        if manifest::is_index(&m.media_type) && !manifest::accepts(&accept, &m.media_type) {
            // A client that cannot read indexes gets the default platform's image, as the
            // reference registry does.
            if let Ok(p) = manifest::parse(Some(&m.media_type), &m.bytes)
                && let Some(child) = p.manifests.iter().find(|c| {
                    c.platform.as_deref() == Some(manifest::DEFAULT_PLATFORM)
                        && manifest::accepts(&accept, &c.media_type)
                })
                && let Ok(c) = self
                    .store
                    .manifest(&req.repository, &Reference::Digest(child.digest.clone()))
                    .await
            {
                m = c;
            }
        }
        let mut r = Response::new(200)
            .header("Content-Type", m.media_type.clone())
            .header("Content-Length", m.bytes.len().to_string())
            .header("Docker-Content-Digest", m.digest.to_string())
            .header("ETag", format!("\"{}\"", m.digest));
        if req.method == Method::Get {
            r.body = Body::Bytes(m.bytes);
        }
        Ok(r)
    }

    async fn put_manifest<S>(
        &self,
        req: &Request,
        reference: &Reference,
        body: S,
    ) -> Result<Response>
    where
        S: Stream<Item = std::io::Result<Bytes>> + Unpin,
    {
        let bytes = collect(body, MAX_MANIFEST).await?;
        let (digest, parsed) = self
            .store
            .put_manifest(
                &req.repository,
                reference,
                req.content_type.as_deref(),
                &bytes,
            )
            .await?;
        let mut r = Response::new(201)
            .header("Location", req.location(&format!("manifests/{digest}")))
            .header("Docker-Content-Digest", digest.to_string())
            .header("Content-Length", "0");
        if let Some(s) = parsed.subject {
            r = r.header("OCI-Subject", s.to_string());
        }
        Ok(r)
    }

    async fn get_blob(&self, req: &Request, d: &Digest) -> Result<Response> {
        let size = self.store.blob_size(&req.repository, d).await?;
        let range = req
            .range
            .as_deref()
            .and_then(|h| byte_range(h, size))
            .transpose()?;
        let (status, start, len) = match range {
            Some((start, len)) => (206, start, len),
            None => (200, 0, size),
        };
        let mut r = Response::new(status)
            .header("Content-Type", "application/octet-stream")
            .header("Content-Length", len.to_string())
            .header("Docker-Content-Digest", d.to_string())
            .header("Accept-Ranges", "bytes")
            .header("ETag", format!("\"{d}\""));
        if status == 206 {
            r = r.header(
                "Content-Range",
                format!("bytes {start}-{}/{size}", start + len - 1),
            );
        }
        if req.method == Method::Get {
            let Blob { file, .. } = self.store.open_blob(&req.repository, d, start).await?;
            r.body = Body::File { file, len };
        }
        Ok(r)
    }

    async fn start_upload<S>(&self, req: &Request, body: S) -> Result<Response>
    where
        S: Stream<Item = std::io::Result<Bytes>> + Unpin,
    {
        if let Some(m) = req.param("mount") {
            let d = Digest::parse(m)?;
            let from = req
                .param("from")
                .map(|f| name::repository(req.ns.as_deref(), f))
                .transpose()?;
            if self
                .store
                .mount(&req.repository, from.as_deref(), &d)
                .await?
            {
                return Ok(self.blob_created(req, &d));
            }
        } else if let Some(d) = req.param("digest") {
            let d = Digest::parse(d)?;
            let seen = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
            let counted = Counted {
                inner: body,
                seen: seen.clone(),
            };
            let n = self.store.put_blob(&req.repository, &d, counted).await;
            let n = match n {
                Err(e) if e.code() == ErrorCode::DigestInvalid => {
                    return Err(self.size_error(req, &seen).unwrap_or(e));
                }
                other => other?,
            };
            if let Some(e) = self.size_error_n(req, n) {
                return Err(e);
            }
            return Ok(self.blob_created(req, &d));
        }
        let s = self.store.start_upload(&req.repository).await?;
        Ok(self.upload_response(req, 202, &s.id, s.size))
    }

    fn size_error(&self, req: &Request, seen: &std::sync::atomic::AtomicU64) -> Option<Error> {
        self.size_error_n(req, seen.load(std::sync::atomic::Ordering::Relaxed))
    }

    fn size_error_n(&self, req: &Request, n: u64) -> Option<Error> {
        req.content_length.filter(|&l| l != n).map(|l| {
            Error::new(
                ErrorCode::SizeInvalid,
                format!("Content-Length is {l}, the body had {n} bytes"),
            )
        })
    }

    async fn patch<S>(&self, req: &Request, id: &str, body: S) -> Result<Response>
    where
        S: Stream<Item = std::io::Result<Bytes>> + Unpin,
    {
        let range = req.content_range.as_deref().map(chunk_range).transpose()?;
        let before = self.store.upload_status(&req.repository, id).await?.size;
        let s = self
            .store
            .append_chunk(&req.repository, id, range.map(|r| r.0), body)
            .await?;
        let got = s.size - before;
        if let Some((a, b)) = range
            && b - a + 1 != got
        {
            return Err(Error::new(
                ErrorCode::SizeInvalid,
                format!(
                    "Content-Range {a}-{b} announced {} bytes, the chunk had {got}",
                    b - a + 1
                ),
            ));
        }
        Ok(self.upload_response(req, 202, &s.id, s.size))
    }

    async fn finish<S>(&self, req: &Request, id: &str, body: S) -> Result<Response>
    where
        S: Stream<Item = std::io::Result<Bytes>> + Unpin,
    {
        let Some(d) = req.param("digest") else {
            return Err(Error::new(
                ErrorCode::DigestInvalid,
                "the digest parameter is missing",
            ));
        };
        let d = Digest::parse(d)?;
        let range = req.content_range.as_deref().map(chunk_range).transpose()?;
        self.store
            .append_chunk(&req.repository, id, range.map(|r| r.0), body)
            .await?;
        self.store.finish_upload(&req.repository, id, &d).await?;
        Ok(self.blob_created(req, &d))
    }
}

/// Reads a whole (small) body, refusing more than `limit` bytes.
async fn collect<S>(mut body: S, limit: usize) -> Result<Vec<u8>>
where
    S: Stream<Item = std::io::Result<Bytes>> + Unpin,
{
    let mut out = Vec::new();
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|e| {
            Error::new(
                ErrorCode::ManifestInvalid,
                format!("reading the request body failed: {e}"),
            )
        })?;
        if out.len() + chunk.len() > limit {
            return Err(Error::new(
                ErrorCode::ManifestInvalid,
                format!("the manifest is larger than {limit} bytes"),
            ));
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}
