//! The webhooks behind the kubelet's authentication and authorization: a bearer token is
//! checked with a `TokenReview`, a request is authorized with a `SubjectAccessReview`, both
//! created in the cluster the node belongs to (upstream's `--authentication-token-webhook`
//! and `--authorization-mode=Webhook`). [`KubeReviewer`] does it over a kube client; tests
//! use their own [`Reviewer`].

use async_trait::async_trait;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::PostParams;

/// An authenticated user (what `user.Info` carries).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct User {
    pub name: String,
    pub uid: String,
    pub groups: Vec<String>,
    pub extra: Vec<(String, Vec<String>)>,
}

/// What a request asks to do, as the kubelet describes it to the authorizer: always
/// `nodes/<name>` with a subresource, the verb from the HTTP method.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Attributes {
    pub verb: String,
    pub node: String,
    pub subresource: String,
}

/// Why a webhook call failed (not a refusal: an error talking to the API).
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct ReviewError(pub String);

/// The two webhooks.
#[async_trait]
pub trait Reviewer: Send + Sync + 'static {
    /// The user a bearer token authenticates, `None` when the API says it does not.
    async fn token_review(&self, token: &str) -> Result<Option<User>, ReviewError>;

    /// Whether `user` may do `attrs`.
    async fn access_review(&self, user: &User, attrs: &Attributes) -> Result<bool, ReviewError>;
}

/// The webhooks over the Kubernetes API.
pub struct KubeReviewer {
    client: kube::Client,
}

impl KubeReviewer {
    pub fn new(client: kube::Client) -> Self {
        KubeReviewer { client }
    }
}

#[async_trait]
impl Reviewer for KubeReviewer {
    async fn token_review(&self, token: &str) -> Result<Option<User>, ReviewError> {
        let api: kube::Api<TokenReview> = kube::Api::all(self.client.clone());
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.to_string()),
                audiences: None,
            },
            ..Default::default()
        };
        let answer = api
            .create(&PostParams::default(), &review)
            .await
            .map_err(|e| ReviewError(format!("TokenReview failed: {e}")))?;
        let Some(status) = answer.status else {
            return Ok(None);
        };
        if status.authenticated != Some(true) {
            return Ok(None);
        }
        let info = status.user.unwrap_or_default();
        Ok(Some(User {
            name: info.username.unwrap_or_default(),
            uid: info.uid.unwrap_or_default(),
            groups: info.groups.unwrap_or_default(),
            extra: info.extra.unwrap_or_default().into_iter().collect(),
        }))
    }

    async fn access_review(&self, user: &User, attrs: &Attributes) -> Result<bool, ReviewError> {
        let api: kube::Api<SubjectAccessReview> = kube::Api::all(self.client.clone());
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(user.name.clone()),
                uid: (!user.uid.is_empty()).then(|| user.uid.clone()),
                groups: Some(user.groups.clone()),
                extra: (!user.extra.is_empty()).then(|| user.extra.iter().cloned().collect()),
                resource_attributes: Some(ResourceAttributes {
                    verb: Some(attrs.verb.clone()),
                    group: Some(String::new()),
                    version: Some("v1".into()),
                    resource: Some("nodes".into()),
                    subresource: Some(attrs.subresource.clone()),
                    name: Some(attrs.node.clone()),
                    ..Default::default()
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        let answer = api
            .create(&PostParams::default(), &review)
            .await
            .map_err(|e| ReviewError(format!("SubjectAccessReview failed: {e}")))?;
        Ok(answer.status.is_some_and(|s| s.allowed))
    }
}
