//! The address allocator: every `type: LoadBalancer` Service of the root cluster without a
//! `loadBalancerClass` gets one address of the pool in `status.loadBalancer.ingress` (the
//! one it asks for with `spec.loadBalancerIP` when that is free and in the pool), keeps it
//! while it stays such a Service, and gives it back when it is deleted or changes type —
//! MetalLB's controller, with its Events (`IPAllocated`, `AllocationFailed`).
//!
//! Which address belongs to whom is read from the Services themselves (their status), so a
//! restart or a new leader loses nothing; the allocator also remembers what it has just
//! written and the informer has not shown yet, so two Services never get one address.

use std::collections::{BTreeMap, HashSet};
use std::net::IpAddr;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, Patch, PatchParams};
use parking_lot::Mutex;
use runtime::client::ROOT;
use runtime::error::Result;
use runtime::events::Recorder;
use runtime::informer::{ObjectKey, Store};
use runtime::queue::{Action, Queue};
use serde_json::json;

use crate::pool::{Family, Pool};

pub(crate) struct Allocator {
    pub pool: Pool,
    pub services: Store<Service>,
    pub client: kube::Client,
    pub recorder: Recorder,
    /// This leadership term's queue (a new one each term).
    pub queue: Mutex<Arc<Queue<ObjectKey>>>,
    /// Addresses written and not yet seen back, by owner.
    pub pending: Mutex<BTreeMap<IpAddr, ObjectKey>>,
}

/// Whether the platform's load balancer serves `svc`.
pub fn served(svc: &Service) -> bool {
    let Some(spec) = &svc.spec else { return false };
    spec.type_.as_deref() == Some("LoadBalancer")
        && spec.load_balancer_class.as_deref().unwrap_or("").is_empty()
        && svc.metadata.deletion_timestamp.is_none()
}

/// The addresses of `svc`'s load balancer status.
pub fn ingress_ips(svc: &Service) -> Vec<IpAddr> {
    svc.status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_ref())
        .map(|ing| {
            ing.iter()
                .filter_map(|i| i.ip.as_deref()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// The address a Service gets: the one it asks for (`spec.loadBalancerIP`) if that is in the
/// pool and free, else the one it holds if still free and of its families, else the pool's
/// first free one; or why none (MetalLB's messages).
pub fn choose(
    pool: &Pool,
    used: &HashSet<IpAddr>,
    requested: Option<&str>,
    current: &[IpAddr],
    families: &[Family],
) -> Result<IpAddr, String> {
    if let Some(r) = requested {
        let ip: IpAddr = r
            .parse()
            .map_err(|_| format!("\"{r}\" is not a valid IP address"))?;
        if !pool.contains(ip) {
            return Err(format!("\"{ip}\" is not allowed in config"));
        }
        if used.contains(&ip) {
            return Err(format!("\"{ip}\" is already in use"));
        }
        return Ok(ip);
    }
    if let Some(ip) = current.iter().copied().find(|ip| {
        pool.contains(*ip)
            && !used.contains(ip)
            && (families.is_empty() || families.contains(&Family::of(*ip)))
    }) {
        return Ok(ip);
    }
    pool.first_free(used, families)
        .ok_or_else(|| "no available IPs".to_string())
}

fn key_of(svc: &Service) -> ObjectKey {
    ObjectKey::new(
        ROOT,
        svc.metadata.namespace.as_deref().unwrap_or(""),
        svc.metadata.name.as_deref().unwrap_or(""),
    )
}

impl Allocator {
    /// Addresses of the pool held by Services other than `key`.
    fn used_by_others(&self, key: &ObjectKey) -> HashSet<IpAddr> {
        let mut used: HashSet<IpAddr> = HashSet::new();
        for (k, svc) in self.services.list_cluster(ROOT) {
            if k != *key && served(&svc) {
                used.extend(
                    ingress_ips(&svc)
                        .into_iter()
                        .filter(|ip| self.pool.contains(*ip)),
                );
            }
        }
        let mut pending = self.pending.lock();
        // Forget what the informer now shows, or what its owner no longer holds.
        pending.retain(|ip, owner| {
            let still_pending = self
                .services
                .get(owner)
                .map(|s| served(&s) && !ingress_ips(&s).contains(ip));
            still_pending == Some(true)
        });
        used.extend(pending.iter().filter(|(_, o)| *o != key).map(|(ip, _)| *ip));
        used
    }

    /// Starts a leadership term: a fresh queue holding every Service.
    pub fn new_term(&self) -> Arc<Queue<ObjectKey>> {
        let queue = Queue::new();
        for k in self.services.keys() {
            queue.add(k);
        }
        *self.queue.lock() = queue.clone();
        queue
    }

    pub async fn reconcile(&self, key: ObjectKey) -> Result<Action> {
        let Some(svc) = self.services.get(&key) else {
            self.pending.lock().retain(|_, o| *o != key);
            return Ok(Action::AwaitChange);
        };
        let api: Api<Service> = Api::namespaced(self.client.clone(), &key.namespace);
        let current: Vec<IpAddr> = ingress_ips(&svc)
            .into_iter()
            .filter(|ip| self.pool.contains(*ip))
            .collect();
        if !served(&svc) {
            // A Service that stopped being a load balancer of ours gives its address back.
            let is_lb = svc.spec.as_ref().and_then(|s| s.type_.as_deref()) == Some("LoadBalancer");
            if !current.is_empty() && !is_lb {
                let patch = json!({"status": {"loadBalancer": {"ingress": null}}});
                api.patch_status(&key.name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await?;
            }
            self.pending.lock().retain(|_, o| *o != key);
            return Ok(Action::AwaitChange);
        }
        let spec = svc.spec.clone().unwrap_or_default();
        let families: Vec<Family> = spec
            .ip_families
            .iter()
            .flatten()
            .filter_map(|f| Family::parse(f))
            .collect();
        let used = self.used_by_others(&key);
        let name = format!("{}/{}", key.namespace, key.name);
        let requested = spec.load_balancer_ip.as_deref().filter(|s| !s.is_empty());
        let chosen = match choose(&self.pool, &used, requested, &current, &families) {
            Ok(ip) => ip,
            Err(why) => {
                self.recorder.about(
                    ROOT,
                    svc.as_ref(),
                    "Warning",
                    "AllocationFailed",
                    format!("Failed to allocate IP for \"{name}\": {why}"),
                );
                // Addresses come free with other Services' changes, which requeue this one.
                return Ok(Action::AwaitChange);
            }
        };
        if ingress_ips(&svc) != [chosen] {
            self.pending.lock().insert(chosen, key.clone());
            let patch = json!({"status": {"loadBalancer": {"ingress": [{"ip": chosen.to_string(), "ipMode": "VIP"}]}}});
            api.patch_status(&key.name, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
            self.recorder.about(
                ROOT,
                svc.as_ref(),
                "Normal",
                "IPAllocated",
                format!("Assigned IP [\"{chosen}\"]"),
            );
        }
        Ok(Action::AwaitChange)
    }

    /// What a change of `svc` wakes: itself and, when it may have given an address back,
    /// every Service still waiting for one.
    pub fn wake(&self, svc: &Service, gone: bool) {
        let queue = self.queue.lock().clone();
        queue.add(key_of(svc));
        if gone || !served(svc) {
            for (k, other) in self.services.list_cluster(ROOT) {
                if served(&other) && ingress_ips(&other).is_empty() {
                    queue.add(k);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn a_service_keeps_its_address_gets_the_one_it_asks_for_or_the_first_free() {
        let pool: Pool = "127.0.100.10-127.0.100.12".parse().unwrap();
        let used: HashSet<IpAddr> = [ip("127.0.100.10")].into();
        assert_eq!(choose(&pool, &used, None, &[], &[]), Ok(ip("127.0.100.11")));
        assert_eq!(
            choose(&pool, &used, None, &[ip("127.0.100.12")], &[]),
            Ok(ip("127.0.100.12"))
        );
        assert_eq!(
            choose(
                &pool,
                &used,
                Some("127.0.100.12"),
                &[ip("127.0.100.11")],
                &[]
            ),
            Ok(ip("127.0.100.12"))
        );
        // A held address another Service now has is given up for a free one.
        assert_eq!(
            choose(&pool, &used, None, &[ip("127.0.100.10")], &[]),
            Ok(ip("127.0.100.11"))
        );
    }

    #[test]
    fn refusals_say_why_as_metallb_does() {
        let pool: Pool = "127.0.100.10-127.0.100.10".parse().unwrap();
        let used: HashSet<IpAddr> = [ip("127.0.100.10")].into();
        assert_eq!(
            choose(&pool, &used, None, &[], &[]),
            Err("no available IPs".into())
        );
        assert_eq!(
            choose(&pool, &HashSet::new(), Some("10.0.0.1"), &[], &[]),
            Err("\"10.0.0.1\" is not allowed in config".into())
        );
        assert_eq!(
            choose(&pool, &used, Some("127.0.100.10"), &[], &[]),
            Err("\"127.0.100.10\" is already in use".into())
        );
        assert_eq!(
            choose(&pool, &used, Some("nope"), &[], &[]),
            Err("\"nope\" is not a valid IP address".into())
        );
        assert_eq!(
            choose(&pool, &HashSet::new(), None, &[], &[Family::V6]),
            Err("no available IPs".into())
        );
    }
}
