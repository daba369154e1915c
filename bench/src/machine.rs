//! The machine a run was made on, from `/proc` and `/sys` (Linux).

use std::path::Path;

use serde::Serialize;

/// What the figures depend on.
#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    /// Logical CPUs available to the process.
    pub cpus: usize,
    /// CPU model (`/proc/cpuinfo`).
    pub cpu_model: String,
    /// Total memory, GiB.
    pub memory_gib: f64,
    /// Kernel release.
    pub kernel: String,
    /// The block device holding the working directory, and what the kernel says of it.
    pub disk: String,
}

fn read(path: &str) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// The load averages over 1, 5 and 15 minutes.
#[must_use]
pub fn load_average() -> String {
    read("/proc/loadavg")
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// Describe this machine; `work_dir` is where the SQLite files live.
#[must_use]
pub fn describe(work_dir: &Path) -> Machine {
    let cpu_model = read("/proc/cpuinfo")
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .map(|v| v.trim_start_matches([' ', '\t', ':']).trim().to_owned())
        .unwrap_or_else(|| "unknown".to_owned());
    let memory_kib: u64 = read("/proc/meminfo")
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0);
    Machine {
        cpus: std::thread::available_parallelism().map_or(1, std::num::NonZero::get),
        cpu_model,
        memory_gib: (memory_kib as f64 / 1024.0 / 1024.0 * 10.0).round() / 10.0,
        kernel: read("/proc/sys/kernel/osrelease").trim().to_owned(),
        disk: disk(work_dir),
    }
}

/// The device of the longest mount point containing `dir`, its size and rotational flag.
fn disk(dir: &Path) -> String {
    let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let mounts = read("/proc/mounts");
    let mount = mounts
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            Some((f.next()?, f.next()?, f.next()?))
        })
        .filter(|(_, point, _)| dir.starts_with(point))
        .max_by_key(|(_, point, _)| point.len());
    let Some((device, point, fs)) = mount else {
        return "unknown".to_owned();
    };
    let name = device.trim_start_matches("/dev/");
    let sys = |file: &str| read(&format!("/sys/block/{name}/{file}")).trim().to_owned();
    let sectors: u64 = sys("size").parse().unwrap_or(0);
    let size = if sectors > 0 {
        format!(", {} GiB", sectors * 512 / (1 << 30))
    } else {
        String::new()
    };
    let rotational = match sys("queue/rotational").as_str() {
        "0" => ", reported non-rotational",
        "1" => ", reported rotational (virtual disks often say so)",
        _ => "",
    };
    format!("{device} ({fs} on {point}{size}{rotational})")
}
