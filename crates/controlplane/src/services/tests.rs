//! The allocator through the generic store, over a real embedded storage: ranges, requested
//! values, conflicts, release, type changes, concurrency and per-cluster independence.

use std::collections::HashSet;
use std::sync::Arc;

use registry::ResourceDef;
use registry::cache::{CacheOptions, WatchCache};
use registry::catalog::Catalog;
use registry::store::{DeleteOptions, Location, Store, WriteOptions};
use serde_json::{Value, json};

use super::ServiceAllocator;

struct Fixture {
    store: Arc<Store>,
    services: Arc<ResourceDef>,
    _dir: tempfile::TempDir,
}

async fn fixture(allocator: ServiceAllocator, clusters: &[&str]) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let storage = Arc::new(storage::embedded::EmbeddedStore::open(dir.path()).unwrap());
    let cache = WatchCache::start(storage.clone(), CacheOptions::default())
        .await
        .unwrap();
    let store = Store::new(storage, cache).with_hook("", "services", Arc::new(allocator));
    let catalog = Catalog::new(registry::builtins::resources());
    let ns = catalog.builtin("", "namespaces").unwrap();
    for c in clusters {
        let at = Location {
            cluster: c,
            namespace: "",
            name: "",
        };
        let obj = json!({"metadata": {"name": "default"}});
        store
            .create(&ns, &at, obj, &WriteOptions::default())
            .await
            .unwrap();
    }
    Fixture {
        store: Arc::new(store),
        services: catalog.builtin("", "services").unwrap(),
        _dir: dir,
    }
}

fn svc(name: &str, spec: Value) -> Value {
    let mut spec = spec;
    if spec.get("ports").is_none() && spec.get("type") != Some(&json!("ExternalName")) {
        spec["ports"] = json!([{"port": 80}]);
    }
    json!({"metadata": {"name": name, "namespace": "default"}, "spec": spec})
}

impl Fixture {
    async fn create(&self, cluster: &str, obj: Value) -> Result<Value, String> {
        let at = Location {
            cluster,
            namespace: "default",
            name: "",
        };
        self.store
            .create(&self.services, &at, obj, &WriteOptions::default())
            .await
            .map_err(|e| e.message)
    }

    async fn delete(&self, cluster: &str, name: &str) {
        let at = Location {
            cluster,
            namespace: "default",
            name,
        };
        self.store
            .delete(&self.services, &at, &DeleteOptions::default())
            .await
            .unwrap();
    }

    async fn replace(&self, cluster: &str, name: &str, spec: Value) -> Result<Value, String> {
        let at = Location {
            cluster,
            namespace: "default",
            name,
        };
        self.store
            .update_with(&self.services, &at, &WriteOptions::default(), |cur| {
                let mut new = cur.cloned().unwrap_or_default();
                new["spec"] = spec.clone();
                Ok(new)
            })
            .await
            .map(|(v, _)| v)
            .map_err(|e| e.message)
    }
}

fn ip(v: &Value) -> &str {
    v["spec"]["clusterIP"].as_str().unwrap_or("")
}

#[tokio::test]
async fn a_service_gets_a_cluster_ip_from_the_dynamic_band_recorded_as_an_ip_address() {
    let f = fixture(ServiceAllocator::default(), &["a"]).await;
    let s = f.create("a", svc("web", json!({}))).await.unwrap();
    let addr: std::net::Ipv4Addr = ip(&s).parse().unwrap();
    assert!(f.store.shared_cache().revision() > 0);
    assert_eq!(s["spec"]["clusterIPs"], json!([ip(&s)]));
    // Automatic addresses leave the first 256 of the /12 to requested ones.
    assert!(u32::from(addr) >= u32::from(std::net::Ipv4Addr::new(10, 96, 1, 1)));
    let key = super::reserve::Item::Ip(addr).key("a");
    let kv = f
        .store
        .shared()
        .storage
        .get(key.as_bytes())
        .await
        .unwrap()
        .unwrap();
    let rec: Value = serde_json::from_slice(&kv.value).unwrap();
    assert_eq!(rec["kind"], "IPAddress");
    assert_eq!(
        rec["spec"]["parentRef"],
        json!({"group": "", "resource": "services", "namespace": "default", "name": "web"})
    );
}

#[tokio::test]
async fn a_requested_ip_is_honoured_once_then_refused_as_already_allocated() {
    let f = fixture(ServiceAllocator::default(), &["a"]).await;
    let s = f
        .create("a", svc("one", json!({"clusterIP": "10.96.0.10"})))
        .await
        .unwrap();
    assert_eq!(ip(&s), "10.96.0.10");
    let err = f
        .create("a", svc("two", json!({"clusterIP": "10.96.0.10"})))
        .await
        .unwrap_err();
    assert_eq!(
        err,
        "Service \"two\" is invalid: spec.clusterIPs: Invalid value: []string{\"10.96.0.10\"}: failed to allocate IP 10.96.0.10: provided IP is already allocated"
    );
    let err = f
        .create("a", svc("three", json!({"clusterIP": "10.200.0.1"})))
        .await
        .unwrap_err();
    assert!(
        err.ends_with("failed to allocate IP 10.200.0.1: the provided IP (10.200.0.1) is not in the valid range. The range of valid IPs is 10.96.0.0/12"),
        "{err}"
    );
}

#[tokio::test]
async fn headless_and_external_name_services_hold_no_address() {
    let f = fixture(
        ServiceAllocator::new("10.0.0.0/29", 30000, 30010).unwrap(),
        &["a"],
    )
    .await;
    let h = f
        .create("a", svc("h", json!({"clusterIP": "None"})))
        .await
        .unwrap();
    assert_eq!(h["spec"]["clusterIPs"], json!(["None"]));
    let e = f
        .create(
            "a",
            svc(
                "e",
                json!({"type": "ExternalName", "externalName": "x.example.com"}),
            ),
        )
        .await
        .unwrap();
    assert!(e["spec"].get("clusterIP").is_none());
    assert!(super::reserve::known(&f.store, "a", false).is_empty());
}

#[tokio::test]
async fn deleting_a_service_releases_its_ip_for_the_next_one() {
    let f = fixture(ServiceAllocator::default(), &["a"]).await;
    f.create("a", svc("one", json!({"clusterIP": "10.96.0.20"})))
        .await
        .unwrap();
    f.delete("a", "one").await;
    let s = f
        .create("a", svc("two", json!({"clusterIP": "10.96.0.20"})))
        .await
        .unwrap();
    assert_eq!(ip(&s), "10.96.0.20");
}

#[tokio::test]
async fn concurrent_creates_get_distinct_ips_until_the_range_is_full() {
    // A /29 has six addresses.
    let f = fixture(
        ServiceAllocator::new("10.0.0.0/29", 30000, 30010).unwrap(),
        &["a"],
    )
    .await;
    let f = Arc::new(f);
    let tasks: Vec<_> = (0..6)
        .map(|i| {
            let f = f.clone();
            tokio::spawn(async move { f.create("a", svc(&format!("s{i}"), json!({}))).await })
        })
        .collect();
    let mut ips = HashSet::new();
    for t in tasks {
        let s = t.await.unwrap().unwrap();
        ips.insert(ip(&s).to_string());
    }
    assert_eq!(ips.len(), 6);
    let err = f.create("a", svc("s6", json!({}))).await.unwrap_err();
    assert_eq!(
        err,
        "Internal error occurred: failed to allocate a serviceIP: range is full"
    );
}

#[tokio::test]
async fn logical_clusters_allocate_from_their_own_ranges() {
    let f = fixture(ServiceAllocator::default(), &["a", "b"]).await;
    for c in ["a", "b"] {
        let s = f
            .create(c, svc("web", json!({"clusterIP": "10.96.0.10"})))
            .await
            .unwrap();
        assert_eq!(ip(&s), "10.96.0.10");
    }
}

#[tokio::test]
async fn node_ports_are_allocated_shared_per_port_number_and_refused_when_taken() {
    let f = fixture(ServiceAllocator::default(), &["a"]).await;
    let spec = json!({"type": "NodePort", "ports": [
        {"name": "dns", "port": 53, "protocol": "UDP"},
        {"name": "dns-tcp", "port": 53, "protocol": "TCP"},
        {"name": "web", "port": 80, "nodePort": 30080},
    ]});
    let s = f.create("a", svc("np", spec)).await.unwrap();
    let ports = &s["spec"]["ports"];
    let dns = ports[0]["nodePort"].as_i64().unwrap();
    assert!((30000..=32767).contains(&dns));
    assert_eq!(ports[1]["nodePort"], json!(dns));
    assert_eq!(ports[2]["nodePort"], json!(30080));
    let spec = json!({"type": "NodePort", "ports": [{"port": 81, "nodePort": 30080}]});
    let err = f.create("a", svc("np2", spec)).await.unwrap_err();
    assert_eq!(
        err,
        "Service \"np2\" is invalid: spec.ports[0].nodePort: Invalid value: 30080: provided port is already allocated"
    );
    let spec = json!({"type": "NodePort", "ports": [{"port": 81, "nodePort": 40000}]});
    let err = f.create("a", svc("np3", spec)).await.unwrap_err();
    assert!(
        err.ends_with("spec.ports[0].nodePort: Invalid value: 40000: provided port is not in the valid range. The range of valid ports is 30000-32767"),
        "{err}"
    );
    // The refused creates gave back the cluster IPs they had reserved.
    let prefix = registry::key::collection("a", "networking.k8s.io", "ipaddresses", "");
    let held = f
        .store
        .shared()
        .storage
        .list(prefix.as_bytes(), Default::default())
        .await
        .unwrap();
    assert_eq!(held.items.len(), 1);
}

#[tokio::test]
async fn a_local_load_balancer_gets_a_health_check_node_port() {
    let f = fixture(ServiceAllocator::default(), &["a"]).await;
    let spec = json!({"type": "LoadBalancer", "externalTrafficPolicy": "Local"});
    let s = f.create("a", svc("lb", spec)).await.unwrap();
    let hc = s["spec"]["healthCheckNodePort"].as_i64().unwrap();
    let np = s["spec"]["ports"][0]["nodePort"].as_i64().unwrap();
    assert!((30000..=32767).contains(&hc));
    assert_ne!(hc, np);
    let spec = json!({"type": "LoadBalancer", "externalTrafficPolicy": "Local", "healthCheckNodePort": hc});
    let err = f.create("a", svc("lb2", spec)).await.unwrap_err();
    assert_eq!(
        err,
        format!(
            "Internal error occurred: failed to allocate requested HealthCheck NodePort {hc}: provided port is already allocated"
        )
    );
}

#[tokio::test]
async fn type_changes_allocate_and_release() {
    let f = fixture(ServiceAllocator::default(), &["a"]).await;
    let s = f
        .create(
            "a",
            svc("x", json!({"clusterIP": "10.96.0.30", "type": "NodePort"})),
        )
        .await
        .unwrap();
    let np = s["spec"]["ports"][0]["nodePort"].as_i64().unwrap();
    // To ExternalName: the IP and the node port are released.
    let e = f
        .replace(
            "a",
            "x",
            json!({"type": "ExternalName", "externalName": "x.example.com", "ports": [{"port": 80}]}),
        )
        .await
        .unwrap();
    assert!(e["spec"].get("clusterIP").is_none(), "{e}");
    f.create("a", svc("y", json!({"clusterIP": "10.96.0.30", "type": "NodePort", "ports": [{"port": 80, "nodePort": np}]})))
        .await
        .unwrap();
    // Back to ClusterIP: a new address is allocated.
    let c = f
        .replace(
            "a",
            "x",
            json!({"type": "ClusterIP", "ports": [{"port": 80}]}),
        )
        .await
        .unwrap();
    assert!(!ip(&c).is_empty() && ip(&c) != "10.96.0.30", "{c}");
}

#[tokio::test]
async fn dual_stack_is_refused_on_this_single_stack_cluster() {
    let f = fixture(ServiceAllocator::default(), &["a"]).await;
    let spec = json!({"ipFamilyPolicy": "RequireDualStack", "ipFamilies": ["IPv4", "IPv6"]});
    let err = f.create("a", svc("d", spec)).await.unwrap_err();
    assert!(
        err.contains("spec.ipFamilyPolicy: Invalid value: \"RequireDualStack\": this cluster is not configured for dual-stack services"),
        "{err}"
    );
    assert!(
        err.contains("spec.ipFamilies[1]: Invalid value: \"IPv6\": not configured on this cluster"),
        "{err}"
    );
}

#[tokio::test]
async fn a_service_of_the_wrong_shape_is_refused_before_anything_is_reserved() {
    let f = fixture(ServiceAllocator::default(), &["a"]).await;
    let spec_str = json!({"metadata": {"name": "s", "namespace": "default"}, "spec": "str"});
    let err = f.create("a", spec_str).await.unwrap_err();
    assert_eq!(
        err,
        "Service in version \"v1\" cannot be handled as a Service: json: cannot unmarshal string into Go struct field Service.spec of type v1.ServiceSpec"
    );
    let port_str = svc("p", json!({"type": "NodePort", "ports": ["80"]}));
    let err = f.create("a", port_str).await.unwrap_err();
    assert!(
        err.ends_with("cannot unmarshal string into Go struct field ServiceSpec.spec.ports of type v1.ServicePort"),
        "{err}"
    );
    let all = f
        .store
        .shared()
        .storage
        .list(b"", storage::ListOptions::default())
        .await
        .unwrap();
    let reserved: Vec<String> = all
        .items
        .iter()
        .map(|kv| String::from_utf8_lossy(&kv.key).into_owned())
        .filter(|k| k.contains("ipaddresses") || k.contains("servicenodeports"))
        .collect();
    assert!(reserved.is_empty(), "{reserved:?}");
}
