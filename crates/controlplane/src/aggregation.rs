//! ClusterRole aggregation: a ClusterRole with an `aggregationRule` holds the union of the rules
//! of the ClusterRoles its selectors match (upstream's clusterrole-aggregation controller).
//!
//! One loop for every cluster, fed by the cache's cross-cluster watch of ClusterRoles: a change
//! in a cluster recomputes that cluster's aggregated roles only.

use std::sync::Arc;

use apimachinery::meta;
use apimachinery::status::ApiError;
use registry::cache::Filter;
use registry::store::{Location, WriteOptions};
use serde_json::Value;

use crate::ControlPlane;

const RBAC: &str = "rbac.authorization.k8s.io";

/// Recomputes the aggregated ClusterRoles of one cluster.
pub async fn reconcile(cp: &ControlPlane, cluster: &str) -> Result<(), ApiError> {
    if !crate::clusters::live(cp, cluster) {
        return Ok(());
    }
    let filter = Filter {
        cluster: Some(cluster.to_string()),
        ..Filter::default()
    };
    let roles = cp
        .store
        .cache(cluster)?
        .list(RBAC, "clusterroles", &filter)
        .0;
    // Cluster roles are kept decoded by the cache: this copies pointers.
    let values: Vec<Arc<Value>> = roles.iter().map(|r| r.value()).collect();
    let all: Vec<&Value> = values.iter().map(|v| &**v).collect();
    let Some(res) = cp.catalog.builtin(RBAC, "clusterroles") else {
        return Ok(());
    };
    for role in &values {
        let Some(rules) = rbac::aggregate(role, all.iter().copied()) else {
            continue;
        };
        let name = meta::name(role).to_string();
        let loc = Location {
            cluster,
            namespace: "",
            name: &name,
        };
        let result = cp
            .store
            .update_with(&res, &loc, &WriteOptions::default(), |cur| {
                let mut next = cur
                    .cloned()
                    .ok_or_else(|| ApiError::not_found("clusterroles", RBAC, &name))?;
                next["rules"] = Value::Array(rules.clone());
                Ok(next)
            })
            .await;
        if let Err(e) = result
            && e.code != 404
        {
            return Err(e);
        }
    }
    Ok(())
}

/// Starts the aggregation loop (a singleton: it writes only where the control plane leads,
/// and aggregates every cluster again when it gains leadership).
pub fn start(cp: &Arc<ControlPlane>) -> Result<(), ApiError> {
    let mut follow = cp
        .store
        .follow_every_shard(RBAC, "clusterroles", Filter::default())?;
    let mut leadership = cp.leadership();
    let weak = Arc::downgrade(cp);
    tokio::spawn(async move {
        loop {
            let mut clusters = Vec::new();
            tokio::select! {
                (_, obj) = follow.recv() => clusters.push(obj.cluster.to_string()),
                gained = crate::gained_leadership(&mut leadership) => {
                    if gained.is_none() {
                        return;
                    }
                    let Some(cp) = weak.upgrade() else { return };
                    clusters.push(apimachinery::cluster::ROOT.to_string());
                    clusters.extend(crate::clusters::served(&cp));
                }
            }
            let Some(cp) = weak.upgrade() else { return };
            // A burst of changes in one cluster is handled once.
            while let Some((_, o)) = follow.try_recv() {
                if !clusters.iter().any(|c| **c == *o.cluster) {
                    clusters.push(o.cluster.to_string());
                }
            }
            if !cp.leads() {
                continue;
            }
            for c in clusters {
                if let Err(e) = reconcile(&cp, &c).await {
                    tracing::warn!(cluster = %c, error = %e, "ClusterRole aggregation failed");
                }
            }
        }
    });
    Ok(())
}
