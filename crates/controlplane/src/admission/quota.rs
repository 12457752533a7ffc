//! The ResourceQuota admission plugin (upstream `plugin/pkg/admission/resourcequota`):
//! refuses a create that would take a quota's usage past its hard limits and charges the
//! create to every quota that covers it.
//!
//! Quotas are judged by their status (`status.hard` and `status.used`, which the ResourceQuota
//! controller keeps), as upstream does: a quota without status is not enforced yet, and one
//! whose usage of a covered resource is unknown refuses creates until the controller has
//! counted. The charge is a compare-and-swap of the quota's status on its resourceVersion,
//! retried from a fresh read on conflict, with the limits checked again against what was
//! read, so concurrent creates cannot together exceed a quota.

use std::collections::BTreeSet;

use apimachinery::meta;
use apimachinery::status::ApiError;
use registry::ResourceDef;
use registry::store::{Location, WriteOptions, unix_now};
use serde_json::Value;

use crate::ControlPlane;
use apimachinery::quota::{self as eval, ResourceList};

/// Why a create was refused.
pub enum Refused {
    /// A 403 with this explanation.
    Forbidden(String),
    /// Charging failed.
    Api(ApiError),
}

fn status_list(quota: &Value, field: &str) -> ResourceList {
    eval::parse_list(quota.pointer(&format!("/status/{field}")))
}

/// The new usage of `quota` with `delta` charged, or upstream's "exceeded quota" message.
/// `None` when the quota limits none of `delta`'s resources.
fn charged(quota: &Value, delta: &ResourceList) -> Result<Option<ResourceList>, String> {
    let hard = status_list(quota, "hard");
    let used = status_list(quota, "used");
    let requested = eval::mask(delta, hard.keys());
    if requested.is_empty() {
        return Ok(None);
    }
    let mut next = used.clone();
    eval::add(&mut next, &requested);
    let exceeded: Vec<String> = requested
        .keys()
        .filter(|k| matches!((next.get(*k), hard.get(*k)), (Some(n), Some(h)) if n > h))
        .cloned()
        .collect();
    if exceeded.is_empty() {
        return Ok(Some(next));
    }
    Err(format!(
        "exceeded quota: {}, requested: {}, used: {}, limited: {}",
        meta::name(quota),
        eval::pretty(&eval::mask(&requested, &exceeded)),
        eval::pretty(&eval::mask(&used, &exceeded)),
        eval::pretty(&eval::mask(&hard, &exceeded)),
    ))
}

/// Checks `obj` (defaulted and validated) against the namespace's `quotas` and, unless
/// `dry_run`, charges it to each quota that limits what it uses.
pub async fn charge(
    cp: &ControlPlane,
    cluster: &str,
    res: &ResourceDef,
    namespace: &str,
    quotas: &[Value],
    obj: &Value,
    dry_run: bool,
) -> Result<(), Refused> {
    let (group, plural) = (res.group.as_str(), res.plural.as_str());
    let mut delta = eval::usage(group, plural, obj, unix_now());
    delta.retain(|_, q| !q.is_zero());
    let mut interesting = Vec::new();
    for q in quotas {
        let qname = meta::name(q);
        let hard = status_list(q, "hard");
        let restricted: BTreeSet<String> = hard
            .keys()
            .filter(|k| eval::charges(group, plural, k))
            .cloned()
            .collect();
        if restricted.is_empty() || !eval::scopes_match(q, group, plural, obj) {
            continue;
        }
        if group.is_empty() && plural == "pods" {
            eval::pod_constraints(&restricted, obj)
                .map_err(|e| Refused::Forbidden(format!("failed quota: {qname}: {e}")))?;
        }
        let used = status_list(q, "used");
        if restricted.iter().any(|r| !used.contains_key(r)) {
            return Err(Refused::Forbidden(format!(
                "status unknown for quota: {qname}, resources: {}",
                restricted.iter().cloned().collect::<Vec<_>>().join(",")
            )));
        }
        // Fail fast on what the cache shows; the charge below checks again atomically.
        if charged(q, &delta).map_err(Refused::Forbidden)?.is_some() {
            interesting.push(qname.to_string());
        }
    }
    if dry_run || delta.is_empty() {
        return Ok(());
    }
    let Some(rq) = cp.catalog.builtin("", "resourcequotas") else {
        return Ok(());
    };
    let opts = WriteOptions {
        dry_run: false,
        subresource: Some("status".into()),
        ..Default::default()
    };
    for qname in interesting {
        let loc = Location {
            cluster,
            namespace,
            name: &qname,
        };
        let result = cp
            .store
            .update_with(&rq, &loc, &opts, |cur| {
                let Some(cur) = cur else {
                    return Err(ApiError::not_found("resourcequotas", "", &qname));
                };
                let mut next = cur.clone();
                match charged(cur, &delta) {
                    Ok(Some(used)) => next["status"]["used"] = eval::to_json(&used),
                    Ok(None) => {}
                    Err(why) => return Err(ApiError::forbidden(&res.plural, group, "", &why)),
                }
                meta::remove(&mut next, "resourceVersion");
                Ok(next)
            })
            .await;
        match result {
            Ok(_) => {}
            // A quota deleted meanwhile limits nothing.
            Err(e) if e.code == 404 => {}
            Err(e) if e.code == 403 => {
                let why = e
                    .message
                    .split_once("is forbidden: ")
                    .map(|(_, w)| w.to_string())
                    .unwrap_or(e.message);
                return Err(Refused::Forbidden(why));
            }
            Err(e) => return Err(Refused::Api(e)),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn quota(hard: Value, used: Value) -> Value {
        json!({"metadata": {"name": "q"}, "status": {"hard": hard, "used": used}})
    }

    #[test]
    fn exceeding_a_limit_names_the_requested_used_and_limited_amounts() {
        let q = quota(
            json!({"requests.cpu": "1", "pods": "10"}),
            json!({"requests.cpu": "0", "pods": "0"}),
        );
        let mut delta = ResourceList::new();
        delta.insert("requests.cpu".into(), "2".parse().unwrap());
        delta.insert("pods".into(), "1".parse().unwrap());
        assert_eq!(
            charged(&q, &delta),
            Err("exceeded quota: q, requested: requests.cpu=2, used: requests.cpu=0, limited: requests.cpu=1".into())
        );
    }

    #[test]
    fn a_charge_within_limits_adds_to_the_usage() {
        let q = quota(json!({"pods": "2"}), json!({"pods": "1"}));
        let mut delta = ResourceList::new();
        delta.insert("pods".into(), "1".parse().unwrap());
        delta.insert("requests.cpu".into(), "1".parse().unwrap());
        let used = charged(&q, &delta).unwrap().unwrap();
        assert_eq!(eval::pretty(&used), "pods=2");
    }

    #[test]
    fn a_quota_limiting_nothing_requested_is_not_charged() {
        let q = quota(json!({"services": "2"}), json!({"services": "0"}));
        let mut delta = ResourceList::new();
        delta.insert("pods".into(), "1".parse().unwrap());
        assert_eq!(charged(&q, &delta), Ok(None));
    }
}
