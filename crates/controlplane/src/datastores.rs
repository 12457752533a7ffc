//! DataStores: the stores a logical cluster's keys may live in besides the shared one
//! (Kamaji's `DataStore`, `../shared/spec/peers.md` §3.5).
//!
//! A `DataStore` of the root cluster names an etcd (`spec.endpoints`, a key `spec.prefix`,
//! client TLS and etcd credentials given inline or as references to Secrets of the root
//! cluster). A `LogicalCluster` with `spec.dataStore: <name>` has every key in that etcd and
//! none in the shared store; everything else about it is unchanged (see `registry::shards`).
//!
//! Every replica connects to every DataStore itself (the loop here): it resolves the
//! connection settings, connects, starts a watch cache fed by the datastore and adds it as a
//! shard; it reconnects when the settings change (a rotated client certificate in its Secret,
//! say), and drops the shard once the DataStore is gone. Until a replica is connected, the
//! datastore's clusters answer 503 there. The leading replica writes each DataStore's status —
//! `ready`, a `Ready` condition from a health check every few seconds, and `usedBy`, the
//! clusters bound to it — and holds its deletion with a finalizer while any cluster uses it,
//! as Kamaji does.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use apimachinery::builtin::{ALL, Resource, Subresource};
use apimachinery::field::{ErrorList, FieldError};
use apimachinery::meta;
use apimachinery::status::ApiError;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use registry::cache::{Filter, Follow};
use registry::shards::Shard;
use registry::store::{Location, WriteOptions};
use registry::{ResourceDef, Strategy};
use serde_json::{Value, json};
use storage::etcd::Security;

use crate::ControlPlane;
use crate::tenancy::{GROUP, VERSION};
use apimachinery::cluster;

pub const PLURAL: &str = "datastores";
/// Holds a DataStore while a logical cluster is bound to it.
pub const FINALIZER: &str = "core.matryoshka.dev/datastore-in-use";
/// The drivers a DataStore may name (Kamaji also has MySQL, PostgreSQL and NATS through kine).
const DRIVERS: &[&str] = &["etcd"];
/// How often every DataStore's connection and health are looked at.
const TICK: Duration = Duration::from_secs(5);
/// How long a connection or a health probe may take.
const PROBE: Duration = Duration::from_secs(3);
/// Endpoints a DataStore may list.
const MAX_ENDPOINTS: usize = 16;

static DATASTORES: Resource = Resource {
    group: GROUP,
    version: VERSION,
    kind: "DataStore",
    plural: PLURAL,
    singular: "datastore",
    namespaced: false,
    short_names: &["ds"],
    categories: &[],
    verbs: ALL,
    subresources: &[Subresource {
        name: "status",
        group: GROUP,
        version: VERSION,
        kind: "DataStore",
        verbs: &["get", "patch", "update"],
    }],
};

struct DataStoreStrategy;

impl Strategy for DataStoreStrategy {
    fn name_rule(&self) -> apimachinery::validation::NameRule {
        // A shard's name is a path segment (`/shards/<name>/clusters/*`).
        apimachinery::validation::NameRule::DnsLabel
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        obj["status"] = json!({"ready": false, "usedBy": []});
        let mut f = meta::finalizers(obj);
        if !f.iter().any(|x| x == FINALIZER) {
            f.push(FINALIZER.into());
        }
        meta::set_finalizers(obj, f);
    }

    fn validate(&self, obj: &Value) -> ErrorList {
        validate_spec(obj.get("spec").unwrap_or(&Value::Null))
    }

    fn validate_update(&self, new: &Value, old: &Value) -> ErrorList {
        let mut errs = self.validate(new);
        let (n, o) = (
            meta::annotation(new, REVISION_OFFSET),
            meta::annotation(old, REVISION_OFFSET),
        );
        if n != o {
            errs.push(FieldError::invalid(
                format!("metadata.annotations[{REVISION_OFFSET}]"),
                json!(n),
                "field is immutable",
            ));
        }
        errs
    }
}

/// The served DataStore resource (root cluster only).
pub fn resource() -> ResourceDef {
    let mut def = ResourceDef::builtin(&DATASTORES, Arc::new(DataStoreStrategy), None);
    def.root_only = true;
    def
}

fn validate_spec(spec: &Value) -> ErrorList {
    let mut errs = ErrorList::new();
    match spec.get("driver").and_then(Value::as_str) {
        None | Some("") => errs.push(FieldError::required("spec.driver", "")),
        Some(d) if !DRIVERS.contains(&d) => {
            errs.push(FieldError::not_supported("spec.driver", json!(d), DRIVERS))
        }
        Some(_) => {}
    }
    match spec.get("endpoints") {
        None | Some(Value::Null) => errs.push(FieldError::required("spec.endpoints", "")),
        Some(Value::Array(list)) if list.is_empty() => {
            errs.push(FieldError::required("spec.endpoints", ""))
        }
        Some(Value::Array(list)) if list.len() > MAX_ENDPOINTS => errs.push(FieldError::too_many(
            "spec.endpoints",
            list.len(),
            MAX_ENDPOINTS,
        )),
        Some(Value::Array(list)) => {
            for (i, e) in list.iter().enumerate() {
                if let Some(why) = endpoint_problem(e) {
                    errs.push(FieldError::invalid(
                        format!("spec.endpoints[{i}]"),
                        e.clone(),
                        why,
                    ));
                }
            }
        }
        Some(other) => errs.push(FieldError::type_invalid(
            "spec.endpoints",
            other.clone(),
            "must be a list of host:port",
        )),
    }
    if let Some(p) = spec.get("prefix").filter(|p| !p.is_null()) {
        let ok = p.as_str().is_some_and(|s| {
            s.is_empty()
                || (s.starts_with('/')
                    && !s.ends_with('/')
                    && s.len() <= 253
                    && s.split('/').skip(1).all(|seg| {
                        !seg.is_empty()
                            && seg != "."
                            && seg != ".."
                            && seg.bytes().all(|b| b.is_ascii_graphic())
                    }))
        });
        if !ok {
            errs.push(FieldError::invalid(
                "spec.prefix",
                p.clone(),
                "must be empty or an absolute key path such as /tenant-a, without a trailing slash",
            ));
        }
    }
    let refs = [
        (
            "spec.tlsConfig.certificateAuthority.certificate",
            "/tlsConfig/certificateAuthority/certificate",
        ),
        (
            "spec.tlsConfig.clientCertificate.certificate",
            "/tlsConfig/clientCertificate/certificate",
        ),
        (
            "spec.tlsConfig.clientCertificate.privateKey",
            "/tlsConfig/clientCertificate/privateKey",
        ),
        ("spec.basicAuth.username", "/basicAuth/username"),
        ("spec.basicAuth.password", "/basicAuth/password"),
    ];
    for (path, ptr) in refs {
        if let Some(r) = spec.pointer(ptr) {
            validate_content_ref(path, r, &mut errs);
        }
    }
    let has = |ptr: &str| spec.pointer(ptr).is_some();
    if has("/tlsConfig/clientCertificate")
        && !(has("/tlsConfig/clientCertificate/certificate")
            && has("/tlsConfig/clientCertificate/privateKey"))
    {
        errs.push(FieldError::required(
            "spec.tlsConfig.clientCertificate",
            "a client certificate needs both certificate and privateKey",
        ));
    }
    if has("/tlsConfig") && !has("/tlsConfig/certificateAuthority/certificate") {
        errs.push(FieldError::required(
            "spec.tlsConfig.certificateAuthority.certificate",
            "",
        ));
    }
    if has("/basicAuth") && !(has("/basicAuth/username") && has("/basicAuth/password")) {
        errs.push(FieldError::required(
            "spec.basicAuth",
            "basic authentication needs both username and password",
        ));
    }
    errs
}

/// Why an endpoint is not `host:port` (or `http(s)://host:port`), if it is not.
fn endpoint_problem(e: &Value) -> Option<&'static str> {
    let Some(s) = e.as_str() else {
        return Some("must be a string");
    };
    let rest = s
        .strip_prefix("https://")
        .or_else(|| s.strip_prefix("http://"))
        .unwrap_or(s);
    let Some((host, port)) = rest.rsplit_once(':') else {
        return Some("must be host:port");
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty()
        || !host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-.:".contains(&b))
    {
        return Some("must be host:port");
    }
    match port.parse::<u16>() {
        Ok(p) if p > 0 => None,
        _ => Some("must be host:port with a port between 1 and 65535"),
    }
}

/// A content reference: `{content: <base64>}` or `{secretReference: {name, namespace,
/// keyPath}}` (Kamaji's `ContentRef`), exactly one of them.
fn validate_content_ref(path: &str, r: &Value, errs: &mut ErrorList) {
    let content = r.get("content").filter(|c| !c.is_null());
    let secret = r.get("secretReference").filter(|c| !c.is_null());
    match (content, secret) {
        (Some(c), None) => {
            if c.as_str().is_none_or(|s| STANDARD.decode(s).is_err()) {
                errs.push(FieldError::invalid(
                    format!("{path}.content"),
                    json!("<redacted>"),
                    "must be base64-encoded",
                ));
            }
        }
        (None, Some(s)) => {
            for f in ["name", "namespace", "keyPath"] {
                if s.get(f).and_then(Value::as_str).is_none_or(str::is_empty) {
                    errs.push(FieldError::required(
                        format!("{path}.secretReference.{f}"),
                        "",
                    ));
                }
            }
        }
        _ => errs.push(FieldError::invalid(
            path.to_string(),
            json!("<redacted>"),
            "exactly one of content or secretReference must be set",
        )),
    }
}

/// On a DataStore: the offset of its revisions (`k · 2^40` for the `k`-th datastore), set
/// at creation and never changed (see `storage::offset`): a cluster moved into a later
/// datastore keeps its resourceVersions growing.
pub const REVISION_OFFSET: &str = "core.matryoshka.dev/revision-offset";

/// A DataStore's revision offset (one spacing for one without the annotation).
pub fn revision_offset(ds: &Value) -> i64 {
    meta::annotation(ds, REVISION_OFFSET)
        .and_then(|v| v.parse().ok())
        .filter(|o: &i64| *o > 0)
        .unwrap_or(storage::offset::SPACING)
}

/// Gives a new DataStore the next revision offset: one spacing above the highest of the
/// existing ones.
pub struct RevisionOffset;

impl apimachinery::admission::Mutator for RevisionOffset {
    fn mutate(
        &self,
        req: &apimachinery::admission::Request<'_>,
        objects: &dyn apimachinery::admission::Objects,
    ) -> Result<Option<Value>, ApiError> {
        let highest = objects
            .list(GROUP, PLURAL, cluster::ROOT, "")
            .iter()
            .map(revision_offset)
            .max()
            .unwrap_or(0);
        let next = (highest / storage::offset::SPACING + 1) * storage::offset::SPACING;
        let mut obj = req.object.clone();
        let md = meta::metadata_mut(&mut obj);
        let annotations = md.entry("annotations").or_insert_with(|| json!({}));
        if !annotations.is_object() {
            *annotations = json!({});
        }
        annotations[REVISION_OFFSET] = json!(next.to_string());
        Ok(Some(obj))
    }
}

/// Where a LogicalCluster's keys live: its `spec.dataStore` (empty: the shared store).
pub fn binding(lc: &Value) -> &str {
    lc.pointer("/spec/dataStore")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// Checks a LogicalCluster's `spec.dataStore`: a DNS label (it names a DataStore).
pub fn validate_binding(lc: &Value, errs: &mut ErrorList) {
    let Some(ds) = lc.pointer("/spec/dataStore").filter(|v| !v.is_null()) else {
        return;
    };
    match ds.as_str() {
        None => errs.push(FieldError::type_invalid(
            "spec.dataStore",
            ds.clone(),
            "must be a string",
        )),
        Some("") => {}
        Some(s) => {
            for why in apimachinery::validation::is_dns1123_label(s) {
                errs.push(FieldError::invalid("spec.dataStore", ds.clone(), why));
            }
        }
    }
}

/// A LogicalCluster's `spec.dataStore` never changes: its keys live there.
pub fn validate_binding_update(new: &Value, old: &Value, errs: &mut ErrorList) {
    if binding(new) != binding(old) {
        errs.push(FieldError::invalid(
            "spec.dataStore",
            new.pointer("/spec/dataStore")
                .cloned()
                .unwrap_or(Value::Null),
            "field is immutable",
        ));
    }
}

/// Refuses a LogicalCluster bound to a DataStore that does not exist or is being deleted
/// (admission: it reads the DataStores).
pub struct BindingValidator;

impl apimachinery::admission::Validator for BindingValidator {
    fn validate(
        &self,
        req: &apimachinery::admission::Request<'_>,
        objects: &dyn apimachinery::admission::Objects,
    ) -> Result<(), ApiError> {
        // Only a move marks a cluster as moving (`crate::moves`).
        let mark = |o: Option<&Value>| o.and_then(crate::moves::moving_to).map(String::from);
        if mark(Some(req.object)) != mark(req.old) {
            let mut errs = ErrorList::new();
            errs.push(FieldError::forbidden(
                format!("metadata.annotations[{}]", crate::moves::MOVING_TO),
                "set by the cluster's move subresource only",
            ));
            return Err(ApiError::invalid(
                "LogicalCluster",
                GROUP,
                meta::name(req.object),
                &errs,
            ));
        }
        if req.operation != apimachinery::admission::Operation::Create {
            return Ok(());
        }
        let ds = binding(req.object);
        if ds.is_empty() {
            return Ok(());
        }
        let found = objects.get(GROUP, PLURAL, cluster::ROOT, "", ds);
        let why = match found {
            None => "the DataStore does not exist",
            Some(d) if meta::deletion_timestamp(&d).is_some() => "the DataStore is being deleted",
            Some(_) => return Ok(()),
        };
        let mut errs = ErrorList::new();
        errs.push(FieldError::invalid("spec.dataStore", json!(ds), why));
        Err(ApiError::invalid(
            "LogicalCluster",
            GROUP,
            meta::name(req.object),
            &errs,
        ))
    }
}

/// A DataStore's connection settings, resolved from its spec and Secrets.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Settings {
    endpoints: Vec<String>,
    prefix: String,
    security: Security,
    offset: i64,
}

/// Resolves a content reference against the root cluster's Secrets.
fn content(cp: &ControlPlane, r: &Value, what: &str) -> Result<String, String> {
    let bytes = if let Some(c) = r.get("content").and_then(Value::as_str) {
        STANDARD
            .decode(c)
            .map_err(|e| format!("{what}: the content is not base64: {e}"))?
    } else {
        let s = r.get("secretReference").unwrap_or(&Value::Null);
        let field = |f: &str| s.get(f).and_then(Value::as_str).unwrap_or("");
        let (name, ns, key) = (field("name"), field("namespace"), field("keyPath"));
        let secret = cp
            .store
            .shared_cache()
            .get("", "secrets", cluster::ROOT, ns, name)
            .ok_or_else(|| format!("{what}: the Secret {ns}/{name} does not exist"))?
            .value();
        let data = secret
            .pointer(&format!(
                "/data/{}",
                key.replace('~', "~0").replace('/', "~1")
            ))
            .and_then(Value::as_str)
            .ok_or_else(|| format!("{what}: the Secret {ns}/{name} has no key {key:?}"))?;
        STANDARD
            .decode(data)
            .map_err(|e| format!("{what}: the Secret's data is not base64: {e}"))?
    };
    String::from_utf8(bytes).map_err(|_| format!("{what} is not text"))
}

fn settings(cp: &ControlPlane, ds: &Value) -> Result<Settings, String> {
    let spec = ds.get("spec").unwrap_or(&Value::Null);
    let get = |ptr: &str, what: &str| -> Result<Option<String>, String> {
        spec.pointer(ptr).map(|r| content(cp, r, what)).transpose()
    };
    let user = match (
        get("/basicAuth/username", "the username")?,
        get("/basicAuth/password", "the password")?,
    ) {
        (Some(u), Some(p)) => Some((u, p)),
        _ => None,
    };
    Ok(Settings {
        endpoints: spec
            .get("endpoints")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|e| e.as_str().map(String::from))
            .collect(),
        prefix: spec
            .get("prefix")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        offset: revision_offset(ds),
        security: Security {
            ca_pem: get(
                "/tlsConfig/certificateAuthority/certificate",
                "the CA certificate",
            )?,
            client_cert_pem: get(
                "/tlsConfig/clientCertificate/certificate",
                "the client certificate",
            )?,
            client_key_pem: get("/tlsConfig/clientCertificate/privateKey", "the client key")?,
            user,
        },
    })
}

/// What this replica knows of one DataStore.
struct Known {
    /// The settings of the shard connected (`None`: not connected).
    connected: Option<Settings>,
    /// The last health: `Ok` or why not.
    health: Result<(), (String, String)>,
}

/// Connects to a DataStore and starts the watch cache it feeds.
async fn connect(name: &str, s: &Settings) -> Result<Arc<Shard>, String> {
    let store = tokio::time::timeout(
        PROBE * 2,
        storage::etcd::EtcdStore::connect_with(&s.endpoints, s.prefix.as_bytes(), &s.security),
    )
    .await
    .map_err(|_| "connecting timed out".to_string())?
    .map_err(|e| format!("connecting: {e}"))?;
    let storage: Arc<dyn storage::Storage> = Arc::new(storage::offset::OffsetStorage::new(
        Arc::new(store),
        s.offset,
    ));
    let cache = registry::cache::WatchCache::start(storage.clone(), ControlPlane::cache_options())
        .await
        .map_err(|e| format!("loading its watch cache: {e}"))?;
    Ok(Shard::new(name, storage, cache))
}

/// Brings one DataStore's connection on this replica to what its object says.
async fn reconcile(cp: &ControlPlane, known: &mut HashMap<String, Known>, name: &str) {
    let obj = cp
        .store
        .shared_cache()
        .get(GROUP, PLURAL, cluster::ROOT, "", name)
        .map(|o| o.value());
    let Some(obj) = obj else {
        if cp.store.shards.disconnect(name).is_some() {
            tracing::info!(datastore = name, "DataStore deleted; disconnected");
        }
        known.remove(name);
        return;
    };
    let entry = known.entry(name.to_string()).or_insert(Known {
        connected: None,
        health: Err(("Connecting".into(), "not connected yet".into())),
    });
    let wanted = match settings(cp, &obj) {
        Ok(s) => s,
        Err(why) => {
            entry.health = Err(("InvalidConfiguration".into(), why));
            return;
        }
    };
    if entry.connected.as_ref() == Some(&wanted) {
        return;
    }
    match connect(name, &wanted).await {
        Ok(shard) => {
            cp.store.shards.connect(shard);
            tracing::info!(datastore = name, endpoints = ?wanted.endpoints, "DataStore connected");
            entry.connected = Some(wanted);
            entry.health = Ok(());
        }
        Err(why) => {
            tracing::warn!(datastore = name, error = %why, "connecting to a DataStore");
            entry.health = Err(("Unreachable".into(), why));
        }
    }
}

/// Probes a connected DataStore: its current revision within [`PROBE`].
async fn probe(cp: &ControlPlane, known: &mut HashMap<String, Known>, name: &str) {
    let Some(entry) = known.get_mut(name) else {
        return;
    };
    if entry.connected.is_none() {
        return;
    }
    let Ok(shard) = cp.store.shards.named(name) else {
        return;
    };
    entry.health = match tokio::time::timeout(PROBE, shard.storage.current_revision()).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(("Unhealthy".into(), e.to_string())),
        Err(_) => Err((
            "Unhealthy".into(),
            format!("no answer within {}s", PROBE.as_secs()),
        )),
    };
}

/// The clusters bound to each DataStore.
fn users(cp: &ControlPlane) -> HashMap<String, Vec<String>> {
    let filter = Filter {
        cluster: Some(cluster::ROOT.into()),
        ..Filter::default()
    };
    let mut out: HashMap<String, Vec<String>> = HashMap::new();
    for lc in cp
        .store
        .shared_cache()
        .list(GROUP, crate::tenancy::PLURAL, &filter)
        .0
    {
        let v = lc.value();
        let ds = binding(&v);
        if !ds.is_empty() {
            out.entry(ds.to_string())
                .or_default()
                .push(lc.name().to_string());
        }
    }
    for v in out.values_mut() {
        v.sort();
    }
    out
}

/// Writes a DataStore's status when it changed, and lets a deleted one go once unused.
async fn report(
    cp: &ControlPlane,
    res: &ResourceDef,
    name: &str,
    health: &Result<(), (String, String)>,
    used_by: &[String],
) -> Result<(), ApiError> {
    let Some(cur) = cp
        .store
        .shared_cache()
        .get(GROUP, PLURAL, cluster::ROOT, "", name)
        .map(|o| o.value())
    else {
        return Ok(());
    };
    let loc = Location {
        cluster: cluster::ROOT,
        namespace: "",
        name,
    };
    if meta::deletion_timestamp(&cur).is_some()
        && used_by.is_empty()
        && meta::finalizers(&cur).iter().any(|f| f == FINALIZER)
    {
        let result = cp
            .store
            .update_with(res, &loc, &WriteOptions::default(), |cur| {
                let mut next = cur
                    .cloned()
                    .ok_or_else(|| ApiError::not_found(PLURAL, GROUP, name))?;
                let f: Vec<String> = meta::finalizers(&next)
                    .into_iter()
                    .filter(|f| f != FINALIZER)
                    .collect();
                meta::set_finalizers(&mut next, f);
                Ok(next)
            })
            .await;
        return match result {
            Err(e) if e.code != 404 => Err(e),
            _ => Ok(()),
        };
    }
    let (status, reason, message) = match health {
        Ok(()) => ("True", "Connected", "the datastore answers".to_string()),
        Err((reason, message)) => ("False", reason.as_str(), message.clone()),
    };
    let old = cur.get("status").cloned().unwrap_or(Value::Null);
    let old_ready = old
        .pointer("/conditions")
        .and_then(Value::as_array)
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"));
    let same = old.get("ready") == Some(&json!(health.is_ok()))
        && old.get("usedBy") == Some(&json!(used_by))
        && old_ready.is_some_and(|c| {
            c["status"] == status && c["reason"] == reason && c["message"] == message.as_str()
        });
    if same {
        return Ok(());
    }
    let since = old_ready
        .filter(|c| c["status"] == status)
        .and_then(|c| c.get("lastTransitionTime").cloned())
        .unwrap_or_else(|| json!(registry::store::now()));
    let opts = WriteOptions {
        subresource: Some("status".into()),
        ..WriteOptions::default()
    };
    let result = cp
        .store
        .update_with(res, &loc, &opts, |cur| {
            let mut next = cur
                .cloned()
                .ok_or_else(|| ApiError::not_found(PLURAL, GROUP, name))?;
            next["status"] = json!({
                "ready": health.is_ok(),
                "usedBy": used_by,
                "conditions": [{
                    "type": "Ready",
                    "status": status,
                    "reason": reason,
                    "message": message,
                    "lastTransitionTime": since,
                }],
            });
            Ok(next)
        })
        .await;
    match result {
        Err(e) if e.code != 404 => Err(e),
        _ => Ok(()),
    }
}

/// Starts the DataStore loop of this replica: connections on every replica, status and
/// finalizers where the control plane leads.
pub fn start(cp: &Arc<ControlPlane>) -> Result<(), ApiError> {
    let filter = Filter {
        cluster: Some(cluster::ROOT.into()),
        ..Filter::default()
    };
    let mut follow = Follow::new(cp.store.shared_cache(), GROUP, PLURAL, filter.clone())?;
    let weak = Arc::downgrade(cp);
    tokio::spawn(async move {
        let mut known: HashMap<String, Known> = HashMap::new();
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let mut names = Vec::new();
            let full = tokio::select! {
                (_, obj) = follow.recv() => {
                    names.push(obj.name().to_string());
                    while let Some((_, o)) = follow.try_recv() {
                        names.push(o.name().to_string());
                    }
                    false
                }
                _ = tick.tick() => true,
            };
            let Some(cp) = weak.upgrade() else { return };
            if full {
                let (all, _) = cp.store.shared_cache().list(GROUP, PLURAL, &filter);
                names = all.iter().map(|o| o.name().to_string()).collect();
                names.extend(known.keys().cloned());
            }
            names.sort();
            names.dedup();
            for name in &names {
                reconcile(&cp, &mut known, name).await;
                if full {
                    probe(&cp, &mut known, name).await;
                }
            }
            if !cp.leads() {
                continue;
            }
            let Some(res) = cp.catalog.builtin(GROUP, PLURAL) else {
                continue;
            };
            let users = users(&cp);
            for name in &names {
                let Some(k) = known.get(name) else { continue };
                let used = users.get(name).map(Vec::as_slice).unwrap_or_default();
                if let Err(e) = report(&cp, &res, name, &k.health, used).await {
                    tracing::warn!(datastore = %name, error = %e, "DataStore status");
                }
            }
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages(spec: Value) -> Vec<String> {
        validate_spec(&spec).iter().map(|e| e.message()).collect()
    }

    #[test]
    fn a_datastore_names_a_supported_driver_endpoints_and_well_formed_references() {
        assert!(
            messages(json!({"driver": "etcd", "endpoints": ["127.0.0.1:2379", "https://etcd-0.etcd:2379"], "prefix": "/tenant-a"}))
                .is_empty()
        );
        let errs =
            messages(json!({"driver": "MySQL", "endpoints": ["nohost", "h:0"], "prefix": "a/"}));
        assert!(
            errs.iter()
                .any(|e| e.starts_with("spec.driver: Unsupported value: \"MySQL\"")),
            "{errs:?}"
        );
        assert!(
            errs.iter()
                .any(|e| e.starts_with("spec.endpoints[0]: Invalid value")),
            "{errs:?}"
        );
        assert!(
            errs.iter()
                .any(|e| e.starts_with("spec.endpoints[1]: Invalid value")),
            "{errs:?}"
        );
        assert!(
            errs.iter()
                .any(|e| e.starts_with("spec.prefix: Invalid value")),
            "{errs:?}"
        );
        assert_eq!(
            messages(json!({})),
            vec![
                "spec.driver: Required value",
                "spec.endpoints: Required value"
            ]
        );
        let errs = messages(
            json!({"driver": "etcd", "endpoints": ["h:1"], "tlsConfig": {
                "certificateAuthority": {"certificate": {"content": "!!", "secretReference": {"name": "a"}}},
                "clientCertificate": {"certificate": {"secretReference": {"name": "c"}}},
            }}),
        );
        assert!(
            errs.iter()
                .any(|e| e
                    .starts_with("spec.tlsConfig.certificateAuthority.certificate: Invalid value")),
            "{errs:?}"
        );
        assert!(errs.iter().any(|e| e == "spec.tlsConfig.clientCertificate.certificate.secretReference.namespace: Required value"), "{errs:?}");
        assert!(
            errs.iter()
                .any(|e| e.starts_with("spec.tlsConfig.clientCertificate: Required value")),
            "{errs:?}"
        );
    }

    #[test]
    fn a_clusters_datastore_is_a_label_and_never_changes() {
        let lc = |ds: Value| json!({"spec": {"dataStore": ds}});
        let check = |new: &Value, old: Option<&Value>| {
            let mut errs = ErrorList::new();
            validate_binding(new, &mut errs);
            if let Some(old) = old {
                validate_binding_update(new, old, &mut errs);
            }
            errs.iter().map(|e| e.message()).collect::<Vec<_>>()
        };
        assert!(check(&lc(json!("tenant-a")), None).is_empty());
        assert!(check(&json!({"spec": {}}), None).is_empty());
        assert!(!check(&lc(json!("Not_A_Label")), None).is_empty());
        assert_eq!(
            check(&lc(json!("b")), Some(&lc(json!("a")))),
            vec!["spec.dataStore: Invalid value: \"b\": field is immutable"]
        );
        assert_eq!(
            check(&json!({"spec": {}}), Some(&lc(json!("a")))),
            vec!["spec.dataStore: Invalid value: null: field is immutable"]
        );
        assert!(check(&lc(json!("a")), Some(&lc(json!("a")))).is_empty());
    }
}
