//! Bodies captured from kubectl 1.33.1 (`tests/captured/`, recorded with a local stub server)
//! decode to the JSON kubectl ≤ 1.31 sends for the same commands.

use serde_json::{Value, json};

fn captured(name: &str) -> Value {
    let path = format!(
        "{}/tests/captured/kubectl-1.33-{name}.pb",
        env!("CARGO_MANIFEST_DIR")
    );
    let body = std::fs::read(&path).expect("captured body");
    pbcodec::decode(&body).expect("captured body decodes")
}

#[test]
fn create_deployment_decodes_to_the_json_kubectl_131_sends() {
    // kubectl.1.33 create deployment web --image=nginx --replicas=3 --port=80
    assert_eq!(
        captured("deployments"),
        json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "labels": {"app": "web"}},
            "spec": {
                "replicas": 3,
                "selector": {"matchLabels": {"app": "web"}},
                "strategy": {},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{
                        "name": "nginx",
                        "image": "nginx",
                        "ports": [{"containerPort": 80}],
                        "resources": {}
                    }]}
                }
            },
            "status": {}
        })
    );
}

#[test]
fn create_secret_decodes_data_as_base64() {
    assert_eq!(
        captured("secrets"),
        json!({
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "creds"},
            "data": {"password": "czNjcjN0", "user": "YWRtaW4="}
        })
    );
}

#[test]
fn create_service_decodes_target_port_as_an_integer() {
    assert_eq!(
        captured("services"),
        json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "web", "labels": {"app": "web"}},
            "spec": {
                "ports": [{"name": "80-8080", "port": 80, "protocol": "TCP", "targetPort": 8080}],
                "selector": {"app": "web"},
                "type": "ClusterIP"
            },
            "status": {"loadBalancer": {}}
        })
    );
}

#[test]
fn auth_can_i_decodes_to_a_self_subject_access_review() {
    // `allowed` has no omitempty in Go, so its false is kept.
    assert_eq!(
        captured("selfsubjectaccessreviews"),
        json!({
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "metadata": {},
            "spec": {"resourceAttributes": {
                "namespace": "default", "verb": "create", "resource": "deployments"
            }},
            "status": {"allowed": false}
        })
    );
}

#[test]
fn create_token_decodes_to_a_token_request() {
    assert_eq!(
        captured("token"),
        json!({
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "metadata": {},
            "spec": {"expirationSeconds": 3600},
            "status": {"token": ""}
        })
    );
}

#[test]
fn create_cronjob_and_configmap_decode() {
    let cronjob = captured("cronjobs");
    assert_eq!(cronjob["spec"]["schedule"], "*/5 * * * *");
    assert_eq!(
        cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["command"],
        json!(["date"])
    );
    assert_eq!(
        cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["restartPolicy"],
        "OnFailure"
    );
    assert_eq!(
        captured("configmaps"),
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": {"k": "v"}})
    );
}

#[test]
fn every_captured_body_survives_encode_then_decode() {
    for name in [
        "deployments",
        "secrets",
        "services",
        "selfsubjectaccessreviews",
        "token",
        "cronjobs",
        "configmaps",
    ] {
        let json = captured(name);
        let body = pbcodec::encode(&json).expect("encodes");
        assert_eq!(pbcodec::decode(&body).expect("decodes"), json, "{name}");
    }
}

#[test]
fn encoding_the_decoded_deployment_reproduces_kubectls_envelope_header() {
    let path = format!(
        "{}/tests/captured/kubectl-1.33-deployments.pb",
        env!("CARGO_MANIFEST_DIR")
    );
    let original = std::fs::read(path).expect("captured body");
    let body = pbcodec::encode(&captured("deployments")).expect("encodes");
    // magic, typeMeta {apps/v1, Deployment}, then the raw field tag.
    assert_eq!(body[..28], original[..28]);
    // kubectl ends the envelope with empty contentEncoding and contentType, and so do we.
    assert_eq!(body[body.len() - 4..], [0x1a, 0, 0x22, 0]);
}
