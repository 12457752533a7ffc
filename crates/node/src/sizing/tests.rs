//! Sizing tests: the spec's worked examples, automatic and overridden reservations, every
//! validation rule, and the capacity and allocatable maps of a node.

use apimachinery::field::{ErrorKind, Path};

use super::kubelet::{auto_cpu_millis, auto_memory_mib};
use super::*;

fn group() -> Path {
    Path::new("spec").child("nodeGroups").key("md0")
}

fn sized(input: &SizingInput) -> NodeSizing {
    match resolve(input, &group()) {
        Ok(s) => s,
        Err(e) => panic!("{input:?} should be valid: {}", e.aggregate_message()),
    }
}

fn of_type(name: &str) -> NodeSizing {
    sized(&SizingInput::instance_type(name))
}

fn with_kubelet(name: &str, k: KubeletOverrides) -> SizingInput {
    SizingInput {
        kubelet: k,
        ..SizingInput::instance_type(name)
    }
}

/// The fields and messages of the errors of `input`.
fn errors(input: &SizingInput) -> Vec<(String, String)> {
    validate(input, &group())
        .iter()
        .map(|e| (e.field.clone(), e.message()))
        .collect()
}

#[track_caller]
fn assert_one_error(input: &SizingInput, field: &str, needle: &str) {
    let errs = errors(input);
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert_eq!(
        errs[0].0,
        format!("spec.nodeGroups[md0].{field}"),
        "{errs:?}"
    );
    assert!(
        errs[0].1.contains(needle),
        "{:?} lacks {needle:?}",
        errs[0].1
    );
}

#[test]
fn worked_examples_of_the_spec_give_the_documented_allocatable() {
    for (name, mem, cpu) in [
        ("u1.medium", "3297Mi", "900m"),
        ("u1.large", "6800Mi", "1800m"),
        ("u1.xlarge", "13599Mi", "3600m"),
        ("u1.2xlarge", "28426Mi", "7200m"),
        ("u1.8xlarge", "119848Mi", "31000m"),
    ] {
        let a = of_type(name).capacity_annotations();
        assert_eq!(
            a.get("capacity.cluster-autoscaler.kubernetes.io/memory")
                .map(String::as_str),
            Some(mem),
            "{name}"
        );
        assert_eq!(
            a.get("capacity.cluster-autoscaler.kubernetes.io/cpu")
                .map(String::as_str),
            Some(cpu),
            "{name}"
        );
    }
}

#[test]
fn worked_examples_reserve_the_documented_amounts() {
    for (name, mem, cpu) in [
        ("u1.medium", "256Mi", "50m"),
        ("u1.large", "409Mi", "100m"),
        ("u1.xlarge", "819Mi", "200m"),
        ("u1.2xlarge", "1024Mi", "400m"),
        ("u1.8xlarge", "1024Mi", "500m"),
    ] {
        let r = of_type(name).reservations;
        assert_eq!(r.system_memory.text, mem, "{name}");
        assert_eq!(r.kube_memory.text, mem, "{name}");
        assert_eq!(r.system_cpu.text, cpu, "{name}");
        assert_eq!(r.kube_cpu.text, cpu, "{name}");
        assert_eq!(r.eviction_hard.text, "7%");
        assert_eq!(r.eviction_soft.text, "10%");
    }
}

#[test]
fn node_status_allocatable_uses_canonical_quantities() {
    let s = of_type("u1.8xlarge");
    let a = s.allocatable().expect("known size");
    assert_eq!(a["memory"], "119848Mi");
    assert_eq!(a["cpu"], "31");
    let a = of_type("u1.medium").allocatable().expect("known size");
    assert_eq!(a["memory"], "3297Mi");
    assert_eq!(a["cpu"], "900m");
}

#[test]
fn automatic_memory_is_five_percent_clamped_to_256_and_1024_mebibytes() {
    let gib = |g: f64| Some(g * 1073741824.0);
    assert_eq!(auto_memory_mib(None), 256);
    assert_eq!(auto_memory_mib(gib(0.5)), 256);
    assert_eq!(auto_memory_mib(gib(5.0)), 256);
    assert_eq!(auto_memory_mib(gib(6.0)), 307);
    assert_eq!(auto_memory_mib(gib(20.0)), 1024);
    assert_eq!(auto_memory_mib(gib(256.0)), 1024);
}

#[test]
fn automatic_cpu_is_five_percent_clamped_to_50_and_500_millicores() {
    assert_eq!(auto_cpu_millis(None), 50);
    assert_eq!(auto_cpu_millis(Some(500.0)), 50);
    assert_eq!(auto_cpu_millis(Some(1000.0)), 50);
    assert_eq!(auto_cpu_millis(Some(3000.0)), 150);
    assert_eq!(auto_cpu_millis(Some(10_000.0)), 500);
    assert_eq!(auto_cpu_millis(Some(64_000.0)), 500);
}

#[test]
fn every_instance_type_above_512_mebibytes_resolves_with_positive_allocatable() {
    for t in INSTANCE_TYPES.iter().filter(|t| t.memory_mib > 512) {
        let s = of_type(t.name);
        let mem = s.allocatable_memory_mib().expect("memory known");
        let cpu = s.allocatable_cpu_millis().expect("cpu known");
        assert!(mem > 0 && (mem as u64) < t.memory_mib, "{}: {mem}", t.name);
        assert!(
            cpu > 0 && cpu < i64::from(t.cpus) * 1000,
            "{}: {cpu}",
            t.name
        );
    }
}

#[test]
fn nano_types_cannot_hold_the_default_reservations() {
    // 256Mi + 256Mi + 7 % of 512Mi is more than 512Mi: the chart refuses such node groups.
    for t in INSTANCE_TYPES.iter().filter(|t| t.memory_mib == 512) {
        assert_one_error(
            &SizingInput::instance_type(t.name),
            "kubelet",
            "must be less than effective node memory (512Mi)",
        );
    }
}

#[test]
fn explicit_resources_replace_the_instance_type_size() {
    let s = sized(&SizingInput {
        cpu: Some("2".into()),
        memory: Some("8Gi".into()),
        ..SizingInput::instance_type("u1.medium")
    });
    assert_eq!(s.allocatable_memory_mib(), Some(6800));
    assert_eq!(s.allocatable_cpu_millis(), Some(1800));
    let capacity = s.capacity().expect("known");
    assert_eq!(capacity["cpu"], "2");
    assert_eq!(capacity["memory"], "8Gi");
}

#[test]
fn resources_alone_size_a_node_without_an_instance_type() {
    let s = sized(&SizingInput {
        cpu: Some("500m".into()),
        memory: Some("1.5Gi".into()),
        ..SizingInput::default()
    });
    assert_eq!(s.capacity().expect("known")["cpu"], "500m");
    assert_eq!(s.capacity().expect("known")["memory"], "1536Mi");
    // 1536 − 256 − 256 − 107.52 (7 %) = 916.48.
    assert_eq!(s.allocatable_memory_mib(), Some(916));
    assert_eq!(s.allocatable_cpu_millis(), Some(400));
}

#[test]
fn overrides_replace_each_automatic_value() {
    let s = sized(&with_kubelet(
        "u1.large",
        KubeletOverrides {
            system_reserved_memory: Some("100Mi".into()),
            kube_reserved_memory: Some("0.5Gi".into()),
            system_reserved_cpu: Some("0.25".into()),
            kube_reserved_cpu: Some("150m".into()),
            eviction_hard_memory: Some("500Mi".into()),
            eviction_soft_memory: Some("1Gi".into()),
        },
    ));
    // 8192 − 100 − 512 − 500.
    assert_eq!(s.allocatable_memory_mib(), Some(7080));
    assert_eq!(s.allocatable_cpu_millis(), Some(2000 - 250 - 150));
    let cfg = s.kubelet_config();
    assert_eq!(cfg["systemReserved"]["cpu"], "0.25");
    assert_eq!(cfg["kubeReserved"]["memory"], "0.5Gi");
    assert_eq!(cfg["evictionHard"]["memory.available"], "500Mi");
    assert_eq!(cfg["evictionSoft"]["memory.available"], "1Gi");
    assert_eq!(cfg["evictionHard"]["nodefs.available"], "10%");
    assert_eq!(cfg["evictionMinimumReclaim"]["memory.available"], "256Mi");
}

#[test]
fn empty_overrides_count_as_unset() {
    let s = sized(&with_kubelet(
        "u1.medium",
        KubeletOverrides {
            system_reserved_memory: Some(String::new()),
            eviction_hard_memory: Some(String::new()),
            ..KubeletOverrides::default()
        },
    ));
    assert_eq!(s.allocatable_memory_mib(), Some(3297));
}

#[test]
fn percentage_eviction_is_relative_to_node_memory() {
    let s = sized(&with_kubelet(
        "u1.medium",
        KubeletOverrides {
            eviction_hard_memory: Some("5%".into()),
            eviction_soft_memory: Some("8%".into()),
            ..KubeletOverrides::default()
        },
    ));
    // 4096 − 512 − 204.8.
    assert_eq!(s.allocatable_memory_mib(), Some(3379));
}

#[test]
fn capacity_carries_pods_disk_and_hugepages() {
    let c = of_type("u1.medium").capacity().expect("known");
    assert_eq!(c["cpu"], "1");
    assert_eq!(c["memory"], "4Gi");
    assert_eq!(c["pods"], "110");
    assert_eq!(c["ephemeral-storage"], "20Gi");
    assert_eq!(c["hugepages-2Mi"], "0");
    assert!(!c.contains_key(GPU_RESOURCE));
    let a = of_type("u1.medium").allocatable().expect("known");
    assert_eq!(a["pods"], "110");
    assert_eq!(a["ephemeral-storage"], "18Gi");
}

#[test]
fn the_disk_size_parameter_sets_ephemeral_storage() {
    let s = sized(&SizingInput {
        disk_size: Some("50Gi".into()),
        ..SizingInput::instance_type("u1.small")
    });
    assert_eq!(s.capacity().expect("known")["ephemeral-storage"], "50Gi");
    assert_eq!(s.allocatable().expect("known")["ephemeral-storage"], "45Gi");
}

#[test]
fn gpu_types_and_group_gpus_add_gpu_capacity() {
    let s = of_type("gn1.xlarge");
    assert_eq!(s.gpus, vec!["nvidia.com/A400".to_string()]);
    assert_eq!(s.capacity().expect("known")[GPU_RESOURCE], "1");
    assert_eq!(s.allocatable().expect("known")[GPU_RESOURCE], "1");
    let s = sized(&SizingInput {
        gpus: vec!["nvidia.com/A100".into()],
        ..SizingInput::instance_type("gn1.xlarge")
    });
    assert_eq!(s.capacity().expect("known")[GPU_RESOURCE], "2");
}

#[test]
fn an_unknown_size_has_no_capacity() {
    let s = sized(&SizingInput::default());
    assert_eq!(s.capacity(), Err(SizeError::Unknown));
    assert_eq!(s.allocatable(), Err(SizeError::Unknown));
    assert!(s.capacity_annotations().is_empty());
    assert_eq!(s.reservations.system_memory.text, "256Mi");
    assert_eq!(s.reservations.system_cpu.text, "50m");
}

#[test]
fn an_unknown_instance_type_is_invalid() {
    assert_one_error(
        &SizingInput::instance_type("u1.enormous"),
        "instanceType",
        "instance type not found",
    );
}

#[test]
fn resources_need_both_cpu_and_memory() {
    let only_cpu = SizingInput {
        cpu: Some("2".into()),
        ..SizingInput::default()
    };
    assert_one_error(&only_cpu, "resources.memory", "set both resources.cpu");
    let only_mem = SizingInput {
        memory: Some("2Gi".into()),
        ..SizingInput::default()
    };
    assert_one_error(&only_mem, "resources.cpu", "set both resources.cpu");
}

#[test]
fn reservation_overrides_must_be_well_formed() {
    let bad = with_kubelet(
        "u1.large",
        KubeletOverrides {
            system_reserved_memory: Some("lots".into()),
            kube_reserved_memory: Some("1GB".into()),
            system_reserved_cpu: Some("1.5m".into()),
            kube_reserved_cpu: Some("half".into()),
            ..KubeletOverrides::default()
        },
    );
    let errs = validate(&bad, &group());
    let fields: Vec<&str> = errs.iter().map(|e| e.field.as_str()).collect();
    assert_eq!(
        fields,
        vec![
            "spec.nodeGroups[md0].kubelet.systemReservedMemory",
            "spec.nodeGroups[md0].kubelet.kubeReservedMemory",
            "spec.nodeGroups[md0].kubelet.systemReservedCpu",
            "spec.nodeGroups[md0].kubelet.kubeReservedCpu",
        ]
    );
    assert!(errs.iter().all(|e| e.kind == ErrorKind::Invalid));
    assert!(errs.iter().next().expect("one").message().contains(
        "Invalid value: \"lots\": must be a valid Kubernetes memory quantity (e.g. 128Mi, 1Gi, 1e9, 500e6)"
    ));
    assert!(
        errs.iter()
            .nth(2)
            .expect("three")
            .message()
            .contains("integer millicores like 100m")
    );
}

#[test]
fn reservation_overrides_must_be_positive() {
    let zero = with_kubelet(
        "u1.large",
        KubeletOverrides {
            system_reserved_memory: Some("0Mi".into()),
            kube_reserved_cpu: Some("0m".into()),
            ..KubeletOverrides::default()
        },
    );
    let errs = errors(&zero);
    assert_eq!(errs.len(), 2, "{errs:?}");
    assert!(
        errs.iter()
            .all(|(_, m)| m.contains("must be a positive value"))
    );
}

#[test]
fn eviction_thresholds_must_be_percentages_or_quantities() {
    let bad = with_kubelet(
        "u1.large",
        KubeletOverrides {
            eviction_hard_memory: Some("seven".into()),
            eviction_soft_memory: Some("x%".into()),
            ..KubeletOverrides::default()
        },
    );
    let errs = errors(&bad);
    assert_eq!(errs.len(), 2, "{errs:?}");
    assert!(errs[0].0.ends_with("kubelet.evictionHardMemory"));
    assert!(errs[0].1.contains("must be a percentage (e.g. 7%)"));
    assert!(errs[1].0.ends_with("kubelet.evictionSoftMemory"));
    assert!(
        errs[1]
            .1
            .contains("percentage value \"x\" is not a valid number")
    );
}

#[test]
fn eviction_percentages_must_be_above_0_and_at_most_100() {
    for (hard, soft) in [("0%", "10%"), ("7%", "101%")] {
        let k = KubeletOverrides {
            eviction_hard_memory: Some(hard.into()),
            eviction_soft_memory: Some(soft.into()),
            ..KubeletOverrides::default()
        };
        let errs = errors(&with_kubelet("u1.large", k));
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert!(errs[0].1.contains("greater than 0 and at most 100"));
    }
}

#[test]
fn eviction_thresholds_must_share_a_unit_type() {
    let k = KubeletOverrides {
        eviction_hard_memory: Some("500Mi".into()),
        ..KubeletOverrides::default()
    };
    assert_one_error(
        &with_kubelet("u1.large", k),
        "kubelet.evictionSoftMemory",
        "must use the same unit type (both percentage or both absolute)",
    );
}

#[test]
fn the_hard_threshold_must_be_strictly_below_the_soft_one() {
    for (hard, soft) in [
        ("10%", "10%"),
        ("12%", "10%"),
        ("1Gi", "1024Mi"),
        ("2Gi", "1Gi"),
    ] {
        let k = KubeletOverrides {
            eviction_hard_memory: Some(hard.into()),
            eviction_soft_memory: Some(soft.into()),
            ..KubeletOverrides::default()
        };
        assert_one_error(
            &with_kubelet("u1.large", k),
            "kubelet.evictionHardMemory",
            "must be strictly less than evictionSoftMemory",
        );
    }
}

#[test]
fn reservations_must_leave_memory_for_pods() {
    let k = KubeletOverrides {
        system_reserved_memory: Some("2Gi".into()),
        kube_reserved_memory: Some("2Gi".into()),
        ..KubeletOverrides::default()
    };
    assert_one_error(
        &with_kubelet("u1.medium", k),
        "kubelet",
        "total reserved memory (systemReservedMemory=2Gi + kubeReservedMemory=2Gi + evictionHardMemory=7%) must be less than effective node memory (4Gi)",
    );
}

#[test]
fn reservations_must_leave_cpu_for_pods() {
    let k = KubeletOverrides {
        system_reserved_cpu: Some("500m".into()),
        kube_reserved_cpu: Some("0.5".into()),
        ..KubeletOverrides::default()
    };
    assert_one_error(
        &with_kubelet("u1.medium", k),
        "kubelet",
        "total reserved CPU (systemReservedCpu=500m + kubeReservedCpu=0.5) must be less than effective node CPU (1 cores)",
    );
}

#[test]
fn overrides_without_a_known_size_are_forbidden() {
    let input = SizingInput {
        kubelet: KubeletOverrides {
            kube_reserved_memory: Some("300Mi".into()),
            system_reserved_cpu: Some("100m".into()),
            ..KubeletOverrides::default()
        },
        ..SizingInput::default()
    };
    let errs = validate(&input, &group());
    assert_eq!(errs.len(), 2, "{}", errs.aggregate_message());
    assert!(errs.iter().all(|e| e.kind == ErrorKind::Forbidden));
    let msg = errs.aggregate_message();
    assert!(msg.contains("require effective memory"), "{msg}");
    assert!(msg.contains("require effective CPU"), "{msg}");
}

#[test]
fn every_problem_is_reported_at_once() {
    let input = SizingInput {
        instance_type: Some("z9.small".into()),
        cpu: Some("-1".into()),
        disk_size: Some("big".into()),
        gpus: vec![String::new()],
        kubelet: KubeletOverrides {
            eviction_hard_memory: Some("200%".into()),
            ..KubeletOverrides::default()
        },
        ..SizingInput::default()
    };
    let fields: Vec<String> = validate(&input, &group())
        .iter()
        .map(|e| {
            e.field
                .trim_start_matches("spec.nodeGroups[md0].")
                .to_string()
        })
        .collect();
    assert_eq!(
        fields,
        vec![
            "instanceType",
            "resources.memory",
            "resources.cpu",
            "diskSize",
            "gpus[0].name",
            "kubelet.evictionHardMemory",
            "kubelet",
        ]
    );
}

#[test]
fn resolve_returns_the_validation_errors() {
    let err =
        resolve(&SizingInput::instance_type("nope"), &Path::new("x")).expect_err("an unknown type");
    assert_eq!(err.len(), 1);
    assert_eq!(err.iter().next().expect("one").field, "x.instanceType");
}

#[test]
fn sizing_input_reads_the_node_group_json_shape() {
    let input: SizingInput = serde_json::from_value(serde_json::json!({
        "instanceType": "u1.large",
        "diskSize": "30Gi",
        "kubelet": {"evictionHardMemory": "5%", "evictionSoftMemory": "9%"},
    }))
    .expect("parses");
    assert_eq!(input.instance_type.as_deref(), Some("u1.large"));
    assert_eq!(input.disk_size.as_deref(), Some("30Gi"));
    assert_eq!(input.kubelet.eviction_soft_memory.as_deref(), Some("9%"));
}
