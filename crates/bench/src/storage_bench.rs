//! The storage benchmark: the embedded store against a real etcd started here, on the same disk,
//! both durable on commit (etcd fsyncs its WAL; the embedded store fsyncs its log).
//!
//! Lines: create and update throughput with 1, 16 and 64 writers (1 KiB values); point reads;
//! a 10k-key list; watch delivery to 100 watchers of 10k writes (delivered %, p50/p99 lag,
//! measured from just before the write call to the event's arrival).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::StreamExt;
use storage::Storage;
use storage::embedded::EmbeddedStore;
use storage::etcd::EtcdStore;
use storage::testkit::EtcdServer;

use crate::report::{Better, Samples, header, line};

const VALUE: usize = 1024;

struct Figures {
    create: Vec<(usize, f64)>,
    update: Vec<(usize, f64)>,
    get_ops: f64,
    list_ms: f64,
    delivered: f64,
    lag_p50: Duration,
    lag_p99: Duration,
}

pub async fn run(quick: bool) -> anyhow::Result<()> {
    let dir = std::env::current_dir()?.join("target/bench-data");
    std::fs::create_dir_all(&dir)?;
    let emb_dir = tempfile::tempdir_in(&dir)?;
    // etcd keeps its data in the system temporary directory, on the same disk here.
    let secs = if quick { 1.0 } else { 3.0 };
    println!(
        "storage benchmark ({}s per throughput line, 1 KiB values)",
        secs
    );

    let embedded: Arc<dyn Storage> = Arc::new(EmbeddedStore::open(emb_dir.path())?);
    let ours = measure(embedded, secs, quick).await?;
    let server = EtcdServer::start().await;
    let etcd: Arc<dyn Storage> =
        Arc::new(EtcdStore::connect(std::slice::from_ref(&server.endpoint), b"/bench").await?);
    let peer = measure(etcd, secs, quick).await?;

    println!();
    header("embedded", "etcd");
    for ((n, o), (_, p)) in ours.create.iter().zip(&peer.create) {
        line(
            &format!("create throughput, {n} writers"),
            *o,
            *p,
            "ops/s",
            Better::Higher,
        );
    }
    for ((n, o), (_, p)) in ours.update.iter().zip(&peer.update) {
        line(
            &format!("update throughput, {n} writers"),
            *o,
            *p,
            "ops/s",
            Better::Higher,
        );
    }
    line(
        "point reads, 16 readers",
        ours.get_ops,
        peer.get_ops,
        "ops/s",
        Better::Higher,
    );
    line(
        "list of 10k keys",
        ours.list_ms,
        peer.list_ms,
        "ms",
        Better::Lower,
    );
    line(
        "watch delivery, 100 watchers x 10k writes",
        ours.delivered,
        peer.delivered,
        "%",
        Better::Higher,
    );
    line(
        "watch lag p50",
        ms(ours.lag_p50),
        ms(peer.lag_p50),
        "ms",
        Better::Lower,
    );
    line(
        "watch lag p99",
        ms(ours.lag_p99),
        ms(peer.lag_p99),
        "ms",
        Better::Lower,
    );
    Ok(())
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

async fn measure(store: Arc<dyn Storage>, secs: f64, quick: bool) -> anyhow::Result<Figures> {
    let run_id = rand::random::<u32>();
    let mut create = Vec::new();
    let mut update = Vec::new();
    for writers in [1usize, 16, 64] {
        let prefix = format!("/c{run_id}-{writers}/");
        let (ops, keys) = throughput(&store, writers, secs, &prefix, None).await?;
        create.push((writers, ops));
        let (ops, _) = throughput(&store, writers, secs, &prefix, Some(keys)).await?;
        update.push((writers, ops));
    }

    // 10k keys for reads and lists.
    let prefix = format!("/r{run_id}/");
    let value = Bytes::from(vec![b'x'; VALUE]);
    let keys: Vec<String> = (0..10_000).map(|i| format!("{prefix}{i:05}")).collect();
    futures::stream::iter(keys.iter())
        .for_each_concurrent(64, |k| {
            let store = store.clone();
            let value = value.clone();
            async move {
                store.create(k.as_bytes(), value).await.expect("create");
            }
        })
        .await;
    let reads = AtomicU64::new(0);
    let deadline = Instant::now() + Duration::from_secs_f64(secs);
    futures::future::join_all((0..16).map(|r| {
        let store = store.clone();
        let keys = &keys;
        let reads = &reads;
        async move {
            let mut i = r * 613;
            while Instant::now() < deadline {
                store
                    .get(keys[i % keys.len()].as_bytes())
                    .await
                    .expect("get");
                reads.fetch_add(1, Ordering::Relaxed);
                i += 7919;
            }
        }
    }))
    .await;
    let get_ops = reads.load(Ordering::Relaxed) as f64 / secs;
    let rounds = if quick { 3 } else { 10 };
    let started = Instant::now();
    for _ in 0..rounds {
        let l = store.list(prefix.as_bytes(), Default::default()).await?;
        assert_eq!(l.items.len(), 10_000);
    }
    let list_ms = started.elapsed().as_secs_f64() * 1e3 / rounds as f64;

    let (delivered, lag_p50, lag_p99) =
        watch_fanout(&store, run_id, if quick { 2_000 } else { 10_000 }).await?;
    Ok(Figures {
        create,
        update,
        get_ops,
        list_ms,
        delivered,
        lag_p50,
        lag_p99,
    })
}

/// Runs `writers` concurrent writers for `secs`: creates of fresh keys, or (with `keys`) updates
/// of those keys. Returns ops/s and the keys with their mod revisions.
async fn throughput(
    store: &Arc<dyn Storage>,
    writers: usize,
    secs: f64,
    prefix: &str,
    keys: Option<Vec<Vec<(String, i64)>>>,
) -> anyhow::Result<(f64, Vec<Vec<(String, i64)>>)> {
    let value = Bytes::from(vec![b'x'; VALUE]);
    let deadline = Instant::now() + Duration::from_secs_f64(secs);
    let started = Instant::now();
    let per: Vec<Vec<(String, i64)>> = keys.unwrap_or_else(|| vec![Vec::new(); writers]);
    let updating = per.iter().any(|v| !v.is_empty());
    let tasks = per.into_iter().enumerate().map(|(w, mut mine)| {
        let store = store.clone();
        let value = value.clone();
        let prefix = prefix.to_string();
        tokio::spawn(async move {
            let mut ops = 0u64;
            if updating {
                'outer: loop {
                    for (k, rev) in mine.iter_mut() {
                        if Instant::now() >= deadline {
                            break 'outer;
                        }
                        *rev = store
                            .update(k.as_bytes(), value.clone(), *rev)
                            .await
                            .expect("update")
                            .mod_revision;
                        ops += 1;
                    }
                }
            } else {
                let mut i = 0;
                while Instant::now() < deadline {
                    let k = format!("{prefix}{w:03}-{i:08}");
                    let kv = store
                        .create(k.as_bytes(), value.clone())
                        .await
                        .expect("create");
                    mine.push((k, kv.mod_revision));
                    ops += 1;
                    i += 1;
                }
            }
            (ops, mine)
        })
    });
    let results = futures::future::join_all(tasks).await;
    let elapsed = started.elapsed().as_secs_f64();
    let mut total = 0;
    let mut keys = Vec::new();
    for r in results {
        let (ops, mine) = r?;
        total += ops;
        keys.push(mine);
    }
    Ok((total as f64 / elapsed, keys))
}

/// 100 watchers of one prefix, `writes` writes by 16 writers; each value carries the time just
/// before its write call. Returns delivered %, p50 and p99 lag.
async fn watch_fanout(
    store: &Arc<dyn Storage>,
    run_id: u32,
    writes: usize,
) -> anyhow::Result<(f64, Duration, Duration)> {
    const WATCHERS: usize = 100;
    let prefix = format!("/w{run_id}/");
    let origin = Instant::now();
    let start_rev = store.current_revision().await?;
    let mut watchers = Vec::new();
    for _ in 0..WATCHERS {
        let mut w = store.watch(prefix.as_bytes(), start_rev).await?;
        watchers.push(tokio::spawn(async move {
            let mut lags = Vec::with_capacity(writes);
            while lags.len() < writes {
                match tokio::time::timeout(Duration::from_secs(30), w.next()).await {
                    Ok(Some(Ok(ev))) => {
                        let sent =
                            u64::from_le_bytes(ev.kv.value[..8].try_into().expect("8 bytes"));
                        let now = origin.elapsed().as_nanos() as u64;
                        lags.push(Duration::from_nanos(now.saturating_sub(sent)));
                    }
                    _ => break,
                }
            }
            lags
        }));
    }
    let per_writer = writes / 16;
    futures::future::join_all((0..16).map(|w| {
        let store = store.clone();
        let prefix = prefix.clone();
        async move {
            for i in 0..per_writer {
                let mut v = vec![b'x'; VALUE];
                v[..8].copy_from_slice(&(origin.elapsed().as_nanos() as u64).to_le_bytes());
                store
                    .create(format!("{prefix}{w:02}-{i:06}").as_bytes(), Bytes::from(v))
                    .await
                    .expect("create");
            }
        }
    }))
    .await;
    let mut all = Samples::default();
    let mut delivered = 0usize;
    for w in watchers {
        let lags = w.await?;
        delivered += lags.len();
        all.0.extend(lags);
    }
    let pct = delivered as f64 * 100.0 / (WATCHERS * per_writer * 16) as f64;
    Ok((pct, all.percentile(0.5), all.percentile(0.99)))
}
