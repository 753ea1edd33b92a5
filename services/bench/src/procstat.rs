//! What a process, and the machine, spent, read from `/proc` for the benchmarks: CPU time
//! (user + system) and resident memory of a process, and the machine's busy time. CPU times
//! are in clock ticks of `USER_HZ`, which Linux fixes at 100 a second for user space on every
//! architecture it ships, whatever the kernel's own tick rate. Every bench reads it here, so
//! none of them needs another bench's module for it.

use std::time::Duration;

use hermes_telemetry::resources::{USER_HZ, stat_cpu_ticks, status_number};

/// A process's CPU time and memory at one instant.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reading {
    pub cpu: Duration,
    pub rss_kib: u64,
    /// The highest resident memory it ever had (`VmHWM`).
    pub peak_kib: u64,
    /// The part of `rss_kib` that is its own (`RssAnon`): the rest is mapped from files, most
    /// of it the binary's code, shared with every process of the same binary.
    pub anon_kib: u64,
}

/// Read `pid`'s CPU time and memory; `None` when it is gone.
pub fn read(pid: u32) -> Option<Reading> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    Some(Reading {
        cpu: Duration::from_millis(process_ticks(pid)? * 1000 / USER_HZ),
        rss_kib: status_number(&status, "VmRSS:")?,
        peak_kib: status_number(&status, "VmHWM:")?,
        anon_kib: status_number(&status, "RssAnon:").unwrap_or(0),
    })
}

/// `pid`'s user + system time in ticks.
pub fn process_ticks(pid: u32) -> Option<u64> {
    stat_cpu_ticks(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// The whole machine's busy time in ticks: user, nice, system, interrupts (not idle, I/O
/// wait or steal).
pub fn machine_busy_ticks() -> Option<u64> {
    busy_of(&std::fs::read_to_string("/proc/stat").ok()?)
}

/// The machine's load average over 1, 5 and 15 minutes, as `/proc/loadavg` gives it.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(", "))
        .unwrap_or_else(|_| "unknown".into())
}

/// Milliseconds of `ticks`.
pub fn ticks_to_ms(ticks: u64) -> f64 {
    ticks as f64 * 1000.0 / USER_HZ as f64
}

/// Busy ticks from `/proc/stat`'s first line: `cpu user nice system idle iowait irq softirq …`.
fn busy_of(stat: &str) -> Option<u64> {
    let f: Vec<u64> = stat
        .lines()
        .next()?
        .split_whitespace()
        .skip(1)
        .filter_map(|v| v.parse().ok())
        .collect();
    Some(f.first()? + f.get(1)? + f.get(2)? + f.get(5)? + f.get(6)?)
}

/// VmRSS and VmHWM of a process, from /proc.
pub fn memory(pid: u32) -> Option<String> {
    let r = read(pid)?;
    Some(format!(
        "VmRSS {} kB (peak VmHWM {} kB)",
        r.rss_kib, r.peak_kib
    ))
}

/// CPU time spent on this machine, from /proc: the whole machine's busy time (user, system,
/// interrupts; not idle, I/O wait or steal) and one process's, in clock ticks. Throughput on a
/// shared two-core machine moves with its neighbours; CPU time per message does much less, so
/// the benches report both.
#[derive(Clone, Copy, Debug, Default)]
pub struct CpuTicks {
    machine: u64,
    process: Option<u64>,
}

impl CpuTicks {
    pub fn now(pid: Option<u32>) -> Self {
        Self {
            machine: machine_busy_ticks().unwrap_or(0),
            process: pid.and_then(process_ticks),
        }
    }

    /// Milliseconds of CPU per item since `before`: (machine, process).
    pub fn per_item(self, before: Self, items: u64) -> (f64, Option<f64>) {
        let ms = |ticks: u64| ticks_to_ms(ticks) / items.max(1) as f64;
        (
            ms(self.machine.saturating_sub(before.machine)),
            self.process
                .zip(before.process)
                .map(|(a, b)| ms(a.saturating_sub(b))),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_own_memory_is_read_and_is_part_of_its_resident_memory() {
        let me = read(std::process::id()).expect("this process is running");
        assert!(me.anon_kib > 0, "{me:?}");
        assert!(me.anon_kib <= me.rss_kib, "{me:?}");
    }

    #[test]
    fn ticks_become_milliseconds() {
        assert_eq!(ticks_to_ms(300), 3000.0);
    }

    #[test]
    fn machine_busy_time_leaves_idle_and_iowait_out() {
        let stat = "cpu  100 10 50 9000 400 5 7 0 0 0\ncpu0 50 5 25 4500 200 2 3 0 0 0\n";
        assert_eq!(busy_of(stat), Some(100 + 10 + 50 + 5 + 7));
    }

    #[test]
    fn this_process_and_the_machine_can_be_read() {
        let r = read(std::process::id()).expect("own /proc entry");
        assert!(r.rss_kib > 0 && r.peak_kib >= r.rss_kib);
        assert!(machine_busy_ticks().is_some());
    }

    #[test]
    fn cpu_ticks_become_milliseconds_per_item() {
        let before = CpuTicks {
            machine: 1_000,
            process: Some(100),
        };
        let after = CpuTicks {
            machine: 1_300,
            process: Some(160),
        };
        // 300 ticks of 10 ms over 1,000 items: 3 ms each; 60 ticks: 0.6 ms.
        let (machine, process) = after.per_item(before, 1_000);
        assert!((machine - 3.0).abs() < 1e-9);
        assert!((process.unwrap() - 0.6).abs() < 1e-9);
        assert!(CpuTicks::now(Some(std::process::id())).process.is_some());
    }
}
