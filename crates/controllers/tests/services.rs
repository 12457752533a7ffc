//! Services as on a real cluster, through the in-process API server and the controllers:
//! cluster IPs and node ports allocated per logical cluster, and EndpointSlices and Endpoints
//! following the pods a service selects.

mod common;

use common::Harness;
use k8s_openapi::api::core::v1::{Endpoints, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

fn service(name: &str, spec: serde_json::Value) -> Service {
    let mut spec = spec;
    if spec.get("ports").is_none() {
        spec["ports"] = json!([{"port": 80}]);
    }
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap()
}

fn cluster_ip(s: &Service) -> String {
    s.spec
        .as_ref()
        .and_then(|s| s.cluster_ip.clone())
        .unwrap_or_default()
}

async fn create(
    api: &Api<Service>,
    name: &str,
    spec: serde_json::Value,
) -> Result<Service, String> {
    api.create(&PostParams::default(), &service(name, spec))
        .await
        .map_err(|e| match e {
            kube::Error::Api(s) => s.message,
            other => other.to_string(),
        })
}

#[tokio::test]
async fn cluster_ips_are_allocated_per_logical_cluster_and_released_on_delete() {
    let h = Harness::start(&["a", "b"]).await;
    let (a, b): (Api<Service>, Api<Service>) = (h.api("a", "default"), h.api("b", "default"));
    let kubernetes = a.get("kubernetes").await.unwrap();
    assert_eq!(cluster_ip(&kubernetes), "10.96.0.1");
    // The same address is free in each cluster, and taken within one.
    for api in [&a, &b] {
        let s = create(api, "pinned", json!({"clusterIP": "10.96.0.50"}))
            .await
            .unwrap();
        assert_eq!(cluster_ip(&s), "10.96.0.50");
    }
    let err = create(&a, "again", json!({"clusterIP": "10.96.0.50"}))
        .await
        .unwrap_err();
    assert!(
        err.ends_with("failed to allocate IP 10.96.0.50: provided IP is already allocated"),
        "{err}"
    );
    let err = create(&a, "kube", json!({"clusterIP": "10.96.0.1"}))
        .await
        .unwrap_err();
    assert!(err.contains("provided IP is already allocated"), "{err}");
    // Automatic addresses are distinct and in range.
    let one = cluster_ip(&create(&a, "one", json!({})).await.unwrap());
    let two = cluster_ip(&create(&a, "two", json!({})).await.unwrap());
    assert!(one.starts_with("10.") && one != two, "{one} {two}");
    // Deleting frees the address.
    a.delete("pinned", &DeleteParams::default()).await.unwrap();
    let s = create(&a, "again", json!({"clusterIP": "10.96.0.50"}))
        .await
        .unwrap();
    assert_eq!(cluster_ip(&s), "10.96.0.50");
    // Headless services and ExternalNames hold none.
    let headless = create(&a, "headless", json!({"clusterIP": "None"}))
        .await
        .unwrap();
    assert_eq!(cluster_ip(&headless), "None");
    let ext = create(
        &a,
        "ext",
        json!({"type": "ExternalName", "externalName": "example.com"}),
    )
    .await
    .unwrap();
    assert_eq!(cluster_ip(&ext), "");
    h.stop().await;
}

#[tokio::test]
async fn a_taken_node_port_is_refused_with_upstreams_message() {
    let h = Harness::start(&["a"]).await;
    let a: Api<Service> = h.api("a", "default");
    let spec = json!({"type": "NodePort", "ports": [{"port": 80, "nodePort": 30080}]});
    let s = create(&a, "np", spec.clone()).await.unwrap();
    let ports = s.spec.unwrap().ports.unwrap();
    assert_eq!(ports[0].node_port, Some(30080));
    let err = create(&a, "np2", spec).await.unwrap_err();
    assert_eq!(
        err,
        "Service \"np2\" is invalid: spec.ports[0].nodePort: Invalid value: 30080: provided port is already allocated"
    );
    let auto = create(&a, "np3", json!({"type": "NodePort"}))
        .await
        .unwrap();
    let n = auto.spec.unwrap().ports.unwrap()[0].node_port.unwrap();
    assert!((30000..=32767).contains(&n) && n != 30080);
    h.stop().await;
}

async fn set_ready(api: &Api<Pod>, name: &str, ip: &str, ready: bool) {
    let status = json!({"status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}], "conditions": [
        {"type": "Ready", "status": if ready { "True" } else { "False" }},
    ]}});
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
}

/// The single endpoint of the service's slices: (ip, ready, port).
fn only_endpoint(slices: &[EndpointSlice]) -> Option<(String, bool, i32)> {
    let eps: Vec<_> = slices
        .iter()
        .flat_map(|s| s.endpoints.iter().map(move |e| (s, e)))
        .collect();
    let [(s, e)] = eps.as_slice() else {
        return None;
    };
    let ready = e.conditions.as_ref()?.ready?;
    let port = s.ports.as_ref()?.first()?.port?;
    Some((e.addresses[0].clone(), ready, port))
}

#[tokio::test]
async fn endpoint_slices_and_endpoints_follow_the_selected_pods() {
    let h = Harness::start(&["a"]).await;
    let services: Api<Service> = h.api("a", "default");
    let pods: Api<Pod> = h.api("a", "default");
    let slices: Api<EndpointSlice> = h.api("a", "default");
    let endpoints: Api<Endpoints> = h.api("a", "default");
    let spec = json!({"selector": {"app": "web"}, "ports": [{"name": "http", "port": 80, "targetPort": "http"}]});
    let svc = create(&services, "web", spec).await.unwrap();
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "web-1", "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c", "image": "nginx", "ports": [{"name": "http", "containerPort": 8080}]}]},
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    set_ready(&pods, "web-1", "10.244.0.5", true).await;

    let by_service = ListParams::default().labels("kubernetes.io/service-name=web");
    let slices = Api::<EndpointSlice>::namespaced(slices.into_client(), "default");
    let wait = |want: Option<(String, bool, i32)>, what: &'static str| {
        let slices = slices.clone();
        async move {
            common::wait_list(&slices, what, |all| {
                let mine: Vec<EndpointSlice> = all
                    .iter()
                    .filter(|s| {
                        s.metadata
                            .labels
                            .as_ref()
                            .and_then(|l| l.get("kubernetes.io/service-name"))
                            .map(String::as_str)
                            == Some("web")
                    })
                    .cloned()
                    .collect();
                only_endpoint(&mine) == want
            })
            .await
        }
    };
    wait(Some(("10.244.0.5".into(), true, 8080)), "a ready endpoint").await;
    let listed = slices.list(&by_service).await.unwrap().items;
    assert_eq!(listed.len(), 1);
    let s = &listed[0];
    assert_eq!(s.address_type, "IPv4");
    assert!(s.metadata.name.as_deref().unwrap().starts_with("web-"));
    let labels = s.metadata.labels.as_ref().unwrap();
    assert_eq!(
        labels["endpointslice.kubernetes.io/managed-by"],
        "endpointslice-controller.k8s.io"
    );
    let owner = &s.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), &owner.uid),
        ("Service", svc.metadata.uid.as_ref().unwrap())
    );
    let e = &s.endpoints[0];
    assert_eq!(
        e.target_ref.as_ref().unwrap().name.as_deref(),
        Some("web-1")
    );
    let addresses = |ep: Option<&Endpoints>, ready: bool| -> Vec<String> {
        ep.and_then(|e| e.subsets.as_ref())
            .into_iter()
            .flatten()
            .flat_map(|s| {
                if ready {
                    s.addresses.clone()
                } else {
                    s.not_ready_addresses.clone()
                }
            })
            .flatten()
            .map(|a| a.ip)
            .collect()
    };
    common::wait_for(&endpoints, "web", "a ready address", |ep| {
        addresses(ep, true) == ["10.244.0.5"]
    })
    .await;

    set_ready(&pods, "web-1", "10.244.0.5", false).await;
    wait(
        Some(("10.244.0.5".into(), false, 8080)),
        "a not-ready endpoint",
    )
    .await;
    common::wait_for(&endpoints, "web", "a not-ready address", |ep| {
        addresses(ep, false) == ["10.244.0.5"] && addresses(ep, true).is_empty()
    })
    .await;

    pods.delete("web-1", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    wait(None, "no endpoints").await;
    common::wait_for(&endpoints, "web", "no addresses", |ep| {
        ep.is_some() && addresses(ep, true).is_empty() && addresses(ep, false).is_empty()
    })
    .await;
    h.stop().await;
}
