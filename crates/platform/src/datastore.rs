//! A tenant's own etcd (`Tenant.spec.etcd: true`; Cozystack's etcd app behind Kamaji's
//! `DataStore`). The platform runs Debian's `etcd` as a child process of the replica that
//! leads it, serving TLS on loopback with client certificates of a CA of its own, sized as the
//! seed's etcd app (`../shared/spec/capi-kubevirt.md` §7): `--quota-backend-bytes`, periodic
//! compaction every five minutes, `--snapshot-count 10000`, and a defragmentation pass on a
//! period whenever the database is over 80 % of its quota or wastes more than 200 MiB (the
//! seed's `etcd-defrag` rule), disarming a `NOSPACE` alarm after it. It is described by a
//! `DataStore` named after the tenant's namespace, whose health the API server checks and
//! reports; the tenant's new clusters are bound to it.
//!
//! The material lives in the root cluster's Secret `matryoshka-system/datastore-<name>` (the
//! CA, the server's and the API server's client certificate, the ports), the data under
//! `<dir>/<name>`. A replica that leads without that directory never starts an empty etcd in
//! its place (the data is on another replica: HA needs a shared `--data-dir`, as volumes do).
//! A DataStore goes when its tenant stops asking for it (or is deleted) and no cluster uses it;
//! then the process stops and its data and Secret are removed.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::{DeleteParams, DynamicObject, PostParams};
use serde_json::json;

use runtime::error::{Error, Result, ignore_not_found};

use crate::install::apply;

/// Where the datastores' Secrets are (root cluster).
pub const SECRET_NAMESPACE: &str = "matryoshka-system";
/// The label naming the tenant namespace a managed DataStore belongs to.
pub const TENANT_LABEL: &str = "platform.matryoshka.dev/datastore-of";
/// A database wasting more than this is defragmented.
const DEFRAG_WASTE_BYTES: i64 = 200 << 20;
/// Or one over this share of its quota.
const DEFRAG_QUOTA_SHARE: f64 = 0.8;

/// How the platform runs tenants' etcds.
#[derive(Debug, Clone)]
pub struct EtcdOptions {
    /// The datastores' directories (`<dir>/<name>`).
    pub dir: PathBuf,
    /// The etcd binary.
    pub bin: String,
    /// `--quota-backend-bytes`: the seed's 0.95 × a 4 GiB volume.
    pub quota_bytes: u64,
    /// `--auto-compaction-retention` (mode periodic).
    pub compaction_retention: String,
    /// `--snapshot-count`.
    pub snapshot_count: u64,
    /// How often the defragmentation rule is looked at (the seed: hourly).
    pub defrag_interval: Duration,
}

impl EtcdOptions {
    /// The seed's sizing, with data under `dir`.
    pub fn new(dir: PathBuf) -> Self {
        EtcdOptions {
            dir,
            bin: "etcd".into(),
            quota_bytes: (4u64 << 30) * 95 / 100,
            compaction_retention: "5m".into(),
            snapshot_count: 10_000,
            defrag_interval: Duration::from_secs(3600),
        }
    }
}

/// The Secret of datastore `name`.
pub fn secret_name(name: &str) -> String {
    format!("datastore-{name}")
}

/// Whether a database of `size` bytes, `in_use` of them live, under `quota` wants
/// defragmenting (the seed's rule: `dbQuotaUsage > 0.8 || dbSize − dbSizeInUse > 200 MiB`).
pub fn needs_defrag(size: i64, in_use: i64, quota: u64) -> bool {
    (quota > 0 && size as f64 > DEFRAG_QUOTA_SHARE * quota as f64)
        || size - in_use > DEFRAG_WASTE_BYTES
}

/// The TLS material and ports of one datastore, as its Secret holds them.
#[derive(Clone)]
struct Material {
    ca_pem: String,
    server_cert: String,
    server_key: String,
    client_cert: String,
    client_key: String,
    client_port: u16,
    peer_port: u16,
}

impl Material {
    fn generate(name: &str) -> Result<Material> {
        let pki = |e: pki::Error| Error::Config(format!("datastore {name}: {e}"));
        let ca = pki::Ca::generate(&format!("datastore-{name}-ca")).map_err(pki)?;
        let server = ca
            .issue_server(
                &format!("datastore-{name}"),
                &["127.0.0.1".to_string(), "localhost".to_string()],
            )
            .map_err(pki)?;
        let client = ca.issue_client("matryoshka-apiserver", &[]).map_err(pki)?;
        Ok(Material {
            ca_pem: ca.pair.cert_pem,
            server_cert: server.cert_pem,
            server_key: server.key_pem,
            client_cert: client.cert_pem,
            client_key: client.key_pem,
            client_port: free_port()?,
            peer_port: free_port()?,
        })
    }

    fn secret(&self, name: &str, tenant: &str) -> Secret {
        let b = |s: &str| k8s_openapi::ByteString(s.as_bytes().to_vec());
        Secret {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some(secret_name(name)),
                namespace: Some(SECRET_NAMESPACE.into()),
                labels: Some([(TENANT_LABEL.to_string(), tenant.to_string())].into()),
                ..Default::default()
            },
            data: Some(
                [
                    ("ca.crt", b(&self.ca_pem)),
                    ("server.crt", b(&self.server_cert)),
                    ("server.key", b(&self.server_key)),
                    ("tls.crt", b(&self.client_cert)),
                    ("tls.key", b(&self.client_key)),
                    ("client-port", b(&self.client_port.to_string())),
                    ("peer-port", b(&self.peer_port.to_string())),
                ]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
            ),
            ..Default::default()
        }
    }

    fn from_secret(s: &Secret) -> Option<Material> {
        let data = s.data.as_ref()?;
        let text = |k: &str| String::from_utf8(data.get(k)?.0.clone()).ok();
        Some(Material {
            ca_pem: text("ca.crt")?,
            server_cert: text("server.crt")?,
            server_key: text("server.key")?,
            client_cert: text("tls.crt")?,
            client_key: text("tls.key")?,
            client_port: text("client-port")?.parse().ok()?,
            peer_port: text("peer-port")?.parse().ok()?,
        })
    }

    fn endpoint(&self) -> String {
        format!("127.0.0.1:{}", self.client_port)
    }
}

fn free_port() -> Result<u16> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| Error::Config(format!("no free port: {e}")))
}

/// One running etcd.
struct Member {
    stop: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

/// The tenants' etcds this replica runs.
pub struct ManagedEtcds {
    opts: EtcdOptions,
    members: Mutex<HashMap<String, Member>>,
}

impl ManagedEtcds {
    pub fn new(opts: EtcdOptions) -> Arc<Self> {
        Arc::new(ManagedEtcds {
            opts,
            members: Mutex::new(HashMap::new()),
        })
    }

    fn data_dir(&self, name: &str) -> PathBuf {
        self.opts.dir.join(name)
    }

    /// Brings datastore `name` (the tenant namespace `tenant`'s) up: its Secret, its etcd
    /// and its DataStore. `Ok(None)` when its DataStore reports ready, else why not yet.
    pub async fn ensure(&self, root: &kube::Client, name: &str) -> Result<Option<String>> {
        let secrets: Api<Secret> = Api::namespaced(root.clone(), SECRET_NAMESPACE);
        let material = match ignore_not_found(secrets.get(&secret_name(name)).await)? {
            Some(s) => Material::from_secret(&s).ok_or_else(|| {
                Error::Config(format!(
                    "the Secret {SECRET_NAMESPACE}/{} is not a datastore's",
                    secret_name(name)
                ))
            })?,
            None => {
                let m = Material::generate(name)?;
                match secrets
                    .create(&PostParams::default(), &m.secret(name, name))
                    .await
                {
                    Ok(_) => m,
                    // Another pass made it first: use what is stored.
                    Err(kube::Error::Api(s)) if s.code == 409 => {
                        return Ok(Some("creating its credentials".into()));
                    }
                    Err(e) => return Err(e.into()),
                }
            }
        };
        let datastores: Api<DynamicObject> =
            Api::all_with(root.clone(), &runtime::client::datastore_resource());
        let existing = ignore_not_found(datastores.get(name).await)?;
        let data = self.data_dir(name);
        if existing.is_some() && !data.join("data").exists() {
            return Ok(Some(format!(
                "the datastore's data is not on this replica ({} is missing): the platform's replicas need a shared --data-dir",
                data.display()
            )));
        }
        self.run(name, &material)?;
        let ref_ = |key: &str| json!({"secretReference": {"name": secret_name(name), "namespace": SECRET_NAMESPACE, "keyPath": key}});
        apply(
            root,
            &json!({
                "apiVersion": "core.matryoshka.dev/v1alpha1",
                "kind": "DataStore",
                "metadata": {"name": name, "labels": {TENANT_LABEL: name}},
                "spec": {
                    "driver": "etcd",
                    "endpoints": [material.endpoint()],
                    "tlsConfig": {
                        "certificateAuthority": {"certificate": ref_("ca.crt")},
                        "clientCertificate": {"certificate": ref_("tls.crt"), "privateKey": ref_("tls.key")},
                    },
                },
            }),
        )
        .await?;
        let ready = existing
            .as_ref()
            .and_then(|d| d.data.pointer("/status/ready"))
            .and_then(serde_json::Value::as_bool)
            == Some(true);
        if ready {
            return Ok(None);
        }
        let why = existing
            .as_ref()
            .and_then(|d| d.data.pointer("/status/conditions/0/message"))
            .and_then(serde_json::Value::as_str)
            .unwrap_or("starting")
            .to_string();
        Ok(Some(why))
    }

    /// Takes datastore `name` down once no cluster uses it: deletes its DataStore (which the
    /// API server holds while a cluster is bound to it), then stops its etcd and removes its
    /// data and Secret. Whether it is gone.
    pub async fn remove(&self, root: &kube::Client, name: &str) -> Result<bool> {
        let datastores: Api<DynamicObject> =
            Api::all_with(root.clone(), &runtime::client::datastore_resource());
        if let Some(ds) = ignore_not_found(datastores.get(name).await)? {
            let ours = ds
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(TENANT_LABEL))
                .is_some_and(|t| t == name);
            if !ours {
                // An administrator's DataStore of that name: not the platform's to remove.
                return Ok(true);
            }
            if ds.metadata.deletion_timestamp.is_none() {
                ignore_not_found(datastores.delete(name, &DeleteParams::default()).await)?;
            }
            return Ok(false);
        }
        self.stop(name).await;
        let dir = self.data_dir(name);
        if dir.exists() {
            std::fs::remove_dir_all(&dir)
                .map_err(|e| Error::Config(format!("removing {}: {e}", dir.display())))?;
        }
        let secrets: Api<Secret> = Api::namespaced(root.clone(), SECRET_NAMESPACE);
        if ignore_not_found(secrets.get_metadata(&secret_name(name)).await)?.is_some() {
            ignore_not_found(
                secrets
                    .delete(&secret_name(name), &DeleteParams::default())
                    .await,
            )?;
        }
        Ok(true)
    }

    /// Whether this replica runs datastore `name`'s etcd.
    pub fn running(&self, name: &str) -> bool {
        self.members
            .lock()
            .map(|m| m.get(name).is_some_and(|m| !m.task.is_finished()))
            .unwrap_or(false)
    }

    /// Starts the supervisor of `name`'s etcd unless it runs.
    fn run(&self, name: &str, material: &Material) -> Result<()> {
        let mut members = self
            .members
            .lock()
            .map_err(|_| Error::Config("the datastores' lock is poisoned".into()))?;
        if members.get(name).is_some_and(|m| !m.task.is_finished()) {
            return Ok(());
        }
        let dir = self.data_dir(name);
        write_material(&dir, material)?;
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let task = tokio::spawn(supervise(
            name.to_string(),
            dir,
            self.opts.clone(),
            material.clone(),
            stopped,
        ));
        members.insert(name.to_string(), Member { stop, task });
        Ok(())
    }

    /// Stops `name`'s etcd (if this replica runs it) and waits for it.
    pub async fn stop(&self, name: &str) {
        let member = self.members.lock().ok().and_then(|mut m| m.remove(name));
        if let Some(m) = member {
            let _ = m.stop.send(true);
            let _ = m.task.await;
        }
    }

    /// Stops every etcd (the platform lost its leadership, or shuts down).
    pub async fn stop_all(&self) {
        let names: Vec<String> = self
            .members
            .lock()
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default();
        for n in names {
            self.stop(&n).await;
        }
    }
}

fn write_material(dir: &Path, m: &Material) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let tls = dir.join("tls");
    let io = |e: std::io::Error| Error::Config(format!("writing {}: {e}", tls.display()));
    std::fs::create_dir_all(&tls).map_err(io)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(io)?;
    for (file, pem) in [
        ("ca.crt", &m.ca_pem),
        ("server.crt", &m.server_cert),
        ("server.key", &m.server_key),
    ] {
        let path = tls.join(file);
        std::fs::write(&path, pem).map_err(io)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).map_err(io)?;
    }
    Ok(())
}

/// The etcd command of datastore `name`.
fn command(name: &str, dir: &Path, opts: &EtcdOptions, m: &Material) -> tokio::process::Command {
    let client = format!("https://127.0.0.1:{}", m.client_port);
    let peer = format!("http://127.0.0.1:{}", m.peer_port);
    let tls = dir.join("tls");
    let mut cmd = tokio::process::Command::new(&opts.bin);
    cmd.args(["--name", name, "--data-dir"])
        .arg(dir.join("data"))
        .args([
            "--listen-client-urls",
            &client,
            "--advertise-client-urls",
            &client,
        ])
        .args([
            "--listen-peer-urls",
            &peer,
            "--initial-advertise-peer-urls",
            &peer,
        ])
        .args(["--initial-cluster", &format!("{name}={peer}")])
        .arg("--cert-file")
        .arg(tls.join("server.crt"))
        .arg("--key-file")
        .arg(tls.join("server.key"))
        .arg("--trusted-ca-file")
        .arg(tls.join("ca.crt"))
        .arg("--client-cert-auth")
        .args(["--quota-backend-bytes", &opts.quota_bytes.to_string()])
        .args(["--auto-compaction-mode", "periodic"])
        .args(["--auto-compaction-retention", &opts.compaction_retention])
        .args(["--snapshot-count", &opts.snapshot_count.to_string()])
        .args(["--max-request-bytes", "4194304"])
        .args(["--log-level", "warn"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .kill_on_drop(true);
    cmd
}

/// Runs `name`'s etcd until told to stop: restarts it when it exits, defragments it when the
/// rule says so.
async fn supervise(
    name: String,
    dir: PathBuf,
    opts: EtcdOptions,
    material: Material,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let mut defrag = tokio::time::interval(opts.defrag_interval);
    defrag.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    defrag.tick().await;
    loop {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("etcd.log"));
        let mut cmd = command(&name, &dir, &opts, &material);
        if let Ok(log) = log {
            cmd.stderr(log);
        }
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(datastore = %name, bin = %opts.bin, error = %e, "cannot start etcd");
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs(5)) => continue,
                    _ = stop.changed() => return,
                }
            }
        };
        if let Some(pid) = child.id() {
            watchdog(pid);
            tracing::info!(datastore = %name, pid, endpoint = %material.endpoint(), "etcd started");
        }
        loop {
            tokio::select! {
                status = child.wait() => {
                    tracing::warn!(datastore = %name, status = ?status, "etcd exited; restarting");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    break;
                }
                _ = defrag.tick() => {
                    if let Err(e) = maybe_defrag(&material, opts.quota_bytes).await {
                        tracing::warn!(datastore = %name, error = %e, "defragmentation");
                    }
                }
                _ = stop.changed() => {
                    let _ = child.kill().await;
                    tracing::info!(datastore = %name, "etcd stopped");
                    return;
                }
            }
        }
    }
}

/// Kills etcd when this process dies without stopping it (it must not outlive its
/// supervisor and be started twice over one data directory).
fn watchdog(pid: u32) {
    let _ = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "while kill -0 {parent} 2>/dev/null && kill -0 {pid} 2>/dev/null; do sleep 1; done; kill -9 {pid} 2>/dev/null",
            parent = std::process::id()
        ))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
}

/// Defragments the datastore when [`needs_defrag`] says so, then disarms a NOSPACE alarm.
async fn maybe_defrag(m: &Material, quota: u64) -> std::result::Result<(), String> {
    let opts = etcd_client::ConnectOptions::new()
        .with_connect_timeout(Duration::from_secs(5))
        .with_tls(
            etcd_client::TlsOptions::new()
                .ca_certificate(etcd_client::Certificate::from_pem(&m.ca_pem))
                .identity(etcd_client::Identity::from_pem(
                    &m.client_cert,
                    &m.client_key,
                )),
        );
    let endpoint = format!("https://{}", m.endpoint());
    let mut c = etcd_client::Client::connect([endpoint], Some(opts))
        .await
        .map_err(|e| e.to_string())?;
    let status = c.status().await.map_err(|e| e.to_string())?;
    let (size, in_use) = (status.db_size(), status.raft_used_db_size());
    if !needs_defrag(size, in_use, quota) {
        return Ok(());
    }
    c.defragment().await.map_err(|e| e.to_string())?;
    let after = c.status().await.map_err(|e| e.to_string())?.db_size();
    tracing::info!(before = size, after, in_use, "datastore defragmented");
    let alarms = c
        .alarm(
            etcd_client::AlarmAction::Get,
            etcd_client::AlarmType::None,
            None,
        )
        .await
        .map_err(|e| e.to_string())?;
    if alarms
        .alarms()
        .iter()
        .any(|a| a.alarm() == etcd_client::AlarmType::Nospace)
    {
        c.alarm(
            etcd_client::AlarmAction::Deactivate,
            etcd_client::AlarmType::Nospace,
            None,
        )
        .await
        .map_err(|e| e.to_string())?;
        tracing::info!("datastore NOSPACE alarm disarmed");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_database_is_defragmented_over_four_fifths_of_its_quota_or_wasting_200_mib() {
        let quota = 1000 << 20;
        assert!(!needs_defrag(100 << 20, 90 << 20, quota));
        assert!(needs_defrag(801 << 20, 800 << 20, quota));
        assert!(needs_defrag(500 << 20, 250 << 20, quota));
        assert!(!needs_defrag(500 << 20, 301 << 20, quota));
        assert!(needs_defrag(300 << 20, 50 << 20, 0));
    }

    #[test]
    fn a_datastore_runs_with_the_seeds_sizing_and_client_certificates_required() {
        let m = Material::generate("tenant-a").unwrap();
        let opts = EtcdOptions::new(PathBuf::from("/d"));
        let cmd = command("tenant-a", Path::new("/d/tenant-a"), &opts, &m);
        let args: Vec<String> = cmd
            .as_std()
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let has = |pair: &[&str]| args.windows(pair.len()).any(|w| w == pair);
        assert!(has(&["--quota-backend-bytes", "4080218931"]), "{args:?}");
        assert!(has(&["--auto-compaction-mode", "periodic"]));
        assert!(has(&["--auto-compaction-retention", "5m"]));
        assert!(has(&["--snapshot-count", "10000"]));
        assert!(args.iter().any(|a| a == "--client-cert-auth"));
        assert!(has(&[
            "--listen-client-urls",
            &format!("https://127.0.0.1:{}", m.client_port)
        ]));
        let round = Material::from_secret(&m.secret("tenant-a", "tenant-a")).unwrap();
        assert_eq!(
            (round.client_port, round.peer_port, round.ca_pem),
            (m.client_port, m.peer_port, m.ca_pem)
        );
    }
}
