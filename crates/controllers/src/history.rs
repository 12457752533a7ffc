//! ControllerRevisions (upstream `pkg/controller/history`): the recorded pod templates of
//! StatefulSets and DaemonSets, which tell pods of the current revision from pods of an update
//! and make `kubectl rollout undo` possible.
//!
//! A revision's `data` is a patch replacing the owner's template
//! (`{"spec":{"template":{...,"$patch":"replace"}}}`), its name `<owner>-<hash>`, its `revision`
//! a number growing with each change; rolling back to an older template bumps that revision's
//! number instead of creating a new one. A name taken by a different revision is a hash
//! collision: the owner's `status.collisionCount` is bumped and the hash computed again.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::podutil;
use runtime::error::Result;

/// The label of a StatefulSet's revisions holding their hash.
pub const REVISION_HASH_LABEL: &str = "controller.kubernetes.io/hash";
/// The label on pods (and DaemonSet revisions) naming their revision.
pub const CONTROLLER_REVISION_HASH: &str = "controller-revision-hash";

/// Upstream keeps revision names within a label value's 253 characters: the owner's name is
/// cut to 223.
const MAX_PREFIX: usize = 223;

/// FNV-1a, 32 bits (upstream hashes revisions with it).
fn fnv32a(data: &[u8]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in data {
        h ^= u32::from(*b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

/// Upstream's `SafeEncodeString` alphabet.
const SAFE: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// The hash of a revision's data and the collision count, in upstream's safe alphabet.
pub fn hash_revision(data: &Value, collision_count: Option<i32>) -> String {
    let mut bytes = serde_json::to_vec(data).unwrap_or_default();
    if let Some(c) = collision_count {
        bytes.extend_from_slice(&(c as u32).to_le_bytes());
    }
    fnv32a(&bytes)
        .to_string()
        .bytes()
        .map(|b| SAFE[usize::from(b) % SAFE.len()] as char)
        .collect()
}

/// `<prefix>-<hash>`, the prefix cut so the name stays a valid label value.
pub fn revision_name(prefix: &str, hash: &str) -> String {
    let cut = prefix
        .char_indices()
        .nth(MAX_PREFIX)
        .map_or(prefix, |(i, _)| &prefix[..i]);
    format!("{cut}-{hash}")
}

/// The patch that restores `template`.
pub fn template_patch(template: &PodTemplateSpec) -> Value {
    let mut t = serde_json::to_value(template).unwrap_or_else(|_| json!({}));
    if let Some(o) = t.as_object_mut() {
        o.insert("$patch".into(), json!("replace"));
    }
    json!({"spec": {"template": t}})
}

/// The template a revision restores.
pub fn revision_template(rev: &ControllerRevision) -> Option<PodTemplateSpec> {
    let mut t = rev.data.as_ref()?.0.pointer("/spec/template")?.clone();
    if let Some(o) = t.as_object_mut() {
        o.remove("$patch");
    }
    serde_json::from_value(t).ok()
}

/// A revision of `owner` (not yet named) with `data`, the owner's template labels and
/// annotations, and a controller reference.
pub fn new_revision(
    owner: &ObjectMeta,
    api_version: &str,
    kind: &str,
    template_labels: Option<&BTreeMap<String, String>>,
    data: Value,
    revision: i64,
) -> ControllerRevision {
    ControllerRevision {
        metadata: ObjectMeta {
            namespace: owner.namespace.clone(),
            labels: Some(template_labels.cloned().unwrap_or_default()),
            annotations: owner.annotations.clone(),
            owner_references: Some(vec![podutil::new_controller_ref(owner, api_version, kind)]),
            ..Default::default()
        },
        data: Some(RawExtension(data)),
        revision,
    }
}

/// Whether two revisions restore the same template (upstream `EqualRevision`: differing hash
/// labels are different revisions, otherwise the data decides).
pub fn equal(a: &ControllerRevision, b: &ControllerRevision) -> bool {
    let hash = |r: &ControllerRevision| {
        r.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(REVISION_HASH_LABEL))
            .cloned()
    };
    if let (Some(x), Some(y)) = (hash(a), hash(b))
        && x != y
    {
        return false;
    }
    a.data.as_ref().map(|d| &d.0) == b.data.as_ref().map(|d| &d.0)
}

/// Oldest first: by revision number, then creation time, then name.
pub fn sort(revs: &mut [ControllerRevision]) {
    revs.sort_by(|a, b| {
        let t = |r: &ControllerRevision| r.metadata.creation_timestamp.as_ref().map(|t| t.0);
        a.revision
            .cmp(&b.revision)
            .then_with(|| t(a).cmp(&t(b)))
            .then_with(|| a.metadata.name.cmp(&b.metadata.name))
    });
}

/// The number the next revision gets.
pub fn next_revision(sorted: &[ControllerRevision]) -> i64 {
    sorted.last().map_or(1, |r| r.revision + 1)
}

/// Creates `rev` under `<owner>-<hash>`, with `hash` computing the hash for a collision count.
/// A name taken by an equal revision returns that one; by a different one, the collision
/// count grows and the next name is tried.
pub async fn create(
    api: &Api<ControllerRevision>,
    owner_name: &str,
    rev: &ControllerRevision,
    collision_count: &mut i32,
    hash: impl Fn(i32) -> String,
) -> Result<ControllerRevision> {
    loop {
        let mut clone = rev.clone();
        clone.metadata.name = Some(revision_name(owner_name, &hash(*collision_count)));
        match api.create(&PostParams::default(), &clone).await {
            Ok(c) => return Ok(c),
            Err(kube::Error::Api(s)) if s.code == 409 => {
                let existing = api
                    .get(clone.metadata.name.as_deref().unwrap_or_default())
                    .await?;
                if existing.data.as_ref().map(|d| &d.0) == clone.data.as_ref().map(|d| &d.0) {
                    return Ok(existing);
                }
                *collision_count = collision_count.saturating_add(1);
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// Makes sure one of the owner's revisions (`owned`, any order) restores `template`: the
/// equal revision is reused (renumbered to be the newest when it was an older one, a
/// rollback), otherwise a new one is created, labelled `hash_label: <hash>`. Returns the
/// revisions oldest first and the one for `template`.
#[allow(clippy::too_many_arguments)]
pub async fn ensure(
    api: &Api<ControllerRevision>,
    owner: &ObjectMeta,
    api_version: &str,
    kind: &str,
    template: &PodTemplateSpec,
    hash_label: &str,
    mut owned: Vec<ControllerRevision>,
    collision_count: &mut i32,
) -> Result<(Vec<ControllerRevision>, ControllerRevision)> {
    sort(&mut owned);
    let data = template_patch(template);
    let next = next_revision(&owned);
    let equal_at = owned
        .iter()
        .rposition(|r| r.data.as_ref().map(|d| &d.0) == Some(&data));
    if let Some(i) = equal_at {
        if i + 1 == owned.len() {
            let rev = owned[i].clone();
            return Ok((owned, rev));
        }
        let rev = renumber(api, &owned[i], next).await?;
        owned[i] = rev.clone();
        sort(&mut owned);
        return Ok((owned, rev));
    }
    let mut labels = template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    let mut attempt = new_revision(owner, api_version, kind, None, data.clone(), next);
    let owner_name = owner.name.clone().unwrap_or_default();
    let rev = loop {
        let hash = hash_revision(&data, (*collision_count > 0).then_some(*collision_count));
        attempt.metadata.name = Some(revision_name(&owner_name, &hash));
        labels.insert(hash_label.to_string(), hash);
        attempt.metadata.labels = Some(labels.clone());
        match api.create(&PostParams::default(), &attempt).await {
            Ok(c) => break c,
            Err(kube::Error::Api(s)) if s.code == 409 => {
                let name = attempt.metadata.name.as_deref().unwrap_or_default();
                let existing = api.get(name).await?;
                if existing.data.as_ref().map(|d| &d.0) == Some(&data) {
                    break existing;
                }
                *collision_count = collision_count.saturating_add(1);
            }
            Err(e) => return Err(e.into()),
        }
    };
    owned.push(rev.clone());
    sort(&mut owned);
    Ok((owned, rev))
}

/// Gives an existing revision a new number (a rollback to it).
pub async fn renumber(
    api: &Api<ControllerRevision>,
    rev: &ControllerRevision,
    revision: i64,
) -> Result<ControllerRevision> {
    if rev.revision == revision {
        return Ok(rev.clone());
    }
    let patch = json!({"revision": revision});
    Ok(api
        .patch(
            rev.metadata.name.as_deref().unwrap_or_default(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await?)
}

/// Deletes the oldest revisions that are not `live` beyond `limit` (upstream
/// `truncateHistory`); `sorted` is oldest first.
pub async fn truncate(
    api: &Api<ControllerRevision>,
    sorted: &[ControllerRevision],
    live: &[&str],
    limit: i32,
) -> Result<()> {
    let history: Vec<&ControllerRevision> = sorted
        .iter()
        .filter(|r| !live.contains(&r.metadata.name.as_deref().unwrap_or_default()))
        .collect();
    let limit = usize::try_from(limit.max(0)).unwrap_or(0);
    if history.len() <= limit {
        return Ok(());
    }
    for r in &history[..history.len() - limit] {
        match api
            .delete(
                r.metadata.name.as_deref().unwrap_or_default(),
                &DeleteParams::default(),
            )
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn template(image: &str) -> PodTemplateSpec {
        serde_json::from_value(json!({
            "metadata": {"labels": {"app": "db"}},
            "spec": {"containers": [{"name": "c", "image": image}]},
        }))
        .unwrap()
    }

    #[test]
    fn a_revision_restores_its_template_and_hashes_differ_by_content_and_collisions() {
        let t = template("db:1");
        let data = template_patch(&t);
        assert_eq!(
            data.pointer("/spec/template/$patch"),
            Some(&json!("replace"))
        );
        let rev = new_revision(
            &ObjectMeta::default(),
            "apps/v1",
            "StatefulSet",
            None,
            data.clone(),
            1,
        );
        assert_eq!(revision_template(&rev), Some(t));
        let h = hash_revision(&data, None);
        assert_eq!(h, hash_revision(&data, None));
        assert_ne!(h, hash_revision(&data, Some(1)));
        assert_ne!(h, hash_revision(&template_patch(&template("db:2")), None));
        assert!(h.bytes().all(|b| SAFE.contains(&b)));
    }

    #[test]
    fn revision_names_cut_long_owner_names() {
        assert_eq!(revision_name("web", "abc"), "web-abc");
        let long = "x".repeat(300);
        assert_eq!(revision_name(&long, "h").len(), MAX_PREFIX + 2);
    }

    #[test]
    fn revisions_sort_by_number_and_the_next_number_follows_the_last() {
        let mk = |n: i64, name: &str| ControllerRevision {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            revision: n,
            data: None,
        };
        let mut revs = vec![mk(3, "c"), mk(1, "a"), mk(2, "b")];
        sort(&mut revs);
        let names: Vec<_> = revs
            .iter()
            .map(|r| r.metadata.name.clone().unwrap())
            .collect();
        assert_eq!(names, ["a", "b", "c"]);
        assert_eq!(next_revision(&revs), 4);
        assert_eq!(next_revision(&[]), 1);
    }
}
