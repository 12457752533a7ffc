//! Revisioned key-value storage with watch: the ground every other Matryoshka layer stands on.
//!
//! The [`Storage`] trait is the whole contract: get, list (prefix, limit/continue, at a
//! revision), create, guaranteed update (compare-and-swap on the mod revision), delete (with an
//! optional precondition), watch (prefix, from a revision), current revision and compaction.
//! One revision counter per store; revisions are positive and strictly increasing, and every
//! write gets its own revision.
//!
//! **Architecture Invariant:** storage sees keys, bytes and revisions only. It knows nothing of
//! HTTP, Kubernetes kinds or logical clusters; those are key segments chosen by the layers above.
//!
//! Backends:
//! - [`embedded::EmbeddedStore`], the default: a write-ahead log with group commit, an in-memory
//!   MVCC index and snapshots.
//! - [`etcd::EtcdStore`]: the etcd v3 API (etcd 3.4 and newer).
//!
//! [`conformance`] holds the one test suite every backend must pass.

pub mod conformance;
mod continue_token;
pub mod embedded;
mod error;
pub mod etcd;
pub mod offset;
#[doc(hidden)]
pub mod testkit;

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures::Stream;
use tokio::sync::mpsc;

pub use continue_token::ContinueToken;
pub use error::{Error, Result};

/// A store revision. Positive, strictly increasing, one counter per store. The API exposes it as
/// `metadata.resourceVersion` (decimal).
pub type Revision = i64;

/// The largest value a backend accepts. Kubernetes objects are capped at 1.5 MiB by etcd's
/// default request limit; we accept a little more so a 1.5 MiB object plus its key always fits.
pub const MAX_VALUE_BYTES: usize = 2 * 1024 * 1024;

/// The largest key a backend accepts (etcd's practical limit is far above any Kubernetes key).
pub const MAX_KEY_BYTES: usize = 8 * 1024;

/// A stored key with its value and revisions, as etcd's `mvccpb.KeyValue`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyValue {
    pub key: Bytes,
    pub value: Bytes,
    /// Revision of the write that created the key (since its last deletion).
    pub create_revision: Revision,
    /// Revision of the last write to the key.
    pub mod_revision: Revision,
    /// Number of writes since creation; 1 after create.
    pub version: i64,
}

/// What happened to a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventKind {
    Create,
    Update,
    Delete,
}

/// One change, delivered to watchers in revision order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub kind: EventKind,
    /// The key after the change. For a delete, `value` is empty and `mod_revision` is the
    /// revision of the delete.
    pub kv: KeyValue,
    /// The value before the change: `None` for a create, `Some` for updates and deletes.
    pub prev: Option<KeyValue>,
}

impl Event {
    /// The revision at which the change happened.
    pub fn revision(&self) -> Revision {
        self.kv.mod_revision
    }
}

/// Options of [`Storage::list`].
#[derive(Debug, Clone, Default)]
pub struct ListOptions {
    /// Read at this revision (a consistent snapshot). `None` reads the current revision.
    /// Ignored when `continue_token` is set: the token carries the revision of the first page.
    pub revision: Option<Revision>,
    /// At most this many items; `None` or 0 means no limit.
    pub limit: Option<usize>,
    /// Resume a paginated list where the previous page stopped.
    pub continue_token: Option<String>,
}

/// A page of a list.
#[derive(Debug, Clone)]
pub struct ListResult {
    pub items: Vec<KeyValue>,
    /// The revision the whole list (every page of it) is read at.
    pub revision: Revision,
    /// Set when more items remain: pass it back in [`ListOptions::continue_token`].
    pub continue_token: Option<String>,
    /// How many items remain after this page, when the backend knows it cheaply.
    pub remaining: Option<u64>,
}

/// A stream of watch events. Ends with `Err` when the watch is terminated by the store (a slow
/// watcher, compaction, an unavailable backend), or with `None` when the store shuts down.
pub struct WatchStream {
    rx: mpsc::Receiver<Result<Arc<Event>>>,
}

impl WatchStream {
    /// A stream fed by a channel; backends keep the sending half.
    pub fn from_channel(rx: mpsc::Receiver<Result<Arc<Event>>>) -> Self {
        WatchStream { rx }
    }

    /// The next event, or `None` when the stream is over.
    pub async fn next_event(&mut self) -> Option<Result<Arc<Event>>> {
        self.rx.recv().await
    }
}

impl Stream for WatchStream {
    type Item = Result<Arc<Event>>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.rx.poll_recv(cx)
    }
}

/// A revisioned key-value store with watch. Implementations are cheap to share (`Arc<dyn
/// Storage>`) and every method is safe to call concurrently.
#[async_trait::async_trait]
pub trait Storage: Send + Sync + 'static {
    /// The key's current value, or `None`.
    async fn get(&self, key: &[u8]) -> Result<Option<KeyValue>>;

    /// Keys starting with `prefix`, in key order, at one revision.
    async fn list(&self, prefix: &[u8], opts: ListOptions) -> Result<ListResult>;

    /// Creates `key`; fails with [`Error::AlreadyExists`] if it is present.
    async fn create(&self, key: &[u8], value: Bytes) -> Result<KeyValue>;

    /// Replaces `key`'s value if its mod revision is still `expected_mod_revision`; otherwise
    /// [`Error::Conflict`] with the current value, or [`Error::NotFound`] if the key is absent.
    async fn update(
        &self,
        key: &[u8],
        value: Bytes,
        expected_mod_revision: Revision,
    ) -> Result<KeyValue>;

    /// Deletes `key`, if `expected_mod_revision` (when given) still matches. Returns the deleted
    /// value with `mod_revision` set to the revision of the delete.
    async fn delete(&self, key: &[u8], expected_mod_revision: Option<Revision>)
    -> Result<KeyValue>;

    /// Deletes every key under `prefix` (a logical cluster's keyspace). Returns how many keys
    /// were deleted. Watchers see one delete event per key.
    async fn delete_prefix(&self, prefix: &[u8]) -> Result<u64>;

    /// Every change to keys under `prefix` with a revision strictly greater than
    /// `after_revision`, in revision order, exactly once. `after_revision` older than the
    /// compacted revision fails with [`Error::Compacted`].
    async fn watch(&self, prefix: &[u8], after_revision: Revision) -> Result<WatchStream>;

    /// The store's current revision (the revision of the last acknowledged write).
    async fn current_revision(&self) -> Result<Revision>;

    /// Discards history older than `revision`: reads and watches below it fail with
    /// [`Error::Compacted`] afterwards. Compacting to a revision at or below the current
    /// compacted revision does nothing.
    async fn compact(&self, revision: Revision) -> Result<()>;

    /// The oldest revision that can still be read or watched from.
    async fn compacted_revision(&self) -> Result<Revision>;
}

/// The end of the key range that holds every key starting with `prefix` (exclusive), or `None`
/// when the range is unbounded (a prefix of only `0xff` bytes, or empty).
pub fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

/// Checks the arguments every backend refuses alike.
pub(crate) fn check_key(key: &[u8]) -> Result<()> {
    if key.is_empty() {
        return Err(Error::InvalidArgument("the key must not be empty".into()));
    }
    if key.len() > MAX_KEY_BYTES {
        return Err(Error::InvalidArgument(format!(
            "the key is {} bytes, over the limit of {MAX_KEY_BYTES}",
            key.len()
        )));
    }
    Ok(())
}

pub(crate) fn check_value(value: &[u8]) -> Result<()> {
    if value.len() > MAX_VALUE_BYTES {
        return Err(Error::InvalidArgument(format!(
            "the value is {} bytes, over the limit of {MAX_VALUE_BYTES}",
            value.len()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_end_increments_the_last_byte_below_0xff() {
        assert_eq!(prefix_end(b"/a/"), Some(b"/a0".to_vec()));
        assert_eq!(prefix_end(b"a\xff"), Some(b"b".to_vec()));
        assert_eq!(prefix_end(b"\xff\xff"), None);
        assert_eq!(prefix_end(b""), None);
    }
}
