//! The generic store: create, get, list, update, delete and watch for any resource, over
//! storage and the watch cache (upstream's `registry/generic/registry.Store`).
//!
//! Everything common to all resources happens here — server-owned metadata (uid, timestamps,
//! generation, resourceVersion), status/spec separation, optimistic concurrency, finalizers and
//! graceful deletion, namespace checks — and the resource's [`Strategy`](crate::Strategy) adds
//! what is special. Storage errors become API errors in [`storage_error`], the one place that
//! translates them.

use std::sync::Arc;
use std::time::Duration;

use apimachinery::field::{ErrorList, FieldError};
use apimachinery::meta;
use apimachinery::status::ApiError;
use bytes::Bytes;
use serde_json::{Value, json};
use storage::{ListOptions, Storage};

use crate::cache::{CachedObject, Filter, WatchCache};
use crate::hooks::WriteHook;
use crate::key;
use crate::resource::ResourceDef;
use crate::shards::{Shard, Shards};
use crate::validation;

/// How long a read waits for the cache to reach a requested revision before answering 504,
/// as upstream does for "Too large resource version" (a consistent list reads storage then).
pub const RESOURCE_VERSION_WAIT: Duration = Duration::from_secs(3);

/// The core resources admission reads from the watch cache: a write of one returns once the
/// cache has it (`Store::settle`), so the next request's admission sees it.
pub const READ_BY_ADMISSION: &[&str] = &["limitranges", "resourcequotas", "serviceaccounts"];

/// Where an object lives.
#[derive(Debug, Clone, Copy)]
pub struct Location<'a> {
    pub cluster: &'a str,
    /// Empty for cluster-scoped resources.
    pub namespace: &'a str,
    pub name: &'a str,
}

/// Options of a write.
#[derive(Debug, Clone, Default)]
pub struct WriteOptions {
    pub dry_run: bool,
    /// `Some("status")` for writes through the status subresource.
    pub subresource: Option<String>,
    /// Admission to run inside the write, on every attempt.
    pub admission: Option<Admission>,
}

/// Admission a write runs inside the store (upstream hands its REST storage the admission
/// functions of the request): `mutate` on the object the caller computed, before the strategy
/// prepares it; `validate` once it is prepared and valid, just before it is written. Both see
/// the stored object of that attempt as `old` (`None` on create), and run again when a
/// conflict makes the store retry from a fresh read.
#[async_trait::async_trait]
pub trait Admit: Send + Sync {
    /// Returns whether it changed `new`.
    async fn mutate(&self, new: &mut Value, old: Option<&Value>) -> Result<bool, ApiError>;
    async fn validate(&self, new: &Value, old: Option<&Value>) -> Result<(), ApiError>;
}

/// A shared [`Admit`] in [`WriteOptions`].
#[derive(Clone)]
pub struct Admission(pub Arc<dyn Admit>);

impl std::fmt::Debug for Admission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Admission")
    }
}

/// `DeleteOptions` as the store uses them.
#[derive(Debug, Clone, Default)]
pub struct DeleteOptions {
    pub propagation: Option<String>,
    pub grace_period_seconds: Option<i64>,
    pub precondition_uid: Option<String>,
    pub precondition_rv: Option<String>,
    pub dry_run: bool,
}

/// What a delete did.
#[derive(Debug, Clone)]
pub enum Deleted {
    /// The object is gone; its last state.
    Gone(Value),
    /// The object is being deleted (finalizers or a grace period remain); its current state.
    Pending(Value),
}

/// A list request.
#[derive(Clone, Default)]
pub struct ListRequest {
    pub filter: Filter,
    pub limit: Option<usize>,
    pub continue_token: Option<String>,
    /// `resourceVersion` as the client sent it.
    pub resource_version: Option<String>,
    /// `resourceVersionMatch`: `NotOlderThan` or `Exact`.
    pub resource_version_match: Option<String>,
    /// For a cross-cluster list (`filter.cluster` is `None`): the datastore whose clusters it
    /// covers (empty: the shared store's). See [`crate::shards`].
    pub shard: String,
}

/// A list response.
pub struct ListResult {
    pub items: Vec<Arc<CachedObject>>,
    pub revision: i64,
    pub continue_token: Option<String>,
    pub remaining: Option<u64>,
}

/// The generic store.
pub struct Store {
    /// The stores clusters live in and which cluster lives where.
    pub shards: Arc<Shards>,
    /// Write hooks by group and plural (see [`crate::hooks`]).
    pub(crate) hooks: Vec<(String, String, Arc<dyn WriteHook>)>,
}

/// The current time as RFC 3339 (seconds).
pub fn now() -> String {
    apimachinery::time::format_unix_seconds(unix_now())
}

pub fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// Translates a storage error for a request about `res`/`name`.
pub fn storage_error(e: storage::Error, res: &ResourceDef, name: &str) -> ApiError {
    use storage::Error as E;
    match e {
        E::NotFound => ApiError::not_found(&res.plural, &res.group, name),
        E::AlreadyExists => ApiError::already_exists(&res.plural, &res.group, name),
        E::Conflict { .. } => ApiError::modified(&res.plural, &res.group, name),
        E::Compacted {
            requested,
            compacted,
        } => ApiError::expired(format!(
            "too old resource version: {requested} ({compacted})"
        )),
        E::FutureRevision { requested, current } => {
            ApiError::too_large_resource_version(requested, current)
        }
        E::InvalidContinue(why) => {
            ApiError::bad_request(format!("continue key is not valid: {why}"))
        }
        E::InvalidArgument(why) if why.contains("over the limit") => {
            ApiError::request_entity_too_large(why)
        }
        E::InvalidArgument(why) => ApiError::bad_request(why),
        E::WatcherTooSlow(_) => ApiError::expired(e.to_string()),
        E::Unavailable(why) => {
            ApiError::service_unavailable(format!("storage is unavailable: {why}"))
        }
    }
}

fn encode(obj: &Value) -> Result<Bytes, ApiError> {
    // resourceVersion is the storage revision: it is never stored inside the object.
    let mut copy;
    let to_store = if meta::metadata(obj).contains_key("resourceVersion") {
        copy = obj.clone();
        meta::remove(&mut copy, "resourceVersion");
        &copy
    } else {
        obj
    };
    serde_json::to_vec(to_store)
        .map(Bytes::from)
        .map_err(ApiError::internal)
}

/// A dry run answers as the write would: an object over the storage limit is refused, as
/// storage would refuse it.
fn within_storage_limit(obj: &Value) -> Result<(), ApiError> {
    let size = encode(obj)?.len();
    if size > storage::MAX_VALUE_BYTES {
        return Err(ApiError::request_entity_too_large(format!(
            "the value is {size} bytes, over the limit of {}",
            storage::MAX_VALUE_BYTES
        )));
    }
    Ok(())
}

fn with_rv(mut obj: Value, rev: i64) -> Value {
    meta::set(&mut obj, "resourceVersion", rev.to_string());
    obj
}

fn parse_rv(rv: &str) -> Result<i64, ApiError> {
    rv.parse::<i64>()
        .ok()
        .filter(|r| *r >= 0 && (rv == "0" || !rv.starts_with('0')))
        .ok_or_else(|| ApiError::bad_request(format!("invalid resource version: {rv:?}")))
}

fn object_key(res: &ResourceDef, loc: &Location<'_>) -> String {
    key::object(
        loc.cluster,
        &res.group,
        &res.plural,
        if res.namespaced { loc.namespace } else { "" },
        loc.name,
    )
}

/// Whether two versions of an object differ in what counts for `metadata.generation`:
/// everything but metadata, and but status when status has its own endpoint.
fn generation_changed(a: &Value, b: &Value, has_status: bool) -> bool {
    let counts = |(k, _): &(&String, &Value)| {
        k.as_str() != "metadata" && !(has_status && k.as_str() == "status")
    };
    match (a.as_object(), b.as_object()) {
        (Some(a), Some(b)) => !a.iter().filter(counts).eq(b.iter().filter(counts)),
        _ => a != b,
    }
}

/// Whether two versions of an object are equal but for `metadata.resourceVersion` (a no-op
/// write), compared in place.
fn same_but_resource_version(a: &Value, b: &Value) -> bool {
    let (Some(a), Some(b)) = (a.as_object(), b.as_object()) else {
        return a == b;
    };
    let not_meta = |(k, _): &(&String, &Value)| k.as_str() != "metadata";
    if !a.iter().filter(not_meta).eq(b.iter().filter(not_meta)) {
        return false;
    }
    let not_rv = |(k, _): &(&String, &Value)| k.as_str() != "resourceVersion";
    match (a.get("metadata"), b.get("metadata")) {
        (Some(Value::Object(x)), Some(Value::Object(y))) => {
            x.iter().filter(not_rv).eq(y.iter().filter(not_rv))
        }
        (x, y) => x == y,
    }
}

impl Store {
    /// Waits (up to five seconds) until the cache has every write storage has committed, so
    /// a read from it sees this task's own writes.
    /// After a write at `rev`: slows the writer to the cache's pace, and for the objects
    /// admission reads from the cache (LimitRanges, ResourceQuotas, ServiceAccounts) waits
    /// until the cache has the write, so the next request sees it — a LimitRange applied just
    /// before a pod bounds that pod (upstream's admission does a live lookup for this).
    async fn settle(shard: &Shard, res: &ResourceDef, rev: i64) {
        shard.cache.throttle(rev).await;
        if res.group.is_empty() && READ_BY_ADMISSION.contains(&res.plural.as_str()) {
            shard.cache.wait_for(rev, RESOURCE_VERSION_WAIT).await;
        }
    }

    /// Waits (up to five seconds each) until every shard's cache has every write its storage
    /// has committed.
    pub async fn wait_for_cache(&self) {
        for shard in self.shards.all() {
            let probe = shard.storage.current_revision();
            if let Ok(Ok(rev)) = tokio::time::timeout(Duration::from_secs(5), probe).await {
                shard
                    .cache
                    .wait_for(rev, std::time::Duration::from_secs(5))
                    .await;
            }
        }
    }

    /// The cached objects of `group/plural` that `filter` covers in every shard (the server's
    /// own loops over every cluster).
    pub fn list_every_shard(
        &self,
        group: &str,
        plural: &str,
        filter: &Filter,
    ) -> Vec<Arc<CachedObject>> {
        let mut all = Vec::new();
        for shard in self.shards.all() {
            all.extend(shard.cache.list(group, plural, filter).0);
        }
        all
    }

    /// Follows `group/plural` in every shard ([`crate::cache::FollowAll`]).
    pub fn follow_every_shard(
        &self,
        group: &str,
        plural: &str,
        filter: Filter,
    ) -> Result<crate::cache::FollowAll, ApiError> {
        crate::cache::FollowAll::new(&self.shards, group, plural, filter)
    }

    /// A store over the shared store `storage` and its cache; datastores connect later
    /// ([`Shards::connect`]).
    pub fn new(storage: Arc<dyn Storage>, cache: Arc<WatchCache>) -> Self {
        Store {
            shards: Arc::new(Shards::new(Shard::new("", storage, cache))),
            hooks: Vec::new(),
        }
    }

    /// The shared store (the root cluster's, and every cluster's not bound to a datastore).
    pub fn shared(&self) -> &Arc<Shard> {
        self.shards.shared()
    }

    /// The shared store's watch cache.
    pub fn shared_cache(&self) -> &Arc<WatchCache> {
        &self.shards.shared().cache
    }

    /// The shard `cluster` lives in (503 while its datastore is not connected).
    pub fn shard(&self, cluster: &str) -> Result<Arc<Shard>, ApiError> {
        self.shards.of_cluster(cluster)
    }

    /// The shard a write into `cluster` goes to (429 while the cluster is moving).
    pub fn shard_for_write(&self, cluster: &str) -> Result<Arc<Shard>, ApiError> {
        self.shards.for_write(cluster)
    }

    /// The watch cache of `cluster`'s shard.
    pub fn cache(&self, cluster: &str) -> Result<Arc<WatchCache>, ApiError> {
        Ok(self.shard(cluster)?.cache.clone())
    }

    /// For reads that cannot fail (authorization, admission lookups): the watch cache of
    /// `cluster`'s shard, or while that is not connected the shared store's, which holds
    /// nothing of the cluster (its keys are only in its datastore) — so the read finds
    /// nothing, as for a cluster that has no such objects.
    pub fn cache_for_reads(&self, cluster: &str) -> Arc<WatchCache> {
        self.shard(cluster)
            .map(|s| s.cache.clone())
            .unwrap_or_else(|_| self.shared_cache().clone())
    }

    /// The shard a list or watch filtered by `filter` reads: the cluster's, or for a
    /// cross-cluster one the named datastore's.
    pub fn shard_of(&self, filter: &Filter, shard: &str) -> Result<Arc<Shard>, ApiError> {
        match &filter.cluster {
            Some(c) => self.shard(c),
            None => self.shards.named(shard),
        }
    }

    /// Adds the write hook of a built-in resource.
    pub fn with_hook(mut self, group: &str, plural: &str, hook: Arc<dyn WriteHook>) -> Self {
        self.hooks.push((group.into(), plural.into(), hook));
        self
    }

    /// Reads the current object from storage.
    pub async fn get(&self, res: &ResourceDef, loc: &Location<'_>) -> Result<Value, ApiError> {
        self.get_raw(res, loc)
            .await?
            .map(|(v, _)| v)
            .ok_or_else(|| ApiError::not_found(&res.plural, &res.group, loc.name))
    }

    async fn get_raw(
        &self,
        res: &ResourceDef,
        loc: &Location<'_>,
    ) -> Result<Option<(Value, i64)>, ApiError> {
        let k = object_key(res, loc);
        let kv = self
            .shard(loc.cluster)?
            .storage
            .get(k.as_bytes())
            .await
            .map_err(|e| storage_error(e, res, loc.name))?;
        Ok(kv.and_then(|kv| {
            crate::cache::decode(&kv.value, kv.mod_revision).map(|v| (v, kv.mod_revision))
        }))
    }

    /// Lists objects, from the cache when the request allows it, else from a storage snapshot.
    pub async fn list(&self, res: &ResourceDef, req: &ListRequest) -> Result<ListResult, ApiError> {
        let rv = req.resource_version.as_deref().filter(|s| !s.is_empty());
        let rv_match = req
            .resource_version_match
            .as_deref()
            .filter(|s| !s.is_empty());
        if rv_match.is_some() && rv.is_none() {
            let mut errs = ErrorList::new();
            errs.push(FieldError::forbidden(
                "resourceVersionMatch",
                "resourceVersionMatch is forbidden unless resourceVersion is provided",
            ));
            return Err(ApiError::invalid("ListOptions", "meta.k8s.io", "", &errs));
        }
        if let Some(m) = rv_match
            && m != "NotOlderThan"
            && m != "Exact"
        {
            let mut errs = ErrorList::new();
            errs.push(FieldError::not_supported(
                "resourceVersionMatch",
                json!(m),
                &["Exact", "NotOlderThan"],
            ));
            return Err(ApiError::invalid("ListOptions", "meta.k8s.io", "", &errs));
        }
        let rv_num = rv.map(parse_rv).transpose()?;
        let continuing = req.continue_token.as_deref().is_some_and(|t| !t.is_empty());
        let limited = req.limit.is_some_and(|l| l > 0);
        let exact = rv_match == Some("Exact")
            || (rv_match.is_none() && limited && rv_num.is_some_and(|r| r > 0));
        let from_storage =
            req.filter.cluster.is_some() && (continuing || (limited && rv != Some("0")) || exact);
        let shard = self.shard_of(&req.filter, &req.shard)?;
        if from_storage {
            return self
                .list_storage(&shard, res, req, if exact { rv_num } else { None })
                .await;
        }
        // From the cache: at least as new as the request (or the latest write, for a
        // consistent read), with limit ignored as upstream does for cached lists.
        let wait_for = match rv_num {
            Some(0) => None,
            Some(r) => Some(r),
            None => Some(
                shard
                    .storage
                    .current_revision()
                    .await
                    .map_err(|e| storage_error(e, res, ""))?,
            ),
        };
        if let Some(r) = wait_for
            && !shard.cache.wait_for(r, RESOURCE_VERSION_WAIT).await
        {
            // A consistent read the cache cannot serve in time is served by storage, as
            // upstream's cacher does. A cross-cluster one would scan every cluster's keys (the
            // cluster is the first key segment), which is what a lagging server can least
            // afford: it still answers 504 and the system client retries.
            if rv_num.is_none() && req.filter.cluster.is_some() {
                return self.list_storage(&shard, res, req, None).await;
            }
            return Err(ApiError::too_large_resource_version(
                r,
                shard.cache.revision(),
            ));
        }
        let (items, revision) = shard.cache.list(&res.group, &res.plural, &req.filter);
        Ok(ListResult {
            items,
            revision,
            continue_token: None,
            remaining: None,
        })
    }

    async fn list_storage(
        &self,
        shard: &Shard,
        res: &ResourceDef,
        req: &ListRequest,
        at: Option<i64>,
    ) -> Result<ListResult, ApiError> {
        let cluster = req.filter.cluster.as_deref().unwrap_or_default();
        let cluster_name: Arc<str> = Arc::from(cluster);
        let ns = if res.namespaced {
            req.filter.namespace.as_deref().unwrap_or("")
        } else {
            ""
        };
        let prefix = key::collection(cluster, &res.group, &res.plural, ns);
        let limit = req.limit.unwrap_or(0);
        let mut items = Vec::new();
        let mut token = req.continue_token.clone().filter(|t| !t.is_empty());
        let mut revision = at;
        let map_err = |e: storage::Error| match e {
            storage::Error::Compacted { .. } if req.continue_token.is_some() => {
                ApiError::continue_expired()
            }
            other => storage_error(other, res, ""),
        };
        loop {
            let want = if limit > 0 {
                Some(limit - items.len())
            } else {
                None
            };
            let page = shard
                .storage
                .list(
                    prefix.as_bytes(),
                    ListOptions {
                        revision,
                        limit: want,
                        continue_token: token.take(),
                    },
                )
                .await
                .map_err(map_err)?;
            revision = Some(page.revision);
            for kv in page.items {
                let Some(obj) = CachedObject::from_stored(
                    &kv.value,
                    kv.mod_revision,
                    cluster_name.clone(),
                    &*res.strategy,
                    false,
                ) else {
                    continue;
                };
                if req.filter.matches(&obj) {
                    items.push(Arc::new(obj));
                }
            }
            match page.continue_token {
                Some(t) if limit == 0 || items.len() < limit => token = Some(t),
                Some(t) => {
                    let remaining = if req.filter.predicate.is_none() {
                        page.remaining
                    } else {
                        None
                    };
                    return Ok(ListResult {
                        items,
                        revision: page.revision,
                        continue_token: Some(t),
                        remaining,
                    });
                }
                None => {
                    return Ok(ListResult {
                        items,
                        revision: page.revision,
                        continue_token: None,
                        remaining: None,
                    });
                }
            }
        }
    }

    /// Checks that the namespace of a new namespaced object exists and is not terminating.
    async fn check_namespace(&self, cluster: &str, namespace: &str) -> Result<(), ApiError> {
        let shard = self.shard(cluster)?;
        let ns = match shard.cache.get("", "namespaces", cluster, "", namespace) {
            Some(o) => Some(o.to_value()),
            None => {
                let k = key::object(cluster, "", "namespaces", "", namespace);
                let kv = shard
                    .storage
                    .get(k.as_bytes())
                    .await
                    .map_err(|e| ApiError::internal(e.to_string()))?;
                kv.and_then(|kv| serde_json::from_slice::<Value>(&kv.value).ok())
            }
        };
        let Some(ns) = ns else {
            return Err(ApiError::not_found("namespaces", "", namespace));
        };
        let terminating = meta::deletion_timestamp(&ns).is_some()
            || ns.pointer("/status/phase").and_then(Value::as_str) == Some("Terminating");
        if terminating {
            let msg = format!(
                "unable to create new content in namespace {namespace} because it is being terminated"
            );
            let mut e = ApiError::new(403, apimachinery::Reason::Forbidden, msg.clone());
            e.kind = Some("namespaces".into());
            e.name = Some(namespace.into());
            return Err(e.with_cause("NamespaceTerminating", &msg, "metadata.namespace"));
        }
        Ok(())
    }

    /// Fills type and location fields of an incoming object, refusing contradictions.
    fn normalize(
        &self,
        res: &ResourceDef,
        loc: &Location<'_>,
        obj: &mut Value,
        check_name: bool,
    ) -> Result<(), ApiError> {
        if !obj.is_object() {
            return Err(ApiError::bad_request(
                "the body of the request must be a JSON object",
            ));
        }
        let av = meta::api_version(obj);
        if !av.is_empty() && av != res.api_version() {
            let (g, _) = meta::split_api_version(av);
            if g != res.group {
                return Err(ApiError::bad_request(format!(
                    "the API version in the data ({av}) does not match the expected API version ({})",
                    res.api_version()
                )));
            }
        }
        let kind = meta::kind(obj);
        if !kind.is_empty() && kind != res.kind {
            return Err(ApiError::bad_request(format!(
                "the kind in the data ({kind}) does not match the expected kind ({})",
                res.kind
            )));
        }
        obj["apiVersion"] = json!(res.api_version());
        obj["kind"] = json!(res.kind);
        let body_ns = meta::namespace(obj).to_string();
        if res.namespaced {
            if !body_ns.is_empty() && body_ns != loc.namespace {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            meta::set(obj, "namespace", loc.namespace);
        } else if !body_ns.is_empty() {
            meta::remove(obj, "namespace");
        }
        if check_name && meta::name(obj) != loc.name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({}) does not match the name on the URL ({})",
                meta::name(obj),
                loc.name
            )));
        }
        meta::remove(obj, "selfLink");
        // Go's `omitempty`: an emptied list of finalizers or owners is no list at all, as
        // kube-apiserver stores and serves it (a merge patch removing the last finalizer
        // leaves `[]` in the body).
        for f in ["finalizers", "ownerReferences"] {
            if meta::metadata(obj)
                .get(f)
                .and_then(Value::as_array)
                .is_some_and(|a| a.is_empty())
            {
                meta::remove(obj, f);
            }
        }
        Ok(())
    }

    fn validate(
        &self,
        res: &ResourceDef,
        obj: &Value,
        old: Option<&Value>,
    ) -> Result<(), ApiError> {
        let mut errs = validation::object_meta(res, obj);
        if let Some(old) = old {
            errs.extend(validation::object_meta_update(obj, old));
            errs.extend(res.strategy.validate_update(obj, old));
        } else {
            errs.extend(res.strategy.validate(obj));
        }
        if errs.is_empty() {
            Ok(())
        } else {
            Err(ApiError::invalid(
                &res.kind,
                &res.group,
                meta::name(obj),
                &errs,
            ))
        }
    }

    /// Creates an object. `loc.name` is ignored: the name comes from the object (or
    /// generateName).
    pub async fn create(
        &self,
        res: &ResourceDef,
        loc: &Location<'_>,
        mut obj: Value,
        opts: &WriteOptions,
    ) -> Result<Value, ApiError> {
        self.normalize(res, loc, &mut obj, false)?;
        if let Some(a) = &opts.admission
            && a.0.mutate(&mut obj, None).await?
        {
            self.normalize(res, loc, &mut obj, false)?;
        }
        let generate = meta::name(&obj).is_empty() && !meta::generate_name(&obj).is_empty();
        {
            let m = meta::metadata_mut(&mut obj);
            for f in [
                "resourceVersion",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
            ] {
                m.remove(f);
            }
            m.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
            m.insert("creationTimestamp".into(), json!(now()));
            m.insert("generation".into(), json!(1));
        }
        if res.has_status()
            && opts.subresource.is_none()
            && !res.strategy.keeps_status_on_create()
            && let Some(m) = obj.as_object_mut()
        {
            m.remove("status");
        }
        if res.namespaced && !(res.group.is_empty() && res.plural == "namespaces") {
            self.check_namespace(loc.cluster, loc.namespace).await?;
        }
        apimachinery::depth::check(&obj)?;
        let base = obj;
        let mut obj = base.clone();
        for attempt in 0..8 {
            obj = base.clone();
            // The name is settled before the strategy runs: some strategies derive labels
            // from it (a Job's job-name).
            if generate {
                let prefix = meta::generate_name(&obj).to_string();
                meta::set(
                    &mut obj,
                    "name",
                    format!("{prefix}{}", validation::random_suffix()),
                );
            }
            res.strategy.prepare_for_create(&mut obj);
            res.strategy.default(&mut obj);
            // Allocation comes before validation, as upstream's `BeginCreate` does: validation
            // checks the allocated values too.
            let reserved = self
                .hook_before(res, loc.cluster, None, &mut obj, opts.dry_run)
                .await?;
            if let Err(e) = self.validate(res, &obj, None) {
                self.hook_abort(res, loc.cluster, reserved).await;
                return Err(e);
            }
            if let Some(a) = &opts.admission
                && let Err(e) = a.0.validate(&obj, None).await
            {
                self.hook_abort(res, loc.cluster, reserved).await;
                return Err(e);
            }
            if opts.dry_run {
                within_storage_limit(&obj)?;
                return Ok(obj);
            }
            let name = meta::name(&obj).to_string();
            let k = object_key(
                res,
                &Location {
                    name: &name,
                    ..*loc
                },
            );
            let stored = match res.to_storage(&obj).await {
                Ok(s) => s,
                Err(e) => {
                    self.hook_abort(res, loc.cluster, reserved).await;
                    return Err(e);
                }
            };
            let written = match encode(stored.as_ref().unwrap_or(&obj)) {
                Ok(b) => match self.shard_for_write(loc.cluster) {
                    Ok(shard) => {
                        let written = shard.storage.create(k.as_bytes(), b).await;
                        if let Ok(kv) = &written {
                            Self::settle(&shard, res, kv.mod_revision).await;
                        }
                        written
                    }
                    Err(e) => {
                        self.hook_abort(res, loc.cluster, reserved).await;
                        return Err(e);
                    }
                },
                Err(e) => {
                    self.hook_abort(res, loc.cluster, reserved).await;
                    return Err(e);
                }
            };
            if written.is_err() {
                self.hook_abort(res, loc.cluster, reserved).await;
            }
            match written {
                Ok(kv) => return Ok(with_rv(obj, kv.mod_revision)),
                Err(storage::Error::AlreadyExists) if generate && attempt < 7 => continue,
                Err(e) => return Err(storage_error(e, res, &name)),
            }
        }
        Err(ApiError::already_exists(
            &res.plural,
            &res.group,
            meta::name(&obj),
        ))
    }

    /// The guaranteed update: reads the object, lets `f` compute the new one from it, writes it
    /// if unchanged meanwhile, and retries from a fresh read otherwise. `f` gets `None` when the
    /// object does not exist (it may then return an object to create it, as server-side apply
    /// does, or an error). A `metadata.resourceVersion` in `f`'s result is a precondition.
    /// Returns the stored object and whether it was created.
    pub async fn update_with<F>(
        &self,
        res: &ResourceDef,
        loc: &Location<'_>,
        opts: &WriteOptions,
        mut f: F,
    ) -> Result<(Value, bool), ApiError>
    where
        F: FnMut(Option<&Value>) -> Result<Value, ApiError> + Send,
    {
        for _ in 0..32 {
            // A cluster that is moving refuses writes before any work is done.
            self.shard_for_write(loc.cluster)?;
            let current = self.get_raw(res, loc).await?;
            let Some((old, old_rev)) = current else {
                let obj = f(None)?;
                let created = self.create(res, loc, obj, opts).await;
                match created {
                    Err(e) if e.reason == apimachinery::Reason::AlreadyExists => continue,
                    other => return other.map(|o| (o, true)),
                }
            };
            // A resource converted outside the store sees the old object in its own version.
            let old = match res.to_served(vec![old]).await?.pop() {
                Some(o) => o,
                None => return Err(ApiError::internal("conversion lost the object")),
            };
            let mut new = f(Some(&old))?;
            // Nothing deeper than can be read back is stored (patches can nest deeper than
            // any request body may).
            apimachinery::depth::check(&new)?;
            if let Some(a) = &opts.admission {
                a.0.mutate(&mut new, Some(&old)).await?;
            }
            self.normalize(res, loc, &mut new, true)?;
            // Upstream parses the sent resourceVersion and treats 0 like none: an
            // unconditional update (`metadata.resourceVersion: "0"` is not a conflict).
            let sent_rv = meta::resource_version(&new).to_string();
            if !sent_rv.is_empty() && sent_rv != "0" && sent_rv != old_rev.to_string() {
                return Err(ApiError::modified(&res.plural, &res.group, loc.name));
            }
            let mut new = self.prepare_update(res, &old, new, opts)?;
            let reserved = if new == old {
                Default::default()
            } else {
                self.hook_before(res, loc.cluster, Some(&old), &mut new, opts.dry_run)
                    .await?
            };
            if let Err(e) = self.validate(res, &new, Some(&old)) {
                self.hook_abort(res, loc.cluster, reserved).await;
                return Err(e);
            }
            if let Some(a) = &opts.admission
                && let Err(e) = a.0.validate(&new, Some(&old)).await
            {
                self.hook_abort(res, loc.cluster, reserved).await;
                return Err(e);
            }
            if new == old {
                return Ok((old, false));
            }
            if opts.dry_run {
                within_storage_limit(&new)?;
                return Ok((new, false));
            }
            let k = object_key(res, loc);
            let finished = meta::deletion_timestamp(&new).is_some()
                && meta::finalizers(&new).is_empty()
                && !res.strategy.deletion_pending(&new);
            // Asked again right before the write: admission may have taken long, and the
            // cluster may have started moving since.
            let shard = match self.shard_for_write(loc.cluster) {
                Ok(s) => s,
                Err(e) => {
                    self.hook_abort(res, loc.cluster, reserved).await;
                    return Err(e);
                }
            };
            let result = if finished {
                shard
                    .storage
                    .delete(k.as_bytes(), Some(old_rev))
                    .await
                    .map(|kv| (with_rv(new.clone(), kv.mod_revision), kv.mod_revision))
            } else {
                let stored = match res.to_storage(&new).await {
                    Ok(s) => s,
                    Err(e) => {
                        self.hook_abort(res, loc.cluster, reserved).await;
                        return Err(e);
                    }
                };
                match encode(stored.as_ref().unwrap_or(&new)) {
                    Ok(b) => shard
                        .storage
                        .update(k.as_bytes(), b, old_rev)
                        .await
                        .map(|kv| (with_rv(new, kv.mod_revision), kv.mod_revision)),
                    Err(e) => {
                        self.hook_abort(res, loc.cluster, reserved).await;
                        return Err(e);
                    }
                }
            };
            if result.is_err() {
                self.hook_abort(res, loc.cluster, reserved).await;
            }
            match result {
                Ok((v, rev)) => {
                    Self::settle(&shard, res, rev).await;
                    let kept = (!finished).then_some(&v);
                    self.hook_after(res, loc.cluster, &old, kept).await;
                    return Ok((v, false));
                }
                Err(storage::Error::Conflict { .. }) if sent_rv.is_empty() => continue,
                Err(storage::Error::Conflict { .. }) => {
                    return Err(ApiError::modified(&res.plural, &res.group, loc.name));
                }
                Err(storage::Error::NotFound) => continue,
                Err(e) => return Err(storage_error(e, res, loc.name)),
            }
        }
        Err(ApiError::conflict(
            &res.plural,
            &res.group,
            loc.name,
            "too many concurrent updates; please try again",
        ))
    }

    /// Everything the server owns in an update (validation is the caller's, after the write
    /// hook).
    fn prepare_update(
        &self,
        res: &ResourceDef,
        old: &Value,
        mut new: Value,
        opts: &WriteOptions,
    ) -> Result<Value, ApiError> {
        let old_meta = meta::metadata(old).clone();
        let new_uid = meta::uid(&new).to_string();
        if !new_uid.is_empty() && new_uid != meta::uid(old) {
            return Err(ApiError::conflict(
                &res.plural,
                &res.group,
                meta::name(old),
                &format!(
                    "Precondition failed: UID in precondition: {new_uid}, UID in object meta: {}",
                    meta::uid(old)
                ),
            ));
        }
        if opts.subresource.as_deref() == Some("approval") {
            // A CertificateSigningRequest's approval changes only its conditions (Approved,
            // Denied); the certificate and everything else stay.
            let conditions = new.pointer_mut("/status/conditions").map(Value::take);
            let managed = meta::metadata(&new).get("managedFields").cloned();
            let mut merged = old.clone();
            if !merged.get("status").is_some_and(Value::is_object) {
                merged["status"] = Value::Object(Default::default());
            }
            match conditions {
                Some(c) => merged["status"]["conditions"] = c,
                None => {
                    if let Some(st) = merged["status"].as_object_mut() {
                        st.remove("conditions");
                    }
                }
            }
            if let Some(mf) = managed {
                meta::set(&mut merged, "managedFields", mf);
            }
            new = merged;
        } else if opts.subresource.as_deref() == Some("status") {
            // The status endpoint changes only the status (and who manages it).
            let status = new.get_mut("status").map(Value::take);
            let managed = meta::metadata(&new).get("managedFields").cloned();
            let annotations = res
                .strategy
                .status_updates_annotations()
                .then(|| meta::metadata(&new).get("annotations").cloned());
            // The old object but its status (which is replaced, so not copied).
            let mut merged = match old.as_object() {
                Some(m) => Value::Object(
                    m.iter()
                        .filter(|(k, _)| k.as_str() != "status")
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect(),
                ),
                None => old.clone(),
            };
            if let Some(s) = status {
                merged["status"] = s;
            }
            if let Some(mf) = managed {
                meta::set(&mut merged, "managedFields", mf);
            }
            match annotations {
                Some(Some(a)) => meta::set(&mut merged, "annotations", a),
                Some(None) => {
                    meta::remove(&mut merged, "annotations");
                }
                None => {}
            }
            new = merged;
        } else if res.has_status() {
            match old.get("status") {
                Some(s) => new["status"] = s.clone(),
                None => {
                    if let Some(m) = new.as_object_mut() {
                        m.remove("status");
                    }
                }
            }
        }
        {
            let m = meta::metadata_mut(&mut new);
            for f in [
                "uid",
                "creationTimestamp",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "generation",
            ] {
                match old_meta.get(f) {
                    Some(v) => {
                        m.insert(f.into(), v.clone());
                    }
                    None => {
                        m.remove(f);
                    }
                }
            }
            m.remove("resourceVersion");
        }
        if meta::deletion_timestamp(old).is_some() {
            let old_f = meta::finalizers(old);
            let added: Vec<String> = meta::finalizers(&new)
                .into_iter()
                .filter(|f| !old_f.contains(f))
                .collect();
            if !added.is_empty() {
                let mut errs = ErrorList::new();
                errs.push(FieldError::forbidden(
                    "metadata.finalizers",
                    format!("no new finalizers can be added if the object is being deleted, found new finalizers {added:?}"),
                ));
                return Err(ApiError::invalid(
                    &res.kind,
                    &res.group,
                    meta::name(old),
                    &errs,
                ));
            }
        }
        if opts.subresource.is_none() {
            res.strategy.prepare_for_update(&mut new, old);
            res.strategy.default(&mut new);
        }
        // A pod's binding sets `spec.nodeName` outside the strategy and leaves the generation
        // (upstream's `assignPod` writes the pod directly).
        let binding = opts.subresource.as_deref() == Some("binding");
        if !binding && generation_changed(&new, old, res.has_status()) {
            let g = meta::generation(old).max(1) + 1;
            meta::set(&mut new, "generation", g);
        }
        // Compare without resourceVersion so a no-op write is recognised; the caller
        // validates.
        if same_but_resource_version(&new, old) {
            return Ok(old.clone());
        }
        Ok(new)
    }

    /// Deletes an object: at once when nothing holds it, else by marking it (deletionTimestamp,
    /// and the propagation finalizer) for the garbage collector and finalizers to finish.
    pub async fn delete(
        &self,
        res: &ResourceDef,
        loc: &Location<'_>,
        opts: &DeleteOptions,
    ) -> Result<Deleted, ApiError> {
        let k = object_key(res, loc);
        for _ in 0..32 {
            let shard = self.shard_for_write(loc.cluster)?;
            let Some((cur, rev)) = self.get_raw(res, loc).await? else {
                return Err(ApiError::not_found(&res.plural, &res.group, loc.name));
            };
            if let Some(uid) = &opts.precondition_uid
                && uid != meta::uid(&cur)
            {
                return Err(ApiError::conflict(
                    &res.plural,
                    &res.group,
                    loc.name,
                    &format!(
                        "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                        meta::uid(&cur)
                    ),
                ));
            }
            if let Some(want) = &opts.precondition_rv
                && *want != rev.to_string()
            {
                return Err(ApiError::conflict(
                    &res.plural,
                    &res.group,
                    loc.name,
                    &format!(
                        "Precondition failed: ResourceVersion in precondition: {want}, ResourceVersion in object meta: {rev}"
                    ),
                ));
            }
            let propagation_finalizer = match opts.propagation.as_deref() {
                Some("Foreground") => Some("foregroundDeletion"),
                Some("Orphan") => Some("orphan"),
                _ => None,
            };
            let mut finalizers = meta::finalizers(&cur);
            let grace = res
                .strategy
                .graceful_delete(&cur, opts.grace_period_seconds)
                .filter(|g| *g > 0);
            if finalizers.is_empty()
                && propagation_finalizer.is_none()
                && !res.strategy.deletion_pending(&cur)
                && grace.is_none()
            {
                if opts.dry_run {
                    return Ok(Deleted::Gone(cur));
                }
                match shard.storage.delete(k.as_bytes(), Some(rev)).await {
                    Ok(kv) => {
                        Self::settle(&shard, res, kv.mod_revision).await;
                        self.hook_after(res, loc.cluster, &cur, None).await;
                        return Ok(Deleted::Gone(with_rv(cur, kv.mod_revision)));
                    }
                    Err(storage::Error::Conflict { .. } | storage::Error::NotFound) => continue,
                    Err(e) => return Err(storage_error(e, res, loc.name)),
                }
            }
            let mut next = cur.clone();
            if let Some(f) = propagation_finalizer
                && !finalizers.iter().any(|x| x == f)
            {
                finalizers.retain(|x| x != "orphan" && x != "foregroundDeletion");
                finalizers.push(f.to_string());
            }
            meta::set_finalizers(&mut next, finalizers);
            if meta::deletion_timestamp(&cur).is_none() {
                meta::set(&mut next, "deletionTimestamp", now());
                meta::set(&mut next, "deletionGracePeriodSeconds", grace.unwrap_or(0));
                res.strategy.on_deletion(&mut next);
            } else if let Some(g) = grace
                && meta::metadata(&cur)
                    .get("deletionGracePeriodSeconds")
                    .and_then(Value::as_i64)
                    .is_some_and(|old| g < old)
            {
                // A second delete may only shorten the grace period.
                meta::set(&mut next, "deletionGracePeriodSeconds", g);
            }
            meta::remove(&mut next, "resourceVersion");
            let mut cur_cmp = cur.clone();
            meta::remove(&mut cur_cmp, "resourceVersion");
            if next == cur_cmp || opts.dry_run {
                return Ok(Deleted::Pending(if opts.dry_run { next } else { cur }));
            }
            match shard
                .storage
                .update(k.as_bytes(), encode(&next)?, rev)
                .await
            {
                Ok(kv) => {
                    Self::settle(&shard, res, kv.mod_revision).await;
                    return Ok(Deleted::Pending(with_rv(next, kv.mod_revision)));
                }
                Err(storage::Error::Conflict { .. } | storage::Error::NotFound) => continue,
                Err(e) => return Err(storage_error(e, res, loc.name)),
            }
        }
        Err(ApiError::conflict(
            &res.plural,
            &res.group,
            loc.name,
            "too many concurrent updates; please try again",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn generation_counts_spec_changes_but_not_metadata_or_a_status_with_its_own_endpoint() {
        let a = json!({"metadata": {"labels": {"a": "1"}}, "spec": {"x": 1}, "status": {"y": 1}});
        let relabelled =
            json!({"metadata": {"labels": {"a": "2"}}, "spec": {"x": 1}, "status": {"y": 1}});
        let status =
            json!({"metadata": {"labels": {"a": "1"}}, "spec": {"x": 1}, "status": {"y": 2}});
        let spec =
            json!({"metadata": {"labels": {"a": "1"}}, "spec": {"x": 2}, "status": {"y": 1}});
        assert!(!generation_changed(&a, &relabelled, true));
        assert!(!generation_changed(&a, &status, true));
        assert!(generation_changed(&a, &status, false));
        assert!(generation_changed(&a, &spec, true));
        assert!(generation_changed(&a, &json!({"metadata": {}}), true));
    }

    #[test]
    fn a_write_that_changes_only_the_resource_version_is_a_no_op() {
        let a = json!({"metadata": {"name": "x", "resourceVersion": "5"}, "spec": {"x": 1}});
        let b = json!({"metadata": {"name": "x"}, "spec": {"x": 1}});
        let c = json!({"metadata": {"name": "y"}, "spec": {"x": 1}});
        let d = json!({"metadata": {"name": "x"}, "spec": {"x": 2}});
        assert!(same_but_resource_version(&a, &b));
        assert!(!same_but_resource_version(&a, &c));
        assert!(!same_but_resource_version(&a, &d));
        assert!(!same_but_resource_version(&a, &json!({"spec": {"x": 1}})));
    }
}
