//! API errors and their `Status` form.
//!
//! Every failure a client can see is an [`ApiError`]: an HTTP code, an upstream `reason`, a
//! message in upstream's wording and optional details (the object, field causes). The API
//! server turns it into a `kind: Status` body in one place; controllers and tests match on
//! `reason` and `code` exactly as client-go does.

use serde_json::{Value, json};

use crate::field::ErrorList;

/// Upstream `metav1.StatusReason` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reason {
    BadRequest,
    Unauthorized,
    Forbidden,
    NotFound,
    MethodNotAllowed,
    NotAcceptable,
    AlreadyExists,
    Conflict,
    Gone,
    Expired,
    RequestEntityTooLarge,
    UnsupportedMediaType,
    Invalid,
    TooManyRequests,
    InternalError,
    ServiceUnavailable,
    Timeout,
    /// No reason (`StatusReasonUnknown`, an empty string): what a plain Go error becomes.
    Unknown,
}

impl Reason {
    /// The reason a `Status` names (what another server or a webhook sent); a reason this
    /// list does not hold becomes [`Reason::Unknown`].
    pub fn from_name(name: &str) -> Reason {
        const ALL: [Reason; 17] = [
            Reason::BadRequest,
            Reason::Unauthorized,
            Reason::Forbidden,
            Reason::NotFound,
            Reason::MethodNotAllowed,
            Reason::NotAcceptable,
            Reason::AlreadyExists,
            Reason::Conflict,
            Reason::Gone,
            Reason::Expired,
            Reason::RequestEntityTooLarge,
            Reason::UnsupportedMediaType,
            Reason::Invalid,
            Reason::TooManyRequests,
            Reason::InternalError,
            Reason::ServiceUnavailable,
            Reason::Timeout,
        ];
        ALL.into_iter()
            .find(|r| r.as_str() == name)
            .unwrap_or(Reason::Unknown)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Reason::BadRequest => "BadRequest",
            Reason::Unauthorized => "Unauthorized",
            Reason::Forbidden => "Forbidden",
            Reason::NotFound => "NotFound",
            Reason::MethodNotAllowed => "MethodNotAllowed",
            Reason::NotAcceptable => "NotAcceptable",
            Reason::AlreadyExists => "AlreadyExists",
            Reason::Conflict => "Conflict",
            Reason::Gone => "Gone",
            Reason::Expired => "Expired",
            Reason::RequestEntityTooLarge => "RequestEntityTooLarge",
            Reason::UnsupportedMediaType => "UnsupportedMediaType",
            Reason::Invalid => "Invalid",
            Reason::TooManyRequests => "TooManyRequests",
            Reason::InternalError => "InternalError",
            Reason::ServiceUnavailable => "ServiceUnavailable",
            Reason::Timeout => "Timeout",
            Reason::Unknown => "",
        }
    }
}

/// One cause in `details.causes`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cause {
    /// e.g. `FieldValueInvalid`, `FieldManagerConflict`, `ResourceVersionTooLarge`.
    pub reason: String,
    pub message: String,
    pub field: String,
}

/// A failed API request, as a client will see it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ApiError {
    pub code: u16,
    pub reason: Reason,
    pub message: String,
    /// `details.name`
    pub name: Option<String>,
    /// `details.group`
    pub group: Option<String>,
    /// `details.kind`: upstream puts the resource (or kind) name here.
    pub kind: Option<String>,
    pub causes: Vec<Cause>,
    pub retry_after_seconds: Option<u32>,
}

/// `Result` with [`ApiError`] as the default error.
pub type Result<T, E = ApiError> = std::result::Result<T, E>;

/// The `<resource>[.<group>]` form upstream messages use (`deployments.apps`, `configmaps`).
pub fn qualified_resource(resource: &str, group: &str) -> String {
    if group.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}.{group}")
    }
}

impl ApiError {
    pub fn new(code: u16, reason: Reason, message: impl Into<String>) -> Self {
        ApiError {
            code,
            reason,
            message: message.into(),
            name: None,
            group: None,
            kind: None,
            causes: Vec::new(),
            retry_after_seconds: None,
        }
    }

    fn about(mut self, resource: &str, group: &str, name: &str) -> Self {
        self.kind = Some(resource.to_string());
        self.group = Some(group.to_string());
        if !name.is_empty() {
            self.name = Some(name.to_string());
        }
        self
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, Reason::BadRequest, message)
    }

    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(401, Reason::Unauthorized, message)
    }

    /// 403 with upstream's wording: `<resource>[.<group>] "<name>" is forbidden: <why>`.
    pub fn forbidden(resource: &str, group: &str, name: &str, why: &str) -> Self {
        let q = qualified_resource(resource, group);
        let msg = if name.is_empty() {
            format!("{q} is forbidden: {why}")
        } else {
            format!("{q} \"{name}\" is forbidden: {why}")
        };
        Self::new(403, Reason::Forbidden, msg).about(resource, group, name)
    }

    /// 404 for an object: `<resource>[.<group>] "<name>" not found`.
    pub fn not_found(resource: &str, group: &str, name: &str) -> Self {
        let msg = format!(
            "{} \"{name}\" not found",
            qualified_resource(resource, group)
        );
        Self::new(404, Reason::NotFound, msg).about(resource, group, name)
    }

    /// 404 for a path nothing serves.
    pub fn no_route() -> Self {
        Self::new(
            404,
            Reason::NotFound,
            "the server could not find the requested resource",
        )
    }

    pub fn already_exists(resource: &str, group: &str, name: &str) -> Self {
        let msg = format!(
            "{} \"{name}\" already exists",
            qualified_resource(resource, group)
        );
        Self::new(409, Reason::AlreadyExists, msg).about(resource, group, name)
    }

    /// 409 for a stale resourceVersion or a failed precondition.
    pub fn conflict(resource: &str, group: &str, name: &str, why: &str) -> Self {
        let msg = format!(
            "Operation cannot be fulfilled on {} \"{name}\": {why}",
            qualified_resource(resource, group)
        );
        Self::new(409, Reason::Conflict, msg).about(resource, group, name)
    }

    /// The usual optimistic-concurrency conflict.
    pub fn modified(resource: &str, group: &str, name: &str) -> Self {
        Self::conflict(
            resource,
            group,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// 422 listing every field error: `<Kind>[.<group>] "<name>" is invalid: <errors>`.
    pub fn invalid(kind: &str, group: &str, name: &str, errors: &ErrorList) -> Self {
        let q = qualified_resource(kind, group);
        let msg = format!("{q} \"{name}\" is invalid: {}", errors.aggregate_message());
        let mut e = Self::new(422, Reason::Invalid, msg).about(kind, group, name);
        e.causes = errors
            .iter()
            .map(|fe| Cause {
                reason: fe.kind.cause_reason().into(),
                message: fe.body(),
                field: fe.field.clone(),
            })
            .collect();
        e
    }

    pub fn method_not_allowed(verb: &str, resource: &str) -> Self {
        Self::new(
            405,
            Reason::MethodNotAllowed,
            format!(
                "the server does not allow this method on the requested resource ({verb} {resource})"
            ),
        )
    }

    pub fn not_acceptable(message: impl Into<String>) -> Self {
        Self::new(406, Reason::NotAcceptable, message)
    }

    pub fn unsupported_media_type(content_type: &str, accepted: &[&str]) -> Self {
        Self::new(
            415,
            Reason::UnsupportedMediaType,
            format!(
                "the body of the request was in an unknown format - accepted media types include: {}",
                accepted.join(", ")
            ),
        )
        .with_cause("UnsupportedMediaType", content_type, "")
    }

    /// 410 for a watch or read at a compacted revision.
    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(410, Reason::Expired, message)
    }

    /// 410 for a continue token older than the kept history (upstream's wording).
    pub fn continue_expired() -> Self {
        Self::expired(
            "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.",
        )
    }

    /// 504 for a resourceVersion newer than the store's (client-go special-cases it).
    pub fn too_large_resource_version(requested: i64, current: i64) -> Self {
        let mut e = Self::new(
            504,
            Reason::Timeout,
            format!("Too large resource version: {requested}, current: {current}"),
        );
        e.causes.push(Cause {
            reason: "ResourceVersionTooLarge".into(),
            message: "Too large resource version".into(),
            field: String::new(),
        });
        e.retry_after_seconds = Some(1);
        e
    }

    pub fn request_entity_too_large(message: impl Into<String>) -> Self {
        Self::new(413, Reason::RequestEntityTooLarge, message)
    }

    pub fn too_many_requests(message: impl Into<String>, retry_after: u32) -> Self {
        let mut e = Self::new(429, Reason::TooManyRequests, message);
        e.retry_after_seconds = Some(retry_after);
        e
    }

    pub fn internal(message: impl std::fmt::Display) -> Self {
        Self::new(
            500,
            Reason::InternalError,
            format!("Internal error occurred: {message}"),
        )
    }

    /// An error that is not a `Status` (upstream's `ErrorToAPIStatus` default): the code and
    /// the text, no reason.
    pub fn unknown(code: u16, message: impl Into<String>) -> Self {
        Self::new(code, Reason::Unknown, message)
    }

    pub fn service_unavailable(message: impl Into<String>) -> Self {
        Self::new(503, Reason::ServiceUnavailable, message)
    }

    pub fn timeout(message: impl Into<String>) -> Self {
        Self::new(504, Reason::Timeout, message)
    }

    /// Adds a cause (builder style).
    pub fn with_cause(mut self, reason: &str, message: &str, field: &str) -> Self {
        self.causes.push(Cause {
            reason: reason.into(),
            message: message.into(),
            field: field.into(),
        });
        self
    }

    /// The `kind: Status` object as kube-apiserver writes it on the wire: its fields in the
    /// Go struct's order (`kind`, `apiVersion`, `metadata`, `status`, `message`, `reason`,
    /// `details`, `code`), empty ones omitted, and a trailing newline (Go's JSON encoder).
    /// Clients and upstream's tests compare these bytes.
    pub fn to_status_bytes(&self) -> Vec<u8> {
        #[derive(serde::Serialize)]
        struct Empty {}
        #[derive(serde::Serialize)]
        struct WireCause<'a> {
            #[serde(skip_serializing_if = "str::is_empty")]
            reason: &'a str,
            #[serde(skip_serializing_if = "str::is_empty")]
            message: &'a str,
            #[serde(skip_serializing_if = "str::is_empty")]
            field: &'a str,
        }
        #[derive(serde::Serialize)]
        #[serde(rename_all = "camelCase")]
        struct WireDetails<'a> {
            #[serde(skip_serializing_if = "str::is_empty")]
            name: &'a str,
            #[serde(skip_serializing_if = "str::is_empty")]
            group: &'a str,
            #[serde(skip_serializing_if = "str::is_empty")]
            kind: &'a str,
            #[serde(skip_serializing_if = "Vec::is_empty")]
            causes: Vec<WireCause<'a>>,
            #[serde(skip_serializing_if = "Option::is_none")]
            retry_after_seconds: Option<u32>,
        }
        #[derive(serde::Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Wire<'a> {
            kind: &'a str,
            api_version: &'a str,
            metadata: Empty,
            status: &'a str,
            #[serde(skip_serializing_if = "str::is_empty")]
            message: &'a str,
            #[serde(skip_serializing_if = "str::is_empty")]
            reason: &'a str,
            #[serde(skip_serializing_if = "Option::is_none")]
            details: Option<WireDetails<'a>>,
            code: u16,
        }
        let details = WireDetails {
            name: self.name.as_deref().unwrap_or(""),
            group: self.group.as_deref().unwrap_or(""),
            kind: self.kind.as_deref().unwrap_or(""),
            causes: self
                .causes
                .iter()
                .map(|c| WireCause {
                    reason: &c.reason,
                    message: &c.message,
                    field: &c.field,
                })
                .collect(),
            retry_after_seconds: self.retry_after_seconds,
        };
        let has_details = !(details.name.is_empty()
            && details.group.is_empty()
            && details.kind.is_empty()
            && details.causes.is_empty()
            && details.retry_after_seconds.is_none());
        let wire = Wire {
            kind: "Status",
            api_version: "v1",
            metadata: Empty {},
            status: "Failure",
            message: &self.message,
            reason: self.reason.as_str(),
            details: has_details.then_some(details),
            code: self.code,
        };
        // Serializing borrowed strings and integers into a Vec cannot fail.
        let mut out = serde_json::to_vec(&wire).unwrap_or_default();
        out.push(b'\n');
        out
    }

    /// The `kind: Status` object.
    pub fn to_status(&self) -> Value {
        let mut details = serde_json::Map::new();
        if let Some(n) = self.name.as_ref().filter(|n| !n.is_empty()) {
            details.insert("name".into(), json!(n));
        }
        // Upstream omits an empty group (the core group).
        if let Some(g) = self.group.as_ref().filter(|g| !g.is_empty()) {
            details.insert("group".into(), json!(g));
        }
        if let Some(k) = self.kind.as_ref().filter(|k| !k.is_empty()) {
            details.insert("kind".into(), json!(k));
        }
        if !self.causes.is_empty() {
            let causes: Vec<Value> = self
                .causes
                .iter()
                .map(|c| {
                    let mut m = serde_json::Map::new();
                    m.insert("reason".into(), json!(c.reason));
                    m.insert("message".into(), json!(c.message));
                    if !c.field.is_empty() {
                        m.insert("field".into(), json!(c.field));
                    }
                    Value::Object(m)
                })
                .collect();
            details.insert("causes".into(), Value::Array(causes));
        }
        if let Some(r) = self.retry_after_seconds {
            details.insert("retryAfterSeconds".into(), json!(r));
        }
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason.as_str(),
            "code": self.code,
        });
        if self.reason == Reason::Unknown
            && let Some(m) = status.as_object_mut()
        {
            m.remove("reason");
        }
        if !details.is_empty() {
            status["details"] = Value::Object(details);
        }
        status
    }
}

/// The `Status` a successful delete returns when there is no object to return.
pub fn success_status(name: &str, group: &str, kind: &str, uid: Option<&str>) -> Value {
    let mut details = json!({"name": name, "group": group, "kind": kind});
    if let Some(u) = uid {
        details["uid"] = json!(u);
    }
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details})
}

#[cfg(test)]
mod tests {
    #[test]
    fn status_bytes_follow_upstreams_field_order_and_omit_the_core_group() {
        let e = super::ApiError::not_found("configmaps", "", "cm");
        let bytes = String::from_utf8(e.to_status_bytes()).unwrap();
        assert_eq!(
            bytes,
            "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"configmaps \\\"cm\\\" not found\",\"reason\":\"NotFound\",\"details\":{\"name\":\"cm\",\"kind\":\"configmaps\"},\"code\":404}\n"
        );
        let as_value: serde_json::Value = serde_json::from_str(&bytes).unwrap();
        assert_eq!(as_value, e.to_status());
    }

    use super::*;
    use crate::field::{ErrorList, FieldError};

    #[test]
    fn not_found_uses_the_group_qualified_resource() {
        let e = ApiError::not_found("deployments", "apps", "web");
        assert_eq!(e.message, "deployments.apps \"web\" not found");
        let s = e.to_status();
        assert_eq!(s["reason"], "NotFound");
        assert_eq!(s["code"], 404);
        assert_eq!(s["details"]["kind"], "deployments");
        assert_eq!(
            ApiError::not_found("configmaps", "", "c").message,
            "configmaps \"c\" not found"
        );
    }

    #[test]
    fn invalid_lists_every_field_error_as_a_cause() {
        let mut errs = ErrorList::new();
        errs.push(FieldError::invalid(
            "spec.replicas",
            serde_json::json!(-1),
            "must be greater than or equal to 0",
        ));
        errs.push(FieldError::required("spec.selector", ""));
        let e = ApiError::invalid("Deployment", "apps", "web", &errs);
        assert_eq!(
            e.message,
            "Deployment.apps \"web\" is invalid: [spec.replicas: Invalid value: -1: must be greater than or equal to 0, spec.selector: Required value]"
        );
        let s = e.to_status();
        assert_eq!(s["details"]["causes"][0]["reason"], "FieldValueInvalid");
        assert_eq!(s["details"]["causes"][1]["field"], "spec.selector");
        assert_eq!(s["code"], 422);
    }
}
