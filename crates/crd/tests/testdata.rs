//! The real CRDs under `/work/shared/testdata/crds` (Cluster API, cert-manager; override with
//! `CRD_TESTDATA`) must default, validate, establish, serve and publish OpenAPI documents,
//! and sample objects of them must validate.

use std::path::PathBuf;

use serde_json::{Value, json};

fn testdata() -> PathBuf {
    std::env::var_os("CRD_TESTDATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/work/shared/testdata/crds"))
}

fn load_all() -> Vec<(String, Value)> {
    let mut out = Vec::new();
    let dir = testdata();
    let mut dirs = vec![dir.clone()];
    while let Some(d) = dirs.pop() {
        let entries =
            std::fs::read_dir(&d).unwrap_or_else(|e| panic!("reading {}: {e}", d.display()));
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "yaml") {
                let text = std::fs::read_to_string(&p).expect("readable yaml");
                let v: Value = serde_saphyr::from_str(&text)
                    .unwrap_or_else(|e| panic!("{}: {e}", p.display()));
                out.push((p.display().to_string(), v));
            }
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    assert!(
        out.len() >= 9,
        "expected the Cluster API and cert-manager CRDs in {}",
        dir.display()
    );
    out
}

#[test]
fn every_testdata_crd_validates_after_defaulting() {
    for (path, mut crd) in load_all() {
        crd::default_crd(&mut crd);
        let errs = crd::validate_crd(&crd);
        let msgs: Vec<String> = errs.iter().map(|e| e.message()).collect();
        assert!(msgs.is_empty(), "{path}: {msgs:#?}");
        crd["metadata"]["resourceVersion"] = json!("1");
        let update = crd::validate_crd_update(&crd, &crd);
        assert!(
            update.is_empty(),
            "{path} (update): {:?}",
            update.aggregate_message()
        );
    }
}

#[test]
fn every_testdata_crd_is_established_and_served() {
    let all: Vec<Value> = load_all()
        .into_iter()
        .map(|(_, mut c)| {
            crd::default_crd(&mut c);
            c
        })
        .collect();
    for c in &all {
        let name = c["metadata"]["name"].as_str().unwrap().to_string();
        let group = c["spec"]["group"].as_str().unwrap().to_string();
        let in_use = crd::names_in_group(&all, &group, &name);
        let status = crd::established_status_at(c, &in_use, "2026-01-01T00:00:00Z");
        let mut established = c.clone();
        established["status"] = status;
        assert!(
            crd::is_established(&established),
            "{name}: {}",
            established["status"]
        );
        let defs = crd::resource_defs(&established);
        let served = c["spec"]["versions"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|v| v["served"] == true)
            .count();
        assert_eq!(defs.len(), served, "{name}");
        for d in &defs {
            assert!(d.custom && d.schema.is_some(), "{name}");
            let schema = d.schema.as_ref().unwrap();
            assert!(
                schema.properties.contains_key("metadata")
                    && schema.properties.contains_key("spec"),
                "{name}"
            );
        }
    }
    let docs = crd::openapi_documents(&all);
    let gvs: Vec<String> = docs.iter().map(|(g, v, _)| format!("{g}/{v}")).collect();
    assert!(
        gvs.contains(&"cluster.x-k8s.io/v1beta2".to_string()),
        "{gvs:?}"
    );
    assert!(gvs.contains(&"cert-manager.io/v1".to_string()), "{gvs:?}");
    let (_, _, doc) = docs
        .iter()
        .find(|(g, v, _)| g == "cert-manager.io" && v == "v1")
        .unwrap();
    let doc: Value = serde_json::from_slice(doc.bytes()).unwrap();
    let schemas = doc["components"]["schemas"].as_object().unwrap();
    for kind in ["Certificate", "Issuer", "ClusterIssuer"] {
        assert!(
            schemas.contains_key(&format!("io.cert-manager.v1.{kind}")),
            "{kind} in the combined document"
        );
    }
}

fn served(crd_file: &str, version: &str) -> registry::ResourceDef {
    let (_, mut c) = load_all()
        .into_iter()
        .find(|(p, _)| p.ends_with(crd_file))
        .unwrap();
    crd::default_crd(&mut c);
    crd::resource_defs(&c)
        .into_iter()
        .find(|d| d.version == version)
        .unwrap()
}

#[test]
fn a_valid_machine_deployment_passes_and_an_invalid_one_reports_upstream_messages() {
    let md = served("cluster.x-k8s.io_machinedeployments.yaml", "v1beta2");
    let mut obj = json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineDeployment",
        "metadata": {"name": "md", "namespace": "default"},
        "spec": {"clusterName": "c1", "replicas": 3,
                 "selector": {"matchLabels": {"a": "b"}},
                 "template": {"metadata": {"labels": {"a": "b"}},
                              "spec": {"clusterName": "c1",
                                       "bootstrap": {"dataSecretName": "s"},
                                       "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "KubevirtMachineTemplate", "name": "t"}}}}
    });
    md.strategy.default(&mut obj);
    let errs = md.strategy.validate(&obj);
    assert!(errs.is_empty(), "{}", errs.aggregate_message());
    obj["spec"]["replicas"] = json!("three");
    obj["spec"]["clusterName"] = json!("");
    let msgs: Vec<String> = md
        .strategy
        .validate(&obj)
        .iter()
        .map(|e| e.message())
        .collect();
    assert!(
        msgs.contains(&"spec.replicas: Invalid value: \"string\": spec.replicas in body must be of type integer: \"string\"".to_string()),
        "{msgs:#?}"
    );
    assert!(
        msgs.contains(&"spec.clusterName: Invalid value: \"\": spec.clusterName in body should be at least 1 chars long".to_string()),
        "{msgs:#?}"
    );
}

#[test]
fn cert_manager_cel_rules_run_on_issuers() {
    let issuer = served("cert-manager.io_issuers.yaml", "v1");
    let ok = json!({"apiVersion": "cert-manager.io/v1", "kind": "Issuer", "metadata": {"name": "i", "namespace": "d"},
                    "spec": {"selfSigned": {}}});
    let errs = issuer.strategy.validate(&ok);
    assert!(errs.is_empty(), "{}", errs.aggregate_message());
    let tpp = json!({"url": "https://tpp.example.com", "credentialsRef": {"name": "c"}});
    let cloud = json!({"apiTokenSecretRef": {"name": "t", "key": "k"}});
    let mut one = ok.clone();
    one["spec"] = json!({"venafi": {"zone": "z", "tpp": tpp}});
    let errs = issuer.strategy.validate(&one);
    assert!(errs.is_empty(), "{}", errs.aggregate_message());
    let mut two = ok.clone();
    two["spec"] = json!({"venafi": {"zone": "z", "tpp": tpp, "cloud": cloud}});
    assert_eq!(
        issuer.strategy.validate(&two).aggregate_message(),
        "spec.venafi: Invalid value: exactly one of tpp, cloud, or ngts must be configured"
    );
}
