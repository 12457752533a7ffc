//! Helpers shared by the integration tests: k8s-pb (prost) as an encoder independent of ours.

#![allow(dead_code)]

use k8s_pb::apimachinery::pkg::runtime::{TypeMeta, Unknown};
use prost::Message as _;

/// `k8s\0` + `runtime.Unknown` around a k8s-pb message, as client-go writes it.
pub fn envelope(api_version: &str, kind: &str, message: &impl prost::Message) -> Vec<u8> {
    envelope_raw(api_version, kind, message.encode_to_vec())
}

pub fn envelope_raw(api_version: &str, kind: &str, raw: Vec<u8>) -> Vec<u8> {
    let unknown = Unknown {
        type_meta: Some(TypeMeta {
            api_version: Some(api_version.to_string()),
            kind: Some(kind.to_string()),
        }),
        raw: Some(raw),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    let mut body = b"k8s\0".to_vec();
    body.extend(unknown.encode_to_vec());
    body
}

/// The typed bytes inside an envelope, read back with k8s-pb.
pub fn raw_of(body: &[u8]) -> Vec<u8> {
    let unknown = Unknown::decode(&body[4..]).expect("envelope decodes with k8s-pb");
    unknown.raw.unwrap_or_default()
}

pub fn s(v: &str) -> Option<String> {
    Some(v.to_string())
}
