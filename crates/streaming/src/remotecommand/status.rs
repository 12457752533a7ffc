//! How a command's end travels on the error stream, and how a client reads it back.
//!
//! v4 and v5 carry a `metav1.Status` as Go's `encoding/json` writes it (no `kind` or
//! `apiVersion`, an empty `metadata`, empty fields omitted):
//!
//! - success: `{"metadata":{},"status":"Success"}`
//! - exit code: `reason: NonZeroExitCode` with the cause `{"reason":"ExitCode","message":"3"}`
//!   (a `StatusCause`'s type serialises as `reason`; client-go and the Python client read it)
//! - anything else: an `InternalError` Status (`Internal error occurred: ...`).
//!
//! v1–v3 carry plain text, and only on failure.

use serde::{Deserialize, Serialize};

use super::Version;

/// How a remote command ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Exit status 0.
    Success,
    /// A non-zero exit status; `message` describes it (the kubelet writes the runtime's error).
    ExitCode { code: i32, message: String },
    /// The command could not run, or the stream failed (an `InternalError`).
    Failure(String),
    /// A `Status` passed on as it is (the translator relays a backend's refusal this way).
    Status(Box<Status>),
}

/// The subset of `metav1.Status` remote commands use, in Go's field order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Status {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(
        default,
        rename = "apiVersion",
        skip_serializing_if = "Option::is_none"
    )]
    pub api_version: Option<String>,
    #[serde(default)]
    pub metadata: serde_json::Map<String, serde_json::Value>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub status: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<StatusDetails>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub code: i32,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusDetails {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub causes: Vec<StatusCause>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusCause {
    /// The cause's type (`ExitCode`); Go's JSON name for it is `reason`.
    #[serde(default, rename = "reason", skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

fn is_zero(v: &i32) -> bool {
    *v == 0
}

pub const NON_ZERO_EXIT_CODE_REASON: &str = "NonZeroExitCode";
pub const EXIT_CODE_CAUSE: &str = "ExitCode";

impl Outcome {
    /// The `Status` the kubelet writes for this outcome.
    pub fn to_status(&self) -> Status {
        match self {
            Outcome::Status(status) => (**status).clone(),
            Outcome::Success => Status {
                status: "Success".into(),
                ..Status::default()
            },
            Outcome::ExitCode { code, message } => Status {
                status: "Failure".into(),
                message: format!("command terminated with non-zero exit code: {message}"),
                reason: NON_ZERO_EXIT_CODE_REASON.into(),
                details: Some(StatusDetails {
                    causes: vec![StatusCause {
                        kind: EXIT_CODE_CAUSE.into(),
                        message: code.to_string(),
                    }],
                }),
                ..Status::default()
            },
            Outcome::Failure(err) => Status {
                status: "Failure".into(),
                message: format!("Internal error occurred: {err}"),
                reason: "InternalError".into(),
                details: Some(StatusDetails {
                    causes: vec![StatusCause {
                        kind: String::new(),
                        message: err.clone(),
                    }],
                }),
                code: 500,
                ..Status::default()
            },
        }
    }

    /// What goes on the error stream for `version` (`None`: nothing, a v1–v3 success).
    pub fn encode(&self, version: Version) -> Option<Vec<u8>> {
        let status = self.to_status();
        if version.status_json() {
            return Some(serde_json::to_vec(&status).unwrap_or_default());
        }
        match self {
            Outcome::Success => None,
            _ => Some(status.message.into_bytes()),
        }
    }

    /// Reads what a client received on the error stream, as client-go's decoders do.
    pub fn decode(message: &[u8], version: Version) -> Result<Outcome, String> {
        if message.is_empty() {
            return Ok(Outcome::Success);
        }
        if !version.status_json() {
            return Ok(Outcome::Failure(format!(
                "error executing remote command: {}",
                String::from_utf8_lossy(message)
            )));
        }
        let status: Status = serde_json::from_slice(message).map_err(|e| {
            format!(
                "error stream protocol error: {e} in {:?}",
                String::from_utf8_lossy(message)
            )
        })?;
        match status.status.as_str() {
            "Success" => Ok(Outcome::Success),
            "Failure" if status.reason == NON_ZERO_EXIT_CODE_REASON => {
                let details = status
                    .details
                    .ok_or("error stream protocol error: details must be set")?;
                let cause = details
                    .causes
                    .iter()
                    .find(|c| c.kind == EXIT_CODE_CAUSE)
                    .ok_or("error stream protocol error: no ExitCode cause given")?;
                let code: u8 = cause.message.parse().map_err(|_| {
                    format!(
                        "error stream protocol error: invalid exit code value {:?}",
                        cause.message
                    )
                })?;
                Ok(Outcome::ExitCode {
                    code: i32::from(code),
                    message: format!("command terminated with exit code {code}"),
                })
            }
            "Failure" => Ok(Outcome::Failure(status.message)),
            _ => Err("error stream protocol error: unknown error".into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_are_byte_for_byte_what_go_writes() {
        let json = |o: Outcome| String::from_utf8(o.encode(Version::V4).unwrap()).unwrap();
        assert_eq!(
            json(Outcome::Success),
            r#"{"metadata":{},"status":"Success"}"#
        );
        assert_eq!(
            json(Outcome::ExitCode {
                code: 3,
                message: "command terminated with exit code 3".into()
            }),
            concat!(
                r#"{"metadata":{},"status":"Failure","message":"command terminated with non-zero exit code: "#,
                r#"command terminated with exit code 3","reason":"NonZeroExitCode","#,
                r#""details":{"causes":[{"reason":"ExitCode","message":"3"}]}}"#
            )
        );
        assert_eq!(
            json(Outcome::Failure("no such container".into())),
            concat!(
                r#"{"metadata":{},"status":"Failure","message":"Internal error occurred: no such container","#,
                r#""reason":"InternalError","details":{"causes":[{"message":"no such container"}]},"code":500}"#
            )
        );
    }

    #[test]
    fn old_versions_carry_text_and_nothing_on_success() {
        assert_eq!(Outcome::Success.encode(Version::V3), None);
        assert_eq!(
            Outcome::Failure("boom".into()).encode(Version::V2).unwrap(),
            b"Internal error occurred: boom"
        );
        assert_eq!(
            Outcome::decode(b"boom", Version::V2).unwrap(),
            Outcome::Failure("error executing remote command: boom".into())
        );
    }

    #[test]
    fn clients_read_exit_codes_as_client_go_does() {
        let exit = Outcome::ExitCode {
            code: 42,
            message: String::new(),
        };
        let wire = exit.encode(Version::V5).unwrap();
        assert_eq!(
            Outcome::decode(&wire, Version::V5).unwrap(),
            Outcome::ExitCode {
                code: 42,
                message: "command terminated with exit code 42".into()
            }
        );
        assert_eq!(Outcome::decode(b"", Version::V4).unwrap(), Outcome::Success);
        let no_details = br#"{"status":"Failure","reason":"NonZeroExitCode"}"#;
        assert_eq!(
            Outcome::decode(no_details, Version::V4).unwrap_err(),
            "error stream protocol error: details must be set"
        );
        let big = br#"{"status":"Failure","reason":"NonZeroExitCode","details":{"causes":[{"reason":"ExitCode","message":"300"}]}}"#;
        assert!(Outcome::decode(big, Version::V4).is_err());
        assert!(Outcome::decode(b"{", Version::V4).is_err());
    }
}
