//! The instance-type catalogue: every cluster-wide instance type a node group may name
//! (`u1.medium`, `cx1.2xlarge1gi`, `gn1.xlarge`...), with its vCPUs, guest memory, GPUs and
//! the traits of its series.
//!
//! These are the KubeVirt common instance types Cozystack installs (plus its own deprecated
//! `gn1` GPU series), 69 in all. Kubelet sizing reads only the vCPU count and guest memory;
//! the traits are kept so a provider that runs real VMs can ask for them.

/// A series of instance types (the part of the name before the dot).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Series {
    /// `u1`: universal, no special placement.
    U1,
    /// `o1`: overcommitted memory (50 %).
    O1,
    /// `cx1`: compute exclusive (dedicated CPUs, isolated emulator thread, NUMA, hugepages).
    Cx1,
    /// `m1`: memory intensive (hugepages).
    M1,
    /// `rt1`: realtime (dedicated CPUs, isolated emulator thread, NUMA, 1Gi hugepages).
    Rt1,
    /// `d1`: dedicated CPUs with an isolated emulator thread.
    D1,
    /// `n1`: network intensive (dedicated CPUs, isolated emulator thread, 1Gi hugepages).
    N1,
    /// `gn1`: with an NVIDIA GPU (deprecated upstream, kept by Cozystack).
    Gn1,
}

impl Series {
    /// Every series, in catalogue order.
    pub const ALL: [Series; 8] = [
        Series::U1,
        Series::O1,
        Series::Cx1,
        Series::M1,
        Series::Rt1,
        Series::D1,
        Series::N1,
        Series::Gn1,
    ];

    /// The name prefix (`u1`).
    pub fn prefix(self) -> &'static str {
        match self {
            Series::U1 => "u1",
            Series::O1 => "o1",
            Series::Cx1 => "cx1",
            Series::M1 => "m1",
            Series::Rt1 => "rt1",
            Series::D1 => "d1",
            Series::N1 => "n1",
            Series::Gn1 => "gn1",
        }
    }

    /// The display name of the series.
    pub fn display_name(self) -> &'static str {
        match self {
            Series::U1 => "Universal",
            Series::O1 => "Overcommitted",
            Series::Cx1 => "Compute Exclusive",
            Series::M1 => "Memory",
            Series::Rt1 => "Realtime",
            Series::D1 => "Dedicated",
            Series::N1 => "Network",
            Series::Gn1 => "GPU NVIDIA",
        }
    }
}

/// A GPU attached to every VM of an instance type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gpu {
    /// The device's name inside the VM (`gpu1`).
    pub name: &'static str,
    /// The host resource it is allocated from (`nvidia.com/A400`).
    pub device_name: &'static str,
}

/// How VMs of a type are placed and backed; sizing ignores all of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Traits {
    pub dedicated_cpu: bool,
    pub isolate_emulator_thread: bool,
    pub numa: bool,
    /// Hugepage size backing guest memory (`2Mi`, `1Gi`).
    pub hugepages: Option<&'static str>,
    pub realtime: bool,
    /// Memory overcommit percentage (`o1`: 50).
    pub memory_overcommit_percent: u8,
}

/// One instance type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InstanceType {
    /// `u1.medium`.
    pub name: &'static str,
    pub series: Series,
    /// `medium`, `2xlarge1gi`.
    pub size: &'static str,
    /// Guest vCPUs (`spec.cpu.guest`).
    pub cpus: u32,
    /// Guest memory in MiB (`spec.memory.guest`).
    pub memory_mib: u64,
    pub gpus: &'static [Gpu],
}

impl InstanceType {
    /// Guest memory as a quantity (`512Mi`, `4Gi`), as the instance type spells it.
    pub fn memory(&self) -> String {
        if self.memory_mib.is_multiple_of(1024) {
            format!("{}Gi", self.memory_mib / 1024)
        } else {
            format!("{}Mi", self.memory_mib)
        }
    }

    /// Guest memory in bytes.
    pub fn memory_bytes(&self) -> u64 {
        self.memory_mib * 1024 * 1024
    }

    /// The placement traits of the type (its series', with the hugepage size of a `…1gi`
    /// variant).
    pub fn traits(&self) -> Traits {
        let gi = self.size.ends_with("1gi");
        let pages = if gi { "1Gi" } else { "2Mi" };
        match self.series {
            Series::U1 | Series::Gn1 => Traits::default(),
            Series::O1 => Traits {
                memory_overcommit_percent: 50,
                ..Traits::default()
            },
            Series::Cx1 => Traits {
                dedicated_cpu: true,
                isolate_emulator_thread: true,
                numa: true,
                hugepages: Some(pages),
                ..Traits::default()
            },
            Series::M1 => Traits {
                hugepages: Some(pages),
                ..Traits::default()
            },
            Series::Rt1 => Traits {
                dedicated_cpu: true,
                isolate_emulator_thread: true,
                numa: true,
                hugepages: Some("1Gi"),
                realtime: true,
                ..Traits::default()
            },
            Series::D1 => Traits {
                dedicated_cpu: true,
                isolate_emulator_thread: true,
                ..Traits::default()
            },
            Series::N1 => Traits {
                dedicated_cpu: true,
                isolate_emulator_thread: true,
                hugepages: Some("1Gi"),
                ..Traits::default()
            },
        }
    }
}

const NVIDIA_A400: &[Gpu] = &[Gpu {
    name: "gpu1",
    device_name: "nvidia.com/A400",
}];

macro_rules! types {
    ($($series:ident $name:literal $size:literal $cpus:literal $mem:literal $gpus:expr;)*) => {
        &[$(InstanceType {
            name: $name,
            series: Series::$series,
            size: $size,
            cpus: $cpus,
            memory_mib: $mem,
            gpus: $gpus,
        },)*]
    };
}

/// Every instance type, by series then size.
pub static INSTANCE_TYPES: &[InstanceType] = types! {
    U1 "u1.nano" "nano" 1 512 &[];
    U1 "u1.micro" "micro" 1 1024 &[];
    U1 "u1.small" "small" 1 2048 &[];
    U1 "u1.medium" "medium" 1 4096 &[];
    U1 "u1.2xmedium" "2xmedium" 2 4096 &[];
    U1 "u1.large" "large" 2 8192 &[];
    U1 "u1.xlarge" "xlarge" 4 16384 &[];
    U1 "u1.2xlarge" "2xlarge" 8 32768 &[];
    U1 "u1.4xlarge" "4xlarge" 16 65536 &[];
    U1 "u1.8xlarge" "8xlarge" 32 131072 &[];
    O1 "o1.nano" "nano" 1 512 &[];
    O1 "o1.micro" "micro" 1 1024 &[];
    O1 "o1.small" "small" 1 2048 &[];
    O1 "o1.medium" "medium" 1 4096 &[];
    O1 "o1.large" "large" 2 8192 &[];
    O1 "o1.xlarge" "xlarge" 4 16384 &[];
    O1 "o1.2xlarge" "2xlarge" 8 32768 &[];
    O1 "o1.4xlarge" "4xlarge" 16 65536 &[];
    O1 "o1.8xlarge" "8xlarge" 32 131072 &[];
    Cx1 "cx1.medium" "medium" 1 2048 &[];
    Cx1 "cx1.medium1gi" "medium1gi" 1 2048 &[];
    Cx1 "cx1.large" "large" 2 4096 &[];
    Cx1 "cx1.large1gi" "large1gi" 2 4096 &[];
    Cx1 "cx1.xlarge" "xlarge" 4 8192 &[];
    Cx1 "cx1.xlarge1gi" "xlarge1gi" 4 8192 &[];
    Cx1 "cx1.2xlarge" "2xlarge" 8 16384 &[];
    Cx1 "cx1.2xlarge1gi" "2xlarge1gi" 8 16384 &[];
    Cx1 "cx1.4xlarge" "4xlarge" 16 32768 &[];
    Cx1 "cx1.4xlarge1gi" "4xlarge1gi" 16 32768 &[];
    Cx1 "cx1.8xlarge" "8xlarge" 32 65536 &[];
    Cx1 "cx1.8xlarge1gi" "8xlarge1gi" 32 65536 &[];
    M1 "m1.large" "large" 2 16384 &[];
    M1 "m1.large1gi" "large1gi" 2 16384 &[];
    M1 "m1.xlarge" "xlarge" 4 32768 &[];
    M1 "m1.xlarge1gi" "xlarge1gi" 4 32768 &[];
    M1 "m1.2xlarge" "2xlarge" 8 65536 &[];
    M1 "m1.2xlarge1gi" "2xlarge1gi" 8 65536 &[];
    M1 "m1.4xlarge" "4xlarge" 16 131072 &[];
    M1 "m1.4xlarge1gi" "4xlarge1gi" 16 131072 &[];
    M1 "m1.8xlarge" "8xlarge" 32 262144 &[];
    M1 "m1.8xlarge1gi" "8xlarge1gi" 32 262144 &[];
    Rt1 "rt1.micro" "micro" 1 1024 &[];
    Rt1 "rt1.small" "small" 1 2048 &[];
    Rt1 "rt1.medium" "medium" 1 4096 &[];
    Rt1 "rt1.large" "large" 2 8192 &[];
    Rt1 "rt1.xlarge" "xlarge" 4 16384 &[];
    Rt1 "rt1.2xlarge" "2xlarge" 8 32768 &[];
    Rt1 "rt1.4xlarge" "4xlarge" 16 65536 &[];
    Rt1 "rt1.8xlarge" "8xlarge" 32 131072 &[];
    D1 "d1.nano" "nano" 1 512 &[];
    D1 "d1.micro" "micro" 1 1024 &[];
    D1 "d1.small" "small" 1 2048 &[];
    D1 "d1.medium" "medium" 1 4096 &[];
    D1 "d1.2xmedium" "2xmedium" 2 4096 &[];
    D1 "d1.large" "large" 2 8192 &[];
    D1 "d1.xlarge" "xlarge" 4 16384 &[];
    D1 "d1.2xlarge" "2xlarge" 8 32768 &[];
    D1 "d1.4xlarge" "4xlarge" 16 65536 &[];
    D1 "d1.8xlarge" "8xlarge" 32 131072 &[];
    N1 "n1.medium" "medium" 4 4096 &[];
    N1 "n1.large" "large" 4 8192 &[];
    N1 "n1.xlarge" "xlarge" 8 16384 &[];
    N1 "n1.2xlarge" "2xlarge" 16 32768 &[];
    N1 "n1.4xlarge" "4xlarge" 32 65536 &[];
    N1 "n1.8xlarge" "8xlarge" 64 131072 &[];
    Gn1 "gn1.xlarge" "xlarge" 4 16384 NVIDIA_A400;
    Gn1 "gn1.2xlarge" "2xlarge" 8 32768 NVIDIA_A400;
    Gn1 "gn1.4xlarge" "4xlarge" 16 65536 NVIDIA_A400;
    Gn1 "gn1.8xlarge" "8xlarge" 32 131072 NVIDIA_A400;
};

/// The instance type called `name`.
pub fn instance_type(name: &str) -> Option<&'static InstanceType> {
    INSTANCE_TYPES.iter().find(|t| t.name == name)
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn the_catalogue_has_the_69_instance_types_of_the_spec() {
        assert_eq!(INSTANCE_TYPES.len(), 69);
        let per_series: Vec<usize> = Series::ALL
            .iter()
            .map(|s| INSTANCE_TYPES.iter().filter(|t| t.series == *s).count())
            .collect();
        // u1, o1, cx1 (6 sizes × 2), m1 (5 × 2), rt1, d1, n1, gn1.
        assert_eq!(per_series, vec![10, 9, 12, 10, 8, 10, 6, 4]);
    }

    #[test]
    fn names_are_unique_and_spelled_series_dot_size() {
        let mut seen = HashSet::new();
        for t in INSTANCE_TYPES {
            assert!(seen.insert(t.name), "duplicate {}", t.name);
            assert_eq!(t.name, format!("{}.{}", t.series.prefix(), t.size));
        }
    }

    #[test]
    fn universal_sizes_have_four_gibibytes_per_vcpu_except_the_small_ones() {
        let sizes: Vec<(&str, u32, String)> = INSTANCE_TYPES
            .iter()
            .filter(|t| t.series == Series::U1)
            .map(|t| (t.size, t.cpus, t.memory()))
            .collect();
        let want = [
            ("nano", 1, "512Mi"),
            ("micro", 1, "1Gi"),
            ("small", 1, "2Gi"),
            ("medium", 1, "4Gi"),
            ("2xmedium", 2, "4Gi"),
            ("large", 2, "8Gi"),
            ("xlarge", 4, "16Gi"),
            ("2xlarge", 8, "32Gi"),
            ("4xlarge", 16, "64Gi"),
            ("8xlarge", 32, "128Gi"),
        ];
        assert_eq!(sizes.len(), want.len());
        for ((size, cpus, mem), (ws, wc, wm)) in sizes.iter().zip(want) {
            assert_eq!((*size, *cpus, mem.as_str()), (ws, wc, wm));
        }
    }

    #[test]
    fn the_other_series_match_the_spec_table() {
        let check = |name: &str, cpus: u32, mem: &str| {
            let t = instance_type(name).unwrap_or_else(|| panic!("{name} is missing"));
            assert_eq!((t.cpus, t.memory().as_str()), (cpus, mem), "{name}");
        };
        check("o1.nano", 1, "512Mi");
        check("o1.8xlarge", 32, "128Gi");
        check("cx1.medium", 1, "2Gi");
        check("cx1.8xlarge1gi", 32, "64Gi");
        check("m1.large", 2, "16Gi");
        check("m1.8xlarge1gi", 32, "256Gi");
        check("rt1.micro", 1, "1Gi");
        check("rt1.8xlarge", 32, "128Gi");
        check("d1.2xmedium", 2, "4Gi");
        check("n1.medium", 4, "4Gi");
        check("n1.8xlarge", 64, "128Gi");
        check("gn1.xlarge", 4, "16Gi");
        check("gn1.8xlarge", 32, "128Gi");
        assert!(instance_type("o1.2xmedium").is_none());
        assert!(instance_type("rt1.nano").is_none());
        assert!(instance_type("u1.huge").is_none());
    }

    #[test]
    fn only_gn1_types_carry_a_gpu() {
        for t in INSTANCE_TYPES {
            if t.series == Series::Gn1 {
                assert_eq!(t.gpus, NVIDIA_A400, "{}", t.name);
            } else {
                assert!(t.gpus.is_empty(), "{}", t.name);
            }
        }
    }

    #[test]
    fn one_gi_variants_use_gigabyte_hugepages() {
        let cx = instance_type("cx1.large").expect("cx1.large").traits();
        let cx_gi = instance_type("cx1.large1gi")
            .expect("cx1.large1gi")
            .traits();
        assert_eq!(cx.hugepages, Some("2Mi"));
        assert_eq!(cx_gi.hugepages, Some("1Gi"));
        assert!(cx.dedicated_cpu && cx.numa && cx.isolate_emulator_thread);
        let o1 = instance_type("o1.small").expect("o1.small").traits();
        assert_eq!(o1.memory_overcommit_percent, 50);
        assert!(instance_type("rt1.small").expect("rt1").traits().realtime);
        assert_eq!(
            instance_type("u1.small").expect("u1").traits(),
            Traits::default()
        );
    }

    #[test]
    fn memory_bytes_are_mebibytes_times_two_to_the_twenty() {
        let t = instance_type("u1.medium").expect("u1.medium");
        assert_eq!(t.memory_bytes(), 4 * 1024 * 1024 * 1024);
    }
}
