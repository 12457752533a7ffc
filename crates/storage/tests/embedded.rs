//! Behaviour specific to the embedded backend: restart, snapshots and disk reclamation, slow
//! watchers, exclusive opening.

use std::sync::Arc;

use bytes::Bytes;
use futures::StreamExt;
use storage::embedded::{EmbeddedStore, Options};
use storage::{Error, ListOptions, Storage};

#[tokio::test]
async fn a_reopened_store_has_every_write_and_continues_its_revisions() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        snapshot_bytes: 64 << 10,
        segment_bytes: 16 << 10,
        ..Options::default()
    };
    let last = {
        let s = EmbeddedStore::open_with(dir.path(), opts.clone()).unwrap();
        for i in 0..500 {
            s.create(
                format!("/k/{i:04}").as_bytes(),
                Bytes::from(vec![b'x'; 300]),
            )
            .await
            .unwrap();
        }
        let kv = s.get(b"/k/0007").await.unwrap().unwrap();
        s.update(b"/k/0007", Bytes::from_static(b"new"), kv.mod_revision)
            .await
            .unwrap();
        s.delete(b"/k/0008", None).await.unwrap();
        s.current_revision().await.unwrap()
    };
    let s = EmbeddedStore::open_with(dir.path(), opts).unwrap();
    assert_eq!(s.current_revision().await.unwrap(), last);
    let items = s.list(b"/k/", ListOptions::default()).await.unwrap().items;
    assert_eq!(items.len(), 499);
    assert_eq!(s.get(b"/k/0007").await.unwrap().unwrap().value, "new");
    assert!(s.get(b"/k/0008").await.unwrap().is_none());
    let next = s
        .create(b"/k/after", Bytes::from_static(b"x"))
        .await
        .unwrap();
    assert_eq!(next.mod_revision, last + 1);
}

#[tokio::test]
async fn a_watch_after_reopen_resumes_from_the_log_or_reports_compaction() {
    let dir = tempfile::tempdir().unwrap();
    let first = {
        let s = EmbeddedStore::open(dir.path()).unwrap();
        let a = s.create(b"/a", Bytes::from_static(b"1")).await.unwrap();
        s.create(b"/b", Bytes::from_static(b"2")).await.unwrap();
        a.mod_revision
    };
    let s = EmbeddedStore::open(dir.path()).unwrap();
    // No snapshot was taken: the log still holds every event.
    let mut w = s.watch(b"/", first).await.unwrap();
    let ev = w.next().await.unwrap().unwrap();
    assert_eq!(ev.kv.key, "/b");
    drop(s);

    // With snapshots after every few bytes, history before the snapshot is gone after reopen.
    let dir = tempfile::tempdir().unwrap();
    let opts = Options::default();
    {
        let s = EmbeddedStore::open_with(dir.path(), opts.clone()).unwrap();
        for i in 0..10 {
            s.create(format!("/k{i}").as_bytes(), Bytes::from_static(b"v"))
                .await
                .unwrap();
        }
        assert_eq!(s.snapshot().await.unwrap(), 10);
    }
    let s = EmbeddedStore::open_with(dir.path(), opts).unwrap();
    assert!(matches!(
        s.watch(b"/", 1).await,
        Err(Error::Compacted { .. })
    ));
    assert_eq!(
        s.list(b"/", ListOptions::default())
            .await
            .unwrap()
            .items
            .len(),
        10
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshots_keep_disk_use_bounded_under_sustained_churn() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        snapshot_bytes: 4 << 20,
        segment_bytes: 1 << 20,
        retain_revisions: 10_000,
        ..Options::default()
    };
    let s = Arc::new(EmbeddedStore::open_with(dir.path(), opts).unwrap());
    const KEYS: usize = 2_000;
    let value = Bytes::from(vec![b'v'; 512]);
    let live = (KEYS * (512 + 12)) as u64;
    // 16 writers, each rewriting its share of the keys 60 times: ~64 MB through the log, 30×
    // the live data, while the main task samples disk use.
    let mut tasks = Vec::new();
    for w in 0..16 {
        let s = s.clone();
        let value = value.clone();
        tasks.push(tokio::spawn(async move {
            let keys: Vec<String> = (w..KEYS)
                .step_by(16)
                .map(|k| format!("/churn/{k:05}"))
                .collect();
            let mut revs = Vec::new();
            for k in &keys {
                revs.push(
                    s.create(k.as_bytes(), value.clone())
                        .await
                        .unwrap()
                        .mod_revision,
                );
            }
            for _ in 0..60 {
                for (k, rev) in keys.iter().zip(revs.iter_mut()) {
                    *rev = s
                        .update(k.as_bytes(), value.clone(), *rev)
                        .await
                        .unwrap()
                        .mod_revision;
                }
            }
        }));
    }
    let mut peak = 0;
    while tasks.iter().any(|t| !t.is_finished()) {
        peak = peak.max(s.disk_bytes());
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    for t in tasks {
        t.await.unwrap();
    }
    // The log before the newest snapshot is deleted: disk stays within a small multiple of the
    // snapshot threshold plus the live data, however long the churn goes on.
    assert!(
        peak < 3 * (4 << 20) + 2 * live,
        "disk use grew to {peak} bytes"
    );
    assert_eq!(
        s.list(b"/churn/", ListOptions::default())
            .await
            .unwrap()
            .items
            .len(),
        KEYS
    );
}

#[tokio::test]
async fn a_slow_watcher_is_terminated_without_stalling_writers_or_other_watchers() {
    let dir = tempfile::tempdir().unwrap();
    let s = EmbeddedStore::open_with(
        dir.path(),
        Options {
            watch_buffer: 50,
            ..Options::default()
        },
    )
    .unwrap();
    let mut slow = s.watch(b"/", 0).await.unwrap();
    let mut fast = s.watch(b"/", 0).await.unwrap();
    let mut fast_seen = 0;
    for i in 0..200 {
        s.create(format!("/k{i}").as_bytes(), Bytes::from_static(b"v"))
            .await
            .unwrap();
        // The fast watcher keeps up.
        fast.next().await.unwrap().unwrap();
        fast_seen += 1;
    }
    assert_eq!(fast_seen, 200);
    let mut delivered = 0;
    let end = loop {
        match slow.next().await {
            Some(Ok(_)) => delivered += 1,
            Some(Err(e)) => break e,
            None => panic!("the slow watch ended without an error"),
        }
    };
    assert!(matches!(end, Error::WatcherTooSlow(_)), "{end:?}");
    assert!(
        delivered < 50,
        "buffered events are delivered before the error"
    );
    assert!(slow.next().await.is_none());
}

#[tokio::test]
async fn a_data_directory_is_opened_by_one_store_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let _s = EmbeddedStore::open(dir.path()).unwrap();
    assert!(matches!(
        EmbeddedStore::open(dir.path()),
        Err(Error::Unavailable(_))
    ));
}

#[tokio::test]
async fn history_is_bounded_in_bytes_however_large_the_values_written() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        retain_revisions: 100_000,
        retain_bytes: 4 << 20,
        ..Options::default()
    };
    let s = EmbeddedStore::open_with(dir.path(), opts).unwrap();
    // 64 KiB values rewritten 400 times: 25 MiB of history against a 4 MiB bound, far below
    // the revision bound.
    let value = Bytes::from(vec![b'x'; 64 << 10]);
    let mut rev = s
        .create(b"/big/k", value.clone())
        .await
        .unwrap()
        .mod_revision;
    let first = rev;
    for _ in 0..400 {
        rev = s
            .update(b"/big/k", value.clone(), rev)
            .await
            .unwrap()
            .mod_revision;
        // Compaction follows the batch that crossed the bound: one write more at most.
        let (bytes, _) = s.history_size();
        assert!(
            bytes <= (4 << 20) + (256 << 10),
            "history holds {bytes} bytes"
        );
    }
    let (bytes, events) = s.history_size();
    assert!(bytes >= 2 << 20, "the bound is used, not emptied: {bytes}");
    assert!(events < 64, "{events}");
    // The oldest revisions went: a watch from them is told so, a recent one replays.
    assert!(matches!(
        s.watch(b"/big/", first).await.err(),
        Some(Error::Compacted { .. })
    ));
    let mut w = s.watch(b"/big/", rev - 5).await.unwrap();
    for _ in 0..5 {
        assert!(w.next_event().await.unwrap().is_ok());
    }
    assert_eq!(s.get(b"/big/k").await.unwrap().unwrap().mod_revision, rev);
}
