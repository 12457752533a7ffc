//! The resourceVersion an update carries is its precondition. Regression: `"0"` answered 409;
//! upstream parses it and treats 0 like an empty resourceVersion (an unconditional update).

use std::sync::Arc;

use registry::cache::{CacheOptions, WatchCache};
use registry::catalog::Catalog;
use registry::store::{Location, Store, WriteOptions};
use serde_json::json;

#[tokio::test]
async fn an_update_with_resource_version_zero_is_unconditional_and_a_stale_one_conflicts() {
    let dir = tempfile::tempdir().unwrap();
    let storage = Arc::new(storage::embedded::EmbeddedStore::open(dir.path()).unwrap());
    let cache = WatchCache::start(storage.clone(), CacheOptions::default())
        .await
        .unwrap();
    let store = Store::new(storage, cache);
    let catalog = Catalog::new(registry::builtins::resources());
    let ns = catalog.builtin("", "namespaces").unwrap();
    let cms = catalog.builtin("", "configmaps").unwrap();
    let root = Location {
        cluster: "root",
        namespace: "",
        name: "",
    };
    let opts = WriteOptions::default();
    store
        .create(&ns, &root, json!({"metadata": {"name": "default"}}), &opts)
        .await
        .unwrap();
    let loc = Location {
        cluster: "root",
        namespace: "default",
        name: "cm",
    };
    let created = store
        .create(
            &cms,
            &loc,
            json!({"metadata": {"name": "cm"}, "data": {"a": "1"}}),
            &opts,
        )
        .await
        .unwrap();
    let first_rv = created["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let with_rv = |rv: &str, a: &str| json!({"metadata": {"name": "cm", "namespace": "default", "resourceVersion": rv}, "data": {"a": a}});
    let (updated, _) = store
        .update_with(&cms, &loc, &opts, |_| Ok(with_rv("0", "2")))
        .await
        .expect("resourceVersion 0 is an unconditional update");
    assert_eq!(updated["data"]["a"], "2");
    let err = store
        .update_with(&cms, &loc, &opts, |_| Ok(with_rv(&first_rv, "3")))
        .await
        .unwrap_err();
    assert_eq!(err.code, 409, "{}", err.message);
}
