//! Waiting for conditions: on watches where there is one, else by polling against a
//! deadline. A test that waits longer than [`PATIENCE`] fails saying what it waited for.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::future::Future;
use std::time::Duration;

use futures::StreamExt;
use kube::api::Api;
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;

/// How long a test waits before failing.
pub const PATIENCE: Duration = Duration::from_secs(60);

/// Waits until `pred` holds for the objects `api` lists (re-checked on every watch event).
pub async fn wait_list<K>(api: &Api<K>, what: &str, pred: impl Fn(&[K]) -> bool) -> Vec<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    let mut objs: BTreeMap<String, K> = BTreeMap::new();
    let mut init: Option<BTreeMap<String, K>> = None;
    let mut stream = watcher::watcher(api.clone(), watcher::Config::default()).boxed();
    let fut = async {
        while let Some(ev) = stream.next().await {
            match ev.expect("watch") {
                watcher::Event::Apply(o) => {
                    objs.insert(o.name_any(), o);
                }
                watcher::Event::Delete(o) => {
                    objs.remove(&o.name_any());
                }
                watcher::Event::Init => {
                    init = Some(BTreeMap::new());
                    continue;
                }
                watcher::Event::InitApply(o) => {
                    init.get_or_insert_with(BTreeMap::new)
                        .insert(o.name_any(), o);
                    continue;
                }
                watcher::Event::InitDone => objs = init.take().unwrap_or_default(),
            }
            let list: Vec<K> = objs.values().cloned().collect();
            if pred(&list) {
                return list;
            }
        }
        panic!("watch ended while waiting for {what}");
    };
    match tokio::time::timeout(PATIENCE, fut).await {
        Ok(v) => v,
        Err(_) => {
            let names: Vec<String> = objs.keys().cloned().collect();
            panic!("timed out waiting for {what}; last seen: {names:?}")
        }
    }
}

/// Waits until the named object satisfies `pred` (`None`: it does not exist).
pub async fn wait_for<K>(
    api: &Api<K>,
    name: &str,
    what: &str,
    pred: impl Fn(Option<&K>) -> bool,
) -> Option<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    let list = wait_list(api, what, |objs| {
        pred(objs.iter().find(|o| o.name_any() == name))
    })
    .await;
    list.into_iter().find(|o| o.name_any() == name)
}

/// Polls `f` until it gives `Some`, failing the test after [`PATIENCE`]: for conditions no
/// watch reports (a file, a socket, a count in the store).
pub async fn eventually<T, F, Fut>(what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}
