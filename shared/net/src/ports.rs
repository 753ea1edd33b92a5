//! Loopback ports for servers a test or the fault harness starts itself.
//!
//! Asking the kernel for port 0 hands out a port from the ephemeral range, the same range
//! every outgoing connection on the machine draws its local port from. Between the moment a
//! port is released here and the moment a server binds it, a broker node connecting to its
//! peers or a client connecting anywhere can take it, and the server then fails to start
//! ("could not bind IPv4 address ... Address already in use"). Ports below the ephemeral
//! range are never handed to outgoing connections, so only another server picking the same
//! one could collide, and each is checked free before it is returned. A process never hands
//! out one port twice: the fault harness picks some thirty ports before its servers bind
//! them, and two of those drawn alike once failed a run ("Address already in use").

use std::collections::BTreeSet;
use std::hash::{BuildHasher, Hasher};
use std::net::TcpListener;
use std::sync::{Mutex, PoisonError};

/// The ports this process has handed out.
static HANDED_OUT: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());

/// The lowest port handed out: above the ports well-known servers use.
const LOWEST: u16 = 20_000;

/// Where the ephemeral range starts when the kernel does not say (Linux's default).
const EPHEMERAL_DEFAULT: u16 = 32_768;

/// How many random ports are tried before falling back to the kernel's choice.
const ATTEMPTS: usize = 64;

/// A loopback port nobody listens on right now, below the machine's ephemeral range when
/// one is free there, else one the kernel picks.
pub fn free_port() -> std::io::Result<u16> {
    let highest = ephemeral_start().max(LOWEST + 1);
    let span = u64::from(highest - LOWEST);
    let seed = std::collections::hash_map::RandomState::new();
    let mut handed = HANDED_OUT.lock().unwrap_or_else(PoisonError::into_inner);
    for attempt in 0..ATTEMPTS {
        let mut h = seed.build_hasher();
        h.write_usize(attempt);
        h.write_u32(std::process::id());
        let port = LOWEST + (h.finish() % span) as u16;
        if !handed.contains(&port) && TcpListener::bind(("127.0.0.1", port)).is_ok() {
            handed.insert(port);
            return Ok(port);
        }
    }
    loop {
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        if handed.insert(port) {
            return Ok(port);
        }
    }
}

/// The first port of the kernel's ephemeral range (`ip_local_port_range`).
fn ephemeral_start() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(EPHEMERAL_DEFAULT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_free_port_is_below_the_ephemeral_range_and_can_be_bound() {
        let port = free_port().unwrap();
        assert!(port >= LOWEST && port < ephemeral_start().max(LOWEST + 1));
        TcpListener::bind(("127.0.0.1", port)).unwrap();
    }

    /// Ports picked before any is bound (as the fault harness picks its servers') are all
    /// different: drawn alike, 300 of some 12,700 would collide three or four times a run.
    #[test]
    fn a_port_is_never_handed_out_twice_even_before_it_is_bound() {
        let ports: Vec<u16> = (0..300).map(|_| free_port().unwrap()).collect();
        let distinct: BTreeSet<u16> = ports.iter().copied().collect();
        assert_eq!(distinct.len(), ports.len());
    }

    #[test]
    fn a_port_in_use_is_not_handed_out() {
        let mut held = Vec::new();
        for _ in 0..32 {
            let port = free_port().unwrap();
            assert!(
                !held.iter().any(|(p, _)| *p == port),
                "{port} handed out twice"
            );
            held.push((port, TcpListener::bind(("127.0.0.1", port)).unwrap()));
        }
    }
}
