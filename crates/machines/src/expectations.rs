//! What a controller has just created or deleted and its informer has not shown yet: a
//! reconcile that runs before the watch delivers its own write would otherwise count without
//! it and create (or delete) again — upstream's controller expectations.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use runtime::informer::ObjectKey;

/// How long a write is waited for before the informer is believed instead.
const TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Default)]
struct Pending {
    created: HashMap<String, Instant>,
    deleted: HashMap<String, Instant>,
}

/// Expected creations and deletions, per owner.
#[derive(Default)]
pub struct Expectations(Mutex<HashMap<ObjectKey, Pending>>);

impl Expectations {
    /// `owner` created `name`.
    pub fn created(&self, owner: &ObjectKey, name: &str) {
        self.0
            .lock()
            .entry(owner.clone())
            .or_default()
            .created
            .insert(name.to_string(), Instant::now());
    }

    /// `owner` deleted `name`.
    pub fn deleted(&self, owner: &ObjectKey, name: &str) {
        self.0
            .lock()
            .entry(owner.clone())
            .or_default()
            .deleted
            .insert(name.to_string(), Instant::now());
    }

    /// The creations not yet seen (`seen(name)`: the informer has it) and the deletions not
    /// yet seen (`gone(name)`: the informer shows it deleting or gone); what was seen or waited
    /// for too long is forgotten.
    pub fn pending(
        &self,
        owner: &ObjectKey,
        seen: impl Fn(&str) -> bool,
        gone: impl Fn(&str) -> bool,
    ) -> (Vec<String>, Vec<String>) {
        let mut all = self.0.lock();
        let Some(p) = all.get_mut(owner) else {
            return (Vec::new(), Vec::new());
        };
        p.created.retain(|n, t| t.elapsed() < TIMEOUT && !seen(n));
        p.deleted.retain(|n, t| t.elapsed() < TIMEOUT && !gone(n));
        let out = (
            p.created.keys().cloned().collect(),
            p.deleted.keys().cloned().collect(),
        );
        if p.created.is_empty() && p.deleted.is_empty() {
            all.remove(owner);
        }
        out
    }

    /// Forgets an owner (deleted).
    pub fn forget(&self, owner: &ObjectKey) {
        self.0.lock().remove(owner);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_is_pending_until_the_informer_shows_it() {
        let e = Expectations::default();
        let k = ObjectKey::new("root", "ns", "set");
        e.created(&k, "m1");
        e.deleted(&k, "m0");
        assert_eq!(
            e.pending(&k, |_| false, |_| false),
            (vec!["m1".to_string()], vec!["m0".to_string()])
        );
        assert_eq!(
            e.pending(&k, |n| n == "m1", |n| n == "m0"),
            (vec![], vec![])
        );
        assert_eq!(
            e.pending(&k, |_| false, |_| false),
            (vec![], vec![]),
            "seen once is enough"
        );
    }
}
