//! Resource vectors: what a pod requests and what a node can allocate, as integers.
//!
//! Quantities are parsed once (when a pod or node enters the cache) into millicores, bytes and
//! counts, so filters and scores compare integers. A pod's request follows upstream's
//! `PodRequests`: the sum of its containers, sidecars (restartable init containers) added to
//! that sum, each ordinary init container taken at its own size plus the sidecars started
//! before it, the maximum of the two, plus the pod overhead. The "non-zero" variant used by
//! scoring counts a container without a CPU or memory request as 100m / 200Mi, so pods with no
//! requests still spread.

use std::collections::BTreeMap;

use apimachinery::quantity::Quantity;
use k8s_openapi::api::core::v1::{Container, PodSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;

/// The CPU a container without a CPU request counts as when scoring (upstream
/// `DefaultMilliCPURequest`).
pub const DEFAULT_MILLI_CPU_REQUEST: i64 = 100;
/// The memory a container without a memory request counts as when scoring (200Mi, upstream
/// `DefaultMemoryRequest`).
pub const DEFAULT_MEMORY_REQUEST: i64 = 200 * 1024 * 1024;

/// An amount of every resource the scheduler accounts for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resource {
    pub milli_cpu: i64,
    pub memory: i64,
    pub ephemeral_storage: i64,
    /// Pods (only meaningful for allocatable).
    pub pods: i64,
    /// Extended and other scalar resources (`example.com/gpu`, `hugepages-2Mi`), by name.
    pub scalars: Vec<(String, i64)>,
}

impl Resource {
    /// Whether nothing is requested (pods count aside).
    pub fn is_zero(&self) -> bool {
        self.milli_cpu == 0
            && self.memory == 0
            && self.ephemeral_storage == 0
            && self.scalars.iter().all(|(_, v)| *v == 0)
    }

    /// The amount of a scalar resource.
    pub fn scalar(&self, name: &str) -> i64 {
        self.scalars
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| *v)
            .unwrap_or(0)
    }

    fn scalar_mut(&mut self, name: &str) -> &mut i64 {
        let i = match self.scalars.iter().position(|(n, _)| n == name) {
            Some(i) => i,
            None => {
                self.scalars.push((name.to_string(), 0));
                self.scalars.len() - 1
            }
        };
        &mut self.scalars[i].1
    }

    /// Adds `other` (`sign` 1) or takes it away (`sign` -1).
    pub fn add(&mut self, other: &Resource, sign: i64) {
        self.milli_cpu += sign * other.milli_cpu;
        self.memory += sign * other.memory;
        self.ephemeral_storage += sign * other.ephemeral_storage;
        self.pods += sign * other.pods;
        for (n, v) in &other.scalars {
            *self.scalar_mut(n) += sign * v;
        }
    }

    /// Raises every amount to at least `other`'s.
    pub fn max_with(&mut self, other: &Resource) {
        self.milli_cpu = self.milli_cpu.max(other.milli_cpu);
        self.memory = self.memory.max(other.memory);
        self.ephemeral_storage = self.ephemeral_storage.max(other.ephemeral_storage);
        for (n, v) in &other.scalars {
            let s = self.scalar_mut(n);
            *s = (*s).max(*v);
        }
    }

    /// Reads a resource list (`requests`, `allocatable`, `overhead`). Unparseable quantities
    /// count as zero: the API server validated them, and nothing a client sends may panic.
    pub fn from_list(list: &BTreeMap<String, K8sQuantity>) -> Resource {
        let mut r = Resource::default();
        for (name, q) in list {
            let Ok(q) = Quantity::parse(&q.0) else {
                continue;
            };
            match name.as_str() {
                "cpu" => r.milli_cpu += q.milli_value(),
                "memory" => r.memory += q.value(),
                "ephemeral-storage" => r.ephemeral_storage += q.value(),
                "pods" => r.pods += q.value(),
                "storage" => {}
                other => *r.scalar_mut(other) += q.value(),
            }
        }
        r.scalars.retain(|(_, v)| *v != 0);
        r
    }
}

/// CPU and memory as counted by scoring (missing requests count as the defaults).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NonZero {
    pub milli_cpu: i64,
    pub memory: i64,
}

impl NonZero {
    pub fn add(&mut self, other: NonZero, sign: i64) {
        self.milli_cpu += sign * other.milli_cpu;
        self.memory += sign * other.memory;
    }
}

fn container_requests(c: &Container) -> (Resource, NonZero) {
    let reqs = c.resources.as_ref().and_then(|r| r.requests.as_ref());
    let r = reqs.map(Resource::from_list).unwrap_or_default();
    let has = |name: &str| reqs.is_some_and(|m| m.contains_key(name));
    let nz = NonZero {
        milli_cpu: if has("cpu") {
            r.milli_cpu
        } else {
            DEFAULT_MILLI_CPU_REQUEST
        },
        memory: if has("memory") {
            r.memory
        } else {
            DEFAULT_MEMORY_REQUEST
        },
    };
    (r, nz)
}

/// A pod's effective request and its non-zero CPU and memory, as upstream computes them.
pub fn pod_requests(spec: &PodSpec) -> (Resource, NonZero) {
    let mut total = Resource::default();
    let mut total_nz = NonZero::default();
    for c in &spec.containers {
        let (r, nz) = container_requests(c);
        total.add(&r, 1);
        total_nz.add(nz, 1);
    }
    let mut sidecars = Resource::default();
    let mut sidecars_nz = NonZero::default();
    let mut init_max = Resource::default();
    let mut init_max_nz = NonZero::default();
    for c in spec.init_containers.iter().flatten() {
        let (mut r, mut nz) = container_requests(c);
        if c.restart_policy.as_deref() == Some("Always") {
            total.add(&r, 1);
            total_nz.add(nz, 1);
            sidecars.add(&r, 1);
            sidecars_nz.add(nz, 1);
            r = sidecars.clone();
            nz = sidecars_nz;
        } else {
            r.add(&sidecars, 1);
            nz.add(sidecars_nz, 1);
        }
        init_max.max_with(&r);
        init_max_nz.milli_cpu = init_max_nz.milli_cpu.max(nz.milli_cpu);
        init_max_nz.memory = init_max_nz.memory.max(nz.memory);
    }
    total.max_with(&init_max);
    total_nz.milli_cpu = total_nz.milli_cpu.max(init_max_nz.milli_cpu);
    total_nz.memory = total_nz.memory.max(init_max_nz.memory);
    if let Some(o) = &spec.overhead {
        let o = Resource::from_list(o);
        total.add(&o, 1);
        total_nz.add(
            NonZero {
                milli_cpu: o.milli_cpu,
                memory: o.memory,
            },
            1,
        );
    }
    total.scalars.retain(|(_, v)| *v != 0);
    (total, total_nz)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(v: serde_json::Value) -> PodSpec {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn containers_add_up_and_init_containers_take_the_maximum() {
        let s = spec(json!({
            "initContainers": [
                {"name": "i1", "resources": {"requests": {"cpu": "2", "memory": "1G"}}},
                {"name": "i2", "resources": {"requests": {"cpu": "2", "memory": "3G"}}}
            ],
            "containers": [
                {"name": "c1", "resources": {"requests": {"cpu": "2", "memory": "1G"}}},
                {"name": "c2", "resources": {"requests": {"cpu": "1", "memory": "1G"}}}
            ]
        }));
        let (r, _) = pod_requests(&s);
        assert_eq!(r.milli_cpu, 3000);
        assert_eq!(r.memory, 3_000_000_000);
    }

    #[test]
    fn overhead_is_added_to_the_request() {
        let s = spec(json!({
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "250m"}}}],
            "overhead": {"cpu": "100m", "memory": "64Mi"}
        }));
        let (r, nz) = pod_requests(&s);
        assert_eq!(r.milli_cpu, 350);
        assert_eq!(r.memory, 64 * 1024 * 1024);
        assert_eq!(nz.memory, DEFAULT_MEMORY_REQUEST + 64 * 1024 * 1024);
    }

    #[test]
    fn sidecars_count_in_the_sum_and_before_later_init_containers() {
        let s = spec(json!({
            "initContainers": [
                {"name": "side", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}},
                {"name": "init", "resources": {"requests": {"cpu": "3"}}}
            ],
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]
        }));
        let (r, _) = pod_requests(&s);
        // max(1 + 1 sidecar, 3 + 1 sidecar) = 4
        assert_eq!(r.milli_cpu, 4000);
    }

    #[test]
    fn missing_requests_count_as_defaults_only_for_scoring() {
        let s = spec(json!({"containers": [{"name": "c"}, {"name": "d"}]}));
        let (r, nz) = pod_requests(&s);
        assert!(r.is_zero());
        assert_eq!(nz.milli_cpu, 2 * DEFAULT_MILLI_CPU_REQUEST);
        assert_eq!(nz.memory, 2 * DEFAULT_MEMORY_REQUEST);
    }

    #[test]
    fn extended_resources_are_scalars_and_pods_are_counted() {
        let list: BTreeMap<String, K8sQuantity> = serde_json::from_value(json!({
            "cpu": "4", "memory": "8Gi", "pods": "110", "example.com/gpu": "2", "bogus": "x"
        }))
        .unwrap();
        let r = Resource::from_list(&list);
        assert_eq!(r.milli_cpu, 4000);
        assert_eq!(r.pods, 110);
        assert_eq!(r.scalar("example.com/gpu"), 2);
        assert_eq!(r.scalar("bogus"), 0);
    }
}
