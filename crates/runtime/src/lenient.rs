//! Watches that survive an object they cannot decode.
//!
//! A typed watch decodes a whole list at once: one stored object of the wrong shape (a
//! Deployment whose `replicas` is a string, written before the server checked types, or put
//! into storage directly) fails the list, and the informer retries it for ever — for every
//! cluster, since informers span them all. [`watcher`] decodes each object on its own: what
//! does not decode is skipped and reported (a log line, [`undecodable_objects`], and the
//! optional callback, which the shared informers use to record an Event on the object), and
//! every other object flows as before. A skipped object that is later deleted is still
//! delivered as a deletion, built from its metadata.

use std::borrow::Cow;
use std::fmt::Debug;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::{Stream, StreamExt};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::Api;
use kube::core::DynamicResourceScope;
use kube::runtime::watcher::{self, Event};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};

static UNDECODABLE: AtomicU64 = AtomicU64::new(0);

/// Objects skipped so far because they could not be decoded (process-wide).
pub fn undecodable_objects() -> u64 {
    UNDECODABLE.load(Ordering::Relaxed)
}

/// An object as a watch delivers it: decoded, or only its metadata and why it is not.
#[derive(Clone, Debug)]
pub enum Lenient<K> {
    Decoded(K),
    Undecodable {
        meta: Box<ObjectMeta>,
        error: String,
    },
}

#[derive(Deserialize)]
struct MetaOnly {
    #[serde(default)]
    metadata: ObjectMeta,
}

impl<'de, K: DeserializeOwned> Deserialize<'de> for Lenient<K> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // The object's own bytes (kube reads lists and watch events with serde_json from
        // text, where a raw value is a borrowed copy), decoded on their own.
        let raw = Box::<serde_json::value::RawValue>::deserialize(d)?;
        match serde_json::from_str::<K>(raw.get()) {
            Ok(k) => Ok(Lenient::Decoded(k)),
            Err(e) => Ok(Lenient::Undecodable {
                meta: Box::new(
                    serde_json::from_str::<MetaOnly>(raw.get())
                        .map(|m| m.metadata)
                        .unwrap_or_default(),
                ),
                error: e.to_string(),
            }),
        }
    }
}

impl<K: Resource> Resource for Lenient<K> {
    type DynamicType = K::DynamicType;
    type Scope = DynamicResourceScope;

    fn kind(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::kind(dt)
    }
    fn group(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::group(dt)
    }
    fn version(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::version(dt)
    }
    fn api_version(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::api_version(dt)
    }
    fn plural(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::plural(dt)
    }
    fn meta(&self) -> &ObjectMeta {
        match self {
            Lenient::Decoded(k) => k.meta(),
            Lenient::Undecodable { meta, .. } => meta,
        }
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        match self {
            Lenient::Decoded(k) => k.meta_mut(),
            Lenient::Undecodable { meta, .. } => meta,
        }
    }
}

/// Called with the metadata of each object skipped and the decoding error.
pub type OnUndecodable = Arc<dyn Fn(&ObjectMeta, &str) + Send + Sync>;

/// [`kube::runtime::watcher`] over `api`, decoding each object on its own and skipping (and
/// reporting) what does not decode.
pub fn watcher<K>(
    api: Api<K>,
    config: watcher::Config,
    on_undecodable: Option<OnUndecodable>,
) -> impl Stream<Item = watcher::Result<Event<K>>> + Send + 'static
where
    K: Resource + Clone + Default + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Default + Clone + Debug + Eq + std::hash::Hash,
{
    let dt = K::DynamicType::default();
    let plural = K::plural(&dt).to_string();
    let ns = api.namespace().map(str::to_string);
    let client: Client = api.into_client();
    let lenient: Api<Lenient<K>> = match ns {
        Some(ns) => Api::namespaced_with(client, &ns, &dt),
        None => Api::all_with(client, &dt),
    };
    watcher::watcher(lenient, config).filter_map(move |ev| {
        let out = decoded(ev, &plural, on_undecodable.as_ref());
        std::future::ready(out)
    })
}

fn skip(plural: &str, meta: &ObjectMeta, error: &str, report: Option<&OnUndecodable>) {
    UNDECODABLE.fetch_add(1, Ordering::Relaxed);
    tracing::warn!(
        resource = plural,
        namespace = meta.namespace.as_deref().unwrap_or_default(),
        name = meta.name.as_deref().unwrap_or_default(),
        error,
        "skipping an object that cannot be decoded"
    );
    if let Some(f) = report {
        f(meta, error);
    }
}

fn decoded<K: Resource + Default>(
    ev: watcher::Result<Event<Lenient<K>>>,
    plural: &str,
    report: Option<&OnUndecodable>,
) -> Option<watcher::Result<Event<K>>> {
    let ev = match ev {
        Ok(ev) => ev,
        Err(e) => return Some(Err(e)),
    };
    Some(Ok(match ev {
        Event::Init => Event::Init,
        Event::InitDone => Event::InitDone,
        Event::Apply(Lenient::Decoded(k)) => Event::Apply(k),
        Event::InitApply(Lenient::Decoded(k)) => Event::InitApply(k),
        Event::Delete(Lenient::Decoded(k)) => Event::Delete(k),
        Event::Apply(Lenient::Undecodable { meta, error })
        | Event::InitApply(Lenient::Undecodable { meta, error }) => {
            skip(plural, &meta, &error, report);
            return None;
        }
        // A deletion needs only the key: built from the metadata.
        Event::Delete(Lenient::Undecodable { meta, .. }) => {
            meta.name.as_ref()?;
            let mut k = K::default();
            *k.meta_mut() = *meta;
            Event::Delete(k)
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::Deployment;

    #[test]
    fn an_object_of_the_wrong_shape_decodes_as_its_metadata_and_the_error() {
        let list = r#"[{"metadata":{"name":"good"},"spec":{"replicas":2,"selector":{},"template":{}}},
            {"metadata":{"name":"bad","namespace":"t"},"spec":{"replicas":"str","selector":{},"template":{}}}]"#;
        let items: Vec<Lenient<Deployment>> = serde_json::from_str(list).expect("the list decodes");
        match &items[0] {
            Lenient::Decoded(d) => assert_eq!(d.spec.as_ref().unwrap().replicas, Some(2)),
            other => panic!("{other:?}"),
        }
        match &items[1] {
            Lenient::Undecodable { meta, error } => {
                assert_eq!(meta.name.as_deref(), Some("bad"));
                assert_eq!(meta.namespace.as_deref(), Some("t"));
                assert!(error.contains("invalid type"), "{error}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_undecodable_object_is_skipped_and_its_deletion_still_delivered() {
        let bad = || Lenient::<Deployment>::Undecodable {
            meta: Box::new(ObjectMeta {
                name: Some("bad".into()),
                ..Default::default()
            }),
            error: "invalid type".into(),
        };
        let before = undecodable_objects();
        let seen = Arc::new(parking_lot::Mutex::new(Vec::new()));
        let s = seen.clone();
        let report: OnUndecodable = Arc::new(move |m, _| s.lock().push(m.name.clone()));
        assert!(decoded(Ok(Event::InitApply(bad())), "deployments", Some(&report)).is_none());
        assert!(decoded(Ok(Event::Apply(bad())), "deployments", Some(&report)).is_none());
        assert_eq!(undecodable_objects() - before, 2);
        assert_eq!(seen.lock().len(), 2);
        match decoded(Ok(Event::Delete(bad())), "deployments", None) {
            Some(Ok(Event::Delete(d))) => assert_eq!(d.metadata.name.as_deref(), Some("bad")),
            other => panic!("{other:?}"),
        }
    }
}
