//! The in-memory MVCC index of the embedded store.
//!
//! Each key maps to its versions in revision order; a version with no value is a tombstone.
//! Readers ask for the state at a revision, so the writer can insert versions above the
//! published revision without readers seeing them before they are durable. Compaction drops
//! versions no readable revision can reach.

use std::collections::BTreeMap;
use std::ops::Bound;

use bytes::Bytes;

use crate::{KeyValue, Revision};

/// One write of a key.
#[derive(Debug, Clone)]
pub(super) struct Version {
    pub mod_rev: Revision,
    pub create_rev: Revision,
    pub ver: i64,
    /// `None` marks a delete.
    pub value: Option<Bytes>,
}

impl Version {
    pub fn to_kv(&self, key: &Bytes) -> Option<KeyValue> {
        self.value.as_ref().map(|value| KeyValue {
            key: key.clone(),
            value: value.clone(),
            create_revision: self.create_rev,
            mod_revision: self.mod_rev,
            version: self.ver,
        })
    }
}

#[derive(Debug, Default)]
pub(super) struct Index {
    keys: BTreeMap<Bytes, Vec<Version>>,
    /// Number of keys whose newest version is live (not a tombstone).
    live: usize,
}

impl Index {
    /// The newest version of `key`, whatever its revision (the writer's view).
    pub fn newest(&self, key: &[u8]) -> Option<(&Bytes, &Version)> {
        let (k, versions) = self.keys.get_key_value(key)?;
        versions.last().map(|v| (k, v))
    }

    /// The live value of `key` at `rev`.
    pub fn get_at(&self, key: &[u8], rev: Revision) -> Option<KeyValue> {
        let (k, versions) = self.keys.get_key_value(key)?;
        visible(versions, rev).and_then(|v| v.to_kv(k))
    }

    /// Live values of keys in `[start, end)` at `rev`, at most `limit` of them (0: all).
    /// Returns the items and whether more live items follow.
    pub fn range_at(
        &self,
        start: &[u8],
        end: Option<&[u8]>,
        rev: Revision,
        limit: usize,
    ) -> (Vec<KeyValue>, bool) {
        let upper = match end {
            Some(e) => Bound::Excluded(e),
            None => Bound::Unbounded,
        };
        let mut out = Vec::new();
        for (k, versions) in self.keys.range::<[u8], _>((Bound::Included(start), upper)) {
            if let Some(kv) = visible(versions, rev).and_then(|v| v.to_kv(k)) {
                if limit > 0 && out.len() == limit {
                    return (out, true);
                }
                out.push(kv);
            }
        }
        (out, false)
    }

    /// Keys in `[start, end)` that are live in the writer's view.
    pub fn live_keys(&self, start: &[u8], end: Option<&[u8]>) -> Vec<Bytes> {
        let upper = match end {
            Some(e) => Bound::Excluded(e),
            None => Bound::Unbounded,
        };
        self.keys
            .range::<[u8], _>((Bound::Included(start), upper))
            .filter(|(_, vs)| vs.last().is_some_and(|v| v.value.is_some()))
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// Appends a version; its revision must be above every existing one of the key.
    pub fn push(&mut self, key: Bytes, version: Version) {
        let versions = self.keys.entry(key).or_default();
        let was_live = versions.last().is_some_and(|v| v.value.is_some());
        let is_live = version.value.is_some();
        debug_assert!(versions.last().is_none_or(|v| v.mod_rev < version.mod_rev));
        versions.push(version);
        match (was_live, is_live) {
            (false, true) => self.live += 1,
            (true, false) => self.live -= 1,
            _ => {}
        }
    }

    /// Removes the versions above `rev` of `key` (undoing a write that could not be made durable).
    pub fn rollback(&mut self, key: &[u8], rev: Revision) {
        let Some(versions) = self.keys.get_mut(key) else {
            return;
        };
        let was_live = versions.last().is_some_and(|v| v.value.is_some());
        versions.retain(|v| v.mod_rev <= rev);
        let is_live = versions.last().is_some_and(|v| v.value.is_some());
        if versions.is_empty() {
            self.keys.remove(key);
        }
        match (was_live, is_live) {
            (false, true) => self.live += 1,
            (true, false) => self.live -= 1,
            _ => {}
        }
    }

    /// Drops the versions of `key` that no read at or above `rev` can see.
    pub fn compact_key(&mut self, key: &[u8], rev: Revision) {
        let Some(versions) = self.keys.get_mut(key) else {
            return;
        };
        // The newest version at or below `rev` stays visible at `rev`; everything older goes.
        let keep_from = versions.iter().rposition(|v| v.mod_rev <= rev).unwrap_or(0);
        versions.drain(..keep_from);
        if versions
            .first()
            .is_some_and(|v| v.mod_rev <= rev && v.value.is_none())
        {
            versions.remove(0);
        }
        if versions.is_empty() {
            self.keys.remove(key);
        }
    }

    /// Every live key with its newest version at `rev` (the content of a snapshot).
    pub fn live_at(&self, rev: Revision) -> Vec<KeyValue> {
        self.range_at(&[], None, rev, 0).0
    }

    pub fn live_len(&self) -> usize {
        self.live
    }
}

fn visible(versions: &[Version], rev: Revision) -> Option<&Version> {
    // Versions are few per key after compaction: a reverse scan beats a binary search.
    versions.iter().rev().find(|v| v.mod_rev <= rev)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(idx: &mut Index, key: &str, rev: Revision, value: Option<&str>) {
        let prev = idx.newest(key.as_bytes()).map(|(_, v)| v.clone());
        let (create_rev, ver) = match prev {
            Some(p) if p.value.is_some() => (p.create_rev, p.ver + 1),
            _ => (rev, 1),
        };
        idx.push(
            Bytes::copy_from_slice(key.as_bytes()),
            Version {
                mod_rev: rev,
                create_rev,
                ver,
                value: value.map(|s| Bytes::copy_from_slice(s.as_bytes())),
            },
        );
    }

    #[test]
    fn reads_see_the_state_at_their_revision() {
        let mut idx = Index::default();
        put(&mut idx, "a", 1, Some("1"));
        put(&mut idx, "a", 2, Some("2"));
        put(&mut idx, "a", 3, None);
        assert_eq!(idx.get_at(b"a", 1).unwrap().value, "1");
        assert_eq!(idx.get_at(b"a", 2).unwrap().version, 2);
        assert!(idx.get_at(b"a", 3).is_none());
        assert_eq!(idx.live_len(), 0);
    }

    #[test]
    fn compaction_keeps_what_its_revision_can_see() {
        let mut idx = Index::default();
        put(&mut idx, "a", 1, Some("1"));
        put(&mut idx, "a", 2, Some("2"));
        put(&mut idx, "b", 3, Some("x"));
        put(&mut idx, "b", 4, None);
        put(&mut idx, "a", 5, Some("5"));
        idx.compact_key(b"a", 4);
        idx.compact_key(b"b", 4);
        assert_eq!(idx.get_at(b"a", 4).unwrap().value, "2");
        assert_eq!(idx.get_at(b"a", 5).unwrap().value, "5");
        assert!(
            idx.newest(b"b").is_none(),
            "a deleted key disappears once compacted past"
        );
    }

    #[test]
    fn rollback_restores_the_previous_state() {
        let mut idx = Index::default();
        put(&mut idx, "a", 1, Some("1"));
        put(&mut idx, "a", 2, None);
        put(&mut idx, "b", 3, Some("1"));
        idx.rollback(b"a", 1);
        idx.rollback(b"b", 2);
        assert_eq!(idx.get_at(b"a", 9).unwrap().value, "1");
        assert!(idx.newest(b"b").is_none());
        assert_eq!(idx.live_len(), 1);
    }
}
