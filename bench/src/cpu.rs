//! Where the CPU went during a measured window: the service, PostgreSQL's processes, the
//! benchmark itself, and everything else on the machine (other work that skews the figures).
//!
//! From `/proc/<pid>/stat` (utime + stime) and the first line of `/proc/stat`, all in the
//! kernel's clock ticks (`getconf CLK_TCK`, normally 100 per second). PostgreSQL is every process
//! named `postgres`, including backends serving other databases of the same cluster.

use std::time::Duration;

use serde::Serialize;

use crate::load::Spec;

/// CPU used in one window, milliseconds of CPU time.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct CpuUse {
    /// The `tally` process (with SQLite, the database's work too).
    pub service_ms: f64,
    /// PostgreSQL's processes.
    pub postgres_ms: f64,
    /// The benchmark process (HTTP clients, or sqlx and SQLite for the database limit).
    pub bench_ms: f64,
    /// Every other process on the machine.
    pub others_ms: f64,
    /// How busy all CPUs were, percent.
    pub machine_busy_pct: f64,
    /// The window, seconds.
    pub seconds: f64,
}

#[derive(Debug, Clone, Copy, Default)]
struct Snapshot {
    service: u64,
    postgres: u64,
    bench: u64,
    busy: u64,
    total: u64,
}

fn read(path: &str) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// `(command name, utime + stime)` of one `/proc/<pid>/stat`.
fn process(stat: &str) -> Option<(&str, u64)> {
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let name = stat.get(open + 1..close)?;
    let fields: Vec<&str> = stat.get(close + 1..)?.split_whitespace().collect();
    // After the name: state is field 3, utime 14 and stime 15 (1-based, name = 2).
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some((name, utime + stime))
}

fn ticks_of(pid: &str) -> u64 {
    process(&read(&format!("/proc/{pid}/stat"))).map_or(0, |(_, t)| t)
}

fn postgres_ticks() -> u64 {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .filter_map(|e| {
            let stat = read(&format!("{}/stat", e.path().display()));
            process(&stat)
                .filter(|(name, _)| *name == "postgres")
                .map(|(_, t)| t)
        })
        .sum()
}

/// `(busy, total)` ticks of all CPUs since boot.
fn machine() -> (u64, u64) {
    let stat = read("/proc/stat");
    let values: Vec<u64> = stat
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .skip(1)
        .filter_map(|v| v.parse().ok())
        .collect();
    let at = |i: usize| values.get(i).copied().unwrap_or(0);
    // user nice system idle iowait irq softirq steal
    let busy = at(0) + at(1) + at(2) + at(5) + at(6) + at(7);
    (busy, busy + at(3) + at(4))
}

fn snapshot(service: Option<u32>) -> Snapshot {
    let (busy, total) = machine();
    Snapshot {
        service: service.map_or(0, |pid| ticks_of(&pid.to_string())),
        postgres: postgres_ticks(),
        bench: ticks_of("self"),
        busy,
        total,
    }
}

/// Clock ticks per second (`getconf CLK_TCK`, else 100).
#[must_use]
pub fn ticks_per_second() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .trim()
                .parse::<f64>()
                .ok()
        })
        .filter(|t| *t > 0.0)
        .unwrap_or(100.0)
}

fn between(a: Snapshot, b: Snapshot, tick_ms: f64, seconds: f64) -> CpuUse {
    let ms = |x: u64, y: u64| y.saturating_sub(x) as f64 * tick_ms;
    let busy = b.busy.saturating_sub(a.busy);
    let total = b.total.saturating_sub(a.total).max(1);
    let ours = ms(a.service, b.service) + ms(a.postgres, b.postgres) + ms(a.bench, b.bench);
    CpuUse {
        service_ms: ms(a.service, b.service),
        postgres_ms: ms(a.postgres, b.postgres),
        bench_ms: ms(a.bench, b.bench),
        others_ms: (busy as f64 * tick_ms - ours).max(0.0),
        machine_busy_pct: 100.0 * busy as f64 / total as f64,
        seconds,
    }
}

/// Measure the CPU use during the measured window of a load point that starts now.
pub fn watch(service: Option<u32>, spec: Spec, ticks: f64) -> tokio::task::JoinHandle<CpuUse> {
    tokio::spawn(async move {
        tokio::time::sleep(spec.warmup).await;
        let first = snapshot(service);
        tokio::time::sleep(spec.measure).await;
        let last = snapshot(service);
        between(first, last, 1000.0 / ticks, spec.measure.as_secs_f64())
    })
}

/// Await a [`watch`] (nothing when it failed).
pub async fn finish(handle: tokio::task::JoinHandle<CpuUse>) -> Option<CpuUse> {
    tokio::time::timeout(Duration::from_secs(5), handle)
        .await
        .ok()?
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_stat_line_reads_even_with_spaces_in_the_name() {
        let stat = "4097 (tokio (rt) x) S 1 2 3 4 5 6 7 8 9 10 250 50 0 0 20 0 9 0 1 2 3";
        assert_eq!(process(stat), Some(("tokio (rt) x", 300)));
    }
}
