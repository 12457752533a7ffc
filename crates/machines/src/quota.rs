//! Machines charged against their namespace's ResourceQuotas, as Cozystack's worker VMs are
//! (their virt-launcher pods run in the tenant namespace): a machine of C vCPUs and M bytes
//! charges `limits.cpu` C and `requests.cpu` C ÷ 10 (the platform's CPU allocation ratio),
//! `limits.memory`, `requests.memory` and `memory` M, `cpu` C ÷ 10, and one
//! `count/machines.cluster.x-k8s.io`. A machine that would exceed a quota is not created: the
//! MachineSet reports it (a `FailedCreate` Event in upstream's wording, a condition) and the
//! autoscaler does not scale a group past it.

use std::collections::BTreeMap;

use apimachinery::quantity::Quantity;
use k8s_openapi::api::core::v1::ResourceQuota;
use kube::Api;
use kube::api::ListParams;
use runtime::client::ROOT;
use runtime::error::Result;
use serde_json::Value;

use crate::Ctx;

/// The CPU allocation ratio: requests are a tenth of the vCPUs.
const CPU_RATIO: i64 = 10;

/// What one machine charges, in milli-units (CPU) or units (memory, counts).
pub fn charge(spec: &Value) -> BTreeMap<&'static str, i64> {
    let sizing = node::sizing::resolve(
        &crate::infra::sizing_input(spec),
        &apimachinery::field::Path::new("spec"),
    )
    .ok();
    let cpu = sizing.as_ref().and_then(|s| s.cpu_millis).unwrap_or(0.0) as i64;
    let mem = sizing.as_ref().and_then(|s| s.memory_bytes).unwrap_or(0.0) as i64;
    BTreeMap::from([
        ("limits.cpu", cpu),
        ("requests.cpu", cpu / CPU_RATIO),
        ("cpu", cpu / CPU_RATIO),
        ("limits.memory", mem),
        ("requests.memory", mem),
        ("memory", mem),
        ("count/machines.cluster.x-k8s.io", 1),
    ])
}

fn amount(resource: &str, q: &str) -> Option<i64> {
    let q = Quantity::parse(q).ok()?;
    Some(if resource.ends_with("cpu") {
        q.milli_value()
    } else {
        q.value()
    })
}

fn show(resource: &str, v: i64) -> String {
    if resource.ends_with("cpu") {
        if v % 1000 == 0 {
            format!("{resource}={}", v / 1000)
        } else {
            format!("{resource}={v}m")
        }
    } else if resource.ends_with("memory") && v % (1 << 20) == 0 && v > 0 {
        if v % (1 << 30) == 0 {
            format!("{resource}={}Gi", v >> 30)
        } else {
            format!("{resource}={}Mi", v >> 20)
        }
    } else {
        format!("{resource}={v}")
    }
}

impl Ctx {
    /// How many more machines of `spec` the quotas of `namespace` allow (None: no quota
    /// limits them), and the refusal upstream would write for one more when none is allowed.
    pub(crate) async fn quota_room(
        &self,
        namespace: &str,
        spec: &Value,
    ) -> Result<(Option<i64>, Option<String>)> {
        let api: Api<ResourceQuota> = Api::namespaced(self.root()?, namespace);
        let quotas = api.list(&ListParams::default()).await?.items;
        if quotas.is_empty() {
            return Ok((None, None));
        }
        let one = charge(spec);
        // What the namespace's machines already charge (pods are in the quotas' status).
        let mut machines: BTreeMap<&'static str, i64> = BTreeMap::new();
        for m in self.infra.list_namespace(ROOT, namespace) {
            if m.metadata.deletion_timestamp.is_none() {
                for (k, v) in charge(&m.spec) {
                    *machines.entry(k).or_default() += v;
                }
            }
        }
        let mut room: Option<i64> = None;
        let mut refusal = None;
        for q in &quotas {
            let hard = q
                .spec
                .as_ref()
                .and_then(|s| s.hard.clone())
                .unwrap_or_default();
            let used = q
                .status
                .as_ref()
                .and_then(|s| s.used.clone())
                .unwrap_or_default();
            for (resource, limit) in &hard {
                let Some(&each) = one.get(resource.as_str()) else {
                    continue;
                };
                if each <= 0 {
                    continue;
                }
                let Some(limit) = amount(resource, &limit.0) else {
                    continue;
                };
                let pods = used
                    .get(resource)
                    .and_then(|u| amount(resource, &u.0))
                    .unwrap_or(0);
                let taken = pods + machines.get(resource.as_str()).copied().unwrap_or(0);
                let left = ((limit - taken).max(0)) / each;
                room = Some(room.map_or(left, |r: i64| r.min(left)));
                if left == 0 && refusal.is_none() {
                    refusal = Some(format!(
                        "exceeded quota: {}, requested: {}, used: {}, limited: {}",
                        q.metadata.name.as_deref().unwrap_or(""),
                        show(resource, each),
                        show(resource, taken),
                        show(resource, limit)
                    ));
                }
            }
        }
        Ok((room, refusal))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_machine_charges_its_instance_types_cpu_and_memory() {
        let c = charge(&json!({"instanceType": "u1.medium"}));
        assert_eq!(c["limits.cpu"], 1000);
        assert_eq!(c["requests.cpu"], 100);
        assert_eq!(c["limits.memory"], 4 << 30);
        assert_eq!(c["count/machines.cluster.x-k8s.io"], 1);
        assert_eq!(show("limits.cpu", 2000), "limits.cpu=2");
        assert_eq!(show("requests.memory", 8 << 30), "requests.memory=8Gi");
    }
}
