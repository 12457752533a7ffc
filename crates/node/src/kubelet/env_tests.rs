//! Env construction: order, overriding, expansion, every source and upstream's errors.

use super::*;
use k8s_openapi::ByteString;
use serde_json::json;

fn pod(spec: serde_json::Value) -> Pod {
    let mut spec = spec;
    spec.as_object_mut()
        .unwrap()
        .entry("enableServiceLinks")
        .or_insert(json!(true));
    serde_json::from_value(json!({
        "metadata": {"name": "web-0", "namespace": "ns", "uid": "u-1",
                     "labels": {"app": "web"}, "annotations": {"team": "a"}},
        "spec": spec
    }))
    .unwrap()
}

fn first(p: &Pod) -> &Container {
    &p.spec.as_ref().unwrap().containers[0]
}

fn ctx() -> EnvContext {
    EnvContext {
        services: Some(Vec::new()),
        pod_ips: vec!["10.1.0.5".into(), "fd00::5".into()],
        host_ips: vec!["192.168.0.2".into(), "fd01::2".into()],
        node_allocatable: [
            ("cpu".to_string(), Quantity("4".into())),
            ("memory".to_string(), Quantity("8Gi".into())),
        ]
        .into(),
        ..Default::default()
    }
}

fn cm(data: &[(&str, &str)]) -> Lookup<ConfigMap> {
    Lookup::Found(ConfigMap {
        data: Some(
            data.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        ),
        ..Default::default()
    })
}

fn secret(data: &[(&str, &str)]) -> Lookup<Secret> {
    Lookup::Found(Secret {
        data: Some(
            data.iter()
                .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
                .collect(),
        ),
        ..Default::default()
    })
}

fn env(p: &Pod, c: &EnvContext) -> Vec<(String, String)> {
    container_env(p, first(p), c)
        .unwrap()
        .into_iter()
        .map(|kv| (kv.key, kv.value))
        .collect()
}

fn get<'a>(e: &'a [(String, String)], k: &str) -> Option<&'a str> {
    e.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str())
}

#[test]
fn env_from_comes_first_and_env_overrides_it_in_order() {
    let p = pod(json!({"containers": [{"name": "c",
    "envFrom": [
        {"configMapRef": {"name": "base"}},
        {"prefix": "S_", "secretRef": {"name": "creds"}},
        {"configMapRef": {"name": "over"}}
    ],
    "env": [
        {"name": "LEVEL", "value": "debug"},
        {"name": "GREETING", "value": "hi $(NAME) at $(LEVEL), $$(NAME) $(UNSET)"},
        {"name": "NAME", "value": "late"}
    ]}]}));
    let mut c = ctx();
    c.config_maps
        .insert("base".into(), cm(&[("LEVEL", "info"), ("NAME", "base")]));
    c.config_maps.insert("over".into(), cm(&[("NAME", "over")]));
    c.secrets
        .insert("creds".into(), secret(&[("PASSWORD", "s3cret")]));
    let e = env(&p, &c);
    let names: Vec<&str> = e.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(names, ["LEVEL", "NAME", "S_PASSWORD", "GREETING"]);
    assert_eq!(get(&e, "LEVEL"), Some("debug"));
    assert_eq!(get(&e, "S_PASSWORD"), Some("s3cret"));
    // Expanded against what was defined before it: NAME from the later envFrom source, not
    // from the env entry after it.
    assert_eq!(
        get(&e, "GREETING"),
        Some("hi over at debug, $(NAME) $(UNSET)")
    );
    assert_eq!(get(&e, "NAME"), Some("late"));
}

#[test]
fn service_variables_are_appended_and_usable_in_expansion() {
    let svc: Service = serde_json::from_value(json!({
        "metadata": {"name": "kubernetes", "namespace": "default"},
        "spec": {"clusterIP": "10.96.0.1", "ports": [{"name": "https", "port": 443, "protocol": "TCP"}]}
    }))
    .unwrap();
    let p = pod(
        json!({"enableServiceLinks": false, "containers": [{"name": "c", "env": [
            {"name": "API", "value": "https://$(KUBERNETES_SERVICE_HOST):$(KUBERNETES_SERVICE_PORT)"},
            {"name": "KUBERNETES_SERVICE_PORT", "value": "mine"}
        ]}]}),
    );
    let mut c = ctx();
    c.services = Some(vec![svc]);
    let e = env(&p, &c);
    assert_eq!(get(&e, "API"), Some("https://10.96.0.1:443"));
    assert_eq!(
        get(&e, "KUBERNETES_SERVICE_PORT"),
        Some("mine"),
        "the pod's own wins"
    );
    assert_eq!(get(&e, "KUBERNETES_SERVICE_HOST"), Some("10.96.0.1"));
    assert_eq!(
        get(&e, "KUBERNETES_PORT_443_TCP"),
        Some("tcp://10.96.0.1:443")
    );
    assert_eq!(
        e[0].0, "API",
        "declared variables come before service variables"
    );
}

#[test]
fn field_refs_cover_every_allowed_path() {
    let p = pod(
        json!({"nodeName": "n1", "serviceAccountName": "sa", "containers": [{"name": "c", "env": [
            {"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "B", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
            {"name": "C", "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}},
            {"name": "D", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
            {"name": "E", "valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['team']"}}},
            {"name": "F", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
            {"name": "G", "valueFrom": {"fieldRef": {"fieldPath": "spec.serviceAccountName"}}},
            {"name": "H", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}},
            {"name": "I", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIPs"}}},
            {"name": "J", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            {"name": "K", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "status.podIPs"}}},
            {"name": "L", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels"}}}
        ]}]}),
    );
    let e = env(&p, &ctx());
    let want = [
        ("A", "web-0"),
        ("B", "ns"),
        ("C", "u-1"),
        ("D", "web"),
        ("E", "a"),
        ("F", "n1"),
        ("G", "sa"),
        ("H", "192.168.0.2"),
        ("I", "192.168.0.2,fd01::2"),
        ("J", "10.1.0.5"),
        ("K", "10.1.0.5,fd00::5"),
        ("L", "app=\"web\""),
    ];
    for (k, v) in want {
        assert_eq!(get(&e, k), Some(v), "{k}");
    }
}

#[test]
fn resource_field_refs_use_divisors_and_node_allocatable() {
    let p = pod(json!({"containers": [
        {"name": "c", "resources": {"limits": {"memory": "128Mi"}, "requests": {"cpu": "250m"}}, "env": [
            {"name": "CPU_LIMIT", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}},
            {"name": "CPU_REQ_M", "valueFrom": {"resourceFieldRef": {"resource": "requests.cpu", "divisor": "1m"}}},
            {"name": "CPU_REQ", "valueFrom": {"resourceFieldRef": {"resource": "requests.cpu"}}},
            {"name": "MEM_MI", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory", "divisor": "1Mi"}}},
            {"name": "OTHER", "valueFrom": {"resourceFieldRef": {"containerName": "side", "resource": "limits.memory", "divisor": "1Gi"}}}
        ]},
        {"name": "side"}
    ]}));
    let e = env(&p, &ctx());
    assert_eq!(
        get(&e, "CPU_LIMIT"),
        Some("4"),
        "no limit: node allocatable"
    );
    assert_eq!(get(&e, "CPU_REQ_M"), Some("250"));
    assert_eq!(get(&e, "CPU_REQ"), Some("1"), "cpu rounds up");
    assert_eq!(get(&e, "MEM_MI"), Some("128"));
    assert_eq!(get(&e, "OTHER"), Some("8"));
}

#[test]
fn optional_references_that_cannot_resolve_leave_the_variable_out() {
    let p = pod(json!({"containers": [{"name": "c",
    "envFrom": [{"configMapRef": {"name": "gone", "optional": true}}],
    "env": [
        {"name": "A", "valueFrom": {"configMapKeyRef": {"name": "gone", "key": "k", "optional": true}}},
        {"name": "B", "valueFrom": {"configMapKeyRef": {"name": "there", "key": "nokey", "optional": true}}},
        {"name": "C", "valueFrom": {"secretKeyRef": {"name": "nosecret", "key": "k", "optional": true}}},
        {"name": "D", "value": ""}
    ]}]}));
    let mut c = ctx();
    c.config_maps.insert("there".into(), cm(&[("k", "v")]));
    c.config_maps.insert("gone".into(), Lookup::NotFound);
    let e = env(&p, &c);
    assert_eq!(e, vec![("D".to_string(), String::new())]);
}

#[test]
fn missing_references_fail_with_upstreams_messages() {
    let fails = |env: serde_json::Value, c: &EnvContext| {
        let p = pod(json!({"containers": [{"name": "c", "env": env}]}));
        container_env(&p, first(&p), c).unwrap_err().to_string()
    };
    let mut c = ctx();
    c.config_maps.insert("app".into(), cm(&[("k", "v")]));
    c.secrets.insert("creds".into(), secret(&[("k", "v")]));
    assert_eq!(
        fails(
            json!([{"name": "A", "valueFrom": {"configMapKeyRef": {"name": "nope", "key": "k"}}}]),
            &c
        ),
        "configmap \"nope\" not found"
    );
    assert_eq!(
        fails(
            json!([{"name": "A", "valueFrom": {"configMapKeyRef": {"name": "app", "key": "level"}}}]),
            &c
        ),
        "couldn't find key level in ConfigMap ns/app"
    );
    assert_eq!(
        fails(
            json!([{"name": "A", "valueFrom": {"secretKeyRef": {"name": "nope", "key": "k"}}}]),
            &c
        ),
        "secret \"nope\" not found"
    );
    assert_eq!(
        fails(
            json!([{"name": "A", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "pw"}}}]),
            &c
        ),
        "couldn't find key pw in Secret ns/creds"
    );
    assert_eq!(
        fails(
            json!([{"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "spec.containers"}}}]),
            &c
        ),
        "field label not supported: spec.containers"
    );
    c.config_maps.insert(
        "forbidden".into(),
        Lookup::Failed("configmaps \"forbidden\" is forbidden".into()),
    );
    assert_eq!(
        fails(
            json!([{"name": "A", "valueFrom": {"configMapKeyRef": {"name": "forbidden", "key": "k", "optional": true}}}]),
            &c
        ),
        "configmaps \"forbidden\" is forbidden",
        "only not-found is forgiven for optional references"
    );
    let p =
        pod(json!({"containers": [{"name": "c", "envFrom": [{"secretRef": {"name": "nope"}}]}]}));
    assert_eq!(
        container_env(&p, first(&p), &c).unwrap_err().to_string(),
        "secret \"nope\" not found"
    );
}

#[test]
fn nothing_is_built_before_services_are_known() {
    let p = pod(json!({"containers": [{"name": "c"}]}));
    let c = EnvContext::default();
    assert_eq!(
        container_env(&p, first(&p), &c).unwrap_err(),
        ConfigError::ServicesNotSynced
    );
    let mut undefaulted = p.clone();
    undefaulted.spec.as_mut().unwrap().enable_service_links = None;
    assert_eq!(
        container_env(&undefaulted, first(&undefaulted), &ctx())
            .unwrap_err()
            .to_string(),
        "nil pod.spec.enableServiceLinks encountered, cannot construct envvars"
    );
}

#[test]
fn references_list_every_container_object() {
    let p = pod(json!({
        "initContainers": [{"name": "i", "envFrom": [{"secretRef": {"name": "s1"}}]}],
        "containers": [{"name": "c", "env": [
            {"name": "A", "valueFrom": {"configMapKeyRef": {"name": "cm1", "key": "k"}}},
            {"name": "B", "valueFrom": {"secretKeyRef": {"name": "s2", "key": "k"}}}
        ]}]
    }));
    let r = references(&p);
    assert_eq!(r.config_maps.into_iter().collect::<Vec<_>>(), ["cm1"]);
    assert_eq!(r.secrets.into_iter().collect::<Vec<_>>(), ["s1", "s2"]);
}
