//! One object as the watch cache holds it: compact JSON bytes with `metadata.resourceVersion`
//! already set, plus what filtering needs without decoding (name, namespace, uid, labels and
//! the resource's selectable fields).
//!
//! A decoded `serde_json::Value` costs about ten times its JSON (a map node per object,
//! managedFields included); at 100,000 pods that was half the server's memory. The bytes are
//! written once, when the feed prepares an event, and every list and watch response splices
//! them into its output. The encoder records two positions on the way: the resourceVersion
//! string (a DELETED event rewrites just that) and where the cluster annotation goes (a
//! cross-cluster response inserts it there, with no decoding per watcher).
//!
//! Resources that the server's own per-request loops read as objects (RBAC) are also kept
//! decoded; see [`super::CacheOptions::keep_decoded`].

use std::sync::Arc;

use apimachinery::labels::Labels;
use bytes::Bytes;
use serde_json::{Map, Value};

use super::CLUSTER_ANNOTATION;
use super::encode::{Slot, encode, write_str};
use crate::strategy::Strategy;

/// An object as the cache holds it.
pub struct CachedObject {
    /// The revision the object was written (or deleted) at; its resourceVersion.
    pub rev: i64,
    /// The logical cluster the object belongs to.
    pub cluster: Arc<str>,
    json: Bytes,
    /// Byte range of the resourceVersion digits inside `json`.
    rv_at: (usize, usize),
    slot: Option<Slot>,
    attrs: Attrs,
    kept: Option<Arc<Value>>,
}

impl std::fmt::Debug for CachedObject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "CachedObject({}/{}/{} @{})",
            self.cluster, self.attrs.namespace, self.attrs.name, self.rev
        )
    }
}

/// A selectable field's name and value.
type FieldValue = (&'static str, Option<Box<str>>);

/// What filters and internal loops read without decoding.
#[derive(Debug, Clone, Default)]
struct Attrs {
    name: Box<str>,
    namespace: Box<str>,
    uid: Box<str>,
    labels: LabelSet,
    /// The strategy's selectable fields, as `Strategy::field` computed them.
    fields: Box<[FieldValue]>,
}

/// An object's labels (string values only, as label selectors see them), sorted by key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSet(Box<[(Box<str>, Box<str>)]>);

impl LabelSet {
    fn of(obj: &Value) -> LabelSet {
        let mut v: Vec<(Box<str>, Box<str>)> = obj
            .pointer("/metadata/labels")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .filter_map(|(k, v)| Some((k.as_str().into(), v.as_str()?.into())))
            .collect();
        v.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        LabelSet(v.into_boxed_slice())
    }

    /// The labels as (key, value) pairs in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (&**k, &**v))
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Labels for LabelSet {
    fn label(&self, key: &str) -> Option<&str> {
        self.0
            .binary_search_by(|(k, _)| (**k).cmp(key))
            .ok()
            .map(|i| &*self.0[i].1)
    }
}

impl CachedObject {
    /// Prepares a stored object (JSON without resourceVersion) written at `rev`: decodes it
    /// once to extract its attributes and re-encodes it with the resourceVersion set. `None`
    /// for anything that is not a JSON object.
    pub fn from_stored(
        raw: &[u8],
        rev: i64,
        cluster: Arc<str>,
        strategy: &dyn Strategy,
        keep_decoded: bool,
    ) -> Option<CachedObject> {
        let value: Value = serde_json::from_slice(raw).ok()?;
        CachedObject::prepare(value, rev, cluster, strategy, keep_decoded, raw.len())
    }

    /// Prepares an object at `rev` (its resourceVersion is set to `rev`). `None` for anything
    /// that is not a JSON object.
    pub fn new(
        value: Value,
        rev: i64,
        cluster: Arc<str>,
        strategy: &dyn Strategy,
        keep_decoded: bool,
    ) -> Option<CachedObject> {
        CachedObject::prepare(value, rev, cluster, strategy, keep_decoded, 1024)
    }

    /// `new` with the expected size of the encoding (the stored bytes' length: the cached
    /// form adds only the resourceVersion).
    fn prepare(
        mut value: Value,
        rev: i64,
        cluster: Arc<str>,
        strategy: &dyn Strategy,
        keep_decoded: bool,
        size_hint: usize,
    ) -> Option<CachedObject> {
        if !value.is_object() {
            return None;
        }
        apimachinery::meta::set(&mut value, "resourceVersion", rev.to_string());
        let enc = encode(value.as_object()?, size_hint + 48).ok()?;
        let meta = apimachinery::meta::metadata(&value);
        let text =
            |k: &str| -> Box<str> { meta.get(k).and_then(Value::as_str).unwrap_or("").into() };
        let attrs = Attrs {
            name: text("name"),
            namespace: text("namespace"),
            uid: text("uid"),
            labels: LabelSet::of(&value),
            fields: strategy
                .field_names()
                .iter()
                .map(|n| (*n, strategy.field(&value, n).map(String::into_boxed_str)))
                .collect(),
        };
        Some(CachedObject {
            rev,
            cluster,
            json: Bytes::from(enc.json),
            rv_at: enc.rv_at,
            slot: enc.slot,
            attrs,
            kept: keep_decoded.then(|| Arc::new(value)),
        })
    }

    /// The same object at another revision (a DELETED event carries the last state at the
    /// deletion's revision): only the resourceVersion digits are rewritten.
    pub fn at_revision(&self, rev: i64) -> CachedObject {
        let digits = rev.to_string();
        let (start, end) = self.rv_at;
        let mut json = Vec::with_capacity(self.json.len() + digits.len() - (end - start));
        json.extend_from_slice(&self.json[..start]);
        json.extend_from_slice(digits.as_bytes());
        json.extend_from_slice(&self.json[end..]);
        let shift = digits.len() as isize - (end - start) as isize;
        let slot = self
            .slot
            .map(|s| if s.at() > start { s.shifted(shift) } else { s });
        let kept = self.kept.as_ref().map(|v| {
            let mut v = Value::clone(v);
            apimachinery::meta::set(&mut v, "resourceVersion", digits.clone());
            Arc::new(v)
        });
        CachedObject {
            rev,
            cluster: self.cluster.clone(),
            json: Bytes::from(json),
            rv_at: (start, start + digits.len()),
            slot,
            attrs: self.attrs.clone(),
            kept,
        }
    }

    /// The object as compact JSON, resourceVersion included.
    pub fn json(&self) -> &Bytes {
        &self.json
    }

    /// The object decoded (shared when the cache keeps its resource decoded, else a fresh
    /// decode: use it off the hot paths).
    pub fn value(&self) -> Arc<Value> {
        match &self.kept {
            Some(v) => v.clone(),
            None => Arc::new(
                serde_json::from_slice(&self.json).unwrap_or_else(|_| Value::Object(Map::new())),
            ),
        }
    }

    /// The object decoded and owned.
    pub fn to_value(&self) -> Value {
        Arc::unwrap_or_clone(self.value())
    }

    /// The object decoded, with the cluster annotation a cross-cluster response carries.
    pub fn annotated_value(&self) -> Value {
        let mut v = self.to_value();
        let ann = apimachinery::meta::metadata_mut(&mut v)
            .entry("annotations")
            .or_insert_with(|| Value::Object(Map::new()));
        if !ann.is_object() {
            *ann = Value::Object(Map::new());
        }
        if let Some(a) = ann.as_object_mut() {
            a.insert(CLUSTER_ANNOTATION.into(), Value::from(&*self.cluster));
        }
        v
    }

    /// Appends the object's JSON to `out`; `annotate` adds the cluster annotation (for
    /// cross-cluster responses) by splicing it in, without decoding.
    pub fn write_json(&self, out: &mut Vec<u8>, annotate: bool) {
        if !annotate {
            out.extend_from_slice(&self.json);
            return;
        }
        let Some(slot) = self.slot else {
            // The object already names a cluster annotation of its own (or has an odd
            // metadata): replace it the slow way.
            if serde_json::to_writer(&mut *out, &self.annotated_value()).is_err() {
                out.extend_from_slice(b"{}");
            }
            return;
        };
        let at = slot.at();
        out.reserve(self.json.len() + CLUSTER_ANNOTATION.len() + self.cluster.len() + 24);
        out.extend_from_slice(&self.json[..at]);
        let entry = |out: &mut Vec<u8>| {
            out.push(b'"');
            out.extend_from_slice(CLUSTER_ANNOTATION.as_bytes());
            out.extend_from_slice(b"\":");
            write_str(out, &self.cluster);
        };
        match slot {
            Slot::Annotations { empty, .. } => {
                entry(out);
                if !empty {
                    out.push(b',');
                }
            }
            Slot::Metadata { .. } => {
                out.extend_from_slice(b"\"annotations\":{");
                entry(out);
                out.extend_from_slice(b"},");
            }
        }
        out.extend_from_slice(&self.json[at..]);
    }

    /// The object's JSON with the cluster annotation, if `annotate`, else shared.
    pub fn to_json(&self, annotate: bool) -> Bytes {
        if !annotate {
            return self.json.clone();
        }
        let mut out = Vec::new();
        self.write_json(&mut out, true);
        Bytes::from(out)
    }

    /// `metadata.name`.
    pub fn name(&self) -> &str {
        &self.attrs.name
    }

    /// `metadata.namespace` (empty for cluster-scoped objects).
    pub fn namespace(&self) -> &str {
        &self.attrs.namespace
    }

    /// `metadata.uid`.
    pub fn uid(&self) -> &str {
        &self.attrs.uid
    }

    /// `metadata.labels`.
    pub fn labels(&self) -> &LabelSet {
        &self.attrs.labels
    }

    /// A selectable field as `strategy` defines it (`metadata.name`, `metadata.namespace`,
    /// then the strategy's own). Fields extracted when the object was cached are read from
    /// there; any other (a custom resource's selectable field) decodes the object.
    pub fn field(&self, strategy: &dyn Strategy, name: &str) -> Option<String> {
        match name {
            "metadata.name" => Some(self.name().to_string()),
            "metadata.namespace" => Some(self.namespace().to_string()),
            _ => match self.attrs.fields.iter().find(|(n, _)| *n == name) {
                Some((_, v)) => v.as_deref().map(String::from),
                None => strategy.field(&self.value(), name),
            },
        }
    }
}
