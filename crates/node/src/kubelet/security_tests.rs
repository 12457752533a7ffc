//! Security contexts: merging, runAsNonRoot, the CRI fields, profiles, namespaces, sysctls.

use super::*;
use serde_json::json;

fn pod(spec: serde_json::Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "p", "namespace": "ns", "uid": "u"},
        "spec": spec
    }))
    .unwrap()
}

fn first(p: &Pod) -> &Container {
    &p.spec.as_ref().unwrap().containers[0]
}

fn no_image_user() -> ImageUser {
    ImageUser::default()
}

#[test]
fn the_container_context_overrides_the_pods() {
    let p = pod(json!({
        "securityContext": {"runAsUser": 1000, "runAsGroup": 2000, "runAsNonRoot": true,
                            "fsGroup": 3000, "supplementalGroups": [4000, 4001]},
        "containers": [{"name": "c", "securityContext": {
            "runAsUser": 1001, "readOnlyRootFilesystem": true, "privileged": false,
            "allowPrivilegeEscalation": false,
            "capabilities": {"add": ["NET_ADMIN"], "drop": ["ALL"]}
        }}]
    }));
    let sc =
        container_security(&p, first(&p), &no_image_user(), &SecurityOptions::default()).unwrap();
    assert_eq!(sc.run_as_user, Some(Int64Value { value: 1001 }));
    assert_eq!(sc.run_as_group, Some(Int64Value { value: 2000 }));
    assert!(sc.readonly_rootfs);
    assert!(!sc.privileged);
    assert!(sc.no_new_privs);
    assert_eq!(
        sc.capabilities,
        Some(Capability {
            add_capabilities: vec!["NET_ADMIN".into()],
            drop_capabilities: vec!["ALL".into()],
            add_ambient_capabilities: vec![],
        })
    );
    assert_eq!(sc.supplemental_groups, vec![3000, 4000, 4001]);
    assert_eq!(sc.masked_paths.len(), DEFAULT_MASKED_PATHS.len());
    assert_eq!(sc.readonly_paths.len(), DEFAULT_READONLY_PATHS.len());
    assert_eq!(
        sc.seccomp,
        Some(profile(ProfileType::Unconfined, String::new()))
    );
    assert_eq!(sc.apparmor, None);
    let ns = sc.namespace_options.unwrap();
    assert_eq!(ns.network, NamespaceMode::Pod as i32);
    assert_eq!(ns.pid, NamespaceMode::Container as i32);
    assert_eq!(ns.ipc, NamespaceMode::Pod as i32);
}

#[test]
fn without_run_as_user_the_image_user_is_passed_on() {
    let p = pod(json!({"containers": [{"name": "c"}]}));
    let image = ImageUser {
        uid: None,
        username: "nginx".into(),
    };
    let sc = container_security(&p, first(&p), &image, &SecurityOptions::default()).unwrap();
    assert_eq!(sc.run_as_user, None);
    assert_eq!(sc.run_as_username, "nginx");
    assert!(!sc.no_new_privs, "allowPrivilegeEscalation unset");
    let numeric = ImageUser {
        uid: Some(101),
        username: String::new(),
    };
    let sc = container_security(&p, first(&p), &numeric, &SecurityOptions::default()).unwrap();
    assert_eq!(sc.run_as_user, Some(Int64Value { value: 101 }));
}

#[test]
fn run_as_non_root_is_verified_against_the_image() {
    let p = pod(json!({"securityContext": {"runAsNonRoot": true}, "containers": [{"name": "c"}]}));
    let err = |uid: Option<i64>, name: &str| {
        verify_run_as_non_root(
            &p,
            first(&p),
            &ImageUser {
                uid,
                username: name.into(),
            },
        )
    };
    assert_eq!(
        err(Some(0), "").unwrap_err().to_string(),
        "container has runAsNonRoot and image will run as root (pod: \"p_ns(u)\", container: c)"
    );
    assert_eq!(
        err(None, "app").unwrap_err().to_string(),
        "container has runAsNonRoot and image has non-numeric user (app), cannot verify user is non-root (pod: \"p_ns(u)\", container: c)"
    );
    assert!(err(Some(1000), "").is_ok());
    assert!(err(None, "").is_ok());
    let root = pod(json!({"securityContext": {"runAsNonRoot": true},
        "containers": [{"name": "c", "securityContext": {"runAsUser": 0}}]}));
    assert_eq!(
        verify_run_as_non_root(&root, first(&root), &no_image_user())
            .unwrap_err()
            .to_string(),
        "container's runAsUser breaks non-root policy (pod: \"p_ns(u)\", container: c)"
    );
}

#[test]
fn seccomp_profiles_follow_container_then_pod_then_the_node_default() {
    let opts = SecurityOptions {
        seccomp_default: true,
        seccomp_profile_root: "/var/lib/node/seccomp".into(),
    };
    let none = pod(json!({"containers": [{"name": "c"}]}));
    assert_eq!(
        seccomp_profile(&none, first(&none), &opts).unwrap(),
        profile(ProfileType::RuntimeDefault, String::new())
    );
    let p = pod(json!({
        "securityContext": {"seccompProfile": {"type": "Unconfined"}},
        "containers": [
            {"name": "c", "securityContext": {"seccompProfile": {"type": "Localhost", "localhostProfile": "audit.json"}}},
            {"name": "d"},
            {"name": "e", "securityContext": {"seccompProfile": {"type": "Localhost"}}}
        ]
    }));
    let cs = &p.spec.as_ref().unwrap().containers;
    assert_eq!(
        seccomp_profile(&p, &cs[0], &opts).unwrap(),
        profile(
            ProfileType::Localhost,
            "/var/lib/node/seccomp/audit.json".into()
        )
    );
    assert_eq!(
        seccomp_profile(&p, &cs[1], &opts).unwrap(),
        profile(ProfileType::Unconfined, String::new())
    );
    assert_eq!(
        seccomp_profile(&p, &cs[2], &opts).unwrap_err().to_string(),
        "localhostProfile must be set if seccompProfile type is Localhost."
    );
}

#[test]
fn apparmor_reads_the_field_the_annotation_then_the_pod() {
    let p: Pod = serde_json::from_value(json!({
        "metadata": {"name": "p", "annotations": {
            "container.apparmor.security.beta.kubernetes.io/b": "localhost/k8s-deny"}},
        "spec": {
            "securityContext": {"appArmorProfile": {"type": "RuntimeDefault"}},
            "containers": [
                {"name": "a", "securityContext": {"appArmorProfile": {"type": "Unconfined"}}},
                {"name": "b"},
                {"name": "c"}
            ]
        }
    }))
    .unwrap();
    let cs = &p.spec.as_ref().unwrap().containers;
    let get = |c: &Container| apparmor_profile(&p, c).unwrap().unwrap();
    assert_eq!(
        get(&cs[0]),
        (
            profile(ProfileType::Unconfined, String::new()),
            "unconfined".into()
        )
    );
    assert_eq!(
        get(&cs[1]),
        (
            profile(ProfileType::Localhost, "k8s-deny".into()),
            "localhost/k8s-deny".into()
        )
    );
    assert_eq!(
        get(&cs[2]),
        (
            profile(ProfileType::RuntimeDefault, String::new()),
            "runtime/default".into()
        )
    );
    let plain = pod(json!({"containers": [{"name": "c"}]}));
    assert_eq!(apparmor_profile(&plain, first(&plain)).unwrap(), None);
}

#[test]
fn unmasked_proc_mounts_have_no_masked_paths() {
    let p =
        pod(json!({"containers": [{"name": "c", "securityContext": {"procMount": "Unmasked"}}]}));
    let sc =
        container_security(&p, first(&p), &no_image_user(), &SecurityOptions::default()).unwrap();
    assert!(sc.masked_paths.is_empty());
    assert!(sc.readonly_paths.is_empty());
}

#[test]
fn the_sandbox_carries_host_namespaces_privilege_and_sysctls() {
    let p = pod(json!({
        "hostNetwork": true, "hostPID": true, "shareProcessNamespace": true,
        "securityContext": {"runAsUser": 5, "fsGroup": 7,
            "sysctls": [{"name": "net/ipv4/ip_local_port_range", "value": "1024 65000"},
                        {"name": "kernel.shm_rmid_forced", "value": "1"}]},
        "initContainers": [{"name": "i", "securityContext": {"privileged": true}}],
        "containers": [{"name": "c"}]
    }));
    let lc = sandbox_linux_config(&p, "/kubepods/podu").unwrap();
    assert_eq!(lc.cgroup_parent, "/kubepods/podu");
    let sc = lc.security_context.unwrap();
    assert!(sc.privileged);
    assert_eq!(
        sc.seccomp,
        Some(profile(ProfileType::RuntimeDefault, String::new()))
    );
    assert_eq!(sc.run_as_user, Some(Int64Value { value: 5 }));
    assert_eq!(sc.supplemental_groups, vec![7]);
    let ns = sc.namespace_options.unwrap();
    assert_eq!(ns.network, NamespaceMode::Node as i32);
    assert_eq!(ns.pid, NamespaceMode::Node as i32);
    assert_eq!(lc.sysctls["net.ipv4.ip_local_port_range"], "1024 65000");
    assert_eq!(lc.sysctls["kernel.shm_rmid_forced"], "1");
}

#[test]
fn sysctl_names_are_normalised_to_dots() {
    assert_eq!(
        dotted_sysctl_name("net/ipv4/conf/eth0.100/forwarding"),
        "net.ipv4.conf.eth0/100.forwarding"
    );
    assert_eq!(
        dotted_sysctl_name("net.ipv4.ip_forward"),
        "net.ipv4.ip_forward"
    );
    assert_eq!(dotted_sysctl_name("kernel"), "kernel");
}

#[test]
fn sysctl_admission_allows_safe_and_allowlisted_ones_only() {
    let with = |sysctls: serde_json::Value, host_net: bool| {
        pod(
            json!({"hostNetwork": host_net, "securityContext": {"sysctls": sysctls}, "containers": [{"name": "c"}]}),
        )
    };
    assert!(
        admit_sysctls(
            &with(
                json!([{"name": "net.ipv4.tcp_syncookies", "value": "1"}]),
                false
            ),
            &[]
        )
        .is_ok()
    );
    let r = admit_sysctls(
        &with(
            json!([{"name": "net.core.somaxconn", "value": "1024"}]),
            false,
        ),
        &[],
    )
    .unwrap_err();
    assert_eq!(r.reason, "SysctlForbidden");
    assert_eq!(
        r.message,
        "forbidden sysctl: \"net.core.somaxconn\" not allowlisted"
    );
    assert!(
        admit_sysctls(
            &with(
                json!([{"name": "net.core.somaxconn", "value": "1024"}]),
                false
            ),
            &["net.core.*".to_string()]
        )
        .is_ok()
    );
    assert_eq!(
        admit_sysctls(
            &with(
                json!([{"name": "net.ipv4.tcp_syncookies", "value": "1"}]),
                true
            ),
            &[]
        )
        .unwrap_err()
        .message,
        "forbidden sysctl: \"net.ipv4.tcp_syncookies\" not allowed with host net enabled"
    );
}

#[test]
fn a_single_run_as_user_becomes_the_volume_file_owner() {
    let same = pod(json!({"securityContext": {"runAsUser": 1000},
        "initContainers": [{"name": "i"}], "containers": [{"name": "c"}]}));
    assert_eq!(fs_user(&same), Some(1000));
    let differ = pod(json!({"securityContext": {"runAsUser": 1000},
        "containers": [{"name": "c"}, {"name": "d", "securityContext": {"runAsUser": 2000}}]}));
    assert_eq!(fs_user(&differ), None);
    let unset = pod(json!({"containers": [{"name": "c"}]}));
    assert_eq!(fs_user(&unset), None);
}
