//! `/containerLogs/{ns}/{pod}/{container}`: the query ([`options`]), the CRI log format
//! ([`cri`]), reading and following ([`reader`], woken by [`watch`]), and the handler that
//! ties them to the agent: the pod must exist (404 `pod "p" does not exist`), the container
//! must be in its spec (404 `container "c" not found in pod "p"`), the agent picks the
//! instance (its refusals are 400s, as upstream answers every `GetKubeletContainerLogs`
//! error), and the log streams as a chunked `text/plain` body, flushed as it is read.

pub mod cri;
pub mod options;
pub mod reader;
#[cfg(test)]
mod reader_tests;
pub mod watch;

use std::sync::Arc;

use http::{Response, StatusCode};
use k8s_openapi::api::core::v1::Pod;

use super::response::{self, Body};
use crate::kubelet::api::{ContainerRef, KubeletApi};
use options::LogOptions;

struct AgentLiveness(Arc<dyn KubeletApi>);

#[async_trait::async_trait]
impl reader::Liveness for AgentLiveness {
    async fn running(&self, container_id: &str) -> bool {
        self.0.container_running(container_id).await
    }
}

/// Whether a pod's spec has a container (regular, init or ephemeral) of that name.
pub fn has_container(pod: &Pod, name: &str) -> bool {
    let Some(spec) = pod.spec.as_ref() else {
        return false;
    };
    spec.containers.iter().any(|c| c.name == name)
        || spec
            .init_containers
            .iter()
            .flatten()
            .any(|c| c.name == name)
        || spec
            .ephemeral_containers
            .iter()
            .flatten()
            .any(|c| c.name == name)
}

/// Answers a `/containerLogs` request.
pub async fn serve(api: Arc<dyn KubeletApi>, target: ContainerRef, query: &str) -> Response<Body> {
    let opts = match LogOptions::from_query(query) {
        Ok(o) => o,
        Err(e) => {
            let status = StatusCode::from_u16(e.status()).unwrap_or(StatusCode::BAD_REQUEST);
            return response::text(status, e.body());
        }
    };
    let (ns, name) = (&target.pod.namespace, &target.pod.name);
    let pod = api.pods().into_iter().find(|p| {
        p.metadata.namespace.as_deref() == Some(ns.as_str())
            && p.metadata.name.as_deref() == Some(name.as_str())
    });
    let Some(pod) = pod else {
        return response::text(
            StatusCode::NOT_FOUND,
            format!("pod {name:?} does not exist"),
        );
    };
    if !has_container(&pod, &target.container) {
        return response::text(
            StatusCode::NOT_FOUND,
            format!("container {:?} not found in pod {name:?}", target.container),
        );
    }
    let location = match api.container_log(&target, opts.previous) {
        Ok(l) => l,
        Err(e) => return response::text(StatusCode::BAD_REQUEST, e.to_string()),
    };
    let log = match reader::open(&location.path, &opts).await {
        Ok(l) => l,
        Err(e) => return response::text(StatusCode::BAD_REQUEST, e.to_string()),
    };
    let (tx, rx) = tokio::sync::mpsc::channel(8);
    let now = jiff::Timestamp::now();
    tokio::spawn(async move {
        let liveness = AgentLiveness(api);
        if let Err(e) = reader::stream(log, &location.container_id, &opts, now, &liveness, tx).await
        {
            tracing::debug!(error = %e, "kubelet: reading a container log failed");
        }
    });
    response::stream("text/plain; charset=utf-8", rx)
}
