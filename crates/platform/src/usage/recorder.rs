//! The usage recorder: one `UsageRecord` per consumer of a tenant — a worker machine
//! (`MatryoshkaMachine`, sized by its instance type or resources and disk) or a pod of the
//! root cluster in a tenant namespace (its containers' requests) — holding what it reserves,
//! when it started and, once it is gone, when it ended.
//!
//! Records are cluster-scoped objects of the root cluster, so they outlive the tenant's
//! namespace and a restart of the platform loses nothing. A machine consumes from its
//! creation until its deletion began (its `deletionTimestamp`: the platform stops billing a
//! machine being torn down); a pod from its start on a node until it finished (its last
//! container's end) or its deletion began. A consumer that vanished while the recorder was not
//! running (no deletion seen) is closed at the time the recorder found it gone. A record is
//! deleted once its consumer ended longer ago than the retention (`up --usage-retention-days`,
//! 400 by default: a year of reports and then some), so the records of a platform that
//! creates and deletes clusters all day stay bounded by that window.

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use machines::resource::MatryoshkaMachine;
use runtime::client::{ClusterClients, ROOT};
use runtime::error::Result;
use runtime::informer::{Change, Informer, ObjectKey, Store};
use runtime::queue::{Action, Queue};
use serde_json::{Value, json};
use std::sync::Mutex;

use super::UsageRecord;
use crate::naming;

/// What a consumer's record should say.
#[derive(Debug, Clone, PartialEq)]
struct Desired {
    spec: Value,
    end: Option<String>,
    /// The consumer is gone (its record is closed and then forgotten here).
    gone: bool,
}

/// The usage recorder.
pub struct Recorder {
    clients: ClusterClients,
    /// How long a record is kept after its consumer ended.
    retention: std::time::Duration,
    records: Store<UsageRecord>,
    desired: Arc<Mutex<HashMap<String, Desired>>>,
    queue: Arc<Queue<String>>,
}

fn time(t: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time) -> String {
    apimachinery::time::format_time(t.0)
}

fn now() -> String {
    apimachinery::time::format_time(Timestamp::now())
}

/// The record of a consumer: `<kind>-<uid>`.
fn record_name(kind: &str, meta: &ObjectMeta) -> Option<String> {
    meta.uid.as_ref().map(|u| format!("{kind}-{u}"))
}

fn tenant_of(meta: &ObjectMeta) -> Option<&str> {
    meta.namespace
        .as_deref()
        .filter(|ns| ns.starts_with(naming::NAMESPACE_PREFIX))
}

/// A machine's record: its tenant cluster, instance type and size.
fn machine_desired(m: &MatryoshkaMachine) -> Option<Desired> {
    let meta = &m.metadata;
    let tenant = tenant_of(meta)?;
    let start = meta.creation_timestamp.as_ref()?;
    let sizing = node::sizing::resolve(
        &machines::infra::sizing_input(&m.spec),
        &apimachinery::field::Path::new("spec"),
    )
    .ok()?;
    let cluster = meta
        .labels
        .as_ref()
        .and_then(|l| l.get(machines::names::CLUSTER_NAME_LABEL))
        .map(|c| naming::cluster_of_release(c).unwrap_or(c).to_string())
        .unwrap_or_default();
    let instance_type = sizing
        .instance_type
        .map(|t| t.name.to_string())
        .unwrap_or_else(|| "custom".into());
    Some(Desired {
        spec: json!({
            "tenant": tenant,
            "workload": {"kind": "TenantCluster", "name": cluster},
            "consumer": {"kind": "MatryoshkaMachine", "name": meta.name, "uid": meta.uid},
            "type": instance_type,
            "resources": {
                "cpu": format!("{}m", sizing.cpu_millis.unwrap_or(0.0) as i64),
                "memory": (sizing.memory_bytes.unwrap_or(0.0) as i64).to_string(),
                "ephemeral-storage": sizing.disk_bytes.to_string(),
            },
            "start": time(start),
        }),
        end: meta.deletion_timestamp.as_ref().map(time),
        gone: false,
    })
}

/// The sum of a pod's containers' requests of `resource`, in milli-units or units.
fn requests(pod: &Pod, resource: &str, milli: bool) -> i64 {
    pod.spec
        .iter()
        .flat_map(|s| s.containers.iter())
        .filter_map(|c| c.resources.as_ref()?.requests.as_ref()?.get(resource))
        .filter_map(|q| apimachinery::quantity::Quantity::parse(&q.0).ok())
        .map(|q| if milli { q.milli_value() } else { q.value() })
        .sum()
}

/// A pod's record, once it runs on a node: its controller, requests and lifetime.
fn pod_desired(pod: &Pod) -> Option<Desired> {
    let meta = &pod.metadata;
    let tenant = tenant_of(meta)?;
    let status = pod.status.as_ref()?;
    let start = status.start_time.as_ref()?;
    let (kind, name) = meta
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
        .map(|o| (o.kind.clone(), o.name.clone()))
        .unwrap_or_else(|| ("Pod".into(), meta.name.clone().unwrap_or_default()));
    let finished = matches!(status.phase.as_deref(), Some("Succeeded" | "Failed")).then(|| {
        status
            .container_statuses
            .iter()
            .flatten()
            .filter_map(|c| c.state.as_ref()?.terminated.as_ref()?.finished_at.as_ref())
            .map(time)
            .max()
            .unwrap_or_else(now)
    });
    Some(Desired {
        spec: json!({
            "tenant": tenant,
            "workload": {"kind": kind, "name": name},
            "consumer": {"kind": "Pod", "name": meta.name, "uid": meta.uid},
            "type": "pod",
            "resources": {
                "cpu": format!("{}m", requests(pod, "cpu", true)),
                "memory": requests(pod, "memory", false).to_string(),
                "ephemeral-storage": requests(pod, "ephemeral-storage", false).to_string(),
            },
            "start": time(start),
        }),
        end: finished.or_else(|| meta.deletion_timestamp.as_ref().map(time)),
        gone: false,
    })
}

/// Keeps `desired` in step with a consumer informer's changes and queues the record.
fn track<K>(
    informer: &Informer<K>,
    kind: &'static str,
    desire: fn(&K) -> Option<Desired>,
    meta: fn(&K) -> &ObjectMeta,
    desired: &Arc<Mutex<HashMap<String, Desired>>>,
    queue: &Arc<Queue<String>>,
) where
    K: kube::Resource + Send + Sync + 'static,
{
    let (desired, queue) = (desired.clone(), queue.clone());
    informer.on_change(move |c| {
        let (obj, deleted) = match c {
            Change::Added(_, o) | Change::Updated { new: o, .. } => (o, false),
            Change::Deleted(_, o) => (o, true),
        };
        let Some(name) = record_name(kind, meta(obj)) else {
            return;
        };
        let mut d = desired
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if deleted {
            if let Some(e) = d.get_mut(&name) {
                e.gone = true;
                if e.end.is_none() {
                    e.end = Some(now());
                }
            }
        } else if let Some(want) = desire(obj) {
            // A known end is kept (a pod's end does not move once it finished).
            let end = d.get(&name).and_then(|e| e.end.clone()).or(want.end);
            d.insert(name.clone(), Desired { end, ..want });
        } else {
            return;
        }
        drop(d);
        queue.add(name);
    });
}

impl Recorder {
    pub fn new(
        clients: ClusterClients,
        retention: std::time::Duration,
        records: &Informer<UsageRecord>,
        machines: &Informer<MatryoshkaMachine>,
        pods: &Informer<Pod>,
    ) -> Arc<Self> {
        let queue = Queue::new();
        let desired = Arc::new(Mutex::new(HashMap::new()));
        track(
            machines,
            "machine",
            machine_desired,
            |m| &m.metadata,
            &desired,
            &queue,
        );
        track(pods, "pod", pod_desired, |p| &p.metadata, &desired, &queue);
        let q = queue.clone();
        records.on_change(move |c| q.add(c.key().name.clone()));
        Arc::new(Recorder {
            clients,
            retention,
            records: records.store(),
            desired,
            queue,
        })
    }

    pub fn queue(&self) -> Arc<Queue<String>> {
        self.queue.clone()
    }

    /// Queues every record (after the informers synced: closes what vanished meanwhile).
    pub fn resync(&self) {
        for k in self.records.keys() {
            self.queue.add(k.name.clone());
        }
    }

    pub async fn reconcile(&self, name: String) -> Result<Action> {
        let want = self
            .desired
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&name)
            .cloned();
        let have = self.records.get(&ObjectKey::new(ROOT, "", &name));
        let api: Api<UsageRecord> = Api::all(self.clients.cluster(ROOT)?);
        let have_end = have
            .as_ref()
            .and_then(|r| r.status_field("/end"))
            .and_then(Value::as_str)
            .map(str::to_string);
        // A record past its retention is deleted (and a consumer that ended that long ago is
        // not recorded again).
        if let Some(wait) = have_end
            .as_deref()
            .or(if have.is_none() {
                want.as_ref().and_then(|w| w.end.as_deref())
            } else {
                None
            })
            .and_then(|e| self.retained_for(e))
        {
            if !wait.is_zero() {
                return Ok(Action::RequeueAfter(wait));
            }
            if have.is_some() {
                match api.delete(&name, &Default::default()).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(s)) if s.code == 404 => {}
                    Err(e) => return Err(e.into()),
                }
            }
            if want.as_ref().is_some_and(|w| w.gone) || want.is_none() {
                self.desired
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .remove(&name);
            }
            return Ok(Action::AwaitChange);
        }
        match (want, have) {
            (Some(want), None) => {
                let tenant = want.spec["tenant"].as_str().unwrap_or("").to_string();
                let record = UsageRecord {
                    metadata: ObjectMeta {
                        name: Some(name.clone()),
                        labels: Some([(super::TENANT_LABEL.to_string(), tenant)].into()),
                        ..Default::default()
                    },
                    spec: want.spec.clone(),
                    status: None,
                };
                match api.create(&PostParams::default(), &record).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(s)) if s.code == 409 => {}
                    Err(e) => return Err(e.into()),
                }
                if want.end.is_some() {
                    // Written once the record is seen (with its status), on the next pass.
                    return Ok(Action::RequeueAfter(std::time::Duration::from_millis(200)));
                }
            }
            (Some(want), Some(_)) => {
                if let (Some(end), None) = (&want.end, &have_end) {
                    self.close(&api, &name, end).await?;
                } else if want.gone && have_end.is_some() {
                    self.desired
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .remove(&name);
                }
            }
            (None, Some(_)) if have_end.is_none() => {
                // Its consumer is not known: gone while no one watched.
                self.close(&api, &name, &now()).await?;
            }
            (None, _) => {}
        }
        Ok(Action::AwaitChange)
    }

    /// How long a record that ended at `end` is still kept (zero: delete it now); `None`
    /// when `end` does not parse.
    fn retained_for(&self, end: &str) -> Option<std::time::Duration> {
        let end = apimachinery::time::parse_rfc3339(end)?;
        let age = Timestamp::now().duration_since(end).as_secs_f64().max(0.0);
        Some(std::time::Duration::from_secs_f64(
            (self.retention.as_secs_f64() - age).max(0.0),
        ))
    }

    async fn close(&self, api: &Api<UsageRecord>, name: &str, end: &str) -> Result<()> {
        api.patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"end": end}})),
        )
        .await?;
        Ok(())
    }
}
