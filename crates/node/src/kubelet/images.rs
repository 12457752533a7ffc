//! The image manager: makes sure a container's image is on the node before the container is
//! created, as upstream's `EnsureImageExists` does — `imagePullPolicy` (`Always`,
//! `IfNotPresent`, `Never`; absent: `Always` for `:latest` or no tag, else `IfNotPresent`),
//! credentials from the pod's `imagePullSecrets` (`.dockerconfigjson` and `.dockercfg`)
//! tried in turn, then an anonymous pull, pulls one at a time (`serializeImagePulls`), and
//! the pull back-off per pod and image (`ErrImagePull`, then `ImagePullBackOff`), with
//! upstream's events (`Pulling`, `Pulled`, `Failed`, `BackOff`, `ErrImageNeverPull`).

use std::sync::Arc;
use std::time::{Instant, SystemTime};

use base64::Engine;
use k8s_cri::v1::{AuthConfig, PodSandboxConfig};
use k8s_openapi::api::core::v1::{Container, Pod, Secret};
use kube::api::Api;

use super::backoff::Backoff;
use super::cri::CriClient;
use super::events::{self, Recorder};

/// Why an image is not there; [`ImageError::reason`] is the container's waiting reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImageError {
    #[error("{0}")]
    NeverPull(String),
    #[error("{0}")]
    BackOff(String),
    #[error("{0}")]
    Pull(String),
    #[error("{0}")]
    Inspect(String),
    #[error("{0}")]
    InvalidName(String),
}

impl ImageError {
    /// The waiting reason upstream gives.
    pub fn reason(&self) -> &'static str {
        match self {
            ImageError::NeverPull(_) => "ErrImageNeverPull",
            ImageError::BackOff(_) => "ImagePullBackOff",
            ImageError::Pull(_) => "ErrImagePull",
            ImageError::Inspect(_) => "ImageInspectError",
            ImageError::InvalidName(_) => "InvalidImageName",
        }
    }
}

/// An image reference split upstream's way: registry host and repository path (Docker Hub
/// names normalised to `docker.io/library/...`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageName {
    pub registry: String,
    pub repository: String,
    /// Tag or digest were given.
    pub tagged: bool,
    pub tag: Option<String>,
}

/// Parses an image reference.
pub fn parse_image(image: &str) -> Option<ImageName> {
    if image.is_empty()
        || image
            .chars()
            .any(|c| c.is_whitespace() || c.is_ascii_uppercase() && !image.contains('@'))
    {
        return None;
    }
    let (name, digest) = match image.split_once('@') {
        Some((n, d)) => (n, Some(d)),
        None => (image, None),
    };
    let (name, tag) = match name.rfind(':') {
        Some(i) if !name[i..].contains('/') => (&name[..i], Some(name[i + 1..].to_string())),
        _ => (name, None),
    };
    let first = name.split('/').next().unwrap_or("");
    let has_host =
        name.contains('/') && (first.contains('.') || first.contains(':') || first == "localhost");
    let (registry, repository) = if has_host {
        let (h, r) = name.split_once('/').unwrap_or((name, ""));
        (h.to_string(), r.to_string())
    } else if name.contains('/') {
        ("docker.io".to_string(), name.to_string())
    } else {
        ("docker.io".to_string(), format!("library/{name}"))
    };
    if repository.is_empty() {
        return None;
    }
    Some(ImageName {
        registry,
        repository,
        tagged: tag.is_some() || digest.is_some(),
        tag,
    })
}

/// The pull policy of a container: its own, or upstream's default.
pub fn pull_policy(c: &Container) -> String {
    if let Some(p) = c.image_pull_policy.as_deref().filter(|p| !p.is_empty()) {
        return p.to_string();
    }
    let image = c.image.as_deref().unwrap_or("");
    match parse_image(image) {
        Some(n) if image.contains('@') => {
            let _ = n;
            "IfNotPresent".into()
        }
        Some(ImageName { tag: Some(t), .. }) if t != "latest" => "IfNotPresent".into(),
        _ => "Always".into(),
    }
}

fn docker_hub(host: &str) -> bool {
    matches!(
        host,
        "docker.io" | "index.docker.io" | "registry-1.docker.io" | "registry.hub.docker.com"
    )
}

/// Whether a credential key (`https://index.docker.io/v1/`, `registry:5000`,
/// `*.example.com/team`) covers `image`.
pub fn key_matches(key: &str, image: &ImageName) -> bool {
    let key = key
        .trim_start_matches("https://")
        .trim_start_matches("http://");
    let (host, path) = key.split_once('/').unwrap_or((key, ""));
    let path = path.trim_end_matches('/');
    let host_ok = if docker_hub(host) {
        docker_hub(&image.registry)
    } else if let Some(suffix) = host.strip_prefix("*.") {
        image.registry.ends_with(&format!(".{suffix}"))
    } else {
        host == image.registry
    };
    // `index.docker.io/v1/` is Docker Hub's legacy key, not a repository prefix.
    let path_ok = path.is_empty() || path == "v1" || image.repository.starts_with(path);
    host_ok && path_ok
}

/// The credentials of pull secrets that cover `image`, in order.
pub fn credentials(secrets: &[Secret], image: &ImageName) -> Vec<AuthConfig> {
    let mut out = Vec::new();
    for s in secrets {
        let data = s.data.clone().unwrap_or_default();
        let auths: serde_json::Value = if let Some(b) = data.get(".dockerconfigjson") {
            serde_json::from_slice::<serde_json::Value>(&b.0)
                .ok()
                .and_then(|v| v.get("auths").cloned())
                .unwrap_or_default()
        } else if let Some(b) = data.get(".dockercfg") {
            serde_json::from_slice(&b.0).unwrap_or_default()
        } else {
            continue;
        };
        let Some(map) = auths.as_object() else {
            continue;
        };
        for (key, entry) in map {
            if !key_matches(key, image) {
                continue;
            }
            let field = |k: &str| {
                entry
                    .get(k)
                    .and_then(|v| v.as_str())
                    .unwrap_or("")
                    .to_string()
            };
            let (mut user, mut pass) = (field("username"), field("password"));
            let auth = field("auth");
            if user.is_empty()
                && !auth.is_empty()
                && let Ok(raw) = base64::engine::general_purpose::STANDARD.decode(&auth)
                && let Some((u, p)) = String::from_utf8_lossy(&raw).split_once(':')
            {
                user = u.to_string();
                pass = p.to_string();
            }
            out.push(AuthConfig {
                username: user,
                password: pass,
                server_address: image.registry.clone(),
                identity_token: field("identitytoken"),
                registry_token: field("registrytoken"),
                ..AuthConfig::default()
            });
        }
    }
    out
}

/// The image manager of one agent.
pub struct ImageManager {
    cri: CriClient,
    client: kube::Client,
    backoff: Backoff,
    serial: tokio::sync::Mutex<()>,
    recorder: Recorder,
}

impl ImageManager {
    pub fn new(
        cri: CriClient,
        client: kube::Client,
        backoff: Backoff,
        recorder: Recorder,
    ) -> Arc<Self> {
        Arc::new(ImageManager {
            cri,
            client,
            backoff,
            serial: tokio::sync::Mutex::new(()),
            recorder,
        })
    }

    async fn pull_secrets(&self, pod: &Pod) -> Vec<Secret> {
        let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
        let api: Api<Secret> = Api::namespaced(self.client.clone(), ns);
        let mut out = Vec::new();
        for r in pod
            .spec
            .iter()
            .flat_map(|s| s.image_pull_secrets.iter().flatten())
        {
            // A missing secret is skipped, as upstream does (the pull may still work).
            if let Ok(Some(s)) = api.get_opt(&r.name).await {
                out.push(s);
            }
        }
        out
    }

    /// Makes sure `container`'s image is present; its image reference (ID).
    pub async fn ensure(
        &self,
        pod: &Pod,
        container: &Container,
        sandbox: &PodSandboxConfig,
    ) -> Result<String, ImageError> {
        let image = container.image.clone().unwrap_or_default();
        let path = Some(events::container_path(pod, &container.name));
        let event =
            |ty, reason: &str, msg: String| self.recorder.pod(pod, path.clone(), ty, reason, msg);
        let Some(name) = parse_image(&image) else {
            let msg = format!(
                "Failed to apply default image tag {image:?}: couldn't parse image name {image:?}: invalid reference format"
            );
            event(events::WARNING, "InspectFailed", msg.clone());
            return Err(ImageError::InvalidName(msg));
        };
        // Untagged names are pulled and looked up as `:latest`.
        let image = if name.tagged {
            image
        } else {
            format!("{image}:latest")
        };
        let present = match self.cri.image_status(&image).await {
            Ok(i) => i,
            Err(e) => {
                let msg = format!("Failed to inspect image {image:?}: {}", e.message());
                event(events::WARNING, "InspectFailed", msg.clone());
                return Err(ImageError::Inspect(msg));
            }
        };
        let policy = pull_policy(container);
        if policy != "Always"
            && let Some(i) = &present
        {
            event(
                events::NORMAL,
                "Pulled",
                format!("Container image {image:?} already present on machine"),
            );
            return Ok(i.id.clone());
        }
        if policy == "Never" {
            let msg = format!("Container image {image:?} is not present with pull policy of Never");
            event(events::WARNING, "ErrImageNeverPull", msg.clone());
            return Err(ImageError::NeverPull(msg));
        }
        let key = format!("{}_{image}", pod.metadata.uid.as_deref().unwrap_or(""));
        let now = SystemTime::now();
        if self.backoff.blocked_until(&key, now, now).is_some() {
            let msg = format!("Back-off pulling image {image:?}");
            event(events::NORMAL, "BackOff", msg.clone());
            return Err(ImageError::BackOff(msg));
        }
        let waited = Instant::now();
        let _serial = self.serial.lock().await;
        event(
            events::NORMAL,
            "Pulling",
            format!("Pulling image {image:?}"),
        );
        let began = Instant::now();
        let secrets = self.pull_secrets(pod).await;
        let mut auths: Vec<Option<AuthConfig>> =
            credentials(&secrets, &name).into_iter().map(Some).collect();
        auths.push(None);
        let mut last = None;
        for auth in auths {
            match self
                .cri
                .pull_image(&image, auth, Some(sandbox.clone()))
                .await
            {
                Ok(id) => {
                    let size = self
                        .cri
                        .image_status(&image)
                        .await
                        .ok()
                        .flatten()
                        .map_or(0, |i| i.size);
                    let took = began.elapsed();
                    let total = waited.elapsed();
                    event(
                        events::NORMAL,
                        "Pulled",
                        format!(
                            "Successfully pulled image {image:?} in {:.3}s ({:.3}s including waiting). Image size: {size} bytes.",
                            took.as_secs_f64(),
                            total.as_secs_f64()
                        ),
                    );
                    return Ok(id);
                }
                Err(e) => last = Some(e),
            }
        }
        self.backoff
            .next(&key, SystemTime::now(), SystemTime::now());
        let err = last.map(|e| e.to_string()).unwrap_or_default();
        let msg = format!("Failed to pull image {image:?}: {err}");
        event(events::WARNING, "Failed", msg.clone());
        Err(ImageError::Pull(msg))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::ByteString;

    use super::*;

    #[test]
    fn names_are_split_into_registry_and_repository() {
        let n = parse_image("busybox").expect("valid");
        assert_eq!(
            (n.registry.as_str(), n.repository.as_str(), n.tagged),
            ("docker.io", "library/busybox", false)
        );
        let n = parse_image("registry:5000/team/app:v1").expect("valid");
        assert_eq!(
            (n.registry.as_str(), n.repository.as_str()),
            ("registry:5000", "team/app")
        );
        assert_eq!(n.tag.as_deref(), Some("v1"));
        assert!(
            parse_image("bitnami/redis@sha256:00")
                .expect("valid")
                .tagged
        );
        assert!(parse_image("Bad Name").is_none());
    }

    #[test]
    fn the_pull_policy_defaults_by_tag() {
        let c = |image: &str| Container {
            name: "c".into(),
            image: Some(image.into()),
            ..Container::default()
        };
        assert_eq!(pull_policy(&c("busybox")), "Always");
        assert_eq!(pull_policy(&c("busybox:latest")), "Always");
        assert_eq!(pull_policy(&c("busybox:1.36")), "IfNotPresent");
        assert_eq!(pull_policy(&c("busybox@sha256:00")), "IfNotPresent");
        let mut never = c("busybox");
        never.image_pull_policy = Some("Never".into());
        assert_eq!(pull_policy(&never), "Never");
    }

    #[test]
    fn pull_secrets_give_the_credentials_of_the_images_registry() {
        let config = serde_json::json!({"auths": {
            "https://index.docker.io/v1/": {"auth": base64::engine::general_purpose::STANDARD.encode("hub:pw")},
            "registry.example.com:5000": {"username": "u", "password": "p"},
            "*.corp.io/team": {"username": "t", "password": "q"},
        }});
        let secret = Secret {
            type_: Some("kubernetes.io/dockerconfigjson".into()),
            data: Some(BTreeMap::from([(
                ".dockerconfigjson".to_string(),
                ByteString(serde_json::to_vec(&config).expect("json")),
            )])),
            ..Secret::default()
        };
        let hub = credentials(
            std::slice::from_ref(&secret),
            &parse_image("nginx:1").expect("valid"),
        );
        assert_eq!(hub.len(), 1);
        assert_eq!(
            (hub[0].username.as_str(), hub[0].password.as_str()),
            ("hub", "pw")
        );
        let own = credentials(
            std::slice::from_ref(&secret),
            &parse_image("registry.example.com:5000/x:1").expect("valid"),
        );
        assert_eq!(own[0].username, "u");
        let team = credentials(
            std::slice::from_ref(&secret),
            &parse_image("a.corp.io/team/app:1").expect("valid"),
        );
        assert_eq!(team[0].username, "t");
        assert!(
            credentials(
                &[secret],
                &parse_image("a.corp.io/other/app:1").expect("valid")
            )
            .is_empty()
        );
    }
}
