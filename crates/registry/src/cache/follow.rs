//! [`Follow`]: a watch for the server's own loops that never ends while the cache lives.

use std::sync::Arc;
use std::time::Duration;

use apimachinery::status::ApiError;

use super::{CachedObject, EventType, Filter, Start, WatchCache, WatchHandle, WatchItem};

/// A watch for the server's own loops (CRD serving, role aggregation, cluster provisioning)
/// that never ends while the cache lives: when the cache drops it for falling behind, it
/// starts again from the current state, whose objects arrive as ADDED. Level-based loops
/// lose nothing by that; a loop that stopped would leave derived state stale for good.
pub struct Follow {
    cache: Arc<WatchCache>,
    group: String,
    plural: String,
    filter: Filter,
    handle: Option<WatchHandle>,
}

impl Follow {
    /// Starts following `group/plural` (current objects first).
    pub fn new(
        cache: &Arc<WatchCache>,
        group: &str,
        plural: &str,
        filter: Filter,
    ) -> Result<Self, ApiError> {
        let handle = cache.watch(
            group,
            plural,
            filter.clone(),
            Start::Current { end_marker: false },
            false,
        )?;
        Ok(Follow {
            cache: cache.clone(),
            group: group.to_string(),
            plural: plural.to_string(),
            filter,
            handle: Some(handle),
        })
    }

    fn handle(&mut self) -> Option<&mut WatchHandle> {
        if self.handle.is_none() {
            match self.cache.watch(
                &self.group,
                &self.plural,
                self.filter.clone(),
                Start::Current { end_marker: false },
                false,
            ) {
                Ok(h) => self.handle = Some(h),
                Err(e) => {
                    tracing::warn!(resource = %self.plural, error = %e, "re-watching failed");
                    return None;
                }
            }
        }
        self.handle.as_mut()
    }

    /// Notes an item; `Some` for an object event.
    fn take(&mut self, item: Option<WatchItem>) -> Option<(EventType, Arc<CachedObject>)> {
        match item {
            Some(WatchItem::Event(ty, obj)) => Some((ty, obj)),
            Some(WatchItem::Error(e)) => {
                tracing::warn!(resource = %self.plural, error = %e, "internal watch dropped; following again from the current state");
                self.handle = None;
                None
            }
            Some(_) => None,
            None => {
                self.handle = None;
                None
            }
        }
    }

    /// The next change, waiting for one.
    pub async fn recv(&mut self) -> (EventType, Arc<CachedObject>) {
        loop {
            let item = match self.handle() {
                Some(h) => h.rx.recv().await,
                None => {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                }
            };
            if let Some(ev) = self.take(item) {
                return ev;
            }
        }
    }

    /// A change already waiting, if any.
    pub fn try_recv(&mut self) -> Option<(EventType, Arc<CachedObject>)> {
        loop {
            let item = self.handle.as_mut()?.rx.try_recv().ok()?;
            if let Some(ev) = self.take(Some(item)) {
                return Some(ev);
            }
            self.handle.as_ref()?;
        }
    }
}
