//! Moving a logical cluster's keys from one store to another (Kamaji's DataStore migration):
//! `POST logicalclusters/<name>/move` with `{"dataStore": "<name>"}`.
//!
//! 1. The request marks the cluster `core.matryoshka.dev/moving-to: <target>`. From then on
//!    every write into the cluster answers 429 with Retry-After on every replica (clients such
//!    as client-go retry); reads keep being answered from the source.
//! 2. The leader waits a grace period (every replica's cache has the mark; writes admitted
//!    before it have finished), copies the cluster's keys into the target, and copies again
//!    what changed until a pass finds nothing new.
//! 3. It checks the target's revision is above the source's — resourceVersions the cluster's
//!    clients saw all come from the source, so every later one is larger. Datastores' revisions
//!    are offset (`storage::offset`): moving into a datastore created later always passes;
//!    moving back would make time go backwards and is refused.
//! 4. It switches `spec.dataStore` and lifts the mark in one update. Each replica ends the
//!    cluster's watches on the other stores with 410 Gone (clients re-list from the new store);
//!    after a grace period the leader deletes the keys in the source.
//!
//! A failed move deletes what it copied, lifts the mark and records why
//! (`core.matryoshka.dev/move-failed`).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use apimachinery::meta;
use apimachinery::status::ApiError;
use bytes::Bytes;
use registry::store::{Location, WriteOptions};
use serde_json::{Value, json};

use crate::ControlPlane;
use crate::datastores::binding;
use crate::tenancy::{GROUP, PLURAL};
use apimachinery::cluster;

/// On a LogicalCluster being moved: the datastore it moves to (empty: the shared store).
pub const MOVING_TO: &str = "core.matryoshka.dev/moving-to";
/// On a LogicalCluster whose last move failed: why.
pub const MOVE_FAILED: &str = "core.matryoshka.dev/move-failed";
/// How long the leader waits after marking a cluster before copying, and after switching
/// before deleting the source's keys.
const GRACE: Duration = Duration::from_secs(2);
/// Copy passes before a move gives up on a cluster that keeps changing.
const PASSES: usize = 20;
/// Keys read per page.
const PAGE: usize = 500;

/// The datastore a LogicalCluster is moving to, if it is.
pub fn moving_to(lc: &Value) -> Option<&str> {
    meta::annotation(lc, MOVING_TO)
}

/// Whether `new` is the switch of a move: the binding becomes the target the old object was
/// moving to, and the mark goes.
pub fn is_switch(new: &Value, old: &Value) -> bool {
    moving_to(old).is_some_and(|t| t == binding(new)) && moving_to(new).is_none()
}

fn lc_location(name: &str) -> Location<'_> {
    Location {
        cluster: cluster::ROOT,
        namespace: "",
        name,
    }
}

/// Starts moving `name` to the datastore the request names: checks and marks it.
pub async fn request(cp: &ControlPlane, name: &str, body: &Value) -> Result<Value, ApiError> {
    let target = match body.get("dataStore") {
        Some(Value::String(s)) => s.clone(),
        None | Some(Value::Null) => String::new(),
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "dataStore must be a string, not {other}"
            )));
        }
    };
    let mut errs = apimachinery::ErrorList::new();
    crate::datastores::validate_binding(&json!({"spec": {"dataStore": target}}), &mut errs);
    if !errs.is_empty() {
        return Err(ApiError::invalid("LogicalClusterMove", GROUP, name, &errs));
    }
    let lc = cp
        .store
        .shared_cache()
        .get(GROUP, PLURAL, cluster::ROOT, "", name)
        .ok_or_else(|| ApiError::not_found(PLURAL, GROUP, name))?
        .value();
    let refuse = |why: String| {
        let mut errs = apimachinery::ErrorList::new();
        errs.push(apimachinery::FieldError::invalid(
            "dataStore",
            json!(target),
            why,
        ));
        ApiError::invalid("LogicalClusterMove", GROUP, name, &errs)
    };
    if meta::deletion_timestamp(&lc).is_some()
        || lc.pointer("/status/phase").and_then(Value::as_str) != Some("Ready")
    {
        return Err(ApiError::conflict(
            PLURAL,
            GROUP,
            name,
            "only a Ready cluster that is not being deleted can move",
        ));
    }
    if let Some(t) = moving_to(&lc) {
        return Err(ApiError::conflict(
            PLURAL,
            GROUP,
            name,
            &format!("the cluster is already moving to {t:?}"),
        ));
    }
    let source = binding(&lc).to_string();
    if source == target {
        return Err(refuse("the cluster's keys are there already".into()));
    }
    let src = cp.store.shards.named(&source)?;
    let dst = cp.store.shards.named(&target)?;
    let unavailable = |e: storage::Error| ApiError::service_unavailable(e.to_string());
    let (s, d) = (
        src.storage.current_revision().await.map_err(unavailable)?,
        dst.storage.current_revision().await.map_err(unavailable)?,
    );
    if d <= s {
        return Err(refuse(format!(
            "the target's revision {d} is not above the source's {s}: the cluster's resourceVersions would go backwards (move into a datastore created after the source)"
        )));
    }
    let res = cp
        .catalog
        .builtin(GROUP, PLURAL)
        .ok_or_else(|| ApiError::internal("LogicalCluster is not served"))?;
    let (updated, _) = cp
        .store
        .update_with(&res, &lc_location(name), &WriteOptions::default(), |cur| {
            let mut next = cur
                .cloned()
                .ok_or_else(|| ApiError::not_found(PLURAL, GROUP, name))?;
            if moving_to(&next).is_some() {
                return Err(ApiError::conflict(
                    PLURAL,
                    GROUP,
                    name,
                    "the cluster is already moving",
                ));
            }
            let md = meta::metadata_mut(&mut next);
            let a = md.entry("annotations").or_insert_with(|| json!({}));
            if !a.is_object() {
                *a = json!({});
            }
            a[MOVING_TO] = json!(target);
            if let Some(m) = a.as_object_mut() {
                m.remove(MOVE_FAILED);
            }
            Ok(next)
        })
        .await?;
    Ok(updated)
}

/// Writes `value` at `key`, over what is there (a move's copy, a restore's keys).
pub(crate) async fn put(
    storage: &dyn storage::Storage,
    key: &[u8],
    value: Bytes,
) -> storage::Result<()> {
    match storage.create(key, value.clone()).await {
        Err(storage::Error::AlreadyExists) => {}
        other => return other.map(|_| ()),
    }
    for _ in 0..8 {
        let Some(cur) = storage.get(key).await? else {
            match storage.create(key, value.clone()).await {
                Err(storage::Error::AlreadyExists) => continue,
                other => return other.map(|_| ()),
            }
        };
        match storage.update(key, value.clone(), cur.mod_revision).await {
            Err(storage::Error::Conflict { .. } | storage::Error::NotFound) => continue,
            other => return other.map(|_| ()),
        }
    }
    Err(storage::Error::Unavailable(
        "the key kept changing while it was copied".into(),
    ))
}

/// Every key under `prefix` with its value, at one revision.
async fn read_all(
    storage: &dyn storage::Storage,
    prefix: &[u8],
) -> storage::Result<HashMap<Bytes, Bytes>> {
    let mut out = HashMap::new();
    let mut opts = storage::ListOptions {
        limit: Some(PAGE),
        ..Default::default()
    };
    loop {
        let page = storage.list(prefix, opts.clone()).await?;
        out.extend(page.items.into_iter().map(|kv| (kv.key, kv.value)));
        match page.continue_token {
            Some(t) => opts.continue_token = Some(t),
            None => return Ok(out),
        }
    }
}

/// Copies the cluster's keys from `src` into `dst` until a pass finds nothing new.
async fn copy(
    src: &dyn storage::Storage,
    dst: &dyn storage::Storage,
    prefix: &[u8],
) -> Result<usize, String> {
    let mut copied: HashMap<Bytes, Bytes> = HashMap::new();
    let mut quiet = false;
    for _ in 0..PASSES {
        let now = read_all(src, prefix).await.map_err(|e| e.to_string())?;
        let mut changes = 0;
        for (k, v) in &now {
            if copied.get(k) != Some(v) {
                put(dst, k, v.clone()).await.map_err(|e| e.to_string())?;
                changes += 1;
            }
        }
        for k in copied.keys().filter(|k| !now.contains_key(*k)) {
            match dst.delete(k, None).await {
                Ok(_) | Err(storage::Error::NotFound) => {}
                Err(e) => return Err(e.to_string()),
            }
            changes += 1;
        }
        copied = now;
        if changes == 0 {
            if quiet {
                return Ok(copied.len());
            }
            // Nothing changed: once more after a quiet period, for a write admitted just
            // before the mark that was still on its way.
            quiet = true;
            tokio::time::sleep(GRACE).await;
        } else {
            quiet = false;
        }
    }
    Err(format!(
        "the cluster kept changing over {PASSES} copy passes"
    ))
}

/// Runs the move of `name` (the leader): copy, check, switch, clean up.
pub async fn run(cp: &ControlPlane, name: &str) -> Result<(), ApiError> {
    let Some(lc) = cp
        .store
        .shared_cache()
        .get(GROUP, PLURAL, cluster::ROOT, "", name)
        .map(|o| o.value())
    else {
        return Ok(());
    };
    let Some(target) = moving_to(&lc).map(String::from) else {
        return Ok(());
    };
    let source = binding(&lc).to_string();
    tokio::time::sleep(GRACE).await;
    let prefix = registry::key::cluster(name);
    let stores = cp
        .store
        .shards
        .named(&source)
        .and_then(|s| Ok((s, cp.store.shards.named(&target)?)));
    let outcome: Result<(Arc<registry::shards::Shard>, usize), String> = async {
        let (src, dst) = stores.map_err(|e| e.message)?;
        // What an earlier failed move may have left.
        dst.storage
            .delete_prefix(prefix.as_bytes())
            .await
            .map_err(|e| e.to_string())?;
        let keys = copy(&*src.storage, &*dst.storage, prefix.as_bytes()).await;
        let checked = match keys {
            Err(why) => Err(why),
            Ok(keys) => {
                let s = src
                    .storage
                    .current_revision()
                    .await
                    .map_err(|e| e.to_string())?;
                let d = dst
                    .storage
                    .current_revision()
                    .await
                    .map_err(|e| e.to_string())?;
                if d > s {
                    Ok(keys)
                } else {
                    Err(format!(
                        "the target's revision {d} is not above the source's {s}"
                    ))
                }
            }
        };
        match checked {
            Ok(keys) => Ok((src, keys)),
            Err(why) => {
                let _ = dst.storage.delete_prefix(prefix.as_bytes()).await;
                Err(why)
            }
        }
    }
    .await;
    let res = cp
        .catalog
        .builtin(GROUP, PLURAL)
        .ok_or_else(|| ApiError::internal("LogicalCluster is not served"))?;
    let failed = outcome.as_ref().err().cloned();
    cp.store
        .update_with(&res, &lc_location(name), &WriteOptions::default(), |cur| {
            let mut next = cur
                .cloned()
                .ok_or_else(|| ApiError::not_found(PLURAL, GROUP, name))?;
            let md = meta::metadata_mut(&mut next);
            if let Some(a) = md.get_mut("annotations").and_then(Value::as_object_mut) {
                a.remove(MOVING_TO);
                if let Some(why) = &failed {
                    a.insert(MOVE_FAILED.into(), json!(why));
                }
            }
            if failed.is_none() {
                if !next.get("spec").is_some_and(Value::is_object) {
                    next["spec"] = json!({});
                }
                if target.is_empty() {
                    if let Some(spec) = next["spec"].as_object_mut() {
                        spec.remove("dataStore");
                    }
                } else {
                    next["spec"]["dataStore"] = json!(target);
                }
            }
            Ok(next)
        })
        .await?;
    match outcome {
        Err(why) => {
            tracing::warn!(cluster = %name, from = %source, to = %target, error = %why, "moving a cluster failed");
            Ok(())
        }
        Ok((src, keys)) => {
            tracing::info!(cluster = %name, from = %source, to = %target, keys, "cluster moved");
            // Every replica has switched and ended its watches on the source by now.
            tokio::time::sleep(GRACE).await;
            src.storage
                .delete_prefix(prefix.as_bytes())
                .await
                .map_err(|e| ApiError::service_unavailable(e.to_string()))?;
            src.cache.forget_cluster(name);
            Ok(())
        }
    }
}

/// What every replica does when a cluster's binding changed from `old` to `new`: ends its
/// watches on every other store (their history is not the new store's).
pub fn switched(cp: &ControlPlane, name: &str, new: &str) {
    let gone = ApiError::expired(format!(
        "the logical cluster {name} moved to another datastore: list again"
    ));
    let ended: usize = cp
        .store
        .shards
        .all()
        .iter()
        .filter(|s| &*s.name != new)
        .map(|s| s.cache.end_cluster_watches(name, &gone))
        .sum();
    tracing::info!(cluster = %name, datastore = %new, watches = ended, "cluster now served from its new datastore");
}

/// Keeps the moves the leader runs, one per cluster at a time.
#[derive(Default)]
pub struct Running(parking_lot::Mutex<std::collections::HashSet<String>>);

impl Running {
    /// Starts the move of `name` unless one runs.
    pub fn start(self: &Arc<Self>, cp: &Arc<ControlPlane>, name: &str) {
        if !self.0.lock().insert(name.to_string()) {
            return;
        }
        let (me, cp, name) = (self.clone(), cp.clone(), name.to_string());
        tokio::spawn(async move {
            if let Err(e) = run(&cp, &name).await {
                tracing::warn!(cluster = %name, error = %e, "moving a cluster");
            }
            me.0.lock().remove(&name);
        });
    }
}
