//! Review resources: create-only requests answered at once and never stored —
//! SelfSubjectReview (`kubectl auth whoami`), the access reviews (`kubectl auth can-i`) and
//! TokenReview.

use apimachinery::builtin::{CREATE, Resource};
use apimachinery::status::ApiError;
use http::{Response, StatusCode};
use registry::{DefaultStrategy, ResourceDef};
use serde_json::json;

use crate::auth::{UserExt, UserInfo};
use crate::response::{self, Body};
use crate::server::{ApiServer, Ctx};
use serde_json::Value;

static SSR_V1BETA1: Resource = Resource {
    group: "authentication.k8s.io",
    version: "v1beta1",
    kind: "SelfSubjectReview",
    plural: "selfsubjectreviews",
    singular: "selfsubjectreview",
    namespaced: false,
    short_names: &[],
    categories: &[],
    verbs: CREATE,
    subresources: &[],
};

static SSR_V1ALPHA1: Resource = Resource {
    version: "v1alpha1",
    ..SSR_V1BETA1
};

/// The older SelfSubjectReview versions kubectl 1.27 asks for.
pub fn extra_resources() -> Vec<ResourceDef> {
    [&SSR_V1BETA1, &SSR_V1ALPHA1]
        .into_iter()
        .map(|r| ResourceDef::builtin(r, std::sync::Arc::new(DefaultStrategy), None))
        .collect()
}

/// Whether a create of this resource is a review answered by [`answer`].
pub fn is_review(res: &ResourceDef) -> bool {
    matches!(
        (res.group.as_str(), res.plural.as_str()),
        (
            "authentication.k8s.io",
            "selfsubjectreviews" | "tokenreviews"
        ) | (
            "authorization.k8s.io",
            "selfsubjectaccessreviews"
                | "selfsubjectrulesreviews"
                | "subjectaccessreviews"
                | "localsubjectaccessreviews"
        )
    )
}

/// The user a SubjectAccessReview spec names.
fn spec_user(spec: &Value) -> UserInfo {
    let strings = |v: Option<&Value>| -> Vec<String> {
        v.and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    };
    let extra = spec
        .get("extra")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), strings(Some(v))))
                .collect()
        })
        .unwrap_or_default();
    UserInfo {
        name: spec
            .get("user")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        uid: spec
            .get("uid")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        groups: strings(spec.get("groups")),
        extra,
    }
}

fn reply(res: &ResourceDef, req: &Value, status: Value, namespace: &str) -> Response<Body> {
    let mut out = if req.is_object() {
        req.clone()
    } else {
        json!({})
    };
    out["kind"] = json!(res.kind);
    out["apiVersion"] = json!(res.api_version());
    let mut md = json!({"creationTimestamp": null});
    if !namespace.is_empty() {
        md["namespace"] = json!(namespace);
    }
    out["metadata"] = md;
    out["status"] = status;
    response::json(StatusCode::CREATED, &out)
}

fn access(
    server: &ApiServer,
    cluster: &str,
    user: &UserInfo,
    spec: &Value,
) -> Result<Value, ApiError> {
    let attrs = rbac::Attributes::from_review_spec(spec).ok_or_else(|| {
        let errs = vec![apimachinery::FieldError::invalid(
            "spec.resourceAttributes",
            Value::Null,
            "exactly one of nonResourceAttributes or resourceAttributes must be specified",
        )];
        ApiError::invalid(
            "SubjectAccessReview",
            "authorization.k8s.io",
            "",
            &errs.into(),
        )
    })?;
    Ok(crate::authz::allowed(server.control_plane(), cluster, user, &attrs).review_status())
}

/// Answers a review.
pub async fn answer(
    server: &ApiServer,
    ctx: &Ctx,
    res: &ResourceDef,
    namespace: &str,
) -> Result<Response<Body>, ApiError> {
    let req = if ctx.body.is_empty() {
        json!({})
    } else {
        crate::codec::decode_object(ctx)?
    };
    let spec = req.get("spec").cloned().unwrap_or_else(|| json!({}));
    match res.plural.as_str() {
        "selfsubjectreviews" => Ok(reply(
            res,
            &json!({}),
            json!({"userInfo": ctx.user.to_json()}),
            "",
        )),
        "selfsubjectaccessreviews" => Ok(reply(
            res,
            &req,
            access(server, &ctx.cluster, &ctx.user, &spec)?,
            "",
        )),
        "subjectaccessreviews" => Ok(reply(
            res,
            &req,
            access(server, &ctx.cluster, &spec_user(&spec), &spec)?,
            "",
        )),
        "localsubjectaccessreviews" => {
            let ns = spec
                .pointer("/resourceAttributes/namespace")
                .and_then(Value::as_str)
                .unwrap_or("");
            if ns != namespace {
                let errs = vec![apimachinery::FieldError::invalid(
                    "spec.resourceAttributes.namespace",
                    json!(ns),
                    "must match metadata.namespace",
                )];
                return Err(ApiError::invalid(
                    "LocalSubjectAccessReview",
                    "authorization.k8s.io",
                    "",
                    &errs.into(),
                ));
            }
            Ok(reply(
                res,
                &req,
                access(server, &ctx.cluster, &spec_user(&spec), &spec)?,
                namespace,
            ))
        }
        "selfsubjectrulesreviews" => {
            let ns = spec.get("namespace").and_then(Value::as_str).unwrap_or("");
            let policy = crate::authz::CachePolicy::load(server.control_plane(), &ctx.cluster, ns);
            Ok(reply(
                res,
                &req,
                rbac::rules_for(&ctx.user, ns, &policy).to_status_json(),
                "",
            ))
        }
        "tokenreviews" => {
            let token = spec.get("token").and_then(Value::as_str).unwrap_or("");
            let auth = format!("Bearer {token}");
            let status = match server
                .authn
                .authenticate(server.control_plane(), &ctx.cluster, None, Some(&auth))
                .await
            {
                Ok(u) if !token.is_empty() => {
                    let aud = server
                        .control_plane()
                        .trust(&ctx.cluster)
                        .map(|t| t.issuer.clone())
                        .unwrap_or_default();
                    json!({"authenticated": true, "user": u.to_json(), "audiences": [aud]})
                }
                _ => json!({"authenticated": false, "error": "invalid bearer token"}),
            };
            Ok(reply(res, &req, status, ""))
        }
        _ => Err(ApiError::no_route()),
    }
}
