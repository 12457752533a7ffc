//! `matryoshka backup create|restore`: a logical cluster's backup to a file and back, through
//! the API with the root cluster's admin credentials (the `snapshot` and `restore`
//! subresources of LogicalCluster; the format is `controlplane::backup`'s JSON lines).

use std::io::{BufRead, Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use http_body_util::BodyExt;

const API: &str = "/apis/core.matryoshka.dev/v1alpha1/logicalclusters";

#[derive(clap::Subcommand, Debug)]
pub enum BackupCommand {
    /// Writes a consistent backup of a logical cluster (every object at one revision, and its
    /// credentials) to a file.
    Create(CreateArgs),
    /// Restores a backup as a new logical cluster.
    Restore(RestoreArgs),
}

#[derive(clap::Args, Debug)]
pub struct CreateArgs {
    /// The logical cluster (a TenantCluster's is named in its `status.logicalCluster`).
    pub cluster: String,
    /// A directory (the file is named `<cluster>-<unix time>.backup`), a file, or an S3
    /// location: `s3://bucket/key`, or `s3://bucket/prefix/` (named as in a directory).
    #[arg(long)]
    pub to: String,
    /// The S3 endpoint of another S3 than AWS's (also `AWS_ENDPOINT_URL`).
    #[arg(long)]
    pub s3_endpoint: Option<String>,
    /// The root cluster's admin kubeconfig.
    #[arg(long, default_value = "./matryoshka-data/admin.conf")]
    pub kubeconfig: PathBuf,
}

#[derive(clap::Args, Debug)]
pub struct RestoreArgs {
    /// The backup: a file, or an S3 object `s3://bucket/key`.
    pub file: String,
    /// The S3 endpoint of another S3 than AWS's (also `AWS_ENDPOINT_URL`).
    #[arg(long)]
    pub s3_endpoint: Option<String>,
    /// The name of the new logical cluster (it must not exist).
    #[arg(long = "as")]
    pub name: String,
    /// The DataStore the new cluster's keys go to (default: the shared store).
    #[arg(long)]
    pub data_store: Option<String>,
    /// The root cluster's admin kubeconfig.
    #[arg(long, default_value = "./matryoshka-data/admin.conf")]
    pub kubeconfig: PathBuf,
}

pub async fn run(cmd: BackupCommand) -> anyhow::Result<()> {
    match cmd {
        BackupCommand::Create(a) => create(a).await,
        BackupCommand::Restore(a) => restore(a).await,
    }
}

async fn client(kubeconfig: &Path) -> anyhow::Result<kube::Client> {
    runtime::renewing::client(kubeconfig, None)
        .await
        .with_context(|| format!("reading {}", kubeconfig.display()))
}

/// The message of a failed request's `Status`, or its body.
async fn failure(resp: http::Response<kube::client::Body>) -> String {
    let code = resp.status();
    let body = resp
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let message = serde_json::from_slice::<serde_json::Value>(&body)
        .ok()
        .and_then(|v| v.get("message").and_then(|m| m.as_str()).map(String::from))
        .unwrap_or_else(|| String::from_utf8_lossy(&body).into_owned());
    format!("{code}: {message}")
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|t| t.as_secs())
        .unwrap_or_default()
}

async fn create(args: CreateArgs) -> anyhow::Result<()> {
    let started = Instant::now();
    let client = client(&args.kubeconfig).await?;
    let name = format!("{}-{}.backup", args.cluster, unix_now());
    let s3 = crate::s3::parse(&args.to, args.s3_endpoint.as_deref())?.map(|mut l| {
        if l.key.is_empty() || l.key.ends_with('/') {
            l.key.push_str(&name);
        }
        l
    });
    // An S3 backup is written to a local file first, uploaded once whole.
    let to = PathBuf::from(&args.to);
    let path = match &s3 {
        Some(_) => std::env::temp_dir().join(format!("matryoshka-{}-{name}", std::process::id())),
        None if to.is_dir() => to.join(&name),
        None => to,
    };
    let req = http::Request::get(format!("{API}/{}/snapshot", args.cluster))
        .body(kube::client::Body::empty())?;
    let resp = client.send(req).await?;
    if !resp.status().is_success() {
        bail!("backing up {}: {}", args.cluster, failure(resp).await);
    }
    // Written beside the target and renamed once complete: a file at the path is a whole backup.
    let partial = path.with_extension("partial");
    let mut out = std::io::BufWriter::new(
        std::fs::File::create(&partial)
            .with_context(|| format!("creating {}", partial.display()))?,
    );
    let mut body = resp.into_body();
    let mut bytes = 0u64;
    let mut tail = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.context("reading the backup")?;
        if let Ok(data) = frame.into_data() {
            out.write_all(&data)?;
            bytes += data.len() as u64;
            tail.extend_from_slice(&data);
            if tail.len() > 4096 {
                tail.drain(..tail.len() - 4096);
            }
        }
    }
    out.flush()?;
    out.get_ref().sync_all()?;
    drop(out);
    let Some(keys) = trailer(&tail) else {
        let _ = std::fs::remove_file(&partial);
        bail!(
            "the backup of {} ended before its end (the server's log says why)",
            args.cluster
        );
    };
    std::fs::rename(&partial, &path)?;
    let place = match &s3 {
        Some(location) => {
            let uploaded = location.upload(&path).await;
            let _ = std::fs::remove_file(&path);
            uploaded?;
            location.describe()
        }
        None => path.display().to_string(),
    };
    println!(
        "backed up {} ({keys} keys, {bytes} bytes) to {place} in {:.2}s",
        args.cluster,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The key count of a backup's trailer (`{"end":{"keys":N}}`), from its last bytes.
fn trailer(tail: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(tail).ok()?;
    let last = text.trim_end().rsplit('\n').next()?;
    let v: serde_json::Value = serde_json::from_str(last).ok()?;
    v.pointer("/end/keys")?.as_u64()
}

async fn restore(args: RestoreArgs) -> anyhow::Result<()> {
    match crate::s3::parse(&args.file, args.s3_endpoint.as_deref())? {
        Some(location) => {
            let local = std::env::temp_dir().join(format!(
                "matryoshka-{}-{}.backup",
                std::process::id(),
                unix_now()
            ));
            let result = async {
                location.download(&local).await?;
                restore_file(&args, &local, &location.describe()).await
            }
            .await;
            let _ = std::fs::remove_file(&local);
            result
        }
        None => restore_file(&args, Path::new(&args.file), &args.file).await,
    }
}

/// Restores the backup in `path` (`shown` names it in messages).
async fn restore_file(args: &RestoreArgs, path: &Path, shown: &str) -> anyhow::Result<()> {
    let started = Instant::now();
    let mut file = std::fs::File::open(path).with_context(|| format!("opening {shown}"))?;
    // A truncated backup is refused before anything is written.
    let len = file.metadata()?.len();
    file.seek(std::io::SeekFrom::Start(len.saturating_sub(4096)))?;
    let mut tail = Vec::new();
    file.read_to_end(&mut tail)?;
    let expected = trailer(&tail)
        .with_context(|| format!("{} is not a complete backup (no trailer)", shown))?;
    file.rewind()?;
    let (header, chunks) =
        controlplane::backup::restore_chunks(std::io::BufReader::new(file).lines())
            .map_err(|e| anyhow::anyhow!("{shown}: {e}"))?;
    let client = client(&args.kubeconfig).await?;
    for chunk in chunks {
        let body = chunk.map_err(|e| anyhow::anyhow!("{shown}: {e}"))?;
        let query = args
            .data_store
            .as_deref()
            .map(|d| format!("?dataStore={d}"))
            .unwrap_or_default();
        let req = http::Request::post(format!("{API}/{}/restore{query}", args.name))
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(kube::client::Body::from(body.into_bytes()))?;
        let resp = client.send(req).await?;
        if !resp.status().is_success() {
            bail!(
                "restoring {} as {}: {}",
                header.cluster,
                args.name,
                failure(resp).await
            );
        }
    }
    // The cluster is provisioned from what was restored.
    let ready = format!("{API}/{}", args.name);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let req = http::Request::get(&ready).body(Vec::new())?;
        let v: serde_json::Value = client.request(req).await?;
        if v.pointer("/status/phase").and_then(|p| p.as_str()) == Some("Ready") {
            break;
        }
        if Instant::now() > deadline {
            bail!("{} was restored but is not Ready after 60 s", args.name);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    println!(
        "restored {} ({expected} keys) as {} in {:.2}s",
        header.cluster,
        args.name,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_trailer_is_read_from_a_backups_last_line_only() {
        assert_eq!(trailer(b"{\"k\":\"a\"}\n{\"end\":{\"keys\":3}}\n"), Some(3));
        assert_eq!(trailer(b"{\"end\":{\"keys\":3}}\n{\"k\":\"a\"}\n"), None);
        assert_eq!(trailer(b""), None);
    }
}
