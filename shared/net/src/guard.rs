//! The server-side request forgery guard shared by every outbound request whose URL someone
//! outside the operator chose: the `http_fetch` tool (a model's URL) and agent wake webhooks
//! (a registered `webhook_url`).
//!
//! A host is resolved here and refused if *any* of its addresses is not public (loopback,
//! private, link-local, CGNAT, documentation, reserved…, IPv4-mapped and embedded forms
//! included), unless the operator allowlisted the host name or a range. The caller then pins
//! its client's resolver to exactly the addresses that were checked, so a DNS answer that
//! changes between the check and the connection (rebinding) reaches nothing else.
//! Unspecified, multicast and broadcast addresses are refused even when allowlisted: no HTTP
//! service is reachable there.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use url::{Host, Url};

use hermes_config::AllowRule;

/// Why a URL may not be requested.
#[derive(Debug, thiserror::Error)]
pub enum GuardError {
    /// An address of the host is not public and not allowlisted (or never reachable).
    #[error("refused {url}: {why}")]
    Refused { url: String, why: String },
    /// The host name does not resolve.
    #[error("cannot resolve {name:?}: {error}")]
    Resolve { name: String, error: std::io::Error },
    /// The host name resolves to nothing.
    #[error("{0:?} has no address")]
    NoAddress(String),
    /// The URL names no host.
    #[error("the URL has no host")]
    NoHost,
}

impl GuardError {
    /// How a send refused here is classified: a refused address or a URL without a host
    /// for good, DNS trouble as something that may pass on the retry schedule.
    pub fn failure_reason(&self) -> crate::failure::FailureReason {
        use crate::failure::FailureReason;
        match self {
            GuardError::Refused { .. } => FailureReason::AddressRefused,
            GuardError::NoHost => FailureReason::InvalidRecipient,
            GuardError::Resolve { .. } | GuardError::NoAddress(_) => FailureReason::NetworkTimeout,
        }
    }
}

/// A host name and the checked addresses the client must connect to (and only to).
pub type Pinned = (String, Vec<SocketAddr>);

enum Class {
    Public,
    /// Not public; refused unless allowlisted. The text names the kind of range.
    NonPublic(&'static str),
    /// Refused even when allowlisted: nothing answers HTTP there.
    Never(&'static str),
}

/// Which addresses may be requested: public ones, and those the operator allowlisted.
#[derive(Clone, Debug)]
pub struct AddressPolicy {
    rules: Vec<AllowRule>,
    /// Where the operator allowlists a host, named in refusals.
    allow_setting: &'static str,
}

impl AddressPolicy {
    /// A policy allowing public addresses and what `rules` names; `allow_setting` is the
    /// configuration a refusal points the operator to.
    pub fn new(rules: Vec<AllowRule>, allow_setting: &'static str) -> Self {
        Self {
            rules,
            allow_setting,
        }
    }

    /// Resolve `url`'s host and check every address. `Some((name, addresses))` for a host
    /// name (the client must connect to those addresses only), `None` for a literal IP
    /// (the client connects to it without resolving).
    pub async fn resolve(&self, url: &Url) -> Result<Option<Pinned>, GuardError> {
        let port = url.port_or_known_default().unwrap_or(80);
        let refused = |why: String| GuardError::Refused {
            url: shown(url),
            why,
        };
        match url.host() {
            Some(Host::Ipv4(ip)) => self
                .check(None, IpAddr::V4(ip))
                .map(|_| None)
                .map_err(refused),
            Some(Host::Ipv6(ip)) => self
                .check(None, IpAddr::V6(ip))
                .map(|_| None)
                .map_err(refused),
            Some(Host::Domain(name)) => {
                let addrs: Vec<SocketAddr> = tokio::net::lookup_host((name, port))
                    .await
                    .map_err(|error| GuardError::Resolve {
                        name: name.to_string(),
                        error,
                    })?
                    .collect();
                if addrs.is_empty() {
                    return Err(GuardError::NoAddress(name.to_string()));
                }
                // Every address, not just the first: the client may fall back to any of them.
                for addr in &addrs {
                    self.check(Some(name), addr.ip()).map_err(refused)?;
                }
                Ok(Some((name.to_string(), addrs)))
            }
            None => Err(GuardError::NoHost),
        }
    }

    /// Whether `ip` (an address of `host` when it was resolved from a name) may be requested.
    pub fn check(&self, host: Option<&str>, ip: IpAddr) -> Result<(), String> {
        match classify(ip) {
            Class::Public => Ok(()),
            Class::Never(kind) => Err(format!("{ip} is a {kind} address")),
            Class::NonPublic(kind) => {
                let canonical = ip.to_canonical();
                let allowed = self.rules.iter().any(|rule| {
                    host.is_some_and(|h| rule.matches_host(h))
                        || rule.matches_ip(ip)
                        || rule.matches_ip(canonical)
                });
                if allowed {
                    Ok(())
                } else {
                    Err(format!(
                        "{ip} is a {kind} address; only public addresses are requested unless \
                         the operator allowlists the host in {}",
                        self.allow_setting
                    ))
                }
            }
        }
    }
}

/// A URL as it may appear in a result or an error: without credentials (an error about
/// them must not repeat them).
pub fn shown(url: &Url) -> String {
    let mut url = url.clone();
    let _ = url.set_username("");
    let _ = url.set_password(None);
    url.to_string()
}

fn classify(ip: IpAddr) -> Class {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

/// Whether `ip` is in `net/prefix` (IPv4).
fn in_v4(ip: Ipv4Addr, net: [u8; 4], prefix: u32) -> bool {
    let mask = u32::MAX.checked_shl(32 - prefix).unwrap_or(0);
    u32::from(ip) & mask == u32::from(Ipv4Addr::from(net))
}

/// Whether `ip` is in `net/prefix` (IPv6).
fn in_v6(ip: Ipv6Addr, net: u128, prefix: u32) -> bool {
    let mask = u128::MAX.checked_shl(128 - prefix).unwrap_or(0);
    u128::from(ip) & mask == net
}

fn classify_v4(ip: Ipv4Addr) -> Class {
    use Class::*;
    if ip.is_unspecified() {
        return Never("unspecified");
    }
    if ip.is_broadcast() {
        return Never("broadcast");
    }
    if ip.is_multicast() {
        return Never("multicast");
    }
    // (network, prefix, kind), after the IANA IPv4 special-purpose registry.
    const RANGES: &[([u8; 4], u32, &str)] = &[
        ([0, 0, 0, 0], 8, "\"this network\""),
        ([10, 0, 0, 0], 8, "private"),
        ([100, 64, 0, 0], 10, "shared (CGNAT)"),
        ([127, 0, 0, 0], 8, "loopback"),
        ([169, 254, 0, 0], 16, "link-local"),
        ([172, 16, 0, 0], 12, "private"),
        ([192, 0, 0, 0], 24, "reserved (IETF protocol assignments)"),
        ([192, 0, 2, 0], 24, "documentation"),
        ([192, 88, 99, 0], 24, "reserved (6to4 relay)"),
        ([192, 168, 0, 0], 16, "private"),
        ([198, 18, 0, 0], 15, "benchmarking"),
        ([198, 51, 100, 0], 24, "documentation"),
        ([203, 0, 113, 0], 24, "documentation"),
        ([240, 0, 0, 0], 4, "reserved"),
    ];
    RANGES
        .iter()
        .find(|(net, prefix, _)| in_v4(ip, *net, *prefix))
        .map_or(Public, |(_, _, kind)| NonPublic(kind))
}

fn classify_v6(ip: Ipv6Addr) -> Class {
    use Class::*;
    // `::ffff:a.b.c.d` reaches a.b.c.d on a dual-stack socket: judge the IPv4 address.
    if let Some(v4) = ip.to_ipv4_mapped() {
        return classify_v4(v4);
    }
    if ip.is_unspecified() {
        return Never("unspecified");
    }
    if ip.is_multicast() {
        return Never("multicast");
    }
    if ip.is_loopback() {
        return NonPublic("loopback");
    }
    let bits = u128::from(ip);
    // Prefixes that embed an IPv4 address a gateway would forward to: judge that address.
    if in_v6(ip, 0x0064_ff9b_0000_0000_0000_0000_0000_0000, 96) {
        return classify_v4(Ipv4Addr::from(bits as u32));
    }
    if in_v6(ip, 0x2002_0000_0000_0000_0000_0000_0000_0000, 16) {
        return classify_v4(Ipv4Addr::from((bits >> 80) as u32));
    }
    const RANGES: &[(u128, u32, &str)] = &[
        (0, 96, "reserved (IPv4-compatible)"),
        (0x0064_ff9b_0001 << 80, 48, "reserved (local NAT64)"),
        (0x0100 << 112, 64, "reserved (discard-only)"),
        (0x2001_0db8 << 96, 32, "documentation"),
        (0x2001 << 112, 23, "reserved (IETF protocol assignments)"),
        (0x3fff << 112, 20, "documentation"),
        (0xfc00 << 112, 7, "private (unique local)"),
        (0xfe80 << 112, 10, "link-local"),
        (0xfec0 << 112, 10, "reserved (site-local)"),
    ];
    if let Some((_, _, kind)) = RANGES
        .iter()
        .find(|(net, prefix, _)| in_v6(ip, *net, *prefix))
    {
        return NonPublic(kind);
    }
    // Only 2000::/3 is allocated as global unicast; the rest is reserved by IANA.
    if in_v6(ip, 0x2000 << 112, 3) {
        Public
    } else {
        NonPublic("reserved")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn policy(allow: &[&str]) -> AddressPolicy {
        AddressPolicy::new(
            allow.iter().map(|a| a.parse().unwrap()).collect(),
            "the allowlist",
        )
    }

    #[test]
    fn every_non_public_ipv4_range_is_refused() {
        let p = policy(&[]);
        for (addr, kind) in [
            ("127.0.0.1", "loopback"),
            ("127.255.255.254", "loopback"),
            ("10.1.2.3", "private"),
            ("172.16.0.1", "private"),
            ("172.31.255.255", "private"),
            ("192.168.1.1", "private"),
            ("169.254.169.254", "link-local"),
            ("100.64.0.1", "CGNAT"),
            ("100.127.255.255", "CGNAT"),
            ("0.1.2.3", "this network"),
            ("0.0.0.0", "unspecified"),
            ("255.255.255.255", "broadcast"),
            ("224.0.0.1", "multicast"),
            ("239.255.255.250", "multicast"),
            ("192.0.2.10", "documentation"),
            ("198.51.100.10", "documentation"),
            ("203.0.113.10", "documentation"),
            ("198.18.0.1", "benchmarking"),
            ("192.0.0.8", "reserved"),
            ("240.0.0.1", "reserved"),
        ] {
            let err = p.check(None, ip(addr)).unwrap_err();
            assert!(err.contains(kind), "{addr}: {err}");
        }
        for addr in [
            "8.8.8.8",
            "1.1.1.1",
            "172.32.0.1",
            "100.128.0.1",
            "193.0.2.1",
        ] {
            assert_eq!(p.check(None, ip(addr)), Ok(()), "{addr}");
        }
    }

    #[test]
    fn every_non_public_ipv6_range_is_refused() {
        let p = policy(&[]);
        for (addr, kind) in [
            ("::1", "loopback"),
            ("::", "unspecified"),
            ("fc00::1", "unique local"),
            ("fd12:3456::1", "unique local"),
            ("fe80::1", "link-local"),
            ("febf::1", "link-local"),
            ("fec0::1", "site-local"),
            ("ff02::1", "multicast"),
            ("2001:db8::1", "documentation"),
            ("3fff::1", "documentation"),
            ("2001::1", "IETF"),
            ("100::1", "discard"),
            ("::10.0.0.1", "IPv4-compatible"),
            ("64:ff9b:1::1", "local NAT64"),
            ("4000::1", "reserved"),
        ] {
            let err = p.check(None, ip(addr)).unwrap_err();
            assert!(err.contains(kind), "{addr}: {err}");
        }
        for addr in ["2606:4700:4700::1111", "2a00:1450:4007:80e::200e"] {
            assert_eq!(p.check(None, ip(addr)), Ok(()), "{addr}");
        }
    }

    #[test]
    fn ipv6_forms_of_ipv4_addresses_are_judged_as_ipv4() {
        let p = policy(&[]);
        for (addr, kind) in [
            ("::ffff:127.0.0.1", "loopback"),
            ("::ffff:10.0.0.1", "private"),
            ("::ffff:169.254.169.254", "link-local"),
            ("::ffff:100.64.0.1", "CGNAT"),
            ("::ffff:0.0.0.0", "unspecified"),
            ("::ffff:255.255.255.255", "broadcast"),
            ("64:ff9b::7f00:1", "loopback"),
            ("64:ff9b::a9fe:a9fe", "link-local"),
            ("2002:c0a8:0101::1", "private"),
        ] {
            let err = p.check(None, ip(addr)).unwrap_err();
            assert!(err.contains(kind), "{addr}: {err}");
        }
        assert_eq!(p.check(None, ip("::ffff:8.8.8.8")), Ok(()));
        assert_eq!(p.check(None, ip("64:ff9b::808:808")), Ok(()));
        assert_eq!(p.check(None, ip("2002:0808:0808::1")), Ok(()));
    }

    #[test]
    fn the_allowlist_lifts_the_refusal_by_host_or_range() {
        let p = policy(&["wiki.internal", "10.1.0.0/16", "fd00::/8", "127.0.0.1"]);
        assert_eq!(p.check(Some("wiki.internal"), ip("192.168.7.7")), Ok(()));
        assert_eq!(p.check(Some("WIKI.internal."), ip("::1")), Ok(()));
        assert!(p.check(Some("other.internal"), ip("192.168.7.7")).is_err());
        assert!(
            p.check(Some("x.wiki.internal"), ip("192.168.7.7")).is_err(),
            "exact names only"
        );
        assert_eq!(p.check(None, ip("10.1.200.3")), Ok(()));
        assert!(p.check(None, ip("10.2.0.1")).is_err());
        assert_eq!(p.check(None, ip("::ffff:10.1.0.9")), Ok(()), "mapped form");
        assert_eq!(p.check(None, ip("fd00::5")), Ok(()));
        assert_eq!(p.check(None, ip("127.0.0.1")), Ok(()));
        assert!(p.check(None, ip("127.0.0.2")).is_err());
        // Nothing answers HTTP on these; allowlisting everything does not change that.
        let all = policy(&["0.0.0.0/0", "::/0"]);
        for addr in ["0.0.0.0", "255.255.255.255", "224.0.0.1", "::", "ff02::1"] {
            assert!(all.check(None, ip(addr)).is_err(), "{addr}");
        }
        assert_eq!(all.check(None, ip("192.168.0.1")), Ok(()));
    }

    #[tokio::test]
    async fn names_are_resolved_and_every_address_checked() {
        let p = policy(&[]);
        let url = Url::parse("http://localhost:8080/").unwrap();
        let err = p.resolve(&url).await.unwrap_err().to_string();
        assert!(err.contains("loopback"), "{err}");
        let p = policy(&["localhost"]);
        let (name, addrs) = p.resolve(&url).await.unwrap().unwrap();
        assert_eq!(name, "localhost");
        assert!(!addrs.is_empty());
        assert!(
            addrs
                .iter()
                .all(|a| a.ip().is_loopback() && a.port() == 8080)
        );
        let literal = Url::parse("http://[::ffff:127.0.0.1]/").unwrap();
        assert!(policy(&[]).resolve(&literal).await.is_err());
        assert_eq!(
            policy(&["127.0.0.0/8"]).resolve(&literal).await.unwrap(),
            None
        );
    }
}
