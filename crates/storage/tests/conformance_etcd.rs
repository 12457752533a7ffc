//! The conformance suite against a real etcd. Tests share one etcd under distinct prefixes;
//! tests that compact (a store-wide operation) get an etcd of their own.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use storage::conformance::{Ctx, Isolation};
use storage::etcd::EtcdStore;
use storage::testkit::EtcdServer;
use tokio::sync::OnceCell;

static SHARED: OnceCell<EtcdServer> = OnceCell::const_new();
static NEXT: AtomicUsize = AtomicUsize::new(0);

async fn setup(iso: Isolation) -> Ctx {
    let prefix = format!("/t{}/", NEXT.fetch_add(1, Ordering::Relaxed)).into_bytes();
    match iso {
        Isolation::Shared => {
            let server = SHARED.get_or_init(EtcdServer::start).await;
            let store = EtcdStore::connect(std::slice::from_ref(&server.endpoint), b"/conformance")
                .await
                .expect("connect");
            Ctx {
                store: Arc::new(store),
                prefix,
                guard: Box::new(()),
            }
        }
        Isolation::Exclusive => {
            let server = EtcdServer::start().await;
            let store = EtcdStore::connect(std::slice::from_ref(&server.endpoint), b"")
                .await
                .expect("connect");
            Ctx {
                store: Arc::new(store),
                prefix,
                guard: Box::new(server),
            }
        }
    }
}

storage::conformance_suite!(setup);
