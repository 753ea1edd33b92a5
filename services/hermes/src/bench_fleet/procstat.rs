//! What a process costs, read from `/proc`: CPU time (user + system) and resident memory.
//! CPU time is in clock ticks of `USER_HZ`, which Linux fixes at 100 a second for user space
//! on every architecture it ships, whatever the kernel's own tick rate.

use std::time::Duration;

/// Ticks a second in `/proc/<pid>/stat`.
const USER_HZ: u64 = 100;

/// A process's CPU time and memory at one instant.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reading {
    pub cpu: Duration,
    pub rss_kib: u64,
}

/// Read `pid`'s CPU time and resident memory; `None` when it is gone.
pub fn read(pid: u32) -> Option<Reading> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    Some(Reading {
        cpu: cpu_of(&stat)?,
        rss_kib: rss_of(&status)?,
    })
}

/// User + system time from a `/proc/<pid>/stat` line. The command name (field 2) may hold
/// spaces and parentheses, so fields are counted after its closing parenthesis.
fn cpu_of(stat: &str) -> Option<Duration> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After the name: state is field 3, so utime (14) and stime (15) are at 11 and 12.
    let ticks = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 1000 / USER_HZ))
}

/// `VmRSS` in KiB from `/proc/<pid>/status`.
fn rss_of(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_time_is_read_after_a_command_name_with_spaces() {
        let stat = "1234 (tokio (worker) 1) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 8 0 100 0 0";
        assert_eq!(cpu_of(stat), Some(Duration::from_millis(3000)));
    }

    #[test]
    fn resident_memory_is_read_from_status() {
        let status = "Name:\thermes\nVmPeak:\t 9000 kB\nVmRSS:\t   21344 kB\nThreads:\t5\n";
        assert_eq!(rss_of(status), Some(21344));
    }

    #[test]
    fn this_process_can_be_read() {
        let r = read(std::process::id()).expect("own /proc entry");
        assert!(r.rss_kib > 0);
    }
}
