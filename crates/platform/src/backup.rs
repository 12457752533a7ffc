//! The ClusterBackup controller: backups of a TenantCluster on a cron schedule (or once),
//! written by the platform into its backup directory, the oldest beyond `retention` deleted.
//!
//! A backup is the logical cluster's `snapshot` subresource (every object at one revision, with
//! its credentials), streamed to `<backup dir>/<namespace>/<cluster>/<unix time>.backup`
//! through a `.partial` file that is renamed once its trailer arrived, so a file under that name
//! is always whole. The directory is the operator's (`matryoshka up --backup-dir`), never a
//! path a tenant writes, and a schedule runs at most once per the operator's minimum interval
//! (`--backup-min-interval-seconds`); `retention` is at most 100 (the CRD's schema). `status.backups` lists what is kept; Events `BackupCreated` and
//! `BackupFailed` tell each outcome; the condition `Ready` the last one.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use http_body_util::BodyExt;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;

use runtime::client::{ClusterClients, ROOT};
use runtime::error::{Error, Result};
use runtime::events::Recorder;
use runtime::informer::{Change, Informer, ObjectKey, Store};
use runtime::queue::{Action, Queue};

use crate::conditions::{self, Cond};
use crate::install::FIELD_MANAGER;
use crate::resource::{ClusterBackup, TenantCluster};

/// How long a failed or waiting backup waits before the next look.
const RETRY: Duration = Duration::from_secs(10);

/// The ClusterBackup controller.
pub struct BackupController {
    clients: ClusterClients,
    backups: Store<ClusterBackup>,
    clusters: Store<TenantCluster>,
    queue: Arc<Queue<ObjectKey>>,
    events: Recorder,
    /// Where backups are written; `None`: the platform takes none.
    dir: Option<PathBuf>,
    /// The shortest time between two scheduled backups of one ClusterBackup.
    min_interval: Duration,
}

impl BackupController {
    pub fn new(
        clients: ClusterClients,
        backups: &Informer<ClusterBackup>,
        clusters: &Informer<TenantCluster>,
        dir: Option<PathBuf>,
        min_interval: Duration,
    ) -> Arc<Self> {
        let queue = Queue::new();
        let q = queue.clone();
        backups.on_change(move |c| {
            if !matches!(c, Change::Deleted(..)) {
                q.add(c.key().clone());
            }
        });
        // A cluster becoming Ready lets its waiting backups run.
        let q = queue.clone();
        let store = backups.store();
        clusters.on_change(move |c| {
            let key = c.key();
            for b in store.list_namespace(ROOT, &key.namespace) {
                if b.spec.get("cluster").and_then(Value::as_str) == Some(key.name.as_str()) {
                    q.add(ObjectKey::new(
                        ROOT,
                        &key.namespace,
                        b.metadata.name.as_deref().unwrap_or(""),
                    ));
                }
            }
        });
        let events = Recorder::start(clients.clone(), "matryoshka-platform");
        Arc::new(BackupController {
            clients,
            backups: backups.store(),
            clusters: clusters.store(),
            queue,
            events,
            dir,
            min_interval,
        })
    }

    pub fn queue(&self) -> Arc<Queue<ObjectKey>> {
        self.queue.clone()
    }

    pub async fn reconcile(&self, key: ObjectKey) -> Result<Action> {
        let Some(b) = self.backups.get(&key) else {
            return Ok(Action::AwaitChange);
        };
        if b.metadata.deletion_timestamp.is_some() {
            return Ok(Action::AwaitChange);
        }
        let api: Api<ClusterBackup> = Api::namespaced(self.clients.cluster(ROOT)?, &key.namespace);
        let Some(dir) = &self.dir else {
            return self
                .status(
                    &api,
                    &b,
                    false,
                    "NoBackupDirectory",
                    "the platform runs without a backup directory",
                    json!({}),
                )
                .await
                .map(|_| Action::AwaitChange);
        };
        let cluster = b.spec.get("cluster").and_then(Value::as_str).unwrap_or("");
        let tc = self
            .clusters
            .get(&ObjectKey::new(ROOT, &key.namespace, cluster));
        let lc = tc
            .as_ref()
            .filter(|tc| {
                tc.status_field("/conditions")
                    .and_then(Value::as_array)
                    .is_some_and(|c| {
                        c.iter()
                            .any(|c| c["type"] == "ControlPlaneReady" && c["status"] == "True")
                    })
            })
            .and_then(|tc| tc.status_field("/logicalCluster"))
            .and_then(Value::as_str)
            .map(String::from);
        let Some(lc) = lc else {
            self.status(
                &api,
                &b,
                false,
                "ClusterNotReady",
                &format!("TenantCluster {cluster:?} of this namespace is not serving"),
                json!({}),
            )
            .await?;
            return Ok(Action::RequeueAfter(RETRY));
        };
        // Due? Once when there is no schedule; else at the schedule's next time after the last.
        let now = Timestamp::now();
        let schedule = b.spec.get("schedule").and_then(Value::as_str).unwrap_or("");
        let last = b
            .status_field("/lastBackupTime")
            .and_then(Value::as_str)
            .and_then(apimachinery::time::parse_rfc3339);
        let created = b
            .metadata
            .creation_timestamp
            .as_ref()
            .map(|t| t.0)
            .unwrap_or(now);
        let next = if schedule.is_empty() {
            if last.is_some() {
                return Ok(Action::AwaitChange);
            }
            now
        } else {
            let parsed = match apimachinery::cron::parse_standard(schedule) {
                Ok(s) => s,
                Err(e) => {
                    self.status(
                        &api,
                        &b,
                        false,
                        "InvalidSchedule",
                        &format!("unparseable schedule {schedule:?}: {e}"),
                        json!({}),
                    )
                    .await?;
                    return Ok(Action::AwaitChange);
                }
            };
            let Some(t) = parsed.next(
                last.unwrap_or(created),
                &k8s_openapi::jiff::tz::TimeZone::UTC,
            ) else {
                return Ok(Action::AwaitChange);
            };
            // A tenant's schedule cannot make the platform back up more often than its
            // operator allows (each backup costs the platform's disk and a full read).
            match last.and_then(|l| l.checked_add(self.min_interval).ok()) {
                Some(earliest) if earliest > t => earliest,
                _ => t,
            }
        };
        let suspended = b
            .spec
            .get("suspend")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        if next > now || suspended {
            if suspended {
                return Ok(Action::AwaitChange);
            }
            let wait = next.as_millisecond().saturating_sub(now.as_millisecond());
            return Ok(Action::RequeueAfter(Duration::from_millis(
                u64::try_from(wait).unwrap_or(0).max(10),
            )));
        }
        let target = dir.join(&key.namespace).join(cluster);
        match self.take(&lc, &target).await {
            Ok(taken) => {
                let retention =
                    b.spec.get("retention").and_then(Value::as_u64).unwrap_or(7) as usize;
                let mut kept: Vec<Value> = b
                    .status_field("/backups")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                kept.push(taken.clone());
                while kept.len() > retention.max(1) {
                    let old = kept.remove(0);
                    if let Some(f) = old.get("file").and_then(Value::as_str)
                        && Path::new(f).starts_with(dir)
                    {
                        let _ = tokio::fs::remove_file(f).await;
                    }
                }
                let at = conditions::now();
                self.events.about(
                    ROOT,
                    &*b,
                    "Normal",
                    "BackupCreated",
                    format!(
                        "backed up {} keys of {cluster} to {}",
                        taken["keys"],
                        taken["file"].as_str().unwrap_or("")
                    ),
                );
                let next_time = if schedule.is_empty() {
                    Value::Null
                } else {
                    apimachinery::cron::parse_standard(schedule)
                        .ok()
                        .and_then(|s| {
                            s.next(Timestamp::now(), &k8s_openapi::jiff::tz::TimeZone::UTC)
                        })
                        .map(|t| json!(apimachinery::time::format_time(t)))
                        .unwrap_or(Value::Null)
                };
                self.status(
                    &api,
                    &b,
                    true,
                    "BackupSucceeded",
                    &format!("the last backup holds {} keys", taken["keys"]),
                    json!({"backups": kept, "lastBackupTime": at, "nextBackupTime": next_time}),
                )
                .await?;
                // Come back for the next one (the status change also wakes the queue).
                Ok(Action::AwaitChange)
            }
            Err(why) => {
                self.events
                    .about(ROOT, &*b, "Warning", "BackupFailed", why.clone());
                self.status(&api, &b, false, "BackupFailed", &why, json!({}))
                    .await?;
                Ok(Action::RequeueAfter(RETRY))
            }
        }
    }

    /// Streams the snapshot of logical cluster `lc` into a new file under `dir`.
    async fn take(&self, lc: &str, dir: &Path) -> std::result::Result<Value, String> {
        let client = self.clients.cluster(ROOT).map_err(|e| e.to_string())?;
        tokio::fs::create_dir_all(dir)
            .await
            .map_err(|e| format!("creating {}: {e}", dir.display()))?;
        let stamp = Timestamp::now();
        let file = dir.join(format!("{}.backup", stamp.as_millisecond()));
        let partial = file.with_extension("partial");
        let req = http::Request::get(format!(
            "/apis/core.matryoshka.dev/v1alpha1/logicalclusters/{lc}/snapshot"
        ))
        .body(kube::client::Body::empty())
        .map_err(|e| e.to_string())?;
        let resp = client
            .send(req)
            .await
            .map_err(|e| format!("requesting the snapshot: {e}"))?;
        if !resp.status().is_success() {
            return Err(format!("the snapshot was refused: {}", resp.status()));
        }
        let mut out = tokio::fs::File::create(&partial)
            .await
            .map_err(|e| format!("creating {}: {e}", partial.display()))?;
        let mut body = resp.into_body();
        let (mut bytes, mut first, mut tail) = (0u64, Vec::new(), Vec::new());
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| format!("reading the snapshot: {e}"))?;
            if let Ok(data) = frame.into_data() {
                out.write_all(&data).await.map_err(|e| e.to_string())?;
                bytes += data.len() as u64;
                if first.len() < 4096 {
                    first.extend_from_slice(&data[..data.len().min(4096)]);
                }
                tail.extend_from_slice(&data);
                if tail.len() > 4096 {
                    tail.drain(..tail.len() - 4096);
                }
            }
        }
        out.sync_all().await.map_err(|e| e.to_string())?;
        drop(out);
        let last_line = |b: &[u8]| -> Option<Value> {
            let text = std::str::from_utf8(b).ok()?;
            serde_json::from_str(text.trim_end().rsplit('\n').next()?).ok()
        };
        let first_line = |b: &[u8]| -> Option<Value> {
            let text = String::from_utf8_lossy(b);
            serde_json::from_str(text.split('\n').next()?).ok()
        };
        let Some(keys) =
            last_line(&tail).and_then(|v| v.pointer("/end/keys").and_then(Value::as_u64))
        else {
            let _ = tokio::fs::remove_file(&partial).await;
            return Err("the snapshot ended before its trailer".into());
        };
        let revision = first_line(&first).and_then(|h| h.get("revision").and_then(Value::as_i64));
        tokio::fs::rename(&partial, &file)
            .await
            .map_err(|e| e.to_string())?;
        Ok(json!({
            "file": file.display().to_string(),
            "time": apimachinery::time::format_time(stamp),
            "revision": revision,
            "keys": keys,
            "bytes": bytes,
        }))
    }

    async fn status(
        &self,
        api: &Api<ClusterBackup>,
        b: &ClusterBackup,
        ok: bool,
        reason: &str,
        message: &str,
        fields: Value,
    ) -> Result<()> {
        let old = b.status.clone().unwrap_or_else(|| json!({}));
        let mut status = old.clone();
        if let (Some(s), Some(f)) = (status.as_object_mut(), fields.as_object()) {
            for (k, v) in f {
                s.insert(k.clone(), v.clone());
            }
            let cond = Cond {
                type_: "Ready",
                ok,
                reason,
                message,
            };
            s.insert(
                "conditions".into(),
                conditions::merge(old.get("conditions"), &[cond], &conditions::now()),
            );
        }
        if status != old {
            let name = b.metadata.name.as_deref().unwrap_or("");
            api.patch_status(
                name,
                &PatchParams::apply(FIELD_MANAGER),
                &Patch::Merge(json!({"status": status})),
            )
            .await
            .map_err(Error::from)?;
        }
        Ok(())
    }
}
