//! Requests and limits as cgroup settings, as upstream's kubelet computes them: the QoS
//! class, the pod's cgroup parent (`kubepods`, `kubepods/burstable`, `kubepods/besteffort`,
//! then `pod<uid>`, with the cgroupfs driver), a container's CPU shares, CFS quota and
//! memory limit, and its `oom_score_adj`.
//!
//! The OOM score follows upstream's policy (Guaranteed −997, BestEffort 1000, Burstable
//! `1000 − 1000·request/capacity` clamped to [3, 999]) but is never set below the agent's
//! own score: on machines without CAP_SYS_RESOURCE a negative score cannot be set (containerd
//! runs with `restrict_oom_score_adj`), so Guaranteed pods get the agent's score (0 here).

use apimachinery::quantity::Quantity;
use k8s_cri::v1::LinuxContainerResources;
use k8s_openapi::api::core::v1::{Container, Pod};

pub use crate::pod::runtime::qos_class;

/// CFS period of a CPU limit, microseconds (upstream's `quotaPeriod`).
pub const CPU_PERIOD: i64 = 100_000;
/// The smallest CPU shares (upstream's `MinShares`).
pub const MIN_SHARES: i64 = 2;
/// The smallest CFS quota (upstream's `MinQuotaPeriod`, 1 ms).
pub const MIN_QUOTA: i64 = 1000;

const GUARANTEED_OOM_SCORE_ADJ: i64 = -997;
const BEST_EFFORT_OOM_SCORE_ADJ: i64 = 1000;

fn quantity(c: &Container, kind: &str, resource: &str) -> Option<Quantity> {
    let r = c.resources.as_ref()?;
    let map = if kind == "limits" {
        r.limits.as_ref()
    } else {
        r.requests.as_ref()
    }?;
    Quantity::parse(&map.get(resource)?.0).ok()
}

/// A container's request of `resource` (the API defaults requests to limits).
pub fn request(c: &Container, resource: &str) -> Option<Quantity> {
    quantity(c, "requests", resource).or_else(|| quantity(c, "limits", resource))
}

/// A container's limit of `resource`.
pub fn limit(c: &Container, resource: &str) -> Option<Quantity> {
    quantity(c, "limits", resource)
}

/// CPU shares for `milli` millicores (upstream `MilliCPUToShares`).
pub fn milli_cpu_to_shares(milli: i64) -> i64 {
    if milli <= 0 {
        return MIN_SHARES;
    }
    (milli * 1024 / 1000).max(MIN_SHARES)
}

/// The CFS quota of a `milli`-millicore limit over `period` (upstream `milliCPUToQuota`).
pub fn milli_cpu_to_quota(milli: i64, period: i64) -> i64 {
    if milli <= 0 {
        return 0;
    }
    (milli * period / 1000).max(MIN_QUOTA)
}

/// The container's OOM score adjustment before the machine floor.
pub fn oom_score_adj(pod: &Pod, container: &Container, node_memory: i64) -> i64 {
    let spec = pod.spec.clone().unwrap_or_default();
    match qos_class(&spec) {
        "Guaranteed" => GUARANTEED_OOM_SCORE_ADJ,
        "BestEffort" => BEST_EFFORT_OOM_SCORE_ADJ,
        _ => {
            let req = request(container, "memory").map_or(0, |q| q.value());
            if node_memory <= 0 {
                return BEST_EFFORT_OOM_SCORE_ADJ - 1;
            }
            let adj = 1000 - (1000 * i128::from(req) / i128::from(node_memory)) as i64;
            if adj < 1000 + GUARANTEED_OOM_SCORE_ADJ {
                1000 + GUARANTEED_OOM_SCORE_ADJ
            } else if adj == BEST_EFFORT_OOM_SCORE_ADJ {
                adj - 1
            } else {
                adj
            }
        }
    }
}

/// The OOM score floor of this machine: the agent's own score (a process without
/// CAP_SYS_RESOURCE cannot give a child less), never negative.
pub fn oom_score_floor() -> i64 {
    std::fs::read_to_string("/proc/self/oom_score_adj")
        .ok()
        .and_then(|s| s.trim().parse::<i64>().ok())
        .unwrap_or(0)
        .max(0)
}

/// The container's CRI resources.
pub fn linux_resources(
    pod: &Pod,
    container: &Container,
    node_memory: i64,
    oom_floor: i64,
) -> LinuxContainerResources {
    let cpu_req = request(container, "cpu").map(|q| q.milli_value());
    let cpu_lim = limit(container, "cpu").map(|q| q.milli_value());
    let shares = match (cpu_req, cpu_lim) {
        (Some(0) | None, Some(l)) if l > 0 => milli_cpu_to_shares(l),
        (Some(r), _) => milli_cpu_to_shares(r),
        (None, _) => MIN_SHARES,
    };
    let (quota, period) = match cpu_lim {
        Some(l) if l > 0 => (milli_cpu_to_quota(l, CPU_PERIOD), CPU_PERIOD),
        _ => (0, 0),
    };
    let memory = limit(container, "memory").map_or(0, |q| q.value().max(0));
    LinuxContainerResources {
        cpu_shares: shares,
        cpu_quota: quota,
        cpu_period: period,
        memory_limit_in_bytes: memory,
        oom_score_adj: oom_score_adj(pod, container, node_memory).clamp(oom_floor, 1000),
        ..LinuxContainerResources::default()
    }
}

/// The pod's cgroup parent below `cgroup_root` (cgroupfs syntax):
/// `<root>/kubepods[/burstable|/besteffort]/pod<uid>`.
pub fn pod_cgroup_parent(cgroup_root: &str, pod: &Pod) -> String {
    let spec = pod.spec.clone().unwrap_or_default();
    let qos = match qos_class(&spec) {
        "Guaranteed" => "",
        "BestEffort" => "/besteffort",
        _ => "/burstable",
    };
    let root = cgroup_root.trim_end_matches('/');
    let uid = pod.metadata.uid.as_deref().unwrap_or("");
    format!("{root}/kubepods{qos}/pod{uid}")
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::api::core::v1::{PodSpec, ResourceRequirements};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity as Q;

    use super::*;

    fn container(req: &[(&str, &str)], lim: &[(&str, &str)]) -> Container {
        let map = |v: &[(&str, &str)]| {
            (!v.is_empty()).then(|| {
                v.iter()
                    .map(|(k, q)| (k.to_string(), Q(q.to_string())))
                    .collect::<BTreeMap<_, _>>()
            })
        };
        Container {
            name: "c".into(),
            resources: Some(ResourceRequirements {
                requests: map(req),
                limits: map(lim),
                ..ResourceRequirements::default()
            }),
            ..Container::default()
        }
    }

    fn pod(c: &Container) -> Pod {
        Pod {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                uid: Some("u1".into()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                containers: vec![c.clone()],
                ..PodSpec::default()
            }),
            status: None,
        }
    }

    #[test]
    fn cpu_becomes_shares_and_quota_as_upstream_computes_them() {
        assert_eq!(milli_cpu_to_shares(0), 2);
        assert_eq!(milli_cpu_to_shares(1), 2);
        assert_eq!(milli_cpu_to_shares(250), 256);
        assert_eq!(milli_cpu_to_shares(1000), 1024);
        assert_eq!(milli_cpu_to_quota(500, CPU_PERIOD), 50_000);
        assert_eq!(milli_cpu_to_quota(1, CPU_PERIOD), MIN_QUOTA);
        let c = container(&[], &[("cpu", "500m"), ("memory", "64Mi")]);
        let r = linux_resources(&pod(&c), &c, 1 << 34, 0);
        assert_eq!(
            (r.cpu_shares, r.cpu_quota, r.cpu_period),
            (512, 50_000, 100_000)
        );
        assert_eq!(r.memory_limit_in_bytes, 64 << 20);
    }

    #[test]
    fn oom_scores_follow_the_qos_class_and_never_go_below_the_floor() {
        let g = container(&[], &[("cpu", "1"), ("memory", "1Gi")]);
        assert_eq!(oom_score_adj(&pod(&g), &g, 1 << 34), -997);
        assert_eq!(linux_resources(&pod(&g), &g, 1 << 34, 0).oom_score_adj, 0);
        let be = container(&[], &[]);
        assert_eq!(
            linux_resources(&pod(&be), &be, 1 << 34, 0).oom_score_adj,
            1000
        );
        // Half the node's memory: 1000 - 500.
        let b = container(&[("memory", "8Gi")], &[]);
        assert_eq!(oom_score_adj(&pod(&b), &b, 16 << 30), 500);
        // Tiny requests stay below BestEffort, huge ones above Guaranteed.
        let tiny = container(&[("memory", "1")], &[]);
        assert_eq!(oom_score_adj(&pod(&tiny), &tiny, 16 << 30), 999);
        let huge = container(&[("memory", "16Gi")], &[("cpu", "1")]);
        assert_eq!(oom_score_adj(&pod(&huge), &huge, 16 << 30), 3);
    }

    #[test]
    fn pods_get_the_cgroup_of_their_qos_class() {
        let g = container(&[], &[("cpu", "1"), ("memory", "1Gi")]);
        assert_eq!(pod_cgroup_parent("/", &pod(&g)), "/kubepods/podu1");
        let b = container(&[("cpu", "1")], &[]);
        assert_eq!(
            pod_cgroup_parent("/t", &pod(&b)),
            "/t/kubepods/burstable/podu1"
        );
        let be = container(&[], &[]);
        assert_eq!(
            pod_cgroup_parent("", &pod(&be)),
            "/kubepods/besteffort/podu1"
        );
    }
}
