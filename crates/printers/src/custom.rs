//! Tables for custom resources, from the CRD version's `additionalPrinterColumns`.
//!
//! Mirrors apiextensions-apiserver's table convertor: a `Name` column, then one column per
//! printer column (or a single `Age` column from `.metadata.creationTimestamp` when the CRD
//! defines none). Each cell is the first value the column's JSONPath finds, converted by the
//! column type; nothing found, an evaluation error or a value of the wrong type gives a `null`
//! cell, which kubectl prints as `<none>`. `date` cells are ages (`5m`); `string` cells print
//! any value as client-go's JSONPath would (objects as JSON).
//!
//! A column whose JSONPath does not parse ends the list: upstream keeps the columns before it.

use serde_json::Value;

use crate::column::{AGE_DESC, Column, NAME, Row};
use crate::gotext;
use crate::jsonpath::{JsonPath, JsonPathError, eval_first};
use crate::time::{Instant, human_duration, parse_rfc3339, zero_time};
use crate::value::{opt_int, str_or_empty};

/// The compiled printer columns of one custom resource version.
#[derive(Debug, Clone, PartialEq)]
pub struct CustomColumns {
    /// `Name` first, then one column per path.
    columns: Vec<Column>,
    paths: Vec<JsonPath>,
    /// The first column whose JSONPath did not parse, if any (for logging).
    error: Option<JsonPathError>,
}

impl CustomColumns {
    /// Compiles `spec.versions[].additionalPrinterColumns` (an array, or `null`/absent).
    pub fn new(additional_printer_columns: &Value) -> CustomColumns {
        let defined = additional_printer_columns
            .as_array()
            .filter(|a| !a.is_empty());
        let default_age = [serde_json::json!({
            "name": "Age",
            "type": "date",
            "description": AGE_DESC,
            "jsonPath": ".metadata.creationTimestamp",
        })];
        let specs = defined.map(Vec::as_slice).unwrap_or(&default_age);

        let mut out = CustomColumns {
            columns: vec![NAME.column()],
            paths: Vec::new(),
            error: None,
        };
        for spec in specs {
            let json_path = str_or_empty(spec, &["jsonPath"]);
            let path = match JsonPath::parse(json_path) {
                Ok(p) => p,
                Err(e) => {
                    out.error = Some(e);
                    break;
                }
            };
            let description = match str_or_empty(spec, &["description"]) {
                "" => {
                    format!("Custom resource definition column (in JSONPath format): {json_path}")
                }
                d => d.to_string(),
            };
            out.columns.push(Column {
                name: str_or_empty(spec, &["name"]).to_string(),
                type_: str_or_empty(spec, &["type"]).to_string(),
                format: str_or_empty(spec, &["format"]).to_string(),
                description,
                priority: opt_int(spec, &["priority"])
                    .unwrap_or(0)
                    .clamp(0, i64::from(i32::MAX)) as i32,
            });
            out.paths.push(path);
        }
        out
    }

    /// The column definitions, `Name` first.
    pub fn columns(&self) -> &[Column] {
        &self.columns
    }

    /// The first printer column that failed to parse; it and later columns were dropped.
    pub fn error(&self) -> Option<&JsonPathError> {
        self.error.as_ref()
    }

    pub(crate) fn row(&self, obj: &Value, now: Instant) -> Row {
        let mut cells = Vec::with_capacity(self.columns.len());
        cells.push(Value::from(str_or_empty(obj, &["metadata", "name"])));
        for (path, column) in self.paths.iter().zip(&self.columns[1..]) {
            let cell = match eval_first(path, obj) {
                Ok(Some(value)) => cell(&column.type_, &value, now),
                Ok(None) | Err(_) => Value::Null,
            };
            cells.push(cell);
        }
        Row::new(cells)
    }
}

/// A float cell as Go encodes a `float64`: integral values without a fraction.
fn float_cell(f: f64) -> Value {
    if f.fract() == 0.0 && f.abs() < 9.2e18 {
        Value::from(f as i64)
    } else {
        Value::from(f)
    }
}

/// Converts a found value to a cell of the column's type (`cellForJSONValue`).
fn cell(type_: &str, value: &Value, now: Instant) -> Value {
    match (type_, value) {
        ("string", v) => Value::String(gotext::print(v)),
        ("integer", Value::Number(n)) => match gotext::number_kind(n) {
            Ok(i) => Value::from(i),
            Err(f) => Value::from(f as i64),
        },
        ("number", Value::Number(n)) => match gotext::number_kind(n) {
            Ok(i) => float_cell(i as f64),
            Err(f) => float_cell(f),
        },
        ("boolean", Value::Bool(b)) => Value::Bool(*b),
        ("date", Value::String(s)) => {
            if s.is_empty() || s == "null" {
                return Value::from("<unknown>");
            }
            match parse_rfc3339(s) {
                None => Value::from("<invalid>"),
                Some(t) if t == zero_time() => Value::from("<unknown>"),
                Some(t) => Value::from(human_duration(now.since(t))),
            }
        }
        _ => Value::Null,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn now() -> Instant {
        parse_rfc3339("2024-05-01T12:00:00Z").unwrap()
    }

    fn widget() -> Value {
        json!({
            "apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": "w1", "creationTimestamp": "2024-05-01T11:55:00Z"},
            "spec": {"size": 3, "ratio": 0.5, "enabled": true, "tags": ["a", "b"], "labels": {"x": "<y>"}},
            "status": {"conditions": [
                {"type": "Synced", "status": "True", "lastTransitionTime": "2024-05-01T11:59:00Z"},
                {"type": "Ready", "status": "False", "reason": "Provisioning"}
            ]}
        })
    }

    fn columns(apc: Value) -> CustomColumns {
        CustomColumns::new(&apc)
    }

    #[test]
    fn no_printer_columns_means_name_and_age() {
        let c = columns(Value::Null);
        let names: Vec<&str> = c.columns().iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["Name", "Age"]);
        assert_eq!(c.columns()[1].type_, "date");
        assert_eq!(
            c.row(&widget(), now()).cells,
            vec![json!("w1"), json!("5m")]
        );
        assert_eq!(columns(json!([])).columns().len(), 2);
    }

    #[test]
    fn typed_columns_convert_their_first_value() {
        let c = columns(json!([
            {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
            {"name": "Ratio", "type": "number", "jsonPath": ".spec.ratio", "priority": 1},
            {"name": "Enabled", "type": "boolean", "jsonPath": ".spec.enabled"},
            {"name": "Tag", "type": "string", "jsonPath": ".spec.tags[*]"},
            {"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status"},
            {"name": "Reason", "type": "string", "jsonPath": ".status.conditions[?(@.type!=\"Synced\")].reason"},
            {"name": "Synced", "type": "date", "jsonPath": ".status.conditions[?(@.type=='Synced')].lastTransitionTime"},
            {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
        ]));
        assert!(c.error().is_none());
        assert_eq!(c.columns()[2].priority, 1);
        assert_eq!(
            c.columns()[1].description,
            "Custom resource definition column (in JSONPath format): .spec.size"
        );
        assert_eq!(
            c.row(&widget(), now()).cells,
            vec![
                json!("w1"),
                json!(3),
                json!(0.5),
                json!(true),
                json!("a"),
                json!("False"),
                json!("Provisioning"),
                json!("60s"),
                json!("5m")
            ]
        );
    }

    #[test]
    fn missing_and_mistyped_values_are_null_cells() {
        let c = columns(json!([
            {"name": "Missing", "type": "string", "jsonPath": ".spec.nothing"},
            {"name": "WrongType", "type": "integer", "jsonPath": ".spec.enabled"},
            {"name": "BadIndex", "type": "string", "jsonPath": ".spec.tags[9]"},
            {"name": "Healthy", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Healthy\")].status"},
            {"name": "NotDate", "type": "date", "jsonPath": ".spec.size"}
        ]));
        assert_eq!(
            c.row(&widget(), now()).cells[1..],
            [
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null
            ]
        );
    }

    #[test]
    fn string_columns_print_numbers_and_objects_like_go() {
        let c = columns(json!([
            {"name": "Size", "type": "string", "jsonPath": ".spec.size"},
            {"name": "Labels", "type": "string", "jsonPath": ".spec.labels"},
            {"name": "Tags", "type": "string", "jsonPath": ".spec.tags"},
            {"name": "Size", "type": "number", "jsonPath": ".spec.size"}
        ]));
        assert_eq!(
            c.row(&widget(), now()).cells[1..],
            [
                json!("3"),
                json!("{\"x\":\"\\u003cy\\u003e\"}"),
                json!("[\"a\",\"b\"]"),
                json!(3)
            ]
        );
    }

    #[test]
    fn unparsable_dates_say_invalid_and_empty_ones_unknown() {
        let obj = json!({"metadata": {"name": "d"}, "a": "yesterday", "b": "", "c": "0001-01-01T00:00:00Z"});
        let c = columns(json!([
            {"name": "A", "type": "date", "jsonPath": ".a"},
            {"name": "B", "type": "date", "jsonPath": ".b"},
            {"name": "C", "type": "date", "jsonPath": ".c"}
        ]));
        assert_eq!(
            c.row(&obj, now()).cells[1..],
            [json!("<invalid>"), json!("<unknown>"), json!("<unknown>")]
        );
    }

    #[test]
    fn an_invalid_column_drops_it_and_the_ones_after() {
        let c = columns(json!([
            {"name": "Size", "type": "integer", "jsonPath": ".spec.size", "description": "How big."},
            {"name": "Broken", "type": "string", "jsonPath": ".spec[unclosed"},
            {"name": "Later", "type": "string", "jsonPath": ".spec.size"}
        ]));
        let names: Vec<&str> = c.columns().iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["Name", "Size"]);
        assert_eq!(c.columns()[1].description, "How big.");
        assert!(c.error().is_some());
        assert_eq!(c.row(&widget(), now()).cells, vec![json!("w1"), json!(3)]);
    }
}
