//! Lease-based leader election (client-go's `leaderelection` with a `coordination.k8s.io/v1`
//! Lease lock), so several API server replicas over one store run each controller once.
//!
//! The lease lives in the root cluster's `kube-system`. A candidate takes the lease when it is
//! free or when its holder has not renewed it for `lease_duration` — measured on the
//! candidate's own clock from when it last saw the record change, as client-go does, so clock
//! skew between replicas does not matter. The leader renews every `retry_period` and gives up
//! leadership when it could not renew for `renew_deadline`. Writes use the lease's
//! resourceVersion, so two candidates never both win.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::error::Result;
use crate::shared::Shutdown;

/// Whether this process leads each election it takes part in, by Lease name (upstream's
/// `leader_election_master_status` gauge, one per component).
static LEADING: parking_lot::Mutex<BTreeMap<String, bool>> =
    parking_lot::Mutex::new(BTreeMap::new());

fn publish(name: &str, leading: bool) {
    LEADING.lock().insert(name.to_string(), leading);
}

/// The Prometheus text of `leader_election_master_status{name}`: 1 for each Lease this
/// process holds, 0 for those it campaigns for and does not (a replica's `/metrics` shows which
/// singletons run there; across replicas each is 1 exactly once).
pub fn metrics() -> String {
    let leading = LEADING.lock();
    if leading.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "# HELP leader_election_master_status Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. 'name' is the string used to identify the lease.\n# TYPE leader_election_master_status gauge\n",
    );
    for (name, on) in leading.iter() {
        out.push_str(&format!(
            "leader_election_master_status{{name=\"{name}\"}} {}\n",
            u8::from(*on)
        ));
    }
    out
}

/// Timing of an election; the defaults are kube-controller-manager's.
#[derive(Debug, Clone)]
pub struct LeaderConfig {
    pub namespace: String,
    pub name: String,
    /// This candidate's identity (unique per replica).
    pub identity: String,
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
}

impl LeaderConfig {
    pub fn new(identity: impl Into<String>) -> Self {
        LeaderConfig::named("matryoshka-controller-manager", identity)
    }

    /// The election of the Lease `name` in `kube-system`, with kube-controller-manager's timing.
    pub fn named(name: impl Into<String>, identity: impl Into<String>) -> Self {
        LeaderConfig {
            namespace: "kube-system".into(),
            name: name.into(),
            identity: identity.into(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

/// A lease duration as the record holds it: whole seconds, rounded up, at least one (a zero
/// would let every other candidate take the lease at once).
fn lease_seconds(d: Duration) -> i32 {
    let secs = d.as_secs() + u64::from(d.subsec_nanos() > 0);
    i32::try_from(secs.max(1)).unwrap_or(i32::MAX)
}

/// A candidate for leadership.
pub struct LeaderElector {
    api: Api<Lease>,
    config: LeaderConfig,
    /// The last record seen and when (local clock) it was first seen.
    observed: Option<(LeaseSpec, Instant)>,
}

impl LeaderElector {
    /// A candidate using `root` (a client of the root cluster).
    pub fn new(root: kube::Client, config: LeaderConfig) -> Self {
        LeaderElector {
            api: Api::namespaced(root, &config.namespace),
            config,
            observed: None,
        }
    }

    fn observe(&mut self, spec: &LeaseSpec) {
        let changed = self.observed.as_ref().is_none_or(|(s, _)| {
            s.holder_identity != spec.holder_identity || s.renew_time != spec.renew_time
        });
        if changed {
            self.observed = Some((spec.clone(), Instant::now()));
        }
    }

    /// Whether the last record seen names another holder.
    fn held_by_other(&self) -> bool {
        self.observed.as_ref().is_some_and(|(s, _)| {
            s.holder_identity
                .as_deref()
                .is_some_and(|h| !h.is_empty() && h != self.config.identity)
        })
    }

    fn lease_seconds(&self) -> i32 {
        lease_seconds(self.config.lease_duration)
    }

    /// One attempt to take or renew the lease; `Ok(true)` when this candidate holds it.
    pub async fn try_acquire_or_renew(&mut self) -> Result<bool> {
        let now = MicroTime(Timestamp::now());
        let me = self.config.identity.clone();
        let current = crate::error::ignore_not_found(self.api.get(&self.config.name).await)?;
        let Some(mut lease) = current else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.config.name.clone()),
                    namespace: Some(self.config.namespace.clone()),
                    ..Default::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(me),
                    lease_duration_seconds: Some(self.lease_seconds()),
                    acquire_time: Some(now.clone()),
                    renew_time: Some(now),
                    lease_transitions: Some(0),
                    ..Default::default()
                }),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(l) => {
                    self.observe(&l.spec.unwrap_or_default());
                    Ok(true)
                }
                Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
                Err(e) => Err(e.into()),
            };
        };
        let spec = lease.spec.clone().unwrap_or_default();
        self.observe(&spec);
        let holder = spec.holder_identity.clone().unwrap_or_default();
        let held_by_me = holder == me;
        let duration = spec
            .lease_duration_seconds
            .map(|s| Duration::from_secs(s.max(1) as u64))
            .unwrap_or(self.config.lease_duration);
        let expired = self
            .observed
            .as_ref()
            .is_none_or(|(_, seen)| seen.elapsed() >= duration);
        if !holder.is_empty() && !held_by_me && !expired {
            return Ok(false);
        }
        let mut next = spec.clone();
        if !held_by_me {
            next.acquire_time = Some(now.clone());
            next.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
        }
        next.holder_identity = Some(me);
        next.lease_duration_seconds = Some(self.lease_seconds());
        next.renew_time = Some(now);
        lease.spec = Some(next);
        match self
            .api
            .replace(&self.config.name, &PostParams::default(), &lease)
            .await
        {
            Ok(l) => {
                self.observe(&l.spec.unwrap_or_default());
                Ok(true)
            }
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// Gives the lease up (on shutdown) so another replica need not wait for it to expire.
    pub async fn release(&mut self) -> Result<()> {
        let Some(mut lease) =
            crate::error::ignore_not_found(self.api.get(&self.config.name).await)?
        else {
            return Ok(());
        };
        let mut spec = lease.spec.clone().unwrap_or_default();
        if spec.holder_identity.as_deref() != Some(self.config.identity.as_str()) {
            return Ok(());
        }
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        lease.spec = Some(spec);
        self.api
            .replace(&self.config.name, &PostParams::default(), &lease)
            .await?;
        Ok(())
    }

    /// Campaigns until `shutdown`, publishing whether this candidate leads on `leading`.
    /// Leadership is dropped when the lease could not be renewed for `renew_deadline`.
    pub async fn run(
        mut self,
        leading: watch::Sender<bool>,
        shutdown: impl std::future::Future<Output = ()>,
    ) {
        tokio::pin!(shutdown);
        let mut last_renew: Option<Instant> = None;
        let name = self.config.name.clone();
        publish(&name, false);
        loop {
            let ok = match self.try_acquire_or_renew().await {
                Ok(ok) => ok,
                Err(e) => {
                    tracing::warn!(error = %e, "leader election: lease request failed");
                    false
                }
            };
            if ok {
                last_renew = Some(Instant::now());
                if !*leading.borrow() {
                    tracing::info!(identity = %self.config.identity, "became the leader");
                }
                leading.send_replace(true);
                publish(&name, true);
            } else if *leading.borrow()
                && (self.held_by_other()
                    || last_renew.is_none_or(|t| t.elapsed() >= self.config.renew_deadline))
            {
                tracing::warn!(identity = %self.config.identity, "lost leadership");
                leading.send_replace(false);
                publish(&name, false);
            }
            tokio::select! {
                () = tokio::time::sleep(self.config.retry_period) => {}
                () = &mut shutdown => break,
            }
        }
        publish(&name, false);
        if *leading.borrow() {
            leading.send_replace(false);
            if let Err(e) = self.release().await {
                tracing::warn!(error = %e, "leader election: releasing the lease failed");
            }
        }
    }
}

/// Runs `work` only while this candidate leads: campaigns for `config`'s lease through `root`
/// (a client of the root cluster), starts `work` each time leadership is gained and stops it
/// (triggering the [`Shutdown`] it was given, then awaiting it) when leadership is lost or at
/// `shutdown`, after which the lease is released. Several replicas running this run `work` once.
pub async fn run_while_leading<F, Fut>(
    root: kube::Client,
    config: LeaderConfig,
    shutdown: impl std::future::Future<Output = ()>,
    work: F,
) where
    F: Fn(Shutdown) -> Fut,
    Fut: std::future::Future<Output = Result<()>> + Send + 'static,
{
    let (stop_all, stopped) = Shutdown::new();
    let (leading_tx, mut leading) = watch::channel(false);
    let name = config.name.clone();
    let elector = LeaderElector::new(root, config);
    let election = tokio::spawn(elector.run(leading_tx, stopped.wait()));
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            r = leading.wait_for(|l| *l) => { if r.is_err() { break } }
            () = &mut shutdown => break,
        }
        // Lead until the lease is lost or shutdown.
        let (stop, term) = Shutdown::new();
        let running = tokio::spawn(work(term));
        let done = tokio::select! {
            _ = leading.wait_for(|l| !*l) => false,
            () = &mut shutdown => true,
        };
        stop.trigger();
        if let Ok(Err(e)) = running.await {
            tracing::warn!(lease = %name, error = %e, "work under leader election stopped with an error");
        }
        if done {
            break;
        }
    }
    stop_all.trigger();
    let _ = election.await;
}

/// Publishes leadership of `config`'s lease on `leading` until `shutdown` (for work that runs
/// everywhere but writes only where it leads); the lease is released at the end.
pub async fn campaign(
    root: kube::Client,
    config: LeaderConfig,
    leading: watch::Sender<bool>,
    shutdown: impl std::future::Future<Output = ()>,
) {
    LeaderElector::new(root, config)
        .run(leading, shutdown)
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sub_second_lease_durations_round_up_to_a_whole_second() {
        assert_eq!(lease_seconds(Duration::from_millis(600)), 1);
        assert_eq!(lease_seconds(Duration::from_millis(1500)), 2);
        assert_eq!(lease_seconds(Duration::from_secs(15)), 15);
        assert_eq!(lease_seconds(Duration::ZERO), 1);
    }
}
