//! Kubelet reservations and eviction thresholds of a node group: the automatic values, the
//! user's overrides, and the validation rules, as Cozystack's `kubernetes` chart computes
//! them (spec `cozystack.md` §3.3).
//!
//! [`validate`] returns every problem as a field error under the node group's path, so the
//! platform's TenantCluster validation reports them all in one 422; [`resolve`] turns a
//! valid input into the [`NodeSizing`](super::NodeSizing) that node capacity and allocatable
//! come from.

use apimachinery::field::{ErrorList, FieldError, Path};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::instancetype::{self, InstanceType};
use super::units;

/// Default hard memory eviction threshold.
pub const DEFAULT_EVICTION_HARD: &str = "7%";
/// Default soft memory eviction threshold.
pub const DEFAULT_EVICTION_SOFT: &str = "10%";
/// The worker disk size when a node group names none (the chart's `diskSize` default).
pub const DEFAULT_DISK_SIZE: &str = "20Gi";

const MEMORY_HINT: &str =
    "must be a valid Kubernetes memory quantity (e.g. 128Mi, 1Gi, 1e9, 500e6)";
const CPU_HINT: &str = "must be a valid Kubernetes CPU quantity (integer millicores like 100m, or decimal cores like 0.5, 1)";

/// A node group's `kubelet` overrides; `None` (or an empty string) means automatic.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KubeletOverrides {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_reserved_memory: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kube_reserved_memory: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_reserved_cpu: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kube_reserved_cpu: Option<String>,
    /// A percentage of node memory (`7%`) or an absolute memory quantity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eviction_hard_memory: Option<String>,
    /// Same unit type as the hard threshold, and strictly above it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eviction_soft_memory: Option<String>,
}

/// What a node's size is computed from: a node group's instance type, explicit resources,
/// kubelet overrides and disk.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SizingInput {
    /// An instance type name (`u1.medium`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_type: Option<String>,
    /// `resources.cpu`: overrides the instance type's vCPUs (set with `memory`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<String>,
    /// `resources.memory`: overrides the instance type's memory (set with `cpu`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<String>,
    #[serde(default)]
    pub kubelet: KubeletOverrides,
    /// The worker disk (`diskSize`); [`DEFAULT_DISK_SIZE`] when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk_size: Option<String>,
    /// GPUs the group adds (`gpus[].name`, device names such as `nvidia.com/A400`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpus: Vec<String>,
}

impl SizingInput {
    /// An input sized by an instance type alone.
    pub fn instance_type(name: &str) -> Self {
        SizingInput {
            instance_type: Some(name.to_string()),
            ..SizingInput::default()
        }
    }
}

/// A set value: `Some("")` counts as unset, as Helm's `default` treats it.
fn set(v: &Option<String>) -> Option<&str> {
    v.as_deref().filter(|s| !s.is_empty())
}

/// A memory or CPU amount and how it was spelled.
#[derive(Debug, Clone, PartialEq)]
pub struct Amount {
    /// As written (`256Mi`, `50m`, `7%`).
    pub text: String,
    /// Bytes for memory, millicores for CPU.
    pub value: f64,
}

/// The resolved kubelet configuration of a node.
#[derive(Debug, Clone, PartialEq)]
pub struct Reservations {
    pub system_memory: Amount,
    pub kube_memory: Amount,
    pub system_cpu: Amount,
    pub kube_cpu: Amount,
    /// `value` is the threshold in bytes (a percentage resolved against node memory; 0 when
    /// node memory is unknown).
    pub eviction_hard: Amount,
    pub eviction_soft: Amount,
}

/// Node memory and CPU from explicit resources or the instance type, if known.
pub(super) fn effective(
    input: &SizingInput,
) -> (
    Option<&'static InstanceType>,
    Option<String>,
    Option<String>,
) {
    let it = set(&input.instance_type).and_then(instancetype::instance_type);
    let memory = set(&input.memory)
        .map(str::to_string)
        .or_else(|| it.map(InstanceType::memory));
    let cpu = set(&input.cpu)
        .map(str::to_string)
        .or_else(|| it.map(|t| t.cpus.to_string()));
    (it, memory, cpu)
}

/// The automatic memory reservation (per field): 5 % of node memory in MiB, truncated, clamped
/// to [256, 1024] MiB; 256 MiB when node memory is unknown.
pub fn auto_memory_mib(memory_bytes: Option<f64>) -> i64 {
    match memory_bytes {
        Some(b) => {
            let mib = (b / 1048576.0).trunc();
            ((mib * 0.05).trunc() as i64).clamp(256, 1024)
        }
        None => 256,
    }
}

/// The automatic CPU reservation (per field): 5 % of node millicores, truncated, clamped to
/// [50, 500] m; 50 m when node CPU is unknown.
pub fn auto_cpu_millis(cpu_millis: Option<f64>) -> i64 {
    match cpu_millis {
        Some(m) => ((m.trunc() * 0.05).trunc() as i64).clamp(50, 500),
        None => 50,
    }
}

/// Checks a node group's sizing. `path` is the node group (`spec.nodeGroups[md0]`); errors
/// name `instanceType`, `resources.cpu`, `resources.memory`, `diskSize`, `gpus[i].name` and
/// `kubelet.<field>` under it. Every problem is reported, not only the first.
pub fn validate(input: &SizingInput, path: &Path) -> ErrorList {
    let mut errs = ErrorList::new();
    if let Some(name) = set(&input.instance_type)
        && instancetype::instance_type(name).is_none()
    {
        errs.push(FieldError::invalid(
            path.child("instanceType").as_str(),
            json!(name),
            "instance type not found (known series: u1, o1, cx1, m1, rt1, d1, n1, gn1; e.g. u1.medium)",
        ));
    }
    let res = path.child("resources");
    match (set(&input.cpu), set(&input.memory)) {
        (Some(_), None) => errs.push(FieldError::required(
            res.child("memory").as_str(),
            "set both resources.cpu and resources.memory, or neither",
        )),
        (None, Some(_)) => errs.push(FieldError::required(
            res.child("cpu").as_str(),
            "set both resources.cpu and resources.memory, or neither",
        )),
        _ => {}
    }
    if let Some(cpu) = set(&input.cpu) {
        positive_cpu(&mut errs, &res.child("cpu"), cpu);
    }
    if let Some(mem) = set(&input.memory) {
        positive_memory(&mut errs, &res.child("memory"), mem);
    }
    if let Some(disk) = set(&input.disk_size) {
        positive_memory(&mut errs, &path.child("diskSize"), disk);
    }
    for (i, gpu) in input.gpus.iter().enumerate() {
        if gpu.is_empty() {
            errs.push(FieldError::required(
                path.child("gpus").index(i).child("name").as_str(),
                "a GPU device name such as nvidia.com/A400",
            ));
        }
    }
    errs.extend(validate_kubelet(input, &path.child("kubelet")));
    errs
}

fn positive_memory(errs: &mut ErrorList, path: &Path, v: &str) {
    match units::memory_bytes(v) {
        None => errs.push(FieldError::invalid(path.as_str(), json!(v), MEMORY_HINT)),
        Some(b) if b <= 0.0 => errs.push(FieldError::invalid(
            path.as_str(),
            json!(v),
            "must be a positive value",
        )),
        Some(_) => {}
    }
}

fn positive_cpu(errs: &mut ErrorList, path: &Path, v: &str) {
    match units::cpu_millicores(v) {
        None => errs.push(FieldError::invalid(path.as_str(), json!(v), CPU_HINT)),
        Some(m) if m <= 0.0 => errs.push(FieldError::invalid(
            path.as_str(),
            json!(v),
            "must be a positive value",
        )),
        Some(_) => {}
    }
}

/// The kubelet rules: override formats and signs, the eviction pair, the totals against node
/// memory and CPU, and that overrides need a known node size.
fn validate_kubelet(input: &SizingInput, path: &Path) -> ErrorList {
    let mut errs = ErrorList::new();
    let k = &input.kubelet;
    let before = errs.len();
    for (field, v) in [
        ("systemReservedMemory", &k.system_reserved_memory),
        ("kubeReservedMemory", &k.kube_reserved_memory),
    ] {
        if let Some(v) = set(v) {
            positive_memory(&mut errs, &path.child(field), v);
        }
    }
    for (field, v) in [
        ("systemReservedCpu", &k.system_reserved_cpu),
        ("kubeReservedCpu", &k.kube_reserved_cpu),
    ] {
        if let Some(v) = set(v) {
            positive_cpu(&mut errs, &path.child(field), v);
        }
    }
    let reservations_ok = errs.len() == before;
    let eviction_ok = validate_eviction(input, path, &mut errs);

    let (_, memory, cpu) = effective(input);
    let memory_bytes = memory.as_deref().and_then(units::memory_bytes);
    let cpu_millis = cpu.as_deref().and_then(units::cpu_millicores);
    if memory.is_none()
        && [
            &k.system_reserved_memory,
            &k.kube_reserved_memory,
            &k.eviction_hard_memory,
            &k.eviction_soft_memory,
        ]
        .iter()
        .any(|v| set(v).is_some())
    {
        errs.push(FieldError::forbidden(
            path.as_str(),
            "kubelet memory reservations require effective memory to validate: set resources.memory or instanceType",
        ));
    }
    if cpu.is_none()
        && (set(&k.system_reserved_cpu).is_some() || set(&k.kube_reserved_cpu).is_some())
    {
        errs.push(FieldError::forbidden(
            path.as_str(),
            "kubelet CPU reservations require effective CPU to validate: set resources.cpu or instanceType",
        ));
    }
    if !(reservations_ok && eviction_ok) {
        return errs;
    }
    let r = reservations(input, memory_bytes, cpu_millis);
    if let (Some(mem), Some(text)) = (memory_bytes, memory.as_deref())
        && r.system_memory.value + r.kube_memory.value + r.eviction_hard.value >= mem
    {
        errs.push(FieldError::invalid(
            path.as_str(),
            json!(format!(
                "{}+{}+{}",
                r.system_memory.text, r.kube_memory.text, r.eviction_hard.text
            )),
            format!(
                "total reserved memory (systemReservedMemory={} + kubeReservedMemory={} + evictionHardMemory={}) must be less than effective node memory ({text})",
                r.system_memory.text, r.kube_memory.text, r.eviction_hard.text
            ),
        ));
    }
    if let (Some(millis), Some(text)) = (cpu_millis, cpu.as_deref())
        && r.system_cpu.value + r.kube_cpu.value >= millis
    {
        errs.push(FieldError::invalid(
            path.as_str(),
            json!(format!("{}+{}", r.system_cpu.text, r.kube_cpu.text)),
            format!(
                "total reserved CPU (systemReservedCpu={} + kubeReservedCpu={}) must be less than effective node CPU ({text} cores)",
                r.system_cpu.text, r.kube_cpu.text
            ),
        ));
    }
    errs
}

/// The eviction pair: each a percentage in (0, 100] or a memory quantity, both of one kind,
/// hard strictly below soft. Returns whether the pair is usable.
fn validate_eviction(input: &SizingInput, path: &Path, errs: &mut ErrorList) -> bool {
    let k = &input.kubelet;
    let hard = set(&k.eviction_hard_memory).unwrap_or(DEFAULT_EVICTION_HARD);
    let soft = set(&k.eviction_soft_memory).unwrap_or(DEFAULT_EVICTION_SOFT);
    let before = errs.len();
    let mut check = |field: &str, v: &str, example: &str| -> Option<(bool, f64)> {
        let p = path.child(field);
        if let Some(num) = v.strip_suffix('%') {
            let Some(pct) = units::percentage(v) else {
                errs.push(FieldError::invalid(
                    p.as_str(),
                    json!(v),
                    format!("percentage value {num:?} is not a valid number"),
                ));
                return None;
            };
            if pct <= 0.0 || pct > 100.0 {
                errs.push(FieldError::invalid(
                    p.as_str(),
                    json!(v),
                    "percentage must be greater than 0 and at most 100",
                ));
                return None;
            }
            Some((true, pct))
        } else {
            match units::memory_bytes(v) {
                Some(b) => Some((false, b)),
                None => {
                    errs.push(FieldError::invalid(
                        p.as_str(),
                        json!(v),
                        format!(
                            "must be a percentage (e.g. {example}) or a valid Kubernetes memory quantity (e.g. 500Mi, 1Gi, 1e9)"
                        ),
                    ));
                    None
                }
            }
        }
    };
    let h = check("evictionHardMemory", hard, "7%");
    let s = check("evictionSoftMemory", soft, "10%");
    let (Some((hard_pct, hv)), Some((soft_pct, sv))) = (h, s) else {
        return false;
    };
    if hard_pct != soft_pct {
        errs.push(FieldError::invalid(
            path.child("evictionSoftMemory").as_str(),
            json!(soft),
            format!(
                "evictionHardMemory ({hard}) and evictionSoftMemory ({soft}) must use the same unit type (both percentage or both absolute)"
            ),
        ));
    } else if hv >= sv {
        errs.push(FieldError::invalid(
            path.child("evictionHardMemory").as_str(),
            json!(hard),
            format!(
                "evictionHardMemory ({hard}) must be strictly less than evictionSoftMemory ({soft})"
            ),
        ));
    }
    errs.len() == before
}

/// The resolved reservations of a valid input (overrides, else automatic values) with node
/// memory in bytes and CPU in millicores where known.
pub(super) fn reservations(
    input: &SizingInput,
    memory_bytes: Option<f64>,
    cpu_millis: Option<f64>,
) -> Reservations {
    let k = &input.kubelet;
    let auto_mem = format!("{}Mi", auto_memory_mib(memory_bytes));
    let auto_cpu = format!("{}m", auto_cpu_millis(cpu_millis));
    let mem = |v: &Option<String>| {
        let text = set(v).unwrap_or(&auto_mem).to_string();
        let value = units::memory_bytes(&text).unwrap_or(0.0);
        Amount { text, value }
    };
    let cpu = |v: &Option<String>| {
        let text = set(v).unwrap_or(&auto_cpu).to_string();
        let value = units::cpu_millicores(&text).unwrap_or(0.0);
        Amount { text, value }
    };
    let threshold = |v: &Option<String>, default: &str| {
        let text = set(v).unwrap_or(default).to_string();
        let value = match units::percentage(&text) {
            Some(pct) => memory_bytes.map_or(0.0, |m| m * (pct / 100.0)),
            None => units::memory_bytes(&text).unwrap_or(0.0),
        };
        Amount { text, value }
    };
    Reservations {
        system_memory: mem(&k.system_reserved_memory),
        kube_memory: mem(&k.kube_reserved_memory),
        system_cpu: cpu(&k.system_reserved_cpu),
        kube_cpu: cpu(&k.kube_reserved_cpu),
        eviction_hard: threshold(&k.eviction_hard_memory, DEFAULT_EVICTION_HARD),
        eviction_soft: threshold(&k.eviction_soft_memory, DEFAULT_EVICTION_SOFT),
    }
}
