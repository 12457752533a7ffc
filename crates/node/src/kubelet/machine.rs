//! What the machine is: identifiers (`/etc/machine-id`, the DMI product UUID, the boot ID),
//! kernel and OS, CPUs, memory, the data directory's disk, and the node IP (the address
//! the default route leaves from) — the facts of `nodeInfo`, `addresses` and capacity.

use std::net::{IpAddr, UdpSocket};
use std::path::Path;

/// The machine's facts.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Machine {
    pub machine_id: String,
    pub system_uuid: String,
    pub boot_id: String,
    pub kernel_version: String,
    pub os_image: String,
    pub cpus: u64,
    pub memory_bytes: u64,
    pub disk_bytes: u64,
    pub disk_free_bytes: u64,
}

fn read(path: &str) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

fn os_image() -> String {
    let text = read("/etc/os-release");
    text.lines()
        .find_map(|l| l.strip_prefix("PRETTY_NAME="))
        .map(|v| v.trim_matches('"').to_string())
        .unwrap_or_else(|| "Linux".to_string())
}

fn mem_total() -> u64 {
    read("/proc/meminfo")
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kib| kib * 1024)
}

/// Reads the machine's facts; `data_dir`'s filesystem is the node's disk.
pub fn read_machine(data_dir: &Path) -> Machine {
    let uname = rustix::system::uname();
    let (disk, free) = rustix::fs::statvfs(data_dir)
        .map(|s| (s.f_blocks * s.f_frsize, s.f_bavail * s.f_frsize))
        .unwrap_or((0, 0));
    let machine_id = read("/etc/machine-id");
    let uuid = read("/sys/class/dmi/id/product_uuid");
    Machine {
        system_uuid: if uuid.is_empty() {
            machine_id.clone()
        } else {
            uuid
        },
        machine_id,
        boot_id: read("/proc/sys/kernel/random/boot_id"),
        kernel_version: uname.release().to_string_lossy().into_owned(),
        os_image: os_image(),
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get() as u64),
        memory_bytes: mem_total(),
        disk_bytes: disk,
        disk_free_bytes: free,
    }
}

/// The address traffic to the outside leaves from (no packet is sent: connecting a UDP
/// socket only picks the route), else loopback.
pub fn default_ip() -> IpAddr {
    let probe = || -> std::io::Result<IpAddr> {
        let s = UdpSocket::bind("0.0.0.0:0")?;
        s.connect("192.0.2.255:9")?;
        Ok(s.local_addr()?.ip())
    };
    probe()
        .ok()
        .filter(|ip| !ip.is_unspecified())
        .unwrap_or(IpAddr::from([127, 0, 0, 1]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_machine_has_cpus_memory_and_a_kernel() {
        let m = read_machine(Path::new("/"));
        assert!(m.cpus >= 1);
        assert!(m.memory_bytes > 0);
        assert!(m.disk_bytes > 0);
        assert!(!m.kernel_version.is_empty());
    }
}
