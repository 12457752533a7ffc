//! Authorization: what an authenticated user may do in a cluster.

use apimachinery::status::ApiError;

use crate::auth::UserInfo;
use crate::server::ApiServer;

/// The attributes of a request, as the authorizer sees them.
#[derive(Debug, Clone, Default)]
pub struct Attributes {
    pub verb: String,
    pub group: String,
    pub resource: String,
    pub subresource: String,
    pub namespace: String,
    pub name: String,
    /// Set for non-resource requests (`/healthz`, `/version`, ...).
    pub path: Option<String>,
}

impl Attributes {
    pub fn resource(
        verb: &str,
        group: &str,
        resource: &str,
        subresource: &str,
        namespace: &str,
        name: &str,
    ) -> Self {
        Attributes {
            verb: verb.into(),
            group: group.into(),
            resource: resource.into(),
            subresource: subresource.into(),
            namespace: namespace.into(),
            name: name.into(),
            path: None,
        }
    }

    pub fn non_resource(verb: &str, path: &str) -> Self {
        Attributes {
            verb: verb.into(),
            path: Some(path.into()),
            ..Default::default()
        }
    }
}

/// Whether `user` may do `attrs` in `cluster`; 403 in upstream's wording otherwise.
pub fn check(
    _server: &ApiServer,
    _cluster: &str,
    user: &UserInfo,
    attrs: &Attributes,
) -> Result<(), ApiError> {
    if user.in_group("system:masters") {
        return Ok(());
    }
    if user.is_anonymous() && attrs.path.is_none() {
        return Err(ApiError::forbidden(
            &attrs.resource,
            &attrs.group,
            &attrs.name,
            &format!(
                "User \"{}\" cannot {} resource \"{}\"",
                user.name, attrs.verb, attrs.resource
            ),
        ));
    }
    Ok(())
}
