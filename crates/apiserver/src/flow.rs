//! Fair sharing of the server's request seats among logical clusters and their users, in the
//! spirit of API Priority and Fairness.
//!
//! Every tenant's requests reach the same process, so the server's capacity is shared. A
//! request that is not long-running (watches, streams and proxies are not counted) takes one
//! of a fixed number of *seats* for as long as it is handled. When none is free it waits in
//! the queue of its *flow* — its logical cluster, then its user — and a freed seat goes to the
//! cluster with the fewest requests executing, and within it to the user with the fewest (ties
//! in turn): a cluster that floods the server queues behind its own share, and a quiet
//! cluster's request takes the next seat.
//!
//! Seats are many more than cores, so that requests waiting on storage keep the cores busy;
//! but a request's latency grows with the number executing beside it. So while more than one
//! cluster is active (has asked within the last second), each may execute at most its share of
//! [`Limits::shared_seats`] (one per core by default, at least one each): a flood then runs
//! beside another cluster's request as one flow among equals, not as all the seats. Alone, a
//! cluster may use every seat. A flow's queue is bounded, and so is the time a request waits; beyond
//! either it is answered `429 Too Many Requests` with `Retry-After`, as upstream's
//! `Too many requests, please try again later.`
//!
//! What the server itself does (in-process controllers) and health checks are exempt.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use apimachinery::status::ApiError;
use parking_lot::Mutex;
use tokio::sync::oneshot;

/// The limits of flow control.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Requests handled at once (upstream `--max-requests-inflight` plus
    /// `--max-mutating-requests-inflight`, sized here for the machine).
    pub seats: usize,
    /// Requests one user of one cluster may have waiting (upstream's queue length limit).
    pub queue_length: usize,
    /// How long a request may wait for a seat.
    pub max_wait: Duration,
    /// The seats shared equally among the active clusters when there is more than one.
    pub shared_seats: usize,
}

impl Default for Limits {
    fn default() -> Self {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        Limits {
            seats: (cores * 4).max(4),
            queue_length: 50,
            max_wait: Duration::from_secs(15),
            shared_seats: cores,
        }
    }
}

#[derive(Default)]
struct UserFlow {
    executing: usize,
    waiting: VecDeque<oneshot::Sender<()>>,
}

#[derive(Default)]
struct ClusterFlow {
    executing: usize,
    users: HashMap<String, UserFlow>,
    /// Users with requests waiting, in arrival order.
    ready: VecDeque<String>,
}

#[derive(Default)]
struct State {
    free: usize,
    clusters: HashMap<String, ClusterFlow>,
    /// Clusters with requests waiting, in arrival order.
    ready: VecDeque<String>,
    /// When each cluster last asked for a seat, for the clusters active within [`ACTIVE`].
    recent: HashMap<String, Instant>,
    /// When `recent` was last pruned.
    pruned: Option<Instant>,
}

/// How long a cluster counts as active after its last request.
const ACTIVE: Duration = Duration::from_secs(1);

impl State {
    fn touch(&mut self, cluster: &str, now: Instant) {
        match self.recent.get_mut(cluster) {
            Some(t) => *t = now,
            None => {
                self.recent.insert(cluster.to_string(), now);
            }
        }
        if self
            .pruned
            .is_none_or(|p| now.duration_since(p) > ACTIVE / 10)
        {
            self.recent.retain(|_, t| now.duration_since(*t) <= ACTIVE);
            self.pruned = Some(now);
        }
    }

    /// How many requests one cluster may execute now.
    fn cap(&self, limits: &Limits) -> usize {
        match self.recent.len() {
            0 | 1 => limits.seats,
            active => (limits.shared_seats / active).max(1),
        }
    }
}

/// The seats and queues.
pub struct FlowControl {
    limits: Limits,
    state: Mutex<State>,
}

impl std::fmt::Debug for FlowControl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlowControl")
            .field("limits", &self.limits)
            .finish()
    }
}

/// A seat held while a request is handled; released (and given to the next flow) on drop.
#[must_use]
pub struct Seat {
    fc: Arc<FlowControl>,
    cluster: String,
    user: String,
}

impl Drop for Seat {
    fn drop(&mut self) {
        self.fc.release(&self.cluster, &self.user);
    }
}

/// How many of the scanned flows a freed seat compares (the fewest executing wins): bounds
/// the work of a release when a hostile tenant makes many flows wait.
const SCAN: usize = 64;

impl FlowControl {
    pub fn new(limits: Limits) -> Arc<FlowControl> {
        Arc::new(FlowControl {
            limits,
            state: Mutex::new(State {
                free: limits.seats,
                ..Default::default()
            }),
        })
    }

    fn too_many(&self) -> ApiError {
        ApiError::too_many_requests("Too many requests, please try again later.", 1)
    }

    /// Takes a seat for a request of `user` in `cluster`, waiting in the flow's queue when
    /// none is free.
    pub async fn acquire(self: &Arc<Self>, cluster: &str, user: &str) -> Result<Seat, ApiError> {
        let rx = {
            let mut st = self.state.lock();
            st.touch(cluster, Instant::now());
            let cap = st.cap(&self.limits);
            let executing = st.clusters.get(cluster).map_or(0, |c| c.executing);
            if st.free > 0 && st.ready.is_empty() && executing < cap {
                st.free -= 1;
                let c = st.clusters.entry(cluster.to_string()).or_default();
                c.executing += 1;
                c.users.entry(user.to_string()).or_default().executing += 1;
                return Ok(self.seat(cluster, user));
            }
            let st = &mut *st;
            let c = st.clusters.entry(cluster.to_string()).or_default();
            let u = c.users.entry(user.to_string()).or_default();
            u.waiting.retain(|tx| !tx.is_closed());
            if u.waiting.len() >= self.limits.queue_length {
                return Err(self.too_many());
            }
            let (tx, rx) = oneshot::channel();
            let first_of_user = u.waiting.is_empty();
            u.waiting.push_back(tx);
            if first_of_user && !c.ready.iter().any(|n| n == user) {
                c.ready.push_back(user.to_string());
            }
            if !st.ready.iter().any(|n| n == cluster) {
                st.ready.push_back(cluster.to_string());
            }
            rx
        };
        // A seat may have been freed while this request was queued behind nobody.
        self.dispatch();
        match tokio::time::timeout(self.limits.max_wait, rx).await {
            Ok(Ok(())) => Ok(self.seat(cluster, user)),
            _ => Err(self.too_many()),
        }
    }

    fn seat(self: &Arc<Self>, cluster: &str, user: &str) -> Seat {
        Seat {
            fc: self.clone(),
            cluster: cluster.to_string(),
            user: user.to_string(),
        }
    }

    fn release(&self, cluster: &str, user: &str) {
        {
            let mut st = self.state.lock();
            st.free += 1;
            let mut remove_cluster = false;
            if let Some(c) = st.clusters.get_mut(cluster) {
                c.executing = c.executing.saturating_sub(1);
                if let Some(u) = c.users.get_mut(user) {
                    u.executing = u.executing.saturating_sub(1);
                    if u.executing == 0 && u.waiting.is_empty() {
                        c.users.remove(user);
                    }
                }
                remove_cluster = c.executing == 0 && c.users.is_empty();
            }
            if remove_cluster {
                st.clusters.remove(cluster);
            }
        }
        self.dispatch();
    }

    /// Gives free seats to waiting requests: the cluster with the fewest executing, then its
    /// user with the fewest executing.
    fn dispatch(&self) {
        let mut st = self.state.lock();
        while st.free > 0 && !st.ready.is_empty() {
            let st = &mut *st;
            let cap = st.cap(&self.limits);
            // A cluster at its cap waits for one of its own requests to finish (which
            // dispatches again).
            let Some((ci, _)) = st
                .ready
                .iter()
                .take(SCAN)
                .enumerate()
                .map(|(i, n)| (i, st.clusters.get(n).map_or(0, |c| c.executing)))
                .filter(|(_, executing)| *executing < cap)
                .min_by_key(|(_, executing)| *executing)
            else {
                break;
            };
            let cname = st.ready[ci].clone();
            let Some(c) = st.clusters.get_mut(&cname) else {
                st.ready.remove(ci);
                continue;
            };
            let Some((ui, _)) = c
                .ready
                .iter()
                .take(SCAN)
                .enumerate()
                .min_by_key(|(_, n)| c.users.get(*n).map_or(0, |u| u.executing))
            else {
                st.ready.remove(ci);
                continue;
            };
            let uname = c.ready[ui].clone();
            let mut granted = false;
            if let Some(u) = c.users.get_mut(&uname) {
                while let Some(tx) = u.waiting.pop_front() {
                    if tx.send(()).is_ok() {
                        granted = true;
                        u.executing += 1;
                        break;
                    }
                }
                c.ready.remove(ui);
                if !u.waiting.is_empty() {
                    // Round robin among equals: the user served goes to the back.
                    c.ready.push_back(uname.clone());
                } else if u.executing == 0 {
                    c.users.remove(&uname);
                }
            } else {
                c.ready.remove(ui);
            }
            if granted {
                c.executing += 1;
                st.free -= 1;
            }
            st.ready.remove(ci);
            if !c.ready.is_empty() {
                // The cluster served goes to the back: ties go to the others first.
                st.ready.push_back(cname);
            } else if c.executing == 0 && c.users.is_empty() {
                st.clusters.remove(&cname);
            }
        }
    }

    /// Seats in use and requests waiting (for metrics and tests).
    pub fn usage(&self) -> (usize, usize) {
        let st = self.state.lock();
        let waiting = st
            .clusters
            .values()
            .flat_map(|c| c.users.values())
            .map(|u| u.waiting.len())
            .sum();
        (self.limits.seats - st.free, waiting)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fc(seats: usize, queue_length: usize) -> Arc<FlowControl> {
        FlowControl::new(Limits {
            seats,
            queue_length,
            max_wait: Duration::from_secs(5),
            shared_seats: seats,
        })
    }

    #[tokio::test]
    async fn a_free_seat_is_taken_at_once_and_given_back_on_drop() {
        let fc = fc(2, 1);
        let a = fc.acquire("c", "u").await.unwrap();
        let b = fc.acquire("c", "u").await.unwrap();
        assert_eq!(fc.usage(), (2, 0));
        drop(a);
        drop(b);
        assert_eq!(fc.usage(), (0, 0));
    }

    #[tokio::test]
    async fn a_quiet_cluster_gets_the_next_seat_ahead_of_a_flooding_one() {
        let fc = fc(1, 10);
        let held = fc.acquire("flood", "u").await.unwrap();
        let mut flood = Vec::new();
        for _ in 0..5 {
            let fc = fc.clone();
            flood.push(tokio::spawn(async move {
                fc.acquire("flood", "u").await.map(drop)
            }));
        }
        while fc.usage().1 < 5 {
            tokio::task::yield_now().await;
        }
        let quiet = {
            let fc = fc.clone();
            tokio::spawn(async move { fc.acquire("quiet", "q").await })
        };
        while fc.usage().1 < 6 {
            tokio::task::yield_now().await;
        }
        drop(held);
        // The freed seat goes to the quiet cluster, which has nothing executing.
        let seat = quiet.await.unwrap().unwrap();
        assert_eq!(seat.cluster, "quiet");
        drop(seat);
        for f in flood {
            f.await.unwrap().unwrap();
        }
        assert_eq!(fc.usage(), (0, 0));
    }

    /// Regression: with one seat, a freed seat found both clusters with nothing executing and
    /// always went to the first in line, so a flooding cluster starved a quiet one.
    #[tokio::test]
    async fn equals_are_served_in_turn() {
        let fc = fc(1, 50);
        let held = fc.acquire("flood", "u").await.unwrap();
        let mut flood = Vec::new();
        for _ in 0..10 {
            let fc = fc.clone();
            flood.push(tokio::spawn(async move {
                let s = fc.acquire("flood", "u").await.unwrap();
                tokio::task::yield_now().await;
                drop(s);
            }));
        }
        while fc.usage().1 < 10 {
            tokio::task::yield_now().await;
        }
        let quiet = {
            let fc = fc.clone();
            tokio::spawn(async move { fc.acquire("quiet", "q").await.map(drop) })
        };
        while fc.usage().1 < 11 {
            tokio::task::yield_now().await;
        }
        drop(held);
        // Quiet is served within two grants, not after the whole flood.
        let mut grants = 0;
        while !quiet.is_finished() {
            tokio::task::yield_now().await;
            grants += 1;
            assert!(grants < 1000, "the quiet cluster starved");
        }
        quiet.await.unwrap().unwrap();
        let still_waiting = fc.usage().1;
        assert!(
            still_waiting >= 8,
            "quiet waited for {} flood requests",
            10 - still_waiting
        );
        for f in flood {
            f.await.unwrap();
        }
    }

    #[tokio::test]
    async fn while_two_clusters_are_active_each_executes_at_most_its_share() {
        let fc = FlowControl::new(Limits {
            seats: 8,
            queue_length: 50,
            max_wait: Duration::from_secs(5),
            shared_seats: 2,
        });
        // Alone, a cluster takes every seat.
        let mut held: Vec<Seat> = Vec::new();
        for _ in 0..8 {
            held.push(fc.acquire("flood", "u").await.unwrap());
        }
        assert_eq!(fc.usage(), (8, 0));
        // Another cluster becomes active: a freed seat goes to it, and the flood then runs
        // at its share (one of two shared seats) until it is alone again.
        let quiet = {
            let fc = fc.clone();
            tokio::spawn(async move { fc.acquire("quiet", "q").await })
        };
        while fc.usage().1 < 1 {
            tokio::task::yield_now().await;
        }
        let more = {
            let fc = fc.clone();
            tokio::spawn(async move { fc.acquire("flood", "u").await })
        };
        while fc.usage().1 < 2 {
            tokio::task::yield_now().await;
        }
        drop(held.pop());
        let quiet = quiet.await.unwrap().unwrap();
        assert_eq!(quiet.cluster, "quiet");
        // Six more of the flood's finish: with one still executing it is at its share.
        for _ in 0..6 {
            drop(held.pop());
        }
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert!(!more.is_finished(), "the flood ran above its share");
        drop(held.pop());
        let seat = more.await.unwrap().unwrap();
        assert_eq!(seat.cluster, "flood");
        drop(quiet);
    }

    #[tokio::test]
    async fn a_full_queue_is_answered_429_with_retry_after() {
        let fc = fc(1, 2);
        let _held = fc.acquire("c", "u").await.unwrap();
        let mut waiting = Vec::new();
        for _ in 0..2 {
            let fc = fc.clone();
            waiting.push(tokio::spawn(
                async move { fc.acquire("c", "u").await.map(drop) },
            ));
        }
        while fc.usage().1 < 2 {
            tokio::task::yield_now().await;
        }
        let e = fc.acquire("c", "u").await.err().expect("refused");
        assert_eq!(e.code, 429);
        assert_eq!(e.retry_after_seconds, Some(1));
        assert_eq!(e.message, "Too many requests, please try again later.");
        // Another user of the same cluster has a queue of its own.
        let other = {
            let fc = fc.clone();
            tokio::spawn(async move { fc.acquire("c", "other").await.map(drop) })
        };
        while fc.usage().1 < 3 {
            tokio::task::yield_now().await;
        }
        drop(_held);
        other.await.unwrap().unwrap();
        for w in waiting {
            w.await.unwrap().unwrap();
        }
    }

    #[tokio::test]
    async fn a_request_waits_no_longer_than_the_limit() {
        let fc = FlowControl::new(Limits {
            seats: 1,
            queue_length: 5,
            max_wait: Duration::from_millis(100),
            shared_seats: 1,
        });
        let _held = fc.acquire("c", "u").await.unwrap();
        let e = fc.acquire("c", "v").await.err().expect("timed out");
        assert_eq!(e.code, 429);
        // The abandoned waiter does not take the next seat.
        drop(_held);
        let _again = fc.acquire("c", "u").await.unwrap();
        assert_eq!(fc.usage(), (1, 0));
    }
}
