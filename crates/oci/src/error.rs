//! The distribution spec's errors: a closed set of codes, each with its HTTP status, sent as
//! `{"errors":[{"code","message","detail"}]}`. Every failure of the registry is one of these;
//! the HTTP layer only copies [`Error::status`] and [`Error::body`] onto the wire.

use serde_json::{Value, json};

/// An error code of the OCI distribution spec (plus `RANGE_INVALID`, `UNKNOWN` and
/// `UNAVAILABLE`, which the reference registry also sends).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    /// A blob is not in the repository.
    BlobUnknown,
    /// An upload can no longer proceed.
    BlobUploadInvalid,
    /// An upload was cancelled, finished or never started.
    BlobUploadUnknown,
    /// A digest is malformed, or content does not match it.
    DigestInvalid,
    /// A manifest references a blob the repository does not have.
    ManifestBlobUnknown,
    /// A manifest does not parse or fails validation.
    ManifestInvalid,
    /// No manifest by that tag or digest.
    ManifestUnknown,
    /// A repository name is malformed.
    NameInvalid,
    /// The repository does not exist.
    NameUnknown,
    /// A declared length does not match the content.
    SizeInvalid,
    /// A chunk does not continue the upload where it stands.
    RangeInvalid,
    /// Credentials are missing or invalid.
    Unauthorized,
    /// The caller may not do this.
    Denied,
    /// The operation or method is not supported.
    Unsupported,
    /// The request is throttled.
    TooManyRequests,
    /// The registry is not serving (e.g. draining).
    Unavailable,
    /// Anything else: an I/O failure of the store.
    Unknown,
}

impl ErrorCode {
    /// The code's wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::BlobUnknown => "BLOB_UNKNOWN",
            ErrorCode::BlobUploadInvalid => "BLOB_UPLOAD_INVALID",
            ErrorCode::BlobUploadUnknown => "BLOB_UPLOAD_UNKNOWN",
            ErrorCode::DigestInvalid => "DIGEST_INVALID",
            ErrorCode::ManifestBlobUnknown => "MANIFEST_BLOB_UNKNOWN",
            ErrorCode::ManifestInvalid => "MANIFEST_INVALID",
            ErrorCode::ManifestUnknown => "MANIFEST_UNKNOWN",
            ErrorCode::NameInvalid => "NAME_INVALID",
            ErrorCode::NameUnknown => "NAME_UNKNOWN",
            ErrorCode::SizeInvalid => "SIZE_INVALID",
            ErrorCode::RangeInvalid => "RANGE_INVALID",
            ErrorCode::Unauthorized => "UNAUTHORIZED",
            ErrorCode::Denied => "DENIED",
            ErrorCode::Unsupported => "UNSUPPORTED",
            ErrorCode::TooManyRequests => "TOOMANYREQUESTS",
            ErrorCode::Unavailable => "UNAVAILABLE",
            ErrorCode::Unknown => "UNKNOWN",
        }
    }

    /// The HTTP status the reference registry (distribution) sends with the code.
    pub fn status(self) -> u16 {
        match self {
            ErrorCode::BlobUnknown
            | ErrorCode::BlobUploadInvalid
            | ErrorCode::BlobUploadUnknown
            | ErrorCode::ManifestUnknown
            | ErrorCode::NameUnknown => 404,
            ErrorCode::DigestInvalid
            | ErrorCode::ManifestBlobUnknown
            | ErrorCode::ManifestInvalid
            | ErrorCode::NameInvalid
            | ErrorCode::SizeInvalid => 400,
            ErrorCode::RangeInvalid => 416,
            ErrorCode::Unauthorized => 401,
            ErrorCode::Denied => 403,
            ErrorCode::Unsupported => 405,
            ErrorCode::TooManyRequests => 429,
            ErrorCode::Unavailable => 503,
            ErrorCode::Unknown => 500,
        }
    }

    /// The code's standard message (the wording clients show).
    pub fn message(self) -> &'static str {
        match self {
            ErrorCode::BlobUnknown | ErrorCode::ManifestBlobUnknown => "blob unknown to registry",
            ErrorCode::BlobUploadInvalid => "blob upload invalid",
            ErrorCode::BlobUploadUnknown => "blob upload unknown to registry",
            ErrorCode::DigestInvalid => "provided digest did not match uploaded content",
            ErrorCode::ManifestInvalid => "manifest invalid",
            ErrorCode::ManifestUnknown => "manifest unknown",
            ErrorCode::NameInvalid => "invalid repository name",
            ErrorCode::NameUnknown => "repository name not known to registry",
            ErrorCode::SizeInvalid => "provided length did not match content length",
            ErrorCode::RangeInvalid => "invalid content range",
            ErrorCode::Unauthorized => "authentication required",
            ErrorCode::Denied => "requested access to the resource is denied",
            ErrorCode::Unsupported => "the operation is unsupported",
            ErrorCode::TooManyRequests => "too many requests",
            ErrorCode::Unavailable => "service unavailable",
            ErrorCode::Unknown => "unknown error",
        }
    }
}

/// A failed registry operation.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A request the spec says to refuse with `code`.
    #[error("{}: {detail}", code.message())]
    Api {
        code: ErrorCode,
        /// What exactly was wrong (sent as the error's `detail`).
        detail: String,
    },
    /// The store could not read or write its files.
    #[error("registry storage failed while {context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn new(code: ErrorCode, detail: impl Into<String>) -> Error {
        Error::Api {
            code,
            detail: detail.into(),
        }
    }

    /// An I/O failure while doing `context`.
    pub fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
        let context = context.into();
        move |source| Error::Io { context, source }
    }

    pub fn code(&self) -> ErrorCode {
        match self {
            Error::Api { code, .. } => *code,
            Error::Io { .. } => ErrorCode::Unknown,
        }
    }

    pub fn status(&self) -> u16 {
        self.code().status()
    }

    /// The JSON error document.
    pub fn body(&self) -> Value {
        let detail = match self {
            Error::Api { detail, .. } => detail.clone(),
            Error::Io { .. } => self.to_string(),
        };
        let mut e = json!({"code": self.code().as_str(), "message": self.code().message()});
        if !detail.is_empty() {
            e["detail"] = Value::String(detail);
        }
        json!({ "errors": [e] })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_carries_its_code_status_and_detail() {
        let e = Error::new(ErrorCode::BlobUnknown, "sha256:abc");
        assert_eq!(e.status(), 404);
        assert_eq!(
            e.body(),
            json!({"errors": [{"code": "BLOB_UNKNOWN", "message": "blob unknown to registry", "detail": "sha256:abc"}]})
        );
        assert_eq!(Error::new(ErrorCode::RangeInvalid, "").status(), 416);
        assert_eq!(Error::new(ErrorCode::ManifestBlobUnknown, "").status(), 400);
    }

    #[test]
    fn an_io_failure_is_unknown_with_a_500() {
        let e = Error::io("writing a blob")(std::io::Error::other("disk full"));
        assert_eq!(e.status(), 500);
        assert_eq!(e.body()["errors"][0]["code"], "UNKNOWN");
        assert!(e.to_string().contains("disk full"), "{e}");
    }
}
