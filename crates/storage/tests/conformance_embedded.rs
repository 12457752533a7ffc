//! The conformance suite against the embedded backend, each test on a fresh store.

use std::sync::Arc;

use storage::conformance::{Ctx, Isolation};
use storage::embedded::EmbeddedStore;

async fn setup(_: Isolation) -> Ctx {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = EmbeddedStore::open(dir.path()).expect("open");
    Ctx {
        store: Arc::new(store),
        prefix: b"/t/".to_vec(),
        guard: Box::new(dir),
    }
}

storage::conformance_suite!(setup);
