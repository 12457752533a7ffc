//! JSON → protobuf, driven by the message table; the inverse of `decode`.
//!
//! Used to answer clients that accept only protobuf. Properties are written in the table's field
//! order (the proto declaration order, as Go does); `null` properties are skipped; a property the
//! message does not have is an error rather than silently lost.

use base64::Engine as _;
use serde_json::{Map, Value};

use crate::MAX_DEPTH;
use crate::error::{PbError, Result, invalid, join};
use crate::message::{Field, Kind, Message, Mode, Shape, message};
use crate::time::{parse_duration, parse_time};
use crate::wire::Writer;

/// Encodes `value` as the bytes of message `msg`. `skip` names top-level properties that are not
/// fields (`apiVersion`, `kind`).
pub(crate) fn encode_message(
    msg: &Message,
    value: &Value,
    depth: usize,
    path: &str,
    skip: &[&str],
) -> Result<Vec<u8>> {
    if depth > MAX_DEPTH {
        return Err(PbError::TooDeep(MAX_DEPTH));
    }
    let mut w = Writer::default();
    match msg.shape {
        Shape::Object => {
            let Value::Object(object) = value else {
                return Err(invalid(
                    path,
                    format!("expected an object for {}", msg.name),
                ));
            };
            encode_object(msg, object, depth, path, skip, &mut w)?;
        }
        _ => encode_special(msg, value, depth, path, &mut w)?,
    }
    Ok(w.buf)
}

/// Whether `key` belongs to `msg` directly or through an inlined field.
fn owns(msg: &Message, key: &str) -> bool {
    msg.by_json(key).is_some()
        || msg.fields.iter().any(|f| match (f.mode, f.kind) {
            (Mode::I, Kind::Msg(i)) => owns(message(i), key),
            _ => false,
        })
}

fn encode_object(
    msg: &Message,
    object: &Map<String, Value>,
    depth: usize,
    path: &str,
    skip: &[&str],
    w: &mut Writer,
) -> Result<()> {
    for key in object.keys() {
        if !skip.contains(&key.as_str()) && !owns(msg, key) {
            return Err(PbError::UnknownJsonField {
                message: msg.name,
                path: join(path, key),
            });
        }
    }
    for field in msg.fields {
        if let (Mode::I, Kind::Msg(i)) = (field.mode, field.kind) {
            let inner = message(i);
            let part: Map<String, Value> = object
                .iter()
                .filter(|(k, _)| owns(inner, k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            let bytes = encode_message(inner, &Value::Object(part), depth + 1, path, &[])?;
            w.bytes_field(field.tag, &bytes);
            continue;
        }
        let Some(value) = object.get(field.json) else {
            continue;
        };
        if value.is_null() {
            continue;
        }
        let fpath = join(path, field.json);
        match field.kind {
            Kind::MapStr | Kind::MapBytes | Kind::MapMsg(_) => {
                encode_map(field, value, depth, &fpath, w)?
            }
            _ if field.mode == Mode::R => {
                let Value::Array(items) = value else {
                    return Err(invalid(&fpath, "expected an array"));
                };
                for (n, item) in items.iter().enumerate() {
                    encode_value(
                        field.tag,
                        field.kind,
                        item,
                        depth,
                        &format!("{fpath}[{n}]"),
                        w,
                    )?;
                }
            }
            _ => encode_value(field.tag, field.kind, value, depth, &fpath, w)?,
        }
    }
    Ok(())
}

fn encode_map(
    field: &Field,
    value: &Value,
    depth: usize,
    path: &str,
    w: &mut Writer,
) -> Result<()> {
    let Value::Object(map) = value else {
        return Err(invalid(path, "expected an object"));
    };
    let kind = match field.kind {
        Kind::MapBytes => Kind::Bytes,
        Kind::MapMsg(i) => Kind::Msg(i),
        _ => Kind::Str,
    };
    for (key, v) in map {
        let mut entry = Writer::default();
        entry.bytes_field(1, key.as_bytes());
        if !v.is_null() {
            encode_value(2, kind, v, depth + 1, &format!("{path}[{key}]"), &mut entry)?;
        }
        w.bytes_field(field.tag, &entry.buf);
    }
    Ok(())
}

fn integer(value: &Value, path: &str) -> Result<i64> {
    match value {
        Value::Number(n) => n
            .as_i64()
            .or_else(|| {
                n.as_f64()
                    .filter(|f| f.fract() == 0.0 && f.abs() < 9.2e18)
                    .map(|f| f as i64)
            })
            .ok_or_else(|| invalid(path, "expected an integer")),
        _ => Err(invalid(path, "expected an integer")),
    }
}

fn encode_value(
    tag: u32,
    kind: Kind,
    value: &Value,
    depth: usize,
    path: &str,
    w: &mut Writer,
) -> Result<()> {
    match kind {
        Kind::Str => match value {
            Value::String(s) => w.bytes_field(tag, s.as_bytes()),
            _ => return Err(invalid(path, "expected a string")),
        },
        Kind::Bytes => match value {
            Value::String(s) => {
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(s)
                    .map_err(|e| invalid(path, format!("expected base64: {e}")))?;
                w.bytes_field(tag, &bytes);
            }
            _ => return Err(invalid(path, "expected a base64 string")),
        },
        Kind::Bool => match value {
            Value::Bool(b) => w.varint_field(tag, u64::from(*b)),
            _ => return Err(invalid(path, "expected a boolean")),
        },
        Kind::I32 => {
            let n = integer(value, path)?;
            let n = i32::try_from(n).map_err(|_| invalid(path, "out of range for int32"))?;
            w.varint_field(tag, i64::from(n) as u64);
        }
        Kind::I64 => w.varint_field(tag, integer(value, path)? as u64),
        Kind::F64 => match value.as_f64() {
            Some(x) => w.fixed64_field(tag, x.to_bits()),
            None => return Err(invalid(path, "expected a number")),
        },
        Kind::Msg(i) => {
            let bytes = encode_message(message(i), value, depth + 1, path, &[])?;
            w.bytes_field(tag, &bytes);
        }
        Kind::MapStr | Kind::MapBytes | Kind::MapMsg(_) => {
            return Err(invalid(path, "maps cannot nest"));
        }
    }
    Ok(())
}

fn schema_kind(msg: &Message, tag: u32) -> Result<u16> {
    match msg.by_tag(tag).map(|f| f.kind) {
        Some(Kind::Msg(i)) => Ok(i),
        _ => Err(invalid(msg.name, "the table lacks the schema field")),
    }
}

fn encode_special(
    msg: &Message,
    value: &Value,
    depth: usize,
    path: &str,
    w: &mut Writer,
) -> Result<()> {
    match (msg.shape, value) {
        (Shape::Time | Shape::MicroTime, Value::String(s)) => {
            let (seconds, nanos) = parse_time(s)
                .ok_or_else(|| invalid(path, format!("{s:?} is not an RFC 3339 time")))?;
            let nanos = if msg.shape == Shape::Time {
                0
            } else {
                nanos / 1000 * 1000
            };
            w.varint_field(1, seconds as u64);
            w.varint_field(2, i64::from(nanos) as u64);
        }
        (Shape::Duration, Value::String(s)) => {
            let nanos = parse_duration(s)
                .ok_or_else(|| invalid(path, format!("{s:?} is not a duration")))?;
            w.varint_field(1, nanos as u64);
        }
        (Shape::Quantity, Value::String(s)) => w.bytes_field(1, s.as_bytes()),
        (Shape::Quantity, Value::Number(n)) => w.bytes_field(1, n.to_string().as_bytes()),
        (Shape::IntOrString, Value::String(s)) => {
            w.varint_field(1, 1);
            w.varint_field(2, 0);
            w.bytes_field(3, s.as_bytes());
        }
        (Shape::IntOrString, Value::Number(_)) => {
            let n = integer(value, path)?;
            let n = i32::try_from(n).map_err(|_| invalid(path, "out of range for int32"))?;
            w.varint_field(1, 0);
            w.varint_field(2, i64::from(n) as u64);
            w.bytes_field(3, b"");
        }
        (Shape::RawJson, v) => {
            let raw = serde_json::to_vec(v).map_err(|e| invalid(path, e.to_string()))?;
            w.bytes_field(1, &raw);
        }
        (Shape::StringList, Value::Array(items)) => {
            for (n, item) in items.iter().enumerate() {
                encode_value(1, Kind::Str, item, depth, &format!("{path}[{n}]"), w)?;
            }
        }
        (Shape::SchemaOrArray, Value::Array(items)) => {
            let schema = message(schema_kind(msg, 2)?);
            for (n, item) in items.iter().enumerate() {
                let bytes = encode_message(schema, item, depth + 1, &format!("{path}[{n}]"), &[])?;
                w.bytes_field(2, &bytes);
            }
        }
        (Shape::SchemaOrArray | Shape::SchemaOrStringArray, Value::Object(_)) => {
            let bytes = encode_message(message(schema_kind(msg, 1)?), value, depth + 1, path, &[])?;
            w.bytes_field(1, &bytes);
        }
        (Shape::SchemaOrStringArray, Value::Array(items)) => {
            for (n, item) in items.iter().enumerate() {
                encode_value(2, Kind::Str, item, depth, &format!("{path}[{n}]"), w)?;
            }
        }
        (Shape::SchemaOrBool, Value::Bool(b)) => w.varint_field(1, u64::from(*b)),
        (Shape::SchemaOrBool, Value::Object(_)) => {
            w.varint_field(1, 1);
            let bytes = encode_message(message(schema_kind(msg, 2)?), value, depth + 1, path, &[])?;
            w.bytes_field(2, &bytes);
        }
        (shape, _) => {
            return Err(invalid(
                path,
                format!("this value does not fit a {shape:?}"),
            ));
        }
    }
    Ok(())
}
