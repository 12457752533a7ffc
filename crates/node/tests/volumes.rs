//! The volume manager against an in-process API server: configMap, secret, downwardAPI and
//! projected service-account volumes on real tmpfs mounts, in-place updates, token refresh,
//! claims of local volumes, subPath binds and teardown. Runs as root (mounts); every test
//! unmounts what it mounted, also when it fails (`Root`'s drop).

mod support;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use async_trait::async_trait;
use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::{
    ConfigMap, PersistentVolume, PersistentVolumeClaim, Pod, Secret, ServiceAccount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::{Api, Patch, PatchParams, PostParams};
use node::kubelet::volumes::{
    ApiSource, MountOptions, ObjectKind, ObjectSource, SourceError, TokenManager, VolumeConfig,
    VolumeError, VolumeManager, mount,
};
use parking_lot::Mutex;
use serde_json::json;

/// The agent's data directory; unmounts everything below it when dropped.
struct Root(tempfile::TempDir);

impl Root {
    fn new() -> Root {
        Root(tempfile::tempdir().expect("tempdir"))
    }
    fn path(&self) -> &Path {
        self.0.path()
    }
}

impl Drop for Root {
    fn drop(&mut self) {
        if let Err(e) = mount::unmount_all_under(self.0.path()) {
            eprintln!("cleaning up mounts below {}: {e}", self.0.path().display());
        }
    }
}

/// An [`ObjectSource`] that counts token requests and can be made to fail them.
struct Counting {
    inner: ApiSource,
    token_requests: AtomicUsize,
    fail_tokens: AtomicBool,
}

#[async_trait]
impl ObjectSource for Counting {
    async fn config_map(&self, ns: &str, name: &str) -> Result<Option<ConfigMap>, SourceError> {
        self.inner.config_map(ns, name).await
    }
    async fn secret(&self, ns: &str, name: &str) -> Result<Option<Secret>, SourceError> {
        self.inner.secret(ns, name).await
    }
    async fn persistent_volume_claim(
        &self,
        ns: &str,
        name: &str,
    ) -> Result<Option<PersistentVolumeClaim>, SourceError> {
        self.inner.persistent_volume_claim(ns, name).await
    }
    async fn persistent_volume(&self, name: &str) -> Result<Option<PersistentVolume>, SourceError> {
        self.inner.persistent_volume(name).await
    }
    async fn request_token(
        &self,
        ns: &str,
        sa: &str,
        req: &TokenRequest,
    ) -> Result<TokenRequest, SourceError> {
        self.token_requests.fetch_add(1, Ordering::SeqCst);
        if self.fail_tokens.load(Ordering::SeqCst) {
            return Err(SourceError(
                "the server is currently unable to handle the request".into(),
            ));
        }
        self.inner.request_token(ns, sa, req).await
    }
}

struct Setup {
    env: support::Env,
    root: Root,
    source: Arc<Counting>,
    clock: Arc<Mutex<jiff::Timestamp>>,
    manager: VolumeManager,
}

async fn start() -> Setup {
    let env = support::Env::start().await;
    let root = Root::new();
    let source = Arc::new(Counting {
        inner: ApiSource::new(env.client.clone()),
        token_requests: AtomicUsize::new(0),
        fail_tokens: AtomicBool::new(false),
    });
    let clock = Arc::new(Mutex::new(jiff::Timestamp::now()));
    let c = clock.clone();
    let tokens = TokenManager::new(Arc::new(move || *c.lock()));
    let config = VolumeConfig {
        root_dir: root.path().to_path_buf(),
        node_allocatable: [("memory".to_string(), Quantity("1Gi".into()))].into(),
    };
    let manager = VolumeManager::with_tokens(config, source.clone(), tokens);
    Setup {
        env,
        root,
        source,
        clock,
        manager,
    }
}

async fn create<K>(client: &kube::Client, obj: serde_json::Value) -> K
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + serde::Serialize,
    K::DynamicType: Default,
{
    let mut obj = obj;
    // Each test looks at the volumes it names: no automatic token volume beside them.
    if K::kind(&K::DynamicType::default()) == "Pod"
        && let Some(spec) = obj
            .get_mut("spec")
            .and_then(serde_json::Value::as_object_mut)
    {
        spec.entry("automountServiceAccountToken")
            .or_insert(serde_json::Value::Bool(false));
    }
    let obj: K = serde_json::from_value(obj).expect("object");
    Api::<K>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &obj)
        .await
        .expect("created")
}

fn volume_dir(m: &VolumeManager, pod: &Pod, plugin: &str, name: &str) -> PathBuf {
    m.pod_dir(pod.metadata.uid.as_deref().unwrap())
        .join("volumes")
        .join(plugin)
        .join(name)
}

fn read(p: PathBuf) -> String {
    fs::read_to_string(&p).unwrap_or_else(|e| panic!("reading {}: {e}", p.display()))
}

fn mode(p: &Path) -> u32 {
    fs::metadata(p).unwrap().permissions().mode() & 0o7777
}

#[tokio::test]
async fn a_configmap_update_reaches_the_mounted_file_and_immutable_ones_are_not_watched() {
    let s = start().await;
    let c = &s.env.client;
    create::<ConfigMap>(
        c,
        json!({"metadata": {"name": "app"}, "data": {"level": "info", "other": "x"}}),
    )
    .await;
    create::<ConfigMap>(
        c,
        json!({"metadata": {"name": "frozen"}, "immutable": true, "data": {"k": "v1"}}),
    )
    .await;
    let pod: Pod = create(c, json!({"metadata": {"name": "p"}, "spec": {
        "containers": [{"name": "c", "image": "busybox"}],
        "volumes": [
            {"name": "cfg", "configMap": {"name": "app", "items": [{"key": "level", "path": "conf/level", "mode": 0o600}]}},
            {"name": "all", "configMap": {"name": "app"}},
            {"name": "ice", "configMap": {"name": "frozen"}}
        ]}})).await;

    let volumes = s.manager.setup(&pod).await.expect("set up");
    let dir = volume_dir(&s.manager, &pod, "kubernetes.io~configmap", "cfg");
    assert_eq!(volumes.volumes["cfg"].path, dir);
    assert!(volumes.volumes["cfg"].read_only);
    assert_eq!(read(dir.join("conf/level")), "info");
    assert_eq!(mode(&dir.join("conf/level")), 0o600);
    assert_eq!(
        mode(&dir),
        0o777,
        "on disk, world-writable like an emptyDir"
    );
    assert!(
        !mount::is_mounted(&dir).unwrap(),
        "configMap volumes are not tmpfs"
    );
    let all = volume_dir(&s.manager, &pod, "kubernetes.io~configmap", "all");
    assert_eq!(read(all.join("other")), "x");
    assert_eq!(mode(&all.join("other")), 0o644);

    let watched: Vec<String> = s
        .manager
        .watched_objects()
        .into_iter()
        .map(|o| o.name)
        .collect();
    assert_eq!(watched, ["app"], "immutable objects are not watched");

    let before = fs::read_link(dir.join("..data")).unwrap();
    Api::<ConfigMap>::namespaced(c.clone(), "default")
        .patch(
            "app",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"level": "debug"}})),
        )
        .await
        .unwrap();
    let results = s
        .manager
        .object_changed(ObjectKind::ConfigMap, "default", "app")
        .await;
    assert_eq!(results.len(), 1);
    assert!(results[0].1.as_ref().expect("resynced"), "files changed");
    assert_eq!(read(dir.join("conf/level")), "debug");
    assert_ne!(
        fs::read_link(dir.join("..data")).unwrap(),
        before,
        "..data swapped"
    );

    // A deleted source keeps the last content.
    Api::<ConfigMap>::namespaced(c.clone(), "default")
        .delete("app", &Default::default())
        .await
        .unwrap();
    assert!(s.manager.resync(&pod).await.is_err());
    assert_eq!(read(dir.join("conf/level")), "debug");

    s.manager
        .teardown(pod.metadata.uid.as_deref().unwrap())
        .await
        .unwrap();
    assert!(
        !s.manager
            .pod_dir(pod.metadata.uid.as_deref().unwrap())
            .exists()
    );
}

#[tokio::test]
async fn a_missing_configmap_fails_the_mount_until_it_exists() {
    let s = start().await;
    let c = &s.env.client;
    let pod: Pod = create(
        c,
        json!({"metadata": {"name": "p"}, "spec": {
        "containers": [{"name": "c", "image": "busybox"}],
        "volumes": [
            {"name": "cfg", "configMap": {"name": "later"}},
            {"name": "opt", "configMap": {"name": "nowhere", "optional": true}},
            {"name": "sec", "secret": {"secretName": "creds"}}
        ]}}),
    )
    .await;
    let err = s.manager.setup(&pod).await.unwrap_err();
    let VolumeError::SetUp(failures) = &err else {
        panic!("{err}")
    };
    let messages: Vec<String> = failures.iter().map(|f| f.event_message()).collect();
    assert_eq!(
        messages,
        [
            "MountVolume.SetUp failed for volume \"cfg\" : configmap \"later\" not found",
            "MountVolume.SetUp failed for volume \"sec\" : secret \"creds\" not found",
        ]
    );
    create::<ConfigMap>(
        c,
        json!({"metadata": {"name": "later"}, "data": {"a": "1"}}),
    )
    .await;
    create::<Secret>(
        c,
        json!({"metadata": {"name": "creds"}, "stringData": {"password": "hunter2"}}),
    )
    .await;
    let volumes = s
        .manager
        .setup(&pod)
        .await
        .expect("set up once the sources exist");
    assert!(
        volumes.volumes["opt"].path.join("..data").is_dir(),
        "optional and missing: empty"
    );
    let sec = volume_dir(&s.manager, &pod, "kubernetes.io~secret", "sec");
    assert_eq!(read(sec.join("password")), "hunter2");
    assert!(
        mount::is_mounted_as(&sec, "tmpfs").unwrap(),
        "secrets live on tmpfs"
    );
    s.manager
        .teardown(pod.metadata.uid.as_deref().unwrap())
        .await
        .unwrap();
    assert!(mount::mounts_under(s.root.path()).unwrap().is_empty());
}

#[tokio::test]
async fn the_service_account_volume_holds_a_bound_token_the_ca_and_the_namespace() {
    let s = start().await;
    let c = &s.env.client;
    // The API server seeds the default service account and the root CA ConfigMap.
    Api::<ServiceAccount>::namespaced(c.clone(), "default")
        .get("default")
        .await
        .expect("seeded service account");
    let ca = match Api::<ConfigMap>::namespaced(c.clone(), "default")
        .get_opt("kube-root-ca.crt")
        .await
        .unwrap()
    {
        Some(cm) => cm.data.unwrap()["ca.crt"].clone(),
        None => {
            let ca = "-----BEGIN CERTIFICATE-----\n".to_string();
            create::<ConfigMap>(
                c,
                json!({"metadata": {"name": "kube-root-ca.crt"}, "data": {"ca.crt": ca}}),
            )
            .await;
            ca
        }
    };
    let pod: Pod = create(c, json!({"metadata": {"name": "p"}, "spec": {
        "securityContext": {"fsGroup": 2000},
        "containers": [{"name": "c", "image": "busybox"}],
        "volumes": [{"name": "kube-api-access-abcde", "projected": {"defaultMode": 0o644, "sources": [
            {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}},
            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}
        ]}}]}})).await;
    let uid = pod.metadata.uid.clone().unwrap();

    s.manager.setup(&pod).await.expect("set up");
    let dir = volume_dir(
        &s.manager,
        &pod,
        "kubernetes.io~projected",
        "kube-api-access-abcde",
    );
    assert!(mount::is_mounted_as(&dir, "tmpfs").unwrap());
    assert_eq!(read(dir.join("namespace")), "default");
    assert_eq!(read(dir.join("ca.crt")), ca);
    let token = read(dir.join("token"));
    let claims = jwt_claims(&token);
    assert_eq!(claims["kubernetes.io"]["pod"]["uid"], json!(uid));
    assert_eq!(claims["sub"], "system:serviceaccount:default:default");
    // With an fsGroup the token is 0600 plus group read.
    assert_eq!(mode(&dir.join("..data/token")), 0o640);
    assert_eq!(mode(&dir.join("..data/ca.crt")), 0o644);
    assert_eq!(s.source.token_requests.load(Ordering::SeqCst), 1);

    // Before 80 % of its lifetime the cached token is kept.
    s.manager.resync(&pod).await.unwrap();
    assert_eq!(s.source.token_requests.load(Ordering::SeqCst), 1);
    let refresh_at = s
        .manager
        .next_token_refresh()
        .expect("a refresh is due some time");

    // Past it, a failing refresh keeps serving the old token.
    *s.clock.lock() = refresh_at + jiff::SignedDuration::from_secs(20);
    s.source.fail_tokens.store(true, Ordering::SeqCst);
    s.manager.resync(&pod).await.expect("old token kept");
    assert_eq!(s.source.token_requests.load(Ordering::SeqCst), 2);
    assert_eq!(read(dir.join("token")), token);

    // Then a working one replaces it.
    s.source.fail_tokens.store(false, Ordering::SeqCst);
    assert!(s.manager.resync(&pod).await.unwrap(), "new token written");
    assert_eq!(s.source.token_requests.load(Ordering::SeqCst), 3);
    assert_ne!(read(dir.join("token")), token);

    s.manager.teardown(&uid).await.unwrap();
    assert!(
        s.manager.tokens().is_empty(),
        "the pod's tokens are forgotten"
    );
    assert!(mount::mounts_under(s.root.path()).unwrap().is_empty());
}

fn jwt_claims(token: &str) -> serde_json::Value {
    use base64::Engine;
    let payload = token.split('.').nth(1).expect("a JWT");
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .expect("base64url");
    serde_json::from_slice(&bytes).expect("claims")
}

#[tokio::test]
async fn downward_api_files_follow_label_changes() {
    let s = start().await;
    let c = &s.env.client;
    let mut pod: Pod = create(c, json!({"metadata": {"name": "p", "labels": {"tier": "web", "app": "shop"}}, "spec": {
        "containers": [{"name": "c", "image": "busybox", "resources": {"limits": {"memory": "64Mi"}}}],
        "volumes": [{"name": "info", "downwardAPI": {"items": [
            {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
            {"path": "mem", "resourceFieldRef": {"containerName": "c", "resource": "limits.memory", "divisor": "1Mi"}}
        ]}}]}})).await;
    s.manager.setup(&pod).await.expect("set up");
    let dir = volume_dir(&s.manager, &pod, "kubernetes.io~downward-api", "info");
    assert_eq!(read(dir.join("labels")), "app=\"shop\"\ntier=\"web\"");
    assert_eq!(read(dir.join("mem")), "64");
    assert!(mount::is_mounted_as(&dir, "tmpfs").unwrap());

    pod.metadata
        .labels
        .as_mut()
        .unwrap()
        .insert("tier".into(), "api".into());
    assert!(s.manager.resync(&pod).await.unwrap());
    assert_eq!(read(dir.join("labels")), "app=\"shop\"\ntier=\"api\"");
    s.manager
        .teardown(pod.metadata.uid.as_deref().unwrap())
        .await
        .unwrap();
}

#[tokio::test]
async fn empty_dirs_are_directories_or_sized_tmpfs_and_teardown_removes_them() {
    let s = start().await;
    let c = &s.env.client;
    let pod: Pod = create(c, json!({"metadata": {"name": "p"}, "spec": {
        "securityContext": {"fsGroup": 3000},
        "containers": [{"name": "c", "image": "busybox", "resources": {"limits": {"memory": "64Mi"}},
            "volumeMounts": [
                {"name": "scratch", "mountPath": "/scratch"},
                {"name": "scratch", "mountPath": "/logs", "subPathExpr": "logs/$(POD)"},
                {"name": "ram", "mountPath": "/ram", "readOnly": true}
            ]}],
        "volumes": [
            {"name": "scratch", "emptyDir": {"sizeLimit": "1Gi"}},
            {"name": "ram", "emptyDir": {"medium": "Memory", "sizeLimit": "16Mi"}},
            {"name": "podram", "emptyDir": {"medium": "Memory"}}
        ]}})).await;
    let uid = pod.metadata.uid.clone().unwrap();
    let volumes = s.manager.setup(&pod).await.expect("set up");

    let scratch = volume_dir(&s.manager, &pod, "kubernetes.io~empty-dir", "scratch");
    assert_eq!(mode(&scratch), 0o2777, "0777 plus the fsGroup's setgid");
    assert!(!mount::is_mounted(&scratch).unwrap());
    let ram = volume_dir(&s.manager, &pod, "kubernetes.io~empty-dir", "ram");
    let podram = volume_dir(&s.manager, &pod, "kubernetes.io~empty-dir", "podram");
    assert_eq!(tmpfs_size(&ram), Some(16 * 1024), "sizeLimit");
    assert_eq!(
        tmpfs_size(&podram),
        Some(64 * 1024),
        "the pod's memory limit"
    );
    match &volumes.volumes["scratch"].kind {
        node::kubelet::volumes::VolumeKind::EmptyDir { size_limit, .. } => {
            assert_eq!(*size_limit, Some(1 << 30), "recorded for eviction")
        }
        other => panic!("{other:?}"),
    }

    let container = &pod.spec.as_ref().unwrap().containers[0];
    let envs = [k8s_cri::v1::KeyValue {
        key: "POD".into(),
        value: "p".into(),
    }];
    let mounts = volumes
        .mounts_for(container, &envs, &MountOptions::default())
        .expect("mounts");
    assert_eq!(mounts[0].host_path, scratch.display().to_string());
    let sub = PathBuf::from(&mounts[1].host_path);
    assert_eq!(
        sub,
        s.manager.pod_dir(&uid).join("volume-subpaths/scratch/c/1")
    );
    assert!(
        scratch.join("logs/p").is_dir(),
        "a missing subPath is created"
    );
    assert!(
        mount::is_mounted(&sub).unwrap(),
        "bound, not the user-controlled path"
    );
    fs::write(sub.join("from-container"), "x").unwrap();
    assert_eq!(read(scratch.join("logs/p/from-container")), "x");
    assert!(mounts[2].readonly);

    s.manager.teardown(&uid).await.unwrap();
    assert!(mount::mounts_under(s.root.path()).unwrap().is_empty());
    assert!(!s.manager.pod_dir(&uid).exists());
}

/// The `size=` of the tmpfs mounted at `dir`, in KiB, from `/proc/self/mountinfo`.
fn tmpfs_size(dir: &Path) -> Option<u64> {
    let dir = fs::canonicalize(dir).ok()?;
    let info = fs::read_to_string("/proc/self/mountinfo").ok()?;
    info.lines().find_map(|l| {
        let (left, right) = l.split_once(" - ")?;
        if Path::new(left.split(' ').nth(4)?) != dir {
            return None;
        }
        right
            .split(' ')
            .nth(2)?
            .split(',')
            .find_map(|o| o.strip_prefix("size="))?
            .strip_suffix('k')?
            .parse()
            .ok()
    })
}

#[tokio::test]
async fn a_sub_path_cannot_escape_its_volume_through_a_symlink() {
    let s = start().await;
    let c = &s.env.client;
    let pod: Pod = create(
        c,
        json!({"metadata": {"name": "p"}, "spec": {
        "containers": [{"name": "c", "image": "busybox",
            "volumeMounts": [{"name": "scratch", "mountPath": "/x", "subPath": "evil"}]}],
        "volumes": [{"name": "scratch", "emptyDir": {}}]}}),
    )
    .await;
    let volumes = s.manager.setup(&pod).await.expect("set up");
    // What a container could do in its writable volume.
    std::os::unix::fs::symlink("/etc", volumes.volumes["scratch"].path.join("evil")).unwrap();
    let container = &pod.spec.as_ref().unwrap().containers[0];
    let err = volumes
        .mounts_for(container, &[], &MountOptions::default())
        .unwrap_err();
    assert_eq!(
        err,
        "failed to prepare subPath for volumeMount \"scratch\" of container \"c\""
    );
    assert!(mount::mounts_under(s.root.path()).unwrap().is_empty());
    s.manager
        .teardown(pod.metadata.uid.as_deref().unwrap())
        .await
        .unwrap();
}

#[tokio::test]
async fn claims_of_local_volumes_resolve_to_their_path() {
    let s = start().await;
    let c = &s.env.client;
    let data = tempfile::tempdir().unwrap();
    fs::write(data.path().join("db"), "rows").unwrap();
    let pvc: PersistentVolumeClaim = create(
        c,
        json!({"metadata": {"name": "data"}, "spec": {
        "accessModes": ["ReadWriteOnce"], "volumeName": "local-1",
        "resources": {"requests": {"storage": "1Gi"}}}}),
    )
    .await;
    let pv: PersistentVolume =
        serde_json::from_value(json!({"metadata": {"name": "local-1"}, "spec": {
        "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
        "local": {"path": data.path()},
        "claimRef": {"namespace": "default", "name": "data", "uid": pvc.metadata.uid},
        "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": ["n1"]}]}]}}}}))
        .unwrap();
    Api::<PersistentVolume>::all(c.clone())
        .create(&PostParams::default(), &pv)
        .await
        .unwrap();
    let pod: Pod = create(c, json!({"metadata": {"name": "p"}, "spec": {
        "containers": [{"name": "c", "image": "busybox"}],
        "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "data", "readOnly": true}}]}})).await;

    let err = s.manager.setup(&pod).await.unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.starts_with("Unable to attach or mount volumes: unmounted volumes=[d], unattached volumes=[], failed to process volumes=[d]: error processing PVC default/data: PVC default/data has non-bound phase ("),
        "{msg}"
    );
    assert!(
        msg.ends_with(" or empty pvc.Spec.VolumeName (\"local-1\")"),
        "{msg}"
    );
    Api::<PersistentVolumeClaim>::namespaced(c.clone(), "default")
        .patch_status(
            "data",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Bound"}})),
        )
        .await
        .unwrap();
    let volumes = s.manager.setup(&pod).await.expect("bound now");
    assert_eq!(volumes.volumes["d"].path, data.path());
    assert!(volumes.volumes["d"].read_only);
    s.manager
        .teardown(pod.metadata.uid.as_deref().unwrap())
        .await
        .unwrap();
    assert_eq!(
        read(data.path().join("db")),
        "rows",
        "teardown leaves node paths alone"
    );
}
