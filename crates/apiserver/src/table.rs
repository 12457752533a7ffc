//! Table output (`kubectl get`): columns and rows for an object list.

use registry::ResourceDef;
use serde_json::{Value, json};

use crate::server::Ctx;

/// The Table of `objs`. `with_columns` is false for watch events after the first.
pub fn table(res: &ResourceDef, objs: &[Value], ctx: &Ctx, metadata: Value, with_columns: bool) -> Value {
    let include = ctx.query.get("includeObject").unwrap_or("Metadata");
    let now = registry::store::unix_now();
    let rows: Vec<Value> = objs
        .iter()
        .map(|o| {
            let object = match include {
                "None" => Value::Null,
                "Object" => o.clone(),
                _ => json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": o.get("metadata").cloned().unwrap_or(json!({}))}),
            };
            let mut row = json!({"cells": default_cells(o, now)});
            if !object.is_null() {
                row["object"] = object;
            }
            row
        })
        .collect();
    let mut t = json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": metadata, "rows": rows});
    if with_columns {
        t["columnDefinitions"] = json!([
            {"name": "Name", "type": "string", "format": "name", "description": "Name must be unique within a namespace.", "priority": 0},
            {"name": "Created At", "type": "date", "format": "", "description": "CreationTimestamp is a timestamp representing the server time when this object was created.", "priority": 0},
        ]);
    }
    let _ = res;
    t
}

fn default_cells(o: &Value, _now: i64) -> Value {
    json!([apimachinery::meta::name(o), o.pointer("/metadata/creationTimestamp").cloned().unwrap_or(Value::Null)])
}
