//! `matryoshka pki rotate-ca`: replaces a logical cluster's CA in two phases, through the API
//! with the root cluster's admin credentials.
//!
//! 1. `--phase prepare`: a new CA becomes the cluster's issuer; the old one is kept in the
//!    cluster's `matryoshka-system/<cluster>-pki` Secret as `ca-previous.crt` and stays trusted,
//!    so every certificate issued so far keeps working. The platform re-issues the admin
//!    kubeconfigs (`<cluster>-admin-kubeconfig`, a TenantCluster's `-admin-kubeconfig`) with the
//!    new CA within seconds.
//! 2. Hand out the new kubeconfigs, then `--phase finish`: the old CA is no longer trusted, and
//!    a certificate it issued is refused (`Unauthorized`).
//!
//! The serving CA (the root CA in the PKI directory, which clients verify the server with) is
//! not rotated here.

use std::path::PathBuf;

use anyhow::{Context, bail};
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};

use controlplane::trust::{CA_PREVIOUS, SYSTEM_NAMESPACE};

/// Touched on the LogicalCluster at each phase, so the components reconciling it look again.
const ANNOTATION: &str = "core.matryoshka.dev/ca-rotation";

#[derive(clap::Subcommand, Debug)]
pub enum PkiCommand {
    /// Rotates a logical cluster's CA in two phases (`prepare`, then `finish`).
    RotateCa(RotateCaArgs),
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// A new CA issues; the old one stays trusted.
    Prepare,
    /// The old CA is no longer trusted.
    Finish,
}

#[derive(clap::Args, Debug)]
pub struct RotateCaArgs {
    /// The logical cluster (a TenantCluster's is named in its `status.logicalCluster`).
    pub cluster: String,
    #[arg(long, value_enum)]
    pub phase: Phase,
    /// The root cluster's admin kubeconfig.
    #[arg(long, default_value = "./matryoshka-data/admin.conf")]
    pub kubeconfig: PathBuf,
}

pub async fn run(cmd: PkiCommand) -> anyhow::Result<()> {
    match cmd {
        PkiCommand::RotateCa(args) => rotate_ca(args).await,
    }
}

fn data(s: &Secret, key: &str) -> Option<String> {
    s.data
        .as_ref()
        .and_then(|d| d.get(key))
        .and_then(|b| String::from_utf8(b.0.clone()).ok())
}

async fn rotate_ca(args: RotateCaArgs) -> anyhow::Result<()> {
    if args.cluster == "root" {
        bail!(
            "the root cluster's CA lives in the PKI directory (--pki-dir); this command rotates logical clusters' CAs"
        );
    }
    let client = runtime::renewing::client(&args.kubeconfig, None)
        .await
        .with_context(|| format!("reading {}", args.kubeconfig.display()))?;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), SYSTEM_NAMESPACE);
    let name = format!("{}-pki", args.cluster);
    let mut secret = secrets
        .get(&name)
        .await
        .with_context(|| format!("reading the CA of cluster {:?}", args.cluster))?;
    let pending = data(&secret, CA_PREVIOUS).is_some();
    let d = secret.data.get_or_insert_with(Default::default);
    let message = match args.phase {
        Phase::Prepare => {
            if pending {
                bail!(
                    "a rotation of {}'s CA is already prepared: finish it first (--phase finish)",
                    args.cluster
                );
            }
            let old = d
                .get("ca.crt")
                .cloned()
                .context("the cluster's Secret has no ca.crt")?;
            // The creation time in its name tells it from the CA it replaces.
            let ca = pki::Ca::generate(&format!("{}-ca@{}", args.cluster, unix_now()))?;
            d.insert(CA_PREVIOUS.into(), old);
            d.insert(
                "ca.crt".into(),
                k8s_openapi::ByteString(ca.pair.cert_pem.into_bytes()),
            );
            d.insert(
                "ca.key".into(),
                k8s_openapi::ByteString(ca.pair.key_pem.into_bytes()),
            );
            "prepared: a new CA issues and the old one is still trusted; the admin kubeconfigs are being re-issued — hand them out, then run --phase finish"
        }
        Phase::Finish => {
            if !pending {
                bail!(
                    "no rotation of {}'s CA is prepared (run --phase prepare first)",
                    args.cluster
                );
            }
            d.remove(CA_PREVIOUS);
            "finished: certificates of the old CA are no longer accepted"
        }
    };
    // The resourceVersion read above makes a concurrent change a conflict, not a lost write.
    secrets
        .replace(&name, &PostParams::default(), &secret)
        .await
        .with_context(|| format!("writing the CA of cluster {:?}", args.cluster))?;
    let phase = match args.phase {
        Phase::Prepare => "prepared",
        Phase::Finish => "finished",
    };
    let gvk = GroupVersionKind::gvk("core.matryoshka.dev", "v1alpha1", "LogicalCluster");
    let resource = ApiResource::from_gvk_with_plural(&gvk, "logicalclusters");
    let lc: Api<DynamicObject> = Api::all_with(client, &resource);
    let patch = serde_json::json!({"metadata": {"annotations": {ANNOTATION: format!("{phase} {}", unix_now())}}});
    lc.patch(
        &args.cluster,
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await
    .with_context(|| format!("annotating LogicalCluster {:?}", args.cluster))?;
    println!("{}: CA rotation {message}", args.cluster);
    Ok(())
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|t| t.as_secs())
        .unwrap_or_default()
}
