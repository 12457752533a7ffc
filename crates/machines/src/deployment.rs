//! The MachineDeployment controller (spec: capi-kubevirt.md §1.3), Deployment's model for
//! machines: the MachineSet whose template is up to date with the deployment's (version,
//! bootstrap, infrastructure reference, failure domain) is the new one, created when none is;
//! RollingUpdate scales it up within `replicas + maxSurge` and the old ones down while
//! `replicas − maxUnavailable` machines stay available (unavailable old machines first,
//! oldest set first); OnDelete only adds to the new set what deleted old machines leave
//! missing. Sets carry the revision, desired- and max-replicas annotations; one old empty set
//! is kept as history. `spec.paused` (or the Cluster's) stops rollouts; the status reports the
//! counts, the selector, the phase and the v1beta2 conditions.

use std::collections::BTreeMap;
use std::sync::Arc;

use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use runtime::error::{Result, ignore_not_found};
use runtime::informer::ObjectKey;
use runtime::queue::Action;
use serde_json::{Value, json};

use crate::cond::{self, Cond};
use crate::crds::FIELD_MANAGER;
use crate::machine::rollout_identity;
use crate::names;
use crate::resource::{MachineDeployment, MachineSet, int_at, str_at};
use crate::{Ctx, controller_of, owner_ref};

/// A label selector as its string form (`status.selector`, what the scale subresource reports).
pub fn selector_string(sel: Option<&Value>) -> String {
    let Some(sel) = sel else {
        return String::new();
    };
    let mut parts = Vec::new();
    if let Some(m) = sel.get("matchLabels").and_then(Value::as_object) {
        let sorted: BTreeMap<&String, &Value> = m.iter().collect();
        for (k, v) in sorted {
            parts.push(format!("{k}={}", v.as_str().unwrap_or("")));
        }
    }
    for e in sel
        .get("matchExpressions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let key = e.get("key").and_then(Value::as_str).unwrap_or("");
        let values: Vec<&str> = e
            .get("values")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        match e.get("operator").and_then(Value::as_str).unwrap_or("") {
            "In" => parts.push(format!("{key} in ({})", values.join(","))),
            "NotIn" => parts.push(format!("{key} notin ({})", values.join(","))),
            "Exists" => parts.push(key.to_string()),
            "DoesNotExist" => parts.push(format!("!{key}")),
            _ => {}
        }
    }
    parts.join(",")
}

/// An int-or-percent against `total`: percentages round up (`round_up`) or down.
pub fn scaled(v: Option<&Value>, total: i64, default: i64, round_up: bool) -> i64 {
    match v {
        Some(Value::Number(n)) => n.as_i64().unwrap_or(default),
        Some(Value::String(s)) => match s.strip_suffix('%').and_then(|p| p.parse::<i64>().ok()) {
            Some(p) => {
                let x = p * total;
                if round_up { (x + 99) / 100 } else { x / 100 }
            }
            None => s.parse().unwrap_or(default),
        },
        _ => default,
    }
}

/// `(maxSurge, maxUnavailable)` resolved against `replicas`; both 0 makes unavailable 1.
pub fn surge_and_unavailable(md: &Value, replicas: i64) -> (i64, i64) {
    let ru = md.pointer("/rollout/strategy/rollingUpdate");
    let surge = scaled(ru.and_then(|r| r.get("maxSurge")), replicas, 1, true).max(0);
    let mut unav = scaled(ru.and_then(|r| r.get("maxUnavailable")), replicas, 0, false).max(0);
    if surge == 0 && unav == 0 {
        unav = 1;
    }
    (surge, unav)
}

fn revision(ms: &MachineSet) -> i64 {
    ms.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(names::REVISION_ANNOTATION))
        .and_then(|r| r.parse().ok())
        .unwrap_or(0)
}

fn replicas_of(ms: &MachineSet) -> i64 {
    int_at(&ms.spec, "/replicas").unwrap_or(0)
}

fn status_int(ms: &MachineSet, field: &str) -> i64 {
    ms.status_field(&format!("/{field}"))
        .and_then(Value::as_i64)
        .unwrap_or(0)
}

/// What a reconcile decides for each set: its new replica count.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Plan {
    pub new: i64,
    /// Old sets' replica counts, by name.
    pub old: BTreeMap<String, i64>,
}

/// One set as the rollout arithmetic sees it.
#[derive(Debug, Clone)]
pub struct SetCounts {
    pub name: String,
    pub replicas: i64,
    pub available: i64,
    pub revision: i64,
}

/// The rolling update's arithmetic, as apps/v1 Deployment's: scale the new set up within
/// `replicas + surge`, then old sets down while `replicas − unavailable` stay available,
/// unavailable old machines first, oldest set first.
pub fn rolling_plan(
    replicas: i64,
    surge: i64,
    unav: i64,
    new: &SetCounts,
    olds: &[SetCounts],
) -> Plan {
    let total: i64 = new.replicas + olds.iter().map(|o| o.replicas).sum::<i64>();
    let mut plan = Plan {
        new: new.replicas,
        old: olds.iter().map(|o| (o.name.clone(), o.replicas)).collect(),
    };
    if olds.iter().all(|o| o.replicas == 0) {
        // Nothing to roll: the new set simply follows the deployment.
        plan.new = replicas;
        return plan;
    }
    if new.replicas < replicas && total < replicas + surge {
        plan.new = new.replicas + (replicas + surge - total).min(replicas - new.replicas);
    } else if new.replicas > replicas {
        plan.new = replicas;
    }
    let min_available = replicas - unav;
    let new_unavailable = (new.replicas - new.available).max(0);
    // Unavailable old machines go first: they add nothing to availability.
    let mut budget = total - min_available - new_unavailable;
    let mut sorted: Vec<&SetCounts> = olds.iter().collect();
    sorted.sort_by_key(|o| (o.revision, o.name.clone()));
    for o in &sorted {
        if budget <= 0 {
            break;
        }
        let unhealthy = (o.replicas - o.available).max(0);
        let cut = unhealthy.min(budget);
        if cut > 0 {
            *plan.old.get_mut(&o.name).expect("listed") -= cut;
            budget -= cut;
        }
    }
    // Then available ones, as long as enough stay available.
    let available: i64 = new.available
        + olds
            .iter()
            .map(|o| o.available.min(plan.old[&o.name]))
            .sum::<i64>();
    let mut budget = available - min_available - new_unavailable;
    for o in &sorted {
        if budget <= 0 {
            break;
        }
        let have = plan.old[&o.name];
        let cut = have.min(budget);
        if cut > 0 {
            *plan.old.get_mut(&o.name).expect("listed") -= cut;
            budget -= cut;
        }
    }
    plan
}

impl Ctx {
    /// The MachineSets a MachineDeployment controls.
    fn sets_of(&self, namespace: &str, uid: &str) -> Vec<Arc<MachineSet>> {
        self.sets
            .claim_candidates(runtime::client::ROOT, namespace, uid)
            .into_iter()
            .filter(|s| controller_of(&s.metadata).is_some_and(|o| o.uid == uid))
            .collect()
    }

    pub async fn reconcile_deployment(&self, key: ObjectKey) -> Result<Action> {
        let Some(md) = self.deployments.get(&key) else {
            self.expected_sets.forget(&key);
            return Ok(Action::AwaitChange);
        };
        if md.metadata.deletion_timestamp.is_some() {
            return Ok(Action::AwaitChange);
        }
        let root = self.root()?;
        let api: Api<MachineDeployment> = Api::namespaced(root.clone(), &key.namespace);
        let sets_api: Api<MachineSet> = Api::namespaced(root.clone(), &key.namespace);
        // What the defaulting webhook does upstream: replicas from the autoscaler's minimum
        // (clamped on update), else 1.
        let Some(replicas) = int_at(&md.spec, "/replicas") else {
            let ann = md.metadata.annotations.clone().unwrap_or_default();
            let min = ann
                .get(names::AUTOSCALER_MIN_ANNOTATION)
                .and_then(|v| v.parse::<i64>().ok());
            // Conditioned on what was read: an autoscaler that sized the group meanwhile wins.
            let patch = json!({"metadata": {"resourceVersion": md.metadata.resource_version}, "spec": {"replicas": min.unwrap_or(1)}});
            api.patch(&key.name, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
            return Ok(Action::AwaitChange);
        };
        let replicas = replicas.max(0);
        let uid = md.metadata.uid.clone().unwrap_or_default();
        let sets = self.sets_of(&key.namespace, &uid);
        // A set this controller just created and the informer does not show yet: its
        // arrival brings this key back (deciding now would create another).
        let (creating, _) = self.expected_sets.pending(
            &key,
            |n| sets.iter().any(|s| s.metadata.name.as_deref() == Some(n)),
            |_| true,
        );
        if !creating.is_empty() {
            return Ok(Action::AwaitChange);
        }
        let template = md.spec.get("template").cloned().unwrap_or_default();
        let identity = rollout_identity(template.get("spec").unwrap_or(&Value::Null));
        let up_to_date = |s: &MachineSet| {
            rollout_identity(s.spec.pointer("/template/spec").unwrap_or(&Value::Null)) == identity
        };
        let mut new = sets
            .iter()
            .filter(|s| s.metadata.deletion_timestamp.is_none() && up_to_date(s))
            .max_by_key(|s| (replicas_of(s), revision(s)))
            .cloned();
        let olds: Vec<Arc<MachineSet>> = sets
            .iter()
            .filter(|s| {
                new.as_ref()
                    .is_none_or(|n| n.metadata.uid != s.metadata.uid)
            })
            .cloned()
            .collect();
        let paused = md.spec.get("paused").and_then(Value::as_bool) == Some(true)
            || self
                .cluster_of(&key.namespace, &md.spec)
                .is_some_and(|c| c.spec.get("paused").and_then(Value::as_bool) == Some(true));
        let (surge, unav) = surge_and_unavailable(&md.spec, replicas);
        let max_rev = sets.iter().map(|s| revision(s)).max().unwrap_or(0);
        if new.is_none() && !paused {
            let total: i64 = olds.iter().map(|s| replicas_of(s)).sum();
            let strategy = str_at(&md.spec, "/rollout/strategy/type").unwrap_or("RollingUpdate");
            let start = if strategy == "OnDelete" {
                (replicas - total).max(0)
            } else if total == 0 {
                replicas
            } else {
                (replicas + surge - total).clamp(0, replicas)
            };
            let created = self
                .create_set(
                    &key.namespace,
                    &md,
                    &template,
                    start,
                    max_rev + 1,
                    replicas,
                    surge,
                )
                .await?;
            self.expected_sets
                .created(&key, created.metadata.name.as_deref().unwrap_or(""));
            new = Some(Arc::new(created));
        }
        let Some(new) = new else {
            return self
                .deployment_status(&api, &md, None, &sets, replicas, unav, paused)
                .await;
        };
        if paused {
            return self
                .deployment_status(&api, &md, Some(&new), &sets, replicas, unav, paused)
                .await;
        }
        // The plan.
        let counts = |s: &MachineSet| SetCounts {
            name: s.metadata.name.clone().unwrap_or_default(),
            replicas: replicas_of(s),
            available: status_int(s, "availableReplicas"),
            revision: revision(s),
        };
        let old_counts: Vec<SetCounts> = olds.iter().map(|s| counts(s)).collect();
        let plan = match str_at(&md.spec, "/rollout/strategy/type").unwrap_or("RollingUpdate") {
            "OnDelete" => {
                // Old machines go only when someone deletes them: old sets shrink to what
                // they still have, the new set makes up the rest.
                let mut p = Plan::default();
                let mut total = 0;
                for s in &olds {
                    let have = s
                        .status_field("/replicas")
                        .and_then(Value::as_i64)
                        .unwrap_or(replicas_of(s))
                        .min(replicas_of(s));
                    p.old
                        .insert(s.metadata.name.clone().unwrap_or_default(), have);
                    total += have;
                }
                p.new = (replicas - total).max(0);
                p
            }
            _ => rolling_plan(replicas, surge, unav, &counts(&new), &old_counts),
        };
        // Apply: the new set's template metadata and in-place fields follow the deployment.
        let mut new_spec_patch = json!({});
        if plan.new != replicas_of(&new) {
            new_spec_patch["replicas"] = json!(plan.new);
        }
        let tmeta = template.get("metadata").cloned().unwrap_or(json!({}));
        let mut want_meta = tmeta.clone();
        if let Some(h) = new
            .spec
            .pointer("/template/metadata/labels")
            .and_then(|l| l.get(names::TEMPLATE_HASH_LABEL))
        {
            want_meta["labels"][names::TEMPLATE_HASH_LABEL] = h.clone();
        }
        if new.spec.pointer("/template/metadata") != Some(&want_meta) {
            new_spec_patch["template"] = json!({"metadata": want_meta});
        }
        for f in ["minReadySeconds"] {
            if md.spec.pointer(&format!("/template/spec/{f}"))
                != new.spec.pointer(&format!("/template/spec/{f}"))
            {
                new_spec_patch["template"]["spec"][f] = md
                    .spec
                    .pointer(&format!("/template/spec/{f}"))
                    .cloned()
                    .unwrap_or(Value::Null);
            }
        }
        if md.spec.get("deletion") != new.spec.get("deletion") {
            new_spec_patch["deletion"] = md.spec.get("deletion").cloned().unwrap_or(Value::Null);
        }
        let ann = new.metadata.annotations.clone().unwrap_or_default();
        let want_ann = [
            (names::DESIRED_REPLICAS_ANNOTATION, replicas.to_string()),
            (
                names::MAX_REPLICAS_ANNOTATION,
                (replicas + surge).to_string(),
            ),
        ];
        let ann_patch: serde_json::Map<String, Value> = want_ann
            .iter()
            .filter(|(k, v)| ann.get(*k) != Some(v))
            .map(|(k, v)| (k.to_string(), json!(v)))
            .collect();
        if new_spec_patch.as_object().is_some_and(|o| !o.is_empty()) || !ann_patch.is_empty() {
            let patch = json!({"metadata": {"annotations": ann_patch}, "spec": new_spec_patch});
            sets_api
                .patch(
                    new.metadata.name.as_deref().unwrap_or(""),
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await?;
        }
        for s in &olds {
            let name = s.metadata.name.clone().unwrap_or_default();
            let want = plan.old.get(&name).copied().unwrap_or(replicas_of(s));
            if want != replicas_of(s) {
                let patch = json!({"spec": {"replicas": want}});
                sets_api
                    .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await?;
            }
        }
        // History: one old empty set is kept; older empty ones go.
        let mut empty: Vec<&Arc<MachineSet>> = olds
            .iter()
            .filter(|s| {
                replicas_of(s) == 0
                    && status_int(s, "replicas") == 0
                    && plan.old.get(s.metadata.name.as_deref().unwrap_or("")) == Some(&0)
            })
            .collect();
        empty.sort_by_key(|s| std::cmp::Reverse(revision(s)));
        for s in empty.into_iter().skip(1) {
            if s.metadata.deletion_timestamp.is_none() {
                ignore_not_found(
                    sets_api
                        .delete(
                            s.metadata.name.as_deref().unwrap_or(""),
                            &DeleteParams::default(),
                        )
                        .await,
                )?;
            }
        }
        self.deployment_status(&api, &md, Some(&new), &sets, replicas, unav, paused)
            .await
    }

    #[allow(clippy::too_many_arguments)]
    async fn create_set(
        &self,
        namespace: &str,
        md: &Arc<MachineDeployment>,
        template: &Value,
        replicas: i64,
        revision: i64,
        desired: i64,
        surge: i64,
    ) -> Result<MachineSet> {
        let md_name = md.metadata.name.clone().unwrap_or_default();
        let hash = format!(
            "{}-{}",
            names::fnv32a(
                rollout_identity(template.get("spec").unwrap_or(&Value::Null))
                    .to_string()
                    .as_bytes()
            ),
            names::random_suffix()
        );
        let cluster = str_at(&md.spec, "/clusterName").unwrap_or("");
        let mut tmpl = template.clone();
        tmpl["metadata"]["labels"][names::TEMPLATE_HASH_LABEL] = json!(hash);
        tmpl["metadata"]["labels"][names::DEPLOYMENT_NAME_LABEL] = json!(md_name);
        tmpl["metadata"]["labels"][names::CLUSTER_NAME_LABEL] = json!(cluster);
        let mut selector = md.spec.get("selector").cloned().unwrap_or(json!({}));
        selector["matchLabels"][names::TEMPLATE_HASH_LABEL] = json!(hash);
        let mut labels: BTreeMap<String, String> = md.metadata.labels.clone().unwrap_or_default();
        labels.insert(names::CLUSTER_NAME_LABEL.into(), cluster.into());
        labels.insert(names::DEPLOYMENT_NAME_LABEL.into(), md_name.clone());
        labels.insert(names::TEMPLATE_HASH_LABEL.into(), hash.clone());
        let name = names::generate(&md_name);
        let ms: MachineSet = serde_json::from_value(json!({
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": labels,
                "annotations": {
                    names::REVISION_ANNOTATION: revision.to_string(),
                    names::DESIRED_REPLICAS_ANNOTATION: desired.to_string(),
                    names::MAX_REPLICAS_ANNOTATION: (desired + surge).to_string(),
                },
                "ownerReferences": [owner_ref(&**md)],
            },
            "spec": {
                "clusterName": cluster,
                "replicas": replicas,
                "selector": selector,
                "template": tmpl,
            },
        }))?;
        let mut ms = ms;
        if let Some(d) = md
            .spec
            .get("deletion")
            .filter(|d| d.as_object().is_some_and(|o| !o.is_empty()))
        {
            ms.spec["deletion"] = d.clone();
        }
        let api: Api<MachineSet> = Api::namespaced(self.root()?, namespace);
        let created = api.create(&PostParams::default(), &ms).await?;
        self.recorder.record(
            runtime::client::ROOT,
            runtime::events::reference(&**md),
            "Normal",
            "SuccessfulCreate",
            format!("Created MachineSet {name:?} with {replicas} replicas (revision {revision})"),
        );
        Ok(created)
    }

    #[allow(clippy::too_many_arguments)]
    async fn deployment_status(
        &self,
        api: &Api<MachineDeployment>,
        md: &MachineDeployment,
        new: Option<&Arc<MachineSet>>,
        sets: &[Arc<MachineSet>],
        replicas: i64,
        unav: i64,
        paused: bool,
    ) -> Result<Action> {
        let sum = |f: &str| sets.iter().map(|s| status_int(s, f)).sum::<i64>();
        let current = sum("replicas");
        let ready = sum("readyReplicas");
        let available = sum("availableReplicas");
        let up_to_date = new.map_or(0, |n| status_int(n, "upToDateReplicas"));
        let rolling_out = sets.iter().any(|s| {
            new.is_none_or(|n| n.metadata.uid != s.metadata.uid)
                && (replicas_of(s) > 0 || status_int(s, "replicas") > 0)
        });
        let phase = if current < replicas {
            "ScalingUp"
        } else if current > replicas {
            "ScalingDown"
        } else {
            "Running"
        };
        let is_available = available >= replicas - unav;
        let old = md.status.clone().unwrap_or_else(|| json!({}));
        let mut status = old.clone();
        status["replicas"] = json!(current);
        status["readyReplicas"] = json!(ready);
        status["availableReplicas"] = json!(available);
        status["upToDateReplicas"] = json!(up_to_date);
        status["selector"] = json!(selector_string(md.spec.get("selector")));
        status["phase"] = json!(phase);
        status["observedGeneration"] = json!(md.metadata.generation);
        status["conditions"] = cond::merge(
            old.get("conditions"),
            &[
                Cond::of(
                    "Available",
                    is_available,
                    if is_available {
                        "Available"
                    } else {
                        "NotAvailable"
                    },
                    format!(
                        "{available} available, {} required",
                        (replicas - unav).max(0)
                    ),
                ),
                Cond::of(
                    "RollingOut",
                    rolling_out,
                    if rolling_out {
                        "RollingOut"
                    } else {
                        "NotRollingOut"
                    },
                    "",
                ),
                Cond::of(
                    "ScalingUp",
                    current < replicas,
                    if current < replicas {
                        "ScalingUp"
                    } else {
                        "NotScalingUp"
                    },
                    "",
                ),
                Cond::of(
                    "ScalingDown",
                    current > replicas,
                    if current > replicas {
                        "ScalingDown"
                    } else {
                        "NotScalingDown"
                    },
                    "",
                ),
                Cond::of(
                    "MachinesReady",
                    ready == current,
                    if ready == current {
                        "Ready"
                    } else {
                        "NotReady"
                    },
                    format!("{ready} of {current} machines ready"),
                ),
                Cond::of(
                    "Paused",
                    paused,
                    if paused { "Paused" } else { "NotPaused" },
                    "",
                ),
            ],
            md.metadata.generation,
        );
        if status != old {
            api.patch_status(
                md.metadata.name.as_deref().unwrap_or(""),
                &PatchParams::apply(FIELD_MANAGER),
                &Patch::Merge(json!({"status": status})),
            )
            .await?;
        }
        Ok(Action::AwaitChange)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(name: &str, replicas: i64, available: i64, revision: i64) -> SetCounts {
        SetCounts {
            name: name.into(),
            replicas,
            available,
            revision,
        }
    }

    #[test]
    fn percentages_round_up_for_surge_and_down_for_unavailable() {
        let md = json!({"rollout": {"strategy": {"rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}}});
        assert_eq!(surge_and_unavailable(&md, 10), (3, 2));
        let zero = json!({"rollout": {"strategy": {"rollingUpdate": {"maxSurge": 0, "maxUnavailable": 0}}}});
        assert_eq!(surge_and_unavailable(&zero, 3), (0, 1));
        assert_eq!(surge_and_unavailable(&json!({}), 3), (1, 0));
    }

    #[test]
    fn a_rolling_update_with_surge_one_and_no_unavailability_replaces_one_machine_at_a_time() {
        // Start: old has 3 available, new has 0.
        let p = rolling_plan(3, 1, 0, &set("new", 0, 0, 2), &[set("old", 3, 3, 1)]);
        assert_eq!(p.new, 1);
        assert_eq!(
            p.old["old"], 3,
            "nothing goes before the new machine is available"
        );
        // The new machine is available: one old machine goes.
        let p = rolling_plan(3, 1, 0, &set("new", 1, 1, 2), &[set("old", 3, 3, 1)]);
        assert_eq!(p.old["old"], 2);
        // Then the next new one.
        let p = rolling_plan(3, 1, 0, &set("new", 1, 1, 2), &[set("old", 2, 2, 1)]);
        assert_eq!(p.new, 2);
    }

    #[test]
    fn unavailable_old_machines_are_scaled_down_first() {
        // One of three old machines is broken and the new one is available: the broken
        // one goes, and availability allows nothing more.
        let p = rolling_plan(3, 1, 0, &set("new", 1, 1, 3), &[set("a", 3, 2, 1)]);
        assert_eq!(p.old["a"], 2);
        // While the new machine is not available, nothing goes.
        let p = rolling_plan(3, 1, 0, &set("new", 1, 0, 3), &[set("a", 3, 2, 1)]);
        assert_eq!(p.old["a"], 3);
    }

    #[test]
    fn a_new_set_alone_follows_the_deployment_replicas() {
        let p = rolling_plan(5, 1, 0, &set("new", 2, 2, 1), &[]);
        assert_eq!(p.new, 5);
        let p = rolling_plan(1, 1, 0, &set("new", 4, 4, 1), &[set("old", 0, 0, 0)]);
        assert_eq!(p.new, 1);
    }

    #[test]
    fn selectors_print_as_their_string_form() {
        let s = json!({"matchLabels": {"b": "2", "a": "1"}, "matchExpressions": [{"key": "c", "operator": "In", "values": ["x", "y"]}, {"key": "d", "operator": "DoesNotExist"}]});
        assert_eq!(selector_string(Some(&s)), "a=1,b=2,c in (x,y),!d");
    }
}
