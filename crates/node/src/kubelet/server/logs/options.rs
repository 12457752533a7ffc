//! The query of `/containerLogs`, read as the kubelet reads it: a `v1.PodLogOptions` decoded
//! from the query (booleans leniently, integers strictly, `sinceTime` as RFC 3339), the legacy
//! `tail=N` / `tail=all` spelling, then upstream's `ValidatePodLogOptions`.
//!
//! The kubelet answers a query it cannot decode with 400 and the body
//! `{"message": "Unable to decode query."}`, and an invalid one with 422 and
//! `{"message": "Invalid request."}` (literally those texts, though not JSON responses).

use jiff::{SignedDuration, Timestamp};

/// Why a log query was refused; `status` and `body` are the kubelet's answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OptionsError {
    /// A parameter that does not decode (a non-integer `tailLines`, a bad `sinceTime`).
    #[error("unable to decode the log query: {0}")]
    Decode(String),
    /// Decoded, but not valid (negative `tailLines`, both `sinceSeconds` and `sinceTime`...).
    #[error("invalid log options: {0}")]
    Invalid(String),
}

impl OptionsError {
    /// The HTTP status the kubelet answers with.
    pub fn status(&self) -> u16 {
        match self {
            OptionsError::Decode(_) => 400,
            OptionsError::Invalid(_) => 422,
        }
    }

    /// The body the kubelet answers with.
    pub fn body(&self) -> &'static str {
        match self {
            OptionsError::Decode(_) => r#"{"message": "Unable to decode query."}"#,
            OptionsError::Invalid(_) => r#"{"message": "Invalid request."}"#,
        }
    }
}

/// `v1.PodLogOptions` as the kubelet uses them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogOptions {
    pub follow: bool,
    pub previous: bool,
    pub timestamps: bool,
    pub tail_lines: Option<i64>,
    pub limit_bytes: Option<i64>,
    pub since_seconds: Option<i64>,
    pub since_time: Option<Timestamp>,
}

/// A query boolean as apimachinery converts one: `0` and any-case `false` are false, any other
/// value (even empty) is true. The first value of a repeated parameter counts.
pub fn lenient_bool(value: &str) -> bool {
    !(value == "0" || value.eq_ignore_ascii_case("false"))
}

impl LogOptions {
    /// Decodes and validates a `/containerLogs` query.
    pub fn from_query(query: &str) -> Result<LogOptions, OptionsError> {
        let pairs: Vec<(String, String)> = form_urlencoded::parse(query.as_bytes())
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
        let first = |key: &str| {
            pairs
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.as_str())
        };
        let int = |key: &str, value: Option<&str>| -> Result<Option<i64>, OptionsError> {
            value
                .map(|v| {
                    v.parse::<i64>()
                        .map_err(|e| OptionsError::Decode(format!("{key}={v:?}: {e}")))
                })
                .transpose()
        };
        // The legacy `tail` parameter wins over `tailLines`; `all` means no limit.
        let tail = match first("tail").filter(|t| !t.is_empty()) {
            Some("all") => None,
            Some(t) => int("tail", Some(t))?,
            None => int("tailLines", first("tailLines"))?,
        };
        let since_time = first("sinceTime")
            .map(|v| {
                v.parse::<Timestamp>()
                    .map_err(|e| OptionsError::Decode(format!("sinceTime={v:?}: {e}")))
            })
            .transpose()?;
        let opts = LogOptions {
            follow: first("follow").is_some_and(lenient_bool),
            previous: first("previous").is_some_and(lenient_bool),
            timestamps: first("timestamps").is_some_and(lenient_bool),
            tail_lines: tail,
            limit_bytes: int("limitBytes", first("limitBytes"))?,
            since_seconds: int("sinceSeconds", first("sinceSeconds"))?,
            since_time,
        };
        opts.validate()?;
        Ok(opts)
    }

    /// Upstream's `ValidatePodLogOptions`, every error collected.
    pub fn validate(&self) -> Result<(), OptionsError> {
        let mut errors = Vec::new();
        if self.tail_lines.is_some_and(|t| t < 0) {
            errors.push("tailLines: Invalid value: must be greater than or equal to 0");
        }
        if self.limit_bytes.is_some_and(|b| b < 1) {
            errors.push("limitBytes: Invalid value: must be greater than 0");
        }
        match (self.since_seconds, self.since_time) {
            (Some(_), Some(_)) => {
                errors.push("sinceSeconds: Forbidden: at most one of `sinceTime` or `sinceSeconds` may be specified");
            }
            (Some(s), None) if s < 1 => {
                errors.push("sinceSeconds: Invalid value: must be greater than 0");
            }
            _ => {}
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(OptionsError::Invalid(errors.join(", ")))
        }
    }

    /// The earliest timestamp a line may have to be shown (`sinceSeconds` before `now`, or
    /// `sinceTime`, whichever is later), as upstream's `NewLogOptions`.
    pub fn since(&self, now: Timestamp) -> Option<Timestamp> {
        let from_seconds = self
            .since_seconds
            .and_then(|s| now.checked_sub(SignedDuration::from_secs(s)).ok());
        match (from_seconds, self.since_time) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn booleans_are_lenient_as_apimachinery_converts_them() {
        let o = LogOptions::from_query("follow=&previous=True&timestamps=0").unwrap();
        assert!(o.follow && o.previous && !o.timestamps);
        let o = LogOptions::from_query("follow=FALSE&timestamps=yes").unwrap();
        assert!(!o.follow && o.timestamps);
        assert_eq!(LogOptions::from_query("").unwrap(), LogOptions::default());
    }

    #[test]
    fn the_legacy_tail_parameter_wins_and_all_means_everything() {
        assert_eq!(
            LogOptions::from_query("tail=3&tailLines=9")
                .unwrap()
                .tail_lines,
            Some(3)
        );
        assert_eq!(
            LogOptions::from_query("tail=all&tailLines=9")
                .unwrap()
                .tail_lines,
            None
        );
        assert_eq!(
            LogOptions::from_query("tailLines=9").unwrap().tail_lines,
            Some(9)
        );
    }

    #[test]
    fn undecodable_values_are_400_and_invalid_ones_422() {
        let e = LogOptions::from_query("tailLines=x").unwrap_err();
        assert_eq!(
            (e.status(), e.body()),
            (400, r#"{"message": "Unable to decode query."}"#)
        );
        let e = LogOptions::from_query("sinceTime=yesterday").unwrap_err();
        assert_eq!(e.status(), 400);
        for q in [
            "tailLines=-1",
            "limitBytes=0",
            "sinceSeconds=0",
            "sinceSeconds=5&sinceTime=2024-01-01T00:00:00Z",
        ] {
            let e = LogOptions::from_query(q).unwrap_err();
            assert_eq!(
                (e.status(), e.body()),
                (422, r#"{"message": "Invalid request."}"#),
                "{q}"
            );
        }
        let e = LogOptions::from_query("tailLines=-1&limitBytes=0").unwrap_err();
        assert!(e.to_string().contains("tailLines") && e.to_string().contains("limitBytes"));
    }

    #[test]
    fn since_is_the_later_of_seconds_and_time() {
        let now: Timestamp = "2024-05-01T12:00:00Z".parse().unwrap();
        let o = LogOptions::from_query("sinceSeconds=60").unwrap();
        assert_eq!(o.since(now), Some("2024-05-01T11:59:00Z".parse().unwrap()));
        let o = LogOptions::from_query("sinceTime=2024-05-01T10:00:00.5Z").unwrap();
        assert_eq!(
            o.since(now),
            Some("2024-05-01T10:00:00.5Z".parse().unwrap())
        );
        assert_eq!(LogOptions::default().since(now), None);
    }
}
