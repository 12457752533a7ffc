//! Who may use the kubelet API, asked directly over HTTPS: no credentials and foreign
//! certificates are 401 `Unauthorized`; service-account tokens are reviewed with the cluster
//! (TokenReview) and their requests authorized as `nodes/<node>` subresources
//! (SubjectAccessReview), refusals in upstream's words; the API server's own certificate,
//! issued by the cluster's CA, is master.

mod fake;

use std::sync::Arc;

use bytes::Bytes;
use fake::{Cluster, FakeNode};
use http::{Method, Request, Uri};
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, PostParams};
use serde_json::json;
use streaming::upgrade::{Connect, TcpConnect};

/// Sends one request to the kubelet (server certificate not verified, as kube-apiserver's
/// default), with a bearer token and/or a client certificate.
async fn call(
    node: &FakeNode,
    method: Method,
    path: &str,
    token: Option<&str>,
    client_cert: Option<&pki::CertPair>,
) -> (u16, String) {
    let tls = match client_cert {
        None => apiserver::kubelet::insecure_tls().unwrap(),
        Some(pair) => Arc::new(
            apiserver::kubelet::client_config(pair, &apiserver::kubelet::KubeletOptions::default())
                .unwrap(),
        ),
    };
    let uri: Uri = format!("https://127.0.0.1:{}{path}", node.kubelet.addr().port())
        .parse()
        .unwrap();
    let io = TcpConnect { tls: Some(tls) }.connect(&uri).await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io))
        .await
        .unwrap();
    tokio::spawn(conn);
    let mut req = Request::builder()
        .method(method)
        .uri(path)
        .header("host", "node");
    if let Some(t) = token {
        req = req.header("authorization", format!("Bearer {t}"));
    }
    let resp = sender
        .send_request(req.body(Empty::<Bytes>::new()).unwrap())
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).to_string())
}

async fn token(cluster: &Cluster, name: &str) -> String {
    let sas: Api<ServiceAccount> = Api::namespaced(cluster.client.clone(), "default");
    sas.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": name}})).unwrap(),
    )
    .await
    .unwrap();
    let tr: TokenRequest = serde_json::from_value(json!({"spec": {"audiences": []}})).unwrap();
    let answer = sas
        .create_token_request(name, &PostParams::default(), &tr)
        .await
        .unwrap();
    answer.status.unwrap().token
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kubelet_authenticates_and_authorizes_as_upstream() {
    let cluster = Cluster::start().await;
    let node = FakeNode::start(&cluster, "node-1").await;
    let (code, body) = call(&node, Method::GET, "/pods", None, None).await;
    assert_eq!((code, body.as_str()), (401, "Unauthorized"));
    let (code, body) = call(&node, Method::GET, "/pods", Some("not-a-token"), None).await;
    assert_eq!((code, body.as_str()), (401, "Unauthorized"));

    let nobody = token(&cluster, "nobody").await;
    let (code, body) = call(&node, Method::GET, "/pods", Some(&nobody), None).await;
    assert_eq!(code, 403);
    assert_eq!(
        body,
        "Forbidden (user=system:serviceaccount:default:nobody, verb=get, resource=nodes, subresource(s)=[pods proxy])"
    );

    // nodes/proxy get, nodes/stats get: enough for /pods (the proxy fallback) and summaries.
    let rbac = cluster.client.clone();
    let roles: Api<k8s_openapi::api::rbac::v1::ClusterRole> = Api::all(rbac.clone());
    roles
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "kubelet-reader"}, "rules": [
                {"apiGroups": [""], "resources": ["nodes/proxy", "nodes/stats"], "verbs": ["get"]}]}))
            .unwrap(),
        )
        .await
        .unwrap();
    let bindings: Api<k8s_openapi::api::rbac::v1::ClusterRoleBinding> = Api::all(rbac);
    bindings
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "kubelet-reader"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "kubelet-reader"},
                "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": "default"}]}))
            .unwrap(),
        )
        .await
        .unwrap();
    let reader = token(&cluster, "reader").await;
    let (code, body) = call(&node, Method::GET, "/pods", Some(&reader), None).await;
    assert_eq!(code, 200, "{body}");
    let list: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(list["kind"], "PodList");
    let (code, _) = call(&node, Method::GET, "/stats/summary", Some(&reader), None).await;
    assert_eq!(code, 200);
    let (code, body) = call(&node, Method::GET, "/metrics/resource", Some(&reader), None).await;
    assert_eq!(
        (code, body.as_str()),
        (
            403,
            "Forbidden (user=system:serviceaccount:default:reader, verb=get, resource=nodes, subresource(s)=[metrics])"
        )
    );
    // A SPDY exec is a POST: `create`, which the reader may not.
    let (code, body) = call(
        &node,
        Method::POST,
        "/exec/default/p/c?command=ls&stdout=1",
        Some(&reader),
        None,
    )
    .await;
    assert_eq!(
        (code, body.as_str()),
        (
            403,
            "Forbidden (user=system:serviceaccount:default:reader, verb=create, resource=nodes, subresource(s)=[proxy])"
        )
    );

    // A certificate of the cluster's CA authenticates; another CA's does not.
    let own = cluster
        .ca_of("root")
        .issue_client("kube-apiserver-kubelet-client", &["system:masters"])
        .unwrap();
    let (code, _) = call(&node, Method::GET, "/pods", None, Some(&own)).await;
    assert_eq!(code, 200);
    let foreign = pki::Ca::generate("elsewhere")
        .unwrap()
        .issue_client("kube-apiserver-kubelet-client", &["system:masters"])
        .unwrap();
    let (code, body) = call(&node, Method::GET, "/pods", None, Some(&foreign)).await;
    assert_eq!((code, body.as_str()), (401, "Unauthorized"));

    // Handler answers are plain text too.
    let (code, body) = call(
        &node,
        Method::GET,
        "/containerLogs/default/nope/c",
        None,
        Some(&own),
    )
    .await;
    assert_eq!((code, body.as_str()), (404, "pod \"nope\" does not exist"));
    let (code, body) = call(
        &node,
        Method::GET,
        "/exec/default/nope/c?command=ls&stdout=1",
        None,
        Some(&own),
    )
    .await;
    assert_eq!((code, body.as_str()), (404, "pod does not exist"));
    let (code, body) = call(
        &node,
        Method::GET,
        "/exec/default/nope/c?command=ls",
        None,
        Some(&own),
    )
    .await;
    assert_eq!(
        (code, body.as_str()),
        (400, "you must specify at least 1 of stdin, stdout, stderr")
    );
    let (code, _) = call(&node, Method::DELETE, "/pods", None, Some(&own)).await;
    assert_eq!(code, 405);
    let (code, body) = call(&node, Method::GET, "/healthz", None, Some(&own)).await;
    assert_eq!((code, body.as_str()), (200, "ok"));
}
