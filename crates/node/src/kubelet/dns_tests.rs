//! resolv.conf per policy, hosts file bytes, hostnames, termination message files.

use super::*;
use k8s_openapi::api::core::v1::HostAlias;
use serde_json::json;

fn pod(spec: serde_json::Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "web-0", "namespace": "shop", "uid": "u"},
        "spec": spec
    }))
    .unwrap()
}

fn settings() -> DnsSettings {
    DnsSettings {
        cluster_dns: vec!["10.96.0.10".into()],
        cluster_domain: "cluster.local".into(),
        resolv_conf: Some("/etc/resolv.conf".into()),
        node_ips: vec!["192.168.1.2".into()],
    }
}

fn host() -> DnsConfig {
    parse_resolv_conf(
        "nameserver 192.168.1.1\nsearch corp.example. lab\noptions ndots:1 timeout:2\n",
    )
    .unwrap()
}

fn cfg(servers: &[&str], searches: &[&str], options: &[&str]) -> DnsConfig {
    let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect();
    DnsConfig {
        servers: v(servers),
        searches: v(searches),
        options: v(options),
    }
}

#[test]
fn resolv_conf_files_parse_as_upstream() {
    let ok = |s: &str| parse_resolv_conf(s).unwrap();
    assert_eq!(ok(""), cfg(&[], &[], &[]));
    assert_eq!(ok("nameserver 1.2.3.4"), cfg(&["1.2.3.4"], &[], &[]));
    assert_eq!(ok(" nameserver 1.2.3.4 #c"), cfg(&["1.2.3.4"], &[], &[]));
    assert_eq!(
        ok("#nameserver 1.2.3.4\nnameserver 5.6.7.8"),
        cfg(&["5.6.7.8"], &[], &[])
    );
    assert_eq!(
        ok("nameserver 1.2.3.4\nnameserver 5.6.7.8\nsearch a\nsearch foo. bar .\n"),
        cfg(&["1.2.3.4", "5.6.7.8"], &["foo", "bar"], &[])
    );
    assert_eq!(
        ok("options ndots:2\noptions ndots:5 attempts:2"),
        cfg(&[], &[], &["ndots:5", "attempts:2"])
    );
    assert_eq!(
        parse_resolv_conf("nameserver\n").unwrap_err(),
        "nameserver list is empty "
    );
}

#[test]
fn every_dns_policy_forms_upstreams_configuration() {
    let s = settings();
    let cluster = cfg(
        &["10.96.0.10"],
        &[
            "shop.svc.cluster.local",
            "svc.cluster.local",
            "cluster.local",
            "corp.example",
            "lab",
        ],
        &["ndots:5"],
    );
    let table = [
        (json!({"containers": []}), cluster.clone()),
        (
            json!({"dnsPolicy": "ClusterFirst", "containers": []}),
            cluster.clone(),
        ),
        (
            json!({"dnsPolicy": "ClusterFirst", "hostNetwork": true, "containers": []}),
            host(),
        ),
        (
            json!({"dnsPolicy": "ClusterFirstWithHostNet", "hostNetwork": true, "containers": []}),
            cluster.clone(),
        ),
        (
            json!({"dnsPolicy": "ClusterFirstWithHostNet", "containers": []}),
            cluster,
        ),
        (json!({"dnsPolicy": "Default", "containers": []}), host()),
        (
            json!({"dnsPolicy": "None", "containers": [],
               "dnsConfig": {"nameservers": ["1.1.1.1"], "searches": ["x.example"],
                             "options": [{"name": "ndots", "value": "2"}, {"name": "edns0"}]}}),
            cfg(&["1.1.1.1"], &["x.example"], &["ndots:2", "edns0"]),
        ),
    ];
    for (spec, want) in table {
        let p = pod(spec.clone());
        let got = pod_dns_config(&p, &s, &host());
        assert_eq!(got.config, want, "{spec}");
        assert!(got.events.is_empty(), "{spec}");
    }
}

#[test]
fn dns_config_is_appended_with_duplicates_dropped_and_options_merged() {
    let p = pod(json!({"containers": [], "dnsConfig": {
        "nameservers": ["10.96.0.10", "9.9.9.9"],
        "searches": ["svc.cluster.local", "extra"],
        "options": [{"name": "ndots", "value": "3"}, {"name": "single-request-reopen"}]
    }}));
    let got = pod_dns_config(&p, &settings(), &host()).config;
    assert_eq!(got.servers, ["10.96.0.10", "9.9.9.9"]);
    assert_eq!(
        got.searches,
        [
            "shop.svc.cluster.local",
            "svc.cluster.local",
            "cluster.local",
            "corp.example",
            "lab",
            "extra"
        ]
    );
    assert_eq!(got.options, ["ndots:3", "single-request-reopen"]);
}

#[test]
fn without_cluster_dns_cluster_first_falls_back_with_an_event() {
    let mut s = settings();
    s.cluster_dns.clear();
    let got = pod_dns_config(&pod(json!({"containers": []})), &s, &host());
    assert_eq!(got.config, host());
    assert_eq!(got.events, vec![DnsEvent {
        reason: "MissingClusterDNS",
        message: "pod: \"web-0_shop(u)\". kubelet does not have ClusterDNS IP configured and cannot create Pod using \"ClusterFirst\" policy. Falling back to \"Default\" policy.".into(),
    }]);
}

#[test]
fn an_empty_resolv_conf_setting_points_at_the_local_resolver() {
    let mut s = settings();
    s.resolv_conf = None;
    s.node_ips = vec!["192.168.1.2".into(), "fd00::2".into()];
    let got = pod_dns_config(
        &pod(json!({"dnsPolicy": "Default", "containers": []})),
        &s,
        &DnsConfig::default(),
    );
    assert_eq!(got.config, cfg(&["127.0.0.1", "::1"], &["."], &[]));
}

#[test]
fn limits_trim_nameservers_and_search_paths_with_events() {
    let many: Vec<String> = (0..40).map(|i| format!("d{i}.example")).collect();
    let p = pod(json!({"dnsPolicy": "None", "containers": [], "dnsConfig": {
        "nameservers": ["1.1.1.1", "2.2.2.2", "3.3.3.3", "4.4.4.4"],
        "searches": many
    }}));
    let got = pod_dns_config(&p, &settings(), &host());
    assert_eq!(got.config.servers, ["1.1.1.1", "2.2.2.2", "3.3.3.3"]);
    assert_eq!(got.config.searches.len(), MAX_SEARCH_PATHS);
    assert_eq!(
        got.events[0].message,
        "Nameserver limits were exceeded, some nameservers have been omitted, the applied nameserver line is: 1.1.1.1 2.2.2.2 3.3.3.3"
    );
    assert!(got.events[1].message.starts_with(
        "Search Line limits were exceeded, some search paths have been omitted, the applied search line is: d0.example d1.example"));

    let long: Vec<String> = (0..10).map(|i| format!("{}{i}", "x".repeat(250))).collect();
    let p = pod(json!({"dnsPolicy": "None", "containers": [], "dnsConfig": {"searches": long}}));
    let got = pod_dns_config(&p, &settings(), &host()).config;
    // Ten domains of 251 characters exceed 2048 characters: the last two are cut.
    assert_eq!(got.searches.len(), 8);
    let too_long = "y".repeat(254);
    let p = pod(
        json!({"dnsPolicy": "None", "containers": [], "dnsConfig": {"searches": [too_long, "ok"]}}),
    );
    assert_eq!(
        pod_dns_config(&p, &settings(), &host()).config.searches,
        ["ok"]
    );
}

#[test]
fn resolv_conf_renders_as_containerd_writes_it() {
    let c = cfg(
        &["10.96.0.10", "10.96.0.11"],
        &["a.svc", "svc"],
        &["ndots:5"],
    );
    assert_eq!(
        String::from_utf8(resolv_conf(&c, b"")).unwrap(),
        "search a.svc svc\nnameserver 10.96.0.10\nnameserver 10.96.0.11\noptions ndots:5\n"
    );
    assert_eq!(
        resolv_conf(&DnsConfig::default(), b"nameserver 1.1.1.1\n"),
        b"nameserver 1.1.1.1\n"
    );
}

#[test]
fn the_managed_hosts_file_is_byte_for_byte_upstreams() {
    let base = "# Kubernetes-managed hosts file.\n\
                127.0.0.1\tlocalhost\n\
                ::1\tlocalhost ip6-localhost ip6-loopback\n\
                fe00::0\tip6-localnet\n\
                fe00::0\tip6-mcastprefix\n\
                fe00::1\tip6-allnodes\n\
                fe00::2\tip6-allrouters\n";
    let got = managed_hosts_file(&["123.45.67.89".into()], "podFoo", "", &[]);
    assert_eq!(
        String::from_utf8(got).unwrap(),
        format!("{base}123.45.67.89\tpodFoo\n")
    );

    let aliases: Vec<HostAlias> = serde_json::from_value(json!([
        {"ip": "123.45.67.89", "hostnames": ["foo", "bar", "baz"]},
        {"ip": "456.78.90.123", "hostnames": ["park", "doo", "boo"]}
    ]))
    .unwrap();
    let got = managed_hosts_file(
        &["203.0.113.1".into(), "fd00::1".into()],
        "web-0",
        "web.shop.svc.cluster.local",
        &aliases,
    );
    assert_eq!(
        String::from_utf8(got).unwrap(),
        format!(
            "{base}203.0.113.1\tweb-0.web.shop.svc.cluster.local\tweb-0\n\
             fd00::1\tweb-0.web.shop.svc.cluster.local\tweb-0\n\
             \n# Entries added by HostAliases.\n\
             123.45.67.89\tfoo\tbar\tbaz\n\
             456.78.90.123\tpark\tdoo\tboo\n"
        )
    );
    assert_eq!(
        node_hosts_file(b"127.0.0.1 localhost\n", &[]),
        b"# Kubernetes-managed hosts file (host network).\n127.0.0.1 localhost\n"
    );
}

#[test]
fn hostnames_come_from_the_spec_or_the_pod_name() {
    let (h, d) = hostname_and_domain(&pod(json!({"containers": []})), "cluster.local").unwrap();
    assert_eq!((h.as_str(), d.as_str()), ("web-0", ""));
    let p = pod(json!({"hostname": "db", "subdomain": "db-svc", "containers": []}));
    let (h, d) = hostname_and_domain(&p, "cluster.local").unwrap();
    assert_eq!(
        (h.as_str(), d.as_str()),
        ("db", "db-svc.shop.svc.cluster.local")
    );
    assert_eq!(
        kernel_hostname(&h, &d, true).unwrap(),
        "db.db-svc.shop.svc.cluster.local"
    );
    assert_eq!(kernel_hostname(&h, &d, false).unwrap(), "db");
    assert!(
        kernel_hostname(&"a".repeat(40), &d, true)
            .unwrap_err()
            .contains("is too long (64 characters is the max")
    );

    let mut long = pod(json!({"containers": []}));
    long.metadata.name = Some(format!("{}-.tail", "a".repeat(61)));
    let (h, _) = hostname_and_domain(&long, "cluster.local").unwrap();
    assert_eq!(
        h,
        "a".repeat(61),
        "cut at 63 characters, trailing - and . trimmed"
    );
    let bad = pod(json!({"hostname": "Not_OK", "containers": []}));
    assert!(
        hostname_and_domain(&bad, "cluster.local")
            .unwrap_err()
            .starts_with("pod Hostname \"Not_OK\" is not a valid DNS label: ")
    );
}

#[test]
fn hosts_mounts_are_written_unless_the_container_brings_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let p = pod(json!({"containers": [
        {"name": "c"},
        {"name": "d", "volumeMounts": [{"name": "v", "mountPath": "/etc/hosts"}]}
    ]}));
    let ips = vec!["10.1.0.9".to_string()];
    let files = PodFiles {
        pod: &p,
        pod_dir: dir.path(),
        pod_ips: &ips,
        hostname: "web-0",
        domain: "",
        node_hosts: Path::new("/etc/hosts"),
    };
    let cs = &p.spec.as_ref().unwrap().containers;
    let m = hosts_mount(&files, &cs[0]).unwrap().unwrap();
    assert_eq!(m.container_path, "/etc/hosts");
    assert!(!m.readonly);
    let written = fs::read_to_string(dir.path().join("etc-hosts")).unwrap();
    assert!(written.ends_with("10.1.0.9\tweb-0\n"));
    assert_eq!(
        fs::metadata(dir.path().join("etc-hosts"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o644
    );
    assert!(hosts_mount(&files, &cs[1]).unwrap().is_none());
    let no_ip = PodFiles {
        pod_ips: &[],
        ..files.clone()
    };
    assert!(hosts_mount(&no_ip, &cs[0]).unwrap().is_none(), "no IP yet");
}

#[test]
fn resolv_and_hostname_files_are_written_for_mounting() {
    let dir = tempfile::tempdir().unwrap();
    let c = cfg(&["10.96.0.10"], &["svc"], &["ndots:5"]);
    let mounts = resolv_and_hostname_mounts(dir.path(), &c, b"", "web-0", true).unwrap();
    assert_eq!(mounts[0].container_path, "/etc/resolv.conf");
    assert!(mounts[0].readonly);
    assert_eq!(fs::read_to_string(&mounts[1].host_path).unwrap(), "web-0\n");
    assert_eq!(
        fs::read_to_string(&mounts[0].host_path).unwrap(),
        "search svc\nnameserver 10.96.0.10\noptions ndots:5\n"
    );
}

#[test]
fn each_container_instance_gets_its_own_termination_message_file() {
    let dir = tempfile::tempdir().unwrap();
    let c: Container = serde_json::from_value(
        json!({"name": "c", "terminationMessagePath": "/dev/termination-log"}),
    )
    .unwrap();
    let (m1, p1) = termination_message_mount(dir.path(), &c).unwrap().unwrap();
    let (_, p2) = termination_message_mount(dir.path(), &c).unwrap().unwrap();
    assert_ne!(p1, p2);
    assert_eq!(m1.container_path, "/dev/termination-log");
    assert_eq!(p1.parent().unwrap(), dir.path().join("containers/c"));
    let name = p1.file_name().unwrap().to_str().unwrap();
    assert!(
        name.len() == 8 && name.bytes().all(|b| b.is_ascii_hexdigit()),
        "{name}"
    );
    assert_eq!(
        fs::metadata(&p1).unwrap().permissions().mode() & 0o777,
        0o666
    );
    let none: Container = serde_json::from_value(json!({"name": "n"})).unwrap();
    assert!(
        termination_message_mount(dir.path(), &none)
            .unwrap()
            .is_none()
    );
}
