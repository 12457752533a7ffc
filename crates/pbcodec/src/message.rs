//! The shape of the message table in `table.rs`: what the codec knows about each protobuf message.
//!
//! The table itself is generated (see `tests/sourcegen.rs`); this module defines the small vocabulary
//! it is written in and the lookups the decoder and encoder use. A message reference is an index
//! into [`MESSAGES`](crate::table::MESSAGES), which is sorted by message name.

use crate::table::MESSAGES;

/// How a message maps to JSON. Most are objects; a few have a custom Go JSON form.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Shape {
    /// A JSON object with one property per field.
    Object,
    /// `meta.v1.Time` {seconds, nanos}: RFC 3339 with second precision, `null` when zero.
    Time,
    /// `meta.v1.MicroTime` {seconds, nanos}: RFC 3339 with microseconds, `null` when zero.
    MicroTime,
    /// `meta.v1.Duration` {duration (ns)}: a Go duration string such as `1h0m0s`.
    Duration,
    /// `resource.Quantity` {string}: the string.
    Quantity,
    /// `intstr.IntOrString` {type, intVal, strVal}: a number or a string.
    IntOrString,
    /// `runtime.RawExtension`, `apiextensions JSON`, `meta.v1.FieldsV1` {raw}: embedded JSON.
    RawJson,
    /// A Go `[]string` type (`meta.v1.Verbs`, `ExtraValue`) {items}: a JSON array.
    StringList,
    /// `JSONSchemaPropsOrArray` {schema, jSONSchemas}: a schema or an array of schemas.
    SchemaOrArray,
    /// `JSONSchemaPropsOrBool` {allows, schema}: a schema or a boolean.
    SchemaOrBool,
    /// `JSONSchemaPropsOrStringArray` {schema, property}: a schema or an array of strings.
    SchemaOrStringArray,
}

/// The protobuf type of a field (Kubernetes protos use only these).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Str,
    Bytes,
    Bool,
    I32,
    I64,
    F64,
    /// A message, by index into the table.
    Msg(u16),
    /// `map<string, string>`.
    MapStr,
    /// `map<string, bytes>`.
    MapBytes,
    /// `map<string, Message>`.
    MapMsg(u16),
}

/// Cardinality and the Go JSON rule for zero values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Singular; a zero value is dropped (a non-pointer Go field tagged `omitempty`/`omitzero`).
    D,
    /// Singular; a zero value is kept (a Go pointer, or a field without `omitempty`).
    K,
    /// Singular message inlined into its parent (`json:",inline"`).
    I,
    /// Repeated (lists and maps); empty is omitted.
    R,
}

/// One field of a message.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Field {
    pub tag: u32,
    pub json: &'static str,
    pub kind: Kind,
    pub mode: Mode,
}

/// One message.
#[derive(Debug)]
pub(crate) struct Message {
    pub name: &'static str,
    pub shape: Shape,
    pub fields: &'static [Field],
}

/// Builds a field; short so that the generated table stays compact.
pub(crate) const fn f(tag: u32, json: &'static str, kind: Kind, mode: Mode) -> Field {
    Field {
        tag,
        json,
        kind,
        mode,
    }
}

/// Builds a message.
pub(crate) const fn m(name: &'static str, shape: Shape, fields: &'static [Field]) -> Message {
    Message {
        name,
        shape,
        fields,
    }
}

impl Message {
    /// The field with this tag.
    pub(crate) fn by_tag(&self, tag: u32) -> Option<&'static Field> {
        self.fields.iter().find(|f| f.tag == tag)
    }

    /// The field with this JSON name (inlined fields are not searched).
    pub(crate) fn by_json(&self, name: &str) -> Option<&'static Field> {
        self.fields
            .iter()
            .find(|f| f.json == name && f.mode != Mode::I)
    }
}

/// The message at a table index.
pub(crate) fn message(index: u16) -> &'static Message {
    &MESSAGES[usize::from(index)]
}

/// The message with this full name (`api.apps.v1.Deployment`).
pub(crate) fn find(name: &str) -> Option<&'static Message> {
    MESSAGES
        .binary_search_by(|m| m.name.cmp(name))
        .ok()
        .map(|i| &MESSAGES[i])
}
