//! Review resources: create-only requests answered at once and never stored
//! (SelfSubjectReview; access reviews come with authorization).

use apimachinery::builtin::{CREATE, Resource};
use apimachinery::status::ApiError;
use http::{Response, StatusCode};
use registry::{DefaultStrategy, ResourceDef};
use serde_json::json;

use crate::response::{self, Body};
use crate::server::Ctx;

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
        ("authentication.k8s.io", "selfsubjectreviews")
    )
}

/// Answers a review.
pub fn answer(ctx: &Ctx, res: &ResourceDef) -> Result<Response<Body>, ApiError> {
    match res.plural.as_str() {
        "selfsubjectreviews" => Ok(response::json(
            StatusCode::CREATED,
            &json!({
                "kind": "SelfSubjectReview",
                "apiVersion": res.api_version(),
                "metadata": {"creationTimestamp": null},
                "status": {"userInfo": ctx.user.to_json()},
            }),
        )),
        _ => Err(ApiError::no_route()),
    }
}
