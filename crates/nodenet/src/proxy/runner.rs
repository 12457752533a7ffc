//! When the proxier syncs: upstream's `BoundedFrequencyRunner`, as a pure schedule.
//!
//! A change asks for a sync; syncs are rate-limited by a token bucket of `burst` tokens
//! refilled one per `min_interval` (upstream: burst 2, `minSyncPeriod`), so a lone change is
//! synced at once while a stream of changes is batched into one sync per interval. A failed
//! sync is retried after `retry_interval`; a full resync is due every `full_interval`.

use std::time::{Duration, Instant};

/// The sync schedule.
#[derive(Debug, Clone)]
pub struct Runner {
    min_interval: Duration,
    burst: f64,
    tokens: f64,
    refilled: Instant,
    pending: bool,
    retry_at: Option<Instant>,
}

impl Runner {
    pub fn new(min_interval: Duration, burst: u32, now: Instant) -> Self {
        let burst = f64::from(burst.max(1));
        Runner {
            min_interval,
            burst,
            tokens: burst,
            refilled: now,
            pending: false,
            retry_at: None,
        }
    }

    fn refill(&mut self, now: Instant) {
        if self.min_interval.is_zero() {
            self.tokens = self.burst;
        } else {
            let gained =
                now.duration_since(self.refilled).as_secs_f64() / self.min_interval.as_secs_f64();
            self.tokens = (self.tokens + gained).min(self.burst);
        }
        self.refilled = now;
    }

    /// A change wants a sync.
    pub fn request(&mut self) {
        self.pending = true;
    }

    pub fn pending(&self) -> bool {
        self.pending
    }

    /// The last sync failed: try again after `after` even without a change.
    pub fn retry(&mut self, now: Instant, after: Duration) {
        self.retry_at = Some(now + after);
    }

    /// When the requested sync may run (`None`: nothing requested).
    pub fn deadline(&mut self, now: Instant) -> Option<Instant> {
        if !self.pending && self.retry_at.is_none() {
            return None;
        }
        self.refill(now);
        let rate_ok = if self.tokens >= 1.0 {
            now
        } else {
            now + self.min_interval.mul_f64(1.0 - self.tokens)
        };
        match self.retry_at {
            _ if self.pending => Some(rate_ok),
            Some(r) => Some(r.max(rate_ok)),
            None => None,
        }
    }

    /// A sync starts now: it takes a token and everything requested so far.
    pub fn start(&mut self, now: Instant) {
        self.refill(now);
        self.tokens = (self.tokens - 1.0).max(0.0);
        self.pending = false;
        self.retry_at = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_syncs_at_once_and_then_one_sync_per_interval() {
        let t0 = Instant::now();
        let mut r = Runner::new(Duration::from_secs(1), 2, t0);
        assert_eq!(r.deadline(t0), None);
        r.request();
        assert_eq!(r.deadline(t0), Some(t0));
        r.start(t0);
        r.request();
        assert_eq!(r.deadline(t0), Some(t0), "the second token");
        r.start(t0);
        r.request();
        let d = r.deadline(t0).expect("pending");
        assert!(d >= t0 + Duration::from_millis(999), "{:?}", d - t0);
        let later = t0 + Duration::from_secs(1);
        assert_eq!(r.deadline(later), Some(later));
    }

    #[test]
    fn zero_interval_never_waits_and_a_retry_waits_its_time() {
        let t0 = Instant::now();
        let mut r = Runner::new(Duration::ZERO, 2, t0);
        for _ in 0..5 {
            r.request();
            assert_eq!(r.deadline(t0), Some(t0));
            r.start(t0);
        }
        r.retry(t0, Duration::from_secs(2));
        assert_eq!(r.deadline(t0), Some(t0 + Duration::from_secs(2)));
        r.request();
        assert_eq!(
            r.deadline(t0),
            Some(t0),
            "a change does not wait for the retry"
        );
    }
}
