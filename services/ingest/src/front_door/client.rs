//! Where a request comes from: the address the per-client limits count against
//! (docs/security.md, "The front door under slow or hostile clients"). Without proxies
//! (`HERMES_TRUSTED_PROXY_HOPS=0`) it is the connection's peer and `X-Forwarded-For` is
//! ignored, since any client can write it. Behind `n` proxies that each append the address
//! they saw, it is the `n`-th entry from the right: the one the outermost trusted proxy
//! wrote; entries further left are the client's own claims. An IPv6 client counts as its
//! /64, which one subscriber usually holds whole.

use std::net::{IpAddr, Ipv6Addr, SocketAddr};

use axum::extract::ConnectInfo;
use axum::http::{Extensions, HeaderMap};

/// The client address of a request (`None`: unknown, as for requests made in-process).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Client(pub Option<IpAddr>);

/// The client address of a request with `headers` and `extensions` (where the server put the
/// peer), behind `hops` trusted proxies; IPv6 reduced to its /64.
pub fn client(headers: &HeaderMap, extensions: &Extensions, hops: usize) -> Option<IpAddr> {
    let peer = extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip());
    let found = if hops == 0 {
        peer
    } else {
        forwarded(headers, hops).or(peer)
    };
    found.map(bucket)
}

/// The entry `hops` from the right of every `X-Forwarded-For` line, in order; the leftmost
/// when there are fewer (fewer proxies were passed, and each entry was written by one).
fn forwarded(headers: &HeaderMap, hops: usize) -> Option<IpAddr> {
    let entries: Vec<&str> = headers
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .collect();
    let at = entries.len().saturating_sub(hops);
    entries.get(at).and_then(|e| address(e))
}

/// An address as proxies write it: `1.2.3.4`, `1.2.3.4:5678`, `::1` or `[::1]:80`.
fn address(entry: &str) -> Option<IpAddr> {
    entry
        .parse::<IpAddr>()
        .ok()
        .or_else(|| entry.parse::<SocketAddr>().ok().map(|s| s.ip()))
}

/// The address limits count: IPv4 (also when mapped into IPv6) as is, IPv6 as its /64.
fn bucket(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let s = v6.segments();
                IpAddr::V6(Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(peer: &str, xff: &[&str]) -> (HeaderMap, Extensions) {
        let mut headers = HeaderMap::new();
        for line in xff {
            headers.append("x-forwarded-for", line.parse().unwrap());
        }
        let mut ext = Extensions::new();
        ext.insert(ConnectInfo(peer.parse::<SocketAddr>().unwrap()));
        (headers, ext)
    }

    fn ip(s: &str) -> Option<IpAddr> {
        Some(s.parse().unwrap())
    }

    #[test]
    fn without_trusted_proxies_the_peer_is_the_client_whatever_the_header_claims() {
        let (h, e) = request("203.0.113.7:5000", &["198.51.100.1"]);
        assert_eq!(client(&h, &e, 0), ip("203.0.113.7"));
        assert_eq!(client(&h, &Extensions::new(), 0), None);
    }

    #[test]
    fn behind_proxies_the_entry_they_wrote_is_the_client_and_client_claims_are_skipped() {
        // The client forged two entries; one ingress appended the address it saw.
        let (h, e) = request("10.0.0.2:80", &["1.1.1.1, 2.2.2.2", "198.51.100.9"]);
        assert_eq!(client(&h, &e, 1), ip("198.51.100.9"));
        assert_eq!(client(&h, &e, 2), ip("2.2.2.2"));
        // Fewer entries than proxies: the leftmost (a proxy wrote it).
        assert_eq!(client(&h, &e, 9), ip("1.1.1.1"));
        // No header, or garbage where the client should be: the peer.
        let (h, e) = request("10.0.0.2:80", &[]);
        assert_eq!(client(&h, &e, 1), ip("10.0.0.2"));
        let (h, e) = request("10.0.0.2:80", &["not-an-address"]);
        assert_eq!(client(&h, &e, 1), ip("10.0.0.2"));
        let (h, e) = request("10.0.0.2:80", &["198.51.100.9:4431"]);
        assert_eq!(client(&h, &e, 1), ip("198.51.100.9"));
        let (h, e) = request("10.0.0.2:80", &["[2001:db8::1]:443"]);
        assert_eq!(client(&h, &e, 1), ip("2001:db8::"));
    }

    #[test]
    fn an_ipv6_client_counts_as_its_64_and_a_mapped_ipv4_as_ipv4() {
        let (h, e) = request("[2001:db8:1:2:aaaa:bbbb:cccc:dddd]:443", &[]);
        assert_eq!(client(&h, &e, 0), ip("2001:db8:1:2::"));
        let (h, e) = request("[::ffff:192.0.2.1]:443", &[]);
        assert_eq!(client(&h, &e, 0), ip("192.0.2.1"));
    }
}
