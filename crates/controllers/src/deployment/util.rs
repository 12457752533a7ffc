//! Deployment arithmetic and bookkeeping (upstream `pkg/controller/deployment/util`): defaults,
//! surge and unavailability fenceposts, the pod-template hash, revisions and their annotations,
//! replica counts over sets of ReplicaSets.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{
    Deployment, DeploymentSpec, DeploymentStrategy, ReplicaSet, RollingUpdateDeployment,
};
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

/// The label telling a Deployment's ReplicaSets (and their pods) apart.
pub const POD_TEMPLATE_HASH: &str = "pod-template-hash";
pub const REVISION: &str = "deployment.kubernetes.io/revision";
pub const REVISION_HISTORY: &str = "deployment.kubernetes.io/revision-history";
pub const DESIRED_REPLICAS: &str = "deployment.kubernetes.io/desired-replicas";
pub const MAX_REPLICAS: &str = "deployment.kubernetes.io/max-replicas";
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";
/// Upstream keeps the revision-history annotation under this many characters.
pub const MAX_REVISION_HISTORY_CHARS: usize = 2000;

/// The spec with apps/v1 defaults filled in where the server left them out (replicas 1,
/// RollingUpdate 25%/25%, revisionHistoryLimit 10, progressDeadlineSeconds 600).
pub fn defaulted(d: &Deployment) -> Deployment {
    let mut d = d.clone();
    let spec = d.spec.get_or_insert_with(DeploymentSpec::default);
    spec.replicas.get_or_insert(1);
    spec.revision_history_limit.get_or_insert(10);
    spec.progress_deadline_seconds.get_or_insert(600);
    let strategy = spec
        .strategy
        .get_or_insert_with(DeploymentStrategy::default);
    let ty = strategy
        .type_
        .get_or_insert_with(|| "RollingUpdate".into())
        .clone();
    if ty == "RollingUpdate" {
        let ru = strategy
            .rolling_update
            .get_or_insert_with(RollingUpdateDeployment::default);
        ru.max_surge
            .get_or_insert_with(|| IntOrString::String("25%".into()));
        ru.max_unavailable
            .get_or_insert_with(|| IntOrString::String("25%".into()));
    }
    d
}

pub fn replicas(d: &Deployment) -> i32 {
    d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
}

pub fn rs_replicas(rs: &ReplicaSet) -> i32 {
    rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
}

pub fn is_rolling(d: &Deployment) -> bool {
    d.spec
        .as_ref()
        .and_then(|s| s.strategy.as_ref())
        .and_then(|s| s.type_.as_deref())
        .is_none_or(|t| t == "RollingUpdate")
}

/// An int-or-percent against `total`, percentages rounded up or down.
pub fn scaled_value(v: Option<&IntOrString>, total: i32, round_up: bool) -> i32 {
    match v {
        None => 0,
        Some(IntOrString::Int(i)) => *i,
        Some(IntOrString::String(s)) => {
            let Some(p) = s.strip_suffix('%').and_then(|p| p.parse::<i64>().ok()) else {
                return s.parse().unwrap_or(0);
            };
            let n = p * i64::from(total);
            let v = if round_up {
                (n + 99).div_euclid(100)
            } else {
                n.div_euclid(100)
            };
            i32::try_from(v).unwrap_or(i32::MAX)
        }
    }
}

/// (maxSurge, maxUnavailable) resolved against the desired replicas; both zero becomes an
/// unavailability of one, as upstream does.
pub fn fenceposts(d: &Deployment) -> (i32, i32) {
    if !is_rolling(d) {
        return (0, 0);
    }
    let ru = d
        .spec
        .as_ref()
        .and_then(|s| s.strategy.as_ref())
        .and_then(|s| s.rolling_update.as_ref());
    let desired = replicas(d);
    let surge = scaled_value(ru.and_then(|r| r.max_surge.as_ref()), desired, true);
    let mut unavailable = scaled_value(ru.and_then(|r| r.max_unavailable.as_ref()), desired, false);
    if surge == 0 && unavailable == 0 {
        unavailable = 1;
    }
    (surge, unavailable)
}

pub fn max_surge(d: &Deployment) -> i32 {
    fenceposts(d).0
}

/// maxUnavailable, capped at the desired replicas.
pub fn max_unavailable(d: &Deployment) -> i32 {
    fenceposts(d).1.min(replicas(d))
}

/// FNV-1a, 32 bits (upstream hashes pod templates with it).
fn fnv32a(data: &[u8]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in data {
        h ^= u32::from(*b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

/// Upstream's `SafeEncodeString` alphabet: no vowels, no confusable characters.
const SAFE: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// The `pod-template-hash` of a template: FNV-1a over its canonical JSON and the collision
/// count, written in upstream's safe alphabet. (Upstream hashes Go's debug printing of the
/// struct, so values differ from upstream's; the form and the naming are the same.)
pub fn template_hash(template: &PodTemplateSpec, collision_count: Option<i32>) -> String {
    let mut data = serde_json::to_vec(template).unwrap_or_default();
    if let Some(c) = collision_count {
        data.extend_from_slice(&(c as u32).to_le_bytes());
    }
    fnv32a(&data)
        .to_string()
        .bytes()
        .map(|b| SAFE[usize::from(b) % SAFE.len()] as char)
        .collect()
}

/// Whether two templates are equal once the hash label is ignored.
pub fn equal_ignore_hash(a: &PodTemplateSpec, b: &PodTemplateSpec) -> bool {
    let strip = |t: &PodTemplateSpec| {
        let mut t = t.clone();
        if let Some(l) = t.metadata.as_mut().and_then(|m| m.labels.as_mut()) {
            l.remove(POD_TEMPLATE_HASH);
        }
        if let Some(m) = t.metadata.as_mut()
            && m.labels.as_ref().is_some_and(|l| l.is_empty())
        {
            m.labels = None;
        }
        serde_json::to_value(t).unwrap_or_default()
    };
    strip(a) == strip(b)
}

pub fn revision(rs: &ReplicaSet) -> i64 {
    rs.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(REVISION))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

pub fn max_revision<'a>(sets: impl IntoIterator<Item = &'a ReplicaSet>) -> i64 {
    sets.into_iter().map(revision).max().unwrap_or(0)
}

fn skip_copy(key: &str) -> bool {
    matches!(
        key,
        LAST_APPLIED | REVISION | REVISION_HISTORY | DESIRED_REPLICAS | MAX_REPLICAS
    ) || key == "deprecated.deployment.rollback.to"
}

/// Sets the desired- and max-replicas annotations; whether anything changed.
pub fn set_replicas_annotations(rs: &mut ReplicaSet, desired: i32, max: i32) -> bool {
    let a = rs.metadata.annotations.get_or_insert_with(BTreeMap::new);
    let mut changed = false;
    for (k, v) in [(DESIRED_REPLICAS, desired), (MAX_REPLICAS, max)] {
        let v = v.to_string();
        if a.get(k) != Some(&v) {
            a.insert(k.into(), v);
            changed = true;
        }
    }
    changed
}

/// Brings the new ReplicaSet's annotations up to date: the Deployment's own annotations, the
/// revision (keeping earlier revisions in the history when a set is reused by a rollback), and
/// for a set about to be created the replica annotations. Whether anything changed.
pub fn set_new_rs_annotations(
    d: &Deployment,
    rs: &mut ReplicaSet,
    new_revision: i64,
    exists: bool,
) -> bool {
    let mut changed = false;
    let ann = rs.metadata.annotations.get_or_insert_with(BTreeMap::new);
    for (k, v) in d.metadata.annotations.iter().flatten() {
        if !skip_copy(k) && ann.get(k) != Some(v) {
            ann.insert(k.clone(), v.clone());
            changed = true;
        }
    }
    let old = ann.get(REVISION).cloned();
    let old_int = match old.as_deref() {
        None => 0,
        Some(s) => match s.parse::<i64>() {
            Ok(v) => v,
            Err(_) => return changed,
        },
    };
    if old_int < new_revision {
        ann.insert(REVISION.into(), new_revision.to_string());
        changed = true;
        if let Some(old) = old {
            let history = ann.get(REVISION_HISTORY).cloned().unwrap_or_default();
            if history.is_empty() {
                ann.insert(REVISION_HISTORY.into(), old);
            } else {
                let mut parts: Vec<&str> = history.split(',').collect();
                let mut total = history.len() + old.len() + 1;
                let mut start = 0;
                while total > MAX_REVISION_HISTORY_CHARS && start < parts.len() {
                    total -= parts[start].len() + 1;
                    start += 1;
                }
                if total <= MAX_REVISION_HISTORY_CHARS {
                    parts = parts.split_off(start);
                    parts.push(&old);
                    ann.insert(REVISION_HISTORY.into(), parts.join(","));
                }
            }
        }
    }
    if !exists && set_replicas_annotations(rs, replicas(d), replicas(d) + max_surge(d)) {
        changed = true;
    }
    changed
}

/// Sum of `spec.replicas`.
pub fn spec_replicas<'a>(sets: impl IntoIterator<Item = &'a ReplicaSet>) -> i32 {
    sets.into_iter().map(rs_replicas).sum()
}

fn status_of<'a>(
    sets: impl IntoIterator<Item = &'a ReplicaSet>,
    f: fn(&k8s_openapi::api::apps::v1::ReplicaSetStatus) -> i32,
) -> i32 {
    sets.into_iter()
        .filter_map(|r| r.status.as_ref())
        .map(f)
        .sum()
}

/// Sum of `status.replicas` (pods that exist).
pub fn actual_replicas<'a>(sets: impl IntoIterator<Item = &'a ReplicaSet>) -> i32 {
    status_of(sets, |s| s.replicas)
}

pub fn ready_replicas<'a>(sets: impl IntoIterator<Item = &'a ReplicaSet>) -> i32 {
    status_of(sets, |s| s.ready_replicas.unwrap_or(0))
}

pub fn available_replicas<'a>(sets: impl IntoIterator<Item = &'a ReplicaSet>) -> i32 {
    status_of(sets, |s| s.available_replicas.unwrap_or(0))
}

/// The size the new ReplicaSet may grow to now (upstream `NewRSNewReplicas`).
pub fn new_rs_new_replicas(d: &Deployment, all: &[&ReplicaSet], new_rs: &ReplicaSet) -> i32 {
    if !is_rolling(d) {
        return replicas(d);
    }
    let current = spec_replicas(all.iter().copied());
    let max_total = replicas(d) + max_surge(d);
    if current >= max_total {
        return rs_replicas(new_rs);
    }
    let up = (max_total - current).min(replicas(d) - rs_replicas(new_rs));
    rs_replicas(new_rs) + up
}

/// Sorts ReplicaSets oldest first (creation time, then name).
pub fn sort_by_creation(sets: &mut [ReplicaSet]) {
    sets.sort_by(|a, b| {
        let t = |r: &ReplicaSet| r.metadata.creation_timestamp.as_ref().map(|t| t.0);
        t(a).cmp(&t(b))
            .then_with(|| a.metadata.name.cmp(&b.metadata.name))
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn deploy(replicas: i32, surge: &str, unavailable: &str) -> Deployment {
        let mut d = defaulted(&Deployment::default());
        let spec = d.spec.as_mut().unwrap();
        spec.replicas = Some(replicas);
        let ru = spec
            .strategy
            .as_mut()
            .unwrap()
            .rolling_update
            .as_mut()
            .unwrap();
        ru.max_surge = Some(IntOrString::String(surge.into()));
        ru.max_unavailable = Some(IntOrString::String(unavailable.into()));
        d
    }

    #[test]
    fn percentages_round_surge_up_and_unavailability_down() {
        assert_eq!(fenceposts(&deploy(10, "25%", "25%")), (3, 2));
        assert_eq!(
            fenceposts(&deploy(1, "0%", "0%")),
            (0, 1),
            "both zero allows one unavailable"
        );
        assert_eq!(scaled_value(Some(&IntOrString::Int(2)), 10, true), 2);
    }

    #[test]
    fn the_template_hash_is_stable_safe_and_changes_with_collisions() {
        let t = PodTemplateSpec::default();
        let h = template_hash(&t, None);
        assert_eq!(h, template_hash(&t, None));
        assert!(h.bytes().all(|b| SAFE.contains(&b)));
        assert_ne!(h, template_hash(&t, Some(1)));
    }

    #[test]
    fn reusing_a_replica_set_moves_its_revision_into_the_history() {
        let d = deploy(1, "25%", "25%");
        let mut rs = ReplicaSet {
            metadata: ObjectMeta {
                annotations: Some(BTreeMap::from([(REVISION.to_string(), "1".to_string())])),
                ..Default::default()
            },
            ..Default::default()
        };
        assert!(set_new_rs_annotations(&d, &mut rs, 3, true));
        let a = rs.metadata.annotations.unwrap();
        assert_eq!(a[REVISION], "3");
        assert_eq!(a[REVISION_HISTORY], "1");
    }

    #[test]
    fn the_new_replica_set_grows_only_within_the_surge() {
        let d = deploy(4, "1", "0");
        let mut old = ReplicaSet::default();
        old.spec.get_or_insert_with(Default::default).replicas = Some(4);
        let mut new = ReplicaSet::default();
        new.spec.get_or_insert_with(Default::default).replicas = Some(0);
        let d = {
            let mut d = d;
            let ru = d
                .spec
                .as_mut()
                .unwrap()
                .strategy
                .as_mut()
                .unwrap()
                .rolling_update
                .as_mut()
                .unwrap();
            ru.max_surge = Some(IntOrString::Int(1));
            ru.max_unavailable = Some(IntOrString::Int(0));
            d
        };
        assert_eq!(new_rs_new_replicas(&d, &[&old, &new], &new), 1);
    }
}
