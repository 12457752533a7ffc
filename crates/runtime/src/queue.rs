//! The work queue and the reconcile loop driver (client-go's `workqueue` and kube-runtime's
//! `Controller` applier).
//!
//! Keys, not objects, are queued: a key added several times before a worker takes it is
//! processed once; a key is never processed by two workers at once (one added while being
//! processed is queued again when the worker is done); delayed adds keep the earliest time.
//! Failures requeue with per-key exponential backoff, 5 ms doubling up to 1000 s
//! (client-go's `DefaultControllerRateLimiter` item limiter). Workers are a fixed number of
//! tasks per controller, and the only timer is the earliest delayed key's, so neither grows
//! with clusters or objects.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet, VecDeque};
use std::future::Future;
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::error::Error;

/// The first retry delay of a failing key.
pub const BACKOFF_BASE: Duration = Duration::from_millis(5);
/// The longest retry delay of a failing key.
pub const BACKOFF_MAX: Duration = Duration::from_secs(1000);

struct State<T> {
    ready: VecDeque<T>,
    dirty: HashSet<T>,
    processing: HashSet<T>,
    delayed: BinaryHeap<Reverse<(Instant, T)>>,
    /// The earliest time each delayed key is due.
    waiting: HashMap<T, Instant>,
    failures: HashMap<T, u32>,
    shut_down: bool,
}

/// A deduplicating, delaying, rate-limited work queue.
pub struct Queue<T> {
    state: Mutex<State<T>>,
    notify: Notify,
}

impl<T: Clone + Eq + Hash + Ord> Default for Queue<T> {
    fn default() -> Self {
        Queue {
            state: Mutex::new(State {
                ready: VecDeque::new(),
                dirty: HashSet::new(),
                processing: HashSet::new(),
                delayed: BinaryHeap::new(),
                waiting: HashMap::new(),
                failures: HashMap::new(),
                shut_down: false,
            }),
            notify: Notify::new(),
        }
    }
}

impl<T: Clone + Eq + Hash + Ord> Queue<T> {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    fn add_locked(st: &mut State<T>, item: T) -> bool {
        if st.shut_down || st.dirty.contains(&item) {
            return false;
        }
        st.dirty.insert(item.clone());
        if st.processing.contains(&item) {
            return false;
        }
        st.ready.push_back(item);
        true
    }

    /// Queues `item` now.
    pub fn add(&self, item: T) {
        if Self::add_locked(&mut self.state.lock(), item) {
            self.notify.notify_one();
        }
    }

    /// Queues `item` after `delay` (at once for a zero delay).
    pub fn add_after(&self, item: T, delay: Duration) {
        if delay.is_zero() {
            return self.add(item);
        }
        let at = Instant::now() + delay;
        let mut st = self.state.lock();
        if st.shut_down {
            return;
        }
        match st.waiting.get(&item) {
            Some(t) if *t <= at => return,
            _ => {}
        }
        st.waiting.insert(item.clone(), at);
        st.delayed.push(Reverse((at, item)));
        drop(st);
        // Wake a worker so it sleeps until the new earliest time.
        self.notify.notify_one();
    }

    /// The backoff of the `n`th consecutive failure (0-based).
    pub fn backoff(n: u32) -> Duration {
        BACKOFF_BASE
            .checked_mul(1u32.checked_shl(n.min(31)).unwrap_or(u32::MAX))
            .unwrap_or(BACKOFF_MAX)
            .min(BACKOFF_MAX)
    }

    /// Queues `item` after its backoff, which doubles with each call until [`Queue::forget`].
    pub fn add_rate_limited(&self, item: T) {
        let n = {
            let mut st = self.state.lock();
            let n = st.failures.entry(item.clone()).or_insert(0);
            let cur = *n;
            *n = n.saturating_add(1);
            cur
        };
        self.add_after(item, Self::backoff(n));
    }

    /// Resets `item`'s backoff.
    pub fn forget(&self, item: &T) {
        self.state.lock().failures.remove(item);
    }

    /// How many times `item` failed in a row.
    pub fn failures(&self, item: &T) -> u32 {
        self.state.lock().failures.get(item).copied().unwrap_or(0)
    }

    /// Marks `item` processed; it is queued again if it was added meanwhile.
    pub fn done(&self, item: &T) {
        let mut st = self.state.lock();
        st.processing.remove(item);
        if st.dirty.contains(item) {
            st.ready.push_back(item.clone());
            drop(st);
            self.notify.notify_one();
        }
    }

    /// Stops the queue: [`Queue::next`] returns `None` from now on.
    pub fn shut_down(&self) {
        self.state.lock().shut_down = true;
        self.notify.notify_waiters();
    }

    /// Keys queued or waiting (not those being processed).
    pub fn len(&self) -> usize {
        let st = self.state.lock();
        st.ready.len() + st.waiting.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The next key to process, waiting for one; `None` once shut down.
    pub async fn next(&self) -> Option<T> {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let deadline = {
                let mut st = self.state.lock();
                if st.shut_down {
                    return None;
                }
                let now = Instant::now();
                while let Some(Reverse((at, _))) = st.delayed.peek() {
                    if *at > now {
                        break;
                    }
                    let Some(Reverse((at, item))) = st.delayed.pop() else {
                        break;
                    };
                    if st.waiting.get(&item) == Some(&at) {
                        st.waiting.remove(&item);
                        Self::add_locked(&mut st, item);
                    }
                }
                if let Some(item) = st.ready.pop_front() {
                    st.dirty.remove(&item);
                    st.processing.insert(item.clone());
                    if !st.ready.is_empty() {
                        // Let another worker take the next one.
                        self.notify.notify_one();
                    }
                    return Some(item);
                }
                st.delayed.peek().map(|Reverse((at, _))| *at)
            };
            match deadline {
                Some(at) => {
                    tokio::select! {
                        () = &mut notified => {}
                        () = tokio::time::sleep_until(at) => {}
                    }
                }
                None => notified.await,
            }
        }
    }
}

/// What a reconcile asks for next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Nothing until the object (or something it watches) changes.
    AwaitChange,
    /// Reconcile again after this long (e.g. a deadline or minReadySeconds).
    RequeueAfter(Duration),
}

/// Runs `workers` tasks taking keys from `queue` and reconciling them until the queue is shut
/// down: success resets the key's backoff, failure requeues it with backoff.
pub async fn run_workers<T, F, Fut>(name: &'static str, queue: Arc<Queue<T>>, workers: usize, f: F)
where
    T: Clone + Eq + Hash + Ord + std::fmt::Debug + Send + Sync + 'static,
    F: Fn(T) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Result<Action, Error>> + Send + 'static,
{
    let mut tasks = Vec::new();
    for _ in 0..workers.max(1) {
        let queue = queue.clone();
        let f = f.clone();
        tasks.push(tokio::spawn(async move {
            while let Some(key) = queue.next().await {
                match f(key.clone()).await {
                    Ok(action) => {
                        queue.forget(&key);
                        if let Action::RequeueAfter(d) = action {
                            queue.add_after(key.clone(), d);
                        }
                    }
                    // The object (or its namespace) was deleted meanwhile: its deletion
                    // reaches the informer and requeues whatever still cares, as upstream's
                    // controllers treat NotFound as done.
                    Err(e) if e.is_not_found() => {
                        tracing::debug!(controller = name, ?key, error = %e, "gone; done");
                        queue.forget(&key);
                    }
                    Err(e) => {
                        let level = queue.failures(&key);
                        if e.is_conflict() {
                            tracing::debug!(controller = name, ?key, error = %e, "conflict; requeued");
                        } else {
                            tracing::warn!(controller = name, ?key, failures = level, error = %e, "reconcile failed; requeued");
                        }
                        queue.add_rate_limited(key.clone());
                    }
                }
                queue.done(&key);
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api_error(code: u16) -> Error {
        Error::Kube(kube::Error::Api(Box::new(kube::core::Status {
            code,
            ..Default::default()
        })))
    }

    #[tokio::test(start_paused = true)]
    async fn a_reconcile_answered_not_found_is_done_and_a_failure_is_retried() {
        let q = Queue::<u32>::new();
        let calls = Arc::new(parking_lot::Mutex::new(Vec::new()));
        q.add(1);
        q.add(2);
        let (c, qq) = (calls.clone(), q.clone());
        let workers = tokio::spawn(run_workers("test", q.clone(), 1, move |k: u32| {
            let (c, qq) = (c.clone(), qq.clone());
            async move {
                c.lock().push(k);
                if c.lock().len() >= 3 {
                    qq.shut_down();
                }
                Err(api_error(if k == 1 { 404 } else { 500 }))
            }
        }));
        workers.await.unwrap();
        let calls = calls.lock().clone();
        assert_eq!(calls, vec![1, 2, 2], "404 is not retried, 500 is");
        assert_eq!(q.failures(&1), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_key_added_twice_is_processed_once() {
        let q = Queue::<u32>::new();
        q.add(1);
        q.add(1);
        q.add(2);
        assert_eq!(q.next().await, Some(1));
        assert_eq!(q.next().await, Some(2));
        assert_eq!(q.len(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_key_added_while_processing_comes_back_after_done() {
        let q = Queue::<u32>::new();
        q.add(1);
        let k = q.next().await.unwrap();
        q.add(1);
        assert_eq!(q.len(), 0, "not ready while being processed");
        q.done(&k);
        assert_eq!(q.next().await, Some(1));
    }

    #[tokio::test(start_paused = true)]
    async fn delayed_keys_come_out_at_their_time_and_the_earliest_add_wins() {
        let q = Queue::<u32>::new();
        let start = Instant::now();
        q.add_after(7, Duration::from_secs(10));
        q.add_after(7, Duration::from_secs(3));
        q.add_after(8, Duration::from_secs(5));
        assert_eq!(q.next().await, Some(7));
        assert_eq!(start.elapsed().as_secs(), 3);
        assert_eq!(q.next().await, Some(8));
        assert_eq!(start.elapsed().as_secs(), 5);
    }

    #[test]
    fn backoff_doubles_from_five_milliseconds_and_stops_at_the_maximum() {
        assert_eq!(Queue::<u32>::backoff(0), Duration::from_millis(5));
        assert_eq!(Queue::<u32>::backoff(3), Duration::from_millis(40));
        assert_eq!(Queue::<u32>::backoff(40), BACKOFF_MAX);
    }

    #[tokio::test(start_paused = true)]
    async fn failures_back_off_until_forgotten() {
        let q = Queue::<u32>::new();
        q.add_rate_limited(1);
        q.add_rate_limited(1);
        assert_eq!(q.failures(&1), 2);
        q.forget(&1);
        assert_eq!(q.failures(&1), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn shut_down_releases_waiting_workers() {
        let q = Queue::<u32>::new();
        let q2 = q.clone();
        let h = tokio::spawn(async move { q2.next().await });
        tokio::task::yield_now().await;
        q.shut_down();
        assert_eq!(h.await.unwrap(), None);
    }
}
