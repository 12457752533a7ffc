//! What the server knows about one served resource (one group-version-resource): names,
//! scope, verbs, subresources, and the strategy and schema that give it behaviour.
//!
//! Built-in resources come from `apimachinery::builtin`; custom resources are made from their
//! CustomResourceDefinition. Both are served by the same generic store.

use std::sync::Arc;

use apimachinery::builtin;
use apimachinery::schema::SchemaRef;

use crate::strategy::{DefaultStrategy, Strategy};

/// A subresource (`status`, `scale`, `log`, ...).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubresourceDef {
    pub name: String,
    pub group: String,
    pub version: String,
    pub kind: String,
    pub verbs: Vec<String>,
}

/// How rows of `kubectl get` are rendered.
#[derive(Debug, Clone)]
pub enum Printer {
    /// A built-in printer chosen by group and kind.
    Builtin,
    /// A custom resource's `additionalPrinterColumns` (the raw JSON array).
    Custom(serde_json::Value),
}

/// The scale subresource mapping of a custom resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScalePaths {
    pub spec_replicas: String,
    pub status_replicas: String,
    pub label_selector: Option<String>,
}

/// One served resource.
#[derive(Clone)]
pub struct ResourceDef {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub list_kind: String,
    pub plural: String,
    pub singular: String,
    pub namespaced: bool,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    pub verbs: Vec<String>,
    pub subresources: Vec<SubresourceDef>,
    pub strategy: Arc<dyn Strategy>,
    pub schema: Option<SchemaRef>,
    pub printer: Printer,
    /// Whether this is a custom resource (no strategic merge patch, CRD semantics).
    pub custom: bool,
    /// Custom resources: the scale subresource's paths.
    pub scale: Option<ScalePaths>,
    /// A deprecation warning to send with every request (CRD `deprecationWarning`).
    pub deprecation_warning: Option<String>,
    /// Served in the root cluster only (the platform's own APIs, such as LogicalCluster).
    pub root_only: bool,
}

impl std::fmt::Debug for ResourceDef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "ResourceDef({}/{} {})",
            self.group, self.version, self.plural
        )
    }
}

impl ResourceDef {
    /// A built-in resource from the catalogue, with the given strategy and schema.
    pub fn builtin(
        r: &builtin::Resource,
        strategy: Arc<dyn Strategy>,
        schema: Option<SchemaRef>,
    ) -> Self {
        ResourceDef {
            group: r.group.into(),
            version: r.version.into(),
            kind: r.kind.into(),
            list_kind: format!("{}List", r.kind),
            plural: r.plural.into(),
            singular: r.singular.into(),
            namespaced: r.namespaced,
            short_names: r.short_names.iter().map(|s| s.to_string()).collect(),
            categories: r.categories.iter().map(|s| s.to_string()).collect(),
            verbs: r.verbs.iter().map(|s| s.to_string()).collect(),
            subresources: r
                .subresources
                .iter()
                .map(|s| SubresourceDef {
                    name: s.name.into(),
                    group: s.group.into(),
                    version: s.version.into(),
                    kind: s.kind.into(),
                    verbs: s.verbs.iter().map(|v| v.to_string()).collect(),
                })
                .collect(),
            strategy,
            schema,
            printer: Printer::Builtin,
            custom: false,
            scale: None,
            deprecation_warning: None,
            root_only: false,
        }
    }

    /// A built-in resource with the default strategy (tests, resources without special rules).
    pub fn builtin_default(r: &builtin::Resource) -> Self {
        Self::builtin(r, Arc::new(DefaultStrategy), None)
    }

    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    pub fn subresource(&self, name: &str) -> Option<&SubresourceDef> {
        self.subresources.iter().find(|s| s.name == name)
    }

    /// Whether the main resource ignores `.status` (there is a status subresource).
    pub fn has_status(&self) -> bool {
        self.subresource("status").is_some()
    }

    pub fn allows(&self, verb: &str) -> bool {
        self.verbs.iter().any(|v| v == verb)
    }

    /// `<plural>[.<group>]`, as upstream messages name resources.
    pub fn qualified(&self) -> String {
        apimachinery::status::qualified_resource(&self.plural, &self.group)
    }
}
