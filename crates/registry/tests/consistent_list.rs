//! A consistent list (no resourceVersion) the cache cannot serve in time is read from storage,
//! as upstream's cacher does, instead of answering 504.

use std::sync::Arc;

use registry::cache::{CacheOptions, Filter, WatchCache};
use registry::catalog::Catalog;
use registry::store::{ListRequest, Location, Store, WriteOptions};
use serde_json::json;

// Time is paused: the cache's wait for a revision it never reaches times out at once.
#[tokio::test(start_paused = true)]
async fn a_consistent_list_falls_back_to_storage_when_the_cache_lags() {
    let dir = tempfile::tempdir().unwrap();
    let storage = Arc::new(storage::embedded::EmbeddedStore::open(dir.path()).unwrap());
    // A cache over other, empty storage never sees the store's writes: a cache that lags.
    let other = tempfile::tempdir().unwrap();
    let stale = Arc::new(storage::embedded::EmbeddedStore::open(other.path()).unwrap());
    let cache = WatchCache::start(stale, CacheOptions::default())
        .await
        .unwrap();
    let store = Store::new(storage, cache);
    let catalog = Catalog::new(registry::builtins::resources());
    let namespaces = catalog.builtin("", "namespaces").unwrap();
    for name in ["a", "b"] {
        let loc = Location {
            cluster: "root",
            namespace: "",
            name,
        };
        store
            .create(
                &namespaces,
                &loc,
                json!({"metadata": {"name": name}}),
                &WriteOptions::default(),
            )
            .await
            .unwrap();
    }
    let in_root = Filter {
        cluster: Some("root".into()),
        ..Filter::default()
    };
    let listed = store
        .list(
            &namespaces,
            &ListRequest {
                filter: in_root,
                ..ListRequest::default()
            },
        )
        .await
        .expect("a consistent list from storage");
    let names: Vec<&str> = listed.items.iter().map(|o| o.name()).collect();
    assert_eq!(names, ["a", "b"]);
    assert!(listed.revision > 0);
    // A list at a revision the cache has not reached still answers 504, as upstream.
    let at = ListRequest {
        filter: Filter {
            cluster: Some("root".into()),
            ..Filter::default()
        },
        resource_version: Some(listed.revision.to_string()),
        ..ListRequest::default()
    };
    let err = store
        .list(&namespaces, &at)
        .await
        .err()
        .expect("a future revision");
    assert_eq!(err.code, 504);
}
