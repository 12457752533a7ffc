//! One controller instance serves every cluster: adding 50 logical clusters adds no watch and
//! no task beyond the bounded client cache.

mod common;

use std::collections::BTreeMap;

use common::{CA_PEM, Harness, PATIENCE, add_cluster};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kube::ResourceExt;
use kube::api::{Api, PostParams};
use kube::runtime::watcher;

/// The `default` service accounts of every cluster, keyed by cluster/namespace.
struct AllAccounts {
    stream: futures::stream::BoxStream<'static, watcher::Result<watcher::Event<ServiceAccount>>>,
    seen: BTreeMap<String, ()>,
}

impl AllAccounts {
    /// Waits until every `cluster/namespace` in `want` has its `default` service account.
    async fn until(&mut self, want: &[String]) {
        let fut = async {
            while !want.iter().all(|w| self.seen.contains_key(w)) {
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

/// Creates the namespace `probe` in `cluster`.
async fn probe(h: &Harness, cluster: &str) {
    let api: Api<Namespace> = Api::all(h.client(cluster));
    let ns = serde_json::from_value(serde_json::json!({"metadata": {"name": "probe"}})).unwrap();
    api.create(&PostParams::default(), &ns).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_clusters_add_no_watches_and_no_tasks() {
    const CACHE: usize = 4;
    let options = controllers::Options::default().with_ca(CA_PEM);
    let h = Harness::start_with_cache(&[], options, CACHE).await;
    let api: Api<ServiceAccount> = Api::all(h.clients.all_clusters().unwrap());
    let mut all = AllAccounts {
        stream: watcher::watcher(api, watcher::Config::default()).boxed(),
        seen: BTreeMap::new(),
    };
    // The controllers are up once a new namespace gets its service account.
    probe(&h, "root").await;
    all.until(&["root/probe".to_string()]).await;
    let metrics = tokio::runtime::Handle::current().metrics();
    let (watches, tasks) = (
        h.server.store().shared_cache().watcher_count(),
        metrics.num_alive_tasks(),
    );

    let names: Vec<String> = (0..50).map(|i| format!("scale-{i}")).collect();
    for name in &names {
        add_cluster(&h.server, name).await;
        probe(&h, name).await;
    }
    let want: Vec<String> = names.iter().map(|n| format!("{n}/probe")).collect();
    all.until(&want).await;
    let (watches_after, tasks_after) = (
        h.server.store().shared_cache().watcher_count(),
        metrics.num_alive_tasks(),
    );
    eprintln!("watches {watches} -> {watches_after}, tasks {tasks} -> {tasks_after}");
    assert_eq!(watches_after, watches, "watches do not grow with clusters");
    assert!(
        tasks_after <= tasks + CACHE + common::TEST_CLIENT_CACHE,
        "tasks grow only up to the client caches: {tasks} before, {tasks_after} after"
    );
    h.stop().await;
}
