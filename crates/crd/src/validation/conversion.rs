//! `spec.conversion` (upstream `validateCustomResourceConversion`). A `Webhook` strategy is
//! validated like upstream and accepted; this server never calls the webhook and serves
//! every version with `None` semantics.

use apimachinery::field::{ErrorList, FieldError, Path};
use apimachinery::validation::{is_dns1035_label, is_dns1123_subdomain};
use serde_json::{Value, json};

use crate::spec::Crd;

pub(super) fn conversion_review_versions(c: Crd<'_>) -> Vec<String> {
    Crd::string_list(
        c.spec()
            .pointer("/conversion/webhook/conversionReviewVersions")
            .unwrap_or(&Value::Null),
    )
}

/// Upstream `validateCustomResourceConversion` (v1's `webhook.clientConfig` and
/// `webhook.conversionReviewVersions` are the internal `webhookClientConfig` and
/// `conversionReviewVersions`).
pub(super) fn conversion(c: Crd<'_>, require_recognized: bool, path: &Path) -> ErrorList {
    let mut errs = ErrorList::new();
    let Some(conv) = c.spec().get("conversion").filter(|v| !v.is_null()) else {
        return errs;
    };
    let strategy = conv
        .get("strategy")
        .and_then(Value::as_str)
        .unwrap_or_default();
    match strategy {
        "" => errs.push(FieldError::required(path.child("strategy"), "")),
        "None" | "Webhook" => {}
        other => errs.push(FieldError::not_supported(
            path.child("strategy"),
            json!(other),
            &["None", "Webhook"],
        )),
    }
    let client = conv
        .pointer("/webhook/clientConfig")
        .filter(|v| !v.is_null());
    let review = Crd::string_list(
        conv.pointer("/webhook/conversionReviewVersions")
            .unwrap_or(&Value::Null),
    );
    let cc_path = path.child("webhookClientConfig");
    if strategy == "Webhook" {
        match client {
            None => errs.push(FieldError::required(
                cc_path,
                "required when strategy is set to Webhook",
            )),
            Some(cc) => {
                let url = cc.get("url").and_then(Value::as_str);
                let service = cc.get("service").filter(|v| !v.is_null());
                match (url, service) {
                    (Some(u), None) => errs.extend(webhook_url(u, &cc_path.child("url"))),
                    (None, Some(s)) => errs.extend(webhook_service(s, &cc_path.child("service"))),
                    _ => errs.push(FieldError::required(
                        cc_path,
                        "exactly one of url or service is required",
                    )),
                }
            }
        }
        let rp = path.child("conversionReviewVersions");
        if review.is_empty() {
            errs.push(FieldError::required(rp, ""));
        } else {
            let mut seen: Vec<&str> = Vec::new();
            for (i, v) in review.iter().enumerate() {
                if seen.contains(&v.as_str()) {
                    errs.push(FieldError::invalid(
                        rp.index(i),
                        json!(v),
                        "duplicate version",
                    ));
                    continue;
                }
                seen.push(v);
                for e in is_dns1035_label(v) {
                    errs.push(FieldError::invalid(rp.index(i), json!(v), e));
                }
            }
            if require_recognized && !review.iter().any(|v| v == "v1" || v == "v1beta1") {
                errs.push(FieldError::invalid(
                    rp,
                    json!(review),
                    "must include at least one of v1, v1beta1",
                ));
            }
        }
    } else {
        if client.is_some() {
            errs.push(FieldError::forbidden(
                cc_path,
                "should not be set when strategy is not set to Webhook",
            ));
        }
        if !review.is_empty() {
            errs.push(FieldError::forbidden(
                path.child("conversionReviewVersions"),
                "should not be set when strategy is not set to Webhook",
            ));
        }
    }
    errs
}

/// Upstream `webhook.ValidateWebhookURL` with https required.
fn webhook_url(url: &str, path: &Path) -> ErrorList {
    let mut errs = ErrorList::new();
    const FORM: &str = "; desired format: https://host[/path]";
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let (rest, fragment) = rest.split_once('#').unwrap_or((rest, ""));
    let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
    let authority = if scheme.is_empty() {
        ""
    } else {
        rest.split('/').next().unwrap_or_default()
    };
    let (user, host) = match authority.rsplit_once('@') {
        Some((u, h)) => (Some(u), h),
        None => (None, authority),
    };
    if scheme != "https" {
        errs.push(FieldError::invalid(
            path.clone(),
            json!(scheme),
            format!("'https' is the only allowed URL scheme{FORM}"),
        ));
    }
    if host.is_empty() {
        errs.push(FieldError::invalid(
            path.clone(),
            json!(host),
            format!("host must be specified{FORM}"),
        ));
    }
    if let Some(u) = user {
        errs.push(FieldError::invalid(
            path.clone(),
            json!(u),
            "user information is not permitted in the URL",
        ));
    }
    if !fragment.is_empty() {
        errs.push(FieldError::invalid(
            path.clone(),
            json!(fragment),
            "fragments are not permitted in the URL",
        ));
    }
    if !query.is_empty() {
        errs.push(FieldError::invalid(
            path.clone(),
            json!(query),
            "query parameters are not permitted in the URL",
        ));
    }
    errs
}

/// Upstream `webhook.ValidateWebhookService`, called the way the CRD validation calls it —
/// with name and namespace swapped, so a missing name is reported at `namespace`.
fn webhook_service(s: &Value, path: &Path) -> ErrorList {
    let mut errs = ErrorList::new();
    let f = |k: &str| s.get(k).and_then(Value::as_str).unwrap_or_default();
    let (namespace_arg, name_arg) = (f("name"), f("namespace"));
    if name_arg.is_empty() {
        errs.push(FieldError::required(path.child("name"), ""));
    }
    if namespace_arg.is_empty() {
        errs.push(FieldError::required(path.child("namespace"), ""));
    }
    let port = s.get("port").and_then(Value::as_i64).unwrap_or(443);
    if !(1..=65535).contains(&port) {
        errs.push(FieldError::invalid(
            path.child("port"),
            json!(port),
            "port is not valid: must be between 1 and 65535, inclusive",
        ));
    }
    let Some(url_path) = s.get("path").and_then(Value::as_str) else {
        return errs;
    };
    if url_path.is_empty() || url_path == "/" {
        return errs;
    }
    if url_path == "//" {
        errs.push(FieldError::invalid(
            path.child("path"),
            json!(url_path),
            "segment[0] may not be empty",
        ));
        return errs;
    }
    if !url_path.starts_with('/') {
        errs.push(FieldError::invalid(
            path.child("path"),
            json!(url_path),
            "must start with a '/'",
        ));
    }
    let check = url_path.get(1..).unwrap_or_default();
    let check = check.strip_suffix('/').unwrap_or(check);
    for (i, step) in check.split('/').enumerate() {
        if step.is_empty() {
            errs.push(FieldError::invalid(
                path.child("path"),
                json!(url_path),
                format!("segment[{i}] may not be empty"),
            ));
            continue;
        }
        for e in is_dns1123_subdomain(step) {
            errs.push(FieldError::invalid(
                path.child("path"),
                json!(url_path),
                format!("segment[{i}]: {e}"),
            ));
        }
    }
    errs
}
