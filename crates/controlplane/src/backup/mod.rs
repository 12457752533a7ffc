//! Backup and restore of a logical cluster.
//!
//! **A backup** is every key under the cluster's prefix read at one storage revision (a
//! consistent snapshot, paged), with its credentials (the `matryoshka-system/<cluster>-pki`
//! Secret: CA and service-account keys, so restored kubeconfigs and legacy tokens keep
//! working), as JSON lines ([`FORMAT`]):
//!
//! ```text
//! {"format":"matryoshka.dev/cluster-backup/v1","cluster":"a","revision":812,"created":"…"}
//! {"credentials":{…the pki Secret…}}
//! {"k":"core/pods/default/web-0","v":{…the stored object…}}
//! …
//! {"volume":{"name":"pvc-…"}}
//! {"file":{"volume":"pvc-…","path":"data/db","type":"file","mode":420,"offset":0,"data":"…"}}
//! …
//! {"end":{"keys":1234,"volumes":1}}
//! ```
//!
//! The volume lines carry the data of the cluster's volumes that live on the platform
//! ([`volumes`]). The trailer is written only once every key and file is: a truncated backup
//! is detected on restore.
//!
//! **A restore** creates a new cluster from a backup in chunks (a request body is bounded):
//! the first chunk creates the LogicalCluster marked [`RESTORING`] — not served, not
//! provisioned — and its credentials; each chunk writes its keys under the new prefix (fresh
//! revisions: time never goes backwards for a watcher); the last one checks that the cluster
//! holds exactly the backup's keys, records the revision the restore completed at
//! ([`RESTORED_REVISION`]) and lets the provisioner make the cluster Ready, keeping the restored
//! credentials and objects. A watch or list of the restored cluster from a resourceVersion
//! before that revision is answered 410 Gone, as etcd answers after a restore with a bumped and
//! compacted revision, so clients re-list instead of mixing two histories. A failed restore
//! leaves a LogicalCluster that deleting removes with every key it wrote.

use std::sync::Arc;

use apimachinery::meta;
use apimachinery::status::ApiError;
use bytes::Bytes;
use registry::store::{Location, WriteOptions};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::ControlPlane;
use crate::tenancy::{GROUP, PLURAL};
use crate::trust::{SYSTEM_NAMESPACE, pki_secret_name};
use apimachinery::cluster;

pub mod volumes;

/// The format of a backup.
pub const FORMAT: &str = "matryoshka.dev/cluster-backup/v1";
/// On a LogicalCluster being restored: it is not provisioned (nor served) until the last chunk.
pub const RESTORING: &str = "core.matryoshka.dev/restoring";
/// On a restored LogicalCluster: the backup it came from (`<cluster>@<revision>`).
pub const RESTORED_FROM: &str = "core.matryoshka.dev/restored-from";
/// On a restored LogicalCluster: the storage revision its restore completed at; watches and
/// lists from before it are answered 410 Gone.
pub const RESTORED_REVISION: &str = "core.matryoshka.dev/restored-revision";
/// Keys read per page while taking a backup.
const PAGE: usize = 1000;
/// Keys written at once while restoring.
const PARALLEL_WRITES: usize = 64;

/// The first line of a backup.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Header {
    pub format: String,
    /// The cluster backed up.
    pub cluster: String,
    /// The storage revision every key was read at.
    pub revision: i64,
    /// When the backup was taken (RFC 3339).
    pub created: String,
}

/// A backup about to be streamed: checked and pinned to a revision, so errors reach the
/// caller before any byte does.
pub struct Snapshot {
    pub header: Header,
    credentials: Value,
    prefix: String,
}

/// Starts a backup of `cluster` (a served logical cluster) at the current revision.
pub async fn snapshot(cp: &ControlPlane, name: &str) -> Result<Snapshot, ApiError> {
    if name == cluster::ROOT || !crate::clusters::exists(cp, name).await {
        return Err(ApiError::not_found(PLURAL, GROUP, name));
    }
    let credentials = cp
        .store
        .shared_cache()
        .get(
            "",
            "secrets",
            cluster::ROOT,
            SYSTEM_NAMESPACE,
            &pki_secret_name(name),
        )
        .ok_or_else(|| ApiError::internal(format!("cluster {name} has no credentials")))?
        .value()
        .as_ref()
        .clone();
    let revision = cp
        .store
        .shard(name)?
        .storage
        .current_revision()
        .await
        .map_err(|e| ApiError::service_unavailable(format!("reading the store's revision: {e}")))?;
    Ok(Snapshot {
        header: Header {
            format: FORMAT.into(),
            cluster: name.into(),
            revision,
            created: registry::store::now(),
        },
        credentials,
        prefix: registry::key::cluster(name),
    })
}

impl Snapshot {
    /// Writes the backup into `tx`, line by line; stops early (without the trailer) when the
    /// store fails or the receiver is gone.
    pub async fn stream(self, cp: Arc<ControlPlane>, tx: mpsc::Sender<Bytes>) {
        if let Err(e) = self.write(&cp, &tx).await {
            tracing::warn!(cluster = %self.header.cluster, error = %e, "the backup stopped before its end");
        }
    }

    async fn write(&self, cp: &ControlPlane, tx: &mpsc::Sender<Bytes>) -> Result<(), ApiError> {
        send(tx, line(&self.header)?).await?;
        send(tx, line(&json!({ "credentials": self.credentials }))?).await?;
        let mut keys = 0u64;
        let mut on_platform = Vec::new();
        let storage = cp.store.shard(&self.header.cluster)?.storage.clone();
        let mut pages = Pages::new(storage, &self.prefix, Some(self.header.revision));
        while let Some(items) = pages.next().await? {
            let mut buf = Vec::with_capacity(items.iter().map(|kv| kv.value.len() + 64).sum());
            for kv in &items {
                let Some(suffix) = kv.key.strip_prefix(self.prefix.as_bytes()) else {
                    continue;
                };
                let suffix = String::from_utf8_lossy(suffix);
                if let Some(pv) = suffix.strip_prefix(volumes::PV_KEYS)
                    && let Some(dir) =
                        volumes::trusted_directory(cp, &self.header.cluster, pv, &kv.value)
                {
                    on_platform.push((pv.to_string(), dir));
                }
                entry(&mut buf, &suffix, &kv.value);
                keys += 1;
            }
            send(tx, buf).await?;
        }
        let count = on_platform.len();
        for (name, dir) in on_platform {
            volumes::send_volume(tx.clone(), name, dir).await?;
        }
        send(tx, line(&json!({"end": {"keys": keys, "volumes": count}}))?).await
    }
}

async fn send(tx: &mpsc::Sender<Bytes>, bytes: Vec<u8>) -> Result<(), ApiError> {
    tx.send(Bytes::from(bytes))
        .await
        .map_err(|_| ApiError::internal("the client went away"))
}

/// The keys under a prefix, [`PAGE`] at a time, all read at one revision.
struct Pages<'a> {
    storage: Arc<dyn storage::Storage>,
    prefix: &'a str,
    revision: Option<i64>,
    token: Option<String>,
    done: bool,
}

impl<'a> Pages<'a> {
    /// At `revision`, or at the current one for every page.
    fn new(storage: Arc<dyn storage::Storage>, prefix: &'a str, revision: Option<i64>) -> Self {
        Pages {
            storage,
            prefix,
            revision,
            token: None,
            done: false,
        }
    }

    async fn next(&mut self) -> Result<Option<Vec<storage::KeyValue>>, ApiError> {
        if self.done {
            return Ok(None);
        }
        let page = self
            .storage
            .list(
                self.prefix.as_bytes(),
                storage::ListOptions {
                    revision: self.revision,
                    limit: Some(PAGE),
                    continue_token: self.token.take(),
                },
            )
            .await
            .map_err(|e| ApiError::service_unavailable(format!("reading the cluster: {e}")))?;
        self.token = page.continue_token;
        self.done = self.token.is_none();
        Ok(Some(page.items))
    }
}

fn line(v: &impl Serialize) -> Result<Vec<u8>, ApiError> {
    let mut out = serde_json::to_vec(v).map_err(ApiError::internal)?;
    out.push(b'\n');
    Ok(out)
}

/// One key's line: its stored JSON inline, or base64 when it is not a one-line JSON object.
fn entry(buf: &mut Vec<u8>, key: &str, value: &[u8]) {
    use base64::Engine;
    buf.extend_from_slice(b"{\"k\":");
    buf.extend_from_slice(&serde_json::to_vec(key).unwrap_or_default());
    if value.first() == Some(&b'{') && !value.contains(&b'\n') {
        buf.extend_from_slice(b",\"v\":");
        buf.extend_from_slice(value);
    } else {
        buf.extend_from_slice(b",\"b64\":\"");
        buf.extend_from_slice(
            base64::engine::general_purpose::STANDARD
                .encode(value)
                .as_bytes(),
        );
        buf.push(b'"');
    }
    buf.extend_from_slice(b"}\n");
}

/// One key of a backup.
#[derive(Debug, Deserialize)]
pub struct Entry {
    /// The key below the cluster's prefix.
    pub k: String,
    #[serde(default)]
    pub v: Option<Box<serde_json::value::RawValue>>,
    #[serde(default)]
    pub b64: Option<String>,
}

impl Entry {
    fn value(&self) -> Result<Bytes, String> {
        use base64::Engine;
        match (&self.v, &self.b64) {
            (Some(v), _) => Ok(Bytes::copy_from_slice(v.get().as_bytes())),
            (None, Some(b)) => base64::engine::general_purpose::STANDARD
                .decode(b)
                .map(Bytes::from)
                .map_err(|e| e.to_string()),
            (None, None) => Err("no value".into()),
        }
    }
}

/// One request of a restore (`POST .../logicalclusters/<new>/restore`).
#[derive(Debug, Deserialize)]
pub struct Chunk {
    /// The backup's header: on the first chunk only, which creates the cluster.
    #[serde(default)]
    pub source: Option<Header>,
    /// The backup's credentials (first chunk).
    #[serde(default)]
    pub credentials: Option<Value>,
    #[serde(default)]
    pub objects: Vec<Entry>,
    /// Volume data ([`volumes`]), in the backup's order.
    #[serde(default)]
    pub files: Vec<volumes::Item>,
    /// On the last chunk: how many keys the backup holds.
    #[serde(default)]
    pub complete: Option<u64>,
    /// On the last chunk: how many volumes it holds the data of.
    #[serde(default)]
    pub volumes: Option<u64>,
    /// On the first chunk: the DataStore the new cluster is bound to (the request's
    /// `dataStore` parameter; none: the shared store).
    #[serde(skip)]
    pub data_store: Option<String>,
}

/// What a restore request did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Restored {
    pub written: usize,
    /// Set once the last chunk made the cluster Ready-to-provision: the revision it completed at.
    pub completed_at: Option<i64>,
}

fn lc_location(name: &str) -> Location<'_> {
    Location {
        cluster: cluster::ROOT,
        namespace: "",
        name,
    }
}

/// Applies one chunk of a restore into the new cluster `name`.
pub async fn restore(cp: &ControlPlane, name: &str, chunk: Chunk) -> Result<Restored, ApiError> {
    let lc_res = cp
        .catalog
        .lookup(cluster::ROOT, GROUP, crate::tenancy::VERSION, PLURAL)
        .ok_or_else(|| ApiError::internal("LogicalCluster is not served"))?;
    if let Some(source) = &chunk.source {
        begin(
            cp,
            &lc_res,
            name,
            source,
            chunk.credentials.as_ref(),
            chunk.data_store.as_deref(),
        )
        .await?;
    } else {
        let restoring = cp
            .store
            .shared_cache()
            .get(GROUP, PLURAL, cluster::ROOT, "", name)
            .is_some_and(|o| meta::annotation(&o.value(), RESTORING).is_some());
        if !restoring {
            return Err(ApiError::conflict(
                PLURAL,
                GROUP,
                name,
                "the cluster is not being restored: send the backup's first chunk first",
            ));
        }
    }
    let prefix = registry::key::cluster(name);
    let storage = cp.store.shard(name)?.storage.clone();
    let mut errors = Vec::new();
    for batch in chunk.objects.chunks(PARALLEL_WRITES) {
        let results =
            futures::future::join_all(batch.iter().map(|e| write_key(&*storage, &prefix, e))).await;
        errors.extend(results.into_iter().filter_map(Result::err));
    }
    if let Some(first) = errors.first() {
        return Err(ApiError::bad_request(format!(
            "{} keys of the chunk were not restored; the first: {first}",
            errors.len()
        )));
    }
    volumes::restore(cp, name, chunk.files).await?;
    let completed_at = match chunk.complete {
        Some(expected) => {
            Some(complete(cp, &lc_res, name, expected, chunk.volumes.unwrap_or(0)).await?)
        }
        None => None,
    };
    Ok(Restored {
        written: chunk.objects.len(),
        completed_at,
    })
}

/// Creates the LogicalCluster (marked restoring, bound to `data_store` when given) and its
/// credentials.
async fn begin(
    cp: &ControlPlane,
    lc_res: &registry::ResourceDef,
    name: &str,
    source: &Header,
    credentials: Option<&Value>,
    data_store: Option<&str>,
) -> Result<(), ApiError> {
    if source.format != FORMAT {
        return Err(ApiError::bad_request(format!(
            "not a cluster backup of format {FORMAT}: {:?}",
            source.format
        )));
    }
    let credentials = credentials
        .ok_or_else(|| ApiError::bad_request("the first chunk carries the backup's credentials"))?;
    let data = credentials
        .get("data")
        .filter(|d| d.get("ca.crt").is_some() && d.get("ca.key").is_some())
        .ok_or_else(|| ApiError::bad_request("the backup's credentials hold no CA"))?;
    if let Some(ds) = data_store {
        let mut errs = apimachinery::ErrorList::new();
        crate::datastores::validate_binding(&json!({"spec": {"dataStore": ds}}), &mut errs);
        if !errs.is_empty() {
            return Err(ApiError::bad_request(errs.aggregate_message()));
        }
    }
    // The datastore must be there (and connected here); nothing of another cluster may be in
    // the way.
    let target = cp.store.shards.named(data_store.unwrap_or(""))?;
    let existing = target
        .storage
        .list(
            registry::key::cluster(name).as_bytes(),
            storage::ListOptions {
                limit: Some(1),
                ..Default::default()
            },
        )
        .await
        .map_err(|e| ApiError::service_unavailable(e.to_string()))?;
    if !existing.items.is_empty() {
        return Err(ApiError::already_exists(PLURAL, GROUP, name));
    }
    volumes::clear(cp, name).await?;
    let mut lc = json!({
        "apiVersion": format!("{GROUP}/{}", crate::tenancy::VERSION),
        "kind": "LogicalCluster",
        "metadata": {"name": name, "annotations": {
            RESTORING: "true",
            RESTORED_FROM: format!("{}@{}", source.cluster, source.revision),
        }},
    });
    if let Some(ds) = data_store {
        lc["spec"] = json!({"dataStore": ds});
    }
    let created = cp
        .store
        .create(lc_res, &lc_location(""), lc, &WriteOptions::default())
        .await?;
    // Where its keys go is read from the shared store's cache: the restore writes them only
    // once the cache has the new LogicalCluster.
    if let Ok(rev) = meta::resource_version(&created).parse::<i64>()
        && !cp
            .store
            .shared_cache()
            .wait_for(rev, registry::store::RESOURCE_VERSION_WAIT)
            .await
    {
        return Err(ApiError::service_unavailable(
            "the new cluster is not in the watch cache yet",
        ));
    }
    let mut annotations = credentials
        .pointer("/metadata/annotations")
        .cloned()
        .unwrap_or_else(|| json!({}));
    if !annotations.is_object() {
        annotations = json!({});
    }
    let secret = json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {
            "name": pki_secret_name(name),
            "namespace": SYSTEM_NAMESPACE,
            "labels": {"core.matryoshka.dev/cluster": name},
            "annotations": annotations,
        },
        "data": data,
    });
    let secrets = cp
        .catalog
        .builtin("", "secrets")
        .ok_or_else(|| ApiError::internal("secrets are not served"))?;
    let loc = Location {
        cluster: cluster::ROOT,
        namespace: SYSTEM_NAMESPACE,
        name: "",
    };
    match cp
        .store
        .create(&secrets, &loc, secret, &WriteOptions::default())
        .await
    {
        Ok(_) => Ok(()),
        Err(e) => {
            // Leave nothing behind: the LogicalCluster goes with its (absent) keys.
            let _ = cp
                .store
                .delete(lc_res, &lc_location(name), &Default::default())
                .await;
            Err(e)
        }
    }
}

/// Writes one key under the new prefix; a key some loop of the control plane wrote first
/// (an APIService of a restored CRD, say) is overwritten with the backup's value.
async fn write_key(storage: &dyn storage::Storage, prefix: &str, e: &Entry) -> Result<(), String> {
    if e.k.is_empty() || e.k.starts_with('/') || e.k.split('/').any(|s| s == "..") {
        return Err(format!("invalid key {:?}", e.k));
    }
    let key = format!("{prefix}{}", e.k);
    let value = e.value().map_err(|why| format!("{}: {why}", e.k))?;
    crate::moves::put(storage, key.as_bytes(), value)
        .await
        .map_err(|err| format!("{}: {err}", e.k))
}

/// The last chunk: checks the cluster holds the backup's keys, then lets it be provisioned.
async fn complete(
    cp: &ControlPlane,
    lc_res: &registry::ResourceDef,
    name: &str,
    expected: u64,
    expected_volumes: u64,
) -> Result<i64, ApiError> {
    let prefix = registry::key::cluster(name);
    // The restored volumes: each PersistentVolume now points at its data's new directory.
    let restored = volumes::restored(cp, name).await;
    if restored.len() as u64 != expected_volumes {
        return Err(ApiError::bad_request(format!(
            "the restore wrote {} volumes, the backup holds {expected_volumes}: chunks are missing",
            restored.len()
        )));
    }
    for (volume, dir) in &restored {
        let key = format!("{prefix}{}{volume}", volumes::PV_KEYS);
        let storage = &cp.store.shard(name)?.storage;
        let why = |e: String| ApiError::bad_request(format!("volume {volume}: {e}"));
        let kv = storage
            .get(key.as_bytes())
            .await
            .map_err(|e| ApiError::service_unavailable(e.to_string()))?
            .ok_or_else(|| why("the backup holds its data but not its PersistentVolume".into()))?;
        let value = volumes::repoint(&kv.value, dir).map_err(why)?;
        storage
            .update(key.as_bytes(), value, kv.mod_revision)
            .await
            .map_err(|e| ApiError::service_unavailable(e.to_string()))?;
    }
    let mut held = 0u64;
    let shard = cp.store.shard(name)?;
    let mut pages = Pages::new(shard.storage.clone(), &prefix, None);
    while let Some(items) = pages.next().await? {
        held += items.len() as u64;
    }
    // The control plane's loops may have added keys (APIServices of restored CRDs): at least
    // the backup's keys must be there.
    if held < expected {
        return Err(ApiError::bad_request(format!(
            "the restored cluster holds {held} keys, the backup {expected}: chunks are missing"
        )));
    }
    let revision = shard
        .storage
        .current_revision()
        .await
        .map_err(|e| ApiError::service_unavailable(e.to_string()))?;
    cp.store
        .update_with(
            lc_res,
            &lc_location(name),
            &WriteOptions::default(),
            |cur| {
                let mut next = cur
                    .cloned()
                    .ok_or_else(|| ApiError::not_found(PLURAL, GROUP, name))?;
                meta::remove(&mut next, "resourceVersion");
                let ann = meta::metadata_mut(&mut next)
                    .entry("annotations")
                    .or_insert_with(|| json!({}));
                if let Some(a) = ann.as_object_mut() {
                    a.remove(RESTORING);
                    a.insert(RESTORED_REVISION.into(), json!(revision.to_string()));
                }
                Ok(next)
            },
        )
        .await?;
    tracing::info!(
        cluster = name,
        keys = held,
        revision,
        "logical cluster restored"
    );
    Ok(revision)
}

/// The revision a restored cluster's history begins at: resourceVersions before it belong to
/// another history (410 Gone).
pub fn restored_revision(cp: &ControlPlane, name: &str) -> Option<i64> {
    if name == cluster::ROOT {
        return None;
    }
    let lc = cp
        .store
        .shared_cache()
        .get(GROUP, PLURAL, cluster::ROOT, "", name)?;
    meta::annotation(&lc.value(), RESTORED_REVISION).and_then(|r| r.parse().ok())
}

/// Whether a LogicalCluster waits for its restore to complete (not provisioned meanwhile).
pub fn restoring(obj: &Value) -> bool {
    meta::annotation(obj, RESTORING).is_some()
}

/// A restore request stays below the API server's 3 MiB body limit.
pub const CHUNK_BYTES: usize = 2 << 20;

/// The bodies of the restore requests for a backup read line by line ([`restore`]'s chunks):
/// the first carries the header and the credentials, each holds up to [`CHUNK_BYTES`] of
/// keys, the last the key count of the trailer. Values are passed through without being
/// parsed. A backup without its trailer is an error at its end, before the last chunk.
pub struct RestoreChunks<I> {
    lines: I,
    first: Option<String>,
    done: bool,
}

/// Reads the header and credentials lines of a backup, then yields its restore chunks.
pub fn restore_chunks<I>(mut lines: I) -> Result<(Header, RestoreChunks<I>), String>
where
    I: Iterator<Item = std::io::Result<String>>,
{
    let mut next = |what: &str| -> Result<String, String> {
        lines
            .next()
            .ok_or_else(|| format!("the backup has no {what}"))?
            .map_err(|e| e.to_string())
    };
    let header_line = next("header")?;
    let header: Header =
        serde_json::from_str(&header_line).map_err(|e| format!("the backup's header: {e}"))?;
    if header.format != FORMAT {
        return Err(format!("not a cluster backup of format {FORMAT}"));
    }
    let credentials: Value = serde_json::from_str(&next("credentials")?)
        .map_err(|e| format!("the backup's credentials: {e}"))?;
    let first = format!(
        "\"source\":{header_line},\"credentials\":{}",
        credentials["credentials"]
    );
    Ok((
        header,
        RestoreChunks {
            lines,
            first: Some(first),
            done: false,
        },
    ))
}

impl<I: Iterator<Item = std::io::Result<String>>> Iterator for RestoreChunks<I> {
    type Item = Result<String, String>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let mut body = String::from("{");
        if let Some(f) = self.first.take() {
            body.push_str(&f);
            body.push(',');
        }
        body.push_str("\"objects\":[");
        let mut empty = true;
        let mut files = String::new();
        let close = |body: &mut String, files: &str| {
            body.push_str("],\"files\":[");
            body.push_str(files);
            body.push(']');
        };
        loop {
            let line = match self.lines.next() {
                Some(Ok(l)) => l,
                Some(Err(e)) => {
                    self.done = true;
                    return Some(Err(e.to_string()));
                }
                None => {
                    self.done = true;
                    return Some(Err("the backup ends without its trailer".into()));
                }
            };
            if line.starts_with("{\"end\"") {
                let end = serde_json::from_str::<Value>(&line).ok();
                let count = |what: &str| {
                    end.as_ref()
                        .and_then(|v| v.pointer(&format!("/end/{what}")))
                        .and_then(Value::as_u64)
                };
                self.done = true;
                let Some(keys) = count("keys") else {
                    return Some(Err("the backup's trailer is unreadable".into()));
                };
                close(&mut body, &files);
                let volumes = count("volumes").unwrap_or(0);
                body.push_str(&format!(",\"complete\":{keys},\"volumes\":{volumes}}}"));
                return Some(Ok(body));
            }
            if line.starts_with("{\"volume\"") || line.starts_with("{\"file\"") {
                if !files.is_empty() {
                    files.push(',');
                }
                files.push_str(&line);
            } else {
                if !empty {
                    body.push(',');
                }
                body.push_str(&line);
                empty = false;
            }
            if body.len() + files.len() >= CHUNK_BYTES {
                close(&mut body, &files);
                body.push('}');
                return Some(Ok(body));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &str) -> impl Iterator<Item = std::io::Result<String>> + '_ {
        text.lines().map(|l| Ok(l.to_string()))
    }

    #[test]
    fn a_backup_becomes_chunks_that_parse_and_carry_every_key_once() {
        let big = "x".repeat(600_000);
        let mut text = format!(
            "{{\"format\":\"{FORMAT}\",\"cluster\":\"a\",\"revision\":7,\"created\":\"t\"}}\n{{\"credentials\":{{\"data\":{{}}}}}}\n"
        );
        for i in 0..10 {
            text.push_str(&format!(
                "{{\"k\":\"core/configmaps/d/c{i}\",\"v\":{{\"data\":\"{big}\"}}}}\n"
            ));
        }
        text.push_str("{\"volume\":{\"name\":\"pvc-1\"}}\n");
        for i in 0..4 {
            text.push_str(&format!(
                "{{\"file\":{{\"volume\":\"pvc-1\",\"path\":\"f\",\"type\":\"file\",\"mode\":420,\"offset\":{},\"data\":\"{}\"}}}}\n",
                i * 600_000,
                "A".repeat(800_000)
            ));
        }
        text.push_str("{\"end\":{\"keys\":10,\"volumes\":1}}\n");
        let (header, chunks) = restore_chunks(lines(&text)).unwrap();
        assert_eq!((header.cluster.as_str(), header.revision), ("a", 7));
        let chunks: Vec<Chunk> = chunks
            .map(|c| serde_json::from_str(&c.unwrap()).unwrap())
            .collect();
        assert!(chunks.len() >= 3, "{}", chunks.len());
        assert!(chunks[0].source.is_some() && chunks[0].credentials.is_some());
        assert!(chunks[1..].iter().all(|c| c.source.is_none()));
        assert_eq!(chunks.iter().map(|c| c.objects.len()).sum::<usize>(), 10);
        assert_eq!(chunks.last().unwrap().complete, Some(10));
        assert_eq!(chunks.last().unwrap().volumes, Some(1));
        // The volume lines keep their order, after the keys.
        let files: Vec<&volumes::Item> = chunks.iter().flat_map(|c| &c.files).collect();
        assert_eq!(files.len(), 5);
        assert!(matches!(files[0], volumes::Item::Volume { name } if name == "pvc-1"));
        for (i, f) in files[1..].iter().enumerate() {
            assert!(matches!(f, volumes::Item::File(e) if e.offset == Some(i as u64 * 600_000)));
        }
    }

    #[test]
    fn a_truncated_backup_ends_in_an_error_not_a_last_chunk() {
        let text = format!(
            "{{\"format\":\"{FORMAT}\",\"cluster\":\"a\",\"revision\":7,\"created\":\"t\"}}\n{{\"credentials\":{{}}}}\n{{\"k\":\"a\",\"v\":{{}}}}\n"
        );
        let (_, chunks) = restore_chunks(lines(&text)).unwrap();
        let all: Vec<_> = chunks.collect();
        assert!(all.last().unwrap().is_err());
        assert!(restore_chunks(lines("{\"format\":\"other\"}\n")).is_err());
    }
}
