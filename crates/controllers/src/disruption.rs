//! The disruption controller (upstream `pkg/controller/disruption`): keeps each
//! PodDisruptionBudget's status — `expectedPods`, `currentHealthy`, `desiredHealthy`,
//! `disruptionsAllowed`, the `DisruptionAllowed` condition and `observedGeneration` — which
//! the eviction subresource reads and decrements.
//!
//! `minAvailable` as a number needs only the matching pods; a percentage, or
//! `maxUnavailable`, is taken of the scale of the pods' controllers (Deployments through
//! their ReplicaSets, ReplicaSets, StatefulSets, ReplicationControllers). Pods the eviction
//! subresource recorded in `disruptedPods` do not count as healthy until they are gone or two
//! minutes have passed.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{Pod, ReplicationController};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::PostParams;
use serde_json::{Value, json};

use crate::podutil;
use runtime::client::ClusterClients;
use runtime::error::{Error, Result};
use runtime::informer::{ObjectKey, Store};
use runtime::queue::{Action, Queue};
use runtime::shared::Informers;

/// How long an eviction's record keeps a pod from counting (upstream `DeletionTimeout`).
pub const DELETION_TIMEOUT: Duration = Duration::from_secs(120);

/// The disruption controller.
pub struct DisruptionController {
    clients: ClusterClients,
    budgets: Store<PodDisruptionBudget>,
    pods: Store<Pod>,
    queue: Arc<Queue<ObjectKey>>,
}

fn matches(pdb: &PodDisruptionBudget, pod: &Pod) -> bool {
    let sel = pdb.spec.as_ref().and_then(|s| s.selector.as_ref());
    // policy/v1: an empty selector selects every pod of the namespace, none selects none.
    match sel {
        None => false,
        Some(s)
            if s.match_labels.as_ref().is_none_or(|m| m.is_empty())
                && s.match_expressions.as_ref().is_none_or(|e| e.is_empty()) =>
        {
            true
        }
        Some(_) => podutil::selector_matches(sel, &podutil::labels(&pod.metadata)),
    }
}

/// `value` of `total`, rounding up for percentages (upstream `GetScaledValueFromIntOrPercent`).
fn scaled(v: &IntOrString, total: i64) -> std::result::Result<i64, String> {
    match v {
        IntOrString::Int(i) => Ok(i64::from(*i)),
        IntOrString::String(s) => {
            let p: i64 = s
                .strip_suffix('%')
                .and_then(|p| p.parse().ok())
                .ok_or_else(|| format!("invalid value for IntOrString: invalid value {s:?}"))?;
            Ok(((p.max(0) as u64) * (total.max(0) as u64)).div_ceil(100) as i64)
        }
    }
}

impl DisruptionController {
    pub fn new(informers: &Informers) -> Result<Arc<Self>> {
        let queue: Arc<Queue<ObjectKey>> = Queue::new();
        let budgets = informers.get::<PodDisruptionBudget>()?;
        let pods = informers.get::<Pod>()?;
        let q = queue.clone();
        budgets.on_change(move |c| q.add(c.key().clone()));
        let (q, s) = (queue.clone(), budgets.store());
        pods.on_change(move |c| {
            let k = c.key();
            for b in s.list_namespace(&k.cluster, &k.namespace) {
                if matches(&b, c.object()) {
                    let name = b.metadata.name.as_deref().unwrap_or_default();
                    q.add(ObjectKey::new(&k.cluster, &k.namespace, name));
                }
            }
        });
        Ok(Arc::new(DisruptionController {
            clients: informers.clients().clone(),
            budgets: budgets.store(),
            pods: pods.store(),
            queue,
        }))
    }

    pub fn queue(&self) -> Arc<Queue<ObjectKey>> {
        self.queue.clone()
    }

    /// The summed scale of the controllers of `pods` (upstream `getExpectedScale`).
    async fn expected_scale(
        &self,
        client: &kube::Client,
        ns: &str,
        pods: &[Arc<Pod>],
    ) -> Result<i64> {
        let mut seen: BTreeMap<(String, String), i64> = BTreeMap::new();
        for p in pods {
            let Some(r) = podutil::controller_ref(&p.metadata) else {
                return Err(Error::Retry(format!(
                    "found no controller ref for pod {:?}",
                    p.metadata.name.as_deref().unwrap_or_default()
                )));
            };
            let id = (r.kind.clone(), r.name.clone());
            if seen.contains_key(&id) {
                continue;
            }
            let scale = match r.kind.as_str() {
                "ReplicaSet" => {
                    let rs = Api::<ReplicaSet>::namespaced(client.clone(), ns)
                        .get(&r.name)
                        .await?;
                    match podutil::controller_ref(&rs.metadata).filter(|o| o.kind == "Deployment") {
                        Some(d) => {
                            let dep = Api::<Deployment>::namespaced(client.clone(), ns)
                                .get(&d.name)
                                .await?;
                            seen.insert(("Deployment".into(), d.name.clone()), 0);
                            dep.spec.and_then(|s| s.replicas).unwrap_or(1)
                        }
                        None => rs.spec.and_then(|s| s.replicas).unwrap_or(1),
                    }
                }
                "StatefulSet" => Api::<StatefulSet>::namespaced(client.clone(), ns)
                    .get(&r.name)
                    .await?
                    .spec
                    .and_then(|s| s.replicas)
                    .unwrap_or(1),
                "ReplicationController" => {
                    Api::<ReplicationController>::namespaced(client.clone(), ns)
                        .get(&r.name)
                        .await?
                        .spec
                        .and_then(|s| s.replicas)
                        .unwrap_or(1)
                }
                other => {
                    return Err(Error::Retry(format!(
                        "unsupported controller kind {other:?} of pod"
                    )));
                }
            };
            seen.insert(id, i64::from(scale));
        }
        Ok(seen.values().sum())
    }

    /// Recomputes one budget's status.
    pub async fn reconcile(&self, key: ObjectKey) -> Result<Action> {
        let Some(pdb) = self.budgets.get(&key) else {
            return Ok(Action::AwaitChange);
        };
        if pdb.metadata.deletion_timestamp.is_some() {
            return Ok(Action::AwaitChange);
        }
        let client = self.clients.cluster(&key.cluster)?;
        let pods: Vec<Arc<Pod>> = self
            .pods
            .list_namespace(&key.cluster, &key.namespace)
            .into_iter()
            .filter(|p| matches(&pdb, p))
            .collect();
        let now = Timestamp::now();
        let status = pdb.status.clone().unwrap_or_default();
        // Evictions not yet seen through: pods still present and recorded recently.
        let mut disrupted = BTreeMap::new();
        let mut next_check: Option<Duration> = None;
        for (name, t) in status.disrupted_pods.clone().unwrap_or_default() {
            let alive = pods.iter().any(|p| {
                p.metadata.name.as_deref() == Some(name.as_str())
                    && p.metadata.deletion_timestamp.is_none()
            });
            let age = now.as_second() - t.0.as_second();
            if alive && age < DELETION_TIMEOUT.as_secs() as i64 {
                let left =
                    Duration::from_secs((DELETION_TIMEOUT.as_secs() as i64 - age).max(1) as u64);
                next_check = Some(next_check.map_or(left, |n: Duration| n.min(left)));
                disrupted.insert(name, t);
            }
        }
        let healthy = pods
            .iter()
            .filter(|p| {
                p.metadata.deletion_timestamp.is_none()
                    && podutil::is_ready(p)
                    && !disrupted.contains_key(p.metadata.name.as_deref().unwrap_or_default())
            })
            .count() as i64;
        let spec = pdb.spec.clone().unwrap_or_default();
        let active: Vec<Arc<Pod>> = pods
            .iter()
            .filter(|p| podutil::is_active(p))
            .cloned()
            .collect();
        let counts: std::result::Result<(i64, i64), String> = async {
            match (&spec.max_unavailable, &spec.min_available) {
                (Some(mu), _) => {
                    let expected = self
                        .expected_scale(&client, &key.namespace, &active)
                        .await
                        .map_err(|e| e.to_string())?;
                    Ok((expected, (expected - scaled(mu, expected)?).max(0)))
                }
                (None, Some(IntOrString::Int(i))) => Ok((pods.len() as i64, i64::from(*i))),
                (None, Some(ma)) => {
                    let expected = self
                        .expected_scale(&client, &key.namespace, &active)
                        .await
                        .map_err(|e| e.to_string())?;
                    Ok((expected, scaled(ma, expected)?))
                }
                (None, None) => Ok((pods.len() as i64, 0)),
            }
        }
        .await;
        let generation = pdb.metadata.generation.unwrap_or(0);
        let (expected, desired, allowed, cond) = match &counts {
            Ok((expected, desired)) => {
                let mut allowed = healthy - desired;
                if *expected <= 0 || allowed <= 0 {
                    allowed = 0;
                }
                let c = if allowed > 0 {
                    ("True", "SufficientPods", String::new())
                } else {
                    ("False", "InsufficientPods", String::new())
                };
                (*expected, *desired, allowed, c)
            }
            Err(e) => (0, 0, 0, ("False", "SyncFailed", e.clone())),
        };
        let old_cond = status
            .conditions
            .as_ref()
            .and_then(|cs| cs.iter().find(|c| c.type_ == "DisruptionAllowed"));
        let transition = match old_cond {
            Some(c) if c.status == cond.0 => json!(c.last_transition_time),
            _ => json!(now.to_string()),
        };
        let next: Value = json!({
            "observedGeneration": generation,
            "disruptedPods": if disrupted.is_empty() { Value::Null } else { json!(disrupted) },
            "disruptionsAllowed": allowed,
            "currentHealthy": healthy,
            "desiredHealthy": desired,
            "expectedPods": expected,
            "conditions": [{
                "type": "DisruptionAllowed",
                "status": cond.0,
                "reason": cond.1,
                "message": cond.2,
                "observedGeneration": generation,
                "lastTransitionTime": transition,
            }],
        });
        let next_status = serde_json::from_value(next)?;
        if pdb.status.as_ref() != Some(&next_status) {
            let mut obj = (*pdb).clone();
            obj.status = Some(next_status);
            let api: Api<PodDisruptionBudget> = Api::namespaced(client, &key.namespace);
            match api
                .replace_status(&key.name, &PostParams::default(), &obj)
                .await
            {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => return Ok(Action::AwaitChange),
                Err(e) => return Err(e.into()),
            }
        }
        if let Err(e) = counts {
            return Err(Error::Retry(e));
        }
        Ok(next_check.map_or(Action::AwaitChange, Action::RequeueAfter))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentages_of_the_scale_round_up() {
        assert_eq!(scaled(&IntOrString::String("50%".into()), 5), Ok(3));
        assert_eq!(scaled(&IntOrString::String("10%".into()), 10), Ok(1));
        assert_eq!(scaled(&IntOrString::Int(2), 10), Ok(2));
    }

    #[test]
    fn a_malformed_percentage_is_an_error() {
        assert!(scaled(&IntOrString::String("half".into()), 4).is_err());
    }

    #[test]
    fn an_empty_selector_selects_every_pod_and_none_selects_none() {
        let pod: Pod = serde_json::from_value(json!({"metadata": {"labels": {"a": "b"}}})).unwrap();
        let pdb = |sel: Value| -> PodDisruptionBudget {
            serde_json::from_value(json!({"spec": {"selector": sel}})).unwrap()
        };
        assert!(matches(&pdb(json!({})), &pod));
        assert!(!matches(&pdb(Value::Null), &pod));
        assert!(!matches(&pdb(json!({"matchLabels": {"a": "c"}})), &pod));
    }
}
