//! Manifests: the media types the registry serves (OCI image manifest and index, Docker v2
//! schema 2 manifest and manifest list), parsing a pushed manifest into what it references,
//! and choosing what to answer a `GET` with from the client's `Accept` header.

use oci_spec::image::{Descriptor, ImageIndex, ImageManifest};
use serde_json::Value;

use crate::digest::Digest;
use crate::error::{Error, ErrorCode, Result};

pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
pub const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
pub const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
pub const DOCKER_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";
pub const OCI_CONFIG: &str = "application/vnd.oci.image.config.v1+json";
pub const DOCKER_CONFIG: &str = "application/vnd.docker.container.image.v1+json";
pub const OCI_LAYER_GZIP: &str = "application/vnd.oci.image.layer.v1.tar+gzip";
pub const OCI_LAYER: &str = "application/vnd.oci.image.layer.v1.tar";
pub const DOCKER_LAYER_GZIP: &str = "application/vnd.docker.image.rootfs.diff.tar.gzip";
const DOCKER_SCHEMA1: &str = "application/vnd.docker.distribution.manifest.v1+json";
const DOCKER_SCHEMA1_SIGNED: &str = "application/vnd.docker.distribution.manifest.v1+prettyjws";

/// The largest manifest accepted (the spec's "at least 4 MiB" that registries must take).
pub const MAX_MANIFEST: usize = 4 << 20;

/// Every manifest media type served.
pub const MANIFEST_TYPES: [&str; 4] = [OCI_MANIFEST, OCI_INDEX, DOCKER_MANIFEST, DOCKER_LIST];

pub fn is_index(media_type: &str) -> bool {
    media_type == OCI_INDEX || media_type == DOCKER_LIST
}

/// A referenced piece of content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ref {
    pub digest: Digest,
    pub size: u64,
}

/// A child manifest of an index, with its platform.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Child {
    pub digest: Digest,
    pub size: u64,
    pub media_type: String,
    /// `os/architecture[/variant]`, when the index says.
    pub platform: Option<String>,
}

/// What a manifest is and refers to.
#[derive(Debug, Clone)]
pub struct Parsed {
    pub media_type: String,
    /// The blobs an image manifest needs in the repository: its config and distributable
    /// layers (layers with `urls` are fetched from elsewhere and exempt).
    pub blobs: Vec<Ref>,
    /// The manifests an index needs in the repository.
    pub manifests: Vec<Child>,
    /// The manifest this one is about (OCI 1.1 `subject`).
    pub subject: Option<Digest>,
}

fn invalid(detail: impl Into<String>) -> Error {
    Error::new(ErrorCode::ManifestInvalid, detail)
}

fn descriptor_ref(d: &Descriptor) -> Result<Ref> {
    let digest = Digest::parse(d.digest().as_ref())
        .map_err(|e| invalid(format!("descriptor digest: {e}")))?;
    Ok(Ref {
        digest,
        size: d.size(),
    })
}

/// The media type a `Content-Type` header names (parameters dropped).
pub fn bare_type(content_type: &str) -> &str {
    content_type.split(';').next().unwrap_or("").trim()
}

/// Parses a pushed manifest. Its media type is the document's `mediaType`, else the request's
/// `Content-Type`, else what its shape says (OCI manifests may omit the field); the two must
/// agree when both are given.
pub fn parse(content_type: Option<&str>, body: &[u8]) -> Result<Parsed> {
    if body.len() > MAX_MANIFEST {
        return Err(invalid(format!(
            "the manifest is {} bytes; at most {MAX_MANIFEST} are accepted",
            body.len()
        )));
    }
    let doc: Value = serde_json::from_slice(body).map_err(|e| invalid(format!("not JSON: {e}")))?;
    let declared = doc.get("mediaType").and_then(Value::as_str);
    let header = content_type.map(bare_type).filter(|t| {
        MANIFEST_TYPES.contains(t) || *t == DOCKER_SCHEMA1 || *t == DOCKER_SCHEMA1_SIGNED
    });
    if let (Some(d), Some(h)) = (declared, header)
        && d != h
    {
        return Err(invalid(format!(
            "the manifest's mediaType {d:?} differs from the Content-Type {h:?}"
        )));
    }
    let media_type = match declared.or(header) {
        Some(t) => t.to_string(),
        None if doc.get("manifests").is_some() => OCI_INDEX.to_string(),
        None if doc.get("config").is_some() => OCI_MANIFEST.to_string(),
        None => return Err(invalid("neither an image manifest nor an index")),
    };
    if media_type == DOCKER_SCHEMA1 || media_type == DOCKER_SCHEMA1_SIGNED {
        return Err(invalid("Docker schema 1 manifests are not supported"));
    }
    if doc.get("schemaVersion").and_then(Value::as_u64) != Some(2) {
        return Err(invalid("schemaVersion must be 2"));
    }
    match media_type.as_str() {
        OCI_MANIFEST | DOCKER_MANIFEST => {
            let m: ImageManifest = serde_json::from_value(doc)
                .map_err(|e| invalid(format!("not an image manifest: {e}")))?;
            let mut blobs = vec![descriptor_ref(m.config())?];
            for l in m.layers() {
                let foreign = l.urls().as_ref().is_some_and(|u| !u.is_empty());
                let r = descriptor_ref(l)?;
                if !foreign {
                    blobs.push(r);
                }
            }
            let subject = m.subject().as_ref().map(descriptor_ref).transpose()?;
            Ok(Parsed {
                media_type,
                blobs,
                manifests: Vec::new(),
                subject: subject.map(|s| s.digest),
            })
        }
        OCI_INDEX | DOCKER_LIST => {
            let i: ImageIndex = serde_json::from_value(doc)
                .map_err(|e| invalid(format!("not an image index: {e}")))?;
            let mut manifests = Vec::new();
            for d in i.manifests() {
                let r = descriptor_ref(d)?;
                manifests.push(Child {
                    digest: r.digest,
                    size: r.size,
                    media_type: d.media_type().to_string(),
                    platform: d.platform().as_ref().map(|p| {
                        let mut s = format!("{}/{}", p.os(), p.architecture());
                        if let Some(v) = p.variant() {
                            s.push('/');
                            s.push_str(v);
                        }
                        s
                    }),
                });
            }
            let subject = i.subject().as_ref().map(descriptor_ref).transpose()?;
            Ok(Parsed {
                media_type,
                blobs: Vec::new(),
                manifests,
                subject: subject.map(|s| s.digest),
            })
        }
        other => Err(invalid(format!(
            "unsupported manifest media type {other:?}"
        ))),
    }
}

/// The media types an `Accept` header lists (several headers and comma lists; quality
/// parameters dropped). Empty means "anything".
pub fn accepted(accept: &[String]) -> Vec<String> {
    accept
        .iter()
        .flat_map(|h| h.split(','))
        .map(|t| bare_type(t).to_string())
        .filter(|t| !t.is_empty())
        .collect()
}

/// Whether a client with `accept` takes `media_type`.
pub fn accepts(accept: &[String], media_type: &str) -> bool {
    accept.is_empty()
        || accept
            .iter()
            .any(|a| a == media_type || a == "*/*" || a == "application/*")
}

/// The platform an index is resolved to for a client that does not take indexes (the
/// reference registry's choice for such clients).
pub const DEFAULT_PLATFORM: &str = "linux/amd64";

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn d(s: &str) -> String {
        Digest::sha256(s.as_bytes()).to_string()
    }

    fn image(media: Option<&str>) -> Vec<u8> {
        let mut m = json!({
            "schemaVersion": 2,
            "config": {"mediaType": OCI_CONFIG, "digest": d("c"), "size": 1},
            "layers": [
                {"mediaType": OCI_LAYER_GZIP, "digest": d("l1"), "size": 2},
                {"mediaType": "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip",
                 "digest": d("l2"), "size": 3, "urls": ["https://example.invalid/l2"]},
            ],
        });
        if let Some(t) = media {
            m["mediaType"] = json!(t);
        }
        serde_json::to_vec(&m).unwrap_or_default()
    }

    #[test]
    fn an_image_manifest_needs_its_config_and_distributable_layers() {
        let p = parse(Some(OCI_MANIFEST), &image(Some(OCI_MANIFEST))).expect("parses");
        assert_eq!(p.media_type, OCI_MANIFEST);
        let needed: Vec<String> = p.blobs.iter().map(|b| b.digest.to_string()).collect();
        assert_eq!(needed, vec![d("c"), d("l1")]);
        // No mediaType and no Content-Type: the shape decides.
        assert_eq!(
            parse(None, &image(None)).expect("parses").media_type,
            OCI_MANIFEST
        );
        // A Docker manifest has the same shape under its own type.
        let p = parse(Some(DOCKER_MANIFEST), &image(Some(DOCKER_MANIFEST))).expect("parses");
        assert_eq!(p.media_type, DOCKER_MANIFEST);
    }

    #[test]
    fn a_type_mismatch_or_garbage_is_manifest_invalid() {
        for (ct, body) in [
            (Some(DOCKER_MANIFEST), image(Some(OCI_MANIFEST))),
            (None, b"not json".to_vec()),
            (None, b"{}".to_vec()),
            (
                Some(DOCKER_SCHEMA1_SIGNED),
                br#"{"schemaVersion":1}"#.to_vec(),
            ),
            (None, br#"{"schemaVersion":1,"config":{}}"#.to_vec()),
            (
                Some(OCI_MANIFEST),
                br#"{"schemaVersion":2,"config":{"digest":"x"}}"#.to_vec(),
            ),
        ] {
            let e = parse(ct, &body).expect_err("refused");
            assert_eq!(e.code(), ErrorCode::ManifestInvalid, "{e}");
        }
    }

    #[test]
    fn an_index_needs_its_manifests() {
        let body = serde_json::to_vec(&json!({
            "schemaVersion": 2,
            "mediaType": DOCKER_LIST,
            "manifests": [
                {"mediaType": DOCKER_MANIFEST, "digest": d("a"), "size": 5,
                 "platform": {"os": "linux", "architecture": "arm64", "variant": "v8"}},
                {"mediaType": DOCKER_MANIFEST, "digest": d("b"), "size": 6,
                 "platform": {"os": "linux", "architecture": "amd64"}},
            ],
        }))
        .unwrap_or_default();
        let p = parse(None, &body).expect("parses");
        assert!(is_index(&p.media_type));
        let platforms: Vec<_> = p.manifests.iter().map(|m| m.platform.clone()).collect();
        assert_eq!(
            platforms,
            vec![Some("linux/arm64/v8".into()), Some("linux/amd64".into())]
        );
    }

    #[test]
    fn accept_headers_are_split_and_wildcards_take_anything() {
        let a = accepted(&[
            format!("{OCI_MANIFEST}, {DOCKER_MANIFEST};q=0.9"),
            "application/json".into(),
        ]);
        assert_eq!(a, vec![OCI_MANIFEST, DOCKER_MANIFEST, "application/json"]);
        assert!(accepts(&a, DOCKER_MANIFEST));
        assert!(!accepts(&a, OCI_INDEX));
        assert!(accepts(&[], OCI_INDEX));
        assert!(accepts(&["*/*".into()], OCI_INDEX));
    }
}
