//! Builds the stats summary from CRI's container statistics and the machine's own counters
//! (`/proc/stat`, `/proc/meminfo`, the data directory's filesystem). CPU rates come from the
//! runtime when it computes them, else from the previous sample of the same counter.

use std::collections::HashMap;

use k8s_cri::v1 as cri;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use parking_lot::Mutex;

use super::agent::Agent;
use super::labels;
use super::stats::{
    ContainerStats, CpuStats, FsStats, MemoryStats, NodeStats, PodReference, PodStats,
    RuntimeStats, Summary,
};
use super::status::time_of;

/// Previous CPU samples: counter key → (timestamp ns, cumulative core-ns).
#[derive(Default)]
pub struct CpuSamples(Mutex<HashMap<String, (i64, u64)>>);

impl CpuSamples {
    /// The rate in nanocores between the previous sample of `key` and this one.
    fn rate(&self, key: &str, at: i64, total: u64) -> Option<u64> {
        let mut m = self.0.lock();
        let prev = m.insert(key.to_string(), (at, total));
        let (t0, v0) = prev?;
        let dt = at.checked_sub(t0).filter(|d| *d > 0)?;
        let dv = total.checked_sub(v0)?;
        Some((u128::from(dv) * 1_000_000_000 / dt as u128) as u64)
    }
}

fn now_time() -> Time {
    Time(Timestamp::now())
}

fn cpu(samples: &CpuSamples, key: &str, c: Option<&cri::CpuUsage>) -> Option<CpuStats> {
    let c = c?;
    let total = c.usage_core_nano_seconds.as_ref().map(|v| v.value);
    let rate = c
        .usage_nano_cores
        .as_ref()
        .map(|v| v.value)
        .or_else(|| total.and_then(|t| samples.rate(key, c.timestamp, t)));
    Some(CpuStats {
        time: time_of(c.timestamp).or_else(|| Some(now_time())),
        usage_nano_cores: rate,
        usage_core_nano_seconds: total,
    })
}

fn memory(m: Option<&cri::MemoryUsage>) -> Option<MemoryStats> {
    let m = m?;
    let v = |x: &Option<cri::UInt64Value>| x.as_ref().map(|v| v.value);
    Some(MemoryStats {
        time: time_of(m.timestamp).or_else(|| Some(now_time())),
        available_bytes: v(&m.available_bytes),
        usage_bytes: v(&m.usage_bytes),
        working_set_bytes: v(&m.working_set_bytes),
        rss_bytes: v(&m.rss_bytes),
        page_faults: v(&m.page_faults),
        major_page_faults: v(&m.major_page_faults),
    })
}

fn sum(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
    }
}

fn node_cpu_total() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().next()?.strip_prefix("cpu ")?;
    let f: Vec<u64> = line
        .split_whitespace()
        .filter_map(|x| x.parse().ok())
        .collect();
    // user nice system (idle iowait excluded) irq softirq steal, in USER_HZ (100/s).
    let busy = f.first()?
        + f.get(1)?
        + f.get(2)?
        + f.get(5).unwrap_or(&0)
        + f.get(6).unwrap_or(&0)
        + f.get(7).unwrap_or(&0);
    Some(busy * 10_000_000)
}

fn meminfo(key: &str) -> Option<u64> {
    std::fs::read_to_string("/proc/meminfo")
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|k| k * 1024)
}

/// The summary now.
pub async fn summary(agent: &Agent, samples: &CpuSamples) -> Result<Summary, String> {
    let stats = agent
        .cri
        .list_container_stats()
        .await
        .map_err(|e| e.to_string())?;
    let now_ns = Timestamp::now().as_nanosecond() as i64;
    let mut pods: HashMap<String, PodStats> = HashMap::new();
    let table = agent.pods.read().clone();
    for s in &stats {
        let Some(attr) = s.attributes.as_ref() else {
            continue;
        };
        let Some(uid) = attr.labels.get(labels::POD_UID) else {
            continue;
        };
        let name = attr
            .labels
            .get(labels::CONTAINER_NAME)
            .cloned()
            .unwrap_or_default();
        let entry = table.get(uid);
        let ps = pods.entry(uid.clone()).or_insert_with(|| PodStats {
            pod_ref: PodReference {
                name: attr
                    .labels
                    .get(labels::POD_NAME)
                    .cloned()
                    .unwrap_or_default(),
                namespace: attr
                    .labels
                    .get(labels::POD_NAMESPACE)
                    .cloned()
                    .unwrap_or_default(),
                uid: uid.clone(),
            },
            start_time: entry.and_then(|e| e.pod.status.as_ref()?.start_time.clone()),
            ..PodStats::default()
        });
        let cs = ContainerStats {
            name,
            start_time: None,
            cpu: cpu(samples, &attr.id, s.cpu.as_ref()),
            memory: memory(s.memory.as_ref()),
            rootfs: s.writable_layer.as_ref().map(|w| FsStats {
                time: time_of(w.timestamp),
                used_bytes: w.used_bytes.as_ref().map(|v| v.value),
                inodes_used: w.inodes_used.as_ref().map(|v| v.value),
                ..FsStats::default()
            }),
            logs: None,
        };
        // Pod totals: the sum of its containers.
        let pc = ps.cpu.get_or_insert_with(|| CpuStats {
            time: Some(now_time()),
            ..CpuStats::default()
        });
        if let Some(c) = &cs.cpu {
            pc.usage_nano_cores = sum(pc.usage_nano_cores, c.usage_nano_cores);
            pc.usage_core_nano_seconds = sum(pc.usage_core_nano_seconds, c.usage_core_nano_seconds);
        }
        let pm = ps.memory.get_or_insert_with(|| MemoryStats {
            time: Some(now_time()),
            ..MemoryStats::default()
        });
        if let Some(m) = &cs.memory {
            pm.usage_bytes = sum(pm.usage_bytes, m.usage_bytes);
            pm.working_set_bytes = sum(pm.working_set_bytes, m.working_set_bytes);
            pm.rss_bytes = sum(pm.rss_bytes, m.rss_bytes);
        }
        ps.containers.push(cs);
    }
    let mut pods: Vec<PodStats> = pods.into_values().collect();
    pods.sort_by(|a, b| {
        (&a.pod_ref.namespace, &a.pod_ref.name).cmp(&(&b.pod_ref.namespace, &b.pod_ref.name))
    });
    let total = meminfo("MemTotal:");
    let available = meminfo("MemAvailable:");
    let node_cpu = node_cpu_total();
    let fs = rustix::fs::statvfs(agent.layout.root())
        .ok()
        .map(|v| FsStats {
            time: Some(now_time()),
            available_bytes: Some(v.f_bavail * v.f_frsize),
            capacity_bytes: Some(v.f_blocks * v.f_frsize),
            used_bytes: Some((v.f_blocks - v.f_bfree) * v.f_frsize),
            inodes_free: Some(v.f_ffree),
            inodes: Some(v.f_files),
            inodes_used: Some(v.f_files - v.f_ffree),
        });
    let image_fs = agent.cri.image_fs_info().await.ok().and_then(|i| {
        let u = i.image_filesystems.first()?;
        Some(FsStats {
            time: time_of(u.timestamp),
            used_bytes: u.used_bytes.as_ref().map(|v| v.value),
            inodes_used: u.inodes_used.as_ref().map(|v| v.value),
            available_bytes: fs.as_ref().and_then(|f| f.available_bytes),
            capacity_bytes: fs.as_ref().and_then(|f| f.capacity_bytes),
            ..FsStats::default()
        })
    });
    Ok(Summary {
        node: NodeStats {
            node_name: agent.config.node_name.clone(),
            start_time: None,
            cpu: Some(CpuStats {
                time: Some(now_time()),
                usage_nano_cores: node_cpu.and_then(|t| samples.rate("node", now_ns, t)),
                usage_core_nano_seconds: node_cpu,
            }),
            memory: Some(MemoryStats {
                time: Some(now_time()),
                available_bytes: available,
                usage_bytes: total.zip(available).map(|(t, a)| t.saturating_sub(a)),
                working_set_bytes: total.zip(available).map(|(t, a)| t.saturating_sub(a)),
                ..MemoryStats::default()
            }),
            fs,
            runtime: Some(RuntimeStats {
                image_fs,
                container_fs: None,
            }),
            ..NodeStats::default()
        },
        pods,
    })
}
