//! One controller instance serves every cluster: adding 50 logical clusters adds no watch and
//! no task beyond the bounded client cache.

mod common;

use std::collections::BTreeMap;

use common::{CA_PEM, Harness, PATIENCE, add_cluster};
use futures::StreamExt;
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::watcher;

/// The `default` service accounts of every cluster, keyed by cluster/namespace.
struct AllAccounts {
    stream: futures::stream::BoxStream<'static, watcher::Result<watcher::Event<ServiceAccount>>>,
    seen: BTreeMap<String, ()>,
}

impl AllAccounts {
    async fn until(&mut self, n: usize) {
        let fut = async {
            while self.seen.len() < n {
                let ev = self.stream.next().await.expect("watch").expect("event");
                if let watcher::Event::Apply(sa) | watcher::Event::InitApply(sa) = ev
                    && sa.name_any() == "default"
                {
                    let cluster = sa
                        .annotations()
                        .get("matryoshka.dev/cluster")
                        .cloned()
                        .unwrap_or_default();
                    self.seen.insert(
                        format!("{cluster}/{}", sa.namespace().unwrap_or_default()),
                        (),
                    );
                }
            }
        };
        tokio::time::timeout(PATIENCE, fut)
            .await
            .expect("service accounts in every namespace");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_clusters_add_no_watches_and_no_tasks() {
    const CACHE: usize = 4;
    let mut options = controllers::Options::default().with_ca(CA_PEM);
    options.client_cache = CACHE;
    let h = Harness::start_with(&[], options).await;
    let api: Api<ServiceAccount> = Api::all(h.clients.all_clusters().unwrap());
    let mut all = AllAccounts {
        stream: watcher::watcher(api, watcher::Config::default()).boxed(),
        seen: BTreeMap::new(),
    };
    let namespaces = apiserver::bootstrap::NAMESPACES.len();
    all.until(namespaces).await;
    let metrics = tokio::runtime::Handle::current().metrics();
    let (watches, tasks) = (
        h.server.store.cache.watcher_count(),
        metrics.num_alive_tasks(),
    );

    for i in 0..50 {
        add_cluster(&h.server, &format!("scale-{i}")).await;
    }
    all.until(namespaces * 51).await;
    let (watches_after, tasks_after) = (
        h.server.store.cache.watcher_count(),
        metrics.num_alive_tasks(),
    );
    eprintln!("watches {watches} -> {watches_after}, tasks {tasks} -> {tasks_after}");
    assert_eq!(watches_after, watches, "watches do not grow with clusters");
    assert!(
        tasks_after <= tasks + CACHE,
        "tasks grow only up to the client cache: {tasks} before, {tasks_after} after"
    );
    h.stop().await;
}
