//! A small bounded cache with a time to live per entry, for the webhook decisions the kubelet
//! caches (TokenReview answers for 2 minutes, SubjectAccessReview answers for 5 minutes when
//! allowed and 30 seconds when not). Full, it first forgets what has expired, then the entry
//! closest to expiring.

use std::collections::HashMap;
use std::hash::Hash;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// A map whose entries expire.
pub struct TtlCache<K, V> {
    entries: Mutex<HashMap<K, (V, Instant)>>,
    capacity: usize,
}

impl<K: Eq + Hash + Clone, V: Clone> TtlCache<K, V> {
    pub fn new(capacity: usize) -> Self {
        TtlCache {
            entries: Mutex::new(HashMap::new()),
            capacity: capacity.max(1),
        }
    }

    /// The value of `key`, if present and not expired at `now`.
    pub fn get(&self, key: &K, now: Instant) -> Option<V> {
        let mut entries = self.entries.lock();
        match entries.get(key) {
            Some((v, expires)) if *expires > now => Some(v.clone()),
            Some(_) => {
                entries.remove(key);
                None
            }
            None => None,
        }
    }

    /// Stores `value` under `key` until `now + ttl`.
    pub fn insert(&self, key: K, value: V, ttl: Duration, now: Instant) {
        let mut entries = self.entries.lock();
        if entries.len() >= self.capacity && !entries.contains_key(&key) {
            entries.retain(|_, (_, expires)| *expires > now);
            if entries.len() >= self.capacity
                && let Some(soonest) = entries
                    .iter()
                    .min_by_key(|(_, (_, expires))| *expires)
                    .map(|(k, _)| k.clone())
            {
                entries.remove(&soonest);
            }
        }
        entries.insert(key, (value, now + ttl));
    }

    pub fn len(&self) -> usize {
        self.entries.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_expire_after_their_ttl() {
        let c = TtlCache::new(4);
        let t0 = Instant::now();
        c.insert("a", 1, Duration::from_secs(30), t0);
        assert_eq!(c.get(&"a", t0 + Duration::from_secs(29)), Some(1));
        assert_eq!(c.get(&"a", t0 + Duration::from_secs(30)), None);
        assert!(c.is_empty());
    }

    #[test]
    fn a_full_cache_drops_expired_entries_then_the_soonest_to_expire() {
        let c = TtlCache::new(2);
        let t0 = Instant::now();
        c.insert("short", 1, Duration::from_secs(1), t0);
        c.insert("long", 2, Duration::from_secs(100), t0);
        // "short" has expired: it makes room.
        c.insert("x", 3, Duration::from_secs(50), t0 + Duration::from_secs(2));
        assert_eq!(c.len(), 2);
        assert_eq!(c.get(&"long", t0 + Duration::from_secs(2)), Some(2));
        // Nothing expired: the one closest to expiring ("x") goes.
        c.insert(
            "y",
            4,
            Duration::from_secs(200),
            t0 + Duration::from_secs(3),
        );
        assert_eq!(c.get(&"x", t0 + Duration::from_secs(3)), None);
        assert_eq!(c.get(&"long", t0 + Duration::from_secs(3)), Some(2));
        assert_eq!(c.get(&"y", t0 + Duration::from_secs(3)), Some(4));
    }
}
