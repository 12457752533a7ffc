//! The agent's two sources of change: the watch of the pods bound to the node
//! (`fieldSelector=spec.nodeName=<node>`), which keeps the pod table and starts a worker per
//! pod, and the relist of the runtime (upstream's PLEG, every second), which wakes the
//! worker of every pod whose sandboxes or containers changed and removes what belongs to no
//! pod (after the watch has listed once: an agent that restarts first learns its pods, then
//! adopts their containers, and only then sees orphans).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Pod, Service};
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};

use super::agent::{Agent, PodEntry};
use super::labels;
use super::worker;

fn uid_of(p: &Pod) -> Option<String> {
    p.metadata.uid.clone().filter(|u| !u.is_empty())
}

fn upsert(agent: &Arc<Agent>, mut pod: Pod) {
    pod.metadata.managed_fields = None;
    let Some(uid) = uid_of(&pod) else { return };
    {
        let mut pods = agent.pods.write();
        match pods.get_mut(&uid) {
            Some(e) => e.pod = pod,
            None => {
                pods.insert(uid.clone(), PodEntry { pod, status: None });
            }
        }
    }
    worker::ensure(agent, &uid);
}

fn forget(agent: &Arc<Agent>, uid: &str) {
    agent.pods.write().remove(uid);
    agent.wake(uid);
}

/// Watches the node's pods until shutdown.
pub async fn watch(agent: Arc<Agent>) {
    let api: Api<Pod> = Api::all(agent.client.clone());
    let cfg =
        watcher::Config::default().fields(&format!("spec.nodeName={}", agent.config.node_name));
    let mut stream = runtime::lenient::watcher(api, cfg, None)
        .default_backoff()
        .boxed();
    let mut shutdown = agent.shutdown.subscribe();
    let mut listing: Option<HashSet<String>> = None;
    loop {
        let ev = tokio::select! {
            ev = stream.next() => ev,
            _ = shutdown.changed() => return,
        };
        match ev {
            Some(Ok(Event::Init)) => listing = Some(HashSet::new()),
            Some(Ok(Event::InitApply(p))) => {
                if let (Some(seen), Some(uid)) = (listing.as_mut(), uid_of(&p)) {
                    seen.insert(uid);
                }
                upsert(&agent, p);
            }
            Some(Ok(Event::InitDone)) => {
                if let Some(seen) = listing.take() {
                    let gone: Vec<String> = agent
                        .pods
                        .read()
                        .keys()
                        .filter(|k| !seen.contains(*k))
                        .cloned()
                        .collect();
                    for uid in gone {
                        forget(&agent, &uid);
                    }
                }
                agent.pods_synced.send_replace(true);
            }
            Some(Ok(Event::Apply(p))) => upsert(&agent, p),
            Some(Ok(Event::Delete(p))) => {
                if let Some(uid) = uid_of(&p) {
                    forget(&agent, &uid);
                }
            }
            Some(Err(e)) => tracing::warn!(error = %e, "the pod watch failed; retrying"),
            None => return,
        }
    }
}

fn service_key(s: &Service) -> String {
    format!(
        "{}/{}",
        s.metadata.namespace.as_deref().unwrap_or(""),
        s.metadata.name.as_deref().unwrap_or("")
    )
}

/// Watches every Service of the cluster (service-link variables) until shutdown; the table
/// is there once the first list is complete.
pub async fn watch_services(agent: Arc<Agent>) {
    let api: Api<Service> = Api::all(agent.client.clone());
    let mut stream = runtime::lenient::watcher(api, watcher::Config::default(), None)
        .default_backoff()
        .boxed();
    let mut shutdown = agent.shutdown.subscribe();
    let mut listing: Option<HashMap<String, Service>> = None;
    loop {
        let ev = tokio::select! {
            ev = stream.next() => ev,
            _ = shutdown.changed() => return,
        };
        match ev {
            Some(Ok(Event::Init)) => listing = Some(HashMap::new()),
            Some(Ok(Event::InitApply(mut s))) => {
                s.metadata.managed_fields = None;
                if let Some(l) = listing.as_mut() {
                    l.insert(service_key(&s), s);
                }
            }
            Some(Ok(Event::InitDone)) => {
                if let Some(l) = listing.take() {
                    *agent.services.write() = Some(l);
                }
            }
            Some(Ok(Event::Apply(mut s))) => {
                s.metadata.managed_fields = None;
                if let Some(m) = agent.services.write().as_mut() {
                    m.insert(service_key(&s), s);
                }
            }
            Some(Ok(Event::Delete(s))) => {
                if let Some(m) = agent.services.write().as_mut() {
                    m.remove(&service_key(&s));
                }
            }
            Some(Err(e)) => tracing::warn!(error = %e, "the service watch failed; retrying"),
            None => return,
        }
    }
}

/// The runtime's state per pod UID, as (id, state) pairs, for change detection.
type Fingerprints = HashMap<String, Vec<(String, i32)>>;

async fn fingerprints(agent: &Agent) -> Option<Fingerprints> {
    let (sandboxes, containers) =
        tokio::try_join!(agent.cri.list_pod_sandboxes(), agent.cri.list_containers()).ok()?;
    let mut out: Fingerprints = HashMap::new();
    for s in sandboxes {
        if let Some(uid) = s.labels.get(labels::POD_UID) {
            out.entry(uid.clone()).or_default().push((s.id, s.state));
        }
    }
    for c in containers {
        if let Some(uid) = c.labels.get(labels::POD_UID) {
            out.entry(uid.clone())
                .or_default()
                .push((c.id, c.state + 10));
        }
    }
    for v in out.values_mut() {
        v.sort();
    }
    Some(out)
}

/// Relists the runtime until shutdown.
pub async fn relist(agent: Arc<Agent>) {
    let mut shutdown = agent.shutdown.subscribe();
    let mut last: Fingerprints = HashMap::new();
    let mut disk_checked = false;
    loop {
        if let Some(now) = fingerprints(&agent).await {
            for (uid, fp) in &now {
                if last.get(uid) != Some(fp) {
                    agent.wake(uid);
                }
            }
            for uid in last.keys().filter(|u| !now.contains_key(*u)) {
                agent.wake(uid);
            }
            if *agent.pods_synced.borrow() {
                let mut orphans: Vec<String> = now.keys().cloned().collect();
                if !disk_checked {
                    // Leftovers of pods deleted while the agent was down.
                    orphans.extend(pod_dirs(&agent));
                    orphans.extend(super::cgroups::pods_on_node(&agent.config.cgroup_root));
                    disk_checked = true;
                }
                for uid in orphans {
                    clean_orphan(&agent, &uid);
                }
            }
            last = now;
        }
        tokio::select! {
            _ = tokio::time::sleep(agent.config.timing.relist) => {}
            _ = shutdown.changed() => return,
        }
    }
}

fn pod_dirs(agent: &Agent) -> Vec<String> {
    std::fs::read_dir(agent.layout.pods_dir())
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .collect()
}

/// Removes what pod `uid` left on the node when no pod of that UID is bound here.
fn clean_orphan(agent: &Arc<Agent>, uid: &str) {
    if agent.pods.read().contains_key(uid) || agent.workers.lock().contains_key(uid) {
        return;
    }
    if !agent.cleaning.lock().insert(uid.to_string()) {
        return;
    }
    let agent = agent.clone();
    let uid = uid.to_string();
    tokio::spawn(async move {
        tracing::info!(pod = %uid, "removing the containers of a pod that is no longer bound here");
        worker::kill::remove_pod(&agent, &uid, None).await;
        agent.cleaning.lock().remove(&uid);
    });
}
