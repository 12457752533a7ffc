//! Protobuf → JSON, driven by the message table.
//!
//! Each message is read field by field; a field the table does not know, a wire type that does
//! not fit, or a nesting deeper than [`MAX_DEPTH`](crate::MAX_DEPTH) is an error. The JSON written
//! is what Go's `encoding/json` would write for the same object (see the crate docs for the
//! zero-value rule), with the special forms of `Time`, `Quantity`, `IntOrString` and friends.

use base64::Engine as _;
use serde_json::{Map, Number, Value};

use crate::MAX_DEPTH;
use crate::error::{PbError, Result, invalid, join, malformed};
use crate::message::{Field, Kind, Message, Mode, Shape, message};
use crate::time::{format_duration, format_time};
use crate::wire::{Reader, Wire};

/// Decodes one message's bytes.
pub(crate) fn decode_message(
    msg: &Message,
    bytes: &[u8],
    depth: usize,
    path: &str,
) -> Result<Value> {
    if depth > MAX_DEPTH {
        return Err(PbError::TooDeep(MAX_DEPTH));
    }
    match msg.shape {
        Shape::Object => decode_object(msg, bytes, depth, path),
        _ => decode_special(msg, bytes, depth, path),
    }
}

/// Values collected for one field while reading (repeated fields accumulate).
enum Slot {
    One(Value),
    Many(Vec<Value>),
    Map(Map<String, Value>),
}

fn decode_object(msg: &Message, bytes: &[u8], depth: usize, path: &str) -> Result<Value> {
    let mut slots: Vec<Option<Slot>> = msg.fields.iter().map(|_| None).collect();
    let mut reader = Reader::new(bytes, path);
    while let Some((tag, wire)) = reader.next_field()? {
        let Some(index) = msg.fields.iter().position(|f| f.tag == tag) else {
            return Err(PbError::UnknownField {
                message: msg.name,
                tag,
                path: crate::error::display(path),
            });
        };
        let field = &msg.fields[index];
        let fpath = join(path, field.json);
        match field.kind {
            Kind::MapStr | Kind::MapBytes | Kind::MapMsg(_) => {
                let (key, value) = map_entry(field, wire, depth, &fpath)?;
                let slot = slots[index].get_or_insert_with(|| Slot::Map(Map::new()));
                if let Slot::Map(map) = slot {
                    map.insert(key, value);
                }
            }
            _ if field.mode == Mode::R => {
                let mut values = Vec::new();
                repeated_values(field, wire, depth, &fpath, &mut values)?;
                let slot = slots[index].get_or_insert_with(|| Slot::Many(Vec::new()));
                if let Slot::Many(list) = slot {
                    list.extend(values);
                }
            }
            _ => slots[index] = Some(Slot::One(single(field, wire, depth, &fpath)?)),
        }
    }
    let mut out = Map::new();
    for (field, slot) in msg.fields.iter().zip(slots) {
        let Some(slot) = slot else { continue };
        let value = match slot {
            Slot::One(v) => v,
            Slot::Many(list) => Value::Array(list),
            Slot::Map(map) => Value::Object(map),
        };
        if field.mode == Mode::I {
            if let Value::Object(inner) = value {
                out.extend(inner);
            }
            continue;
        }
        if keep(field, &value) {
            out.insert(field.json.to_string(), value);
        }
    }
    Ok(Value::Object(out))
}

/// Go's `encoding/json` rule for a field that was present on the wire.
fn keep(field: &Field, value: &Value) -> bool {
    match value {
        Value::Null => false,
        _ if field.mode != Mode::D => true,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64() != Some(0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

fn wrong_wire(path: &str, field: &Field, wire: &Wire<'_>) -> PbError {
    malformed(
        path,
        format!("wire value {wire:?} does not fit a {:?} field", field.kind),
    )
}

/// One singular value of a field.
fn single(field: &Field, wire: Wire<'_>, depth: usize, path: &str) -> Result<Value> {
    scalar(field.kind, wire, depth, path).map_err(|e| match e {
        PbError::Malformed { reason, .. } if reason.is_empty() => wrong_wire(path, field, &wire),
        other => other,
    })
}

/// Decodes one value of `kind`; an empty-reason `Malformed` means "wrong wire type".
fn scalar(kind: Kind, wire: Wire<'_>, depth: usize, path: &str) -> Result<Value> {
    Ok(match (kind, wire) {
        (Kind::Str, Wire::Len(b)) => Value::String(String::from_utf8_lossy(b).into_owned()),
        (Kind::Bytes, Wire::Len(b)) => {
            Value::String(base64::engine::general_purpose::STANDARD.encode(b))
        }
        (Kind::Bool, Wire::Varint(v)) => Value::Bool(v != 0),
        (Kind::I32, Wire::Varint(v)) => Value::from(v as i32),
        (Kind::I64, Wire::Varint(v)) => Value::from(v as i64),
        (Kind::F64, Wire::Fixed64(v)) => float(f64::from_bits(v), path)?,
        (Kind::Msg(i), Wire::Len(b)) => decode_message(message(i), b, depth + 1, path)?,
        _ => return Err(malformed(path, "")),
    })
}

/// A float as Go writes it: integral values without a fraction.
pub(crate) fn float(x: f64, path: &str) -> Result<Value> {
    if x.is_finite() && x.fract() == 0.0 && x.abs() < 9_007_199_254_740_992.0 {
        return Ok(Value::from(x as i64));
    }
    Number::from_f64(x)
        .map(Value::Number)
        .ok_or_else(|| invalid(path, "NaN and infinite numbers have no JSON form"))
}

/// The elements of one occurrence of a repeated field (packed scalars carry several).
fn repeated_values(
    field: &Field,
    wire: Wire<'_>,
    depth: usize,
    path: &str,
    out: &mut Vec<Value>,
) -> Result<()> {
    let packable = matches!(field.kind, Kind::Bool | Kind::I32 | Kind::I64 | Kind::F64);
    if let (true, Wire::Len(bytes)) = (packable, wire) {
        let mut reader = Reader::new(bytes, path);
        while !reader.at_end() {
            let wire = if field.kind == Kind::F64 {
                Wire::Fixed64(reader.fixed64()?)
            } else {
                Wire::Varint(reader.varint()?)
            };
            out.push(single(field, wire, depth, path)?);
        }
        return Ok(());
    }
    let element = format!("{path}[{}]", out.len());
    out.push(single(field, wire, depth, &element)?);
    Ok(())
}

/// One `map<string, V>` entry: a message {1: key, 2: value}.
fn map_entry(field: &Field, wire: Wire<'_>, depth: usize, path: &str) -> Result<(String, Value)> {
    let Wire::Len(bytes) = wire else {
        return Err(wrong_wire(path, field, &wire));
    };
    if depth + 1 > MAX_DEPTH {
        return Err(PbError::TooDeep(MAX_DEPTH));
    }
    let value_kind = match field.kind {
        Kind::MapStr => Kind::Str,
        Kind::MapBytes => Kind::Bytes,
        Kind::MapMsg(i) => Kind::Msg(i),
        _ => return Err(wrong_wire(path, field, &wire)),
    };
    let mut key = String::new();
    let mut value = None;
    let mut reader = Reader::new(bytes, path);
    while let Some((tag, wire)) = reader.next_field()? {
        match (tag, wire) {
            (1, Wire::Len(b)) => key = String::from_utf8_lossy(b).into_owned(),
            (2, wire) => value = Some(wire),
            _ => return Err(malformed(path, format!("bad map entry field {tag}"))),
        }
    }
    let entry_path = format!("{path}[{key}]");
    let value = match value {
        Some(wire) => scalar(value_kind, wire, depth + 1, &entry_path).map_err(|e| match e {
            PbError::Malformed { reason, .. } if reason.is_empty() => {
                malformed(&entry_path, "map value has the wrong wire type")
            }
            other => other,
        })?,
        None => scalar(value_kind, Wire::Len(&[]), depth + 1, &entry_path)?,
    };
    Ok((key, value))
}

/// Reads the fields of a special message as raw wire values by tag.
fn raw_fields<'a>(msg: &Message, bytes: &'a [u8], path: &'a str) -> Result<Vec<(u32, Wire<'a>)>> {
    let mut out = Vec::new();
    let mut reader = Reader::new(bytes, path);
    while let Some((tag, wire)) = reader.next_field()? {
        if msg.by_tag(tag).is_none() {
            return Err(PbError::UnknownField {
                message: msg.name,
                tag,
                path: crate::error::display(path),
            });
        }
        out.push((tag, wire));
    }
    Ok(out)
}

fn last<'a>(fields: &[(u32, Wire<'a>)], tag: u32) -> Option<Wire<'a>> {
    fields
        .iter()
        .rev()
        .find(|(t, _)| *t == tag)
        .map(|(_, w)| *w)
}

fn varint(fields: &[(u32, Wire<'_>)], tag: u32, path: &str) -> Result<u64> {
    match last(fields, tag) {
        None => Ok(0),
        Some(Wire::Varint(v)) => Ok(v),
        Some(_) => Err(malformed(path, format!("field {tag} must be a varint"))),
    }
}

fn bytes_of<'a>(fields: &[(u32, Wire<'a>)], tag: u32, path: &str) -> Result<Option<&'a [u8]>> {
    match last(fields, tag) {
        None => Ok(None),
        Some(Wire::Len(b)) => Ok(Some(b)),
        Some(_) => Err(malformed(
            path,
            format!("field {tag} must be length-delimited"),
        )),
    }
}

fn strings(fields: &[(u32, Wire<'_>)], tag: u32, path: &str) -> Result<Vec<Value>> {
    let mut out = Vec::new();
    for (t, wire) in fields.iter().filter(|(t, _)| *t == tag) {
        let Wire::Len(b) = wire else {
            return Err(malformed(
                path,
                format!("field {t} must be length-delimited"),
            ));
        };
        out.push(Value::String(String::from_utf8_lossy(b).into_owned()));
    }
    Ok(out)
}

/// The schema message a `JSONSchemaPropsOr*` field refers to.
fn schema_of(
    msg: &Message,
    tag: u32,
    fields: &[(u32, Wire<'_>)],
    depth: usize,
    path: &str,
) -> Result<Option<Value>> {
    let Some(Kind::Msg(i)) = msg.by_tag(tag).map(|f| f.kind) else {
        return Ok(None);
    };
    match bytes_of(fields, tag, path)? {
        Some(b) => Ok(Some(decode_message(message(i), b, depth + 1, path)?)),
        None => Ok(None),
    }
}

fn decode_special(msg: &Message, bytes: &[u8], depth: usize, path: &str) -> Result<Value> {
    let fields = raw_fields(msg, bytes, path)?;
    match msg.shape {
        Shape::Time | Shape::MicroTime => {
            if bytes.is_empty() {
                return Ok(Value::Null);
            }
            let seconds = varint(&fields, 1, path)? as i64;
            let nanos = varint(&fields, 2, path)? as i32;
            format_time(seconds, nanos, msg.shape == Shape::MicroTime)
                .map(Value::String)
                .ok_or_else(|| invalid(path, "time outside the years 0000-9999"))
        }
        Shape::Duration => Ok(Value::String(format_duration(
            varint(&fields, 1, path)? as i64
        ))),
        Shape::Quantity => Ok(Value::String(match bytes_of(&fields, 1, path)? {
            Some(b) if !b.is_empty() => String::from_utf8_lossy(b).into_owned(),
            _ => "0".to_string(),
        })),
        Shape::IntOrString => {
            if varint(&fields, 1, path)? == 1 {
                let s = bytes_of(&fields, 3, path)?.unwrap_or_default();
                Ok(Value::String(String::from_utf8_lossy(s).into_owned()))
            } else {
                Ok(Value::from(varint(&fields, 2, path)? as i32))
            }
        }
        Shape::RawJson => match bytes_of(&fields, 1, path)? {
            None | Some([]) => Ok(Value::Null),
            Some(raw) if raw.starts_with(&crate::MAGIC) => crate::decode_envelope(raw, depth + 1),
            Some(raw) => serde_json::from_slice(raw)
                .map_err(|e| invalid(path, format!("embedded JSON does not parse: {e}"))),
        },
        Shape::StringList => Ok(Value::Array(strings(&fields, 1, path)?)),
        Shape::SchemaOrArray => {
            let mut list = Vec::new();
            if let Some(Kind::Msg(i)) = msg.by_tag(2).map(|f| f.kind) {
                for (_, wire) in fields.iter().filter(|(t, _)| *t == 2) {
                    let Wire::Len(b) = wire else {
                        return Err(malformed(path, "schemas must be length-delimited"));
                    };
                    let element = format!("{path}[{}]", list.len());
                    list.push(decode_message(message(i), b, depth + 1, &element)?);
                }
            }
            if !list.is_empty() {
                return Ok(Value::Array(list));
            }
            Ok(schema_of(msg, 1, &fields, depth, path)?.unwrap_or(Value::Null))
        }
        Shape::SchemaOrBool => match schema_of(msg, 2, &fields, depth, path)? {
            Some(schema) => Ok(schema),
            None => Ok(Value::Bool(varint(&fields, 1, path)? != 0)),
        },
        Shape::SchemaOrStringArray => {
            let list = strings(&fields, 2, path)?;
            if !list.is_empty() {
                return Ok(Value::Array(list));
            }
            Ok(schema_of(msg, 1, &fields, depth, path)?.unwrap_or(Value::Null))
        }
        Shape::Object => decode_object(msg, bytes, depth, path),
    }
}
