//! What this process uses of its machine, read from `/proc/self` (Linux, where Hermes is
//! deployed): for `GET /health/detailed` (docs/api.md, health). Elsewhere nothing is read and
//! the caller says so, rather than reporting zeros that look like figures.

use std::fs;

/// Clock ticks per second in `/proc/<pid>/stat` and `/proc/stat`: the kernel's `USER_HZ`,
/// fixed at 100 for user space on every architecture Linux ships, whatever the kernel's own
/// tick rate (`sysconf(_SC_CLK_TCK)` answers the same).
pub const USER_HZ: u64 = 100;

/// A snapshot of this process's resource use.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Usage {
    /// Resident memory, in bytes.
    pub rss_bytes: u64,
    /// CPU time spent since the process started, user and system, in seconds.
    pub cpu_seconds: f64,
    /// Open file descriptors (sockets included).
    pub open_fds: u64,
    /// Operating-system threads.
    pub threads: u64,
}

/// This process's usage now, or `None` where `/proc/self` cannot be read.
pub fn usage() -> Option<Usage> {
    let status = fs::read_to_string("/proc/self/status").ok()?;
    let stat = fs::read_to_string("/proc/self/stat").ok()?;
    let open_fds = fs::read_dir("/proc/self/fd").ok()?.count() as u64;
    Some(Usage {
        rss_bytes: status_number(&status, "VmRSS:")? * 1024,
        cpu_seconds: stat_cpu_ticks(&stat)? as f64 / USER_HZ as f64,
        open_fds,
        threads: status_number(&status, "Threads:")?,
    })
}

/// The number after `key` in a `/proc/<pid>/status` (`VmRSS:  1234 kB` gives 1234).
pub fn status_number(status: &str, key: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
}

/// `utime + stime`, in ticks of [`USER_HZ`], from a `/proc/<pid>/stat` line. The command name
/// (field 2) is in parentheses and may hold spaces, so the fields are counted from after its
/// closing parenthesis.
pub fn stat_cpu_ticks(stat: &str) -> Option<u64> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    let mut fields = after_name.split_whitespace();
    // After the name come state (field 3) … utime (field 14) and stime (field 15).
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_time_is_read_past_a_command_name_with_spaces_and_parentheses() {
        let stat = "4242 (tokio (rt) x) S 1 4242 4242 0 -1 4194560 \
                    1000 0 0 0 250 75 0 0 20 0 9 0 123 456789 321 18446744073709551615";
        assert_eq!(stat_cpu_ticks(stat), Some(325));
    }

    #[test]
    fn status_lines_are_read_by_their_key() {
        let status = "Name:\thermes\nVmRSS:\t  20480 kB\nThreads:\t9\n";
        assert_eq!(status_number(status, "VmRSS:"), Some(20480));
        assert_eq!(status_number(status, "Threads:"), Some(9));
        assert_eq!(status_number(status, "VmSwap:"), None);
    }

    #[test]
    fn this_process_reads_itself() {
        let u = usage().expect("/proc/self is readable on Linux");
        assert!(
            u.rss_bytes > 0 && u.threads >= 1 && u.open_fds >= 3,
            "{u:?}"
        );
    }
}
