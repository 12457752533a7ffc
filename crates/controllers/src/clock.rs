//! Injectable wall-clock time for the controllers whose decisions depend on it (CronJob
//! schedules, Job deadlines and back-off, TTL after a Job finished).
//!
//! Upstream injects a `clock.Clock` into these controllers for the same reason: tests must not
//! sleep for minutes waiting for a schedule. [`SystemClock`] is the real time; [`FakeClock`]
//! only moves when a test moves it, and tells the controllers when it does
//! ([`Clock::on_jump`]), because work they queued for "in 59 seconds" is timed by tokio's real
//! clock and would otherwise wait. Controllers re-examine their time-dependent objects on a
//! jump; the system clock never jumps, so in production that costs nothing.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use parking_lot::Mutex;

/// Called when a clock jumps.
pub type JumpHandler = Arc<dyn Fn() + Send + Sync>;

/// Where the controllers get the current time.
pub trait Clock: Send + Sync + 'static {
    /// The current time.
    fn now(&self) -> Timestamp;
    /// Registers `f`, called (on the caller's task: it must only enqueue) whenever the time
    /// jumps instead of flowing. The system clock never calls it.
    fn on_jump(&self, f: JumpHandler);
}

/// A clock shared by every controller of one run.
pub type SharedClock = Arc<dyn Clock>;

/// The real time.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp::now()
    }

    fn on_jump(&self, _f: JumpHandler) {}
}

/// The system clock as a [`SharedClock`].
pub fn system() -> SharedClock {
    Arc::new(SystemClock)
}

/// A clock that stands still until a test moves it.
pub struct FakeClock {
    now: Mutex<Timestamp>,
    handlers: Mutex<Vec<JumpHandler>>,
}

impl FakeClock {
    pub fn new(start: Timestamp) -> Arc<Self> {
        Arc::new(FakeClock {
            now: Mutex::new(start),
            handlers: Mutex::new(Vec::new()),
        })
    }

    /// Moves the clock forward by `by` and tells the controllers.
    pub fn advance(&self, by: Duration) {
        let by = SignedDuration::try_from(by).unwrap_or(SignedDuration::MAX);
        let next = {
            let mut now = self.now.lock();
            *now = now.saturating_add(by).unwrap_or(*now);
            *now
        };
        self.set(next);
    }

    /// Sets the clock to `t` and tells the controllers.
    pub fn set(&self, t: Timestamp) {
        *self.now.lock() = t;
        let handlers: Vec<JumpHandler> = self.handlers.lock().clone();
        for h in handlers {
            h();
        }
    }
}

impl Clock for FakeClock {
    fn now(&self) -> Timestamp {
        *self.now.lock()
    }

    fn on_jump(&self, f: JumpHandler) {
        self.handlers.lock().push(f);
    }
}

/// The time from `now` until `at` (zero when it has passed).
pub fn until(now: Timestamp, at: Timestamp) -> Duration {
    let d = at.duration_since(now);
    Duration::try_from(d).unwrap_or(Duration::ZERO)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn a_fake_clock_moves_only_when_told_and_reports_each_jump() {
        let start = Timestamp::from_second(1_700_000_000).unwrap();
        let clock = FakeClock::new(start);
        let jumps = Arc::new(AtomicUsize::new(0));
        let j = jumps.clone();
        clock.on_jump(Arc::new(move || {
            j.fetch_add(1, Ordering::SeqCst);
        }));
        assert_eq!(clock.now(), start);
        clock.advance(Duration::from_secs(90));
        assert_eq!(clock.now().as_second(), 1_700_000_090);
        assert_eq!(jumps.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn until_is_zero_for_the_past() {
        let a = Timestamp::from_second(100).unwrap();
        let b = Timestamp::from_second(160).unwrap();
        assert_eq!(until(a, b), Duration::from_secs(60));
        assert_eq!(until(b, a), Duration::ZERO);
    }
}
