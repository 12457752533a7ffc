//! The built-in strategies through the real generic store (embedded storage in a temporary
//! directory, the watch cache): what a client gets back for minimal objects, the 422 an
//! invalid one earns, and updates refused for immutable fields.

use std::sync::Arc;

use apimachinery::Reason;
use apimachinery::status::ApiError;
use registry::ResourceDef;
use registry::cache::{CacheOptions, WatchCache};
use registry::store::{Location, Store, WriteOptions};
use serde_json::{Value, json};
use storage::embedded::EmbeddedStore;

const CLUSTER: &str = "root";

struct Fixture {
    store: Store,
    resources: Vec<ResourceDef>,
    _dir: tempfile::TempDir,
}

impl Fixture {
    async fn new() -> Fixture {
        let dir = tempfile::tempdir().expect("tempdir");
        let storage: Arc<dyn storage::Storage> =
            Arc::new(EmbeddedStore::open(dir.path()).expect("open the store"));
        let cache = WatchCache::start(storage.clone(), CacheOptions::default())
            .await
            .expect("start the cache");
        let f = Fixture {
            store: Store::new(storage, cache),
            resources: registry::builtins::resources(),
            _dir: dir,
        };
        f.create(
            "",
            "namespaces",
            "",
            json!({"metadata": {"name": "default"}}),
        )
        .await
        .expect("create the namespace");
        f
    }

    fn res(&self, group: &str, plural: &str) -> &ResourceDef {
        self.resources
            .iter()
            .find(|r| r.group == group && r.plural == plural)
            .expect("a built-in resource")
    }

    async fn create(
        &self,
        group: &str,
        plural: &str,
        ns: &str,
        obj: Value,
    ) -> Result<Value, ApiError> {
        let loc = Location {
            cluster: CLUSTER,
            namespace: ns,
            name: "",
        };
        self.store
            .create(self.res(group, plural), &loc, obj, &WriteOptions::default())
            .await
    }

    async fn get(&self, group: &str, plural: &str, ns: &str, name: &str) -> Value {
        let loc = Location {
            cluster: CLUSTER,
            namespace: ns,
            name,
        };
        self.store
            .get(self.res(group, plural), &loc)
            .await
            .expect("get")
    }

    async fn replace(
        &self,
        group: &str,
        plural: &str,
        ns: &str,
        name: &str,
        obj: Value,
    ) -> Result<Value, ApiError> {
        let loc = Location {
            cluster: CLUSTER,
            namespace: ns,
            name,
        };
        self.store
            .update_with(
                self.res(group, plural),
                &loc,
                &WriteOptions::default(),
                |_| Ok(obj.clone()),
            )
            .await
            .map(|(v, _)| v)
    }
}

fn minimal_deployment(name: &str) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "nginx", "image": "nginx:1.25"}]},
            },
        },
    })
}

fn causes(e: &ApiError) -> Vec<(String, String, String)> {
    e.causes
        .iter()
        .map(|c| (c.reason.clone(), c.field.clone(), c.message.clone()))
        .collect()
}

#[tokio::test]
async fn a_minimal_deployment_comes_back_fully_defaulted() {
    let f = Fixture::new().await;
    let created = f
        .create("apps", "deployments", "default", minimal_deployment("web"))
        .await
        .expect("create the deployment");
    let stored = f.get("apps", "deployments", "default", "web").await;
    assert_eq!(stored["spec"], created["spec"]);
    assert_eq!(
        stored["spec"],
        json!({
            "replicas": 1,
            "selector": {"matchLabels": {"app": "web"}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}},
            "revisionHistoryLimit": 10,
            "progressDeadlineSeconds": 600,
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "containers": [{
                        "name": "nginx",
                        "image": "nginx:1.25",
                        "imagePullPolicy": "IfNotPresent",
                        "resources": {},
                        "terminationMessagePath": "/dev/termination-log",
                        "terminationMessagePolicy": "File",
                    }],
                    "restartPolicy": "Always",
                    "terminationGracePeriodSeconds": 30,
                    "dnsPolicy": "ClusterFirst",
                    "securityContext": {},
                    "schedulerName": "default-scheduler",
                },
            },
        })
    );
    assert_eq!(stored["status"], json!({}));
    assert_eq!(stored["metadata"]["generation"], json!(1));
}

#[tokio::test]
async fn an_invalid_deployment_gets_a_422_with_every_cause() {
    let f = Fixture::new().await;
    let mut d = minimal_deployment("bad");
    d["spec"]["replicas"] = json!(-1);
    d["spec"]["selector"]["matchLabels"]["app"] = json!("other");
    d["spec"]["template"]["spec"]["containers"] = json!([
        {"name": "a", "image": ""},
        {"name": "a", "image": "busybox", "resources": {"limits": {"cpu": "500m"}, "requests": {"cpu": "1"}}},
    ]);
    let err = f
        .create("apps", "deployments", "default", d)
        .await
        .expect_err("refused");
    assert_eq!(err.code, 422);
    assert_eq!(err.reason, Reason::Invalid);
    assert_eq!(
        causes(&err),
        vec![
            ("FieldValueInvalid".into(), "spec.replicas".into(), "Invalid value: -1: must be greater than or equal to 0".into()),
            (
                "FieldValueInvalid".into(),
                "spec.template.metadata.labels".into(),
                "Invalid value: map[string]string{\"app\":\"bad\"}: `selector` does not match template `labels`".into(),
            ),
            ("FieldValueRequired".into(), "spec.template.spec.containers[0].image".into(), "Required value".into()),
            (
                "FieldValueInvalid".into(),
                "spec.template.spec.containers[1].resources.requests".into(),
                "Invalid value: \"1\": must be less than or equal to cpu limit of 500m".into(),
            ),
            ("FieldValueDuplicate".into(), "spec.template.spec.containers[1].name".into(), "Duplicate value: \"a\"".into()),
        ]
    );
    assert!(
        err.message
            .starts_with("Deployment.apps \"bad\" is invalid: [")
    );
}

#[tokio::test]
async fn immutable_fields_are_refused_on_update() {
    let f = Fixture::new().await;
    let created = f
        .create("apps", "deployments", "default", minimal_deployment("web"))
        .await
        .expect("create");
    let mut changed = created.clone();
    changed["spec"]["selector"]["matchLabels"]["tier"] = json!("fe");
    changed["spec"]["template"]["metadata"]["labels"]["tier"] = json!("fe");
    apimachinery::meta::remove(&mut changed, "resourceVersion");
    let err = f
        .replace("apps", "deployments", "default", "web", changed)
        .await
        .expect_err("refused");
    assert_eq!(err.code, 422);
    assert_eq!(
        causes(&err),
        vec![(
            "FieldValueInvalid".into(),
            "spec.selector".into(),
            "Invalid value: v1.LabelSelector{MatchLabels:map[string]string{\"app\":\"web\", \"tier\":\"fe\"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable".into(),
        )]
    );
    // Scaling is an allowed update, and it bumps the generation.
    let mut scaled = created.clone();
    scaled["spec"]["replicas"] = json!(3);
    apimachinery::meta::remove(&mut scaled, "resourceVersion");
    let updated = f
        .replace("apps", "deployments", "default", "web", scaled)
        .await
        .expect("scale");
    assert_eq!(updated["spec"]["replicas"], json!(3));
    assert_eq!(updated["metadata"]["generation"], json!(2));
}

#[tokio::test]
async fn pods_start_pending_with_admission_defaults() {
    let f = Fixture::new().await;
    let pod = json!({"metadata": {"name": "p", "namespace": "default"}, "spec": {"containers": [
        {"name": "c", "image": "nginx", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]}});
    f.create("", "pods", "default", pod)
        .await
        .expect("create the pod");
    let stored = f.get("", "pods", "default", "p").await;
    assert_eq!(
        stored["status"],
        json!({"phase": "Pending", "qosClass": "Guaranteed"})
    );
    assert_eq!(stored["spec"]["serviceAccountName"], json!("default"));
    assert_eq!(
        stored["spec"]["tolerations"].as_array().map(Vec::len),
        Some(2)
    );
    let mut moved = stored.clone();
    moved["spec"]["restartPolicy"] = json!("Never");
    apimachinery::meta::remove(&mut moved, "resourceVersion");
    let err = f
        .replace("", "pods", "default", "p", moved)
        .await
        .expect_err("refused");
    assert_eq!(err.code, 422);
    assert!(err.causes[0].message.starts_with(
        "Forbidden: pod updates may not change fields other than `spec.containers[*].image`"
    ));
}

#[tokio::test]
async fn services_keep_a_given_cluster_ip_and_secrets_fold_string_data() {
    let f = Fixture::new().await;
    let svc = json!({"metadata": {"name": "db", "namespace": "default"}, "spec": {"clusterIP": "10.96.0.20", "ports": [{"port": 5432}]}});
    f.create("", "services", "default", svc)
        .await
        .expect("create the service");
    let stored = f.get("", "services", "default", "db").await;
    assert_eq!(stored["spec"]["clusterIPs"], json!(["10.96.0.20"]));
    assert_eq!(stored["spec"]["ports"][0]["targetPort"], json!(5432));
    let mut changed = stored.clone();
    changed["spec"]["clusterIP"] = json!("10.96.0.21");
    apimachinery::meta::remove(&mut changed, "resourceVersion");
    let err = f
        .replace("", "services", "default", "db", changed)
        .await
        .expect_err("refused");
    assert_eq!(err.causes[0].field, "spec.clusterIPs[0]");

    let secret = json!({"metadata": {"name": "s", "namespace": "default"}, "stringData": {"password": "hunter2"}});
    f.create("", "secrets", "default", secret)
        .await
        .expect("create the secret");
    let stored = f.get("", "secrets", "default", "s").await;
    assert_eq!(stored["type"], json!("Opaque"));
    assert_eq!(stored["data"], json!({"password": "aHVudGVyMg=="}));
    assert!(stored.get("stringData").is_none());
}
