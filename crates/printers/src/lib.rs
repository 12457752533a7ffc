//! Server-side Table output: what `kubectl get` shows.
//!
//! kubectl asks for `Accept: application/json;as=Table;v=v1;g=meta.k8s.io`; without a Table
//! it can print only NAME and AGE. This crate renders `meta.k8s.io/v1` Tables the way
//! kube-apiserver does:
//!
//! - **built-in kinds** with the columns and cell rules of upstream's
//!   `pkg/printers/internalversion` (pod STATUS and RESTARTS, service EXTERNAL-IP and PORT(S),
//!   node ROLES, job COMPLETIONS, ...), wide columns included with priority 1;
//! - **custom resources** from their CRD's `additionalPrinterColumns`, with client-go's
//!   JSONPath ([`jsonpath`]);
//! - **everything else** with upstream's default table, `Name` and `Created At`.
//!
//! No I/O and no clock: callers pass objects as stored JSON and the current time.
//!
//! ```
//! use std::time::SystemTime;
//! use printers::{IncludeObject, Printer, TableOptions};
//!
//! let pods = [serde_json::json!({"metadata": {"name": "web"}, "spec": {"containers": [{}]}})];
//! let table = Printer::for_kind("", "Pod").table(
//!     &pods,
//!     SystemTime::now(),
//!     &TableOptions { include_object: IncludeObject::Metadata, ..Default::default() },
//!     &serde_json::json!({"resourceVersion": "42"}),
//! );
//! assert_eq!(table["rows"][0]["cells"][1], "0/1");
//! ```

mod column;
mod custom;
mod format;
mod gotext;
pub mod jsonpath;
mod kinds;
mod meta;
mod table;
mod time;
mod value;

use std::time::SystemTime;

use serde_json::Value;

pub use column::{Column, Row};
pub use custom::CustomColumns;
pub use table::{
    Error, IncludeObject, MetaVersion, Printer, TableOptions, partial_object_metadata,
};
pub use time::{Instant, format_rfc3339_utc, human_duration, parse_rfc3339};

/// The Table columns of a kind (`group` is `""` for the core group): its printer's, or the
/// default `Name`/`Created At`.
pub fn columns(group: &str, kind: &str) -> Vec<Column> {
    Printer::for_kind(group, kind).columns()
}

/// The cells of one object of a kind at time `now`, one per column of [`columns`].
pub fn row(group: &str, kind: &str, obj: &Value, now: SystemTime) -> Vec<Value> {
    Printer::for_kind(group, kind).row(obj, now).cells
}

/// The full Table (`kind: Table`, `columnDefinitions`, `rows`) of objects of a kind.
///
/// `list_metadata` is the list's metadata (`resourceVersion`, `continue`,
/// `remainingItemCount`), or `{"resourceVersion": ...}` of the object for a single get.
pub fn table(
    group: &str,
    kind: &str,
    objects: &[Value],
    now: SystemTime,
    include_object: IncludeObject,
    list_metadata: &Value,
) -> Value {
    let options = TableOptions {
        include_object,
        ..TableOptions::default()
    };
    Printer::for_kind(group, kind).table(objects, now, &options, list_metadata)
}

/// [`table`] without `columnDefinitions`, for every watch event after the first.
pub fn table_without_headers(
    group: &str,
    kind: &str,
    objects: &[Value],
    now: SystemTime,
    include_object: IncludeObject,
    list_metadata: &Value,
) -> Value {
    let options = TableOptions {
        include_object,
        no_headers: true,
        ..TableOptions::default()
    };
    Printer::for_kind(group, kind).table(objects, now, &options, list_metadata)
}

/// The Table columns of a custom resource version from its `additionalPrinterColumns`
/// (`null` or `[]` when it has none): `Name`, then those columns or a single `Age`.
pub fn custom_columns(additional_printer_columns: &Value) -> Vec<Column> {
    CustomColumns::new(additional_printer_columns)
        .columns()
        .to_vec()
}

/// The cells of one custom resource, one per column of [`custom_columns`]. Compile the
/// columns once with [`Printer::for_custom_resource`] when rendering many objects.
pub fn custom_row(additional_printer_columns: &Value, obj: &Value, now: SystemTime) -> Vec<Value> {
    Printer::for_custom_resource(additional_printer_columns)
        .row(obj, now)
        .cells
}
