//! Prints how long it takes to build every built-in structural schema, every built-in OpenAPI
//! document and one custom resource document, and how large the documents are.
//!
//! `cargo run -p openapi --example build_time` (add `--release` for the optimized figure).

use std::time::Instant;

fn main() {
    let start = Instant::now();
    let deployment = openapi::builtin_schema("apps", "v1", "Deployment");
    let schemas = start.elapsed();
    assert!(deployment.is_some());

    let start = Instant::now();
    let docs = openapi::builtin_documents();
    let documents = start.elapsed();
    let bytes: usize = docs.values().map(|d| d.bytes().len()).sum();

    let schema = serde_json::json!({"type": "object", "properties": {
        "spec": {"type": "object", "properties": {"size": {"type": "integer"}}}}});
    let start = Instant::now();
    let custom = openapi::custom_resource_document(&[openapi::CustomResource {
        group: "example.com",
        version: "v1",
        kind: "Widget",
        list_kind: "WidgetList",
        plural: "widgets",
        namespaced: true,
        schema: &schema,
        status_subresource: true,
        scale_subresource: true,
    }]);
    let one_custom = start.elapsed();

    println!("definitions + structural schemas of every built-in kind: {schemas:?}");
    println!(
        "{} built-in OpenAPI v3 documents ({} KiB): {documents:?}",
        docs.len(),
        bytes / 1024
    );
    let rss = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS"))
                .map(str::to_string)
        })
        .unwrap_or_default();
    println!("resident memory after building everything: {rss}");
    println!(
        "one custom resource document ({} KiB): {one_custom:?}",
        custom.bytes().len() / 1024
    );
}
