//! CustomResourceDefinitions: every cluster serves what its own CRDs define.
//!
//! One loop for all clusters, fed by the cache's cross-cluster watch of CRDs. A change in a
//! cluster recomputes that cluster's CRD conditions (NamesAccepted, Established), the custom
//! resources it serves, and its OpenAPI documents. A CRD being deleted is Terminating: its
//! custom resources are deleted, then its cleanup finalizer is removed and it disappears from
//! discovery.

use std::sync::Arc;
use std::time::Duration;

use apimachinery::meta;
use apimachinery::status::ApiError;
use registry::cache::{CachedObject, Filter};
use registry::store::{DeleteOptions, ListRequest, Location, WriteOptions};
use serde_json::Value;

use crate::ControlPlane;

pub const GROUP: &str = "apiextensions.k8s.io";
pub const PLURAL: &str = "customresourcedefinitions";

fn crds_of(cp: &ControlPlane, cluster: &str) -> Vec<Value> {
    let filter = Filter {
        cluster: Some(cluster.to_string()),
        ..Filter::default()
    };
    cp.store
        .cache_for_reads(cluster)
        .list(GROUP, PLURAL, &filter)
        .0
        .iter()
        .map(|o| o.to_value())
        .collect()
}

async fn write_status(
    cp: &ControlPlane,
    cluster: &str,
    name: &str,
    status: Value,
) -> Result<(), ApiError> {
    let res = cp
        .catalog
        .builtin(GROUP, PLURAL)
        .ok_or_else(|| ApiError::internal("CRDs are not served"))?;
    let loc = Location {
        cluster,
        namespace: "",
        name,
    };
    let opts = WriteOptions {
        dry_run: false,
        subresource: Some("status".into()),
        ..Default::default()
    };
    let result = cp
        .store
        .update_with(&res, &loc, &opts, |cur| {
            // CRDs require a resourceVersion on update: the one just read (a conflict is
            // retried by the loop).
            let mut next = cur
                .cloned()
                .ok_or_else(|| ApiError::not_found(PLURAL, GROUP, name))?;
            next["status"] = status.clone();
            Ok(next)
        })
        .await;
    match result {
        Ok(_) => Ok(()),
        Err(e) if e.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

/// Deletes every custom resource of a CRD being deleted; `true` when none is left.
async fn delete_instances(cp: &ControlPlane, cluster: &str, crd: &Value) -> Result<bool, ApiError> {
    let group = crd
        .pointer("/spec/group")
        .and_then(Value::as_str)
        .unwrap_or("");
    let plural = crd
        .pointer("/spec/names/plural")
        .and_then(Value::as_str)
        .unwrap_or("");
    let Some(res) = cp
        .catalog
        .lookup(cluster, group, &storage_version(crd), plural)
    else {
        return Ok(true);
    };
    let filter = Filter {
        cluster: Some(cluster.to_string()),
        ..Filter::default()
    };
    let items = cp
        .store
        .list(
            &res,
            &ListRequest {
                filter,
                ..Default::default()
            },
        )
        .await?
        .items;
    if items.is_empty() {
        return Ok(true);
    }
    for o in &items {
        let (ns, name) = (o.namespace().to_string(), o.name().to_string());
        let loc = Location {
            cluster,
            namespace: &ns,
            name: &name,
        };
        match cp.store.delete(&res, &loc, &DeleteOptions::default()).await {
            Ok(_) => {}
            Err(e) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    Ok(false)
}

fn storage_version(crd: &Value) -> String {
    crd.pointer("/spec/versions")
        .and_then(Value::as_array)
        .and_then(|vs| {
            vs.iter()
                .find(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        })
        .and_then(|v| v.get("name").and_then(Value::as_str))
        .unwrap_or("")
        .to_string()
}

/// Finishes the deletion of a CRD once its custom resources are gone.
async fn finish_deletion(cp: &ControlPlane, cluster: &str, crd: &Value) -> Result<bool, ApiError> {
    if !delete_instances(cp, cluster, crd).await? {
        return Ok(false);
    }
    let res = cp
        .catalog
        .builtin(GROUP, PLURAL)
        .ok_or_else(|| ApiError::internal("CRDs are not served"))?;
    let name = meta::name(crd).to_string();
    let loc = Location {
        cluster,
        namespace: "",
        name: &name,
    };
    let now = registry::store::now();
    let result = cp
        .store
        .update_with(&res, &loc, &WriteOptions::default(), |cur| {
            let mut next = cur
                .cloned()
                .ok_or_else(|| ApiError::not_found(PLURAL, GROUP, &name))?;
            crd::set_terminating(
                &mut next,
                "False",
                "InstanceDeletionCompleted",
                "removed all instances",
                &now,
            );
            crd::remove_cleanup_finalizer(&mut next);
            Ok(next)
        })
        .await;
    match result {
        Ok(_) => Ok(true),
        Err(e) if e.code == 404 => Ok(true),
        Err(e) => Err(e),
    }
}

/// Brings one cluster's CRDs, served resources and OpenAPI documents up to date. Returns
/// whether work remains (custom resources still being deleted).
pub async fn reconcile(cp: &Arc<ControlPlane>, cluster: &str) -> Result<bool, ApiError> {
    if !crate::clusters::live(cp, cluster) {
        // Woken by the removal of a deleted cluster's keys: nothing to serve or write.
        return Ok(false);
    }
    let crds = crds_of(cp, cluster);
    let mut pending = false;
    let mut wrote = false;
    // Every replica serves what is established; only the leader writes conditions, deletes
    // instances and registers APIServices.
    let leads = cp.leads();
    for c in crds.iter().filter(|_| leads) {
        let name = meta::name(c).to_string();
        if meta::deletion_timestamp(c).is_some() {
            if !finish_deletion(cp, cluster, c).await? {
                pending = true;
            }
            continue;
        }
        let group = c
            .pointer("/spec/group")
            .and_then(Value::as_str)
            .unwrap_or("");
        let names_in_use = crd::names_in_group(&crds, group, &name);
        let status = crd::established_status(c, &names_in_use);
        if c.get("status") != Some(&status) {
            write_status(cp, cluster, &name, status).await?;
            wrote = true;
        }
    }
    // Serve what is established, reading the CRDs again once the cache has the statuses just
    // written (a client that sees Established must find the resource and its schema soon).
    if wrote {
        cp.store.wait_for_cache().await;
    }
    let crds = crds_of(cp, cluster);
    let serving: Vec<Value> = crds
        .iter()
        .filter(|c| {
            crd::should_serve(c)
                || (crd::is_established(c) && meta::deletion_timestamp(c).is_some())
        })
        .cloned()
        .collect();
    let defs: Vec<registry::ResourceDef> = serving
        .iter()
        .flat_map(|c| crate::conversion::resource_defs(cp, cluster, c))
        .collect();
    cp.catalog.replace_custom(cluster, defs);
    let docs: Vec<Value> = serving
        .iter()
        .filter(|c| meta::deletion_timestamp(c).is_none())
        .cloned()
        .collect();
    if docs.is_empty() {
        cp.openapi.set(cluster, None);
    } else {
        let mut set = openapi::DocumentSet::new();
        for (g, v, doc) in crd::openapi_documents(&docs) {
            set.insert_custom(&g, &v, doc);
        }
        cp.openapi.set(cluster, Some(set));
    }
    if leads {
        crate::apiservices::sync(cp, cluster, false).await?;
    }
    Ok(pending)
}

/// Starts the CRD loop.
pub fn start(cp: &Arc<ControlPlane>) -> Result<(), ApiError> {
    let mut follow = cp
        .store
        .follow_every_shard(GROUP, PLURAL, Filter::default())?;
    let mut leadership = cp.leadership();
    let weak = Arc::downgrade(cp);
    tokio::spawn(async move {
        let mut retry: Vec<String> = Vec::new();
        loop {
            let mut gained = false;
            let first = tokio::select! {
                first = async {
                    if retry.is_empty() {
                        Some(follow.recv().await)
                    } else {
                        // Nothing new within the tick: retry what is pending.
                        tokio::time::timeout(Duration::from_millis(200), follow.recv())
                            .await
                            .ok()
                    }
                } => first,
                g = crate::gained_leadership(&mut leadership) => {
                    if g.is_none() {
                        return;
                    }
                    gained = true;
                    None
                }
            };
            let Some(cp) = weak.upgrade() else { return };
            let mut clusters: Vec<String> = std::mem::take(&mut retry);
            if gained {
                // Write what was only served while following: every cluster with CRDs.
                let all = cp.store.list_every_shard(GROUP, PLURAL, &Filter::default());
                for o in all {
                    if !clusters.iter().any(|c| **c == *o.cluster) {
                        clusters.push(o.cluster.to_string());
                    }
                }
            }
            let mut add = |o: &CachedObject| {
                if !clusters.iter().any(|c| **c == *o.cluster) {
                    clusters.push(o.cluster.to_string());
                }
            };
            if let Some((_, o)) = &first {
                add(o);
            }
            while let Some((_, o)) = follow.try_recv() {
                add(&o);
            }
            for c in clusters {
                match reconcile(&cp, &c).await {
                    Ok(true) => retry.push(c),
                    Ok(false) => {}
                    Err(e) => {
                        tracing::warn!(cluster = %c, error = %e, "CRD reconciliation failed; retrying");
                        retry.push(c);
                    }
                }
            }
        }
    });
    Ok(())
}
