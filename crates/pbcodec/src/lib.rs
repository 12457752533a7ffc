//! Kubernetes protobuf ↔ JSON for built-in types.
//!
//! kubectl ≥ 1.32 and client-go ≥ 0.32 typed clients send built-in objects as
//! `application/vnd.kubernetes.protobuf` and never fall back to JSON; the API server stores
//! canonical JSON. [`decode`] turns such a body into the JSON that kube-apiserver would have
//! stored for the same Go object, and [`encode`] does the reverse for clients that accept only
//! protobuf.
//!
//! The wire format is the magic `k8s\0` followed by a `runtime.Unknown` message
//! {1: typeMeta {1: apiVersion, 2: kind}, 2: raw, 3: contentEncoding, 4: contentType}, where `raw`
//! is the typed message of k8s.io/api, apimachinery or apiextensions-apiserver. The messages come
//! from the generated table in `table.rs` (see `tests/sourcegen.rs`).
//!
//! # The zero-value rule
//!
//! Go's protobuf marshaller writes every non-pointer scalar, zero or not, while Go's JSON encoder
//! leaves out zero values of fields tagged `omitempty`. So a field present on the wire with a zero
//! value (`false`, `0`, `""`, empty bytes) is dropped when the Go field is a non-pointer tagged
//! `omitempty` (or `omitzero`), and kept when it is a pointer (`replicas: 0`, `runAsUser: 0`,
//! `automountServiceAccountToken: false` mean something) or has no `omitempty`. Which is which comes
//! from the Go struct tags (`gofacts/`). Non-pointer structs are always written by Go, and Go's JSON
//! writes them too (`"strategy": {}`, `"resources": {}`), so messages present on the wire are kept.
//! Limits: `null` is never written (a zero `Time`, an empty `RawExtension`, a Go `nil` slice
//! without `omitempty`, which Go would write as `null`, are left out instead, which every decoder
//! reads the same); empty lists and maps cannot be told from absent ones on the wire, so they are
//! left out; a non-pointer struct that a non-Go encoder left off the wire is left out, where Go
//! would write `{}`; a repeated singular message is last-wins rather than merged; invalid UTF-8 in
//! strings becomes U+FFFD, as Go's JSON encoder does.
//!
//! Other special forms: `Time` → RFC 3339 seconds (`Z`), `MicroTime` → six fraction digits,
//! `Duration` → Go duration text, `Quantity` → its string, `IntOrString` → number or string,
//! `RawExtension`/`JSON`/`FieldsV1` → the embedded JSON, bytes → base64, maps → objects,
//! `JSONSchemaPropsOr{Array,Bool,StringArray}` → their Go JSON forms, floats that are integral →
//! integers (as Go prints them).

mod decode;
mod encode;
mod error;
mod kinds;
mod message;
#[rustfmt::skip]
mod table;
mod time;
mod wire;

use serde_json::Value;

pub use error::PbError;
use error::{Result, malformed};
use wire::{Reader, Wire, Writer};

/// The media type of Kubernetes protobuf bodies.
pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// The four bytes every Kubernetes protobuf body starts with.
pub const MAGIC: [u8; 4] = *b"k8s\0";

/// The deepest message nesting accepted (CRD schemas nest deepest; this is far beyond them).
pub const MAX_DEPTH: usize = 100;

/// Decodes a protobuf body (`k8s\0` + `runtime.Unknown`) into JSON with `apiVersion` and `kind`.
pub fn decode(body: &[u8]) -> Result<Value, PbError> {
    decode_envelope(body, 0)
}

/// Encodes a JSON object with `apiVersion` and `kind` of a built-in kind as a protobuf body.
pub fn encode(value: &Value) -> Result<Vec<u8>, PbError> {
    let field = |name: &str| {
        value
            .get(name)
            .and_then(Value::as_str)
            .ok_or_else(|| error::invalid(name, "a string is required to encode protobuf"))
    };
    let (api_version, kind) = (field("apiVersion")?, field("kind")?);
    let msg = kinds::lookup(api_version, kind).ok_or_else(|| PbError::UnknownKind {
        api_version: api_version.to_string(),
        kind: kind.to_string(),
    })?;
    let raw = encode::encode_message(msg, value, 0, "", &["apiVersion", "kind"])?;
    let mut type_meta = Writer::default();
    type_meta.bytes_field(1, api_version.as_bytes());
    type_meta.bytes_field(2, kind.as_bytes());
    let mut unknown = Writer::default();
    unknown.bytes_field(1, &type_meta.buf);
    unknown.bytes_field(2, &raw);
    unknown.bytes_field(3, b"");
    unknown.bytes_field(4, b"");
    let mut body = MAGIC.to_vec();
    body.extend_from_slice(&unknown.buf);
    Ok(body)
}

/// Whether protobuf is available for this apiVersion and kind (built-in kinds only; custom
/// resources have no protobuf form).
pub fn supports(api_version: &str, kind: &str) -> bool {
    kinds::lookup(api_version, kind).is_some()
}

/// Decodes an envelope at a nesting depth (a `RawExtension` may hold another envelope).
pub(crate) fn decode_envelope(body: &[u8], depth: usize) -> Result<Value> {
    let Some(rest) = body.strip_prefix(&MAGIC) else {
        return Err(PbError::NoMagic);
    };
    let (mut api_version, mut kind, mut raw) = (String::new(), String::new(), None);
    let mut reader = Reader::new(rest, "");
    while let Some((tag, wire)) = reader.next_field()? {
        let Wire::Len(bytes) = wire else {
            return Err(malformed(
                "",
                format!("envelope field {tag} must be length-delimited"),
            ));
        };
        let text = || String::from_utf8_lossy(bytes).into_owned();
        match tag {
            1 => {
                let mut meta = Reader::new(bytes, "typeMeta");
                while let Some((tag, wire)) = meta.next_field()? {
                    match (tag, wire) {
                        (1, Wire::Len(b)) => api_version = String::from_utf8_lossy(b).into_owned(),
                        (2, Wire::Len(b)) => kind = String::from_utf8_lossy(b).into_owned(),
                        _ => return Err(malformed("typeMeta", format!("unexpected field {tag}"))),
                    }
                }
            }
            2 => raw = Some(bytes),
            3 if bytes.is_empty() => {}
            3 => {
                return Err(PbError::Unsupported {
                    what: "contentEncoding",
                    value: text(),
                });
            }
            4 if bytes.is_empty() || bytes == MEDIA_TYPE.as_bytes() => {}
            4 => {
                return Err(PbError::Unsupported {
                    what: "contentType",
                    value: text(),
                });
            }
            _ => return Err(malformed("", format!("unexpected envelope field {tag}"))),
        }
    }
    let msg = kinds::lookup(&api_version, &kind).ok_or_else(|| PbError::UnknownKind {
        api_version: api_version.clone(),
        kind: kind.clone(),
    })?;
    let mut value = decode::decode_message(msg, raw.unwrap_or_default(), depth, "")?;
    if let Value::Object(object) = &mut value {
        object.insert("apiVersion".to_string(), Value::String(api_version));
        object.insert("kind".to_string(), Value::String(kind));
    }
    Ok(value)
}
