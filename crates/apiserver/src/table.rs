//! Table output (`kubectl get`): columns and rows rendered by the `printers` crate, with the
//! built-in printer of a kind or a custom resource's printer columns.

use printers::{IncludeObject, MetaVersion, Printer, TableOptions};
use registry::{Printer as Columns, ResourceDef};
use serde_json::Value;

use crate::server::Ctx;

/// The Table of `objs`. `with_columns` is false for watch events after the first.
pub fn table(
    res: &ResourceDef,
    objs: &[Value],
    ctx: &Ctx,
    metadata: Value,
    with_columns: bool,
) -> Value {
    let include =
        IncludeObject::parse(ctx.query.get("includeObject")).unwrap_or(IncludeObject::Metadata);
    let version = if ctx
        .header("accept")
        .is_some_and(|a| a.contains("as=Table;v=v1beta1") && !a.contains("as=Table;v=v1;"))
    {
        MetaVersion::V1Beta1
    } else {
        MetaVersion::V1
    };
    let printer = match &res.printer {
        Columns::Builtin => Printer::for_kind(&res.group, &res.kind),
        Columns::Custom(cols) => Printer::for_custom_resource(cols),
    };
    let opts = TableOptions {
        include_object: include,
        no_headers: !with_columns,
        version,
    };
    printer.table(objs, std::time::SystemTime::now(), &opts, &metadata)
}
