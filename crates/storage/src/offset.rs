//! A store whose revisions are another's plus a constant: [`OffsetStorage`].
//!
//! Every datastore of the control plane has its own revision counter, and a logical cluster
//! moved from one store into another must not see its resourceVersions go backwards. A
//! datastore is therefore read through an offset far above any revision the stores before it
//! can reach (`k · 2^40` for the `k`-th datastore: a trillion writes each), so its revisions
//! are above theirs for good; moving a cluster into a later store keeps its history monotonic
//! without rewriting anything. The offset is applied at this one boundary: every revision
//! going out (key values, list and watch revisions, errors) is the inner store's plus the
//! offset, every revision coming in (preconditions, list and watch starts, compaction) minus
//! it. A revision below the offset belongs to no history of this store: it reads as compacted.

use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::mpsc;

use crate::{
    Error, Event, KeyValue, ListOptions, ListResult, Result, Revision, Storage, WatchStream,
};

/// The spacing of datastores' revision ranges (`k · 2^40` for the `k`-th).
pub const SPACING: Revision = 1 << 40;

/// Events buffered per watch (as the backends': a burst must not drop the cache's feed; the
/// channel allocates as it fills).
const WATCH_BUFFER: usize = 1 << 20;

/// `inner` with every revision moved up by `offset`.
pub struct OffsetStorage {
    inner: Arc<dyn Storage>,
    shift: Shift,
    offset: Revision,
}

impl OffsetStorage {
    pub fn new(inner: Arc<dyn Storage>, offset: Revision) -> Self {
        OffsetStorage {
            inner,
            shift: Shift { offset },
            offset,
        }
    }

    fn out(&self, r: Revision) -> Revision {
        self.shift.out(r)
    }

    fn kv(&self, kv: KeyValue) -> KeyValue {
        self.shift.kv(kv)
    }

    fn err(&self, e: Error) -> Error {
        self.shift.err(e)
    }

    /// A revision of this store's history in the inner store's terms; one from before it
    /// (below the offset) is compacted.
    async fn inward(&self, r: Revision) -> Result<Revision> {
        if r <= 0 {
            return Ok(r);
        }
        if r >= self.offset {
            // The offset itself is this store's revision 0: before its first write.
            return Ok(r - self.offset);
        }
        let compacted = self.inner.compacted_revision().await?;
        Err(Error::Compacted {
            requested: r,
            compacted: self.out(compacted.max(1)),
        })
    }
}

/// The translation of revisions going out.
#[derive(Clone, Copy)]
struct Shift {
    offset: Revision,
}

impl Shift {
    fn out(&self, r: Revision) -> Revision {
        if r > 0 { r + self.offset } else { r }
    }

    fn kv(&self, mut kv: KeyValue) -> KeyValue {
        kv.create_revision = self.out(kv.create_revision);
        kv.mod_revision = self.out(kv.mod_revision);
        kv
    }

    fn err(&self, e: Error) -> Error {
        match e {
            Error::Conflict { current, revision } => Error::Conflict {
                current: current.map(|kv| Box::new(self.kv(*kv))),
                revision: self.out(revision),
            },
            Error::Compacted {
                requested,
                compacted,
            } => Error::Compacted {
                requested: self.out(requested),
                compacted: self.out(compacted),
            },
            Error::FutureRevision { requested, current } => Error::FutureRevision {
                requested: self.out(requested),
                current: self.out(current),
            },
            other => other,
        }
    }

    fn event(&self, e: &Event) -> Event {
        Event {
            kind: e.kind,
            kv: self.kv(e.kv.clone()),
            prev: e.prev.clone().map(|kv| self.kv(kv)),
        }
    }
}

#[async_trait::async_trait]
impl Storage for OffsetStorage {
    async fn get(&self, key: &[u8]) -> Result<Option<KeyValue>> {
        self.inner
            .get(key)
            .await
            .map(|kv| kv.map(|kv| self.kv(kv)))
            .map_err(|e| self.err(e))
    }

    async fn list(&self, prefix: &[u8], mut opts: ListOptions) -> Result<ListResult> {
        if let Some(r) = opts.revision {
            opts.revision = Some(self.inward(r).await?);
        }
        let page = self
            .inner
            .list(prefix, opts)
            .await
            .map_err(|e| self.err(e))?;
        Ok(ListResult {
            items: page.items.into_iter().map(|kv| self.kv(kv)).collect(),
            revision: self.out(page.revision),
            continue_token: page.continue_token,
            remaining: page.remaining,
        })
    }

    async fn create(&self, key: &[u8], value: Bytes) -> Result<KeyValue> {
        self.inner
            .create(key, value)
            .await
            .map(|kv| self.kv(kv))
            .map_err(|e| self.err(e))
    }

    async fn update(
        &self,
        key: &[u8],
        value: Bytes,
        expected_mod_revision: Revision,
    ) -> Result<KeyValue> {
        let expected = if expected_mod_revision > self.offset {
            expected_mod_revision - self.offset
        } else {
            // No write of this store has that revision: it can only conflict.
            -1
        };
        self.inner
            .update(key, value, expected)
            .await
            .map(|kv| self.kv(kv))
            .map_err(|e| self.err(e))
    }

    async fn delete(
        &self,
        key: &[u8],
        expected_mod_revision: Option<Revision>,
    ) -> Result<KeyValue> {
        let expected =
            expected_mod_revision.map(|r| if r > self.offset { r - self.offset } else { -1 });
        self.inner
            .delete(key, expected)
            .await
            .map(|kv| self.kv(kv))
            .map_err(|e| self.err(e))
    }

    async fn delete_prefix(&self, prefix: &[u8]) -> Result<u64> {
        self.inner
            .delete_prefix(prefix)
            .await
            .map_err(|e| self.err(e))
    }

    async fn watch(&self, prefix: &[u8], after_revision: Revision) -> Result<WatchStream> {
        let after = self.inward(after_revision).await?;
        let mut inner = self
            .inner
            .watch(prefix, after)
            .await
            .map_err(|e| self.err(e))?;
        let (tx, rx) = mpsc::channel(WATCH_BUFFER);
        let shift = self.shift;
        tokio::spawn(async move {
            while let Some(item) = inner.next_event().await {
                let item = item
                    .map(|ev| Arc::new(shift.event(&ev)))
                    .map_err(|e| shift.err(e));
                let end = item.is_err();
                if tx.send(item).await.is_err() || end {
                    return;
                }
            }
        });
        Ok(WatchStream::from_channel(rx))
    }

    async fn current_revision(&self) -> Result<Revision> {
        self.inner
            .current_revision()
            .await
            .map(|r| self.out(r))
            .map_err(|e| self.err(e))
    }

    async fn compact(&self, revision: Revision) -> Result<()> {
        if revision <= self.offset {
            return Ok(());
        }
        self.inner
            .compact(revision - self.offset)
            .await
            .map_err(|e| self.err(e))
    }

    async fn compacted_revision(&self) -> Result<Revision> {
        self.inner
            .compacted_revision()
            .await
            .map(|r| self.out(r))
            .map_err(|e| self.err(e))
    }
}
