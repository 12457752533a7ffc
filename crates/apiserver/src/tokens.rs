//! The per-cluster OIDC issuer discovery documents of service-account tokens (the tokens
//! themselves are [`controlplane::tokens`]'s).

use apimachinery::status::ApiError;
use http::{Response, StatusCode};
use serde_json::json;

use crate::response::{self, Body};
use crate::server::{ApiServer, Ctx};

/// `/.well-known/openid-configuration` of the request's cluster.
pub fn oidc_configuration(server: &ApiServer, ctx: &Ctx) -> Result<Response<Body>, ApiError> {
    let trust = server
        .control_plane()
        .trust(&ctx.cluster)
        .ok_or_else(ApiError::no_route)?;
    Ok(response::json(
        StatusCode::OK,
        &json!({
            "issuer": trust.issuer,
            "jwks_uri": format!("{}/openid/v1/jwks", trust.issuer),
            "response_types_supported": ["id_token"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["ES256"],
        }),
    ))
}

/// `/openid/v1/jwks` of the request's cluster.
pub fn jwks(server: &ApiServer, ctx: &Ctx) -> Result<Response<Body>, ApiError> {
    let trust = server
        .control_plane()
        .trust(&ctx.cluster)
        .ok_or_else(ApiError::no_route)?;
    let body =
        serde_json::to_vec(&trust.jwks(registry::store::unix_now())).map_err(ApiError::internal)?;
    Ok(response::bytes(
        StatusCode::OK,
        "application/jwk-set+json",
        body,
    ))
}
