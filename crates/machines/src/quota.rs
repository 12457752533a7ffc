//! Machines charged against their namespace's ResourceQuotas, as Cozystack's worker VMs are
//! (their virt-launcher pods run in the tenant namespace): a machine of C vCPUs and M bytes
//! charges `limits.cpu` C and `requests.cpu` C ÷ 10 (the platform's CPU allocation ratio),
//! `limits.memory`, `requests.memory` and `memory` M, `cpu` C ÷ 10, and one
//! `count/machines.cluster.x-k8s.io`. A machine that would exceed a quota is not created: the
//! MachineSet reports it (a `FailedCreate` Event in upstream's wording, a condition) and the
//! autoscaler does not scale a group past it.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use apimachinery::quantity::Quantity;
use k8s_openapi::api::core::v1::ResourceQuota;
use kube::Api;
use kube::api::ListParams;
use parking_lot::Mutex;
use runtime::client::ROOT;
use runtime::error::Result;
use serde_json::Value;

use crate::Ctx;

/// How long a created machine is charged before the informer is believed instead.
const UNSEEN_TIMEOUT: Duration = Duration::from_secs(30);

/// What a charge is: resource → amount.
pub type Charge = BTreeMap<&'static str, i64>;

/// Machines created and not yet shown by the infrastructure informer, with what each
/// charges: a MachineSet pass that runs before the informer has its last creation must
/// still count it, or it finds room for one machine more than the quota allows (the
/// quota's side of upstream's controller expectations).
#[derive(Default)]
pub struct Unseen(Mutex<HashMap<String, Created>>);

/// A namespace's machines not seen yet: name → (when created, what it charges).
type Created = HashMap<String, (Instant, Charge)>;

impl Unseen {
    /// The machine `name` of `namespace` was created, charging `charge`.
    pub fn created(&self, namespace: &str, name: &str, charge: Charge) {
        self.0
            .lock()
            .entry(namespace.to_string())
            .or_default()
            .insert(name.to_string(), (Instant::now(), charge));
    }

    /// What the machines of `namespace` not yet `seen` by the informer charge together;
    /// those it shows, and those waited for too long, are forgotten.
    pub fn charge(&self, namespace: &str, seen: impl Fn(&str) -> bool) -> Charge {
        let mut all = self.0.lock();
        let mut total = Charge::new();
        let Some(machines) = all.get_mut(namespace) else {
            return total;
        };
        machines.retain(|name, (at, _)| at.elapsed() < UNSEEN_TIMEOUT && !seen(name));
        for (_, c) in machines.values() {
            for (k, v) in c {
                *total.entry(k).or_default() += v;
            }
        }
        if machines.is_empty() {
            all.remove(namespace);
        }
        total
    }
}

/// The CPU allocation ratio: requests are a tenth of the vCPUs.
const CPU_RATIO: i64 = 10;

/// What one machine charges, in milli-units (CPU) or units (memory, counts).
pub fn charge(spec: &Value) -> Charge {
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
        let listed = self.infra.list_namespace(ROOT, namespace);
        // Machines just created count before the informer shows them.
        let mut machines = self.unseen_machines.charge(namespace, |name| {
            listed
                .iter()
                .any(|m| m.metadata.name.as_deref() == Some(name))
        });
        for m in &listed {
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

    #[test]
    fn a_machine_the_informer_has_not_shown_yet_is_still_charged() {
        let unseen = Unseen::default();
        let one = charge(&json!({"instanceType": "u1.medium"}));
        unseen.created("tenant-q", "m1", one.clone());
        unseen.created("tenant-q", "m2", one.clone());
        // A second pass before the informer caught up counts both.
        assert_eq!(unseen.charge("tenant-q", |_| false)["limits.cpu"], 2000);
        // Once the informer shows m1, m1 is counted there and no longer here.
        assert_eq!(unseen.charge("tenant-q", |n| n == "m1")["limits.cpu"], 1000);
        assert_eq!(unseen.charge("tenant-q", |_| false)["limits.cpu"], 1000);
        assert!(unseen.charge("tenant-q", |_| true).is_empty());
        assert!(unseen.charge("other", |_| false).is_empty());
        assert!(
            unseen.0.lock().is_empty(),
            "nothing is kept for what was seen"
        );
    }
}
