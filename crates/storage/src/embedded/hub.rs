//! Watch fan-out of the embedded store: the window of recent events and the live watchers.
//!
//! Publishing and registering take the same lock, so a new watcher gets the window's events
//! after its revision and then every live event, with no gap and no duplicate. Each watcher has
//! a bounded channel; the publisher never waits: when a watcher's channel is full, its last free
//! slot carries [`Error::WatcherTooSlow`] and the watcher is dropped.

use std::collections::VecDeque;
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;
use tokio::sync::mpsc;

use crate::{Error, Event, Result, Revision, WatchStream};

/// How many events a watcher may have undelivered before it is terminated. Large enough that a
/// healthy consumer never hits it during a burst (deleting a thousand clusters publishes
/// hundreds of thousands of events at once, and the API server's watch cache, the main
/// consumer, is rebuilt from scratch when dropped); still a bound on memory per watcher. The
/// channel allocates as it fills, so an idle watcher costs nothing for it, and the events it
/// holds are shared with the window.
pub(super) const WATCH_BUFFER: usize = 1 << 20;

struct Watcher {
    prefix: Bytes,
    tx: mpsc::Sender<Result<Arc<Event>>>,
}

/// The bytes an event of the window holds: its key and values (the value before the change is
/// history only; the value after it is shared with the index while it is current).
fn event_bytes(ev: &Event) -> u64 {
    (ev.kv.key.len() + ev.kv.value.len() + ev.prev.as_ref().map_or(0, |p| p.value.len())) as u64
}

struct Inner {
    window: VecDeque<Arc<Event>>,
    /// What the window's events hold ([`event_bytes`]).
    window_bytes: u64,
    /// The oldest `after` revision a watch may start from.
    floor: Revision,
    /// The newest published revision.
    current: Revision,
    watchers: Vec<Watcher>,
}

pub(super) struct Hub {
    inner: Mutex<Inner>,
    buffer: usize,
}

impl Hub {
    pub fn new(current: Revision, floor: Revision, buffer: usize) -> Hub {
        Hub {
            inner: Mutex::new(Inner {
                window: VecDeque::new(),
                window_bytes: 0,
                floor,
                current,
                watchers: Vec::new(),
            }),
            buffer,
        }
    }

    /// Seeds the window with replayed history (at open, before any watcher exists).
    pub fn seed(&self, events: Vec<Arc<Event>>) {
        let mut inner = self.inner.lock();
        for ev in events {
            inner.current = ev.revision();
            inner.window_bytes += event_bytes(&ev);
            inner.window.push_back(ev);
        }
    }

    /// Delivers durable events (in revision order) to the window and to the watchers.
    pub fn publish(&self, events: &[Arc<Event>]) {
        if events.is_empty() {
            return;
        }
        let mut inner = self.inner.lock();
        let buffer = self.buffer;
        for ev in events {
            inner.window_bytes += event_bytes(ev);
            inner.window.push_back(ev.clone());
        }
        inner.current = events[events.len() - 1].revision();
        inner.watchers.retain(|w| {
            for ev in events {
                if !ev.kv.key.starts_with(&w.prefix) {
                    continue;
                }
                if w.tx.is_closed() {
                    return false;
                }
                if w.tx.capacity() <= 1 {
                    let _ = w.tx.try_send(Err(Error::WatcherTooSlow(buffer)));
                    return false;
                }
                let _ = w.tx.try_send(Ok(ev.clone()));
            }
            !w.tx.is_closed()
        });
    }

    /// Starts a watch of `prefix` for events after `after`.
    pub fn watch(
        &self,
        prefix: &[u8],
        after: Revision,
        compacted: Revision,
    ) -> Result<WatchStream> {
        let mut inner = self.inner.lock();
        if after < inner.floor {
            return Err(Error::Compacted {
                requested: after,
                compacted,
            });
        }
        let start = inner.window.partition_point(|e| e.revision() <= after);
        let replay: Vec<_> = inner
            .window
            .range(start..)
            .filter(|e| e.kv.key.starts_with(prefix))
            .cloned()
            .collect();
        let (tx, rx) = mpsc::channel(replay.len() + self.buffer);
        for ev in replay {
            let _ = tx.try_send(Ok(ev));
        }
        inner.watchers.push(Watcher {
            prefix: Bytes::copy_from_slice(prefix),
            tx,
        });
        Ok(WatchStream::from_channel(rx))
    }

    /// Drops window events at or below `rev`'s predecessor so that watches can start at
    /// `rev - 1` at the earliest. Returns the dropped events (their keys need compacting).
    pub fn compact(&self, rev: Revision) -> Vec<Arc<Event>> {
        let mut inner = self.inner.lock();
        let cut = inner.window.partition_point(|e| e.revision() < rev);
        let dropped: Vec<_> = inner.window.drain(..cut).collect();
        inner.window_bytes -= dropped.iter().map(|e| event_bytes(e)).sum::<u64>();
        inner.floor = inner.floor.max(rev - 1);
        dropped
    }

    /// The bytes the window holds and how many events.
    pub fn window_size(&self) -> (u64, usize) {
        let inner = self.inner.lock();
        (inner.window_bytes, inner.window.len())
    }

    /// The revision to compact to so that the window holds at most `bytes`, if it holds more.
    pub fn revision_to_fit(&self, bytes: u64) -> Option<Revision> {
        let inner = self.inner.lock();
        let mut over = inner.window_bytes.checked_sub(bytes).filter(|o| *o > 0)?;
        for ev in &inner.window {
            let b = event_bytes(ev);
            if b >= over {
                return Some(ev.revision() + 1);
            }
            over -= b;
        }
        Some(inner.current + 1)
    }

    /// Ends every watch with `err` (the store failed) or cleanly (`None`, the store closed).
    pub fn close_all(&self, err: Option<Error>) {
        let mut inner = self.inner.lock();
        for w in inner.watchers.drain(..) {
            if let Some(e) = &err {
                let _ = w.tx.try_send(Err(e.clone()));
            }
        }
    }

    pub fn watcher_count(&self) -> usize {
        self.inner.lock().watchers.len()
    }
}
