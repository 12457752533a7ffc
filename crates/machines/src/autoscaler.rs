//! The cluster autoscaler with the clusterapi provider's semantics (spec: capi-kubevirt.md
//! §1.9, §6). A node group is a MachineDeployment carrying both size annotations; its template
//! node is what the capacity annotations say (cpu, memory, `maxPods` 110 by default, the
//! template's node labels, `capacity.../labels` and `taints`), so groups scale from zero.
//!
//! Every scan (one cross-cluster list of Pending pods, however many clusters):
//! - **scale up**: a workload cluster's unschedulable pods are first placed on its Ready
//!   nodes' free room (the scheduler will get to them), then on its groups' upcoming machines
//!   (asked for, their node not Ready yet); for the rest every group below its maximum
//!   packs them into new template nodes (first fit, largest first), and the least-waste
//!   expander picks the group whose new nodes leave the smallest share of CPU and memory
//!   unused; its `spec.replicas` grows. Pods get `TriggeredScaleUp` or `NotTriggerScaleUp`.
//! - **provisioning timeout**: a machine not Ready after the group's `maxnodeprovisiontime` is
//!   given up (marked `delete-machine`, the group shrinks) and the group backs off.
//! - **scale down**: a node of a group above its minimum whose requested CPU and memory stay
//!   under the utilisation threshold for the unneeded time, and whose pods can all move
//!   (replicated, no local storage, not `safe-to-evict: "false"`, no PodDisruptionBudget at
//!   zero, room on the other nodes), is removed: its Machine is marked `delete-machine` and
//!   the group shrinks by one (the Machine controller drains it).
//! - the status ConfigMap `kube-system/cluster-autoscaler-status` of each workload cluster.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use apimachinery::quantity::Quantity;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod, Taint};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use runtime::client::{CLUSTER_ANNOTATION, ROOT};
use runtime::error::Result;
use runtime::selector::{LabelSelector as Selector, node_admits, tolerates};
use scheduler::resource::{Resource, pod_requests};
use serde_json::{Value, json};

use crate::names;
use crate::resource::{Machine, MachineDeployment, int_at};
use crate::{Ctx, cond};

/// How the autoscaler runs (upstream's flags; the per-group annotations override some).
#[derive(Clone, Debug)]
pub struct AutoscalerOptions {
    /// Time between scans (upstream `--scan-interval` 10s; a scan here is one list for every
    /// cluster, so it can afford to look more often).
    pub scan_interval: Duration,
    /// How long a node stays under the threshold before it goes (`--scale-down-unneeded-time`).
    pub scale_down_unneeded_time: Duration,
    /// No scale-down of a cluster for this long after a scale-up (`--scale-down-delay-after-add`).
    pub scale_down_delay_after_add: Duration,
    /// Requested share of a node's CPU and memory below which it is unneeded.
    pub scale_down_utilization_threshold: f64,
    /// How long a new machine may take to become Ready (`--max-node-provision-time`).
    pub max_node_provision_time: Duration,
    /// How long a group that failed to provision is left alone.
    pub backoff: Duration,
}

impl Default for AutoscalerOptions {
    fn default() -> Self {
        AutoscalerOptions {
            scan_interval: Duration::from_secs(1),
            scale_down_unneeded_time: Duration::from_secs(600),
            scale_down_delay_after_add: Duration::from_secs(600),
            scale_down_utilization_threshold: 0.5,
            max_node_provision_time: Duration::from_secs(900),
            backoff: Duration::from_secs(300),
        }
    }
}

/// What the autoscaler remembers between scans.
#[derive(Default)]
pub struct State {
    /// Since when a node (cluster, name) is unneeded.
    unneeded: HashMap<(String, String), Instant>,
    /// The last scale-up per workload cluster.
    scaled_up: HashMap<String, Instant>,
    /// Groups backing off after a failed provisioning, until.
    backoff: HashMap<String, Instant>,
    /// The last status written per workload cluster.
    status: HashMap<String, String>,
}

/// A node group.
#[derive(Debug, Clone)]
pub struct Group {
    pub namespace: String,
    pub name: String,
    pub workload: String,
    pub min: i64,
    pub max: i64,
    pub replicas: i64,
    pub ready: i64,
    pub allocatable: Resource,
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    pub annotations: BTreeMap<String, String>,
    /// The machines' infrastructure spec (for the quota's charge).
    pub machine_spec: Option<Value>,
    /// The MachineDeployment's resourceVersion this view was read at: a resize from a stale
    /// view conflicts instead of undoing another writer's.
    pub resource_version: Option<String>,
}

impl Group {
    fn id(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    fn option_seconds(&self, key: &str) -> Option<Duration> {
        let v = self
            .annotations
            .get(&format!("cluster.x-k8s.io/autoscaling-options-{key}"))?;
        apimachinery::time::parse_std_duration(v).ok()
    }
}

fn quantity_milli(v: Option<&String>) -> i64 {
    v.and_then(|s| Quantity::parse(s).ok())
        .map_or(0, |q| q.milli_value())
}

fn quantity(v: Option<&String>) -> i64 {
    v.and_then(|s| Quantity::parse(s).ok())
        .map_or(0, |q| q.value())
}

/// `k=v,k2=v2`.
fn parse_labels(s: Option<&String>) -> BTreeMap<String, String> {
    s.into_iter()
        .flat_map(|s| s.split(','))
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

/// `k=v:Effect,...`.
fn parse_taints(s: Option<&String>) -> Vec<Taint> {
    s.into_iter()
        .flat_map(|s| s.split(','))
        .filter_map(|t| {
            let (kv, effect) = t.rsplit_once(':')?;
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            Some(Taint {
                key: k.trim().to_string(),
                value: (!v.is_empty()).then(|| v.trim().to_string()),
                effect: effect.trim().to_string(),
                time_added: None,
            })
        })
        .collect()
}

/// A node group from a MachineDeployment with both size annotations (None otherwise).
pub fn group_of(md: &MachineDeployment, workload: &str) -> Option<Group> {
    let ann = md.metadata.annotations.clone().unwrap_or_default();
    let min = ann
        .get(names::AUTOSCALER_MIN_ANNOTATION)?
        .parse::<i64>()
        .ok()?;
    let max = ann
        .get(names::AUTOSCALER_MAX_ANNOTATION)?
        .parse::<i64>()
        .ok()?;
    if min < 0 || max < min {
        return None;
    }
    let pods = ann
        .get("capacity.cluster-autoscaler.kubernetes.io/maxPods")
        .and_then(|p| p.parse().ok())
        .unwrap_or(110);
    let allocatable = Resource {
        milli_cpu: quantity_milli(ann.get(names::CAPACITY_CPU_ANNOTATION)),
        memory: quantity(ann.get(names::CAPACITY_MEMORY_ANNOTATION)),
        ephemeral_storage: quantity(
            ann.get("capacity.cluster-autoscaler.kubernetes.io/ephemeral-disk"),
        ),
        pods,
        scalars: Vec::new(),
    };
    let template_labels: BTreeMap<String, String> = md
        .spec
        .pointer("/template/metadata/labels")
        .and_then(|l| serde_json::from_value(l.clone()).ok())
        .unwrap_or_default();
    let mut labels = crate::machine::node_labels(&template_labels);
    labels.extend(parse_labels(
        ann.get("capacity.cluster-autoscaler.kubernetes.io/labels"),
    ));
    Some(Group {
        namespace: md.metadata.namespace.clone().unwrap_or_default(),
        name: md.metadata.name.clone().unwrap_or_default(),
        workload: workload.to_string(),
        min,
        max,
        replicas: int_at(&md.spec, "/replicas").unwrap_or(0),
        ready: md
            .status_field("/readyReplicas")
            .and_then(Value::as_i64)
            .unwrap_or(0),
        allocatable,
        labels,
        taints: parse_taints(ann.get("capacity.cluster-autoscaler.kubernetes.io/taints")),
        annotations: ann,
        machine_spec: None,
        resource_version: md.metadata.resource_version.clone(),
    })
}

/// Why a pod does not fit a template node, or None when it fits in `free`.
pub fn misfit(pod: &Pod, group: &Group, free: &Resource) -> Option<String> {
    let spec = pod.spec.as_ref()?;
    if !node_admits(spec, "template-node", &group.labels) {
        return Some("node(s) didn't match Pod's node affinity/selector".into());
    }
    let tolerations = spec.tolerations.clone().unwrap_or_default();
    for t in &group.taints {
        if (t.effect == "NoSchedule" || t.effect == "NoExecute")
            && !tolerations.iter().any(|tol| tolerates(tol, t))
        {
            return Some(format!(
                "node(s) had untolerated taint {{{}: {}}}",
                t.key,
                t.value.clone().unwrap_or_default()
            ));
        }
    }
    let (req, _) = pod_requests(spec);
    if free.pods < 1 {
        return Some("Too many pods".into());
    }
    if req.milli_cpu > free.milli_cpu {
        return Some("Insufficient cpu".into());
    }
    if req.memory > free.memory {
        return Some("Insufficient memory".into());
    }
    if req.ephemeral_storage > 0
        && group.allocatable.ephemeral_storage > 0
        && req.ephemeral_storage > free.ephemeral_storage
    {
        return Some("Insufficient ephemeral-storage".into());
    }
    for (name, v) in &req.scalars {
        if *v > free.scalar(name) {
            return Some(format!("Insufficient {name}"));
        }
    }
    None
}

fn take(free: &mut Resource, pod: &Pod) {
    if let Some(spec) = pod.spec.as_ref() {
        let (req, _) = pod_requests(spec);
        free.add(&req, -1);
        free.pods -= 1;
    }
}

/// Packs `pods` into new template nodes of `group` (first fit, largest CPU first), at most
/// `room` nodes: the nodes used and the indexes of the pods placed.
pub fn pack(pods: &[&Pod], group: &Group, room: i64) -> (i64, Vec<usize>, Vec<Resource>) {
    let mut order: Vec<usize> = (0..pods.len()).collect();
    let cpu = |p: &Pod| p.spec.as_ref().map_or(0, |s| pod_requests(s).0.milli_cpu);
    order.sort_by_key(|i| std::cmp::Reverse(cpu(pods[*i])));
    let mut nodes: Vec<Resource> = Vec::new();
    let mut placed = Vec::new();
    for i in order {
        if misfit(pods[i], group, &group.allocatable).is_some() {
            continue;
        }
        if let Some(n) = nodes
            .iter_mut()
            .find(|n| misfit(pods[i], group, n).is_none())
        {
            take(n, pods[i]);
            placed.push(i);
        } else if (nodes.len() as i64) < room {
            let mut n = group.allocatable.clone();
            take(&mut n, pods[i]);
            nodes.push(n);
            placed.push(i);
        }
    }
    (nodes.len() as i64, placed, nodes)
}

/// The least-waste expander's score of new nodes (lower is better): the unused share of their
/// CPU plus that of their memory.
pub fn waste(group: &Group, nodes: &[Resource]) -> f64 {
    let n = nodes.len() as f64;
    if n == 0.0 {
        return f64::INFINITY;
    }
    let share = |free: i64, total: i64| {
        if total > 0 {
            free as f64 / (total as f64 * n)
        } else {
            0.0
        }
    };
    let free_cpu: i64 = nodes.iter().map(|r| r.milli_cpu).sum();
    let free_mem: i64 = nodes.iter().map(|r| r.memory).sum();
    share(free_cpu, group.allocatable.milli_cpu) + share(free_mem, group.allocatable.memory)
}

fn unschedulable(p: &Pod) -> bool {
    p.spec.as_ref().is_some_and(|s| s.node_name.is_none())
        && p.metadata.deletion_timestamp.is_none()
        && p.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| {
                c.iter().any(|c| {
                    c.type_ == "PodScheduled"
                        && c.status == "False"
                        && c.reason.as_deref() == Some("Unschedulable")
                })
            })
}

fn pod_ref(p: &Pod) -> k8s_openapi::api::core::v1::ObjectReference {
    k8s_openapi::api::core::v1::ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        name: p.metadata.name.clone(),
        namespace: p.metadata.namespace.clone(),
        uid: p.metadata.uid.clone(),
        ..Default::default()
    }
}

impl Ctx {
    /// Every node group, by workload cluster.
    fn node_groups(&self) -> BTreeMap<String, Vec<Group>> {
        let mut out: BTreeMap<String, Vec<Group>> = BTreeMap::new();
        for (_, md) in self.deployments.list_cluster(ROOT) {
            if md.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let ns = md.metadata.namespace.clone().unwrap_or_default();
            let Some(cluster) = self.cluster_of(&ns, &md.spec) else {
                continue;
            };
            if cluster.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let Some(workload) = Ctx::workload_of(&cluster) else {
                continue;
            };
            if let Some(mut g) = group_of(&md, workload) {
                g.machine_spec = md
                    .spec
                    .pointer("/template/spec/infrastructureRef/name")
                    .and_then(Value::as_str)
                    .and_then(|t| self.templates.get(&Ctx::key(&ns, t)))
                    .and_then(|t| t.spec.pointer("/template/spec").cloned());
                out.entry(workload.to_string()).or_default().push(g);
            }
        }
        out
    }

    /// The machines of a group, not being deleted.
    fn group_machines(&self, g: &Group) -> Vec<Arc<Machine>> {
        self.machines
            .list_namespace(ROOT, &g.namespace)
            .into_iter()
            .filter(|m| m.metadata.deletion_timestamp.is_none())
            .filter(|m| {
                m.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(names::DEPLOYMENT_NAME_LABEL))
                    == Some(&g.name)
            })
            .collect()
    }

    async fn set_replicas(&self, g: &Group, replicas: i64) -> Result<()> {
        let api: Api<MachineDeployment> = Api::namespaced(self.root()?, &g.namespace);
        let patch = json!({"metadata": {"resourceVersion": g.resource_version}, "spec": {"replicas": replicas}});
        api.patch(&g.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        Ok(())
    }

    async fn mark_for_deletion(&self, m: &Machine) -> Result<()> {
        let api: Api<Machine> =
            Api::namespaced(self.root()?, m.metadata.namespace.as_deref().unwrap_or(""));
        let patch =
            json!({"metadata": {"annotations": {names::DELETE_MACHINE_ANNOTATION: cond::now()}}});
        api.patch(
            m.metadata.name.as_deref().unwrap_or(""),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await?;
        Ok(())
    }

    /// One scan over every workload cluster.
    pub async fn autoscale_once(&self, opts: &AutoscalerOptions, state: &mut State) -> Result<()> {
        let groups = self.node_groups();
        if groups.is_empty() {
            return Ok(());
        }
        let now = Instant::now();
        state.backoff.retain(|_, until| *until > now);
        // One list of Pending pods for every cluster.
        let mut pending = Vec::new();
        for (_, shard) in self.clients.shard_clients()? {
            let pods: Api<Pod> = Api::all(shard);
            pending.extend(
                pods.list(&ListParams::default().fields("status.phase=Pending"))
                    .await?
                    .items,
            );
        }
        let mut by_cluster: HashMap<String, Vec<Pod>> = HashMap::new();
        for p in pending {
            let cluster = p
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(CLUSTER_ANNOTATION))
                .cloned()
                .unwrap_or_else(|| ROOT.to_string());
            if groups.contains_key(&cluster) && unschedulable(&p) {
                by_cluster.entry(cluster).or_default().push(p);
            }
        }
        for (workload, gs) in &groups {
            self.give_up_on_slow_machines(opts, state, gs).await?;
            let scaled = match by_cluster.get(workload) {
                Some(pods) => self.scale_up(workload, gs, pods, state).await?,
                None => false,
            };
            if scaled {
                state.scaled_up.insert(workload.clone(), now);
            }
            let quiet = state
                .scaled_up
                .get(workload)
                .is_none_or(|t| now.duration_since(*t) >= opts.scale_down_delay_after_add);
            let pending_here = by_cluster.get(workload).map_or(0, Vec::len);
            let down = if !scaled && quiet && pending_here == 0 {
                self.scale_down(workload, gs, opts, state).await?
            } else {
                state.unneeded.retain(|(c, _), _| c != workload);
                false
            };
            self.write_status(workload, gs, scaled, down, state).await?;
        }
        // Forget what belongs to clusters without groups.
        state.unneeded.retain(|(c, _), _| groups.contains_key(c));
        state.scaled_up.retain(|c, _| groups.contains_key(c));
        state.status.retain(|c, _| groups.contains_key(c));
        Ok(())
    }

    /// The Ready, schedulable nodes of `workload` (each as a one-node group with its labels,
    /// taints and free capacity), and how many of each node group's machines have one.
    async fn existing_nodes(
        &self,
        workload: &str,
    ) -> Result<(Vec<(Group, Resource)>, HashMap<String, i64>)> {
        let nodes: Vec<Arc<Node>> = self
            .nodes
            .list_cluster(workload)
            .into_iter()
            .map(|(_, n)| n)
            .filter(|n| {
                crate::machine::node_condition(n, "Ready").is_some_and(|(s, _)| s == "True")
            })
            .collect();
        let mut by_group: HashMap<String, i64> = HashMap::new();
        for n in &nodes {
            let ann = n.metadata.annotations.clone().unwrap_or_default();
            if let (Some(ns), Some(mname)) = (
                ann.get(names::NODE_CLUSTER_NAMESPACE_ANNOTATION),
                ann.get(names::NODE_MACHINE_ANNOTATION),
            ) && let Some(m) = self.machines.get(&Ctx::key(ns, mname))
                && let Some(md) = m
                    .metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(names::DEPLOYMENT_NAME_LABEL))
            {
                *by_group.entry(format!("{ns}/{md}")).or_default() += 1;
            }
        }
        let schedulable: Vec<&Arc<Node>> = nodes
            .iter()
            .filter(|n| {
                !n.spec
                    .as_ref()
                    .and_then(|s| s.unschedulable)
                    .unwrap_or(false)
            })
            .collect();
        if schedulable.is_empty() {
            return Ok((Vec::new(), by_group));
        }
        let pods: Api<Pod> = Api::all(self.clients.cluster(workload)?);
        let mut used: HashMap<String, Resource> = HashMap::new();
        for p in pods.list(&ListParams::default()).await?.items {
            let finished = matches!(
                p.status.as_ref().and_then(|s| s.phase.as_deref()),
                Some("Succeeded" | "Failed")
            );
            if let (false, Some(spec)) = (finished, p.spec.as_ref())
                && let Some(node) = spec.node_name.clone()
            {
                let r = used.entry(node).or_default();
                r.add(&pod_requests(spec).0, 1);
                r.pods += 1;
            }
        }
        let existing = schedulable
            .into_iter()
            .map(|n| {
                let name = n.metadata.name.clone().unwrap_or_default();
                let allocatable = n
                    .status
                    .as_ref()
                    .and_then(|s| s.allocatable.as_ref())
                    .map(Resource::from_list)
                    .unwrap_or_default();
                let mut free = allocatable.clone();
                if let Some(u) = used.get(&name) {
                    free.add(u, -1);
                    free.pods -= u.pods;
                }
                let group = Group {
                    namespace: String::new(),
                    name: name.clone(),
                    workload: workload.to_string(),
                    min: 0,
                    max: 0,
                    replicas: 0,
                    ready: 0,
                    allocatable,
                    labels: n.metadata.labels.clone().unwrap_or_default(),
                    taints: n
                        .spec
                        .as_ref()
                        .and_then(|s| s.taints.clone())
                        .unwrap_or_default(),
                    annotations: BTreeMap::new(),
                    machine_spec: None,
                    resource_version: None,
                };
                (group, free)
            })
            .collect();
        Ok((existing, by_group))
    }

    async fn scale_up(
        &self,
        workload: &str,
        groups: &[Group],
        pods: &[Pod],
        state: &State,
    ) -> Result<bool> {
        // Pods the scheduler can still place on a Ready node are not the autoscaler's
        // (upstream's filter-out-schedulable: the scheduler retries an unschedulable pod with
        // back-off, so a pod can say Unschedulable for a while after a node became Ready).
        let (mut existing, ready_by_group) = self.existing_nodes(workload).await?;
        // Then upcoming machines (asked for, their node not Ready yet) take what they can.
        let mut upcoming: Vec<(usize, Resource)> = Vec::new();
        for (i, g) in groups.iter().enumerate() {
            let ready = ready_by_group.get(&g.id()).copied().unwrap_or(0);
            for _ in 0..(g.replicas - ready).max(0) {
                upcoming.push((i, g.allocatable.clone()));
            }
        }
        let mut waiting = Vec::new();
        for p in pods {
            if let Some((node, free)) = existing
                .iter_mut()
                .find(|(node, free)| misfit(p, node, free).is_none())
            {
                let _ = node;
                take(free, p);
            } else if let Some((i, free)) = upcoming
                .iter_mut()
                .find(|(i, free)| misfit(p, &groups[*i], free).is_none())
            {
                let _ = i;
                take(free, p);
            } else {
                waiting.push(p);
            }
        }
        if waiting.is_empty() {
            return Ok(false);
        }
        // Each group's option, the least waste wins.
        let mut best: Option<(usize, i64, Vec<usize>, f64)> = None;
        let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
        for (i, g) in groups.iter().enumerate() {
            if state.backoff.contains_key(&g.id()) {
                *reasons
                    .entry("in backoff after failed scale-up".into())
                    .or_default() += 1;
                continue;
            }
            let mut room = g.max - g.replicas;
            if room <= 0 {
                *reasons
                    .entry("max node group size reached".into())
                    .or_default() += 1;
                continue;
            }
            // The tenant's quota bounds the group as well (machines asked for but not yet
            // created are already counted by the quota's arithmetic once they exist).
            if let Some(spec) = &g.machine_spec {
                let (quota, refusal) = self.quota_room(&g.namespace, spec).await?;
                let asked = (g.replicas - self.group_machines(g).len() as i64).max(0);
                if let Some(q) = quota {
                    room = room.min(q - asked);
                }
                if room <= 0 {
                    let why = refusal.unwrap_or_else(|| "exceeded quota".into());
                    *reasons
                        .entry(format!("node group {} blocked by quota ({why})", g.id()))
                        .or_default() += 1;
                    continue;
                }
            }
            let (n, placed, nodes) = pack(&waiting, g, room);
            if n == 0 {
                let why = waiting
                    .iter()
                    .find_map(|p| misfit(p, g, &g.allocatable))
                    .unwrap_or_else(|| "no room".into());
                *reasons.entry(why).or_default() += 1;
                continue;
            }
            let w = waste(g, &nodes);
            let better = best.as_ref().is_none_or(|(_, _, bp, bw)| {
                placed.len() > bp.len() || (placed.len() == bp.len() && w < *bw)
            });
            if better {
                best = Some((i, n, placed, w));
            }
        }
        let helped: HashSet<usize> = best
            .as_ref()
            .map(|(_, _, p, _)| p.iter().copied().collect())
            .unwrap_or_default();
        if let Some((i, n, _, _)) = &best {
            let g = &groups[*i];
            let target = g.replicas + n;
            self.set_replicas(g, target).await?;
            tracing::info!(cluster = workload, group = %g.id(), from = g.replicas, to = target, "scale-up");
            let msg = format!(
                "pod triggered scale-up: [{{{} {}->{} (max: {})}}]",
                g.id(),
                g.replicas,
                target,
                g.max
            );
            for (k, p) in waiting.iter().enumerate() {
                if helped.contains(&k) {
                    self.recorder.record(
                        workload,
                        pod_ref(p),
                        "Normal",
                        "TriggeredScaleUp",
                        msg.clone(),
                    );
                }
            }
        }
        let summary: Vec<String> = reasons.iter().map(|(r, n)| format!("{n} {r}")).collect();
        for (k, p) in waiting.iter().enumerate() {
            if !helped.contains(&k) {
                let fits_some = groups
                    .iter()
                    .any(|g| misfit(p, g, &g.allocatable).is_none());
                let msg = if summary.is_empty() || fits_some && best.is_some() {
                    "pod didn't trigger scale-up (it wouldn't fit if a new node is added)"
                        .to_string()
                } else {
                    format!("pod didn't trigger scale-up: {}", summary.join(", "))
                };
                self.recorder
                    .record(workload, pod_ref(p), "Normal", "NotTriggerScaleUp", msg);
            }
        }
        Ok(best.is_some())
    }

    async fn give_up_on_slow_machines(
        &self,
        opts: &AutoscalerOptions,
        state: &mut State,
        groups: &[Group],
    ) -> Result<()> {
        for g in groups {
            let limit = g
                .option_seconds("maxnodeprovisiontime")
                .unwrap_or(opts.max_node_provision_time);
            for m in self.group_machines(g) {
                let ready = cond::is_true(m.status.as_ref(), "Ready");
                let age = m.metadata.creation_timestamp.as_ref().map_or(0, |t| {
                    (jiff::Timestamp::now().as_second() - t.0.as_second()).max(0)
                });
                if ready
                    || (age as u64) < limit.as_secs()
                    || m.metadata
                        .annotations
                        .as_ref()
                        .is_some_and(|a| a.contains_key(names::DELETE_MACHINE_ANNOTATION))
                {
                    continue;
                }
                self.mark_for_deletion(&m).await?;
                self.set_replicas(g, (g.replicas - 1).max(g.min)).await?;
                state.backoff.insert(g.id(), Instant::now() + opts.backoff);
                self.recorder.record(
                    ROOT,
                    runtime::events::reference(&*m),
                    "Warning",
                    "FailedToProvision",
                    format!(
                        "machine {} was not Ready within {}s: removed, node group {} backs off",
                        m.metadata.name.as_deref().unwrap_or(""),
                        limit.as_secs(),
                        g.id()
                    ),
                );
                break;
            }
        }
        Ok(())
    }

    async fn scale_down(
        &self,
        workload: &str,
        groups: &[Group],
        opts: &AutoscalerOptions,
        state: &mut State,
    ) -> Result<bool> {
        let client = self.clients.cluster(workload)?;
        // Nodes of groups above their minimum, with their machine.
        let mut candidates: Vec<(Arc<Node>, Arc<Machine>, &Group)> = Vec::new();
        let nodes: Vec<Arc<Node>> = self
            .nodes
            .list_cluster(workload)
            .into_iter()
            .map(|(_, n)| n)
            .collect();
        for n in &nodes {
            let ann = n.metadata.annotations.clone().unwrap_or_default();
            let (Some(ns), Some(mname)) = (
                ann.get(names::NODE_CLUSTER_NAMESPACE_ANNOTATION),
                ann.get(names::NODE_MACHINE_ANNOTATION),
            ) else {
                continue;
            };
            let Some(m) = self.machines.get(&Ctx::key(ns, mname)) else {
                continue;
            };
            if m.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let group = m
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(names::DEPLOYMENT_NAME_LABEL));
            if let Some(g) = groups
                .iter()
                .find(|g| Some(&g.name) == group && &g.namespace == ns)
                && g.replicas > g.min
            {
                candidates.push((n.clone(), m, g));
            }
        }
        if candidates.is_empty() {
            state.unneeded.retain(|(c, _), _| c != workload);
            return Ok(false);
        }
        let pods: Api<Pod> = Api::all(client.clone());
        let all_pods = pods.list(&ListParams::default()).await?.items;
        let live = |p: &&Pod| {
            !matches!(
                p.status.as_ref().and_then(|s| s.phase.as_deref()),
                Some("Succeeded" | "Failed")
            )
        };
        let mut on_node: HashMap<String, Vec<&Pod>> = HashMap::new();
        for p in all_pods.iter().filter(live) {
            if let Some(n) = p.spec.as_ref().and_then(|s| s.node_name.clone()) {
                on_node.entry(n).or_default().push(p);
            }
        }
        let allocatable = |n: &Node| {
            n.status
                .as_ref()
                .and_then(|s| s.allocatable.as_ref())
                .map(Resource::from_list)
                .unwrap_or_default()
        };
        let requested = |name: &str| {
            let mut r = Resource::default();
            for p in on_node.get(name).into_iter().flatten() {
                if let Some(s) = p.spec.as_ref() {
                    r.add(&pod_requests(s).0, 1);
                    r.pods += 1;
                }
            }
            r
        };
        let now = Instant::now();
        let mut seen = HashSet::new();
        let mut ripe: Vec<(Arc<Node>, Arc<Machine>, &Group)> = Vec::new();
        for (n, m, g) in &candidates {
            let name = n.metadata.name.clone().unwrap_or_default();
            seen.insert(name.clone());
            let a = allocatable(n);
            let r = requested(&name);
            let util = |used: i64, total: i64| {
                if total > 0 {
                    used as f64 / total as f64
                } else {
                    1.0
                }
            };
            let u = util(r.milli_cpu, a.milli_cpu).max(util(r.memory, a.memory));
            let threshold = g
                .annotations
                .get("cluster.x-k8s.io/autoscaling-options-scaledownutilizationthreshold")
                .and_then(|v| v.parse::<f64>().ok())
                .unwrap_or(opts.scale_down_utilization_threshold);
            let key = (workload.to_string(), name.clone());
            if u >= threshold {
                state.unneeded.remove(&key);
                continue;
            }
            let since = *state.unneeded.entry(key).or_insert(now);
            let wait = g
                .option_seconds("scaledownunneededtime")
                .unwrap_or(opts.scale_down_unneeded_time);
            if now.duration_since(since) >= wait {
                ripe.push((n.clone(), m.clone(), g));
            }
        }
        state
            .unneeded
            .retain(|(c, n), _| c != workload || seen.contains(n));
        if ripe.is_empty() {
            return Ok(false);
        }
        let pdbs: Api<PodDisruptionBudget> = Api::all(client.clone());
        let pdbs = pdbs.list(&ListParams::default()).await?.items;
        for (n, m, g) in ripe {
            let name = n.metadata.name.clone().unwrap_or_default();
            let movable: Vec<&Pod> = on_node.get(&name).cloned().unwrap_or_default();
            if let Some(why) = blocked(&movable, &pdbs) {
                tracing::debug!(node = %name, reason = %why, "not removable");
                continue;
            }
            // Room elsewhere: the other Ready, schedulable nodes' free capacity.
            let mut free: Vec<(Resource, BTreeMap<String, String>)> = nodes
                .iter()
                .filter(|o| o.metadata.name.as_deref() != Some(name.as_str()))
                .filter(|o| {
                    !o.spec
                        .as_ref()
                        .and_then(|s| s.unschedulable)
                        .unwrap_or(false)
                })
                .filter(|o| {
                    crate::machine::node_condition(o, "Ready").is_some_and(|(s, _)| s == "True")
                })
                .map(|o| {
                    let mut f = allocatable(o);
                    f.add(&requested(o.metadata.name.as_deref().unwrap_or("")), -1);
                    f.pods -= requested(o.metadata.name.as_deref().unwrap_or("")).pods;
                    (f, o.metadata.labels.clone().unwrap_or_default())
                })
                .collect();
            let fits = movable.iter().filter(|p| !daemon_or_mirror(p)).all(|p| {
                let spec = match p.spec.as_ref() {
                    Some(s) => s,
                    None => return true,
                };
                let (req, _) = pod_requests(spec);
                match free.iter_mut().find(|(f, labels)| {
                    f.pods >= 1
                        && req.milli_cpu <= f.milli_cpu
                        && req.memory <= f.memory
                        && node_admits(spec, "", labels)
                }) {
                    Some((f, _)) => {
                        f.add(&req, -1);
                        f.pods -= 1;
                        true
                    }
                    None => false,
                }
            });
            if !fits {
                continue;
            }
            self.mark_for_deletion(&m).await?;
            self.set_replicas(g, g.replicas - 1).await?;
            state.unneeded.remove(&(workload.to_string(), name.clone()));
            tracing::info!(cluster = workload, node = %name, group = %g.id(), "scale-down");
            let node_ref = k8s_openapi::api::core::v1::ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Node".into()),
                name: Some(name.clone()),
                uid: n.metadata.uid.clone(),
                ..Default::default()
            };
            self.recorder.record(
                workload,
                node_ref,
                "Normal",
                "ScaleDown",
                format!("node removed by cluster autoscaler (node group {})", g.id()),
            );
            return Ok(true);
        }
        Ok(false)
    }

    /// Writes `kube-system/cluster-autoscaler-status` of a workload cluster when it changed.
    async fn write_status(
        &self,
        workload: &str,
        groups: &[Group],
        scaled_up: bool,
        scaled_down: bool,
        state: &mut State,
    ) -> Result<()> {
        let mut text = String::from("autoscalerStatus: Running\nclusterWide:\n");
        let ready: i64 = groups.iter().map(|g| g.ready).sum();
        let target: i64 = groups.iter().map(|g| g.replicas).sum();
        let health = |ready: i64, target: i64| {
            if ready >= target {
                "Healthy"
            } else {
                "Unhealthy"
            }
        };
        text.push_str(&format!("  health:\n    status: {}\n    nodeCounts:\n      registered:\n        total: {ready}\n        ready: {ready}\n", health(ready, target)));
        text.push_str(&format!(
            "  scaleUp:\n    status: {}\n",
            if scaled_up || ready < target {
                "InProgress"
            } else {
                "NoActivity"
            }
        ));
        let candidates = state.unneeded.keys().filter(|(c, _)| c == workload).count();
        text.push_str(&format!(
            "  scaleDown:\n    status: {}\n",
            if scaled_down || candidates > 0 {
                "CandidatesPresent"
            } else {
                "NoCandidates"
            }
        ));
        text.push_str("nodeGroups:\n");
        for g in groups {
            text.push_str(&format!(
                "- name: MachineDeployment/{}\n  health:\n    status: {}\n    nodeCounts:\n      registered:\n        total: {}\n        ready: {}\n    cloudProviderTarget: {}\n    minSize: {}\n    maxSize: {}\n  scaleUp:\n    status: {}\n",
                g.id(), health(g.ready, g.replicas), g.ready, g.ready, g.replicas, g.min, g.max,
                if state.backoff.contains_key(&g.id()) { "Backoff" } else if g.ready < g.replicas { "InProgress" } else { "NoActivity" },
            ));
        }
        if state.status.get(workload) == Some(&text) {
            return Ok(());
        }
        let api: Api<ConfigMap> = Api::namespaced(self.clients.cluster(workload)?, "kube-system");
        let mut data = BTreeMap::new();
        data.insert(
            "status".to_string(),
            format!("time: {}\n{text}", cond::now()),
        );
        let cm = ConfigMap {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some("cluster-autoscaler-status".into()),
                annotations: Some(BTreeMap::from([(
                    "cluster-autoscaler.kubernetes.io/last-updated".to_string(),
                    cond::now(),
                )])),
                ..Default::default()
            },
            data: Some(data),
            ..Default::default()
        };
        match api
            .replace("cluster-autoscaler-status", &PostParams::default(), &cm)
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {
                api.create(&PostParams::default(), &cm).await?;
            }
            Err(e) => return Err(e.into()),
        }
        state.status.insert(workload.to_string(), text);
        Ok(())
    }

    /// Runs the autoscaler until `shutdown`.
    pub async fn run_autoscaler(
        self: Arc<Self>,
        opts: AutoscalerOptions,
        shutdown: impl std::future::Future<Output = ()>,
    ) {
        let mut state = State::default();
        tokio::pin!(shutdown);
        loop {
            if let Err(e) = self.autoscale_once(&opts, &mut state).await {
                tracing::warn!(error = %e, "autoscaler scan failed");
            }
            tokio::select! {
                () = &mut shutdown => return,
                () = tokio::time::sleep(opts.scan_interval) => {}
            }
        }
    }
}

fn daemon_or_mirror(p: &Pod) -> bool {
    p.metadata.owner_references.as_ref().is_some_and(|o| {
        o.iter()
            .any(|o| o.controller == Some(true) && o.kind == "DaemonSet")
    }) || p
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key("kubernetes.io/config.mirror"))
}

/// Why a node's pods cannot move (upstream's drainability rules), if they cannot.
pub fn blocked(pods: &[&Pod], pdbs: &[PodDisruptionBudget]) -> Option<String> {
    for p in pods.iter().filter(|p| !daemon_or_mirror(p)) {
        let name = format!(
            "{}/{}",
            p.metadata.namespace.as_deref().unwrap_or(""),
            p.metadata.name.as_deref().unwrap_or("")
        );
        let safe = p
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("cluster-autoscaler.kubernetes.io/safe-to-evict"))
            .map(String::as_str);
        if safe == Some("false") {
            return Some(format!(
                "pod annotated as not safe to evict present: {name}"
            ));
        }
        if safe == Some("true") {
            continue;
        }
        let replicated = p
            .metadata
            .owner_references
            .as_ref()
            .is_some_and(|o| o.iter().any(|o| o.controller == Some(true)));
        if !replicated {
            return Some(format!("non-replicated pod present: {name}"));
        }
        let local = p
            .spec
            .as_ref()
            .and_then(|s| s.volumes.as_ref())
            .is_some_and(|v| {
                v.iter().any(|v| {
                    v.host_path.is_some()
                        || v.empty_dir
                            .as_ref()
                            .is_some_and(|e| e.medium.as_deref() != Some("Memory"))
                })
            });
        if local {
            return Some(format!("pod with local storage present: {name}"));
        }
        let labels = p.metadata.labels.clone().unwrap_or_default();
        for pdb in pdbs {
            if pdb.metadata.namespace != p.metadata.namespace {
                continue;
            }
            let sel: Option<LabelSelector> = pdb.spec.as_ref().and_then(|s| s.selector.clone());
            if Selector::parse(sel.as_ref()).matches(&labels)
                && pdb
                    .status
                    .as_ref()
                    .is_some_and(|s| s.disruptions_allowed < 1)
            {
                return Some(format!("not enough pod disruption budget to move {name}"));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(cpu: &str, mem: &str, max: i64) -> Group {
        Group {
            namespace: "ns".into(),
            name: format!("g-{cpu}"),
            workload: "w".into(),
            min: 0,
            max,
            replicas: 0,
            ready: 0,
            allocatable: Resource {
                milli_cpu: Quantity::parse(cpu).unwrap().milli_value(),
                memory: Quantity::parse(mem).unwrap().value(),
                pods: 110,
                ..Default::default()
            },
            labels: BTreeMap::new(),
            taints: Vec::new(),
            annotations: BTreeMap::new(),
            machine_spec: None,
            resource_version: None,
        }
    }

    fn pod(cpu: &str) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "100Mi"}}}]}})).unwrap()
    }

    #[test]
    fn pods_pack_first_fit_into_as_few_template_nodes_as_room_allows() {
        let g = group("1", "4Gi", 3);
        let pods = [pod("600m"), pod("600m"), pod("300m"), pod("2")];
        let refs: Vec<&Pod> = pods.iter().collect();
        let (n, placed, _) = pack(&refs, &g, 3);
        assert_eq!(n, 2, "600m+300m and 600m; the 2-CPU pod fits no node");
        assert_eq!(placed.len(), 3);
        let (n, placed, _) = pack(&refs, &g, 1);
        assert_eq!((n, placed.len()), (1, 2));
    }

    #[test]
    fn least_waste_prefers_the_group_whose_nodes_are_used_up() {
        let small = group("1", "4Gi", 3);
        let big = group("8", "32Gi", 3);
        let pods = [pod("900m")];
        let refs: Vec<&Pod> = pods.iter().collect();
        let (_, _, s) = pack(&refs, &small, 3);
        let (_, _, b) = pack(&refs, &big, 3);
        assert!(waste(&small, &s) < waste(&big, &b));
    }

    #[test]
    fn taints_and_selectors_of_the_template_decide_what_fits() {
        let mut g = group("4", "8Gi", 1);
        g.taints = parse_taints(Some(&"gpu=yes:NoSchedule".to_string()));
        let p = pod("1");
        assert_eq!(
            misfit(&p, &g, &g.allocatable).as_deref(),
            Some("node(s) had untolerated taint {gpu: yes}")
        );
        g.taints.clear();
        let mut p2 = pod("1");
        p2.spec.as_mut().unwrap().node_selector =
            Some(BTreeMap::from([("disk".to_string(), "ssd".to_string())]));
        assert!(misfit(&p2, &g, &g.allocatable).is_some());
        g.labels = parse_labels(Some(&"disk=ssd".to_string()));
        assert!(misfit(&p2, &g, &g.allocatable).is_none());
    }

    #[test]
    fn a_node_with_unreplicated_local_or_protected_pods_stays() {
        let bare = pod("1");
        assert!(
            blocked(&[&bare], &[])
                .unwrap()
                .starts_with("non-replicated pod present")
        );
        let mut owned = pod("1");
        owned.metadata.owner_references = Some(vec![
            k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                kind: "ReplicaSet".into(),
                controller: Some(true),
                ..Default::default()
            },
        ]);
        assert!(blocked(&[&owned], &[]).is_none());
        let mut safe = bare.clone();
        safe.metadata.annotations = Some(BTreeMap::from([(
            "cluster-autoscaler.kubernetes.io/safe-to-evict".to_string(),
            "true".to_string(),
        )]));
        assert!(blocked(&[&safe], &[]).is_none());
        let mut local = owned.clone();
        local.spec.as_mut().unwrap().volumes = Some(vec![
            serde_json::from_value(json!({"name": "d", "emptyDir": {}})).unwrap(),
        ]);
        assert!(
            blocked(&[&local], &[])
                .unwrap()
                .starts_with("pod with local storage")
        );
    }
}
