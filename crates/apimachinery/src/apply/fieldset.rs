//! Field sets: the set of paths a manager owns, and its `FieldsV1` JSON encoding.
//!
//! A set is a trie, as in structured-merge-diff: at each level, `members` are paths that end
//! here and `children` are sub-tries. The operations mirror upstream exactly (in particular,
//! `difference` removes members only, while `recursive_difference` removes whole subtrees),
//! because ownership transfer and pruning are defined in their terms. `FieldsV1` writes a
//! member that also has children as `".": {}` beside the children.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use super::path::{FieldPath, PathElement, PathError};

/// A set of field paths.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSet {
    members: BTreeSet<PathElement>,
    children: BTreeMap<PathElement, FieldSet>,
}

impl FieldSet {
    pub fn new() -> Self {
        Self::default()
    }

    /// A set of the given paths.
    pub fn from_paths<I: IntoIterator<Item = FieldPath>>(paths: I) -> Self {
        let mut s = Self::new();
        for p in paths {
            s.insert(&p.0);
        }
        s
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty() && self.children.is_empty()
    }

    /// Adds a path (an empty path is ignored).
    pub fn insert(&mut self, path: &[PathElement]) {
        match path {
            [] => {}
            [last] => {
                self.members.insert(last.clone());
            }
            [first, rest @ ..] => self.children.entry(first.clone()).or_default().insert(rest),
        }
    }

    /// Whether `path` is a member.
    pub fn has(&self, path: &[PathElement]) -> bool {
        match path {
            [] => false,
            [last] => self.members.contains(last),
            [first, rest @ ..] => self.children.get(first).is_some_and(|c| c.has(rest)),
        }
    }

    /// The sub-set under one element (empty when there is none).
    pub fn with_prefix(&self, pe: &PathElement) -> Option<&FieldSet> {
        self.children.get(pe)
    }

    pub(crate) fn members(&self) -> &BTreeSet<PathElement> {
        &self.members
    }

    pub(crate) fn children(&self) -> &BTreeMap<PathElement, FieldSet> {
        &self.children
    }

    pub(crate) fn insert_member(&mut self, pe: PathElement) {
        self.members.insert(pe);
    }

    pub(crate) fn set_child(&mut self, pe: PathElement, child: FieldSet) {
        if child.is_empty() {
            self.children.remove(&pe);
        } else {
            self.children.insert(pe, child);
        }
    }

    pub fn union(&self, other: &FieldSet) -> FieldSet {
        let mut out = self.clone();
        out.members.extend(other.members.iter().cloned());
        for (pe, c) in &other.children {
            let merged = match out.children.get(pe) {
                Some(mine) => mine.union(c),
                None => c.clone(),
            };
            out.children.insert(pe.clone(), merged);
        }
        out
    }

    pub fn intersection(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet::new();
        out.members = self.members.intersection(&other.members).cloned().collect();
        for (pe, c) in &self.children {
            if let Some(o) = other.children.get(pe) {
                out.set_child(pe.clone(), c.intersection(o));
            }
        }
        out
    }

    /// Members of `self` not members of `other`; a parent minus a child is still the parent.
    pub fn difference(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet::new();
        out.members = self.members.difference(&other.members).cloned().collect();
        for (pe, c) in &self.children {
            match other.children.get(pe) {
                Some(o) => out.set_child(pe.clone(), c.difference(o)),
                None => out.set_child(pe.clone(), c.clone()),
            }
        }
        out
    }

    /// Like [`FieldSet::difference`], but a member of `other` also removes everything below it.
    pub fn recursive_difference(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet::new();
        out.members = self.members.difference(&other.members).cloned().collect();
        for (pe, c) in &self.children {
            if other.members.contains(pe) {
                continue;
            }
            match other.children.get(pe) {
                Some(o) => out.set_child(pe.clone(), c.recursive_difference(o)),
                None => out.set_child(pe.clone(), c.clone()),
            }
        }
        out
    }

    /// Every member path, in upstream's iteration order (members of a level, then children).
    pub fn paths(&self) -> Vec<FieldPath> {
        let mut out = Vec::new();
        self.collect(&mut Vec::new(), &mut out);
        out
    }

    fn collect(&self, prefix: &mut Vec<PathElement>, out: &mut Vec<FieldPath>) {
        for m in &self.members {
            let mut p = prefix.clone();
            p.push(m.clone());
            out.push(FieldPath(p));
        }
        for (pe, c) in &self.children {
            prefix.push(pe.clone());
            c.collect(prefix, out);
            prefix.pop();
        }
    }

    /// The `FieldsV1` JSON of this set.
    pub fn to_fields_v1(&self) -> Value {
        let mut m = Map::new();
        let keys: BTreeSet<&PathElement> =
            self.members.iter().chain(self.children.keys()).collect();
        for pe in keys {
            let mut node = match self.children.get(pe) {
                Some(c) => match c.to_fields_v1() {
                    Value::Object(m) => m,
                    _ => Map::new(),
                },
                None => Map::new(),
            };
            if self.members.contains(pe) && self.children.contains_key(pe) {
                node.insert(".".into(), Value::Object(Map::new()));
            }
            m.insert(pe.to_fields_key(), Value::Object(node));
        }
        Value::Object(m)
    }

    /// Reads `FieldsV1` JSON.
    pub fn from_fields_v1(v: &Value) -> Result<FieldSet, FieldsV1Error> {
        let Value::Object(m) = v else {
            return Err(FieldsV1Error::NotAnObject);
        };
        let mut out = FieldSet::new();
        for (k, child) in m {
            if k == "." {
                continue;
            }
            let pe = PathElement::from_fields_key(k)?;
            let Value::Object(cm) = child else {
                return Err(FieldsV1Error::NotAnObject);
            };
            if cm.is_empty() || cm.contains_key(".") {
                out.members.insert(pe.clone());
            }
            out.set_child(pe, FieldSet::from_fields_v1(child)?);
        }
        Ok(out)
    }
}

/// Why `FieldsV1` JSON could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FieldsV1Error {
    #[error("expected an object")]
    NotAnObject,
    #[error(transparent)]
    Path(#[from] PathError),
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn set(v: Value) -> FieldSet {
        FieldSet::from_fields_v1(&v).unwrap()
    }

    #[test]
    fn fields_v1_round_trips_with_dot_for_items_with_children() {
        let v = json!({
            "f:metadata": {"f:labels": {"f:app": {}}},
            "f:spec": {"f:containers": {"k:{\"name\":\"c\"}": {".": {}, "f:image": {}, "f:name": {}}},
                       "f:replicas": {}},
            "f:status": {"f:tags": {"v:\"a\"": {}}}
        });
        let s = set(v.clone());
        assert_eq!(s.to_fields_v1(), v);
        let printed: Vec<String> = s.paths().iter().map(|p| p.to_string()).collect();
        assert_eq!(
            printed,
            [
                ".metadata.labels.app",
                ".spec.replicas",
                ".spec.containers[name=\"c\"]",
                ".spec.containers[name=\"c\"].image",
                ".spec.containers[name=\"c\"].name",
                ".status.tags[=\"a\"]"
            ]
        );
    }

    #[test]
    fn difference_keeps_parents_while_recursive_difference_drops_subtrees() {
        let a = set(json!({"f:spec": {".": {}, "f:x": {}, "f:y": {}}}));
        let parent = set(json!({"f:spec": {}}));
        let child = set(json!({"f:spec": {"f:x": {}}}));
        assert_eq!(
            a.difference(&child),
            set(json!({"f:spec": {".": {}, "f:y": {}}}))
        );
        assert_eq!(
            a.difference(&parent),
            set(json!({"f:spec": {"f:x": {}, "f:y": {}}}))
        );
        assert!(a.recursive_difference(&parent).is_empty());
    }

    #[test]
    fn union_and_intersection_work_level_by_level() {
        let a = set(json!({"f:a": {}, "f:b": {"f:c": {}}}));
        let b = set(json!({"f:b": {"f:c": {}, "f:d": {}}}));
        assert_eq!(
            a.union(&b),
            set(json!({"f:a": {}, "f:b": {"f:c": {}, "f:d": {}}}))
        );
        assert_eq!(a.intersection(&b), set(json!({"f:b": {"f:c": {}}})));
        assert!(a.intersection(&set(json!({"f:z": {}}))).is_empty());
    }

    #[test]
    fn bad_fields_v1_is_rejected() {
        assert!(FieldSet::from_fields_v1(&json!([])).is_err());
        assert!(FieldSet::from_fields_v1(&json!({"x:a": {}})).is_err());
        assert!(FieldSet::from_fields_v1(&json!({"f:a": 1})).is_err());
    }
}
