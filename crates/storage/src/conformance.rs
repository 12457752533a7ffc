//! The storage conformance suite: one set of tests every backend must pass, unchanged.
//!
//! A backend's test file instantiates it with [`conformance_suite!`](crate::conformance_suite)
//! and a setup expression that yields a fresh [`Ctx`]: a store and a key prefix the test owns
//! alone. Tests touch only keys under their prefix, so several can share one etcd; tests that
//! compact ask for an exclusive store because compaction is store-wide.
//!
//! The checks compare what the store says against a log of acknowledged writes, so they hold
//! under concurrent writers without sleeps: a list at revision R must equal the state the
//! acknowledged writes produce at R, and a watch must deliver exactly the acknowledged writes.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use bytes::Bytes;
use futures::StreamExt;
use parking_lot::Mutex;

use crate::{Error, EventKind, KeyValue, ListOptions, Revision, Storage, WatchStream};

/// Whether a test may share its store with other tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isolation {
    /// Other tests may use the same store under other prefixes.
    Shared,
    /// The test compacts: it needs a store of its own.
    Exclusive,
}

/// What a test runs against.
pub struct Ctx {
    pub store: Arc<dyn Storage>,
    /// Every key of the test starts with this.
    pub prefix: Vec<u8>,
    /// Keeps the backend alive (a temporary directory, an etcd process).
    pub guard: Box<dyn std::any::Any + Send + Sync>,
}

impl Ctx {
    pub fn key(&self, name: &str) -> Vec<u8> {
        let mut k = self.prefix.clone();
        k.extend_from_slice(name.as_bytes());
        k
    }
}

/// Instantiates every conformance test for a backend. `$setup` is a function
/// `async fn(Isolation) -> Ctx`.
#[macro_export]
macro_rules! conformance_suite {
    ($setup:path) => {
        $crate::conformance_suite!(@each $setup;
            revisions_are_positive_and_strictly_increasing: Shared,
            create_fails_when_the_key_exists: Shared,
            update_succeeds_only_at_the_expected_mod_revision: Shared,
            update_and_delete_of_a_missing_key_are_not_found: Shared,
            delete_honours_its_precondition_and_returns_the_deleted_value: Shared,
            a_recreated_key_starts_a_new_life: Shared,
            list_at_a_revision_is_a_consistent_snapshot_under_concurrent_writes: Shared,
            pagination_returns_every_key_exactly_once_while_writes_continue: Shared,
            a_list_or_a_read_at_a_future_revision_is_refused: Shared,
            watch_delivers_every_event_once_in_order_under_concurrent_writers: Shared,
            watch_from_an_old_revision_replays_history: Shared,
            watch_events_carry_the_previous_value: Shared,
            watch_of_a_prefix_never_sees_a_sibling_prefix: Shared,
            compaction_makes_older_revisions_unreadable_and_unwatchable: Exclusive,
            compaction_concurrent_with_reads_and_writes_keeps_the_store_consistent: Exclusive,
            values_up_to_one_and_a_half_mib_round_trip: Shared,
            oversized_values_and_empty_keys_are_refused: Shared,
            malformed_and_foreign_continue_tokens_are_refused: Shared,
            arbitrary_key_bytes_are_stored_and_listed_in_order: Shared,
            delete_prefix_removes_exactly_that_prefix: Shared,
            a_hundred_thousand_keys_are_listed_completely: Shared
        );
    };
    (@each $setup:path; $($name:ident: $iso:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $name() {
                let ctx = $setup($crate::conformance::Isolation::$iso).await;
                $crate::conformance::$name(&ctx).await;
            }
        )*
    };
}

fn b(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

/// An acknowledged write: revision, key, value (`None` for a delete).
type Ack = (Revision, Vec<u8>, Option<Bytes>);

/// Acknowledged writes, to compute what a list at any revision must return.
#[derive(Default)]
struct AckLog {
    writes: Mutex<Vec<Ack>>,
}

impl AckLog {
    fn put(&self, kv: &KeyValue) {
        self.writes
            .lock()
            .push((kv.mod_revision, kv.key.to_vec(), Some(kv.value.clone())));
    }
    fn del(&self, rev: Revision, key: &[u8]) {
        self.writes.lock().push((rev, key.to_vec(), None));
    }
    /// State at `rev` of keys under `prefix`, starting from `base` (the state before the log).
    fn state_at(&self, base: &BTreeMap<Vec<u8>, Bytes>, rev: Revision) -> BTreeMap<Vec<u8>, Bytes> {
        let mut writes = self.writes.lock().clone();
        writes.sort_by_key(|w| w.0);
        let mut state = base.clone();
        for (r, k, v) in writes {
            if r > rev {
                break;
            }
            match v {
                Some(v) => state.insert(k, v),
                None => state.remove(&k),
            };
        }
        state
    }
}

async fn list_all(
    store: &dyn Storage,
    prefix: &[u8],
    rev: Option<Revision>,
) -> (Vec<KeyValue>, Revision) {
    let r = store
        .list(
            prefix,
            ListOptions {
                revision: rev,
                ..Default::default()
            },
        )
        .await
        .expect("list");
    (r.items, r.revision)
}

fn as_map(items: &[KeyValue]) -> BTreeMap<Vec<u8>, Bytes> {
    items
        .iter()
        .map(|kv| (kv.key.to_vec(), kv.value.clone()))
        .collect()
}

async fn next(w: &mut WatchStream) -> Arc<crate::Event> {
    match tokio::time::timeout(std::time::Duration::from_secs(20), w.next()).await {
        Ok(Some(Ok(ev))) => ev,
        Ok(Some(Err(e))) => panic!("watch failed: {e}"),
        Ok(None) => panic!("watch ended"),
        Err(_) => panic!("no watch event within 20 s"),
    }
}

pub async fn revisions_are_positive_and_strictly_increasing(ctx: &Ctx) {
    let s = &*ctx.store;
    let start = s.current_revision().await.unwrap();
    assert!(start >= 0);
    let mut last = start;
    for i in 0..20 {
        let k = ctx.key(&format!("k{}", i % 5));
        let kv = match s.get(&k).await.unwrap() {
            None => s.create(&k, b("v")).await.unwrap(),
            Some(cur) if i % 3 == 0 => s.delete(&k, Some(cur.mod_revision)).await.unwrap(),
            Some(cur) => s.update(&k, b("w"), cur.mod_revision).await.unwrap(),
        };
        assert!(
            kv.mod_revision > last,
            "revision {} after {last}",
            kv.mod_revision
        );
        assert!(kv.mod_revision > 0);
        last = kv.mod_revision;
        assert!(s.current_revision().await.unwrap() >= last);
    }
}

pub async fn create_fails_when_the_key_exists(ctx: &Ctx) {
    let s = &*ctx.store;
    let k = ctx.key("a");
    let kv = s.create(&k, b("1")).await.unwrap();
    assert_eq!((kv.version, kv.create_revision), (1, kv.mod_revision));
    assert!(matches!(
        s.create(&k, b("2")).await,
        Err(Error::AlreadyExists)
    ));
    assert_eq!(
        s.get(&k).await.unwrap().unwrap().value,
        "1",
        "a failed create changes nothing"
    );
}

pub async fn update_succeeds_only_at_the_expected_mod_revision(ctx: &Ctx) {
    let s = &*ctx.store;
    let k = ctx.key("a");
    let v1 = s.create(&k, b("1")).await.unwrap();
    let v2 = s.update(&k, b("2"), v1.mod_revision).await.unwrap();
    assert_eq!(v2.create_revision, v1.create_revision);
    assert_eq!(v2.version, 2);
    assert!(v2.mod_revision > v1.mod_revision);
    match s.update(&k, b("3"), v1.mod_revision).await {
        Err(Error::Conflict {
            current: Some(cur), ..
        }) => {
            assert_eq!(cur.value, "2");
            assert_eq!(cur.mod_revision, v2.mod_revision);
        }
        other => panic!("expected a conflict with the current value, got {other:?}"),
    }
    assert_eq!(s.get(&k).await.unwrap().unwrap(), v2);
}

pub async fn update_and_delete_of_a_missing_key_are_not_found(ctx: &Ctx) {
    let s = &*ctx.store;
    let k = ctx.key("missing");
    assert!(matches!(
        s.update(&k, b("x"), 1).await,
        Err(Error::NotFound)
    ));
    assert!(matches!(s.delete(&k, None).await, Err(Error::NotFound)));
    assert!(matches!(s.delete(&k, Some(5)).await, Err(Error::NotFound)));
    assert!(s.get(&k).await.unwrap().is_none());
}

pub async fn delete_honours_its_precondition_and_returns_the_deleted_value(ctx: &Ctx) {
    let s = &*ctx.store;
    let k = ctx.key("a");
    let v1 = s.create(&k, b("1")).await.unwrap();
    let v2 = s.update(&k, b("2"), v1.mod_revision).await.unwrap();
    assert!(matches!(
        s.delete(&k, Some(v1.mod_revision)).await,
        Err(Error::Conflict { .. })
    ));
    assert!(s.get(&k).await.unwrap().is_some());
    let gone = s.delete(&k, Some(v2.mod_revision)).await.unwrap();
    assert_eq!(gone.value, "2");
    assert!(
        gone.mod_revision > v2.mod_revision,
        "the delete has its own revision"
    );
    assert!(s.get(&k).await.unwrap().is_none());
    let k2 = ctx.key("b");
    s.create(&k2, b("x")).await.unwrap();
    assert_eq!(s.delete(&k2, None).await.unwrap().value, "x");
}

pub async fn a_recreated_key_starts_a_new_life(ctx: &Ctx) {
    let s = &*ctx.store;
    let k = ctx.key("a");
    let v1 = s.create(&k, b("1")).await.unwrap();
    s.update(&k, b("2"), v1.mod_revision).await.unwrap();
    s.delete(&k, None).await.unwrap();
    let again = s.create(&k, b("3")).await.unwrap();
    assert_eq!(again.version, 1);
    assert_eq!(again.create_revision, again.mod_revision);
    assert!(again.create_revision > v1.create_revision);
}

/// Runs `writers` tasks doing `per_writer` random creates/updates/deletes over `keys` keys under
/// the test prefix, logging every acknowledged write.
async fn churn(
    ctx: &Ctx,
    log: Arc<AckLog>,
    writers: usize,
    per_writer: usize,
    keys: usize,
    tag: &str,
) {
    let mut tasks = Vec::new();
    for w in 0..writers {
        let store = ctx.store.clone();
        let log = log.clone();
        let prefix = ctx.prefix.clone();
        let tag = tag.to_string();
        tasks.push(tokio::spawn(async move {
            for i in 0..per_writer {
                let n = (w * 7919 + i * 104_729) % keys;
                let mut k = prefix.clone();
                k.extend_from_slice(format!("{tag}{n:05}").as_bytes());
                let val = b(&format!("w{w}-{i}"));
                let res = match store.get(&k).await.unwrap() {
                    None => store.create(&k, val).await.map(|kv| log.put(&kv)),
                    Some(cur) if i % 4 == 3 => store
                        .delete(&k, Some(cur.mod_revision))
                        .await
                        .map(|kv| log.del(kv.mod_revision, &k)),
                    Some(cur) => store
                        .update(&k, val, cur.mod_revision)
                        .await
                        .map(|kv| log.put(&kv)),
                };
                match res {
                    Ok(())
                    | Err(Error::AlreadyExists | Error::Conflict { .. } | Error::NotFound) => {}
                    Err(e) => panic!("write failed: {e}"),
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
}

pub async fn list_at_a_revision_is_a_consistent_snapshot_under_concurrent_writes(ctx: &Ctx) {
    let s = ctx.store.clone();
    let (base_items, _) = list_all(&*s, &ctx.prefix, None).await;
    assert!(base_items.is_empty());
    let log = Arc::new(AckLog::default());
    let writing = churn(ctx, log.clone(), 8, 60, 40, "k");
    let reading = async {
        let mut snaps = Vec::new();
        for _ in 0..25 {
            snaps.push(list_all(&*s, &ctx.prefix, None).await);
            tokio::task::yield_now().await;
        }
        snaps
    };
    let ((), snaps) = tokio::join!(writing, reading);
    let base = BTreeMap::new();
    for (items, rev) in snaps {
        for kv in &items {
            assert!(kv.mod_revision <= rev, "an item newer than its list");
        }
        assert_eq!(
            as_map(&items),
            log.state_at(&base, rev),
            "list at {rev} differs from the writes acknowledged up to it"
        );
        if rev > 0 {
            // Revision 0 means "the current revision", as in etcd.
            let (again, rev2) = list_all(&*s, &ctx.prefix, Some(rev)).await;
            assert_eq!(rev2, rev);
            assert_eq!(
                again, items,
                "a list at a past revision returns the same snapshot"
            );
        }
    }
}

pub async fn pagination_returns_every_key_exactly_once_while_writes_continue(ctx: &Ctx) {
    let s = ctx.store.clone();
    for i in 0..300 {
        s.create(&ctx.key(&format!("p{i:05}")), b("0"))
            .await
            .unwrap();
    }
    let (base_items, base_rev) = list_all(&*s, &ctx.prefix, None).await;
    let base = as_map(&base_items);
    let log = Arc::new(AckLog::default());
    let writing = churn(ctx, log.clone(), 4, 80, 400, "p");
    let paging = async {
        let mut token = None;
        let mut seen = Vec::new();
        let mut rev = None;
        loop {
            let page = s
                .list(
                    &ctx.prefix,
                    ListOptions {
                        limit: Some(37),
                        continue_token: token.take(),
                        ..Default::default()
                    },
                )
                .await
                .unwrap();
            assert!(page.items.len() <= 37);
            if let Some(r) = rev {
                assert_eq!(
                    page.revision, r,
                    "every page is read at the first page's revision"
                );
            }
            rev = Some(page.revision);
            seen.extend(page.items);
            match page.continue_token {
                Some(t) => token = Some(t),
                None => break,
            }
            tokio::task::yield_now().await;
        }
        (seen, rev.unwrap())
    };
    let ((), (seen, rev)) = tokio::join!(writing, paging);
    assert!(rev >= base_rev);
    let keys: Vec<_> = seen.iter().map(|kv| kv.key.clone()).collect();
    let unique: HashSet<_> = keys.iter().collect();
    assert_eq!(unique.len(), keys.len(), "a key was returned twice");
    assert!(
        keys.windows(2).all(|w| w[0] < w[1]),
        "pages are in key order"
    );
    assert_eq!(as_map(&seen), log.state_at(&base, rev));
}

pub async fn a_list_or_a_read_at_a_future_revision_is_refused(ctx: &Ctx) {
    let s = &*ctx.store;
    s.create(&ctx.key("a"), b("1")).await.unwrap();
    let cur = s.current_revision().await.unwrap();
    let res = s
        .list(
            &ctx.prefix,
            ListOptions {
                revision: Some(cur + 1000),
                ..Default::default()
            },
        )
        .await;
    assert!(matches!(res, Err(Error::FutureRevision { .. })), "{res:?}");
}

pub async fn watch_delivers_every_event_once_in_order_under_concurrent_writers(ctx: &Ctx) {
    let s = ctx.store.clone();
    let start = s.current_revision().await.unwrap();
    let mut w = s.watch(&ctx.prefix, start).await.unwrap();
    let log = Arc::new(AckLog::default());
    churn(ctx, log.clone(), 16, 40, 50, "w").await;
    let mut expected: Vec<_> = log.writes.lock().clone();
    expected.sort_by_key(|x| x.0);
    let mut last = start;
    for (rev, key, value) in expected {
        let ev = next(&mut w).await;
        assert!(ev.revision() > last, "events arrive in revision order");
        last = ev.revision();
        assert_eq!(
            ev.revision(),
            rev,
            "the next event is the next acknowledged write"
        );
        assert_eq!(ev.kv.key.as_ref(), key.as_slice());
        match value {
            Some(v) => assert_eq!(ev.kv.value, v),
            None => assert_eq!(ev.kind, EventKind::Delete),
        }
    }
    // Nothing more: a write after the churn is the very next event.
    let marker = s.create(&ctx.key("zz-marker"), b("m")).await.unwrap();
    assert_eq!(next(&mut w).await.revision(), marker.mod_revision);
}

pub async fn watch_from_an_old_revision_replays_history(ctx: &Ctx) {
    let s = &*ctx.store;
    let k = ctx.key("a");
    let v1 = s.create(&k, b("1")).await.unwrap();
    let v2 = s.update(&k, b("2"), v1.mod_revision).await.unwrap();
    let d = s.delete(&k, None).await.unwrap();
    let mut w = s.watch(&ctx.prefix, v1.mod_revision - 1).await.unwrap();
    let e1 = next(&mut w).await;
    assert_eq!(
        (e1.kind, e1.revision(), e1.kv.value.as_ref()),
        (EventKind::Create, v1.mod_revision, &b"1"[..])
    );
    let e2 = next(&mut w).await;
    assert_eq!(
        (e2.kind, e2.revision()),
        (EventKind::Update, v2.mod_revision)
    );
    let e3 = next(&mut w).await;
    assert_eq!(
        (e3.kind, e3.revision()),
        (EventKind::Delete, d.mod_revision)
    );
    // Starting after the update skips the create and the update.
    let mut w = s.watch(&ctx.prefix, v2.mod_revision).await.unwrap();
    assert_eq!(next(&mut w).await.revision(), d.mod_revision);
}

pub async fn watch_events_carry_the_previous_value(ctx: &Ctx) {
    let s = &*ctx.store;
    let start = s.current_revision().await.unwrap();
    let mut w = s.watch(&ctx.prefix, start).await.unwrap();
    let k = ctx.key("a");
    let v1 = s.create(&k, b("one")).await.unwrap();
    s.update(&k, b("two"), v1.mod_revision).await.unwrap();
    s.delete(&k, None).await.unwrap();
    let c = next(&mut w).await;
    assert!(c.prev.is_none());
    let u = next(&mut w).await;
    assert_eq!(u.prev.as_ref().unwrap().value, "one");
    assert_eq!(u.kv.version, 2);
    let d = next(&mut w).await;
    assert_eq!(d.kind, EventKind::Delete);
    assert_eq!(d.prev.as_ref().unwrap().value, "two");
    assert_eq!(d.kv.key.as_ref(), k.as_slice());
}

pub async fn watch_of_a_prefix_never_sees_a_sibling_prefix(ctx: &Ctx) {
    let s = &*ctx.store;
    let start = s.current_revision().await.unwrap();
    let a = ctx.key("a/");
    let mut w = s.watch(&a, start).await.unwrap();
    s.create(&ctx.key("ab/x"), b("no")).await.unwrap();
    s.create(&ctx.key("b/x"), b("no")).await.unwrap();
    s.create(&ctx.key("a"), b("no")).await.unwrap();
    let mine = s.create(&ctx.key("a/x"), b("yes")).await.unwrap();
    let ev = next(&mut w).await;
    assert_eq!(
        ev.revision(),
        mine.mod_revision,
        "the first event seen is the first one under the prefix"
    );
    let items = s.list(&a, ListOptions::default()).await.unwrap().items;
    assert_eq!(items.len(), 1);
}

pub async fn compaction_makes_older_revisions_unreadable_and_unwatchable(ctx: &Ctx) {
    let s = &*ctx.store;
    let k = ctx.key("a");
    let v1 = s.create(&k, b("1")).await.unwrap();
    let v2 = s.update(&k, b("2"), v1.mod_revision).await.unwrap();
    let v3 = s.update(&k, b("3"), v2.mod_revision).await.unwrap();
    s.compact(v3.mod_revision).await.unwrap();
    assert!(s.compacted_revision().await.unwrap() >= v3.mod_revision);
    let old = s
        .list(
            &ctx.prefix,
            ListOptions {
                revision: Some(v2.mod_revision),
                ..Default::default()
            },
        )
        .await;
    assert!(matches!(old, Err(Error::Compacted { .. })), "{old:?}");
    let w = s.watch(&ctx.prefix, v1.mod_revision).await;
    assert!(
        matches!(w, Err(Error::Compacted { .. })),
        "a watch from below the compacted revision"
    );
    // The compacted revision itself stays readable and watchable from.
    let at = s
        .list(
            &ctx.prefix,
            ListOptions {
                revision: Some(v3.mod_revision),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(at.items[0].value, "3");
    let mut w = s.watch(&ctx.prefix, v3.mod_revision).await.unwrap();
    let v4 = s.update(&k, b("4"), v3.mod_revision).await.unwrap();
    assert_eq!(next(&mut w).await.revision(), v4.mod_revision);
    // A continue token from before the compaction has expired.
    for i in 0..5 {
        s.create(&ctx.key(&format!("p{i}")), b("x")).await.unwrap();
    }
    let page = s
        .list(
            &ctx.prefix,
            ListOptions {
                limit: Some(2),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let token = page.continue_token.unwrap();
    let x = s.create(&ctx.key("q"), b("x")).await.unwrap();
    s.compact(x.mod_revision).await.unwrap();
    let res = s
        .list(
            &ctx.prefix,
            ListOptions {
                continue_token: Some(token),
                ..Default::default()
            },
        )
        .await;
    assert!(matches!(res, Err(Error::Compacted { .. })), "{res:?}");
}

pub async fn compaction_concurrent_with_reads_and_writes_keeps_the_store_consistent(ctx: &Ctx) {
    let s = ctx.store.clone();
    let log = Arc::new(AckLog::default());
    let writing = churn(ctx, log.clone(), 4, 100, 30, "c");
    let compacting = async {
        for _ in 0..20 {
            let r = s.current_revision().await.unwrap();
            s.compact(r).await.unwrap();
            match s
                .list(
                    &ctx.prefix,
                    ListOptions {
                        revision: Some(r),
                        ..Default::default()
                    },
                )
                .await
            {
                Ok(_) | Err(Error::Compacted { .. }) => {}
                Err(e) => panic!("unexpected error: {e}"),
            }
            tokio::task::yield_now().await;
        }
    };
    tokio::join!(writing, compacting);
    let (items, rev) = list_all(&*s, &ctx.prefix, None).await;
    assert_eq!(as_map(&items), log.state_at(&BTreeMap::new(), rev));
}

pub async fn values_up_to_one_and_a_half_mib_round_trip(ctx: &Ctx) {
    let s = &*ctx.store;
    let big: Vec<u8> = (0..1_572_864u32).map(|i| (i % 251) as u8).collect();
    let kv = s
        .create(&ctx.key("big"), Bytes::from(big.clone()))
        .await
        .unwrap();
    assert_eq!(kv.value.len(), big.len());
    assert_eq!(
        s.get(&ctx.key("big"))
            .await
            .unwrap()
            .unwrap()
            .value
            .as_ref(),
        big.as_slice()
    );
}

pub async fn oversized_values_and_empty_keys_are_refused(ctx: &Ctx) {
    let s = &*ctx.store;
    let huge = Bytes::from(vec![0u8; crate::MAX_VALUE_BYTES + 1]);
    assert!(matches!(
        s.create(&ctx.key("h"), huge.clone()).await,
        Err(Error::InvalidArgument(_))
    ));
    assert!(s.get(&ctx.key("h")).await.unwrap().is_none());
    assert!(matches!(
        s.create(b"", b("x")).await,
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(s.get(b"").await, Err(Error::InvalidArgument(_))));
    let k = ctx.key("ok");
    let kv = s.create(&k, b("x")).await.unwrap();
    assert!(matches!(
        s.update(&k, huge, kv.mod_revision).await,
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(s.get(&k).await.unwrap().unwrap().value, "x");
}

pub async fn malformed_and_foreign_continue_tokens_are_refused(ctx: &Ctx) {
    let s = &*ctx.store;
    for i in 0..3 {
        s.create(&ctx.key(&format!("a/{i}")), b("x")).await.unwrap();
        s.create(&ctx.key(&format!("b/{i}")), b("x")).await.unwrap();
    }
    let pa = ctx.key("a/");
    let pb = ctx.key("b/");
    let page = s
        .list(
            &pa,
            ListOptions {
                limit: Some(1),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let token = page.continue_token.unwrap();
    let foreign = s
        .list(
            &pb,
            ListOptions {
                continue_token: Some(token),
                ..Default::default()
            },
        )
        .await;
    assert!(
        matches!(foreign, Err(Error::InvalidContinue(_))),
        "{foreign:?}"
    );
    for bad in ["%%%", "bm90LWEtdG9rZW4", "AAAA"] {
        let res = s
            .list(
                &pa,
                ListOptions {
                    continue_token: Some(bad.into()),
                    ..Default::default()
                },
            )
            .await;
        assert!(
            matches!(res, Err(Error::InvalidContinue(_))),
            "{bad}: {res:?}"
        );
    }
    let future = crate::ContinueToken {
        revision: i64::MAX / 2,
        start: ctx.key("a/1"),
    }
    .encode();
    let res = s
        .list(
            &pa,
            ListOptions {
                continue_token: Some(future),
                ..Default::default()
            },
        )
        .await;
    assert!(
        matches!(
            res,
            Err(Error::InvalidContinue(_) | Error::FutureRevision { .. })
        ),
        "{res:?}"
    );
}

pub async fn arbitrary_key_bytes_are_stored_and_listed_in_order(ctx: &Ctx) {
    let s = &*ctx.store;
    let suffixes: [&[u8]; 5] = [b"\x00", b"\x01\xff", b"\xff\xfe", b"\xc3\x28", b"a\x00b"];
    for suf in suffixes {
        let mut k = ctx.prefix.clone();
        k.extend_from_slice(suf);
        s.create(&k, Bytes::copy_from_slice(suf)).await.unwrap();
        assert_eq!(s.get(&k).await.unwrap().unwrap().value.as_ref(), suf);
    }
    let (items, _) = list_all(s, &ctx.prefix, None).await;
    assert_eq!(items.len(), suffixes.len());
    assert!(items.windows(2).all(|w| w[0].key < w[1].key));
}

pub async fn delete_prefix_removes_exactly_that_prefix(ctx: &Ctx) {
    let s = &*ctx.store;
    for i in 0..10 {
        s.create(&ctx.key(&format!("c1/{i}")), b("x"))
            .await
            .unwrap();
        s.create(&ctx.key(&format!("c10/{i}")), b("x"))
            .await
            .unwrap();
    }
    let start = s.current_revision().await.unwrap();
    let mut w = s.watch(&ctx.key("c1/"), start).await.unwrap();
    assert_eq!(s.delete_prefix(&ctx.key("c1/")).await.unwrap(), 10);
    for _ in 0..10 {
        assert_eq!(next(&mut w).await.kind, EventKind::Delete);
    }
    assert!(list_all(s, &ctx.key("c1/"), None).await.0.is_empty());
    assert_eq!(list_all(s, &ctx.key("c10/"), None).await.0.len(), 10);
    assert_eq!(s.delete_prefix(&ctx.key("c1/")).await.unwrap(), 0);
}

pub async fn a_hundred_thousand_keys_are_listed_completely(ctx: &Ctx) {
    const N: usize = 100_000;
    const WRITERS: usize = 64;
    let mut tasks = Vec::new();
    for w in 0..WRITERS {
        let store = ctx.store.clone();
        let prefix = ctx.prefix.clone();
        tasks.push(tokio::spawn(async move {
            for i in (w..N).step_by(WRITERS) {
                let mut k = prefix.clone();
                k.extend_from_slice(format!("{i:06}").as_bytes());
                store
                    .create(&k, Bytes::from(format!("v{i}")))
                    .await
                    .unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let (items, _) = list_all(&*ctx.store, &ctx.prefix, None).await;
    assert_eq!(items.len(), N);
    for (i, kv) in items.iter().enumerate() {
        assert_eq!(kv.value, format!("v{i}"));
    }
    let mut token = None;
    let mut count = 0;
    loop {
        let page = ctx
            .store
            .list(
                &ctx.prefix,
                ListOptions {
                    limit: Some(5000),
                    continue_token: token.take(),
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        count += page.items.len();
        match page.continue_token {
            Some(t) => token = Some(t),
            None => break,
        }
    }
    assert_eq!(count, N);
}
