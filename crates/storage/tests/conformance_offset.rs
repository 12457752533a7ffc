//! The conformance suite against the embedded backend read through an offset
//! (`storage::offset::OffsetStorage`, as datastores are): every contract holds with revisions
//! three datastore spacings up.

use std::sync::Arc;

use storage::conformance::{Ctx, Isolation};
use storage::embedded::EmbeddedStore;
use storage::offset::{OffsetStorage, SPACING};

async fn setup(_: Isolation) -> Ctx {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = EmbeddedStore::open(dir.path()).expect("open");
    Ctx {
        store: Arc::new(OffsetStorage::new(Arc::new(store), 3 * SPACING)),
        prefix: b"/t/".to_vec(),
        guard: Box::new(dir),
    }
}

storage::conformance_suite!(setup);

#[tokio::test]
async fn revisions_are_above_the_offset_and_one_from_before_it_reads_as_compacted() {
    use storage::Storage;
    let dir = tempfile::tempdir().expect("tempdir");
    let inner = Arc::new(EmbeddedStore::open(dir.path()).expect("open"));
    let store = OffsetStorage::new(inner.clone(), SPACING);
    let kv = store.create(b"/t/a", "1".into()).await.unwrap();
    assert!(kv.mod_revision > SPACING, "{}", kv.mod_revision);
    assert_eq!(
        kv.mod_revision,
        inner.get(b"/t/a").await.unwrap().unwrap().mod_revision + SPACING
    );
    assert_eq!(store.current_revision().await.unwrap(), kv.mod_revision);
    let listed = store.list(b"/t/", Default::default()).await.unwrap();
    assert_eq!(listed.revision, kv.mod_revision);
    // A revision of another store's history (below the offset) is not this store's.
    let err = store
        .list(
            b"/t/",
            storage::ListOptions {
                revision: Some(SPACING - 5),
                ..Default::default()
            },
        )
        .await
        .unwrap_err();
    assert!(matches!(err, storage::Error::Compacted { .. }), "{err:?}");
    assert!(matches!(
        store.watch(b"/t/", 12).await.err(),
        Some(storage::Error::Compacted { .. })
    ));
    // A precondition from another history never matches.
    assert!(matches!(
        store.update(b"/t/a", "2".into(), 1).await.unwrap_err(),
        storage::Error::Conflict { .. }
    ));
    let updated = store
        .update(b"/t/a", "2".into(), kv.mod_revision)
        .await
        .unwrap();
    assert!(updated.mod_revision > kv.mod_revision);
}
