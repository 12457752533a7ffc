//! What the server knows about one served resource (one group-version-resource): names,
//! scope, verbs, subresources, and the strategy and schema that give it behaviour.
//!
//! Built-in resources come from `apimachinery::builtin`; custom resources are made from their
//! CustomResourceDefinition. Both are served by the same generic store.

use std::sync::Arc;

use apimachinery::builtin;
use apimachinery::meta;
use apimachinery::schema::SchemaRef;
use apimachinery::status::ApiError;
use serde_json::Value;

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

/// Converts the objects of a custom resource between its versions outside the store (a
/// CRD's conversion webhook). With one, the store writes objects converted to the storage
/// version and hands the objects it reads back converted to the version a request addressed.
#[async_trait::async_trait]
pub trait Converter: Send + Sync {
    /// The `group/version` objects are stored at.
    fn storage_api_version(&self) -> &str;
    /// `objects` converted to `api_version`: as many, in the same order.
    async fn convert(&self, objects: Vec<Value>, api_version: &str)
    -> Result<Vec<Value>, ApiError>;
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
    /// Custom resources with webhook conversion: the converter.
    pub converter: Option<Arc<dyn Converter>>,
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
            converter: None,
        }
    }

    /// A built-in resource with the default strategy (tests, resources without special rules).
    pub fn builtin_default(r: &builtin::Resource) -> Self {
        Self::builtin(r, Arc::new(DefaultStrategy), None)
    }

    /// `objects` as this version serves them: those of another version converted (only a
    /// resource with a [`Converter`] has objects of other versions).
    pub async fn to_served(&self, objects: Vec<Value>) -> Result<Vec<Value>, ApiError> {
        let Some(c) = &self.converter else {
            return Ok(objects);
        };
        let want = self.api_version();
        convert_where(c.as_ref(), objects, &want).await
    }

    /// `obj` as it is stored: converted to the storage version when a [`Converter`] says it
    /// is at another (`None`: store it as it is).
    pub async fn to_storage(&self, obj: &Value) -> Result<Option<Value>, ApiError> {
        let Some(c) = &self.converter else {
            return Ok(None);
        };
        let storage = c.storage_api_version().to_string();
        if meta::api_version(obj) == storage {
            return Ok(None);
        }
        let mut out = c.convert(vec![obj.clone()], &storage).await?;
        Ok(out.pop())
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

/// Converts the objects not at `api_version`, in one call, keeping the order.
async fn convert_where(
    c: &dyn Converter,
    mut objects: Vec<Value>,
    api_version: &str,
) -> Result<Vec<Value>, ApiError> {
    let at: Vec<usize> = (0..objects.len())
        .filter(|i| meta::api_version(&objects[*i]) != api_version)
        .collect();
    if at.is_empty() {
        return Ok(objects);
    }
    let send = at.iter().map(|i| objects[*i].clone()).collect();
    let converted = c.convert(send, api_version).await?;
    if converted.len() != at.len() {
        return Err(ApiError::internal(format!(
            "conversion returned {} objects for {}",
            converted.len(),
            at.len()
        )));
    }
    for (i, v) in at.into_iter().zip(converted) {
        objects[i] = v;
    }
    Ok(objects)
}
