//! kube-rs watches reduced to what the controllers of this crate need: an object applied, an
//! object deleted, or a complete list (a watch's initial list or relist) that replaces what
//! the consumer holds of that kind.
//!
//! A relist is delivered whole, once it is complete, so a consumer never programs the kernel
//! from half a list (upstream's proxier waits for its informers' `HasSynced` for the same
//! reason). Watch errors are logged and retried with kube-rs's default backoff.

use std::fmt::Debug;

use futures::{Stream, StreamExt};
use kube::Resource;
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use serde::de::DeserializeOwned;

/// What a watch reports.
#[derive(Debug)]
pub enum Change<K> {
    Apply(K),
    Delete(K),
    /// Every object there is: the consumer replaces its view of the kind with these.
    Relisted(Vec<K>),
}

/// Watches `api` with `config`, forever.
pub fn watch<K>(
    api: Api<K>,
    config: watcher::Config,
    kind: &'static str,
) -> impl Stream<Item = Change<K>> + Send + 'static
where
    K: Resource + Clone + Default + Debug + DeserializeOwned + Send + Sync + 'static,
    K::DynamicType: Default + Clone + Debug + Eq + std::hash::Hash,
{
    let mut listing: Option<Vec<K>> = None;
    runtime::lenient::watcher(api, config, None)
        .default_backoff()
        .filter_map(move |ev| {
            let out = match ev {
                Ok(Event::Init) => {
                    listing = Some(Vec::new());
                    None
                }
                Ok(Event::InitApply(o)) => {
                    listing.get_or_insert_with(Vec::new).push(o);
                    None
                }
                Ok(Event::InitDone) => Some(Change::Relisted(listing.take().unwrap_or_default())),
                Ok(Event::Apply(o)) => Some(Change::Apply(o)),
                Ok(Event::Delete(o)) => Some(Change::Delete(o)),
                Err(e) => {
                    tracing::warn!(kind, error = %e, "watch failed; retrying");
                    None
                }
            };
            futures::future::ready(out)
        })
}
