//! The OpenAPI v3 documents of one logical cluster: the shared built-in documents plus the
//! cluster's own custom resource documents, and the `/openapi/v3` index over them.
//!
//! Built-in documents are built once per process ([`builtin_documents`]) and shared by every
//! cluster through `Arc`s; a [`DocumentSet`] only owns its custom documents, so a cluster
//! without CRDs costs an empty map. Hashes are content hashes, so a client's cached copy of a
//! document stays valid exactly as long as the content is unchanged.

use std::collections::BTreeMap;
use std::sync::{Arc, LazyLock, OnceLock};

use serde_json::{Map, Value, json};

use crate::document::{
    Document, builtin_document, group_document, group_version_path, root_documents,
};
use crate::kinds::served_group_versions;

type Documents = BTreeMap<String, Arc<Document>>;

static BUILTIN: LazyLock<Documents> = LazyLock::new(|| {
    let mut docs = Documents::new();
    for (path, value) in root_documents() {
        docs.insert(path, Arc::new(Document::from_json(&value)));
    }
    for (group, version) in served_group_versions() {
        let doc = builtin_document(group, version);
        docs.insert(
            group_version_path(group, version),
            Arc::new(Document::from_json(&doc)),
        );
        if !group.is_empty() {
            docs.entry(format!("apis/{group}"))
                .or_insert_with(|| Arc::new(Document::from_json(&group_document(group))));
        }
    }
    docs
});

/// The built-in documents by index key (`api/v1`, `apis/apps/v1`, `apis/apps`, `api`, `apis`,
/// `version`), built on first use.
pub fn builtin_documents() -> &'static BTreeMap<String, Arc<Document>> {
    &BUILTIN
}

/// The documents served at `/openapi/v3` for one logical cluster.
#[derive(Debug, Clone, Default)]
pub struct DocumentSet {
    /// Custom resource group-versions (`apis/<group>/<version>`) and their groups' documents
    /// (`apis/<group>`), which shadow built-in documents of the same key.
    custom: Documents,
    /// The v2 document built from these, once asked for (reset when the set changes).
    v2: Arc<OnceLock<Arc<V2Document>>>,
}

/// A cluster's `/openapi/v2` document, as JSON and as gnostic protobuf.
#[derive(Debug)]
pub struct V2Document {
    pub json: bytes::Bytes,
    pub protobuf: bytes::Bytes,
}

impl DocumentSet {
    /// A set with the built-in documents only.
    pub fn new() -> DocumentSet {
        DocumentSet::default()
    }

    /// Serves `document` as the custom resource group-version `group/version` (replacing any
    /// previous one), and the group's own document when the group is new.
    pub fn insert_custom(&mut self, group: &str, version: &str, document: Arc<Document>) {
        self.v2 = Arc::default();
        self.custom
            .insert(group_version_path(group, version), document);
        let group_key = format!("apis/{group}");
        if !BUILTIN.contains_key(&group_key) && !self.custom.contains_key(&group_key) {
            let doc = Document::from_json(&group_document(group));
            self.custom.insert(group_key, Arc::new(doc));
        }
    }

    /// Stops serving the custom resource group-version `group/version`; the group's document
    /// goes with its last version.
    pub fn remove_custom(&mut self, group: &str, version: &str) {
        self.v2 = Arc::default();
        self.custom.remove(&group_version_path(group, version));
        let group_key = format!("apis/{group}");
        let prefix = format!("{group_key}/");
        if !self.custom.keys().any(|k| k.starts_with(&prefix)) {
            self.custom.remove(&group_key);
        }
    }

    /// The document at an index key (`apis/apps/v1`; a leading `/` is ignored).
    pub fn get(&self, path: &str) -> Option<Arc<Document>> {
        let path = path.trim_start_matches('/').trim_end_matches('/');
        self.custom.get(path).or_else(|| BUILTIN.get(path)).cloned()
    }

    /// Every index key with its document, custom documents shadowing built-in ones.
    pub fn documents(&self) -> BTreeMap<&str, &Arc<Document>> {
        let mut out: BTreeMap<&str, &Arc<Document>> =
            BUILTIN.iter().map(|(k, v)| (k.as_str(), v)).collect();
        out.extend(self.custom.iter().map(|(k, v)| (k.as_str(), v)));
        out
    }

    /// The `/openapi/v3` index: `{"paths": {"apis/apps/v1": {"serverRelativeURL":
    /// "/openapi/v3/apis/apps/v1?hash=<HASH>"}, ...}}`. URLs are relative to the server root
    /// without a cluster prefix: clients prepend the `/clusters/<name>` of their server URL.
    pub fn index(&self) -> Value {
        let mut paths = Map::new();
        for (key, doc) in self.documents() {
            paths.insert(
                key.to_string(),
                json!({ "serverRelativeURL": format!("/openapi/v3/{key}?hash={}", doc.hash()) }),
            );
        }
        json!({ "paths": paths })
    }

    /// The `/openapi/v2` document of this set ([`crate::v2`]), built on first use and kept.
    pub fn v2(&self, version: &str) -> Arc<V2Document> {
        self.v2
            .get_or_init(|| {
                let doc = crate::v2::swagger(self, version);
                Arc::new(V2Document {
                    json: serde_json::to_vec(&doc).unwrap_or_default().into(),
                    protobuf: crate::v2::protobuf(&doc).into(),
                })
            })
            .clone()
    }

    /// [`DocumentSet::index`] serialized.
    pub fn index_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(&self.index()).unwrap_or_default()
    }
}
