//! Reading the `Status` of a refused request.

use serde_json::Value;

/// The API error of a failed client call (panics on success or on another error).
pub fn api_error<T: std::fmt::Debug>(r: Result<T, kube::Error>) -> kube::core::Status {
    match r {
        Err(kube::Error::Api(s)) => *s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// The `field` of every cause of a `Status` body, in order.
pub fn cause_fields(status: &Value) -> Vec<&str> {
    status["details"]["causes"]
        .as_array()
        .map(|cs| cs.iter().filter_map(|c| c["field"].as_str()).collect())
        .unwrap_or_default()
}
