//! What a container runtime and the API server would say about a pod's containers, made up
//! deterministically for virtual ones: container IDs, image IDs (digests), the QoS class.

use apimachinery::quantity::Quantity;
use k8s_openapi::api::core::v1::PodSpec;
use sha2::{Digest, Sha256};

/// A stable container ID for a container of a pod (`virtual://<64 hex>`).
pub fn container_id(pod_uid: &str, container: &str, restarts: i32) -> String {
    let mut h = Sha256::new();
    h.update(pod_uid.as_bytes());
    h.update(b"/");
    h.update(container.as_bytes());
    h.update(b"/");
    h.update(restarts.to_le_bytes());
    format!("virtual://{}", hex(&h.finalize()))
}

/// An image ID for an image reference: its digest if it names one, else a digest made from
/// the reference (`docker.io/library/nginx@sha256:...`).
pub fn image_id(image: &str) -> String {
    if image.contains("@sha256:") {
        return image.to_string();
    }
    // Strip a tag (a `:` after the last `/`), keep a registry port.
    let repo = match image.rfind(':') {
        Some(i) if !image[i..].contains('/') => &image[..i],
        _ => image,
    };
    let first = repo.split('/').next().unwrap_or("");
    let has_registry =
        repo.contains('/') && (first.contains('.') || first.contains(':') || first == "localhost");
    let full = if has_registry {
        repo.to_string()
    } else if repo.contains('/') {
        format!("docker.io/{repo}")
    } else {
        format!("docker.io/library/{repo}")
    };
    format!("{full}@sha256:{}", hex(&Sha256::digest(image.as_bytes())))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The pod's QoS class from its containers' requests and limits (upstream's rules: no
/// requests or limits anywhere → BestEffort; CPU and memory limits on every container, equal
/// to any requests → Guaranteed; else Burstable).
pub fn qos_class(spec: &PodSpec) -> &'static str {
    let containers = spec
        .init_containers
        .iter()
        .flatten()
        .chain(spec.containers.iter());
    let mut any = false;
    let mut guaranteed = true;
    for c in containers {
        let res = c.resources.clone().unwrap_or_default();
        let req = res.requests.unwrap_or_default();
        let lim = res.limits.unwrap_or_default();
        let nonzero = |q: Option<&k8s_openapi::apimachinery::pkg::api::resource::Quantity>| {
            q.and_then(|q| Quantity::parse(&q.0).ok())
                .filter(|q| !q.is_zero())
        };
        for r in ["cpu", "memory"] {
            let (rq, lq) = (nonzero(req.get(r)), nonzero(lim.get(r)));
            if rq.is_some() || lq.is_some() {
                any = true;
            }
            match (rq, lq) {
                (_, None) => guaranteed = false,
                (Some(rq), Some(lq)) if rq != lq => guaranteed = false,
                _ => {}
            }
        }
    }
    match (any, guaranteed) {
        (false, _) => "BestEffort",
        (true, true) => "Guaranteed",
        (true, false) => "Burstable",
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::api::core::v1::{Container, ResourceRequirements};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity as Q;

    use super::*;

    fn resources(req: &[(&str, &str)], lim: &[(&str, &str)]) -> Option<ResourceRequirements> {
        let map = |v: &[(&str, &str)]| {
            (!v.is_empty()).then(|| {
                v.iter()
                    .map(|(k, q)| (k.to_string(), Q(q.to_string())))
                    .collect::<BTreeMap<_, _>>()
            })
        };
        Some(ResourceRequirements {
            requests: map(req),
            limits: map(lim),
            ..ResourceRequirements::default()
        })
    }

    #[test]
    fn qos_classes_follow_requests_and_limits() {
        let spec = |rs: Vec<Option<ResourceRequirements>>| PodSpec {
            containers: rs
                .into_iter()
                .enumerate()
                .map(|(i, r)| Container {
                    name: format!("c{i}"),
                    resources: r,
                    ..Container::default()
                })
                .collect(),
            ..PodSpec::default()
        };
        assert_eq!(qos_class(&spec(vec![None])), "BestEffort");
        assert_eq!(
            qos_class(&spec(vec![resources(&[("cpu", "0")], &[])])),
            "BestEffort"
        );
        let full = resources(&[], &[("cpu", "1"), ("memory", "1Gi")]);
        assert_eq!(qos_class(&spec(vec![full.clone()])), "Guaranteed");
        let equal = resources(
            &[("cpu", "1000m"), ("memory", "1Gi")],
            &[("cpu", "1"), ("memory", "1024Mi")],
        );
        assert_eq!(qos_class(&spec(vec![equal])), "Guaranteed");
        let less = resources(&[("cpu", "500m")], &[("cpu", "1"), ("memory", "1Gi")]);
        assert_eq!(qos_class(&spec(vec![less])), "Burstable");
        assert_eq!(qos_class(&spec(vec![full, None])), "Burstable");
        assert_eq!(
            qos_class(&spec(vec![resources(&[("memory", "1Gi")], &[])])),
            "Burstable"
        );
    }

    #[test]
    fn image_ids_name_a_digest_of_the_full_reference() {
        let id = image_id("nginx:1.27");
        assert!(id.starts_with("docker.io/library/nginx@sha256:"), "{id}");
        assert_eq!(id.len(), "docker.io/library/nginx@sha256:".len() + 64);
        assert!(image_id("bitnami/redis").starts_with("docker.io/bitnami/redis@sha256:"));
        assert!(
            image_id("registry:5000/team/app:v1").starts_with("registry:5000/team/app@sha256:")
        );
        let pinned = "ghcr.io/x/y@sha256:0123";
        assert_eq!(image_id(pinned), pinned);
        assert_ne!(image_id("nginx:1.26"), image_id("nginx:1.27"));
    }

    #[test]
    fn container_ids_differ_by_pod_container_and_restart() {
        let a = container_id("u1", "c", 0);
        assert!(a.starts_with("virtual://"));
        assert_ne!(a, container_id("u2", "c", 0));
        assert_ne!(a, container_id("u1", "d", 0));
        assert_ne!(a, container_id("u1", "c", 1));
        assert_eq!(a, container_id("u1", "c", 0));
    }
}
