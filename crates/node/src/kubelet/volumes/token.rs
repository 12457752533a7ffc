//! Service-account tokens for projected volumes: requested through TokenRequest, bound to the
//! pod, cached, and refreshed before they expire (upstream `pkg/kubelet/token/token_manager.go`).
//!
//! A cached token is reused until it is older than 80 % of its lifetime or than 24 hours
//! (each check with up to 10 s of jitter, so a node's pods do not all refresh at once). When a
//! refresh fails the old token keeps being served while it is valid; an expired one is an
//! error. Tokens of a pod are dropped when its volumes are torn down.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::authentication::v1::TokenRequest;
use parking_lot::Mutex;

use super::source::ObjectSource;

/// Tokens are refreshed after this age whatever their lifetime (upstream `maxTTL`).
pub const MAX_TTL: Duration = Duration::from_secs(24 * 60 * 60);
/// Upper bound of the random jitter of a refresh decision (upstream `maxJitter`).
pub const MAX_JITTER: Duration = Duration::from_secs(10);

/// A clock, replaceable in tests.
pub type Clock = Arc<dyn Fn() -> Timestamp + Send + Sync>;

/// Who a cached token is for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    service_account: String,
    namespace: String,
    audiences: Vec<String>,
    expiration_seconds: Option<i64>,
    pod_name: String,
    pod_uid: String,
}

impl Key {
    fn describe(&self) -> String {
        format!(
            "{:?}/{:?}/{:?}/{:?}/{}({})",
            self.service_account,
            self.namespace,
            self.audiences,
            self.expiration_seconds,
            self.pod_name,
            self.pod_uid
        )
    }
}

/// The node's cache of service-account tokens.
pub struct TokenManager {
    cache: Mutex<HashMap<Key, TokenRequest>>,
    clock: Clock,
}

impl Default for TokenManager {
    fn default() -> Self {
        TokenManager::new(Arc::new(Timestamp::now))
    }
}

impl TokenManager {
    pub fn new(clock: Clock) -> Self {
        TokenManager {
            cache: Mutex::new(HashMap::new()),
            clock,
        }
    }

    /// A token for `request` (whose bound object is the pod), from the cache when it does not
    /// need a refresh yet.
    pub async fn get(
        &self,
        source: &dyn ObjectSource,
        namespace: &str,
        service_account: &str,
        request: &TokenRequest,
    ) -> Result<TokenRequest, String> {
        let key = key(namespace, service_account, request);
        let cached = self.cache.lock().get(&key).cloned();
        let now = (self.clock)();
        if let Some(tr) = cached
            .as_ref()
            .filter(|tr| !requires_refresh(tr, now, jitter()))
        {
            return Ok(tr.clone());
        }
        match source
            .request_token(namespace, service_account, request)
            .await
        {
            Ok(tr) => {
                self.cache.lock().insert(key, tr.clone());
                Ok(tr)
            }
            Err(e) => match cached {
                None => Err(format!("failed to fetch token: {e}")),
                Some(tr) if expired(&tr, now) => Err(format!(
                    "token {} expired and refresh failed: {e}",
                    key.describe()
                )),
                Some(tr) => {
                    tracing::warn!(token = %key.describe(), error = %e, "couldn't update token");
                    Ok(tr)
                }
            },
        }
    }

    /// The earliest time a cached token of pod `uid` needs a refresh (without jitter).
    pub fn next_refresh(&self, uid: &str) -> Option<Timestamp> {
        self.cache
            .lock()
            .iter()
            .filter(|(k, _)| k.pod_uid == uid)
            .filter_map(|(_, tr)| refresh_at(tr))
            .min()
    }

    /// Forgets the tokens bound to pod `uid`.
    pub fn delete_pod(&self, uid: &str) {
        self.cache.lock().retain(|k, _| k.pod_uid != uid);
    }

    /// Forgets expired tokens (upstream collects them every minute).
    pub fn collect_expired(&self) {
        let now = (self.clock)();
        self.cache.lock().retain(|_, tr| !expired(tr, now));
    }

    /// How many tokens are cached.
    pub fn len(&self) -> usize {
        self.cache.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn key(namespace: &str, service_account: &str, tr: &TokenRequest) -> Key {
    let bound = tr.spec.bound_object_ref.as_ref();
    Key {
        service_account: service_account.to_string(),
        namespace: namespace.to_string(),
        audiences: tr.spec.audiences.clone(),
        expiration_seconds: tr.spec.expiration_seconds,
        pod_name: bound.and_then(|b| b.name.clone()).unwrap_or_default(),
        pod_uid: bound.and_then(|b| b.uid.clone()).unwrap_or_default(),
    }
}

fn jitter() -> Duration {
    Duration::from_secs_f64(rand::random::<f64>() * MAX_JITTER.as_secs_f64())
}

fn expiry(tr: &TokenRequest) -> Option<Timestamp> {
    tr.status.as_ref().map(|s| s.expiration_timestamp.0)
}

fn expired(tr: &TokenRequest, now: Timestamp) -> bool {
    expiry(tr).is_none_or(|exp| now > exp)
}

/// When a token reaches 80 % of its lifetime or 24 hours of age, whichever is first.
fn refresh_at(tr: &TokenRequest) -> Option<Timestamp> {
    let exp = expiry(tr)?;
    let ttl = tr.spec.expiration_seconds?;
    let iat = exp.checked_sub(jiff::SignedDuration::from_secs(ttl)).ok()?;
    let by_age = iat
        .checked_add(jiff::SignedDuration::try_from(MAX_TTL).ok()?)
        .ok()?;
    let by_ttl = exp
        .checked_sub(jiff::SignedDuration::from_secs(ttl * 20 / 100))
        .ok()?;
    Some(by_age.min(by_ttl))
}

/// Whether a token must be refreshed at `now` (upstream `requiresRefresh`): older than
/// `MAX_TTL - jitter`, or within 20 % of its lifetime plus `jitter` of its expiry. A token
/// without `expirationSeconds` is never refreshed.
pub fn requires_refresh(tr: &TokenRequest, now: Timestamp, jitter: Duration) -> bool {
    let (Some(exp), Some(ttl)) = (expiry(tr), tr.spec.expiration_seconds) else {
        return false;
    };
    let jitter = jiff::SignedDuration::try_from(jitter).unwrap_or_default();
    let secs = jiff::SignedDuration::from_secs;
    let Ok(iat) = exp.checked_sub(secs(ttl)) else {
        return true;
    };
    let max_ttl = jiff::SignedDuration::try_from(MAX_TTL).unwrap_or_default();
    if iat.checked_add(max_ttl - jitter).is_ok_and(|t| now > t) {
        return true;
    }
    exp.checked_sub(secs(ttl * 20 / 100) + jitter)
        .is_ok_and(|t| now > t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::authentication::v1::{TokenRequestSpec, TokenRequestStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn token(exp: Timestamp, ttl: i64) -> TokenRequest {
        TokenRequest {
            spec: TokenRequestSpec {
                expiration_seconds: Some(ttl),
                ..Default::default()
            },
            status: Some(TokenRequestStatus {
                token: "t".into(),
                expiration_timestamp: Time(exp),
            }),
            ..Default::default()
        }
    }

    fn at(s: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + s).unwrap()
    }

    #[test]
    fn a_token_is_refreshed_at_eighty_percent_of_its_lifetime() {
        // Issued at 0, 3607 s: refresh after 2885.6 s (exp - 721 s).
        let tr = token(at(3607), 3607);
        assert!(!requires_refresh(&tr, at(2800), Duration::ZERO));
        assert!(!requires_refresh(&tr, at(2886), Duration::ZERO));
        assert!(requires_refresh(&tr, at(2887), Duration::ZERO));
        // Jitter brings it forward by up to 10 s.
        assert!(requires_refresh(&tr, at(2880), Duration::from_secs(10)));
        assert_eq!(refresh_at(&tr), Some(at(2886)));
    }

    #[test]
    fn a_long_lived_token_is_refreshed_after_a_day() {
        let year = 365 * 24 * 3600;
        let tr = token(at(year), year);
        let day = 24 * 3600;
        assert!(!requires_refresh(&tr, at(day - 1), Duration::ZERO));
        assert!(requires_refresh(&tr, at(day + 1), Duration::ZERO));
        assert!(requires_refresh(&tr, at(day - 5), Duration::from_secs(10)));
        assert_eq!(refresh_at(&tr), Some(at(day)));
    }

    #[test]
    fn a_token_without_a_lifetime_is_never_refreshed() {
        let mut tr = token(at(10), 10);
        tr.spec.expiration_seconds = None;
        assert!(!requires_refresh(&tr, at(1_000_000), Duration::ZERO));
    }
}
