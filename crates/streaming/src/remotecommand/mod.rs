//! The remote-command protocols of exec and attach, both ends, over SPDY and WebSocket.
//!
//! | protocol | transport | streams / channels | error stream |
//! |---|---|---|---|
//! | `channel.k8s.io` (v1) | SPDY, WS binary | error, stdin, stdout, stderr | text |
//! | `v2.channel.k8s.io` | SPDY | same | text |
//! | `v3.channel.k8s.io` | SPDY | + resize (tty only) | text |
//! | `v4.channel.k8s.io` | SPDY, WS binary | same | `Status` JSON |
//! | `v5.channel.k8s.io` | SPDY (as v4), WS binary + CLOSE | same | `Status` JSON |
//! | `base64.channel.k8s.io`, `v4.base64.channel.k8s.io` | WS text | channels 0–4 | as v1 / v4 |
//!
//! Over SPDY the client opens one stream per kind (header `streamType`) in the order error,
//! stdin, stdout, stderr, resize; over WebSocket the channels are 0 stdin, 1 stdout, 2 stderr,
//! 3 error, 4 resize. `server` is the kubelet's end, `client` kubectl's; `status` the exit
//! status encoding both share.

pub mod client;
pub mod server;
pub mod status;

use serde::{Deserialize, Serialize};

pub use client::{ClientError, ClientSession};
pub use server::{AcceptError, ServerSession};
pub use status::Outcome;

/// `channel.k8s.io`, the original (v1) protocol.
pub const V1: &str = "channel.k8s.io";
pub const V2: &str = "v2.channel.k8s.io";
pub const V3: &str = "v3.channel.k8s.io";
pub const V4: &str = "v4.channel.k8s.io";
pub const V5: &str = "v5.channel.k8s.io";
pub const BASE64_V1: &str = "base64.channel.k8s.io";
pub const BASE64_V4: &str = "v4.base64.channel.k8s.io";

/// What the kubelet accepts over SPDY, newest first (`SupportedStreamingProtocols`).
pub const SPDY_PROTOCOLS: [&str; 5] = [V5, V4, V3, V2, V1];
/// What the API server offers a kubelet when it translates a v5 WebSocket (v4 to v1).
pub const TRANSLATOR_BACKEND_PROTOCOLS: [&str; 4] = [V4, V3, V2, V1];
/// What the kubelet accepts over WebSocket (`""` is a client that names none).
pub const KUBELET_WEBSOCKET_PROTOCOLS: [&str; 5] = [V4, BASE64_V4, V1, BASE64_V1, ""];
/// What the API server accepts over WebSocket when it translates (v5 only).
pub const TRANSLATOR_WEBSOCKET_PROTOCOLS: [&str; 1] = [V5];

/// SPDY `streamType` values.
pub const STREAM_TYPE: &str = "streamType";
pub const STREAM_ERROR: &str = "error";
pub const STREAM_STDIN: &str = "stdin";
pub const STREAM_STDOUT: &str = "stdout";
pub const STREAM_STDERR: &str = "stderr";
pub const STREAM_RESIZE: &str = "resize";

/// WebSocket channel numbers.
pub const CHANNEL_STDIN: u8 = 0;
pub const CHANNEL_STDOUT: u8 = 1;
pub const CHANNEL_STDERR: u8 = 2;
pub const CHANNEL_ERROR: u8 = 3;
pub const CHANNEL_RESIZE: u8 = 4;

/// The protocol generation, which decides the streams and the error format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Version {
    V1,
    V2,
    V3,
    V4,
    V5,
}

impl Version {
    /// The version a negotiated protocol name stands for (`""` is v1, as the kubelet
    /// falls back to it).
    pub fn of(protocol: &str) -> Option<Version> {
        Some(match protocol {
            "" | V1 | BASE64_V1 => Version::V1,
            V2 => Version::V2,
            V3 => Version::V3,
            V4 | BASE64_V4 => Version::V4,
            V5 => Version::V5,
            _ => return None,
        })
    }

    /// Whether a tty session has a resize stream (v3 on).
    pub fn resizes(self) -> bool {
        self >= Version::V3
    }

    /// Whether the error stream carries a `Status` (v4 on) rather than text.
    pub fn status_json(self) -> bool {
        self >= Version::V4
    }
}

/// Which standard streams a session has. The kubelet reads them from the query (`"1"` is on);
/// with a tty, stderr is merged into stdout.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StreamOptions {
    pub stdin: bool,
    pub stdout: bool,
    pub stderr: bool,
    pub tty: bool,
}

impl StreamOptions {
    /// The kubelet's reading of `stdin`, `stdout`, `stderr`, `tty` (each on only when `"1"`),
    /// with its error when no stream is asked for.
    pub fn from_query(query: &str) -> Result<Self, String> {
        let on = |key: &str| {
            form_pairs(query)
                .find(|(k, _)| k == key)
                .is_some_and(|(_, v)| v == "1")
        };
        let mut opts = StreamOptions {
            stdin: on("stdin"),
            stdout: on("stdout"),
            stderr: on("stderr"),
            tty: on("tty"),
        };
        if opts.tty {
            opts.stderr = false;
        }
        if !opts.stdin && !opts.stdout && !opts.stderr {
            return Err("you must specify at least 1 of stdin, stdout, stderr".into());
        }
        Ok(opts)
    }
}

/// `key=value` pairs of a query, percent-decoded.
pub(crate) fn form_pairs(query: &str) -> impl Iterator<Item = (String, String)> + '_ {
    form_urlencoded::parse(query.as_bytes()).map(|(k, v)| (k.into_owned(), v.into_owned()))
}

/// A terminal size, as client-go encodes it (a Go struct without JSON tags, so the keys are
/// `Width` and `Height`; Go decodes keys case-insensitively, so lower case is accepted too).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TerminalSize {
    #[serde(rename = "Width", alias = "width")]
    pub width: u16,
    #[serde(rename = "Height", alias = "height")]
    pub height: u16,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_options_follow_the_kubelet() {
        let o = StreamOptions::from_query("command=sh&stdin=1&stdout=1&stderr=1&tty=1").unwrap();
        assert_eq!(
            o,
            StreamOptions {
                stdin: true,
                stdout: true,
                stderr: false,
                tty: true
            }
        );
        // Only "1" counts.
        assert_eq!(
            StreamOptions::from_query("stdout=true&stderr=1").unwrap(),
            StreamOptions {
                stderr: true,
                ..Default::default()
            }
        );
        assert_eq!(
            StreamOptions::from_query("tty=1").unwrap_err(),
            "you must specify at least 1 of stdin, stdout, stderr"
        );
    }

    #[test]
    fn versions_decide_resize_and_status_format() {
        assert_eq!(Version::of(""), Some(Version::V1));
        assert_eq!(Version::of(BASE64_V4), Some(Version::V4));
        assert!(!Version::V2.resizes() && Version::V3.resizes());
        assert!(!Version::V3.status_json() && Version::V5.status_json());
        assert_eq!(Version::of("v6.channel.k8s.io"), None);
    }

    #[test]
    fn terminal_sizes_use_gos_field_names() {
        let s = TerminalSize {
            width: 80,
            height: 24,
        };
        assert_eq!(
            serde_json::to_string(&s).unwrap(),
            r#"{"Width":80,"Height":24}"#
        );
        let back: TerminalSize = serde_json::from_str(r#"{"width":100,"height":40}"#).unwrap();
        assert_eq!((back.width, back.height), (100, 40));
    }

    #[test]
    fn queries_are_percent_decoded() {
        let pairs: Vec<_> = form_pairs("command=echo&command=a%20b+c&x=%zz&y").collect();
        assert_eq!(
            pairs,
            [
                ("command".into(), "echo".into()),
                ("command".into(), "a b c".into()),
                ("x".into(), "%zz".into()),
                ("y".into(), String::new())
            ]
        );
    }
}
