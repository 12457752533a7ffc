//! The cache's compact form: what is extracted for filters, how predicates read it, what
//! watchers receive (selector transitions, deletion revisions, the cluster annotation).

use std::sync::Arc;

use apimachinery::fields::FieldSelector;
use apimachinery::labels::{Labels, Selector};
use bytes::Bytes;
use serde_json::{Value, json};
use storage::{Storage, WatchStream};

use super::*;
use crate::builtins::PodStrategy;
use crate::strategy::DefaultStrategy;

fn pod(name: &str, labels: Value, node: &str, phase: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": format!("uid-{name}"),
            "labels": labels,
            "managedFields": [{"manager": "kubectl", "operation": "Update", "fieldsV1": {"f:spec": {}}}],
        },
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "nginx"}]},
        "status": {"phase": phase},
    })
}

fn cached(v: Value, rev: i64) -> CachedObject {
    CachedObject::new(v, rev, Arc::from("tenant-a"), &PodStrategy, false).unwrap()
}

fn decoded(json: &[u8]) -> Value {
    serde_json::from_slice(json).unwrap()
}

#[test]
fn the_compact_form_is_the_objects_json_with_its_resource_version() {
    let v = pod("p", json!({"app": "web"}), "n1", "Running");
    let o = cached(v.clone(), 42);
    let mut want = v;
    want["metadata"]["resourceVersion"] = json!("42");
    assert_eq!(&o.json()[..], &serde_json::to_vec(&want).unwrap()[..]);
    assert_eq!(o.to_value(), want);
    assert_eq!(o.rev, 42);
}

#[test]
fn attributes_are_extracted_for_filters() {
    let o = cached(
        pod(
            "p",
            json!({"app": "web", "tier": "front", "n": 3}),
            "n1",
            "Running",
        ),
        7,
    );
    assert_eq!(
        (o.name(), o.namespace(), o.uid()),
        ("p", "default", "uid-p")
    );
    assert_eq!(o.labels().label("app"), Some("web"));
    assert_eq!(o.labels().label("tier"), Some("front"));
    // Label selectors see string values only, as for the decoded object.
    assert_eq!(o.labels().label("n"), None);
    assert_eq!(o.labels().len(), 2);
    assert_eq!(
        o.field(&PodStrategy, "spec.nodeName").as_deref(),
        Some("n1")
    );
    assert_eq!(
        o.field(&PodStrategy, "status.phase").as_deref(),
        Some("Running")
    );
    assert_eq!(o.field(&PodStrategy, "metadata.name").as_deref(), Some("p"));
    assert_eq!(
        o.field(&PodStrategy, "metadata.namespace").as_deref(),
        Some("default")
    );
}

#[test]
fn a_field_not_extracted_is_read_from_the_decoded_object() {
    struct Colour;
    impl crate::Strategy for Colour {
        fn field(&self, obj: &Value, name: &str) -> Option<String> {
            (name == "spec.colour")
                .then(|| obj.pointer("/spec/colour")?.as_str().map(String::from))
                .flatten()
        }
    }
    let o = CachedObject::new(
        json!({"metadata": {"name": "w"}, "spec": {"colour": "blue"}}),
        3,
        Arc::from("a"),
        &DefaultStrategy,
        false,
    )
    .unwrap();
    assert_eq!(o.field(&Colour, "spec.colour").as_deref(), Some("blue"));
}

#[test]
fn selector_predicates_evaluate_the_compact_form() {
    let o = cached(pod("p", json!({"app": "web"}), "n1", "Running"), 7);
    let strategy: Arc<dyn crate::Strategy> = Arc::new(PodStrategy);
    let pred = |l: Option<&str>, f: Option<&str>| {
        selector_predicate(
            l.map(|s| Selector::parse(s).unwrap()),
            f.map(|s| FieldSelector::parse(s).unwrap()),
            strategy.clone(),
        )
    };
    assert!(pred(Some("app=web"), None)(&o));
    assert!(!pred(Some("app=db"), None)(&o));
    assert!(pred(Some("!tier"), None)(&o));
    assert!(pred(None, Some("spec.nodeName=n1"))(&o));
    assert!(!pred(None, Some("spec.nodeName=n2"))(&o));
    assert!(pred(None, Some("status.phase!=Pending,metadata.name=p"))(
        &o
    ));
    assert!(!pred(Some("app=web"), Some("spec.nodeName=n2"))(&o));
    // An absent field reads as "", as upstream.
    assert!(pred(None, Some("status.podIP="))(&o));
}

#[test]
fn a_deleted_copy_carries_the_deletion_revision_and_keeps_its_splice_point() {
    let o = cached(pod("p", json!({}), "n1", "Running"), 9);
    let d = o.at_revision(12345);
    assert_eq!(d.rev, 12345);
    let v = decoded(d.json());
    assert_eq!(v["metadata"]["resourceVersion"], "12345");
    let mut want = o.to_value();
    want["metadata"]["resourceVersion"] = json!("12345");
    assert_eq!(v, want);
    let mut out = Vec::new();
    d.write_json(&mut out, true);
    assert_eq!(decoded(&out), d.annotated_value());
    assert_eq!(d.labels(), o.labels());
}

#[test]
fn the_cluster_annotation_is_spliced_in_wherever_the_metadata_leaves_room() {
    let cases = [
        json!({"metadata": {"name": "a"}}),
        json!({"metadata": {"name": "a", "annotations": {}}}),
        json!({"metadata": {"name": "a", "annotations": {"x": "1", "y": "2"}}}),
        json!({"metadata": {"name": "a", "annotations": {"matryoshka.dev/cluster": "forged"}}}),
        json!({"metadata": {"name": "a", "annotations": null}}),
        json!({"kind": "X"}),
    ];
    for v in cases {
        let o = CachedObject::new(
            v.clone(),
            5,
            Arc::from("tenant-\"b\""),
            &DefaultStrategy,
            false,
        )
        .unwrap();
        let mut out = Vec::new();
        o.write_json(&mut out, true);
        let got = decoded(&out);
        assert_eq!(got, o.annotated_value(), "{v}");
        assert_eq!(
            got["metadata"]["annotations"][CLUSTER_ANNOTATION], "tenant-\"b\"",
            "{v}"
        );
        let mut plain = Vec::new();
        o.write_json(&mut plain, false);
        assert_eq!(decoded(&plain), o.to_value(), "{v}");
    }
}

#[test]
fn resources_kept_decoded_share_their_value() {
    let o = CachedObject::new(
        json!({"metadata": {"name": "r"}}),
        2,
        Arc::from("a"),
        &DefaultStrategy,
        true,
    )
    .unwrap();
    assert!(Arc::ptr_eq(&o.value(), &o.value()));
    let d = o.at_revision(3);
    assert_eq!(d.value()["metadata"]["resourceVersion"], "3");
}

async fn cache() -> (Arc<WatchCache>, Arc<dyn Storage>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let storage: Arc<dyn Storage> =
        Arc::new(storage::embedded::EmbeddedStore::open(dir.path()).unwrap());
    let cache = WatchCache::start(storage.clone(), CacheOptions::default())
        .await
        .unwrap();
    (cache, storage, dir)
}

fn pod_key(cluster: &str, name: &str) -> String {
    crate::key::object(cluster, "", "pods", "default", name)
}

fn bytes(v: &Value) -> Bytes {
    Bytes::from(serde_json::to_vec(v).unwrap())
}

async fn next(h: &mut WatchHandle) -> (EventType, Arc<CachedObject>) {
    let item = tokio::time::timeout(std::time::Duration::from_secs(10), h.rx.recv())
        .await
        .expect("an event in time")
        .expect("an open watch");
    match item {
        WatchItem::Event(ty, o) => (ty, o),
        other => panic!("expected an event, got {other:?}"),
    }
}

#[tokio::test]
async fn an_object_that_stops_matching_is_delivered_as_deleted() {
    let (cache, storage, _dir) = cache().await;
    let filter = Filter {
        cluster: Some("a".into()),
        namespace: None,
        predicate: Some(selector_predicate(
            Some(Selector::parse("app=web").unwrap()),
            Some(FieldSelector::parse("spec.nodeName=n1").unwrap()),
            Arc::new(PodStrategy),
        )),
    };
    let mut h = cache
        .watch("", "pods", filter, Start::After(cache.revision()), false)
        .unwrap();
    let k = pod_key("a", "p");
    let kv = storage
        .create(
            k.as_bytes(),
            bytes(&pod("p", json!({"app": "db"}), "n1", "Pending")),
        )
        .await
        .unwrap();
    let kv = storage
        .update(
            k.as_bytes(),
            bytes(&pod("p", json!({"app": "web"}), "n1", "Pending")),
            kv.mod_revision,
        )
        .await
        .unwrap();
    let (ty, o) = next(&mut h).await;
    assert_eq!((ty, o.rev), (EventType::Added, kv.mod_revision));
    let kv = storage
        .update(
            k.as_bytes(),
            bytes(&pod("p", json!({"app": "web"}), "n2", "Pending")),
            kv.mod_revision,
        )
        .await
        .unwrap();
    let (ty, o) = next(&mut h).await;
    assert_eq!((ty, o.rev), (EventType::Deleted, kv.mod_revision));
    assert_eq!(
        o.field(&PodStrategy, "spec.nodeName").as_deref(),
        Some("n2")
    );
}

#[tokio::test]
async fn a_deleted_event_carries_the_deletion_revision() {
    let (cache, storage, _dir) = cache().await;
    let k = pod_key("a", "p");
    let created = storage
        .create(k.as_bytes(), bytes(&pod("p", json!({}), "n1", "Running")))
        .await
        .unwrap();
    assert!(
        cache
            .wait_for(created.mod_revision, std::time::Duration::from_secs(10))
            .await
    );
    let mut h = cache
        .watch(
            "",
            "pods",
            Filter::default(),
            Start::After(created.mod_revision),
            false,
        )
        .unwrap();
    let gone = storage
        .delete(k.as_bytes(), Some(created.mod_revision))
        .await
        .unwrap();
    let (ty, o) = next(&mut h).await;
    assert_eq!(ty, EventType::Deleted);
    assert!(gone.mod_revision > created.mod_revision);
    assert_eq!(o.rev, gone.mod_revision);
    assert_eq!(
        decoded(o.json())["metadata"]["resourceVersion"],
        gone.mod_revision.to_string()
    );
    assert!(cache.get("", "pods", "a", "default", "p").is_none());
}

#[tokio::test]
async fn a_cross_cluster_watch_item_names_its_cluster_and_a_cluster_one_does_not() {
    let (cache, storage, _dir) = cache().await;
    let rev = cache.revision();
    let mut all = cache
        .watch("", "pods", Filter::default(), Start::After(rev), false)
        .unwrap();
    let own = Filter {
        cluster: Some("b".into()),
        ..Filter::default()
    };
    let mut one = cache
        .watch("", "pods", own, Start::After(rev), false)
        .unwrap();
    storage
        .create(
            pod_key("a", "p").as_bytes(),
            bytes(&pod("p", json!({}), "", "Pending")),
        )
        .await
        .unwrap();
    storage
        .create(
            pod_key("b", "q").as_bytes(),
            bytes(&pod("q", json!({}), "", "Pending")),
        )
        .await
        .unwrap();
    // What the API server writes for each: annotated for the cross-cluster watcher only.
    let render = |o: &CachedObject, cross: bool| decoded(&o.to_json(cross));
    let (_, a) = next(&mut all).await;
    let (_, b) = next(&mut all).await;
    assert_eq!(
        render(&a, true)["metadata"]["annotations"][CLUSTER_ANNOTATION],
        "a"
    );
    assert_eq!(
        render(&b, true)["metadata"]["annotations"][CLUSTER_ANNOTATION],
        "b"
    );
    let (_, q) = next(&mut one).await;
    assert_eq!(q.name(), "q");
    assert!(render(&q, false)["metadata"].get("annotations").is_none());
    assert!(
        one.rx.try_recv().is_err(),
        "a cluster watch sees only its cluster"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_prepared_concurrently_are_applied_in_revision_order() {
    let (cache, storage, _dir) = cache().await;
    let mut h = cache
        .watch(
            "",
            "pods",
            Filter::default(),
            Start::After(cache.revision()),
            false,
        )
        .unwrap();
    let k = pod_key("a", "p");
    let mut kv = storage
        .create(
            k.as_bytes(),
            bytes(&pod("p", json!({"n": "0"}), "", "Pending")),
        )
        .await
        .unwrap();
    let mut revs = vec![kv.mod_revision];
    for i in 1..40 {
        let v = pod("p", json!({"n": i.to_string()}), "", "Pending");
        kv = storage
            .update(k.as_bytes(), bytes(&v), kv.mod_revision)
            .await
            .unwrap();
        revs.push(kv.mod_revision);
    }
    let gone = storage
        .delete(k.as_bytes(), Some(kv.mod_revision))
        .await
        .unwrap();
    revs.push(gone.mod_revision);
    for (i, want) in revs.iter().enumerate() {
        let (ty, o) = next(&mut h).await;
        assert_eq!(o.rev, *want);
        let n = if i == 40 { 39 } else { i };
        assert_eq!(o.labels().label("n"), Some(n.to_string().as_str()));
        let expected = match i {
            0 => EventType::Added,
            40 => EventType::Deleted,
            _ => EventType::Modified,
        };
        assert_eq!(ty, expected);
    }
}

/// Creates `n` pods and returns their revisions once the cache has them.
async fn pods_written(cache: &WatchCache, storage: &Arc<dyn Storage>, n: usize) -> Vec<i64> {
    let mut revs = Vec::new();
    for i in 0..n {
        let name = format!("h{i}");
        let kv = storage
            .create(
                pod_key("a", &name).as_bytes(),
                bytes(&pod(&name, json!({}), "n1", "Running")),
            )
            .await
            .unwrap();
        revs.push(kv.mod_revision);
    }
    let last = *revs.last().unwrap();
    assert!(
        cache
            .wait_for(last, std::time::Duration::from_secs(10))
            .await
    );
    revs
}

async fn cache_with(opts: CacheOptions) -> (Arc<WatchCache>, Arc<dyn Storage>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let storage: Arc<dyn Storage> =
        Arc::new(storage::embedded::EmbeddedStore::open(dir.path()).unwrap());
    let cache = WatchCache::start(storage.clone(), opts).await.unwrap();
    (cache, storage, dir)
}

fn starts(cache: &Arc<WatchCache>, after: i64) -> bool {
    cache
        .watch("", "pods", Filter::default(), Start::After(after), false)
        .is_ok()
}

#[tokio::test]
async fn history_beyond_the_minimum_is_kept_while_it_is_young_up_to_the_maximum() {
    let young = CacheOptions {
        history: 2,
        history_window: std::time::Duration::from_secs(3600),
        history_max: 4,
        ..CacheOptions::default()
    };
    let (cache, storage, _dir) = cache_with(young).await;
    let revs = pods_written(&cache, &storage, 6).await;
    // Four events kept: a watch may resume after the second write, not after the first.
    assert!(starts(&cache, revs[1]));
    assert!(!starts(&cache, revs[0]));
}

#[tokio::test]
async fn history_is_bounded_in_bytes_over_all_resources_however_young() {
    let opts = CacheOptions {
        history: 100_000,
        history_window: std::time::Duration::from_secs(3600),
        history_max: 100_000,
        history_bytes: 64 << 10,
        ..CacheOptions::default()
    };
    let (cache, storage, _dir) = cache_with(opts).await;
    // About 600 bytes an event: 1,000 of them are ten times the bound.
    let revs = pods_written(&cache, &storage, 1000).await;
    let held: usize = cache
        .state
        .read()
        .resources
        .values()
        .map(|r| r.history_bytes)
        .sum();
    // Checked once an eighth of the bound was added since the last check.
    assert!(
        held <= (64 << 10) / 8 * 9 + 1024,
        "the history holds {held} bytes"
    );
    assert!(held >= 16 << 10, "the bound is used, not emptied: {held}");
    // The recent events are there to resume from, the oldest are not.
    assert!(starts(&cache, revs[990]));
    assert!(!starts(&cache, revs[10]));
}

#[tokio::test]
async fn history_older_than_the_window_shrinks_to_the_minimum() {
    let instant = CacheOptions {
        history: 2,
        history_window: std::time::Duration::ZERO,
        history_max: 100,
        ..CacheOptions::default()
    };
    let (cache, storage, _dir) = cache_with(instant).await;
    let revs = pods_written(&cache, &storage, 6).await;
    assert!(starts(&cache, revs[3]));
    assert!(!starts(&cache, revs[2]));
}

#[tokio::test]
async fn a_quiet_resources_history_is_trimmed_by_age_on_the_tick_without_new_events() {
    let opts = CacheOptions {
        history: 2,
        history_window: std::time::Duration::from_millis(200),
        history_max: 100,
        bookmark_interval: std::time::Duration::from_millis(100),
        ..CacheOptions::default()
    };
    let (cache, storage, _dir) = cache_with(opts).await;
    let revs = pods_written(&cache, &storage, 6).await;
    // Young: every event kept.
    assert!(starts(&cache, revs[0]));
    // Once the burst is older than the window, the tick trims it to the minimum although no
    // pod changed since.
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
    while starts(&cache, revs[2]) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the history was never trimmed"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    // The minimum stays: a watch may still resume after the fourth write.
    assert!(starts(&cache, revs[3]));
}

#[tokio::test]
async fn a_writer_waits_while_the_cache_trails_by_more_than_the_allowed_lag() {
    let opts = CacheOptions {
        max_write_lag: 2,
        ..CacheOptions::default()
    };
    let (cache, storage, _dir) = cache_with(opts).await;
    let now = cache.revision();
    tokio::time::timeout(
        std::time::Duration::from_millis(100),
        cache.throttle(now + 2),
    )
    .await
    .expect("a write within the allowed lag does not wait");
    let c = cache.clone();
    let waiting = tokio::spawn(async move { c.throttle(now + 5).await });
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    assert!(!waiting.is_finished(), "a write 5 ahead of the cache waits");
    pods_written(&cache, &storage, 3).await;
    // Well before the throttle's own 5 s limit: it was the cache catching up that ended it.
    tokio::time::timeout(std::time::Duration::from_secs(2), waiting)
        .await
        .expect("the writer goes on once the cache is within the lag")
        .unwrap();
}

#[tokio::test]
async fn a_deleted_clusters_events_leave_the_history_and_only_cross_cluster_watches_from_before_relist()
 {
    let (cache, storage, _dir) = cache_with(CacheOptions::default()).await;
    // Cluster "a" gets three pods, then cluster "b" one.
    let revs = pods_written(&cache, &storage, 3).await;
    let b = storage
        .create(
            pod_key("b", "p").as_bytes(),
            bytes(&pod("p", json!({}), "n1", "Running")),
        )
        .await
        .unwrap()
        .mod_revision;
    assert!(cache.wait_for(b, std::time::Duration::from_secs(10)).await);
    let watch = |cluster: Option<&str>, after: i64| {
        let filter = Filter {
            cluster: cluster.map(String::from),
            ..Filter::default()
        };
        cache.watch("", "pods", filter, Start::After(after), false)
    };
    assert!(watch(None, revs[0]).is_ok());

    assert_eq!(cache.forget_cluster("a"), 3);
    assert_eq!(cache.forget_cluster("a"), 0);
    // A component watching every cluster from before "a"'s last event re-lists (410) rather
    // than miss it; from after it, it resumes and still gets "b"'s pod.
    let refused = watch(None, revs[1]).err().expect("a 410");
    assert_eq!(refused.code, 410);
    let mut resumed = watch(None, revs[2]).expect("resumes after the dropped events");
    match resumed.rx.try_recv() {
        Ok(WatchItem::Event(_, obj)) => assert_eq!(&*obj.cluster, "b"),
        _ => panic!("expected b's pod"),
    }
    // A watcher of another cluster never saw "a"'s events: it resumes from anywhere.
    assert!(watch(Some("b"), revs[0]).is_ok());
}

/// A store whose first watch ends at once without an error (as an etcd watch whose connection
/// closed can); later watches are the store's own.
struct FirstWatchEnds {
    inner: storage::embedded::EmbeddedStore,
    ended: std::sync::atomic::AtomicBool,
}

#[async_trait::async_trait]
impl Storage for FirstWatchEnds {
    async fn get(&self, key: &[u8]) -> storage::Result<Option<storage::KeyValue>> {
        self.inner.get(key).await
    }
    async fn list(
        &self,
        prefix: &[u8],
        opts: storage::ListOptions,
    ) -> storage::Result<storage::ListResult> {
        self.inner.list(prefix, opts).await
    }
    async fn create(&self, key: &[u8], value: Bytes) -> storage::Result<storage::KeyValue> {
        self.inner.create(key, value).await
    }
    async fn update(
        &self,
        key: &[u8],
        value: Bytes,
        expected: storage::Revision,
    ) -> storage::Result<storage::KeyValue> {
        self.inner.update(key, value, expected).await
    }
    async fn delete(
        &self,
        key: &[u8],
        expected: Option<storage::Revision>,
    ) -> storage::Result<storage::KeyValue> {
        self.inner.delete(key, expected).await
    }
    async fn delete_prefix(&self, prefix: &[u8]) -> storage::Result<u64> {
        self.inner.delete_prefix(prefix).await
    }
    async fn watch(&self, prefix: &[u8], after: storage::Revision) -> storage::Result<WatchStream> {
        if !self.ended.swap(true, std::sync::atomic::Ordering::SeqCst) {
            let (_, rx) = tokio::sync::mpsc::channel(1);
            return Ok(WatchStream::from_channel(rx));
        }
        self.inner.watch(prefix, after).await
    }
    async fn current_revision(&self) -> storage::Result<storage::Revision> {
        self.inner.current_revision().await
    }
    async fn compact(&self, revision: storage::Revision) -> storage::Result<()> {
        self.inner.compact(revision).await
    }
    async fn compacted_revision(&self) -> storage::Result<storage::Revision> {
        self.inner.compacted_revision().await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cache_keeps_following_storage_after_a_watch_ends_without_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let storage: Arc<dyn Storage> = Arc::new(FirstWatchEnds {
        inner: storage::embedded::EmbeddedStore::open(dir.path()).unwrap(),
        ended: Default::default(),
    });
    let cache = WatchCache::start(storage.clone(), CacheOptions::default())
        .await
        .unwrap();
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"}});
    let kv = storage
        .create(pod_key("a", "p").as_bytes(), bytes(&pod))
        .await
        .unwrap();
    // Regression: the feed returned when its watch ended, and the cache stood still.
    assert!(
        cache
            .wait_for(kv.mod_revision, std::time::Duration::from_secs(10))
            .await,
        "the cache reached the write's revision"
    );
    let filter = Filter {
        cluster: Some("a".into()),
        namespace: None,
        predicate: None,
    };
    let (items, _) = cache.list("", "pods", &filter);
    assert_eq!(items.len(), 1);
}
