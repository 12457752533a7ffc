//! What a node's containerd needs to pull every image from the platform's registry: a
//! `hosts.toml` directory (`config_path`) in which every registry — `docker.io`,
//! `registry.k8s.io`, `quay.io`, `ghcr.io`, `gcr.io`, … and, through `_default`, any other —
//! is served by the platform's registry, trusted with the platform's CA. Air-gapped by
//! design: there is no fallback to the upstream registries.
//!
//! Facts from containerd 1.6's source (the version nodes run):
//! - the CRI plugin reads host directories from `[plugins."io.containerd.grpc.v1.cri".registry]
//!   config_path` (and then refuses the legacy `mirrors` table, whose `"*"` wildcard would be
//!   the other way to mirror everything);
//! - for a registry `host`, it looks in `<config_path>/<host>` (`<host>_<port>_` for a port)
//!   and then in `<config_path>/_default`;
//! - a `hosts.toml` must have a `[host."…"]` table or it is ignored as malformed; the
//!   top-level `server` is tried after the hosts and, when absent, is the upstream registry —
//!   so both name the platform registry, which also keeps a missing image's error
//!   `not found` instead of a failed connection to the internet;
//! - when the host differs from the registry of the image, each request carries
//!   `?ns=<registry>`, which the registry uses to file the repository under its full name.

use std::path::{Path, PathBuf};

/// Registries given a directory of their own (the `_default` directory covers every other
/// one; naming these keeps them mirrored even if `_default` is later used differently).
pub const MIRRORED: &[&str] = &[
    "docker.io",
    "registry.k8s.io",
    "k8s.gcr.io",
    "quay.io",
    "ghcr.io",
    "gcr.io",
    "mcr.microsoft.com",
    "public.ecr.aws",
];

/// The platform registry as a node reaches it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mirror {
    /// `https://host:port` of the platform's API server, which serves `/v2/`.
    pub endpoint: String,
    /// The CA that signed its serving certificate (PEM), when not in the system pool.
    pub ca_pem: Option<String>,
}

/// The `hosts.toml` of one registry directory; `ca` is the CA file's path.
pub fn hosts_toml(mirror: &Mirror, ca: Option<&Path>) -> String {
    let quote = |s: &str| serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into());
    let endpoint = quote(mirror.endpoint.trim_end_matches('/'));
    let ca_line = ca
        .map(|p| format!("ca = {}\n", quote(&p.to_string_lossy())))
        .unwrap_or_default();
    format!(
        "# Written by matryoshka: images come from the platform's registry, nowhere else.\n\
         server = {endpoint}\n\
         capabilities = [\"pull\", \"resolve\"]\n\
         {ca_line}\n\
         [host.{endpoint}]\n\
         capabilities = [\"pull\", \"resolve\"]\n\
         {ca_line}"
    )
}

/// containerd's directory name for a host (`127.0.0.1:5000` → `127.0.0.1_5000_`).
pub fn host_directory(host: &str) -> String {
    match host.rfind(':') {
        Some(i) if i > 0 && !host.ends_with(']') => {
            format!("{}_{}_", &host[..i], &host[i + 1..])
        }
        _ => host.to_string(),
    }
}

/// Writes the hosts directory under `dir` (`ca.crt`, `_default/hosts.toml` and one
/// directory per [`MIRRORED`] registry), replacing what a previous run wrote. Returns the
/// directory to give containerd as `config_path`.
pub fn write_hosts_dir(dir: &Path, mirror: &Mirror) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let ca = match &mirror.ca_pem {
        Some(pem) => {
            let p = dir.join("ca.crt");
            write_atomic(&p, pem.as_bytes())?;
            Some(p)
        }
        None => None,
    };
    let toml = hosts_toml(mirror, ca.as_deref());
    for host in MIRRORED.iter().copied().chain(["_default"]) {
        let d = dir.join(host_directory(host));
        std::fs::create_dir_all(&d)?;
        write_atomic(&d.join("hosts.toml"), toml.as_bytes())?;
    }
    Ok(dir.to_path_buf())
}

fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

/// The CRI plugin's registry section for a containerd 1.6 `config.toml`.
pub fn cri_registry_section(config_path: &Path) -> String {
    let quote = |s: &str| serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into());
    format!(
        "[plugins.\"io.containerd.grpc.v1.cri\".registry]\n  config_path = {}\n",
        quote(&config_path.to_string_lossy())
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mirror() -> Mirror {
        Mirror {
            endpoint: "https://10.0.0.1:6443/".into(),
            ca_pem: Some("-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n".into()),
        }
    }

    #[test]
    fn every_registry_and_the_default_point_at_the_platform() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = write_hosts_dir(tmp.path(), &mirror()).expect("written");
        for host in [
            "docker.io",
            "registry.k8s.io",
            "quay.io",
            "ghcr.io",
            "gcr.io",
            "_default",
        ] {
            let t = std::fs::read_to_string(dir.join(host).join("hosts.toml")).expect(host);
            assert!(t.contains("server = \"https://10.0.0.1:6443\""), "{t}");
            assert!(t.contains("[host.\"https://10.0.0.1:6443\"]"), "{t}");
            let ca = dir.join("ca.crt");
            assert_eq!(
                t.matches(&format!("ca = \"{}\"", ca.display())).count(),
                2,
                "{t}"
            );
        }
        assert!(
            std::fs::read_to_string(dir.join("ca.crt"))
                .expect("ca")
                .contains("BEGIN")
        );
        // Writing again replaces the files in place.
        write_hosts_dir(tmp.path(), &mirror()).expect("rewritten");
    }

    #[test]
    fn without_a_ca_the_system_pool_is_used() {
        let m = Mirror {
            ca_pem: None,
            ..mirror()
        };
        let t = hosts_toml(&m, None);
        assert!(!t.contains("ca ="), "{t}");
        assert!(t.contains("capabilities = [\"pull\", \"resolve\"]"), "{t}");
    }

    #[test]
    fn ports_become_containerd_directory_names() {
        assert_eq!(host_directory("127.0.0.1:5000"), "127.0.0.1_5000_");
        assert_eq!(host_directory("docker.io"), "docker.io");
        assert_eq!(host_directory("[::1]"), "[::1]");
    }

    #[test]
    fn the_cri_section_names_the_hosts_directory() {
        let s = cri_registry_section(Path::new("/var/lib/m/certs.d"));
        assert_eq!(
            s,
            "[plugins.\"io.containerd.grpc.v1.cri\".registry]\n  config_path = \"/var/lib/m/certs.d\"\n"
        );
    }
}
