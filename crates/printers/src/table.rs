//! Assembling `meta.k8s.io` Tables: column definitions, rows, row objects and list metadata.
//!
//! A [`Printer`] is chosen once per request (built-in, custom resource or default) and then
//! renders any number of objects. The row `object` follows `includeObject`: by default
//! (`Metadata`) a `PartialObjectMetadata` carrying the object's whole `metadata`, which
//! kubectl needs for `--show-labels`, namespaces and watch bookkeeping; `Object` embeds the
//! object; `None` leaves `null`. Watch events after the first carry no column definitions
//! (`columnDefinitions: null`), as upstream's `NoHeaders`.

use std::time::SystemTime;

use apimachinery::ApiError;
use serde_json::{Map, Value, json};
use thiserror::Error;

use crate::column::{Column, Def, NAME, Row};
use crate::custom::CustomColumns;
use crate::kinds;
use crate::meta;
use crate::time::{Instant, format_rfc3339_utc, zero_time};

/// Errors of Table requests.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Error {
    /// The `includeObject` query parameter is not `None`, `Metadata` or `Object`.
    #[error("unrecognized includeObject value: {0:?}")]
    UnknownIncludeObject(String),
}

impl From<Error> for ApiError {
    fn from(e: Error) -> ApiError {
        ApiError::bad_request(e.to_string())
    }
}

/// What each row's `object` holds (the `includeObject` query parameter).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IncludeObject {
    /// `null`.
    None,
    /// A `PartialObjectMetadata` with the object's metadata (the default).
    #[default]
    Metadata,
    /// The whole object.
    Object,
}

impl IncludeObject {
    /// Parses the query parameter; absent or empty means `Metadata`.
    pub fn parse(value: Option<&str>) -> Result<IncludeObject, Error> {
        match value.unwrap_or("") {
            "" | "Metadata" => Ok(IncludeObject::Metadata),
            "None" => Ok(IncludeObject::None),
            "Object" => Ok(IncludeObject::Object),
            other => Err(Error::UnknownIncludeObject(other.to_string())),
        }
    }
}

/// Which version of `meta.k8s.io` the client asked the Table in (`v=v1` or `v=v1beta1`); the
/// row `PartialObjectMetadata` uses the same version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MetaVersion {
    #[default]
    V1,
    V1Beta1,
}

impl MetaVersion {
    /// The version named by the `v=` parameter of the Accept header, if it serves Tables.
    pub fn from_version(v: &str) -> Option<MetaVersion> {
        match v {
            "v1" => Some(MetaVersion::V1),
            "v1beta1" => Some(MetaVersion::V1Beta1),
            _ => None,
        }
    }

    /// `meta.k8s.io/v1` or `meta.k8s.io/v1beta1`.
    pub fn api_version(self) -> &'static str {
        match self {
            MetaVersion::V1 => "meta.k8s.io/v1",
            MetaVersion::V1Beta1 => "meta.k8s.io/v1beta1",
        }
    }
}

/// How to render a Table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TableOptions {
    pub include_object: IncludeObject,
    /// Omit `columnDefinitions` (watch events after the first).
    pub no_headers: bool,
    pub version: MetaVersion,
}

#[derive(Debug, Clone, PartialEq)]
enum Kind {
    Builtin(&'static kinds::Printer),
    Custom(CustomColumns),
    /// Upstream's default table convertor: `Name` and `Created At`.
    Default,
}

/// Renders Tables for one kind.
#[derive(Debug, Clone, PartialEq)]
pub struct Printer(Kind);

const DEFAULT_COLUMNS: [Def; 2] = [
    NAME,
    Def {
        name: "Created At",
        type_: "date",
        format: "",
        priority: 0,
        description: "When the object was created (metadata.creationTimestamp).",
    },
];

impl Printer {
    /// The printer of a built-in kind (`group` is `""` for the core group), or the default
    /// `Name`/`Created At` table for kinds upstream has no printer for.
    pub fn for_kind(group: &str, kind: &str) -> Printer {
        match kinds::lookup(group, kind) {
            Some(p) => Printer(Kind::Builtin(p)),
            None => Printer(Kind::Default),
        }
    }

    /// The printer of a custom resource version, from its `additionalPrinterColumns`.
    pub fn for_custom_resource(additional_printer_columns: &Value) -> Printer {
        Printer(Kind::Custom(CustomColumns::new(additional_printer_columns)))
    }

    /// The printer of upstream's default table convertor.
    pub fn default_table() -> Printer {
        Printer(Kind::Default)
    }

    /// Whether this is the default `Name`/`Created At` printer.
    pub fn is_default(&self) -> bool {
        matches!(self.0, Kind::Default)
    }

    /// The column definitions, wide (priority 1) ones included.
    pub fn columns(&self) -> Vec<Column> {
        match &self.0 {
            Kind::Builtin(p) => p.columns.iter().map(|d| d.column()).collect(),
            Kind::Custom(c) => c.columns().to_vec(),
            Kind::Default => DEFAULT_COLUMNS.iter().map(|d| d.column()).collect(),
        }
    }

    /// One object's row, one cell per column.
    pub fn row(&self, obj: &Value, now: SystemTime) -> Row {
        self.row_at(obj, Instant::from_system_time(now))
    }

    pub(crate) fn row_at(&self, obj: &Value, now: Instant) -> Row {
        match &self.0 {
            Kind::Builtin(p) => (p.row)(obj, now),
            Kind::Custom(c) => c.row(obj, now),
            Kind::Default => {
                let created = meta::timestamp(obj, &["metadata", "creationTimestamp"])
                    .unwrap_or_else(zero_time);
                Row::new(vec![
                    Value::from(meta::name(obj)),
                    Value::from(format_rfc3339_utc(created)),
                ])
            }
        }
    }

    /// The Table of `objects` (a list's items, or one object for get and watch).
    ///
    /// `list_metadata` supplies `resourceVersion`, `continue` and `remainingItemCount`: the
    /// list's metadata, or `{"resourceVersion": <the object's>}` for a single object.
    pub fn table(
        &self,
        objects: &[Value],
        now: SystemTime,
        options: &TableOptions,
        list_metadata: &Value,
    ) -> Value {
        let now = Instant::from_system_time(now);
        let rows: Vec<Value> = objects
            .iter()
            .map(|obj| row_json(self.row_at(obj, now), obj, options))
            .collect();
        // The default convertor starts from a nil slice, which Go encodes as null.
        let rows = if rows.is_empty() && self.is_default() {
            Value::Null
        } else {
            Value::Array(rows)
        };
        let columns = if options.no_headers {
            Value::Null
        } else {
            Value::Array(self.columns().iter().map(Column::to_json).collect())
        };
        json!({
            "kind": "Table",
            "apiVersion": options.version.api_version(),
            "metadata": table_metadata(list_metadata),
            "columnDefinitions": columns,
            "rows": rows,
        })
    }
}

/// A custom resource printer compiled ahead, e.g. to log [`CustomColumns::error`] first.
impl From<CustomColumns> for Printer {
    fn from(c: CustomColumns) -> Printer {
        Printer(Kind::Custom(c))
    }
}

/// `ListMeta` fields that upstream copies into the Table, empty ones omitted.
fn table_metadata(list_metadata: &Value) -> Value {
    let mut out = Map::new();
    for key in ["resourceVersion", "continue"] {
        if let Some(s) = list_metadata
            .get(key)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
        {
            out.insert(key.to_string(), Value::from(s));
        }
    }
    if let Some(n) = list_metadata
        .get("remainingItemCount")
        .filter(|n| n.is_number())
    {
        out.insert("remainingItemCount".to_string(), n.clone());
    }
    Value::Object(out)
}

fn row_json(row: Row, obj: &Value, options: &TableOptions) -> Value {
    let object = match options.include_object {
        IncludeObject::None => Value::Null,
        IncludeObject::Object => obj.clone(),
        IncludeObject::Metadata => partial_object_metadata(obj, options.version),
    };
    let mut out = Map::new();
    out.insert("cells".to_string(), Value::Array(row.cells));
    if !row.conditions.is_empty() {
        out.insert("conditions".to_string(), Value::Array(row.conditions));
    }
    out.insert("object".to_string(), object);
    Value::Object(out)
}

/// The object's metadata as a `PartialObjectMetadata`; Go always writes `creationTimestamp`,
/// as `null` when unset.
pub fn partial_object_metadata(obj: &Value, version: MetaVersion) -> Value {
    let mut metadata = obj
        .get("metadata")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    metadata.entry("creationTimestamp").or_insert(Value::Null);
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": version.api_version(),
        "metadata": metadata,
    })
}

#[cfg(test)]
#[path = "table_tests.rs"]
mod tests;
