//! The generator of `src/table.rs`, run as a test so that a stale table fails CI (rust-analyzer's
//! sourcegen pattern).
//!
//! Inputs, all from dependencies or our own files:
//! - k8s-pb 0.9.0's prost-generated sources in the cargo registry (Kubernetes 1.35.0 protos): every
//!   message, its field tags and protobuf types;
//! - `gofacts/gofacts-1.35.txt` (our extraction from the Go structs, see `gofacts/extract.py`): per
//!   field tag the exact JSON name and whether the Go field is a pointer, lacks `omitempty`, or is
//!   inlined;
//! - k8s-openapi 0.29.0's `v1_35` sources, when present in the registry: a cross-check that every JSON
//!   name matches the OpenAPI property names.
//!
//! Every k8s-pb field must be resolved; anything unexpected fails loudly. Run with
//! `PBCODEC_REGENERATE=1 cargo test -p pbcodec --test sourcegen` to rewrite the table.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// k8s-pb packages the table covers (the Kubernetes API types); metrics, the aggregator and the
/// apimachinery test group are left out.
const ROOTS: &[&str] = &["api", "apimachinery", "apiextensions_apiserver"];
const SKIP: &[&str] = &["apimachinery.pkg.apis.testapigroup"];

/// Messages with a custom Go JSON form, or with no Go struct of their own.
const SPECIAL: &[(&str, &str)] = &[
    ("apimachinery.pkg.apis.meta.v1.Time", "Time"),
    ("apimachinery.pkg.apis.meta.v1.MicroTime", "MicroTime"),
    ("apimachinery.pkg.apis.meta.v1.Duration", "Duration"),
    ("apimachinery.pkg.api.resource.Quantity", "Quantity"),
    ("apimachinery.pkg.api.resource.QuantityValue", "Quantity"),
    ("apimachinery.pkg.util.intstr.IntOrString", "IntOrString"),
    ("apimachinery.pkg.runtime.RawExtension", "RawJson"),
    ("apimachinery.pkg.apis.meta.v1.FieldsV1", "RawJson"),
    (
        "apiextensions_apiserver.pkg.apis.apiextensions.v1.JSON",
        "RawJson",
    ),
    (
        "apiextensions_apiserver.pkg.apis.apiextensions.v1beta1.JSON",
        "RawJson",
    ),
    (
        "apiextensions_apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrArray",
        "SchemaOrArray",
    ),
    (
        "apiextensions_apiserver.pkg.apis.apiextensions.v1beta1.JSONSchemaPropsOrArray",
        "SchemaOrArray",
    ),
    (
        "apiextensions_apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrBool",
        "SchemaOrBool",
    ),
    (
        "apiextensions_apiserver.pkg.apis.apiextensions.v1beta1.JSONSchemaPropsOrBool",
        "SchemaOrBool",
    ),
    (
        "apiextensions_apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrStringArray",
        "SchemaOrStringArray",
    ),
    (
        "apiextensions_apiserver.pkg.apis.apiextensions.v1beta1.JSONSchemaPropsOrStringArray",
        "SchemaOrStringArray",
    ),
];

/// Go named types defined as another struct (`type MatchCondition v1.MatchCondition`): same facts.
const ALIASES: &[(&str, &str)] = &[
    (
        "api.admissionregistration.v1alpha1.MatchCondition",
        "api.admissionregistration.v1.MatchCondition",
    ),
    ("api.core.v1.List", "apimachinery.pkg.apis.meta.v1.List"),
];

/// Go `[]string` types serialized by go-to-protobuf as `{repeated string items = 1}`.
const STRING_LISTS: &[&str] = &["Verbs", "ExtraValue", "OptionalNames"];

/// Special messages whose fields are only read by the envelope or are deprecated; not in the table.
const IGNORED: &[&str] = &[
    "apimachinery.pkg.runtime.Unknown",
    "apimachinery.pkg.runtime.TypeMeta",
    "apimachinery.pkg.apis.meta.v1.Fields",
    "apimachinery.pkg.apis.meta.v1.Timestamp",
];

struct PbField {
    rust: String,
    tag: u32,
    ty: String,
    label: String,
    rust_type: String,
}

struct PbMessage {
    module: Vec<String>,
    rust: String,
    fields: Vec<PbField>,
}

#[test]
fn table_is_fresh() {
    // k8s-pb is a dev-dependency: building this test fetched its sources, so their absence is
    // a broken setup, not a reason to leave the table unchecked.
    let registry = registry_dir("k8s-pb-0.9.0").unwrap_or_else(|| {
        panic!(
            "k8s-pb 0.9.0 sources are not under $CARGO_HOME/registry/src: the table cannot be checked"
        )
    });
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut facts = parse_facts(&read(&manifest.join("gofacts/gofacts-1.35.txt")));
    for (alias, target) in ALIASES {
        let target = facts
            .get(*target)
            .cloned()
            .expect("alias target has Go facts");
        facts.insert(alias.to_string(), target);
    }
    let mut messages = Vec::new();
    for root in ROOTS {
        walk(
            &registry.join("src").join(root),
            &[root.to_string()],
            &mut messages,
        );
    }
    let openapi = registry_dir("k8s-openapi-0.29.0").map(|d| parse_openapi(&d.join("src/v1_35")));
    let table = generate(&messages, &facts, openapi.as_ref());
    let path = manifest.join("src/table.rs");
    let current = std::fs::read_to_string(&path).unwrap_or_default();
    if current != table {
        if std::env::var_os("PBCODEC_REGENERATE").is_some() {
            std::fs::write(&path, &table).expect("write src/table.rs");
        } else {
            panic!(
                "src/table.rs is stale: run `PBCODEC_REGENERATE=1 cargo test -p pbcodec --test sourcegen`"
            );
        }
    }
}

fn registry_dir(name: &str) -> Option<PathBuf> {
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))?;
    let src = std::fs::read_dir(home.join("registry/src")).ok()?;
    let mut found: Vec<PathBuf> = src
        .filter_map(|e| e.ok())
        .map(|e| e.path().join(name))
        .filter(|p| p.is_dir())
        .collect();
    found.sort();
    found.pop()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// Go facts: message name -> tag -> (json name, flags).
type Facts = HashMap<String, BTreeMap<u32, (String, String)>>;

fn parse_facts(text: &str) -> Facts {
    let mut facts = Facts::new();
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let mut parts = line.split(' ');
        let name = parts.next().expect("message name").to_string();
        let mut fields = BTreeMap::new();
        for part in parts {
            let (tag, rest) = part.split_once(':').expect("tag:json");
            let json = rest.trim_end_matches(['*', '!', '^', '~']);
            let flags = &rest[json.len()..];
            fields.insert(
                tag.parse().expect("tag"),
                (json.to_string(), flags.to_string()),
            );
        }
        facts.insert(name, fields);
    }
    facts
}

/// Walks k8s-pb's module tree and collects the messages.
fn walk(dir: &Path, module: &[String], out: &mut Vec<PbMessage>) {
    if SKIP.contains(&module.join(".").as_str()) {
        return;
    }
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("read k8s-pb dir")
        .filter_map(|e| e.ok())
        .collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let path = entry.path();
        if path.is_dir() {
            let mut sub = module.to_vec();
            sub.push(entry.file_name().to_string_lossy().into_owned());
            walk(&path, &sub, out);
        } else if entry.file_name() == "mod.rs" {
            parse_module(&read(&path), module, out);
        }
    }
}

fn parse_module(text: &str, module: &[String], out: &mut Vec<PbMessage>) {
    let mut current: Option<PbMessage> = None;
    let mut attr: Option<String> = None;
    let mut pending: Option<(String, String)> = None; // (attr, accumulated declaration)
    for line in text.lines() {
        let trimmed = line.trim();
        if let Some(name) = line.strip_prefix("pub struct ") {
            let message = PbMessage {
                module: module.to_vec(),
                rust: name
                    .trim_end_matches("{}")
                    .trim_end_matches('{')
                    .trim()
                    .to_string(),
                fields: Vec::new(),
            };
            if name.ends_with("{}") {
                out.push(message);
            } else {
                current = Some(message);
            }
            continue;
        }
        let Some(msg) = current.as_mut() else {
            continue;
        };
        if line == "}" {
            out.push(current.take().expect("message"));
            continue;
        }
        if let Some((a, mut decl)) = pending.take() {
            decl.push_str(trimmed);
            if complete(&decl) {
                msg.fields.push(parse_field(&a, &decl));
            } else {
                pending = Some((a, decl));
            }
            continue;
        }
        if trimmed.starts_with("#[prost(") {
            attr = Some(trimmed.to_string());
        } else if trimmed.starts_with("pub ") {
            let a = attr.take().expect("field without a prost attribute");
            if complete(trimmed) {
                msg.fields.push(parse_field(&a, trimmed));
            } else {
                pending = Some((a, trimmed.to_string()));
            }
        }
    }
}

/// A field declaration is complete at a trailing comma outside any `<...>`.
fn complete(decl: &str) -> bool {
    decl.ends_with(',') && decl.matches('<').count() == decl.matches('>').count()
}

fn parse_field(attr: &str, decl: &str) -> PbField {
    let inner = attr.trim_start_matches("#[prost(").trim_end_matches(")]");
    let tag = inner
        .split("tag = \"")
        .nth(1)
        .and_then(|t| t.split('"').next())
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("no tag in {attr}"));
    let (ty, label) = if let Some(map) = inner.strip_prefix("btree_map = \"") {
        let kv = map.split('"').next().expect("map types");
        (format!("map<{kv}>"), "repeated".to_string())
    } else {
        let parts: Vec<&str> = inner.split(", ").collect();
        let ty = parts[0].split(' ').next().expect("type").to_string();
        let label = parts
            .iter()
            .find(|p| ["optional", "repeated", "required"].contains(p))
            .unwrap_or_else(|| panic!("no label in {attr}"));
        (ty, label.to_string())
    };
    let decl = decl.trim_start_matches("pub ").trim_end_matches(',');
    let (rust, rust_type) = decl.split_once(':').expect("field declaration");
    PbField {
        rust: rust.trim().trim_start_matches("r#").to_string(),
        tag,
        ty,
        label,
        rust_type: rust_type.trim().to_string(),
    }
}

/// k8s-openapi: definition name -> JSON property names.
fn parse_openapi(dir: &Path) -> HashMap<String, BTreeSet<String>> {
    let mut out = HashMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d)
            .expect("read k8s-openapi dir")
            .flatten()
        {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let text = read(&path);
            let Some(def) = text
                .lines()
                .find_map(|l| l.strip_prefix("// Generated from definition "))
            else {
                continue;
            };
            let props = text
                .lines()
                .filter(|l| l.contains("\" => Field::Key_"))
                .filter_map(|l| l.trim().strip_prefix('"')?.split('"').next())
                .map(str::to_string)
                .collect();
            out.insert(def.trim().to_string(), props);
        }
    }
    out
}

fn normalize(name: &str) -> String {
    name.chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

/// Resolves a Rust type path inside `module` to (module path, Rust struct name).
fn resolve(module: &[String], path: &str) -> (Vec<String>, String) {
    let mut module = module.to_vec();
    let mut segments: Vec<&str> = path.split("::").collect();
    let name = segments.pop().expect("type name").to_string();
    for seg in segments {
        if seg == "super" {
            module.pop();
        } else {
            module.push(seg.to_string());
        }
    }
    (module, name)
}

/// The innermost message type of a Rust field type (`Option<Vec<Box<T>>>`, `BTreeMap<String, T>`).
fn message_path(rust_type: &str) -> String {
    let mut t = rust_type.replace(' ', "");
    for wrapper in [
        "::core::option::Option<",
        "::prost::alloc::vec::Vec<",
        "::prost::alloc::boxed::Box<",
    ] {
        if let Some(inner) = t.strip_prefix(wrapper) {
            t = inner.trim_end_matches(['>', ',']).to_string();
        }
    }
    if let Some(map) = t.strip_prefix("::prost::alloc::collections::BTreeMap<") {
        let value = map.trim_end_matches(['>', ',']);
        let value = value.rsplit_once(',').expect("map value").1;
        t = value.trim_end_matches(['>', ',']).to_string();
    }
    t
}

fn openapi_definition(message: &str) -> String {
    let message = message.replacen("apiextensions_apiserver.", "apiextensions-apiserver.", 1);
    format!("io.k8s.{message}")
}

fn generate(
    pb: &[PbMessage],
    facts: &Facts,
    openapi: Option<&HashMap<String, BTreeSet<String>>>,
) -> String {
    let mut errors = Vec::new();
    // Name every k8s-pb struct with its proto (Go) name, matched case-insensitively in its package.
    let mut go_names: HashMap<String, Vec<&String>> = HashMap::new();
    for name in facts.keys() {
        let (pkg, short) = name.rsplit_once('.').expect("qualified name");
        go_names
            .entry(format!("{pkg}.{}", short.to_lowercase()))
            .or_default()
            .push(name);
    }
    let specials: Vec<String> = SPECIAL
        .iter()
        .map(|(n, _)| n.to_string())
        .chain(IGNORED.iter().map(|n| n.to_string()))
        .filter(|n| !facts.contains_key(n))
        .collect();
    for special in &specials {
        let (pkg, short) = special.rsplit_once('.').expect("qualified name");
        let key = format!("{pkg}.{}", short.to_lowercase());
        go_names.entry(key).or_default().push(special);
    }
    let mut names: HashMap<(Vec<String>, String), String> = HashMap::new();
    for msg in pb {
        let pkg = msg.module.join(".");
        let key = format!("{pkg}.{}", msg.rust.to_lowercase());
        let name = match go_names.get(&key).map(Vec::as_slice) {
            Some([one]) => one.to_string(),
            Some(many) => {
                errors.push(format!("{key}: ambiguous Go names {many:?}"));
                continue;
            }
            None if STRING_LISTS.contains(&msg.rust.as_str()) || msg.fields.is_empty() => {
                format!("{pkg}.{}", msg.rust)
            }
            None => {
                errors.push(format!(
                    "{pkg}.{}: no Go facts and not a known special message",
                    msg.rust
                ));
                continue;
            }
        };
        names.insert((msg.module.clone(), msg.rust.clone()), name);
    }
    let mut table: Vec<(String, &PbMessage)> = pb
        .iter()
        .filter_map(|m| Some((names.get(&(m.module.clone(), m.rust.clone()))?.clone(), m)))
        .filter(|(name, _)| !IGNORED.contains(&name.as_str()))
        .collect();
    table.sort_by(|a, b| a.0.cmp(&b.0));
    let index: HashMap<&str, usize> = table
        .iter()
        .enumerate()
        .map(|(i, (n, _))| (n.as_str(), i))
        .collect();

    let mut out = String::new();
    out.push_str(HEADER);
    let mut checked = 0usize;
    for (i, (name, msg)) in table.iter().enumerate() {
        let shape = SPECIAL
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, s)| *s)
            .unwrap_or(if STRING_LISTS.contains(&msg.rust.as_str()) {
                "StringList"
            } else {
                "Object"
            });
        let go = facts.get(name);
        let props = openapi.and_then(|o| o.get(&openapi_definition(name)));
        let mut fields = String::new();
        for field in &msg.fields {
            let kind = match (field.ty.as_str(), field.label.as_str()) {
                ("map<string, string>", _) => "MapStr".to_string(),
                ("map<string, bytes>", _) => "MapBytes".to_string(),
                ("string", _) => "Str".into(),
                ("bytes", _) => "Bytes".into(),
                ("bool", _) => "Bool".into(),
                ("int32", _) => "I32".into(),
                ("int64", _) => "I64".into(),
                ("double", _) => "F64".into(),
                (ty, _) if ty == "message" || ty == "map<string, message>" => {
                    let (module, rust) = resolve(&msg.module, &message_path(&field.rust_type));
                    let Some(target) = names.get(&(module.clone(), rust.clone())) else {
                        errors.push(format!(
                            "{name}.{}: unresolved type {}",
                            field.rust, field.rust_type
                        ));
                        continue;
                    };
                    let Some(&t) = index.get(target.as_str()) else {
                        errors.push(format!(
                            "{name}.{}: type {target} is not in the table",
                            field.rust
                        ));
                        continue;
                    };
                    if ty == "message" {
                        format!("Msg({t})")
                    } else {
                        format!("MapMsg({t})")
                    }
                }
                (ty, _) => {
                    errors.push(format!(
                        "{name}.{}: unsupported protobuf type {ty}",
                        field.rust
                    ));
                    continue;
                }
            };
            let (json, flags) = match go.and_then(|g| g.get(&field.tag)) {
                _ if shape != "Object" => (camel(&field.rust), "!".to_string()),
                Some((json, flags)) => (json.clone(), flags.clone()),
                None => {
                    errors.push(format!(
                        "{name}.{} (tag {}): missing from the Go facts",
                        field.rust, field.tag
                    ));
                    continue;
                }
            };
            let inline = flags.contains('^');
            if !inline && normalize(&json) != normalize(&field.rust) {
                errors.push(format!(
                    "{name}.{}: Go JSON name {json} does not match",
                    field.rust
                ));
            }
            if let (Some(props), false) = (props, inline) {
                if props.contains(&json) || shape != "Object" {
                    checked += 1;
                } else {
                    errors.push(format!(
                        "{name}.{json}: not a property of k8s-openapi's definition"
                    ));
                }
            }
            let scalar = !kind.starts_with("Msg") && !kind.starts_with("Map");
            let mode = if field.label == "repeated" {
                "R"
            } else if inline {
                "I"
            } else if flags.contains('*') || (flags.contains('!') && !flags.contains('~')) {
                "K"
            } else if scalar || flags.contains('~') {
                "D"
            } else {
                "K"
            };
            let _ = write!(fields, "f({}, {:?}, {kind}, {mode}), ", field.tag, json);
        }
        let fields = fields.trim_end_matches(", ");
        let _ = writeln!(out, "    m({name:?}, {shape}, &[{fields}]), // {i}");
    }
    out.push_str("];\n");
    match openapi {
        Some(_) => eprintln!("checked {checked} JSON names against k8s-openapi 0.29.0 (v1_35)"),
        // The workspace depends on k8s-openapi: its sources are fetched whenever this builds.
        None => errors.push(
            "k8s-openapi 0.29.0 sources are not under $CARGO_HOME/registry/src: names were not cross-checked"
                .to_string(),
        ),
    }
    if openapi.is_some() && checked < 2000 {
        errors.push(format!(
            "only {checked} names were checked against k8s-openapi"
        ));
    }
    assert!(
        errors.is_empty(),
        "the table cannot be generated:\n{}",
        errors.join("\n")
    );
    out
}

/// snake_case -> camelCase for the few special messages without Go facts (their fields are only
/// read by the codec's special cases, never emitted under these names).
fn camel(snake: &str) -> String {
    let mut out = String::new();
    let mut upper = false;
    for c in snake.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.push(c.to_ascii_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

const HEADER: &str = "\
//! The message table: every Kubernetes API protobuf message with its fields (generated).
//!
//! @generated by `PBCODEC_REGENERATE=1 cargo test -p pbcodec --test sourcegen` from k8s-pb 0.9.0
//! (the Kubernetes 1.35.0 protos), `gofacts/gofacts-1.35.txt` (JSON names and Go pointer /
//! omitempty / inline facts) and a name check against k8s-openapi 0.29.0 (`v1_35`). Do not edit;
//! the `sourcegen` test fails when this file is stale. Each entry: `m(name, shape, fields)`, each
//! field `f(tag, jsonName, kind, mode)`; `Msg(n)` refers to the n-th entry (the trailing comment).

use crate::message::Kind::*;
use crate::message::Mode::*;
use crate::message::Shape::*;
use crate::message::{Message, f, m};

#[rustfmt::skip]
pub(crate) static MESSAGES: &[Message] = &[
";
