//! The codec's error type: every way a protobuf body or a JSON object can fail to convert.
//!
//! Paths are JSON-style (`spec.template.spec.containers[0].ports[1]`) so that the API server can
//! put them into a 400 `BadRequest` Status message as they are.

/// A protobuf body that cannot be decoded, or a JSON object that cannot be encoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PbError {
    /// The body does not start with the four bytes `k8s\0`.
    #[error("the body does not start with the Kubernetes protobuf prefix \"k8s\\x00\"")]
    NoMagic,
    /// The bytes are not valid protobuf (truncated, bad varint, wrong wire type...).
    #[error("malformed protobuf at {path}: {reason}")]
    Malformed { path: String, reason: String },
    /// A field tag that the message does not have.
    #[error("unknown field number {tag} in {message} at {path}")]
    UnknownField {
        message: &'static str,
        tag: u32,
        path: String,
    },
    /// No protobuf message is known for this apiVersion and kind.
    #[error("no protobuf message is known for apiVersion {api_version:?}, kind {kind:?}")]
    UnknownKind { api_version: String, kind: String },
    /// Messages nested deeper than [`MAX_DEPTH`](crate::MAX_DEPTH).
    #[error("the object nests deeper than {0} levels")]
    TooDeep(usize),
    /// A `runtime.Unknown` envelope with a content encoding or type this codec does not read.
    #[error("unsupported {what} {value:?} in the protobuf envelope")]
    Unsupported { what: &'static str, value: String },
    /// A JSON value that does not fit the field's protobuf type (encoding), or embedded JSON that
    /// does not parse (decoding).
    #[error("invalid value at {path}: {reason}")]
    InvalidValue { path: String, reason: String },
    /// A JSON property that the message does not have (encoding).
    #[error("unknown field {path} in {message}")]
    UnknownJsonField { message: &'static str, path: String },
}

pub(crate) type Result<T, E = PbError> = std::result::Result<T, E>;

pub(crate) fn malformed(path: &str, reason: impl Into<String>) -> PbError {
    PbError::Malformed {
        path: display(path),
        reason: reason.into(),
    }
}

pub(crate) fn invalid(path: &str, reason: impl Into<String>) -> PbError {
    PbError::InvalidValue {
        path: display(path),
        reason: reason.into(),
    }
}

/// The root has an empty path; show it as `<root>`.
pub(crate) fn display(path: &str) -> String {
    if path.is_empty() {
        "<root>".to_string()
    } else {
        path.to_string()
    }
}

/// `parent.child`, or `child` at the root.
pub(crate) fn join(parent: &str, child: &str) -> String {
    if parent.is_empty() {
        child.to_string()
    } else {
        format!("{parent}.{child}")
    }
}
