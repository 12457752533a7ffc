//! The namespace lifecycle controller (upstream `pkg/controller/namespace`): empties a
//! terminating namespace, then finalizes it.
//!
//! A namespace being deleted (deletionTimestamp set, `status.phase` Terminating) is held by the
//! server while `spec.finalizers` is non-empty. This controller discovers every namespaced
//! resource the namespace's cluster serves, deletes the namespace's content of each (a delete
//! collection where supported, else one by one), reports the `NamespaceDeletion*` and
//! `Namespace*Remaining` conditions, retries while content remains, and finally removes the
//! `kubernetes` finalizer through `PUT /api/v1/namespaces/<n>/finalize`.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Namespace, NamespaceCondition, NamespaceStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, DynamicObject, ListParams, PostParams};
use kube::discovery::{ApiCapabilities, ApiResource, Discovery, Scope, verbs};
use kube::{Api, ResourceExt};

use runtime::client::ClusterClients;
use runtime::error::{Error, Result};
use runtime::informer::{Change, ObjectKey};
use runtime::queue::{Action, Queue};
use runtime::shared::Informers;

/// The finalizer this controller owns.
pub const FINALIZER: &str = "kubernetes";

/// The condition types this controller maintains, in upstream order, with their "all is well"
/// reason and message.
const CONDITIONS: [(&str, &str, &str); 5] = [
    (
        "NamespaceDeletionDiscoveryFailure",
        "ResourcesDiscovered",
        "All resources successfully discovered",
    ),
    (
        "NamespaceDeletionGroupVersionParsingFailure",
        "ParsedGroupVersions",
        "All legacy kube types successfully parsed",
    ),
    (
        "NamespaceDeletionContentFailure",
        "ContentDeleted",
        "All content successfully deleted, may be waiting on finalization",
    ),
    (
        "NamespaceContentRemaining",
        "ContentRemoved",
        "All content successfully removed",
    ),
    (
        "NamespaceFinalizersRemaining",
        "ContentRemoved",
        "All content successfully removed",
    ),
];

/// The namespace controller.
pub struct NamespaceController {
    clients: ClusterClients,
    queue: Arc<Queue<ObjectKey>>,
}

/// What deleting a namespace's content found.
#[derive(Debug, Default)]
pub struct ContentReport {
    /// Failing condition (type, reason, message) per condition type.
    pub failures: BTreeMap<&'static str, (String, String)>,
    /// Objects still present.
    pub remaining: usize,
}

impl NamespaceController {
    pub fn new(informers: &Informers) -> Result<Arc<Self>> {
        let queue = Queue::new();
        let q = queue.clone();
        informers.get::<Namespace>()?.on_change(move |c| {
            if let Change::Added(k, ns)
            | Change::Updated {
                key: k, new: ns, ..
            } = c
                && ns.metadata.deletion_timestamp.is_some()
            {
                q.add((*k).clone());
            }
        });
        Ok(Arc::new(NamespaceController {
            clients: informers.clients().clone(),
            queue,
        }))
    }

    pub fn queue(&self) -> Arc<Queue<ObjectKey>> {
        self.queue.clone()
    }

    /// Reconciles one namespace.
    pub async fn reconcile(&self, key: ObjectKey) -> Result<Action> {
        let client = self.clients.cluster(&key.cluster)?;
        let api: Api<Namespace> = Api::all(client.clone());
        let Some(mut ns) = runtime::error::ignore_not_found(api.get(&key.name).await)? else {
            return Ok(Action::AwaitChange);
        };
        if ns.metadata.deletion_timestamp.is_none() || !has_finalizer(&ns) {
            return Ok(Action::AwaitChange);
        }
        let report = delete_all_content(client, &key.name).await;
        let mut status = ns.status.clone().unwrap_or_default();
        if update_conditions(&mut status, &report) {
            ns.status = Some(status);
            match api
                .replace_status(&key.name, &PostParams::default(), &ns)
                .await
            {
                Ok(n) => ns = n,
                Err(kube::Error::Api(s)) if s.code == 404 => return Ok(Action::AwaitChange),
                Err(e) => return Err(e.into()),
            }
        }
        if let Some((_, msg)) = report.failures.get("NamespaceDeletionContentFailure") {
            return Err(Error::Retry(msg.clone()));
        }
        if report.remaining > 0 {
            return Err(Error::Retry(format!(
                "namespace {key} has {} objects remaining",
                report.remaining
            )));
        }
        finalize(&api, &mut ns).await?;
        Ok(Action::AwaitChange)
    }
}

fn has_finalizer(ns: &Namespace) -> bool {
    ns.spec
        .as_ref()
        .and_then(|s| s.finalizers.as_ref())
        .is_some_and(|f| f.iter().any(|x| x == FINALIZER))
}

/// Removes this controller's finalizer through the `finalize` subresource.
async fn finalize(api: &Api<Namespace>, ns: &mut Namespace) -> Result<()> {
    let name = ns.name_any();
    if let Some(f) = ns.spec.as_mut().and_then(|s| s.finalizers.as_mut()) {
        f.retain(|x| x != FINALIZER);
    }
    let req = http::Request::put(format!("/api/v1/namespaces/{name}/finalize"))
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(serde_json::to_vec(ns)?)
        .map_err(|e| Error::Config(e.to_string()))?;
    match api.clone().into_client().request::<Namespace>(req).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// The namespaced resources of a cluster that can be listed and deleted.
async fn discover(client: kube::Client) -> Result<Vec<(ApiResource, ApiCapabilities)>> {
    let discovery = match Discovery::new(client.clone()).run_aggregated().await {
        Ok(d) => d,
        Err(_) => Discovery::new(client).run().await?,
    };
    let mut out = Vec::new();
    for group in discovery.groups() {
        for (ar, caps) in group.recommended_resources() {
            if caps.scope == Scope::Namespaced
                && caps.supports_operation(verbs::LIST)
                && caps.supports_operation(verbs::DELETE)
            {
                out.push((ar, caps));
            }
        }
    }
    Ok(out)
}

/// Deletes everything in `namespace` and counts what remains.
pub async fn delete_all_content(client: kube::Client, namespace: &str) -> ContentReport {
    let mut report = ContentReport::default();
    let resources = match discover(client.clone()).await {
        Ok(r) => r,
        Err(e) => {
            report.failures.insert(
                "NamespaceDeletionDiscoveryFailure",
                ("DiscoveryFailed".into(), e.to_string()),
            );
            report.remaining = 1;
            return report;
        }
    };
    let mut errors = Vec::new();
    let mut remaining_by_gvr = Vec::new();
    let mut by_finalizer: BTreeMap<String, usize> = BTreeMap::new();
    for (ar, caps) in resources {
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &ar);
        let deleted = if caps.supports_operation(verbs::DELETE_COLLECTION) {
            api.delete_collection(&DeleteParams::background(), &ListParams::default())
                .await
                .map(|_| ())
        } else {
            delete_each(&api).await
        };
        if let Err(e) = deleted {
            errors.push(format!("{}.{}: {e}", ar.plural, ar.group));
            continue;
        }
        match api.list_metadata(&ListParams::default()).await {
            Ok(list) if !list.items.is_empty() => {
                remaining_by_gvr.push(format!(
                    "{}.{} has {} resource instances",
                    ar.plural,
                    ar.group,
                    list.items.len()
                ));
                report.remaining += list.items.len();
                for item in &list.items {
                    for f in item.finalizers() {
                        *by_finalizer.entry(f.clone()).or_default() += 1;
                    }
                }
            }
            Ok(_) => {}
            Err(e) => errors.push(format!("{}.{}: {e}", ar.plural, ar.group)),
        }
    }
    if !errors.is_empty() {
        errors.sort();
        report.failures.insert(
            "NamespaceDeletionContentFailure",
            (
                "ContentDeletionFailed".into(),
                format!(
                    "Failed to delete all resource types, {} remaining: {}",
                    errors.len(),
                    errors.join(", ")
                ),
            ),
        );
    }
    if !remaining_by_gvr.is_empty() {
        remaining_by_gvr.sort();
        report.failures.insert(
            "NamespaceContentRemaining",
            (
                "SomeResourcesRemain".into(),
                format!(
                    "Some resources are remaining: {}",
                    remaining_by_gvr.join(", ")
                ),
            ),
        );
    }
    if !by_finalizer.is_empty() {
        let parts: Vec<String> = by_finalizer
            .iter()
            .map(|(f, n)| format!("{f} in {n} resource instances"))
            .collect();
        report.failures.insert(
            "NamespaceFinalizersRemaining",
            (
                "SomeFinalizerRemain".into(),
                format!("Some finalizers are remaining: {}", parts.join(", ")),
            ),
        );
    }
    report
}

async fn delete_each(api: &Api<DynamicObject>) -> Result<(), kube::Error> {
    for item in api.list_metadata(&ListParams::default()).await?.items {
        match api
            .delete(&item.name_any(), &DeleteParams::background())
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Sets every condition this controller maintains from `report`; whether anything changed.
/// The transition time moves only when a condition's status does.
pub fn update_conditions(status: &mut NamespaceStatus, report: &ContentReport) -> bool {
    let now = Time(Timestamp::now());
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    let mut changed = false;
    for (ty, ok_reason, ok_message) in CONDITIONS {
        let (st, reason, message) = match report.failures.get(ty) {
            Some((r, m)) => ("True", r.clone(), m.clone()),
            None => ("False", ok_reason.to_string(), ok_message.to_string()),
        };
        match conditions.iter_mut().find(|c| c.type_ == ty) {
            None => {
                conditions.push(NamespaceCondition {
                    type_: ty.into(),
                    status: st.into(),
                    reason: Some(reason),
                    message: Some(message),
                    last_transition_time: Some(now.clone()),
                });
                changed = true;
            }
            Some(c) => {
                if c.status != st
                    || c.reason.as_deref() != Some(&reason)
                    || c.message.as_deref() != Some(&message)
                {
                    if c.status != st {
                        c.last_transition_time = Some(now.clone());
                    }
                    c.status = st.into();
                    c.reason = Some(reason);
                    c.message = Some(message);
                    changed = true;
                }
            }
        }
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clean_report_sets_every_condition_false_with_upstream_reasons() {
        let mut st = NamespaceStatus::default();
        assert!(update_conditions(&mut st, &ContentReport::default()));
        let c = st.conditions.as_ref().unwrap();
        assert_eq!(c.len(), 5);
        assert!(c.iter().all(|c| c.status == "False"));
        assert_eq!(c[2].reason.as_deref(), Some("ContentDeleted"));
        assert!(
            !update_conditions(&mut st, &ContentReport::default()),
            "nothing changes the second time"
        );
    }

    #[test]
    fn remaining_content_turns_its_condition_true() {
        let mut st = NamespaceStatus::default();
        let mut r = ContentReport::default();
        r.failures.insert(
            "NamespaceContentRemaining",
            (
                "SomeResourcesRemain".into(),
                "Some resources are remaining: pods. has 1 resource instances".into(),
            ),
        );
        update_conditions(&mut st, &r);
        let c = st.conditions.unwrap();
        let rem = c
            .iter()
            .find(|c| c.type_ == "NamespaceContentRemaining")
            .unwrap();
        assert_eq!(rem.status, "True");
        assert_eq!(rem.reason.as_deref(), Some("SomeResourcesRemain"));
    }
}
