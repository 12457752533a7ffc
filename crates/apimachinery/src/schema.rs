//! Structural schemas: the one model of an object's shape.
//!
//! Built-in kinds get theirs from k8s-openapi's generated schemas plus the project's own tables
//! of patch strategies and list types; custom resources get theirs from the CRD's
//! `openAPIV3Schema`. Everything that needs to know an object's shape walks a [`Schema`]:
//! strategic merge patch (patch strategy, merge key), server-side apply (list and map types),
//! pruning and strict decoding (known fields), defaulting, protobuf, OpenAPI and `explain`.
//!
//! Schemas are trees shared through `Arc`; the one recursive upstream type (a CRD's
//! `JSONSchemaProps`) is cut at the recursion point and treated as [`Type::Any`].

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

/// A shared schema node.
pub type SchemaRef = Arc<Schema>;

/// A JSON value's type as Go's `encoding/json` names it in errors (`cannot unmarshal string
/// into ...`).
pub fn json_type_name(v: &serde_json::Value) -> &'static str {
    use serde_json::Value;
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// The JSON type of a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Type {
    Object,
    Array,
    String,
    Integer,
    Number,
    Boolean,
    /// `x-kubernetes-int-or-string`: an integer or a string (IntOrString, Quantity).
    IntOrString,
    /// Anything: no type given and unknown fields preserved (RawExtension, `JSON`, a cut cycle).
    #[default]
    Any,
}

/// `x-kubernetes-list-type`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ListType {
    /// Replaced as a whole (the default for lists without a merge key).
    #[default]
    Atomic,
    /// Scalars, merged as a set.
    Set,
    /// Objects identified by `x-kubernetes-list-map-keys`.
    Map(Vec<String>),
}

/// `x-kubernetes-map-type` (and the struct/map granularity of objects).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MapType {
    #[default]
    Granular,
    Atomic,
}

/// One `x-kubernetes-patch-strategy` entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchStrategy {
    Merge,
    RetainKeys,
    Replace,
}

/// `x-kubernetes-group-version-kind`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Gvk {
    pub group: String,
    pub version: String,
    pub kind: String,
}

/// A structural schema node.
#[derive(Debug, Clone, Default)]
pub struct Schema {
    pub ty: Type,
    pub description: String,
    pub format: Option<String>,
    pub nullable: bool,
    pub default: Option<Value>,
    /// Object fields (a struct).
    pub properties: BTreeMap<String, SchemaRef>,
    /// Map values (`additionalProperties`), for objects used as maps.
    pub additional_properties: Option<SchemaRef>,
    pub required: Vec<String>,
    pub map_type: MapType,
    /// `x-kubernetes-preserve-unknown-fields`: fields not in `properties` are kept.
    pub preserve_unknown_fields: bool,
    /// `x-kubernetes-embedded-resource`: an object with apiVersion, kind and metadata.
    pub embedded_resource: bool,
    /// Array items.
    pub items: Option<SchemaRef>,
    pub list_type: ListType,
    /// `x-kubernetes-patch-strategy` (comma-separated upstream, e.g. `merge,retainKeys`).
    pub patch_strategy: Vec<PatchStrategy>,
    /// `x-kubernetes-patch-merge-key`.
    pub patch_merge_key: Option<String>,
    /// Set on top-level kinds.
    pub gvk: Vec<Gvk>,
    /// The definition name this node came from (`io.k8s.api.core.v1.PodSpec`), if any.
    pub definition: Option<String>,
}

impl Schema {
    /// The schema of a field of this object, or of a map value when the object is a map.
    pub fn field(&self, name: &str) -> Option<&SchemaRef> {
        self.properties
            .get(name)
            .or(self.additional_properties.as_ref())
    }

    /// The schema of the items of this array.
    pub fn item(&self) -> Option<&SchemaRef> {
        self.items.as_ref()
    }

    /// Whether unknown fields of this object are kept (no pruning, no strict-decoding error).
    pub fn keeps_unknown_fields(&self) -> bool {
        self.preserve_unknown_fields || self.ty == Type::Any || self.additional_properties.is_some()
    }

    /// Whether strategic merge patch merges this list by key.
    pub fn merges_by_key(&self) -> Option<&str> {
        if self.patch_strategy.contains(&PatchStrategy::Merge) {
            self.patch_merge_key.as_deref()
        } else {
            None
        }
    }

    /// Whether strategic merge patch merges this list of scalars as a set.
    pub fn merges_as_set(&self) -> bool {
        self.patch_strategy.contains(&PatchStrategy::Merge) && self.patch_merge_key.is_none()
    }

    /// Whether strategic merge patch honours `$retainKeys` on this object.
    pub fn retains_keys(&self) -> bool {
        self.patch_strategy.contains(&PatchStrategy::RetainKeys)
    }

    /// A schema that accepts anything and keeps everything.
    pub fn any() -> SchemaRef {
        Arc::new(Schema {
            ty: Type::Any,
            preserve_unknown_fields: true,
            ..Schema::default()
        })
    }

    /// Follows a dotted path of field names (`spec.template.spec`).
    pub fn at_path(self: &SchemaRef, path: &[&str]) -> Option<SchemaRef> {
        let mut cur = self.clone();
        for p in path {
            let next = match cur.ty {
                Type::Array => cur.items.as_ref()?.field(p)?.clone(),
                _ => cur.field(p)?.clone(),
            };
            cur = next;
        }
        Some(cur)
    }
}
