//! Column definitions (`TableColumnDefinition`) and the row type printers produce.
//!
//! Built-in printers describe their columns with static [`Def`]s; custom resources build
//! [`Column`]s from their CRD. Names, types, formats and priorities are upstream's exactly
//! (kubectl shows priority > 0 columns only with `-o wide`); descriptions are written for this
//! project, since no client reads them.

use serde_json::{Value, json};

/// One column of a Table, as `columnDefinitions` carries it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    /// Human-readable column name; kubectl upper-cases it for the header.
    pub name: String,
    /// OpenAPI type of the cells: `string`, `integer`, `number`, `boolean` or `date`.
    pub type_: String,
    /// OpenAPI format; `name` marks the column holding the object's name.
    pub format: String,
    pub description: String,
    /// 0 for default output, higher for `-o wide` only.
    pub priority: i32,
}

impl Column {
    /// The column as JSON: `{"name","type","format","description","priority"}`, every field
    /// present as upstream serializes it.
    pub fn to_json(&self) -> Value {
        json!({
            "name": self.name,
            "type": self.type_,
            "format": self.format,
            "description": self.description,
            "priority": self.priority,
        })
    }
}

/// A static column definition of a built-in printer.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Def {
    pub name: &'static str,
    pub type_: &'static str,
    pub format: &'static str,
    pub priority: i32,
    pub description: &'static str,
}

impl Def {
    pub(crate) fn column(&self) -> Column {
        Column {
            name: self.name.to_string(),
            type_: self.type_.to_string(),
            format: self.format.to_string(),
            description: self.description.to_string(),
            priority: self.priority,
        }
    }
}

/// A `string` column shown by default.
pub(crate) const fn s(name: &'static str, description: &'static str) -> Def {
    Def {
        name,
        type_: "string",
        format: "",
        priority: 0,
        description,
    }
}

/// An `integer` column shown by default.
pub(crate) const fn i(name: &'static str, description: &'static str) -> Def {
    Def {
        name,
        type_: "integer",
        format: "",
        priority: 0,
        description,
    }
}

/// A `boolean` column shown by default.
pub(crate) const fn b(name: &'static str, description: &'static str) -> Def {
    Def {
        name,
        type_: "boolean",
        format: "",
        priority: 0,
        description,
    }
}

/// A `string` column shown only with `-o wide`.
pub(crate) const fn wide(name: &'static str, description: &'static str) -> Def {
    Def {
        name,
        type_: "string",
        format: "",
        priority: 1,
        description,
    }
}

pub(crate) const NAME_DESC: &str =
    "Name of the object, unique among objects of its kind in its namespace (or in the cluster).";
pub(crate) const AGE_DESC: &str = "Time since the object was created (metadata.creationTimestamp).";

/// The `Name` column every printer starts with (format `name`).
pub(crate) const NAME: Def = Def {
    name: "Name",
    type_: "string",
    format: "name",
    priority: 0,
    description: NAME_DESC,
};
/// The `Age` column.
pub(crate) const AGE: Def = s("Age", AGE_DESC);
/// Wide `Containers`, `Images` and `Selector` columns of workload printers.
pub(crate) const CONTAINERS: Def =
    wide("Containers", "Names of the containers in the pod template.");
pub(crate) const IMAGES: Def = wide("Images", "Images of the containers in the pod template.");
pub(crate) const SELECTOR: Def = wide(
    "Selector",
    "Label selector of the pods this object manages.",
);

/// One printed row: its cells and, for finished pods, row conditions.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Row {
    /// One cell per column: strings, integers, booleans, numbers or `null`.
    pub cells: Vec<Value>,
    /// `TableRowCondition`s (`{"type":"Completed","status":"True",...}`), usually empty.
    pub conditions: Vec<Value>,
}

impl Row {
    pub(crate) fn new(cells: Vec<Value>) -> Row {
        Row {
            cells,
            conditions: Vec::new(),
        }
    }
}

/// Builds a cell list from heterogeneous values (`&str`, `String`, `i64`, `bool`).
macro_rules! cells {
    ($($cell:expr),* $(,)?) => {
        vec![$(serde_json::Value::from($cell)),*]
    };
}
pub(crate) use cells;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_serialize_every_field() {
        let c = NAME.column();
        assert_eq!(
            c.to_json(),
            json!({"name": "Name", "type": "string", "format": "name", "description": NAME_DESC, "priority": 0})
        );
        assert_eq!(CONTAINERS.column().priority, 1);
    }

    #[test]
    fn cells_macro_converts_each_value() {
        let row: Vec<Value> = cells!["a", 2i64, true, String::from("b")];
        assert_eq!(row, vec![json!("a"), json!(2), json!(true), json!("b")]);
    }
}
