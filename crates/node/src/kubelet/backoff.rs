//! Restart and image-pull back-off, as upstream's `flowcontrol.Backoff` keeps it: per key a
//! delay that starts at the initial period (10 s) and doubles on each new failure up to the
//! maximum (5 min), and is forgotten once an event comes more than twice the maximum (10 min)
//! after the last update — a container that ran stably for 10 minutes starts again from 10 s.
//!
//! The first failure is not delayed (the entry is only created by it); from the second on,
//! the container waits for the current delay counted from its last exit.

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use parking_lot::Mutex;

/// Upstream kubelet's `backOffPeriod`.
pub const INITIAL: Duration = Duration::from_secs(10);
/// Upstream kubelet's `MaxContainerBackOff`.
pub const MAX: Duration = Duration::from_secs(300);

#[derive(Debug, Clone, Copy)]
struct Entry {
    delay: Duration,
    last_update: SystemTime,
}

/// Back-off state per key. Shared by the pod workers.
#[derive(Debug)]
pub struct Backoff {
    initial: Duration,
    max: Duration,
    entries: Mutex<HashMap<String, Entry>>,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff::new(INITIAL, MAX)
    }
}

impl Backoff {
    pub fn new(initial: Duration, max: Duration) -> Self {
        Backoff {
            initial,
            max: max.max(initial),
            entries: Mutex::new(HashMap::new()),
        }
    }

    fn expired(&self, event: SystemTime, last_update: SystemTime) -> bool {
        event
            .duration_since(last_update)
            .is_ok_and(|d| d > self.max * 2)
    }

    /// When `key`, which last failed at `since`, may be retried: `None` if now, else the
    /// time and the current delay.
    pub fn blocked_until(
        &self,
        key: &str,
        since: SystemTime,
        now: SystemTime,
    ) -> Option<(SystemTime, Duration)> {
        let entries = self.entries.lock();
        let e = entries.get(key)?;
        if self.expired(since, e.last_update) {
            return None;
        }
        let until = since + e.delay;
        (now < until).then_some((until, e.delay))
    }

    /// Records a retry of `key` (which failed at `since`): the next delay doubles, or starts
    /// again from the initial period after a stable stretch.
    pub fn next(&self, key: &str, since: SystemTime, now: SystemTime) {
        let mut entries = self.entries.lock();
        let delay = match entries.get(key) {
            Some(e) if !self.expired(since, e.last_update) => (e.delay * 2).min(self.max),
            _ => self.initial,
        };
        entries.insert(
            key.to_string(),
            Entry {
                delay,
                last_update: now,
            },
        );
    }

    /// The current delay of `key`.
    pub fn delay(&self, key: &str) -> Option<Duration> {
        self.entries.lock().get(key).map(|e| e.delay)
    }

    /// Forgets the keys starting with `prefix` (a pod that is gone).
    pub fn forget_prefix(&self, prefix: &str) {
        self.entries.lock().retain(|k, _| !k.starts_with(prefix));
    }

    /// Drops entries not updated for twice the maximum.
    pub fn gc(&self, now: SystemTime) {
        let max2 = self.max * 2;
        self.entries.lock().retain(|_, e| {
            now.duration_since(e.last_update)
                .map_or(true, |d| d <= max2)
        });
    }
}

pub use apimachinery::time::go_duration;

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000 + s)
    }

    #[test]
    fn the_first_failure_restarts_at_once_then_the_delay_doubles_to_five_minutes() {
        let b = Backoff::default();
        let k = "p_ns_uid_c";
        // First exit at 0: not blocked; the retry creates the entry (10 s).
        assert!(b.blocked_until(k, t(0), t(0)).is_none());
        b.next(k, t(0), t(0));
        // Second exit at 1: blocked until 11.
        assert_eq!(b.blocked_until(k, t(1), t(5)), Some((t(11), INITIAL)));
        assert!(b.blocked_until(k, t(1), t(11)).is_none());
        b.next(k, t(1), t(11));
        assert_eq!(b.delay(k), Some(Duration::from_secs(20)));
        let mut now = 11;
        for _ in 0..10 {
            now += 1;
            b.next(k, t(now), t(now));
        }
        assert_eq!(b.delay(k), Some(MAX));
    }

    #[test]
    fn ten_stable_minutes_reset_the_delay() {
        let b = Backoff::default();
        let k = "k";
        b.next(k, t(0), t(0));
        b.next(k, t(1), t(1));
        assert_eq!(b.delay(k), Some(Duration::from_secs(20)));
        // Exited 601 s after the last restart: no longer in back-off, and starts over.
        assert!(b.blocked_until(k, t(602), t(602)).is_none());
        b.next(k, t(602), t(602));
        assert_eq!(b.delay(k), Some(INITIAL));
    }

    #[test]
    fn delays_print_as_go_durations() {
        assert_eq!(go_duration(Duration::from_secs(10)), "10s");
        assert_eq!(go_duration(Duration::from_secs(80)), "1m20s");
        assert_eq!(go_duration(Duration::from_secs(300)), "5m0s");
        assert_eq!(go_duration(Duration::from_millis(1500)), "1.5s");
    }
}
