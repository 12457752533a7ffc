//! S3 locations of `matryoshka backup`: `s3://bucket/key`, or `s3://bucket/prefix/` for a
//! name chosen by the command. Requests are signed by rusty-s3 (SigV4 presigned URLs, the
//! payload unsigned) and sent with hyper over rustls; bodies stream from and to files.
//!
//! As the AWS tools do: credentials from `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` (and
//! `AWS_SESSION_TOKEN`), the region from `AWS_REGION` (`us-east-1`), another endpoint (MinIO,
//! SeaweedFS, Ceph) from `--s3-endpoint` or `AWS_ENDPOINT_URL`, addressed path-style. One PUT
//! holds an object of up to 5 GiB, S3's limit for it.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, bail};
use bytes::Bytes;
use http_body_util::BodyExt;
use rusty_s3::{Bucket, Credentials, S3Action, UrlStyle};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// How long a signed request stays valid.
const SIGNED_FOR: Duration = Duration::from_secs(3600);
/// S3's largest single PUT.
const MAX_PUT: u64 = 5 << 30;

/// An object in a bucket.
pub struct Location {
    bucket: Bucket,
    credentials: Credentials,
    /// The key; one ending in `/` (or empty) is a prefix the command names the object under.
    pub key: String,
}

/// The S3 location `url` names, if it is an `s3://` URL.
pub fn parse(url: &str, endpoint: Option<&str>) -> anyhow::Result<Option<Location>> {
    let Some(rest) = url.strip_prefix("s3://") else {
        return Ok(None);
    };
    let (bucket, key) = rest.split_once('/').unwrap_or((rest, ""));
    if bucket.is_empty() {
        bail!("{url}: no bucket");
    }
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let region = env("AWS_REGION").unwrap_or_else(|| "us-east-1".into());
    let (endpoint, style) = match endpoint
        .map(String::from)
        .or_else(|| env("AWS_ENDPOINT_URL"))
    {
        Some(e) => (e, UrlStyle::Path),
        None => (
            format!("https://s3.{region}.amazonaws.com"),
            UrlStyle::VirtualHost,
        ),
    };
    let endpoint = endpoint
        .parse()
        .with_context(|| format!("the S3 endpoint {endpoint:?}"))?;
    let bucket = Bucket::new(endpoint, style, bucket.to_string(), region)
        .map_err(|e| anyhow::anyhow!("the S3 bucket of {url}: {e}"))?;
    let (Some(id), Some(secret)) = (env("AWS_ACCESS_KEY_ID"), env("AWS_SECRET_ACCESS_KEY")) else {
        bail!("{url}: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY");
    };
    let credentials = match env("AWS_SESSION_TOKEN") {
        Some(t) => Credentials::new_with_token(id, secret, t),
        None => Credentials::new(id, secret),
    };
    Ok(Some(Location {
        bucket,
        credentials,
        key: key.to_string(),
    }))
}

type Client = hyper_util::client::legacy::Client<
    hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>,
    http_body_util::combinators::BoxBody<Bytes, std::io::Error>,
>;

fn client() -> anyhow::Result<Client> {
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_native_roots()
        .context("the system's CA certificates")?
        .https_or_http()
        .enable_http1()
        .build();
    Ok(
        hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
            .build(https),
    )
}

fn empty() -> http_body_util::combinators::BoxBody<Bytes, std::io::Error> {
    http_body_util::Empty::new()
        .map_err(|never| match never {})
        .boxed()
}

/// The error of a refused request: its status and S3's message.
async fn refusal(what: &str, resp: http::Response<hyper::body::Incoming>) -> anyhow::Error {
    let status = resp.status();
    let body = resp
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    anyhow::anyhow!("{what}: {status} {}", String::from_utf8_lossy(&body).trim())
}

impl Location {
    /// The full URL of the object (for messages).
    pub fn describe(&self) -> String {
        format!("s3://{}/{}", self.bucket.name(), self.key)
    }

    /// Uploads `file` as the object.
    pub async fn upload(&self, file: &Path) -> anyhow::Result<u64> {
        let len = tokio::fs::metadata(file).await?.len();
        if len > MAX_PUT {
            bail!("the backup is {len} bytes, more than one S3 PUT takes (5 GiB)");
        }
        let url = self
            .bucket
            .put_object(Some(&self.credentials), &self.key)
            .sign(SIGNED_FOR);
        let f = tokio::fs::File::open(file).await?;
        // The file streams in 1 MiB frames.
        let frames = futures::stream::unfold(f, |mut f| async move {
            let mut buf = vec![0u8; 1 << 20];
            match f.read(&mut buf).await {
                Ok(0) => None,
                Ok(n) => {
                    buf.truncate(n);
                    Some((Ok(http_body::Frame::data(Bytes::from(buf))), f))
                }
                Err(e) => Some((Err(e), f)),
            }
        });
        let req = http::Request::put(url.as_str())
            .header(http::header::CONTENT_LENGTH, len)
            .body(http_body_util::StreamBody::new(frames).boxed())?;
        let resp = client()?.request(req).await.context("uploading to S3")?;
        if !resp.status().is_success() {
            return Err(refusal(&format!("uploading {}", self.describe()), resp).await);
        }
        Ok(len)
    }

    /// Downloads the object into `file`.
    pub async fn download(&self, file: &Path) -> anyhow::Result<u64> {
        let url = self
            .bucket
            .get_object(Some(&self.credentials), &self.key)
            .sign(SIGNED_FOR);
        let req = http::Request::get(url.as_str()).body(empty())?;
        let resp = client()?
            .request(req)
            .await
            .context("downloading from S3")?;
        if !resp.status().is_success() {
            return Err(refusal(&format!("downloading {}", self.describe()), resp).await);
        }
        let mut out = tokio::fs::File::create(file).await?;
        let mut body = resp.into_body();
        let mut len = 0u64;
        while let Some(frame) = body.frame().await {
            if let Ok(data) = frame.context("downloading from S3")?.into_data() {
                out.write_all(&data).await?;
                len += data.len() as u64;
            }
        }
        out.sync_all().await?;
        Ok(len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s3_urls_name_a_bucket_and_a_key_or_prefix() {
        assert!(parse("/var/backups", None).unwrap().is_none());
        assert!(parse("s3:///key", Some("http://127.0.0.1:9000")).is_err());
    }
}
