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

/// A [`Follow`] of one resource over the cache of every shard ([`crate::shards`]): the
/// server's own loops that derive state from every cluster's objects (CRD serving, webhook
/// configurations, role aggregation) see the clusters of every datastore. A shard that
/// connects later is followed from its current state (its objects arrive as ADDED).
pub struct FollowAll {
    shards: Arc<crate::shards::Shards>,
    changes: tokio::sync::watch::Receiver<u64>,
    group: String,
    plural: String,
    filter: Filter,
    follows: Vec<Followed>,
}

struct Followed {
    shard: Arc<crate::shards::Shard>,
    follow: Follow,
    /// The shard's cache revision when following began: objects up to it were there before.
    started: i64,
}

/// A change [`FollowAll`] saw, with where.
pub struct ShardEvent {
    pub shard: Arc<crate::shards::Shard>,
    /// The shard's cache revision when following it began.
    pub started: i64,
    pub kind: EventType,
    pub obj: Arc<CachedObject>,
}

impl FollowAll {
    /// Starts following `group/plural` in every connected shard (current objects first).
    pub fn new(
        shards: &Arc<crate::shards::Shards>,
        group: &str,
        plural: &str,
        filter: Filter,
    ) -> Result<Self, ApiError> {
        let mut changes = shards.changes();
        changes.mark_unchanged();
        let mut f = FollowAll {
            shards: shards.clone(),
            changes,
            group: group.to_string(),
            plural: plural.to_string(),
            filter,
            follows: Vec::new(),
        };
        f.resync()?;
        Ok(f)
    }

    /// Follows shards that connected, lets go of those that went.
    fn resync(&mut self) -> Result<(), ApiError> {
        let shards = self.shards.all();
        self.follows
            .retain(|f| shards.iter().any(|s| Arc::ptr_eq(s, &f.shard)));
        for s in shards {
            if !self.follows.iter().any(|f| Arc::ptr_eq(&f.shard, &s)) {
                let started = s.cache.revision();
                let follow = Follow::new(&s.cache, &self.group, &self.plural, self.filter.clone())?;
                self.follows.push(Followed {
                    shard: s,
                    follow,
                    started,
                });
            }
        }
        Ok(())
    }

    fn resync_if_changed(&mut self) {
        if self.changes.has_changed().unwrap_or(false) {
            self.changes.mark_unchanged();
            if let Err(e) = self.resync() {
                tracing::warn!(resource = %self.plural, error = %e, "following a new shard failed");
            }
        }
    }

    /// The next change in any shard, waiting for one.
    pub async fn recv(&mut self) -> (EventType, Arc<CachedObject>) {
        let ev = self.recv_in().await;
        (ev.kind, ev.obj)
    }

    /// The next change in any shard with its shard, waiting for one.
    pub async fn recv_in(&mut self) -> ShardEvent {
        loop {
            if let Some(ev) = self.try_recv_in() {
                return ev;
            }
            let next =
                futures::future::select_all(self.follows.iter_mut().enumerate().map(|(i, f)| {
                    Box::pin(async move {
                        let ev = f.follow.recv().await;
                        (i, ev)
                    })
                }));
            let changes = &mut self.changes;
            let got = tokio::select! {
                ((i, ev), _, _) = next => Some((i, ev)),
                changed = changes.changed() => {
                    if changed.is_err() {
                        // Only the shared store remains, and it never goes: the server is
                        // going away.
                        std::future::pending::<()>().await;
                    }
                    None
                }
            };
            match got {
                Some((i, (kind, obj))) => {
                    let f = &self.follows[i];
                    return ShardEvent {
                        shard: f.shard.clone(),
                        started: f.started,
                        kind,
                        obj,
                    };
                }
                None => {
                    self.changes.mark_unchanged();
                    if let Err(e) = self.resync() {
                        tracing::warn!(resource = %self.plural, error = %e, "following a new shard failed");
                    }
                }
            }
        }
    }

    /// A change already waiting in any shard, if any.
    pub fn try_recv(&mut self) -> Option<(EventType, Arc<CachedObject>)> {
        self.try_recv_in().map(|ev| (ev.kind, ev.obj))
    }

    /// A change already waiting in any shard with its shard, if any.
    pub fn try_recv_in(&mut self) -> Option<ShardEvent> {
        self.resync_if_changed();
        self.follows.iter_mut().find_map(|f| {
            let (kind, obj) = f.follow.try_recv()?;
            Some(ShardEvent {
                shard: f.shard.clone(),
                started: f.started,
                kind,
                obj,
            })
        })
    }
}
