//! Names: repository names and tags as the distribution spec allows them, and image
//! references normalised as containerd and Docker do (`busybox:1` is
//! `docker.io/library/busybox:1`).
//!
//! The registry keys every repository by its *full* name, registry host included
//! (`docker.io/library/busybox`), so that one store can mirror every registry: a mirror
//! request from containerd (`/v2/library/busybox/...?ns=docker.io`) and a direct one
//! (`/v2/docker.io/library/busybox/...`) reach the same repository.

use std::fmt;

use crate::digest::Digest;
use crate::error::{Error, ErrorCode, Result};

/// The longest repository name accepted (the reference registry's limit).
pub const MAX_NAME: usize = 255;

/// The registry Docker Hub names default to.
pub const DOCKER_HUB: &str = "docker.io";

/// One path component: `[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*`.
fn valid_component(c: &str) -> bool {
    let b = c.as_bytes();
    let alnum = |x: u8| x.is_ascii_lowercase() || x.is_ascii_digit();
    if b.is_empty() || !alnum(b[0]) || !alnum(b[b.len() - 1]) {
        return false;
    }
    let mut i = 0;
    while i < b.len() {
        if alnum(b[i]) {
            i += 1;
            continue;
        }
        // A separator run: ".", "_", "__" or any number of "-".
        let start = i;
        while i < b.len() && !alnum(b[i]) {
            i += 1;
        }
        let sep = &c[start..i];
        if !(sep == "." || sep == "_" || sep == "__" || sep.bytes().all(|x| x == b'-')) {
            return false;
        }
    }
    true
}

/// A registry host: a domain or IP with an optional port (`registry.k8s.io`,
/// `127.0.0.1:5000`, `[::1]:5000`, `localhost`).
pub fn valid_host(h: &str) -> bool {
    if h.is_empty() || h.len() > MAX_NAME {
        return false;
    }
    let (host, port) = if let Some(rest) = h.strip_prefix('[') {
        match rest.split_once(']') {
            Some((ip, tail)) => {
                if ip.parse::<std::net::Ipv6Addr>().is_err() {
                    return false;
                }
                (None, tail.strip_prefix(':'))
            }
            None => return false,
        }
    } else {
        match h.rsplit_once(':') {
            Some((host, port)) => (Some(host), Some(port)),
            None => (Some(h), None),
        }
    };
    if let Some(p) = port
        && (p.is_empty() || p.len() > 5 || !p.bytes().all(|b| b.is_ascii_digit()))
    {
        return false;
    }
    host.is_none_or(|host| {
        !host.is_empty()
            && host.split('.').all(|label| {
                !label.is_empty()
                    && label
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-')
                    && !label.starts_with('-')
                    && !label.ends_with('-')
            })
    })
}

/// Checks a repository name as it appears in a request path.
pub fn validate_repository(name: &str) -> Result<()> {
    if name.is_empty() || name.len() > MAX_NAME || !name.split('/').all(valid_component) {
        return Err(Error::new(ErrorCode::NameInvalid, format!("{name:?}")));
    }
    Ok(())
}

/// The repository a request names: `path` under the registry `ns` when a mirroring client
/// says which registry it means (containerd's `?ns=` parameter), else `path` itself.
pub fn repository(ns: Option<&str>, path: &str) -> Result<String> {
    validate_repository(path)?;
    match ns {
        None => Ok(path.to_string()),
        Some(ns) if valid_host(ns) => {
            let ns = if ns == "index.docker.io" || ns == "registry-1.docker.io" {
                DOCKER_HUB
            } else {
                ns
            };
            let full = format!("{ns}/{path}");
            if full.len() > MAX_NAME {
                return Err(Error::new(ErrorCode::NameInvalid, format!("{full:?}")));
            }
            Ok(full)
        }
        Some(ns) => Err(Error::new(
            ErrorCode::NameInvalid,
            format!("{ns:?} is not a registry host"),
        )),
    }
}

/// Checks a tag: `[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}`.
pub fn valid_tag(t: &str) -> bool {
    let b = t.as_bytes();
    !b.is_empty()
        && b.len() <= 128
        && (b[0].is_ascii_alphanumeric() || b[0] == b'_')
        && b.iter()
            .all(|&x| x.is_ascii_alphanumeric() || matches!(x, b'_' | b'.' | b'-'))
}

/// A manifest reference: a tag or a digest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reference {
    Tag(String),
    Digest(Digest),
}

impl Reference {
    /// Parses the `<reference>` of `/v2/<name>/manifests/<reference>`.
    pub fn parse(s: &str) -> Result<Reference> {
        if s.contains(':') {
            return Digest::parse(s).map(Reference::Digest);
        }
        if valid_tag(s) {
            Ok(Reference::Tag(s.to_string()))
        } else {
            Err(Error::new(
                ErrorCode::ManifestInvalid,
                format!("{s:?} is not a valid tag"),
            ))
        }
    }
}

impl fmt::Display for Reference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reference::Tag(t) => f.write_str(t),
            Reference::Digest(d) => d.fmt(f),
        }
    }
}

/// A fully qualified image reference: `docker.io/library/busybox:1`, perhaps with a digest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageRef {
    /// The registry host (`docker.io`).
    pub domain: String,
    /// The repository path within it (`library/busybox`).
    pub path: String,
    pub tag: Option<String>,
    pub digest: Option<Digest>,
}

/// Errors parsing an image reference.
#[derive(Debug, thiserror::Error)]
pub enum RefError {
    #[error("invalid reference format: {0:?}")]
    Invalid(String),
    #[error("invalid reference format: repository name must be lowercase: {0:?}")]
    Uppercase(String),
    #[error("invalid reference {reference:?}: {source}")]
    Digest {
        reference: String,
        #[source]
        source: Error,
    },
}

impl ImageRef {
    /// Normalises a reference as containerd does: no registry means Docker Hub, a Hub name of
    /// one component lives under `library/`, and no tag or digest means `latest`.
    pub fn parse_normalized(s: &str) -> Result<ImageRef, RefError> {
        let invalid = || RefError::Invalid(s.to_string());
        let (name, digest) = match s.split_once('@') {
            Some((n, d)) => {
                let digest = Digest::parse(d).map_err(|source| RefError::Digest {
                    reference: s.to_string(),
                    source,
                })?;
                (n, Some(digest))
            }
            None => (s, None),
        };
        // A tag follows the last ':' after the last '/' (a ':' before it is a port).
        let last_slash = name.rfind('/').map_or(0, |i| i + 1);
        let (name, tag) = match name[last_slash..].rfind(':') {
            Some(i) => {
                let at = last_slash + i;
                (&name[..at], Some(name[at + 1..].to_string()))
            }
            None => (name, None),
        };
        if let Some(t) = &tag
            && !valid_tag(t)
        {
            return Err(invalid());
        }
        let (domain, path) = match name.split_once('/') {
            Some((first, rest))
                if first.contains('.') || first.contains(':') || first == "localhost" =>
            {
                (first.to_string(), rest.to_string())
            }
            _ => (DOCKER_HUB.to_string(), name.to_string()),
        };
        let domain = if domain == "index.docker.io" {
            DOCKER_HUB.to_string()
        } else {
            domain
        };
        if !valid_host(&domain) {
            return Err(invalid());
        }
        if path.bytes().any(|b| b.is_ascii_uppercase()) {
            return Err(RefError::Uppercase(s.to_string()));
        }
        let path = if domain == DOCKER_HUB && !path.contains('/') {
            format!("library/{path}")
        } else {
            path
        };
        validate_repository(&path).map_err(|_| invalid())?;
        if domain.len() + 1 + path.len() > MAX_NAME {
            return Err(invalid());
        }
        let tag = match (&tag, &digest) {
            (None, None) => Some("latest".to_string()),
            _ => tag,
        };
        Ok(ImageRef {
            domain,
            path,
            tag,
            digest,
        })
    }

    /// The repository the registry keeps this image in (`docker.io/library/busybox`).
    pub fn repository(&self) -> String {
        format!("{}/{}", self.domain, self.path)
    }

    /// The tag, or else the digest: what a manifest is pushed under.
    pub fn reference(&self) -> Reference {
        match (&self.tag, &self.digest) {
            (Some(t), _) => Reference::Tag(t.clone()),
            (None, Some(d)) => Reference::Digest(d.clone()),
            (None, None) => Reference::Tag("latest".into()),
        }
    }
}

impl fmt::Display for ImageRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.domain, self.path)?;
        if let Some(t) = &self.tag {
            write!(f, ":{t}")?;
        }
        if let Some(d) = &self.digest {
            write!(f, "@{d}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn norm(s: &str) -> String {
        ImageRef::parse_normalized(s)
            .map(|r| r.to_string())
            .unwrap_or_else(|e| format!("error: {e}"))
    }

    #[test]
    fn references_are_normalised_as_containerd_does() {
        assert_eq!(norm("busybox:1"), "docker.io/library/busybox:1");
        assert_eq!(norm("busybox"), "docker.io/library/busybox:latest");
        assert_eq!(norm("library/busybox"), "docker.io/library/busybox:latest");
        assert_eq!(norm("foo/bar:v2"), "docker.io/foo/bar:v2");
        assert_eq!(norm("index.docker.io/foo"), "docker.io/library/foo:latest");
        assert_eq!(
            norm("registry.k8s.io/pause:3.9"),
            "registry.k8s.io/pause:3.9"
        );
        assert_eq!(norm("localhost:5000/a/b"), "localhost:5000/a/b:latest");
        assert_eq!(norm("localhost/a"), "localhost/a:latest");
        let d = Digest::sha256(b"");
        assert_eq!(
            norm(&format!("quay.io/x/y@{d}")),
            format!("quay.io/x/y@{d}")
        );
        assert_eq!(
            norm(&format!("busybox:1@{d}")),
            format!("docker.io/library/busybox:1@{d}")
        );
    }

    #[test]
    fn bad_references_are_refused_with_the_reason() {
        assert!(
            norm("Busybox").contains("must be lowercase"),
            "{}",
            norm("Busybox")
        );
        assert!(norm("busybox:").starts_with("error"));
        assert!(norm("busy box").starts_with("error"));
        assert!(norm("-a/b").starts_with("error"));
        assert!(norm("a@sha256:1").starts_with("error"));
        assert!(norm(":tag").starts_with("error"));
    }

    #[test]
    fn repository_names_follow_the_spec_grammar() {
        for ok in ["a", "library/busybox", "a-b/c__d/e.f", "a---b", "x0/y_1"] {
            validate_repository(ok).expect(ok);
        }
        for bad in [
            "",
            "A",
            "a/",
            "/a",
            "a//b",
            "a_",
            "a..b",
            "a___b",
            "_a",
            "a/_manifests",
        ] {
            let e = validate_repository(bad).expect_err(bad);
            assert_eq!(e.code(), ErrorCode::NameInvalid, "{bad}");
        }
        assert!(validate_repository(&"a".repeat(256)).is_err());
    }

    #[test]
    fn a_mirror_namespace_prefixes_the_repository() {
        assert_eq!(
            repository(Some("docker.io"), "library/busybox").ok(),
            Some("docker.io/library/busybox".into())
        );
        assert_eq!(
            repository(Some("registry-1.docker.io"), "library/busybox").ok(),
            Some("docker.io/library/busybox".into())
        );
        assert_eq!(
            repository(Some("127.0.0.1:5000"), "a").ok(),
            Some("127.0.0.1:5000/a".into())
        );
        assert_eq!(repository(None, "a/b").ok(), Some("a/b".into()));
        assert!(repository(Some("bad host"), "a").is_err());
        assert!(repository(Some("docker.io"), "A").is_err());
    }

    #[test]
    fn tags_and_digests_are_told_apart() {
        assert_eq!(
            Reference::parse("v1.0_rc-1").ok(),
            Some(Reference::Tag("v1.0_rc-1".into()))
        );
        let d = Digest::sha256(b"x");
        assert_eq!(
            Reference::parse(&d.to_string()).ok(),
            Some(Reference::Digest(d))
        );
        assert!(Reference::parse(".v1").is_err());
        assert!(Reference::parse(&"a".repeat(129)).is_err());
        assert!(valid_host("[::1]:5000"));
        assert!(!valid_host("a:b"));
    }
}
