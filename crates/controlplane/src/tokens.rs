//! Service-account credentials: the TokenRequest subresource (bound, expiring tokens) and
//! legacy token Secrets.

use apimachinery::meta;
use apimachinery::status::ApiError;
use apimachinery::{ErrorList, FieldError};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

use crate::ControlPlane;
use crate::trust::LEGACY_ISSUER;

/// Upstream's default and minimum token lifetimes.
const DEFAULT_EXPIRATION: i64 = 3600;
const MIN_EXPIRATION: i64 = 600;

/// `POST .../serviceaccounts/<name>/token`: the TokenRequest `req`, answered with its token.
pub async fn token_request(
    cp: &ControlPlane,
    cluster: &str,
    namespace: &str,
    sa_name: &str,
    req: Value,
) -> Result<Value, ApiError> {
    let cache = &cp.store.cache(cluster)?;
    // A miss may be an object just written (a kubelet asks for a pod's token right after
    // the pod was created): the cache is given the time to catch up with storage first.
    let lookup = async |plural: &str, ns: &str, name: &str| {
        if let Some(o) = cache.get("", plural, cluster, ns, name) {
            return Some(o);
        }
        cp.store.wait_for_cache().await;
        cache.get("", plural, cluster, ns, name)
    };
    let sa = lookup("serviceaccounts", namespace, sa_name)
        .await
        .ok_or_else(|| ApiError::not_found("serviceaccounts", "", sa_name))?;
    let trust = cp
        .trust(cluster)
        .ok_or_else(|| ApiError::internal("the cluster has no signing key"))?;
    let spec = req.get("spec").cloned().unwrap_or_else(|| json!({}));
    let mut errs = ErrorList::new();
    let expiration = spec
        .get("expirationSeconds")
        .and_then(Value::as_i64)
        .unwrap_or(DEFAULT_EXPIRATION);
    if expiration < MIN_EXPIRATION {
        errs.push(FieldError::invalid(
            "spec.expirationSeconds",
            json!(expiration),
            "may not specify a duration less than 10 minutes",
        ));
    }
    if expiration > 1 << 32 {
        errs.push(FieldError::too_long("spec.expirationSeconds", 1 << 32));
    }
    let audiences: Vec<String> = match spec.get("audiences").and_then(Value::as_array) {
        Some(a) if !a.is_empty() => a
            .iter()
            .filter_map(|v| v.as_str().map(String::from))
            .collect(),
        _ => vec![trust.issuer.clone()],
    };
    let now = registry::store::unix_now();
    // Capped at the longest lifetime (upstream's `--service-account-max-token-expiration`),
    // which is also how long a rotated-out key keeps verifying: no token outlives its key.
    let max = i64::try_from(cp.config.rotation.max_token_expiration.as_secs()).unwrap_or(i64::MAX);
    let expiration = expiration.min(max.max(1));
    let exp = now + expiration;
    let mut k8s =
        json!({"namespace": namespace, "serviceaccount": {"name": sa_name, "uid": sa.uid()}});
    if let Some(bound) = spec.get("boundObjectRef").filter(|b| !b.is_null()) {
        let kind = bound.get("kind").and_then(Value::as_str).unwrap_or("");
        let name = bound.get("name").and_then(Value::as_str).unwrap_or("");
        let plural = match kind {
            "Pod" => "pods",
            "Secret" => "secrets",
            "Node" => "nodes",
            _ => {
                errs.push(FieldError::not_supported(
                    "spec.boundObjectRef.kind",
                    json!(kind),
                    &["Pod", "Secret", "Node"],
                ));
                ""
            }
        };
        if !plural.is_empty() {
            let ns = if kind == "Node" { "" } else { namespace };
            match lookup(plural, ns, name).await {
                None => return Err(ApiError::not_found(plural, "", name)),
                Some(o) => {
                    let want = bound.get("uid").and_then(Value::as_str).unwrap_or("");
                    if !want.is_empty() && want != o.uid() {
                        return Err(ApiError::conflict(
                            plural,
                            "",
                            name,
                            &format!(
                                "the UID in the bound object reference ({want}) does not match the UID in record. The object might have been deleted and then recreated"
                            ),
                        ));
                    }
                    k8s[kind.to_ascii_lowercase()] = json!({"name": name, "uid": o.uid()});
                }
            }
        }
    }
    if !errs.is_empty() {
        return Err(ApiError::invalid(
            "TokenRequest",
            "authentication.k8s.io",
            sa_name,
            &errs,
        ));
    }
    let claims = json!({
        "iss": trust.issuer,
        "sub": format!("system:serviceaccount:{namespace}:{sa_name}"),
        "aud": audiences,
        "exp": exp,
        "iat": now,
        "nbf": now,
        "jti": uuid::Uuid::new_v4().to_string(),
        "kubernetes.io": k8s,
    });
    let token = trust.sa_key.sign(&claims).map_err(ApiError::internal)?;
    let mut out = req.clone();
    out["apiVersion"] = json!("authentication.k8s.io/v1");
    out["kind"] = json!("TokenRequest");
    out["metadata"] = json!({"name": sa_name, "namespace": namespace, "creationTimestamp": registry::store::now()});
    out["spec"]["audiences"] = json!(audiences);
    out["spec"]["expirationSeconds"] = json!(expiration);
    out["status"] = json!({"token": token, "expirationTimestamp": apimachinery::time::format_unix_seconds(exp)});
    Ok(out)
}

/// Fills a new `kubernetes.io/service-account-token` Secret: a non-expiring legacy token for
/// the named service account, the serving CA and the namespace (upstream's tokens controller).
pub fn fill_legacy_token(
    cp: &ControlPlane,
    cluster: &str,
    secret: &mut Value,
) -> Result<(), ApiError> {
    if secret.get("type").and_then(Value::as_str) != Some("kubernetes.io/service-account-token") {
        return Ok(());
    }
    let ns = meta::namespace(secret).to_string();
    let name = meta::name(secret).to_string();
    let sa_name = meta::annotation(secret, "kubernetes.io/service-account.name")
        .unwrap_or("")
        .to_string();
    let sa = cp
        .store
        .cache_for_reads(cluster)
        .get("", "serviceaccounts", cluster, &ns, &sa_name)
        .ok_or_else(|| {
            ApiError::invalid(
                "Secret",
                "",
                &name,
                &vec![FieldError::not_found(
                    "metadata.annotations[kubernetes.io/service-account.name]",
                    json!(sa_name),
                )]
                .into(),
            )
        })?;
    let trust = cp
        .trust(cluster)
        .ok_or_else(|| ApiError::internal("the cluster has no signing key"))?;
    let sa_uid = sa.uid().to_string();
    let claims = json!({
        "iss": LEGACY_ISSUER,
        "sub": format!("system:serviceaccount:{ns}:{sa_name}"),
        "kubernetes.io/serviceaccount/namespace": ns,
        "kubernetes.io/serviceaccount/secret.name": name,
        "kubernetes.io/serviceaccount/service-account.name": sa_name,
        "kubernetes.io/serviceaccount/service-account.uid": sa_uid,
    });
    let token = trust.sa_key.sign(&claims).map_err(ApiError::internal)?;
    let data = secret
        .as_object_mut()
        .ok_or_else(|| ApiError::bad_request("a Secret must be an object"))?
        .entry("data")
        .or_insert_with(|| json!({}));
    data["token"] = json!(STANDARD.encode(token));
    data["namespace"] = json!(STANDARD.encode(&ns));
    data["ca.crt"] = json!(STANDARD.encode(&cp.config.root_ca.cert_pem));
    let meta = meta::metadata_mut(secret);
    let ann = meta.entry("annotations").or_insert_with(|| json!({}));
    ann["kubernetes.io/service-account.uid"] = json!(sa_uid);
    Ok(())
}
