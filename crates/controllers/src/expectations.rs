//! Controller expectations (upstream `ControllerExpectations` / `UIDTrackingControllerExpectations`).
//!
//! A controller that just created or deleted pods must not act again on the same owner before
//! its informer has seen those writes, or it would create or delete twice. It records how many
//! creations and which deletions it expects; the informer's events lower them; the owner is
//! synced again only when nothing is outstanding, or after [`EXPECTATIONS_TIMEOUT`] (a lost
//! event must not wedge an owner forever).

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

use runtime::informer::ObjectKey;

/// Upstream's `ExpectationsTimeout`.
pub const EXPECTATIONS_TIMEOUT: Duration = Duration::from_secs(5 * 60);

#[derive(Debug)]
struct Pending {
    adds: i64,
    deletes: HashSet<String>,
    since: Instant,
}

/// Outstanding creations and deletions per owner.
#[derive(Debug, Default)]
pub struct Expectations {
    map: Mutex<HashMap<ObjectKey, Pending>>,
}

impl Expectations {
    /// Whether `owner` may be synced: nothing outstanding, or the expectations expired.
    pub fn satisfied(&self, owner: &ObjectKey) -> bool {
        match self.map.lock().get(owner) {
            None => true,
            Some(p) => {
                (p.adds <= 0 && p.deletes.is_empty()) || p.since.elapsed() > EXPECTATIONS_TIMEOUT
            }
        }
    }

    /// Expects `adds` creations (replacing earlier expectations).
    pub fn expect_creations(&self, owner: &ObjectKey, adds: usize) {
        self.map.lock().insert(
            owner.clone(),
            Pending {
                adds: adds as i64,
                deletes: HashSet::new(),
                since: Instant::now(),
            },
        );
    }

    /// Expects the deletion of the objects with these uids (replacing earlier expectations).
    pub fn expect_deletions(&self, owner: &ObjectKey, uids: impl IntoIterator<Item = String>) {
        self.map.lock().insert(
            owner.clone(),
            Pending {
                adds: 0,
                deletes: uids.into_iter().collect(),
                since: Instant::now(),
            },
        );
    }

    /// A creation was observed (or will never happen).
    pub fn creation_observed(&self, owner: &ObjectKey) {
        if let Some(p) = self.map.lock().get_mut(owner) {
            p.adds -= 1;
        }
    }

    /// The deletion of `uid` was observed (or will never happen); counted once per uid.
    pub fn deletion_observed(&self, owner: &ObjectKey, uid: &str) {
        if let Some(p) = self.map.lock().get_mut(owner) {
            p.deletes.remove(uid);
        }
    }

    /// Forgets an owner (it was deleted).
    pub fn forget(&self, owner: &ObjectKey) {
        self.map.lock().remove(owner);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn expectations_hold_until_observed_or_expired() {
        let e = Expectations::default();
        let k = ObjectKey::new("c", "ns", "rs");
        assert!(e.satisfied(&k));
        e.expect_creations(&k, 2);
        e.creation_observed(&k);
        assert!(!e.satisfied(&k));
        e.creation_observed(&k);
        assert!(e.satisfied(&k));
        e.expect_deletions(&k, ["u1".to_string()]);
        e.deletion_observed(&k, "u1");
        e.deletion_observed(&k, "u1");
        assert!(e.satisfied(&k));
        e.expect_creations(&k, 1);
        tokio::time::advance(EXPECTATIONS_TIMEOUT + Duration::from_secs(1)).await;
        assert!(
            e.satisfied(&k),
            "expired expectations do not wedge the owner"
        );
    }
}
