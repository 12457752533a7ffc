//! Credential rotation without restarts: the service-account signing keys of every cluster
//! and the client certificates of the logical clusters' admin kubeconfigs.
//!
//! - **Service-account keys.** A cluster's key signs for [`Rotation::sa_key_period`]; then a
//!   new key signs and the old one is kept in the cluster's `-pki` Secret as retired
//!   (`sa-retired-<unix time>.key`), still verifying for [`Rotation::max_token_expiration`]
//!   — the longest lifetime TokenRequest gives a token — and then dropped. So no token
//!   outlives the key that verifies it, and a client holding a token never notices a
//!   rotation. Legacy token Secrets need no overlap: such a token is worth what its Secret
//!   still holds ([`crate::trust`]).
//! - **Client certificates** the control plane issues (the admin kubeconfig of every logical
//!   cluster, `matryoshka-system/<cluster>-admin-kubeconfig`) are re-issued once two thirds of
//!   their lifetime have passed ([`pki::renewal_time`]); the old certificate keeps working until
//!   it expires, so readers of the Secret have a third of the lifetime to pick up the new one;
//!   and at once when the cluster's CA is not the one that issued it (a CA rotation).
//!
//! The loop runs on the leading replica ([`ControlPlane::leads`]); every replica reads the
//! Secrets through the watch cache, so all of them trust the new keys at once.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use apimachinery::meta;
use apimachinery::status::ApiError;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use registry::cache::Filter;
use registry::store::{Location, WriteOptions};
use serde_json::{Value, json};

use crate::ControlPlane;
use crate::trust::{SA_KEY, SA_KEY_SINCE, SA_RETIRED_PREFIX, SYSTEM_NAMESPACE, pki_secret_name};
use apimachinery::cluster;

/// How often credentials rotate.
#[derive(Debug, Clone)]
pub struct Rotation {
    /// The lifetime of the client certificates the control plane issues.
    pub client_cert_validity: Duration,
    /// How long a service-account key signs before a new one takes over.
    pub sa_key_period: Duration,
    /// The longest lifetime of a token from TokenRequest (upstream's
    /// `--service-account-max-token-expiration`), and so how long a retired key still verifies.
    pub max_token_expiration: Duration,
}

impl Default for Rotation {
    fn default() -> Self {
        Rotation {
            client_cert_validity: pki::LEAF_VALIDITY,
            sa_key_period: Duration::from_secs(90 * 24 * 3600),
            max_token_expiration: Duration::from_secs(48 * 3600),
        }
    }
}

impl Rotation {
    /// How often the loop looks: a quarter of the shortest period, between half a second and
    /// a minute.
    pub fn tick(&self) -> Duration {
        (self.sa_key_period.min(self.client_cert_validity / 3) / 4)
            .clamp(Duration::from_millis(500), Duration::from_secs(60))
    }
}

/// What one pass changed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Rotated {
    /// Service-account keys replaced.
    pub sa_keys: usize,
    /// Retired keys dropped after their overlap window.
    pub retired_dropped: usize,
    /// Admin kubeconfigs re-issued.
    pub kubeconfigs: usize,
}

/// Starts the rotation loop (it ends with the control plane).
pub(crate) fn start(cp: &Arc<ControlPlane>) -> Result<(), ApiError> {
    let weak = Arc::downgrade(cp);
    let tick = cp.config.rotation.tick();
    // A changed CA (`matryoshka pki rotate-ca`) is acted on at once, not at the next tick.
    let filter = Filter {
        cluster: Some(cluster::ROOT.into()),
        namespace: Some(SYSTEM_NAMESPACE.into()),
        predicate: None,
    };
    let mut follow = registry::cache::Follow::new(cp.store.shared_cache(), "", "secrets", filter)?;
    tokio::spawn(async move {
        let mut interval = tokio::time::interval(tick);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            // Every cluster on the tick; one cluster when its credentials change.
            let only = tokio::select! {
                _ = interval.tick() => None,
                (_, obj) = follow.recv() => match obj.name().strip_suffix("-pki") {
                    Some(cluster) => Some(cluster.to_string()),
                    None => continue,
                },
            };
            let Some(cp) = weak.upgrade() else { return };
            if !cp.leads() {
                continue;
            }
            let pass = match &only {
                None => rotate_once(&cp).await,
                Some(cluster) => rotate_cluster(&cp, cluster).await,
            };
            match pass {
                Ok(r) if r != Rotated::default() => tracing::info!(
                    sa_keys = r.sa_keys,
                    retired_dropped = r.retired_dropped,
                    kubeconfigs = r.kubeconfigs,
                    "credentials rotated"
                ),
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "credential rotation failed; will retry"),
            }
        }
    });
    Ok(())
}

/// One pass: every cluster's service-account keys and every admin kubeconfig that is due.
pub async fn rotate_once(cp: &ControlPlane) -> Result<Rotated, ApiError> {
    let mut done = Rotated::default();
    ensure_root_keys(cp).await?;
    let filter = Filter {
        cluster: Some(cluster::ROOT.into()),
        namespace: Some(SYSTEM_NAMESPACE.into()),
        predicate: None,
    };
    let (secrets, _) = cp.store.shared_cache().list("", "secrets", &filter);
    for s in secrets {
        rotate_secret(cp, s.name(), &s.value(), &mut done).await?;
    }
    Ok(done)
}

/// One cluster's keys and admin kubeconfig.
async fn rotate_cluster(cp: &ControlPlane, cluster: &str) -> Result<Rotated, ApiError> {
    let mut done = Rotated::default();
    for name in [
        pki_secret_name(cluster),
        crate::tenancy::admin_kubeconfig_name(cluster),
    ] {
        if let Some(s) =
            cp.store
                .shared_cache()
                .get("", "secrets", cluster::ROOT, SYSTEM_NAMESPACE, &name)
        {
            rotate_secret(cp, &name, &s.value(), &mut done).await?;
        }
    }
    Ok(done)
}

/// Rotates what is due in one `matryoshka-system` Secret: a `-pki` Secret's keys, an
/// `-admin-kubeconfig` Secret's certificate.
async fn rotate_secret(
    cp: &ControlPlane,
    name: &str,
    obj: &Value,
    done: &mut Rotated,
) -> Result<(), ApiError> {
    let now = registry::store::unix_now();
    if name.ends_with("-pki") {
        let (rotate, drop) = key_plan(cp, obj, now);
        if rotate || drop > 0 {
            update_secret(cp, name, |cur| {
                let (rotate, _) = key_plan(cp, cur, now);
                rotate_keys(cp, cur, rotate, now)
            })
            .await?;
            done.sa_keys += usize::from(rotate);
            done.retired_dropped += drop;
        }
    } else if let Some(cluster) = name.strip_suffix("-admin-kubeconfig")
        // No CA: the cluster is being deleted.
        && let Ok(ca) = crate::tenancy::ca_of(cp, cluster)
        && kubeconfig_due(obj, &ca.pair.cert_pem)
    {
        let fresh = crate::tenancy::admin_kubeconfig_secret(cp, cluster, &ca)?;
        update_secret(cp, name, |cur| {
            let mut next = cur.clone();
            next["data"] = fresh["data"].clone();
            Some(next)
        })
        .await?;
        done.kubeconfigs += 1;
    }
    Ok(())
}

/// The root cluster's keys move into `matryoshka-system/root-pki` on the first pass, so they
/// can rotate like every cluster's (its CA stays in the PKI directory).
async fn ensure_root_keys(cp: &ControlPlane) -> Result<(), ApiError> {
    let name = pki_secret_name(cluster::ROOT);
    if cp
        .store
        .shared_cache()
        .get("", "secrets", cluster::ROOT, SYSTEM_NAMESPACE, &name)
        .is_some()
    {
        return Ok(());
    }
    let secret = json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": name,
            "namespace": SYSTEM_NAMESPACE,
            "labels": {"core.matryoshka.dev/cluster": cluster::ROOT},
            "annotations": {SA_KEY_SINCE: registry::store::unix_now().to_string()},
        },
        "type": "Opaque",
        "data": {SA_KEY: STANDARD.encode(&cp.config.root_sa_key)},
    });
    // Another replica may have created it first: then its keys are kept.
    crate::tenancy::create_or_keep(cp, cluster::ROOT, "", "secrets", SYSTEM_NAMESPACE, secret).await
}

/// Whether a `-pki` Secret's signing key is due, and how many retired keys have outlived
/// their window.
fn key_plan(cp: &ControlPlane, secret: &Value, now: i64) -> (bool, usize) {
    let rotation = &cp.config.rotation;
    let since = meta::annotation(secret, SA_KEY_SINCE)
        .and_then(|s| s.parse::<i64>().ok())
        .or_else(|| {
            secret
                .pointer("/metadata/creationTimestamp")
                .and_then(Value::as_str)
                .and_then(apimachinery::time::parse_unix_seconds)
        })
        .unwrap_or(now);
    let period = secs(rotation.sa_key_period);
    let overlap = secs(rotation.max_token_expiration);
    let has_key = secret.pointer(&format!("/data/{SA_KEY}")).is_some();
    let rotate = has_key && now.saturating_sub(since) >= period;
    let drop = retired_times(secret)
        .filter(|(_, t)| t.saturating_add(overlap) <= now)
        .count();
    (rotate, drop)
}

fn secs(d: Duration) -> i64 {
    i64::try_from(d.as_secs()).unwrap_or(i64::MAX)
}

/// The data keys of retired signing keys with their retirement times.
fn retired_times(secret: &Value) -> impl Iterator<Item = (String, i64)> + '_ {
    secret
        .get("data")
        .and_then(Value::as_object)
        .into_iter()
        .flat_map(|d| d.keys())
        .filter_map(|k| {
            let t = k
                .strip_prefix(SA_RETIRED_PREFIX)?
                .strip_suffix(".key")?
                .parse()
                .ok()?;
            Some((k.clone(), t))
        })
}

/// `secret` with its key rotated (when `rotate`) and expired retired keys dropped.
fn rotate_keys(cp: &ControlPlane, secret: &Value, rotate: bool, now: i64) -> Option<Value> {
    let overlap = secs(cp.config.rotation.max_token_expiration);
    let mut next = secret.clone();
    let expired: Vec<String> = retired_times(secret)
        .filter(|(_, t)| t.saturating_add(overlap) <= now)
        .map(|(k, _)| k)
        .collect();
    let data = next.get_mut("data")?.as_object_mut()?;
    for k in expired {
        data.remove(&k);
    }
    if rotate {
        let fresh = crate::jwt::SigningKey::generate_pkcs8().ok()?;
        let old = data.insert(SA_KEY.into(), json!(STANDARD.encode(fresh)))?;
        data.insert(format!("{SA_RETIRED_PREFIX}{now}.key"), old);
        meta::metadata_mut(&mut next)
            .entry("annotations")
            .or_insert_with(|| json!({}))[SA_KEY_SINCE] = json!(now.to_string());
    }
    Some(next)
}

/// Whether an admin kubeconfig Secret's client certificate is due for renewal, or was issued
/// by another CA than the cluster's current one (`ca_pem`: a CA rotation is under way).
fn kubeconfig_due(secret: &Value, ca_pem: &str) -> bool {
    let conf = secret
        .pointer("/data/admin.conf")
        .and_then(Value::as_str)
        .and_then(|s| STANDARD.decode(s).ok())
        .and_then(|b| String::from_utf8(b).ok());
    let Some(cert) = conf.as_deref().and_then(pki::kubeconfig_client_cert) else {
        // Unreadable: issue a good one.
        return true;
    };
    !pki::issued_by(&cert, ca_pem)
        || pki::renewal_time(&cert).is_none_or(|at| SystemTime::now() >= at)
}

fn secrets(cp: &ControlPlane) -> Result<Arc<registry::ResourceDef>, ApiError> {
    cp.catalog
        .builtin("", "secrets")
        .ok_or_else(|| ApiError::internal("secrets are not served"))
}

/// Rewrites a `matryoshka-system` Secret with `f` (`None`: leave it); a Secret deleted
/// meanwhile (its cluster went away) is not an error.
async fn update_secret(
    cp: &ControlPlane,
    name: &str,
    mut f: impl FnMut(&Value) -> Option<Value> + Send,
) -> Result<(), ApiError> {
    let res = secrets(cp)?;
    let loc = Location {
        cluster: cluster::ROOT,
        namespace: SYSTEM_NAMESPACE,
        name,
    };
    let result = cp
        .store
        .update_with(&res, &loc, &WriteOptions::default(), |cur| {
            let cur = cur.ok_or_else(|| ApiError::not_found("secrets", "", name))?;
            let mut next = f(cur).ok_or_else(|| ApiError::internal("nothing to rotate"))?;
            meta::remove(&mut next, "resourceVersion");
            Ok(next)
        })
        .await;
    match result {
        Ok(_) => Ok(()),
        Err(e) if e.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}
