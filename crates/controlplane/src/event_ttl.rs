//! Events expire: kube-apiserver's `--event-ttl` (one hour by default). Upstream attaches an
//! etcd lease to each Event when it is written, so an Event lives a TTL after its last write
//! and no Event is kept for good. Here the store has no leases: every replica keeps each
//! Event's expiry (its last write as the watch cache saw it, plus the TTL), and the leading
//! replica deletes an expired Event from storage with its revision as the precondition, so an
//! Event written again meanwhile lives on (its new write set a new expiry). Events already
//! stored when a replica starts expire a TTL after their newest timestamp (`lastTimestamp`,
//! `series.lastObservedTime`, `eventTime`, `creationTimestamp`), at most a TTL from then.
//!
//! Both Event APIs are kept apart here (`core/v1` and `events.k8s.io/v1`), so each has its
//! loop. The expiries held are one entry per live Event.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use apimachinery::status::ApiError;
use registry::cache::{CachedObject, EventType, Filter, FollowAll};
use tokio::time::Instant;

use crate::ControlPlane;

/// Expired Events deleted in one pass (a burst of expiries is spread over passes).
const BATCH: usize = 500;
/// How long an Event whose deletion failed waits before the next attempt.
const RETRY: Duration = Duration::from_secs(10);

/// Each Event's expiry, by storage key (with its revision and the datastore it is in), and
/// the keys in expiry order.
#[derive(Default)]
struct Expiries {
    by_key: HashMap<String, (Instant, i64, Arc<str>)>,
    due: BTreeSet<(Instant, String)>,
}

impl Expiries {
    fn set(&mut self, key: String, at: Instant, rev: i64, shard: Arc<str>) {
        if let Some((old, _, _)) = self.by_key.insert(key.clone(), (at, rev, shard)) {
            self.due.remove(&(old, key.clone()));
        }
        self.due.insert((at, key));
    }

    fn remove(&mut self, key: &str) {
        if let Some((old, _, _)) = self.by_key.remove(key) {
            self.due.remove(&(old, key.to_string()));
        }
    }

    fn next(&self) -> Option<Instant> {
        self.due.first().map(|(at, _)| *at)
    }

    /// Up to [`BATCH`] expired Events (key, revision, datastore), no longer held.
    fn take_expired(&mut self, now: Instant) -> Vec<(String, i64, Arc<str>)> {
        let mut out = Vec::new();
        while out.len() < BATCH {
            let Some((at, _)) = self.due.first() else {
                break;
            };
            if *at > now {
                break;
            }
            let Some((_, key)) = self.due.pop_first() else {
                break;
            };
            if let Some((_, rev, shard)) = self.by_key.remove(&key) {
                out.push((key, rev, shard));
            }
        }
        out
    }

    /// Notes a change seen by the watch: `known` is the revision the loop started following
    /// the Event's datastore at (Events up to it were stored before, and expire by their
    /// timestamps).
    fn note(&mut self, group: &str, ev: &registry::cache::ShardEvent, ttl: Duration) {
        let (ty, obj, known) = (ev.kind, &*ev.obj, ev.started);
        let key = registry::key::object(&obj.cluster, group, "events", obj.namespace(), obj.name());
        if ty == EventType::Deleted {
            // Only where the Event lives: a moved cluster's old copies are deleted in the
            // store it left after they were written in the new one.
            if self
                .by_key
                .get(&key)
                .is_some_and(|(_, _, shard)| *shard == ev.shard.name)
            {
                self.remove(&key);
            }
            return;
        }
        // The same write seen again (the watch restarted from the current state).
        if self
            .by_key
            .get(&key)
            .is_some_and(|(_, rev, _)| *rev >= obj.rev)
        {
            return;
        }
        let now = Instant::now();
        let at = if obj.rev <= known {
            stored_expiry(obj, ttl, now)
        } else {
            now + ttl
        };
        self.set(key, at, obj.rev, ev.shard.name.clone());
    }
}

/// When an Event stored before the loop started expires: a TTL after its newest timestamp,
/// never later than a TTL from `now`.
fn stored_expiry(obj: &CachedObject, ttl: Duration, now: Instant) -> Instant {
    let v = obj.value();
    let newest = [
        "/lastTimestamp",
        "/series/lastObservedTime",
        "/eventTime",
        "/metadata/creationTimestamp",
    ]
    .iter()
    .filter_map(|p| v.pointer(p)?.as_str())
    .filter_map(apimachinery::time::parse_rfc3339)
    .max();
    let Some(newest) = newest else {
        return now + ttl;
    };
    let age = Duration::try_from(jiff::Timestamp::now().duration_since(newest)).unwrap_or_default();
    now + ttl.saturating_sub(age)
}

/// Starts the expiry loops of both Event APIs.
pub fn start(cp: &Arc<ControlPlane>) -> Result<(), ApiError> {
    for group in ["", "events.k8s.io"] {
        let follow = cp
            .store
            .follow_every_shard(group, "events", Filter::default())?;
        tokio::spawn(expire_loop(
            Arc::downgrade(cp),
            group,
            follow,
            cp.config.event_ttl,
        ));
    }
    Ok(())
}

async fn expire_loop(
    weak: std::sync::Weak<ControlPlane>,
    group: &'static str,
    mut follow: FollowAll,
    ttl: Duration,
) {
    let mut expiries = Expiries::default();
    loop {
        let next = expiries.next();
        tokio::select! {
            ev = follow.recv_in() => {
                expiries.note(group, &ev, ttl);
                while let Some(ev) = follow.try_recv_in() {
                    expiries.note(group, &ev, ttl);
                }
            }
            () = tokio::time::sleep_until(next.unwrap_or_else(Instant::now)), if next.is_some() => {
                let Some(cp) = weak.upgrade() else { return };
                if !cp.leads() {
                    // The leader deletes; this replica keeps the expiries for when it leads.
                    drop(cp);
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
                for (key, rev, shard) in expiries.take_expired(Instant::now()) {
                    let deleted = match cp.store.shards.named(&shard) {
                        Ok(s) => s.storage.delete(key.as_bytes(), Some(rev)).await,
                        Err(e) => Err(storage::Error::Unavailable(e.message)),
                    };
                    match deleted {
                        // Written since (its new write set a new expiry) or gone already.
                        Ok(_) | Err(storage::Error::NotFound) | Err(storage::Error::Conflict { .. }) => {}
                        Err(e) => {
                            tracing::warn!(event = %key, error = %e, "deleting an expired Event");
                            expiries.set(key, Instant::now() + RETRY, rev, shard);
                        }
                    }
                }
            }
        }
        if weak.strong_count() == 0 {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_written_again_gets_a_new_expiry_and_expired_ones_come_out_in_order() {
        let mut e = Expiries::default();
        let t0 = Instant::now();
        e.set("a".into(), t0 + Duration::from_secs(5), 1, "".into());
        e.set("b".into(), t0 + Duration::from_secs(2), 2, "".into());
        e.set("a".into(), t0 + Duration::from_secs(9), 3, "".into());
        assert_eq!(e.next(), Some(t0 + Duration::from_secs(2)));
        assert_eq!(
            e.take_expired(t0 + Duration::from_secs(6)),
            vec![("b".to_string(), 2, Arc::from(""))]
        );
        assert_eq!(
            e.take_expired(t0 + Duration::from_secs(10)),
            vec![("a".to_string(), 3, Arc::from(""))]
        );
        assert!(e.take_expired(t0 + Duration::from_secs(60)).is_empty());
        e.set("c".into(), t0, 4, "".into());
        e.remove("c");
        assert_eq!(e.next(), None);
        assert!(e.by_key.is_empty() && e.due.is_empty());
    }
}
