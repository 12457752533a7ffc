//! Node sizing: from a node group's instance type, resources, kubelet overrides and disk to
//! a node's capacity and allocatable resources.
//!
//! Allocatable is capacity minus the system and kube reservations minus the hard eviction
//! threshold, for memory and CPU exactly as the Cozystack chart computes its cluster-autoscaler
//! capacity annotations (spec `cozystack.md` §3.4: `u1.medium` → `3297Mi`, `900m`), and for
//! ephemeral storage minus the kubelet's fixed `nodefs.available` hard threshold (10 %), as
//! upstream's kubelet does. Everything here is pure.

pub mod instancetype;
pub mod kubelet;
pub mod units;

use std::collections::BTreeMap;

use apimachinery::field::{ErrorList, Path};
use apimachinery::quantity::{Format, Quantity};

pub use instancetype::{INSTANCE_TYPES, InstanceType, Series, instance_type};
pub use kubelet::{Amount, KubeletOverrides, Reservations, SizingInput, validate};

/// Pods a node admits (upstream kubelet's `maxPods` default).
pub const MAX_PODS: u32 = 110;

/// The resource name of NVIDIA GPUs inside a node (what the device plugin advertises, whatever
/// the host device was).
pub const GPU_RESOURCE: &str = "nvidia.com/gpu";

/// The fixed `nodefs.available` hard eviction threshold, percent of the disk.
pub const NODEFS_HARD_EVICTION_PERCENT: u64 = 10;

/// A node's resolved size.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeSizing {
    /// The instance type, when the group names one.
    pub instance_type: Option<&'static InstanceType>,
    /// Node memory as written (`4Gi`), if known.
    pub memory: Option<String>,
    /// Node memory in bytes, if known.
    pub memory_bytes: Option<f64>,
    /// Node CPU as written (`1`, `500m`), if known.
    pub cpu: Option<String>,
    /// Node CPU in millicores, if known.
    pub cpu_millis: Option<f64>,
    pub reservations: Reservations,
    /// Disk size in bytes.
    pub disk_bytes: u64,
    /// GPU devices (the instance type's, then the group's).
    pub gpus: Vec<String>,
}

/// Validates `input` and resolves it; the errors are [`validate`]'s, under `path`.
pub fn resolve(input: &SizingInput, path: &Path) -> Result<NodeSizing, ErrorList> {
    let errs = validate(input, path);
    if !errs.is_empty() {
        return Err(errs);
    }
    let (it, memory, cpu) = kubelet::effective(input);
    let memory_bytes = memory.as_deref().and_then(units::memory_bytes);
    let cpu_millis = cpu.as_deref().and_then(units::cpu_millicores);
    let reservations = kubelet::reservations(input, memory_bytes, cpu_millis);
    let disk = input
        .disk_size
        .as_deref()
        .filter(|s| !s.is_empty())
        .unwrap_or(kubelet::DEFAULT_DISK_SIZE);
    let disk_bytes = units::memory_bytes(disk).unwrap_or(0.0) as u64;
    let gpus = it
        .map(|t| t.gpus.iter().map(|g| g.device_name.to_string()).collect())
        .unwrap_or_else(Vec::new)
        .into_iter()
        .chain(input.gpus.iter().cloned())
        .collect();
    Ok(NodeSizing {
        instance_type: it,
        memory,
        memory_bytes,
        cpu,
        cpu_millis,
        reservations,
        disk_bytes,
        gpus,
    })
}

/// Why a node cannot be built from a sizing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SizeError {
    /// Neither an instance type nor resources give the node's memory and CPU.
    #[error("the node's memory and CPU are unknown: name an instance type or set resources")]
    Unknown,
}

impl NodeSizing {
    /// Allocatable memory in MiB: floor((memory − system − kube − hard eviction) / 1 MiB).
    pub fn allocatable_memory_mib(&self) -> Option<i64> {
        let r = &self.reservations;
        self.memory_bytes.map(|m| {
            ((m - (r.system_memory.value + r.kube_memory.value + r.eviction_hard.value))
                / 1048576.0)
                .floor() as i64
        })
    }

    /// Allocatable CPU in millicores: ceil(cpu − system − kube).
    pub fn allocatable_cpu_millis(&self) -> Option<i64> {
        let r = &self.reservations;
        self.cpu_millis
            .map(|c| (c - (r.system_cpu.value + r.kube_cpu.value)).ceil() as i64)
    }

    /// The cluster-autoscaler capacity annotations of the node group's MachineDeployment
    /// (`capacity.cluster-autoscaler.kubernetes.io/memory: 3297Mi`, `.../cpu: 900m`), for what
    /// is known.
    pub fn capacity_annotations(&self) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        if let Some(mi) = self.allocatable_memory_mib() {
            out.insert(
                "capacity.cluster-autoscaler.kubernetes.io/memory".to_string(),
                format!("{mi}Mi"),
            );
        }
        if let Some(m) = self.allocatable_cpu_millis() {
            out.insert(
                "capacity.cluster-autoscaler.kubernetes.io/cpu".to_string(),
                format!("{m}m"),
            );
        }
        out
    }

    fn gpu_count(&self) -> usize {
        self.gpus.len()
    }

    /// `status.capacity` of the node: cpu, memory, pods, ephemeral-storage, hugepages and GPUs,
    /// as canonical quantities.
    pub fn capacity(&self) -> Result<BTreeMap<String, String>, SizeError> {
        let (Some(mem), Some(cpu)) = (self.memory_bytes, self.cpu_millis) else {
            return Err(SizeError::Unknown);
        };
        let mut out = self.common();
        out.insert("cpu".into(), millicores(cpu as i64));
        out.insert("memory".into(), bytes(mem.ceil() as i64));
        out.insert(
            "ephemeral-storage".into(),
            bytes(i64::try_from(self.disk_bytes).unwrap_or(i64::MAX)),
        );
        Ok(out)
    }

    /// `status.allocatable` of the node: capacity less reservations and hard eviction.
    pub fn allocatable(&self) -> Result<BTreeMap<String, String>, SizeError> {
        let (Some(mem_mib), Some(cpu)) =
            (self.allocatable_memory_mib(), self.allocatable_cpu_millis())
        else {
            return Err(SizeError::Unknown);
        };
        let mut out = self.common();
        out.insert("cpu".into(), millicores(cpu.max(0)));
        out.insert("memory".into(), bytes(mem_mib.max(0) * 1048576));
        let disk = u128::from(self.disk_bytes);
        let kept = disk - disk * u128::from(NODEFS_HARD_EVICTION_PERCENT) / 100;
        out.insert(
            "ephemeral-storage".into(),
            bytes(i64::try_from(kept).unwrap_or(i64::MAX)),
        );
        Ok(out)
    }

    fn common(&self) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        out.insert("pods".to_string(), MAX_PODS.to_string());
        out.insert("hugepages-1Gi".to_string(), "0".to_string());
        out.insert("hugepages-2Mi".to_string(), "0".to_string());
        if self.gpu_count() > 0 {
            out.insert(GPU_RESOURCE.to_string(), self.gpu_count().to_string());
        }
        out
    }

    /// The kubelet configuration fragment the chart renders for this group's workers
    /// (`systemReserved`, `kubeReserved`, `evictionHard`, `evictionSoft`,
    /// `evictionSoftGracePeriod`, `evictionMinimumReclaim`), as KubeletConfiguration JSON.
    pub fn kubelet_config(&self) -> serde_json::Value {
        let r = &self.reservations;
        serde_json::json!({
            "systemReserved": {"cpu": r.system_cpu.text, "memory": r.system_memory.text},
            "kubeReserved": {"cpu": r.kube_cpu.text, "memory": r.kube_memory.text},
            "evictionHard": {
                "memory.available": r.eviction_hard.text,
                "nodefs.available": "10%",
                "imagefs.available": "15%",
                "nodefs.inodesFree": "5%",
            },
            "evictionSoft": {
                "memory.available": r.eviction_soft.text,
                "nodefs.available": "15%",
                "imagefs.available": "20%",
            },
            "evictionSoftGracePeriod": {
                "memory.available": "1m30s",
                "nodefs.available": "1m30s",
                "imagefs.available": "1m30s",
            },
            "evictionMinimumReclaim": {"memory.available": "256Mi"},
        })
    }
}

/// A CPU amount as a canonical quantity (`900m`, `31`).
fn millicores(m: i64) -> String {
    Quantity::from_milli(m, Format::DecimalSI).canonical()
}

/// A byte amount as a canonical binary quantity (`3297Mi`, `18Gi`).
fn bytes(b: i64) -> String {
    Quantity::new(b, Format::BinarySI).canonical()
}

#[cfg(test)]
mod tests;
