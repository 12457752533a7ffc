//! The embedded store, Matryoshka's default backend.
//!
//! Design (chosen by measurement, see `BENCHMARKS.md`): a write-ahead log with group commit, an
//! in-memory MVCC index, and snapshots that let old log segments be deleted.
//!
//! - **Writes** go through one writer thread. It takes every request that is waiting (a batch),
//!   checks preconditions against the newest state, gives each write the next revision, appends
//!   the batch to the log with one `fdatasync`, then publishes the new revision, delivers the
//!   events and answers the callers. A write is acknowledged only after it is on disk, and
//!   concurrent writers share one fsync.
//! - **Reads** never wait for the disk: they read the index at the published revision, so they
//!   never see a write before it is durable.
//! - **Compaction** keeps the last `retain_revisions` revisions of history (older reads and
//!   watches get [`Error::Compacted`]); its cost is proportional to the events it drops, so it
//!   keeps up with any write rate.
//! - **Snapshots** write the live state once the log has grown past `snapshot_bytes`, then delete
//!   the segments it covers: disk use stays proportional to the live data.
//! - **Recovery** loads the newest snapshot and replays the log after it; a torn tail (a write
//!   that was never acknowledged) is truncated.

mod hub;
mod index;
mod snapshot;
mod wal;

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, mpsc as std_mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::{Mutex, RwLock};
use tokio::sync::oneshot;

use self::hub::Hub;
use self::index::{Index, Version};
use self::wal::{Record, Wal};
use crate::{
    ContinueToken, Error, Event, EventKind, KeyValue, ListOptions, ListResult, Result, Revision,
    Storage, WatchStream, check_key, check_value, prefix_end,
};

/// Tuning of the embedded store. The defaults suit a control plane on one machine.
#[derive(Debug, Clone)]
pub struct Options {
    /// History kept for reads at old revisions and watch resumption. Upstream Kubernetes
    /// compacts every five minutes; a revision count bounds memory under any write rate.
    pub retain_revisions: i64,
    /// And at most this many bytes of history (keys and values of the retained events): a
    /// bound on memory that does not depend on how large the objects written are. Past it the
    /// oldest history goes down to three quarters of the bound.
    pub retain_bytes: u64,
    /// Log bytes after which a snapshot is written and the covered segments deleted.
    pub snapshot_bytes: u64,
    /// Size at which the log moves on to a new segment.
    pub segment_bytes: u64,
    /// Undelivered events a watcher may have before it is terminated.
    pub watch_buffer: usize,
    /// The most writes committed with one fsync.
    pub max_batch: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            retain_revisions: 100_000,
            retain_bytes: 128 << 20,
            snapshot_bytes: 256 << 20,
            segment_bytes: 64 << 20,
            watch_buffer: hub::WATCH_BUFFER,
            max_batch: 4096,
        }
    }
}

/// State shared by readers and the writer thread.
struct Shared {
    index: RwLock<Index>,
    /// The newest durable revision: what readers see.
    current: AtomicI64,
    /// Reads below this revision fail with [`Error::Compacted`].
    compacted: AtomicI64,
    hub: Hub,
    /// Set when the store can no longer write (an I/O error); every call then fails.
    failed: Mutex<Option<String>>,
    snapshotting: AtomicBool,
    dir: PathBuf,
    opts: Options,
}

enum Op {
    Create {
        key: Bytes,
        value: Bytes,
    },
    Update {
        key: Bytes,
        value: Bytes,
        expected: Revision,
    },
    Delete {
        key: Bytes,
        expected: Option<Revision>,
    },
    DeletePrefix {
        prefix: Bytes,
    },
    Compact {
        rev: Revision,
    },
    Snapshot,
}

enum Reply {
    Kv(KeyValue),
    Count(u64),
    Done,
    Rev(Revision),
}

struct Request {
    op: Op,
    reply: oneshot::Sender<Result<Reply>>,
}

/// The embedded backend. Share it with `Arc`; dropping the last handle stops the writer thread
/// after it has finished the requests already taken.
pub struct EmbeddedStore {
    shared: Arc<Shared>,
    tx: Option<std_mpsc::Sender<Request>>,
    writer: Option<JoinHandle<()>>,
    _lock: File,
}

impl EmbeddedStore {
    /// Opens (or creates) the store in `dir`.
    pub fn open(dir: impl AsRef<Path>) -> Result<Self> {
        Self::open_with(dir, Options::default())
    }

    pub fn open_with(dir: impl AsRef<Path>, opts: Options) -> Result<Self> {
        let dir = dir.as_ref().to_path_buf();
        fs::create_dir_all(&dir).map_err(|e| io_err("create the data directory", e))?;
        let lock = File::create(dir.join("LOCK")).map_err(|e| io_err("create the lock file", e))?;
        lock.try_lock().map_err(|_| {
            Error::Unavailable(format!("{} is in use by another process", dir.display()))
        })?;
        for entry in fs::read_dir(&dir).map_err(|e| io_err("read the data directory", e))? {
            let p = entry
                .map_err(|e| io_err("read the data directory", e))?
                .path();
            if p.extension().is_some_and(|e| e == "tmp") {
                let _ = fs::remove_file(p);
            }
        }

        // Newest valid snapshot, then the log after it.
        let mut index = Index::default();
        let mut base = 0;
        for (rev, p) in snapshot::list(&dir).map_err(|e| io_err("list snapshots", e))? {
            match snapshot::read(&p) {
                Ok((r, items)) => {
                    for kv in items {
                        index.push(
                            kv.key,
                            Version {
                                mod_rev: kv.mod_revision,
                                create_rev: kv.create_revision,
                                ver: kv.version,
                                value: Some(kv.value),
                            },
                        );
                    }
                    base = r;
                    break;
                }
                Err(e) => {
                    tracing::warn!(snapshot = rev, error = %e, "skipping an unreadable snapshot")
                }
            }
        }
        let mut events = Vec::new();
        let last = wal::replay(&dir, base, |rec| {
            if let Some(ev) = apply(&mut index, rec) {
                events.push(Arc::new(ev));
            }
        })
        .map_err(|e| io_err("replay the write-ahead log", e))?;
        let wal = Wal::open(&dir, last + 1).map_err(|e| io_err("open the write-ahead log", e))?;

        let hub = Hub::new(base, base, opts.watch_buffer);
        hub.seed(events);
        let shared = Arc::new(Shared {
            index: RwLock::new(index),
            current: AtomicI64::new(last),
            compacted: AtomicI64::new(base),
            hub,
            failed: Mutex::new(None),
            snapshotting: AtomicBool::new(false),
            dir,
            opts,
        });
        if last - base > shared.opts.retain_revisions {
            compact_now(&shared, last - shared.opts.retain_revisions);
        }
        let (tx, rx) = std_mpsc::channel();
        let writer_shared = shared.clone();
        let writer = std::thread::Builder::new()
            .name("storage-writer".into())
            .spawn(move || {
                Writer {
                    shared: writer_shared,
                    wal,
                    rx,
                    last_batch: 1,
                    fsync_avg: Duration::from_micros(500),
                }
                .run()
            })
            .map_err(|e| io_err("start the writer thread", e))?;
        tracing::info!(
            revision = last,
            keys = shared.index.read().live_len(),
            "embedded store opened"
        );
        Ok(EmbeddedStore {
            shared,
            tx: Some(tx),
            writer: Some(writer),
            _lock: lock,
        })
    }

    /// Number of live keys.
    pub fn len(&self) -> usize {
        self.shared.index.read().live_len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The history kept for old reads and watches: its bytes ([`Options::retain_bytes`]) and
    /// events.
    pub fn history_size(&self) -> (u64, usize) {
        self.shared.hub.window_size()
    }

    /// Number of active watchers.
    pub fn watcher_count(&self) -> usize {
        self.shared.hub.watcher_count()
    }

    /// Bytes used on disk by the log and snapshots.
    pub fn disk_bytes(&self) -> u64 {
        fs::read_dir(&self.shared.dir)
            .map(|rd| {
                rd.filter_map(|e| e.ok()?.metadata().ok())
                    .map(|m| m.len())
                    .sum()
            })
            .unwrap_or(0)
    }

    async fn submit(&self, op: Op) -> Result<Reply> {
        self.check_failed()?;
        let (reply, rx) = oneshot::channel();
        let tx = self.tx.as_ref().ok_or_else(closed)?;
        tx.send(Request { op, reply }).map_err(|_| closed())?;
        rx.await.map_err(|_| closed())?
    }

    fn check_failed(&self) -> Result<()> {
        match &*self.shared.failed.lock() {
            Some(why) => Err(Error::Unavailable(why.clone())),
            None => Ok(()),
        }
    }

    fn read_revision(&self, requested: Option<Revision>) -> Result<Revision> {
        let current = self.shared.current.load(Ordering::Acquire);
        match requested {
            None | Some(0) => Ok(current),
            Some(r) if r < 0 => Err(Error::InvalidArgument(format!("negative revision {r}"))),
            Some(r) if r > current => Err(Error::FutureRevision {
                requested: r,
                current,
            }),
            Some(r) => Ok(r),
        }
    }
}

impl Drop for EmbeddedStore {
    fn drop(&mut self) {
        self.tx.take();
        if let Some(w) = self.writer.take() {
            let _ = w.join();
        }
        self.shared.hub.close_all(None);
    }
}

fn closed() -> Error {
    Error::Unavailable("the store is closed".into())
}

fn io_err(what: &str, e: std::io::Error) -> Error {
    Error::Unavailable(format!("failed to {what}: {e}"))
}

/// Applies a replayed record to the index, returning its event.
fn apply(index: &mut Index, rec: Record) -> Option<Event> {
    let (rev, key, value) = match rec {
        Record::Put { rev, key, value } => (rev, key, Some(value)),
        Record::Delete { rev, key } => (rev, key, None),
    };
    let prev = index.newest(&key).and_then(|(k, v)| v.to_kv(k));
    let ev = make_event(&key, rev, value.clone(), prev.clone())?;
    let (create_rev, ver) = match &prev {
        Some(p) => (p.create_revision, p.version + 1),
        None => (rev, 1),
    };
    index.push(
        key,
        Version {
            mod_rev: rev,
            create_rev,
            ver,
            value,
        },
    );
    Some(ev)
}

fn make_event(
    key: &Bytes,
    rev: Revision,
    value: Option<Bytes>,
    prev: Option<KeyValue>,
) -> Option<Event> {
    match (value, prev) {
        (Some(value), prev) => {
            let (create_revision, version) = match &prev {
                Some(p) => (p.create_revision, p.version + 1),
                None => (rev, 1),
            };
            let kind = if prev.is_some() {
                EventKind::Update
            } else {
                EventKind::Create
            };
            Some(Event {
                kind,
                kv: KeyValue {
                    key: key.clone(),
                    value,
                    create_revision,
                    mod_revision: rev,
                    version,
                },
                prev,
            })
        }
        (None, Some(prev)) => Some(Event {
            kind: EventKind::Delete,
            kv: KeyValue {
                key: key.clone(),
                value: Bytes::new(),
                create_revision: 0,
                mod_revision: rev,
                version: 0,
            },
            prev: Some(prev),
        }),
        (None, None) => None,
    }
}

/// Compacts history below `rev` (the writer thread or `open` only).
fn compact_now(shared: &Shared, rev: Revision) {
    let dropped = shared.hub.compact(rev);
    let mut index = shared.index.write();
    for ev in &dropped {
        index.compact_key(&ev.kv.key, rev);
    }
    shared.compacted.fetch_max(rev, Ordering::AcqRel);
}

struct Writer {
    shared: Arc<Shared>,
    wal: Wal,
    rx: std_mpsc::Receiver<Request>,
    /// Size of the previous batch: how many writers are likely to be waiting right now.
    last_batch: usize,
    /// Moving average of the time a commit's fsync takes.
    fsync_avg: Duration,
}

/// A write evaluated against the newest state, waiting for the fsync.
struct Pending {
    reply: oneshot::Sender<Result<Reply>>,
    result: Result<Reply>,
}

impl Writer {
    fn run(mut self) {
        while let Ok(first) = self.rx.recv() {
            let batch = self.gather(first);
            self.last_batch = batch.len();
            self.commit(batch);
            self.maintain();
        }
    }

    /// Collects a batch. Writers whose previous write was just acknowledged come back within
    /// microseconds; waiting a fraction of an fsync for them (only while the previous batch
    /// suggests they exist) makes each fsync carry every concurrent writer instead of
    /// alternating between a straggler and the rest.
    fn gather(&mut self, first: Request) -> Vec<Request> {
        let max = self.shared.opts.max_batch;
        let mut batch = vec![first];
        let drain = |batch: &mut Vec<Request>, rx: &std_mpsc::Receiver<Request>| {
            while batch.len() < max {
                match rx.try_recv() {
                    Ok(r) => batch.push(r),
                    Err(_) => break,
                }
            }
        };
        drain(&mut batch, &self.rx);
        let want = self.last_batch.min(max);
        if batch.len() < want {
            let deadline = Instant::now() + (self.fsync_avg / 4).min(Duration::from_micros(500));
            while batch.len() < want {
                let left = deadline.saturating_duration_since(Instant::now());
                match self.rx.recv_timeout(left) {
                    Ok(r) => {
                        batch.push(r);
                        drain(&mut batch, &self.rx);
                    }
                    Err(_) => break,
                }
            }
        }
        batch
    }

    fn commit(&mut self, batch: Vec<Request>) {
        if let Some(why) = self.shared.failed.lock().clone() {
            for req in batch {
                let _ = req.reply.send(Err(Error::Unavailable(why.clone())));
            }
            return;
        }
        let base = self.shared.current.load(Ordering::Acquire);
        let mut rev = base;
        let mut buf = Vec::new();
        let mut events: Vec<Arc<Event>> = Vec::new();
        let mut pending = Vec::with_capacity(batch.len());
        let mut touched: Vec<Bytes> = Vec::new();
        let mut compact_to = None;
        let mut snapshot_replies = Vec::new();
        {
            let mut index = self.shared.index.write();
            for Request { op, reply } in batch {
                let mut write = |index: &mut Index, key: Bytes, value: Option<Bytes>| -> KeyValue {
                    rev += 1;
                    let prev = index.newest(&key).and_then(|(k, v)| v.to_kv(k));
                    let rec = match &value {
                        Some(v) => Record::Put {
                            rev,
                            key: key.clone(),
                            value: v.clone(),
                        },
                        None => Record::Delete {
                            rev,
                            key: key.clone(),
                        },
                    };
                    rec.encode(&mut buf);
                    let ev = make_event(&key, rev, value.clone(), prev.clone())
                        .expect("writes of absent keys are refused before");
                    let (create_rev, ver) = match &prev {
                        Some(p) => (p.create_revision, p.version + 1),
                        None => (rev, 1),
                    };
                    index.push(
                        key.clone(),
                        Version {
                            mod_rev: rev,
                            create_rev,
                            ver,
                            value,
                        },
                    );
                    touched.push(key);
                    let kv = match ev.kind {
                        EventKind::Delete => {
                            let mut p = ev.prev.clone().expect("a delete has a previous value");
                            p.mod_revision = rev;
                            p
                        }
                        _ => ev.kv.clone(),
                    };
                    events.push(Arc::new(ev));
                    kv
                };
                let live =
                    |index: &Index, key: &[u8]| index.newest(key).and_then(|(k, v)| v.to_kv(k));
                let result = match op {
                    Op::Create { key, value } => match live(&index, &key) {
                        Some(_) => Err(Error::AlreadyExists),
                        None => Ok(Reply::Kv(write(&mut index, key, Some(value)))),
                    },
                    Op::Update {
                        key,
                        value,
                        expected,
                    } => match live(&index, &key) {
                        None => Err(Error::NotFound),
                        Some(cur) if cur.mod_revision != expected => Err(Error::Conflict {
                            current: Some(Box::new(cur)),
                            revision: rev,
                        }),
                        Some(_) => Ok(Reply::Kv(write(&mut index, key, Some(value)))),
                    },
                    Op::Delete { key, expected } => match live(&index, &key) {
                        None => Err(Error::NotFound),
                        Some(cur) if expected.is_some_and(|e| e != cur.mod_revision) => {
                            Err(Error::Conflict {
                                current: Some(Box::new(cur)),
                                revision: rev,
                            })
                        }
                        Some(_) => Ok(Reply::Kv(write(&mut index, key, None))),
                    },
                    Op::DeletePrefix { prefix } => {
                        let end = prefix_end(&prefix);
                        let keys = index.live_keys(&prefix, end.as_deref());
                        let n = keys.len() as u64;
                        for k in keys {
                            write(&mut index, k, None);
                        }
                        Ok(Reply::Count(n))
                    }
                    Op::Snapshot => {
                        snapshot_replies.push(reply);
                        continue;
                    }
                    Op::Compact { rev: to } => {
                        if to > rev {
                            Err(Error::FutureRevision {
                                requested: to,
                                current: rev,
                            })
                        } else {
                            compact_to = Some(compact_to.unwrap_or(0).max(to));
                            Ok(Reply::Done)
                        }
                    }
                };
                pending.push(Pending { reply, result });
            }
        }

        let fsync_started = Instant::now();
        let appended = if buf.is_empty() {
            Ok(())
        } else {
            self.wal.append(&buf)
        };
        if !buf.is_empty() {
            self.fsync_avg = (self.fsync_avg * 7 + fsync_started.elapsed()) / 8;
        }
        if let Err(e) = appended {
            let why = format!("failed to write the log: {e}");
            tracing::error!(error = %e, "the embedded store failed a write and stops accepting writes");
            let mut index = self.shared.index.write();
            for k in &touched {
                index.rollback(k, base);
            }
            drop(index);
            *self.shared.failed.lock() = Some(why.clone());
            self.shared
                .hub
                .close_all(Some(Error::Unavailable(why.clone())));
            for p in pending {
                let _ = p.reply.send(Err(Error::Unavailable(why.clone())));
            }
            for r in snapshot_replies {
                let _ = r.send(Err(Error::Unavailable(why.clone())));
            }
            return;
        }
        self.shared.current.store(rev, Ordering::Release);
        self.shared.hub.publish(&events);
        if let Some(to) = compact_to {
            compact_now(&self.shared, to);
        }
        for p in pending {
            let _ = p.reply.send(p.result);
        }
        if !snapshot_replies.is_empty() {
            let result = self.snapshot(false);
            for r in snapshot_replies {
                let _ = r.send(result.clone().map(Reply::Rev));
            }
        }
    }

    /// Writes a snapshot of the current state and deletes the log it covers; in the background
    /// unless `background` is false. Returns the snapshot's revision.
    fn snapshot(&mut self, background: bool) -> Result<Revision> {
        let shared = &self.shared;
        if shared.snapshotting.swap(true, Ordering::AcqRel) {
            if background {
                return Ok(0);
            }
            while shared.snapshotting.swap(true, Ordering::AcqRel) {
                std::thread::yield_now();
            }
        }
        let current = shared.current.load(Ordering::Acquire);
        if let Err(e) = self.wal.rotate(current + 1) {
            shared.snapshotting.store(false, Ordering::Release);
            return Err(io_err("rotate the log", e));
        }
        self.wal.bytes_since_snapshot = 0;
        let items = shared.index.read().live_at(current);
        let shared = shared.clone();
        let work = move || {
            let result = snapshot::write(&shared.dir, current, &items)
                .and_then(|_| remove_covered(&shared.dir, current))
                .map(|()| current)
                .map_err(|e| io_err("write a snapshot", e));
            if let Err(e) = &result {
                tracing::warn!(error = %e, "snapshot failed; the log is kept");
            }
            shared.snapshotting.store(false, Ordering::Release);
            result
        };
        if background {
            std::thread::spawn(work);
            Ok(current)
        } else {
            work()
        }
    }

    /// Background duties after a batch: bounded history, segment rotation, snapshots.
    fn maintain(&mut self) {
        let shared = &self.shared;
        let current = shared.current.load(Ordering::Acquire);
        let compacted = shared.compacted.load(Ordering::Acquire);
        let retain = shared.opts.retain_revisions;
        // Compact in steps of half the retained window so the cost is amortised.
        if current - compacted > retain + retain / 2 {
            compact_now(shared, current - retain);
        }
        let bytes = shared.opts.retain_bytes;
        if let Some(rev) = shared.hub.revision_to_fit(bytes)
            && let Some(to) = shared.hub.revision_to_fit(bytes / 4 * 3)
        {
            debug_assert!(to >= rev);
            compact_now(shared, to.min(current));
        }
        if self.wal.bytes_since_snapshot >= shared.opts.snapshot_bytes {
            let _ = self.snapshot(true);
        } else if self.wal.segment_bytes() >= shared.opts.segment_bytes
            && let Err(e) = self.wal.rotate(current + 1)
        {
            tracing::warn!(error = %e, "failed to rotate the log");
        }
    }
}

/// Deletes the log segments and older snapshots made redundant by the snapshot at `rev`.
fn remove_covered(dir: &Path, rev: Revision) -> std::io::Result<()> {
    let segs = wal::segments(dir)?;
    for (i, (_, p)) in segs.iter().enumerate() {
        // A segment is covered when the next one starts at or before rev + 1.
        if let Some((next_first, _)) = segs.get(i + 1)
            && *next_first <= rev + 1
        {
            fs::remove_file(p)?;
        }
    }
    for (r, p) in snapshot::list(dir)? {
        if r < rev {
            fs::remove_file(p)?;
        }
    }
    wal::sync_dir(dir)
}

#[async_trait::async_trait]
impl Storage for EmbeddedStore {
    async fn get(&self, key: &[u8]) -> Result<Option<KeyValue>> {
        check_key(key)?;
        self.check_failed()?;
        let rev = self.shared.current.load(Ordering::Acquire);
        Ok(self.shared.index.read().get_at(key, rev))
    }

    async fn list(&self, prefix: &[u8], opts: ListOptions) -> Result<ListResult> {
        self.check_failed()?;
        let (rev, start) = match &opts.continue_token {
            Some(t) if !t.is_empty() => {
                let tok = ContinueToken::decode(t, prefix)?;
                let current = self.shared.current.load(Ordering::Acquire);
                if tok.revision > current {
                    return Err(Error::InvalidContinue(format!(
                        "revision {} is in the future",
                        tok.revision
                    )));
                }
                (tok.revision, tok.start)
            }
            _ => (self.read_revision(opts.revision)?, prefix.to_vec()),
        };
        let end = prefix_end(prefix);
        let limit = opts.limit.unwrap_or(0);
        let index = self.shared.index.read();
        let compacted = self.shared.compacted.load(Ordering::Acquire);
        if rev < compacted {
            return Err(Error::Compacted {
                requested: rev,
                compacted,
            });
        }
        let (items, more) = index.range_at(&start, end.as_deref(), rev, limit);
        drop(index);
        let continue_token = match (more, items.last()) {
            (true, Some(last)) => Some(ContinueToken::after(rev, &last.key).encode()),
            _ => None,
        };
        Ok(ListResult {
            items,
            revision: rev,
            continue_token,
            remaining: None,
        })
    }

    async fn create(&self, key: &[u8], value: Bytes) -> Result<KeyValue> {
        check_key(key)?;
        check_value(&value)?;
        match self
            .submit(Op::Create {
                key: Bytes::copy_from_slice(key),
                value,
            })
            .await?
        {
            Reply::Kv(kv) => Ok(kv),
            _ => unreachable!("create answers with a key"),
        }
    }

    async fn update(
        &self,
        key: &[u8],
        value: Bytes,
        expected_mod_revision: Revision,
    ) -> Result<KeyValue> {
        check_key(key)?;
        check_value(&value)?;
        let op = Op::Update {
            key: Bytes::copy_from_slice(key),
            value,
            expected: expected_mod_revision,
        };
        match self.submit(op).await? {
            Reply::Kv(kv) => Ok(kv),
            _ => unreachable!("update answers with a key"),
        }
    }

    async fn delete(
        &self,
        key: &[u8],
        expected_mod_revision: Option<Revision>,
    ) -> Result<KeyValue> {
        check_key(key)?;
        let op = Op::Delete {
            key: Bytes::copy_from_slice(key),
            expected: expected_mod_revision,
        };
        match self.submit(op).await? {
            Reply::Kv(kv) => Ok(kv),
            _ => unreachable!("delete answers with a key"),
        }
    }

    async fn delete_prefix(&self, prefix: &[u8]) -> Result<u64> {
        check_key(prefix)?;
        match self
            .submit(Op::DeletePrefix {
                prefix: Bytes::copy_from_slice(prefix),
            })
            .await?
        {
            Reply::Count(n) => Ok(n),
            _ => unreachable!("delete_prefix answers with a count"),
        }
    }

    async fn watch(&self, prefix: &[u8], after_revision: Revision) -> Result<WatchStream> {
        self.check_failed()?;
        if after_revision < 0 {
            return Err(Error::InvalidArgument(format!(
                "negative revision {after_revision}"
            )));
        }
        let compacted = self.shared.compacted.load(Ordering::Acquire);
        self.shared.hub.watch(prefix, after_revision, compacted)
    }

    async fn current_revision(&self) -> Result<Revision> {
        self.check_failed()?;
        Ok(self.shared.current.load(Ordering::Acquire))
    }

    async fn compact(&self, revision: Revision) -> Result<()> {
        if revision <= self.shared.compacted.load(Ordering::Acquire) {
            return Ok(());
        }
        self.submit(Op::Compact { rev: revision }).await.map(|_| ())
    }

    async fn compacted_revision(&self) -> Result<Revision> {
        Ok(self.shared.compacted.load(Ordering::Acquire))
    }
}

impl EmbeddedStore {
    /// Writes a snapshot of the current state now and deletes the log it covers (a faster
    /// next start). Returns the snapshot's revision.
    pub async fn snapshot(&self) -> Result<Revision> {
        match self.submit(Op::Snapshot).await? {
            Reply::Rev(r) => Ok(r),
            _ => unreachable!("snapshot answers with a revision"),
        }
    }
}
