//! The server's own loops follow the cache with [`Follow`], which must outlive the cache
//! dropping it for falling behind.

use std::sync::Arc;

use registry::cache::{CacheOptions, EventType, Filter, Follow, WatchCache};
use registry::catalog::Catalog;
use registry::store::{Location, Store, WriteOptions};
use serde_json::json;

const PATIENCE: std::time::Duration = std::time::Duration::from_secs(10);

#[tokio::test]
async fn a_follower_that_falls_behind_starts_again_from_the_current_state() {
    let dir = tempfile::tempdir().unwrap();
    let storage = Arc::new(storage::embedded::EmbeddedStore::open(dir.path()).unwrap());
    let opts = CacheOptions {
        watcher_buffer: 3,
        system_watcher_buffer: 3,
        ..CacheOptions::default()
    };
    let cache = WatchCache::start(storage.clone(), opts).await.unwrap();
    let store = Store::new(storage, cache.clone());
    let catalog = Catalog::new(registry::builtins::resources());
    let namespaces = catalog.builtin("", "namespaces").unwrap();
    let mut follow = Follow::new(&cache, "", "namespaces", Filter::default()).unwrap();
    let create = |name: String| {
        let store = &store;
        let namespaces = &namespaces;
        async move {
            let loc = Location {
                cluster: "root",
                namespace: "",
                name: &name,
            };
            store
                .create(
                    namespaces,
                    &loc,
                    json!({"metadata": {"name": name}}),
                    &WriteOptions::default(),
                )
                .await
                .unwrap()
        }
    };
    // Ten writes nobody reads: the cache drops the watch after three.
    for i in 0..10 {
        create(format!("ns{i}")).await;
    }
    let mut seen = std::collections::BTreeSet::new();
    while seen.len() < 10 {
        let (ty, obj) = tokio::time::timeout(PATIENCE, follow.recv())
            .await
            .expect("the follower delivers every object");
        assert_ne!(ty, EventType::Deleted);
        seen.insert(obj.name().to_string());
    }
    assert_eq!(
        seen.len(),
        10,
        "every object arrives, at the latest on the second start"
    );
    // And it keeps following.
    create("late".into()).await;
    loop {
        let (_, obj) = tokio::time::timeout(PATIENCE, follow.recv())
            .await
            .expect("the follower keeps following");
        if obj.name() == "late" {
            break;
        }
    }
}
