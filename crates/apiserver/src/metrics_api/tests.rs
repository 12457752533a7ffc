//! Resource metrics without kubelets: durations, rates from point pairs, summary decoding,
//! the JSON kinds.

use std::time::Duration;

use serde_json::json;

use super::scrape::{self, Pair, Point, Usage};
use super::*;

fn at(s: &str) -> jiff::Timestamp {
    s.parse().unwrap()
}

fn point(t: &str, cpu: u64, rate: Option<u64>) -> Point {
    Point {
        start: Some(at("2024-01-01T00:00:00Z")),
        at: at(t),
        cpu,
        rate,
        memory: 3 << 20,
    }
}

#[test]
fn durations_print_as_go_does() {
    assert_eq!(go_duration(Duration::from_millis(15_002)), "15.002s");
    assert_eq!(go_duration(Duration::from_secs(15)), "15s");
    assert_eq!(go_duration(Duration::from_millis(60_500)), "1m0.5s");
    assert_eq!(go_duration(Duration::from_secs(3723)), "1h2m3s");
    assert_eq!(go_duration(Duration::from_micros(1500)), "1.5ms");
    assert_eq!(go_duration(Duration::ZERO), "0s");
}

#[test]
fn two_points_give_the_rate_over_their_window() {
    let mut pair = Pair::default();
    pair.record(point("2024-01-01T00:00:10Z", 1_000_000_000, Some(7)));
    // One point: the kubelet's own rate over the resolution.
    let u = pair.usage().unwrap();
    assert_eq!((u.cpu_nanocores, u.window), (7, scrape::RESOLUTION));
    // A second one 15 s later with 1.5 core-seconds more: 100 millicores.
    pair.record(point("2024-01-01T00:00:25Z", 2_500_000_000, Some(9)));
    let u = pair.usage().unwrap();
    assert_eq!(u.cpu_nanocores, 100_000_000);
    assert_eq!(u.window, Duration::from_secs(15));
    assert_eq!(u.memory_bytes, 3 << 20);
    // A point not newer than the last changes nothing.
    pair.record(point("2024-01-01T00:00:20Z", 9_000_000_000, None));
    assert_eq!(pair.usage().unwrap().cpu_nanocores, 100_000_000);
}

#[test]
fn restarts_counter_drops_and_stale_pairs_fall_back_to_the_kubelet_rate() {
    let mut pair = Pair::default();
    pair.record(point("2024-01-01T00:00:10Z", 5_000_000_000, None));
    pair.record(point("2024-01-01T00:00:25Z", 1_000_000_000, Some(42)));
    assert_eq!(pair.usage().unwrap().cpu_nanocores, 42);

    let mut pair = Pair::default();
    pair.record(point("2024-01-01T00:00:10Z", 1, None));
    pair.record(point("2024-01-01T01:00:00Z", 2, None));
    // An hour apart, and no kubelet rate: nothing to say.
    assert!(pair.usage().is_none());
}

#[test]
fn summaries_decode_into_node_and_container_points() {
    let summary = json!({
        "node": {"nodeName": "n1", "startTime": "2024-01-01T00:00:00Z",
            "cpu": {"time": "2024-01-01T00:00:10Z", "usageNanoCores": 5, "usageCoreNanoSeconds": 100},
            "memory": {"time": "2024-01-01T00:00:10Z", "workingSetBytes": 2048}},
        "pods": [{"podRef": {"name": "p", "namespace": "default", "uid": "u"},
            "containers": [
                {"name": "c", "startTime": "2024-01-01T00:00:01Z",
                 "cpu": {"time": "2024-01-01T00:00:09Z", "usageCoreNanoSeconds": 50},
                 "memory": {"time": "2024-01-01T00:00:09Z", "workingSetBytes": 1024}},
                {"name": "no-stats"}
            ]}]
    });
    let (node, containers) = scrape::decode(&summary);
    let node = node.unwrap();
    assert_eq!((node.cpu, node.rate, node.memory), (100, Some(5), 2048));
    assert_eq!(containers.len(), 1);
    assert_eq!(
        containers[0].0,
        ("default".to_string(), "p".to_string(), "c".to_string())
    );
    assert_eq!(containers[0].1.cpu, 50);
}

#[test]
fn metrics_objects_have_metrics_servers_shape() {
    let u = Usage {
        timestamp: at("2024-01-01T00:00:25.5Z"),
        window: Duration::from_millis(15_002),
        cpu_nanocores: 329_087_452,
        memory_bytes: 2_814_136_320,
    };
    let node = json!({"metadata": {"name": "n1", "labels": {"kubernetes.io/os": "linux"}}});
    let m = node_metrics(&node, &u);
    assert_eq!(m["kind"], "NodeMetrics");
    assert_eq!(m["metadata"]["labels"]["kubernetes.io/os"], "linux");
    assert_eq!(m["timestamp"], "2024-01-01T00:00:25Z");
    assert_eq!(m["window"], "15.002s");
    assert_eq!(
        m["usage"],
        json!({"cpu": "329087452n", "memory": "2748180Ki"})
    );
    let whole = Usage {
        cpu_nanocores: 2_000_000,
        memory_bytes: 1000,
        ..u
    };
    assert_eq!(usage_json(&whole), json!({"cpu": "2m", "memory": "1k"}));
}
