//! The options of the pod subresources that reach a kubelet, decoded from the query as
//! kube-apiserver decodes them (its parameter codec into `v1.PodExecOptions` and friends),
//! the container they address, and the kubelet query they become.
//!
//! - Booleans are lenient: absent is false; `0` or any-case `false` is false; anything else,
//!   even an empty value, is true.
//! - `PodExecOptions` and `PodAttachOptions` are defaulted *after* decoding, and their
//!   defaulter sets `stdout` and `stderr` to true unconditionally: whatever the client sends,
//!   the kubelet is asked for both (it drops stderr for a tty).
//! - The container defaults to the only one; with several, a 400 lists every container
//!   (init, regular and ephemeral, in that order); an unknown one is a 400 too.

use apimachinery::field::{ErrorList, FieldError};
use apimachinery::status::ApiError;
use serde_json::{Value, json};

use crate::server::Query;

/// A query boolean as apimachinery's `Convert_Slice_string_To_bool` reads it.
pub fn lenient_bool(query: &Query, name: &str) -> bool {
    query
        .get(name)
        .is_some_and(|v| !(v == "0" || v.eq_ignore_ascii_case("false")))
}

/// exec and attach.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StreamRequest {
    pub container: Option<String>,
    pub command: Vec<String>,
    pub stdin: bool,
    pub stdout: bool,
    pub stderr: bool,
    pub tty: bool,
}

impl StreamRequest {
    pub fn from_query(query: &Query) -> StreamRequest {
        StreamRequest {
            container: query
                .get("container")
                .filter(|c| !c.is_empty())
                .map(String::from),
            command: query
                .0
                .iter()
                .filter(|(k, _)| k == "command")
                .map(|(_, v)| v.clone())
                .collect(),
            stdin: lenient_bool(query, "stdin"),
            // The defaulter's doing, after decoding.
            stdout: true,
            stderr: true,
            tty: lenient_bool(query, "tty"),
        }
    }

    /// The kubelet's query: the streams that are on as `=1`, then `command` per argument
    /// (Go's `url.Values.Encode`: keys sorted, values in order).
    pub fn kubelet_query(&self, exec: bool) -> String {
        let mut s = form_urlencoded::Serializer::new(String::new());
        if exec {
            for c in &self.command {
                s.append_pair("command", c);
            }
        }
        for (name, on) in [
            ("stderr", self.stderr),
            ("stdin", self.stdin),
            ("stdout", self.stdout),
            ("tty", self.tty),
        ] {
            if on {
                s.append_pair(name, "1");
            }
        }
        s.finish()
    }

    /// The streams as the remote-command protocols see them (no stderr with a tty).
    pub fn streams(&self) -> streaming::remotecommand::StreamOptions {
        streaming::remotecommand::StreamOptions {
            stdin: self.stdin,
            stdout: self.stdout,
            stderr: self.stderr && !self.tty,
            tty: self.tty,
        }
    }
}

/// The ports of a port-forward (`ports`, repeated or comma-separated), for the kubelet's
/// `port` parameter.
pub fn forward_ports(query: &Query) -> Result<Vec<u16>, ApiError> {
    let mut ports = Vec::new();
    for (_, v) in query.0.iter().filter(|(k, _)| k == "ports") {
        for p in v.split(',').filter(|p| !p.is_empty()) {
            let port: u16 = p
                .trim()
                .parse()
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(|| ApiError::bad_request(format!("invalid port {p:?}")))?;
            ports.push(port);
        }
    }
    Ok(ports)
}

/// `v1.PodLogOptions`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LogRequest {
    pub container: Option<String>,
    pub follow: bool,
    pub previous: bool,
    pub timestamps: bool,
    pub since_seconds: Option<i64>,
    /// RFC 3339, seconds precision (what the apiserver forwards).
    pub since_time: Option<String>,
    pub tail_lines: Option<i64>,
    pub limit_bytes: Option<i64>,
    pub insecure_skip_tls_verify_backend: bool,
}

impl LogRequest {
    /// Decodes and validates (`ValidatePodLogOptions`: 422 `PodLogOptions` with every field
    /// error). An undecodable number or time is a 400, as the parameter codec answers.
    pub fn from_query(query: &Query, pod: &str) -> Result<LogRequest, ApiError> {
        let int = |name: &str| -> Result<Option<i64>, ApiError> {
            query
                .get(name)
                .map(|v| {
                    v.parse::<i64>().map_err(|_| {
                        ApiError::bad_request(format!(
                            "strconv.ParseInt: parsing {v:?}: invalid syntax"
                        ))
                    })
                })
                .transpose()
        };
        let since_time = match query.get("sinceTime") {
            Some(v) => {
                let t = apimachinery::time::parse_rfc3339(v).ok_or_else(|| {
                    ApiError::bad_request(format!(
                        "parsing time {v:?} as \"2006-01-02T15:04:05Z07:00\": cannot parse"
                    ))
                })?;
                Some(apimachinery::time::format_time(t))
            }
            None => None,
        };
        let opts = LogRequest {
            container: query
                .get("container")
                .filter(|c| !c.is_empty())
                .map(String::from),
            follow: lenient_bool(query, "follow"),
            previous: lenient_bool(query, "previous"),
            timestamps: lenient_bool(query, "timestamps"),
            since_seconds: int("sinceSeconds")?,
            since_time,
            tail_lines: int("tailLines")?,
            limit_bytes: int("limitBytes")?,
            insecure_skip_tls_verify_backend: lenient_bool(query, "insecureSkipTLSVerifyBackend"),
        };
        let mut errs = ErrorList::new();
        if let Some(t) = opts.tail_lines
            && t < 0
        {
            errs.push(FieldError::invalid(
                "tailLines",
                json!(t),
                "must be greater than or equal to 0",
            ));
        }
        if let Some(b) = opts.limit_bytes
            && b < 1
        {
            errs.push(FieldError::invalid(
                "limitBytes",
                json!(b),
                "must be greater than 0",
            ));
        }
        match (opts.since_seconds, &opts.since_time) {
            (Some(_), Some(_)) => errs.push(FieldError::forbidden(
                "",
                "at most one of `sinceTime` or `sinceSeconds` may be specified",
            )),
            (Some(s), None) if s < 1 => errs.push(FieldError::invalid(
                "sinceSeconds",
                json!(s),
                "must be greater than 0",
            )),
            _ => {}
        }
        if !errs.is_empty() {
            return Err(ApiError::invalid("PodLogOptions", "", pod, &errs));
        }
        Ok(opts)
    }

    /// The kubelet's query (`LogLocation`): only what is set, in Go's key order.
    pub fn kubelet_query(&self) -> String {
        let mut s = form_urlencoded::Serializer::new(String::new());
        if self.follow {
            s.append_pair("follow", "true");
        }
        if let Some(b) = self.limit_bytes {
            s.append_pair("limitBytes", &b.to_string());
        }
        if self.previous {
            s.append_pair("previous", "true");
        }
        if let Some(v) = self.since_seconds {
            s.append_pair("sinceSeconds", &v.to_string());
        }
        if let Some(t) = &self.since_time {
            s.append_pair("sinceTime", t);
        }
        if let Some(t) = self.tail_lines {
            s.append_pair("tailLines", &t.to_string());
        }
        if self.timestamps {
            s.append_pair("timestamps", "true");
        }
        s.finish()
    }
}

/// Every container of a pod: init, regular, ephemeral (upstream's `VisitContainers` order).
fn container_names(pod: &Value) -> Vec<String> {
    ["initContainers", "containers", "ephemeralContainers"]
        .iter()
        .flat_map(|k| {
            pod.pointer(&format!("/spec/{k}"))
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
        })
        .filter_map(|c| c.get("name").and_then(Value::as_str).map(String::from))
        .collect()
}

/// The container a request addresses (upstream's `validateContainer`).
pub fn container(pod: &Value, name: &str, requested: Option<&str>) -> Result<String, ApiError> {
    match requested {
        Some(c) => {
            if container_names(pod).iter().any(|n| n == c) {
                Ok(c.to_string())
            } else {
                Err(ApiError::bad_request(format!(
                    "container {c} is not valid for pod {name}"
                )))
            }
        }
        None => {
            let regular = pod
                .pointer("/spec/containers")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            match regular.as_slice() {
                [only] => Ok(only
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string()),
                [] => Err(ApiError::bad_request(format!(
                    "a container name must be specified for pod {name}"
                ))),
                _ => Err(ApiError::bad_request(format!(
                    "a container name must be specified for pod {name}, choose one of: [{}]",
                    container_names(pod).join(" ")
                ))),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Query {
        Query::parse(Some(s))
    }

    #[test]
    fn booleans_are_lenient() {
        let query = q("a=&b=False&c=0&d=yes&e=TRUE");
        assert!(lenient_bool(&query, "a"));
        assert!(!lenient_bool(&query, "b"));
        assert!(!lenient_bool(&query, "c"));
        assert!(lenient_bool(&query, "d"));
        assert!(lenient_bool(&query, "e"));
        assert!(!lenient_bool(&query, "absent"));
    }

    #[test]
    fn exec_options_default_stdout_and_stderr_on_and_become_the_kubelet_query() {
        let o = StreamRequest::from_query(&q(
            "command=sh&command=-c&command=echo%20a%26b&container=c&stdin=True&stdout=false&tty=true",
        ));
        assert_eq!(o.command, ["sh", "-c", "echo a&b"]);
        assert_eq!(o.container.as_deref(), Some("c"));
        assert!(o.stdin && o.stdout && o.stderr && o.tty);
        assert_eq!(
            o.kubelet_query(true),
            "command=sh&command=-c&command=echo+a%26b&stderr=1&stdin=1&stdout=1&tty=1"
        );
        assert_eq!(o.kubelet_query(false), "stderr=1&stdin=1&stdout=1&tty=1");
        // The tty takes stderr: the protocol has no stderr stream.
        let s = o.streams();
        assert!(s.tty && !s.stderr && s.stdout && s.stdin);
    }

    #[test]
    fn ports_are_repeated_or_comma_separated() {
        assert_eq!(
            forward_ports(&q("ports=80,443&ports=8080")).unwrap(),
            [80, 443, 8080]
        );
        assert!(forward_ports(&q("")).unwrap().is_empty());
        assert_eq!(forward_ports(&q("ports=x")).unwrap_err().code, 400);
        assert_eq!(forward_ports(&q("ports=0")).unwrap_err().code, 400);
    }

    #[test]
    fn log_options_decode_validate_and_forward_what_is_set() {
        let o = LogRequest::from_query(
            &q("container=c&follow=&previous=1&timestamps=true&sinceTime=2024-01-02T03:04:05.678Z&tailLines=10&limitBytes=500"),
            "p",
        )
        .unwrap();
        assert_eq!(
            o.kubelet_query(),
            "follow=true&limitBytes=500&previous=true&sinceTime=2024-01-02T03%3A04%3A05Z&tailLines=10&timestamps=true"
        );
        assert_eq!(
            LogRequest::from_query(&q(""), "p").unwrap().kubelet_query(),
            ""
        );

        let e = LogRequest::from_query(&q("tailLines=-1&limitBytes=0&sinceSeconds=0"), "p")
            .unwrap_err();
        assert_eq!(e.code, 422);
        assert_eq!(e.causes.len(), 3, "{:?}", e.causes);
        assert!(
            e.message.starts_with("PodLogOptions \"p\" is invalid"),
            "{}",
            e.message
        );
        let e = LogRequest::from_query(&q("sinceSeconds=5&sinceTime=2024-01-01T00:00:00Z"), "p")
            .unwrap_err();
        assert_eq!(e.code, 422);
        assert_eq!(
            LogRequest::from_query(&q("tailLines=ten"), "p")
                .unwrap_err()
                .code,
            400
        );
        assert_eq!(
            LogRequest::from_query(&q("sinceTime=now"), "p")
                .unwrap_err()
                .code,
            400
        );
    }

    #[test]
    fn containers_default_to_the_only_one_and_are_checked() {
        let one = json!({"spec": {"containers": [{"name": "app"}]}});
        assert_eq!(container(&one, "p", None).unwrap(), "app");
        assert_eq!(container(&one, "p", Some("app")).unwrap(), "app");
        let e = container(&one, "p", Some("nope")).unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (400, "container nope is not valid for pod p")
        );

        let many = json!({"spec": {
            "initContainers": [{"name": "init"}],
            "containers": [{"name": "a"}, {"name": "b"}],
            "ephemeralContainers": [{"name": "debug"}],
        }});
        let e = container(&many, "p", None).unwrap_err();
        assert_eq!(
            e.message,
            "a container name must be specified for pod p, choose one of: [init a b debug]"
        );
        assert_eq!(container(&many, "p", Some("init")).unwrap(), "init");
        assert_eq!(container(&many, "p", Some("debug")).unwrap(), "debug");
    }
}
