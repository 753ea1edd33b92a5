//! `http_fetch`: GET one `http`/`https` URL and return its text to the model.
//!
//! The URL comes from a model, which may have read it in an untrusted message, so the tool is
//! built to be harmless to the network it runs in (server-side request forgery):
//!
//! - GET only: the arguments carry a URL and nothing else, so there is no method, header or
//!   body for a prompt to smuggle in.
//! - The host is resolved here, and the fetch is refused if *any* of its addresses is not
//!   public (loopback, private, link-local, CGNAT, documentation, reserved…, IPv4-mapped
//!   forms included). The connection then goes to exactly the addresses that were checked
//!   (the client's resolver is pinned to them), so a DNS answer that changes between the
//!   check and the connection (rebinding) cannot reach anything else.
//! - Redirects are followed by hand, at most `max_redirects`, each target checked like the
//!   first URL.
//! - The whole fetch has a deadline and the body is read chunk by chunk up to `max_bytes`,
//!   so a slow or huge answer costs neither time nor memory.
//! - Only textual content types are returned; binary content is refused.
//!
//! The operator's `[tools.http_fetch] allow_hosts` (host names or CIDR ranges) lifts the
//! non-public refusal for internal services. Unspecified, multicast and broadcast addresses
//! are refused even then: no HTTP service is reachable there.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use hermes_shared::config::{AllowRule, HttpFetchSettings};
use hermes_shared::model::ToolSpec;
use reqwest::header::{ACCEPT, CONTENT_TYPE, LOCATION};
use serde_json::json;
use url::{Host, Url};

use crate::registry::{Tool, ToolError, ToolFuture};

/// What the tool asks servers for: text first, anything else last (it is refused anyway,
/// but a server with only one representation should still answer rather than 406).
const ACCEPT_TEXT: &str = "text/html, text/plain;q=0.9, application/json;q=0.9, \
                           application/xml;q=0.8, text/*;q=0.8, */*;q=0.1";

const USER_AGENT: &str = concat!("hermes-http-fetch/", env!("CARGO_PKG_VERSION"));

/// The `http_fetch` tool, with its limits and the operator's allowlist.
pub struct HttpFetch {
    policy: AddressPolicy,
    max_bytes: usize,
    timeout: Duration,
    max_redirects: u32,
}

impl HttpFetch {
    /// The tool as `[tools.http_fetch]` configures it.
    pub fn new(settings: &HttpFetchSettings) -> Self {
        // reqwest is built without a default crypto provider and panics when it finds none;
        // the binary installs one at start, and doing it here too (it is idempotent) keeps
        // the tool from ever panicking in a process that did not.
        hermes_shared::install_crypto_provider();
        Self {
            policy: AddressPolicy {
                rules: settings.allow_rules(),
            },
            max_bytes: settings.max_bytes,
            timeout: settings.timeout(),
            max_redirects: settings.max_redirects,
        }
    }

    /// Fetch what `arguments` names, within the time limit.
    async fn run(&self, arguments: &serde_json::Value) -> Result<String, ToolError> {
        let url = parse_arguments(arguments)?;
        let shown = shown(&url);
        match tokio::time::timeout(self.timeout, self.fetch(url)).await {
            Ok(result) => result,
            Err(_) => Err(ToolError::Failed(format!(
                "fetching {shown} timed out after {:?}",
                self.timeout
            ))),
        }
    }

    /// GET `url`, following redirects, and render the final answer.
    async fn fetch(&self, mut url: Url) -> Result<String, ToolError> {
        let mut redirects = 0;
        loop {
            let resp = self.get_once(&url).await?;
            // 300 and 304 are not redirects to follow, and a redirect without a Location
            // has nowhere to go: both are returned as they are.
            let followed = matches!(resp.status().as_u16(), 301 | 302 | 303 | 307 | 308);
            let location = match resp.headers().get(LOCATION) {
                Some(location) if followed => location.clone(),
                _ => return self.read(url, resp).await,
            };
            if redirects >= self.max_redirects {
                return Err(ToolError::Failed(format!(
                    "{} redirected more than {} times; giving up",
                    shown(&url),
                    self.max_redirects
                )));
            }
            let next = location
                .to_str()
                .ok()
                .and_then(|l| url.join(l).ok())
                .ok_or_else(|| {
                    ToolError::Failed(format!("{} redirected to an invalid location", shown(&url)))
                })?;
            check_url(&next).map_err(|why| {
                ToolError::Failed(format!(
                    "{} redirected to a refused URL: {why}",
                    shown(&url)
                ))
            })?;
            redirects += 1;
            url = next;
        }
    }

    /// One GET, with no redirect followed, connected only to addresses the policy accepted.
    async fn get_once(&self, url: &Url) -> Result<reqwest::Response, ToolError> {
        let pinned = self.policy.resolve(url).await?;
        // A client per request because the DNS pin is a client setting; it also means no
        // pooled connection from an earlier fetch is ever reused for another name.
        let mut builder = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            // A proxy would resolve the name itself, after our check: that is the rebinding
            // hole this tool exists to close.
            .no_proxy()
            .user_agent(USER_AGENT);
        if let Some((name, addrs)) = &pinned {
            builder = builder.resolve_to_addrs(name, addrs);
        }
        let client = builder.build().map_err(|e| {
            ToolError::Failed(format!("cannot build an HTTP client: {}", describe(e)))
        })?;
        client
            .get(url.clone())
            .header(ACCEPT, ACCEPT_TEXT)
            .send()
            .await
            .map_err(|e| ToolError::Failed(format!("fetching {}: {}", shown(url), describe(e))))
    }

    /// The result for the model: refuse non-text, read at most `max_bytes` of body.
    async fn read(&self, url: Url, mut resp: reqwest::Response) -> Result<String, ToolError> {
        let status = resp.status().as_u16();
        let content_type = resp
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let content_type = match content_type {
            Some(ct) if is_text(&ct) => ct,
            Some(ct) => {
                return Err(ToolError::Failed(format!(
                    "{} answered {status} with content type {ct:?}, which is not text; \
                     http_fetch only returns text",
                    shown(&url)
                )));
            }
            None => {
                return Err(ToolError::Failed(format!(
                    "{} answered {status} without a content type; http_fetch only returns \
                     content declared as text",
                    shown(&url)
                )));
            }
        };
        let mut body = Vec::new();
        let mut truncated = false;
        // Chunk by chunk so that a body larger than the limit is never held whole: the rest
        // is not read, and dropping the response closes the connection.
        while let Some(chunk) = resp
            .chunk()
            .await
            .map_err(|e| ToolError::Failed(format!("reading {}: {}", shown(&url), describe(e))))?
        {
            let room = self.max_bytes - body.len();
            if chunk.len() > room {
                body.extend_from_slice(&chunk[..room]);
                truncated = true;
                break;
            }
            body.extend_from_slice(&chunk);
        }
        Ok(json!({
            "url": shown(&url),
            "status": status,
            "content_type": content_type,
            "truncated": truncated,
            "body": decode(&body, truncated),
        })
        .to_string())
    }
}

impl Tool for HttpFetch {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "http_fetch".into(),
            description: format!(
                "Fetch a web page or other text document with an HTTP GET and return its \
                 status, content type and text. Only public http:// and https:// URLs; \
                 binary content is refused; the body is cut after {} and the whole fetch \
                 must finish within {} s.",
                size(self.max_bytes),
                self.timeout.as_secs()
            ),
            parameters: json!({
                "type": "object",
                "properties": {
                    "url": {
                        "type": "string",
                        "description": "Absolute http:// or https:// URL to GET"
                    }
                },
                "required": ["url"],
                "additionalProperties": false
            }),
            toolset: super::TOOLSET.into(),
        }
    }

    fn call<'a>(&'a self, arguments: &'a serde_json::Value) -> ToolFuture<'a> {
        Box::pin(self.run(arguments))
    }
}

/// `n` bytes as the description shows them.
fn size(n: usize) -> String {
    if n >= 1024 && n.is_multiple_of(1024) {
        format!("{} KiB", n / 1024)
    } else {
        format!("{n} bytes")
    }
}

/// The URL of `{"url": "..."}`. Any other key is refused so that a model asking for a
/// method, headers or a body learns that it cannot have them.
fn parse_arguments(arguments: &serde_json::Value) -> Result<Url, ToolError> {
    let object = arguments
        .as_object()
        .ok_or_else(|| ToolError::InvalidArguments("expected an object with \"url\"".into()))?;
    if let Some(other) = object.keys().find(|k| *k != "url") {
        return Err(ToolError::InvalidArguments(format!(
            "unknown argument {other:?}: http_fetch takes only \"url\" and always uses GET"
        )));
    }
    let raw = match object.get("url") {
        Some(serde_json::Value::String(s)) => s,
        Some(_) => return Err(ToolError::InvalidArguments("url must be a string".into())),
        None => return Err(ToolError::InvalidArguments("url is required".into())),
    };
    let url = Url::parse(raw.trim())
        .map_err(|e| ToolError::InvalidArguments(format!("url is not an absolute URL: {e}")))?;
    check_url(&url).map_err(ToolError::InvalidArguments)?;
    Ok(url)
}

/// The URL rules that do not need the network: scheme, credentials, a host.
fn check_url(url: &Url) -> Result<(), String> {
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!(
            "scheme {:?} is not allowed; only http and https",
            url.scheme()
        ));
    }
    // Credentials in a URL would be sent to whoever answers, redirects included.
    if !url.username().is_empty() || url.password().is_some() {
        return Err("URLs with credentials (user:password@) are not allowed".into());
    }
    if url.host().is_none() {
        return Err("the URL has no host".into());
    }
    Ok(())
}

/// A URL as it may appear in a result or an error: without credentials (they are refused,
/// but an error about them must not repeat them).
fn shown(url: &Url) -> String {
    let mut url = url.clone();
    let _ = url.set_username("");
    let _ = url.set_password(None);
    url.to_string()
}

/// A reqwest error as text: its kind and causes, without the URL (the caller adds a shown
/// one) and never a header, since reqwest errors do not carry them.
fn describe(e: reqwest::Error) -> String {
    let e = e.without_url();
    let mut text = if e.is_timeout() {
        "timed out".to_string()
    } else if e.is_connect() {
        "could not connect".to_string()
    } else if e.is_body() || e.is_decode() {
        "the body could not be read".to_string()
    } else {
        "the request failed".to_string()
    };
    let mut source = std::error::Error::source(&e);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// Whether a `Content-Type` is text the model can read.
fn is_text(content_type: &str) -> bool {
    let essence = content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    let Some((kind, sub)) = essence.split_once('/') else {
        return false;
    };
    match kind {
        "text" => true,
        "application" => {
            matches!(
                sub,
                "json"
                    | "xml"
                    | "javascript"
                    | "x-javascript"
                    | "ecmascript"
                    | "yaml"
                    | "x-yaml"
                    | "toml"
                    | "x-www-form-urlencoded"
            ) || sub.ends_with("+json")
                || sub.ends_with("+xml")
        }
        _ => false,
    }
}

/// The body as text. Invalid UTF-8 becomes U+FFFD, except a character cut in half by the
/// size limit, which is simply dropped.
fn decode(bytes: &[u8], truncated: bool) -> String {
    let mut out = String::with_capacity(bytes.len());
    let mut chunks = bytes.utf8_chunks().peekable();
    while let Some(chunk) = chunks.next() {
        out.push_str(chunk.valid());
        let invalid = chunk.invalid();
        // Only the very end can hold a character the limit cut in half: an incomplete
        // sequence (no error length) rather than an invalid one.
        let cut_by_limit = truncated
            && chunks.peek().is_none()
            && std::str::from_utf8(invalid).is_err_and(|e| e.error_len().is_none());
        if !invalid.is_empty() && !cut_by_limit {
            out.push(char::REPLACEMENT_CHARACTER);
        }
    }
    out
}

/// How an address is treated.
#[derive(Debug, PartialEq, Eq)]
enum Class {
    Public,
    /// Not public; refused unless allowlisted. The text names the kind of range.
    NonPublic(&'static str),
    /// Refused even when allowlisted: nothing answers HTTP there.
    Never(&'static str),
}

/// Which addresses may be fetched: public ones, and those the operator allowlisted.
struct AddressPolicy {
    rules: Vec<AllowRule>,
}

impl AddressPolicy {
    /// Resolve `url`'s host and check every address. `Some((name, addresses))` for a host
    /// name (the client must connect to those addresses only), `None` for a literal IP
    /// (the client connects to it without resolving).
    async fn resolve(&self, url: &Url) -> Result<Option<(String, Vec<SocketAddr>)>, ToolError> {
        let port = url.port_or_known_default().unwrap_or(80);
        let refused = |why: String| ToolError::Failed(format!("refused {}: {why}", shown(url)));
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
                    .map_err(|e| ToolError::Failed(format!("cannot resolve {name:?}: {e}")))?
                    .collect();
                if addrs.is_empty() {
                    return Err(ToolError::Failed(format!("{name:?} has no address")));
                }
                // Every address, not just the first: the client may fall back to any of them.
                for addr in &addrs {
                    self.check(Some(name), addr.ip()).map_err(refused)?;
                }
                Ok(Some((name.to_string(), addrs)))
            }
            None => Err(ToolError::InvalidArguments("the URL has no host".into())),
        }
    }

    /// Whether `ip` (an address of `host` when it was resolved from a name) may be fetched.
    fn check(&self, host: Option<&str>, ip: IpAddr) -> Result<(), String> {
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
                        "{ip} is a {kind} address; only public addresses are fetched unless \
                         the operator allowlists the host in [tools.http_fetch] allow_hosts"
                    ))
                }
            }
        }
    }
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
    use std::time::Instant;

    use wiremock::matchers::{method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};

    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn policy(allow: &[&str]) -> AddressPolicy {
        AddressPolicy {
            rules: allow.iter().map(|a| a.parse().unwrap()).collect(),
        }
    }

    fn tool(allow: &[&str]) -> HttpFetch {
        HttpFetch::new(&HttpFetchSettings {
            allow_hosts: allow.iter().map(|a| a.to_string()).collect(),
            ..HttpFetchSettings::default()
        })
    }

    async fn fetch(tool: &HttpFetch, url: &str) -> Result<serde_json::Value, ToolError> {
        let out = tool.call(&json!({ "url": url })).await?;
        Ok(serde_json::from_str(&out).unwrap())
    }

    fn failed(result: Result<serde_json::Value, ToolError>) -> String {
        match result {
            Err(ToolError::Failed(text)) => text,
            other => panic!("expected a failure, got {other:?}"),
        }
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

    #[test]
    fn urls_must_be_plain_http_or_https() {
        for good in [
            "http://example.com/a?b=c",
            "https://example.com",
            "HTTPS://Example.com:8443/",
        ] {
            assert!(parse_arguments(&json!({ "url": good })).is_ok(), "{good}");
        }
        for (bad, why) in [
            ("ftp://example.com/", "scheme"),
            ("file:///etc/passwd", "scheme"),
            ("gopher://example.com/", "scheme"),
            ("javascript:alert(1)", "scheme"),
            ("data:text/plain,hi", "scheme"),
            ("/relative/path", "absolute"),
            ("example.com", "absolute"),
            ("http://user:hunter2@example.com/", "credentials"),
            ("http://user@example.com/", "credentials"),
        ] {
            match parse_arguments(&json!({ "url": bad })) {
                Err(ToolError::InvalidArguments(text)) => {
                    assert!(text.contains(why), "{bad}: {text}");
                    assert!(!text.contains("hunter2"), "{text}");
                }
                other => panic!("{bad}: {other:?}"),
            }
        }
    }

    #[test]
    fn only_a_url_is_accepted_so_only_get_exists() {
        for bad in [
            json!({}),
            json!({ "url": 5 }),
            json!("http://example.com"),
            json!({ "url": "http://example.com", "method": "POST" }),
            json!({ "url": "http://example.com", "headers": { "x": "y" } }),
            json!({ "url": "http://example.com", "body": "x" }),
        ] {
            assert!(
                matches!(parse_arguments(&bad), Err(ToolError::InvalidArguments(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn spec_is_builtin_and_needs_a_url() {
        let spec = tool(&[]).spec();
        assert_eq!(spec.name, "http_fetch");
        assert_eq!(spec.toolset, "builtin");
        assert_eq!(spec.parameters["required"], json!(["url"]));
        assert_eq!(spec.parameters["properties"]["url"]["type"], "string");
        assert!(spec.description.contains("256 KiB"), "{}", spec.description);
    }

    #[test]
    fn text_types_are_recognised_and_cut_characters_dropped() {
        for t in [
            "text/html; charset=utf-8",
            "TEXT/PLAIN",
            "application/json",
            "application/ld+json",
            "application/atom+xml",
        ] {
            assert!(is_text(t), "{t}");
        }
        for t in [
            "image/png",
            "application/octet-stream",
            "application/pdf",
            "",
            "text",
        ] {
            assert!(!is_text(t), "{t}");
        }
        let e_acute = "é".as_bytes();
        assert_eq!(decode(&[b'a', e_acute[0]], true), "a");
        assert_eq!(decode(&[b'a', 0xff, b'b'], true), "a\u{fffd}b");
        assert_eq!(decode(&[b'a', 0xff], true), "a\u{fffd}");
        assert_eq!(decode(&[b'a', e_acute[0]], false), "a\u{fffd}");
    }

    /// A server with `GET /page` answering `template`.
    async fn server_with(template: ResponseTemplate) -> MockServer {
        hermes_shared::install_crypto_provider();
        let server = MockServer::start().await;
        Mock::given(method("GET"))
            .and(path("/page"))
            .respond_with(template)
            .mount(&server)
            .await;
        server
    }

    #[tokio::test]
    async fn loopback_is_refused_by_default_and_fetched_when_allowlisted() {
        let server =
            server_with(ResponseTemplate::new(200).set_body_raw("hello", "text/plain")).await;
        let url = format!("{}/page", server.uri());

        let err = failed(fetch(&tool(&[]), &url).await);
        assert!(err.contains("loopback"), "{err}");
        assert!(
            server.received_requests().await.unwrap().is_empty(),
            "a refused URL is never connected to"
        );

        for allow in ["127.0.0.1/32", "127.0.0.1"] {
            let out = fetch(&tool(&[allow]), &url).await.unwrap();
            assert_eq!(out["status"], 200);
            assert_eq!(out["body"], "hello");
            assert_eq!(out["truncated"], false);
            assert_eq!(out["content_type"], "text/plain");
            assert_eq!(out["url"], url);
        }

        // By name: `localhost` resolves to loopback, refused unless the name is allowlisted.
        let by_name = url.replace("127.0.0.1", "localhost");
        let err = failed(fetch(&tool(&[]), &by_name).await);
        assert!(err.contains("loopback"), "{err}");
        let out = fetch(&tool(&["localhost"]), &by_name).await.unwrap();
        assert_eq!(out["body"], "hello");

        let methods: Vec<String> = server
            .received_requests()
            .await
            .unwrap()
            .iter()
            .map(|r| r.method.to_string())
            .collect();
        assert_eq!(methods, ["GET", "GET", "GET"]);
    }

    #[tokio::test]
    async fn the_body_is_cut_at_max_bytes() {
        let big = "x".repeat(100_000);
        let server = server_with(ResponseTemplate::new(200).set_body_raw(big, "text/plain")).await;
        let mut t = tool(&["127.0.0.1"]);
        t.max_bytes = 1000;
        let out = fetch(&t, &format!("{}/page", server.uri())).await.unwrap();
        assert_eq!(out["truncated"], true);
        assert_eq!(out["body"].as_str().unwrap().len(), 1000);

        // Exactly the limit is not truncated.
        t.max_bytes = 100_000;
        let out = fetch(&t, &format!("{}/page", server.uri())).await.unwrap();
        assert_eq!(out["truncated"], false);
        assert_eq!(out["body"].as_str().unwrap().len(), 100_000);
    }

    #[tokio::test]
    async fn a_slow_server_hits_the_time_limit() {
        let server = server_with(
            ResponseTemplate::new(200)
                .set_body_raw("late", "text/plain")
                .set_delay(Duration::from_secs(5)),
        )
        .await;
        let mut t = tool(&["127.0.0.1"]);
        t.timeout = Duration::from_millis(300);
        let started = Instant::now();
        let err = failed(fetch(&t, &format!("{}/page", server.uri())).await);
        assert!(err.contains("timed out"), "{err}");
        assert!(started.elapsed() < Duration::from_secs(3));
    }

    #[tokio::test]
    async fn redirects_are_followed_and_each_target_checked() {
        let server =
            server_with(ResponseTemplate::new(200).set_body_raw("landed", "text/plain")).await;
        let redirect = |to: &str| ResponseTemplate::new(302).insert_header("location", to);
        for (from, to) in [
            ("/hop", "/page".to_string()),
            (
                "/metadata",
                "http://169.254.169.254/latest/meta-data/".to_string(),
            ),
            ("/private", "http://10.0.0.1/".to_string()),
            ("/file", "file:///etc/passwd".to_string()),
            ("/creds", "http://user:hunter2@example.com/".to_string()),
            ("/loop", "/loop".to_string()),
        ] {
            Mock::given(method("GET"))
                .and(path(from))
                .respond_with(redirect(&to))
                .mount(&server)
                .await;
        }
        let t = tool(&["127.0.0.1"]);
        let base = server.uri();

        let out = fetch(&t, &format!("{base}/hop")).await.unwrap();
        assert_eq!(out["body"], "landed");
        assert_eq!(out["url"], format!("{base}/page"));

        for (from, why) in [
            ("/metadata", "link-local"),
            ("/private", "private"),
            ("/file", "scheme"),
            ("/creds", "credentials"),
            ("/loop", "more than 5 times"),
        ] {
            let err = failed(fetch(&t, &format!("{base}{from}")).await);
            assert!(err.contains(why), "{from}: {err}");
            assert!(!err.contains("hunter2"), "{err}");
        }

        // A host allowlisted by name does not extend to where it redirects.
        Mock::given(method("GET"))
            .and(path("/to-literal"))
            .respond_with(redirect(&format!("{base}/page")))
            .mount(&server)
            .await;
        let by_name = tool(&["localhost"]);
        let err = failed(
            fetch(
                &by_name,
                &format!("{}/to-literal", base.replace("127.0.0.1", "localhost")),
            )
            .await,
        );
        assert!(err.contains("loopback"), "{err}");

        let mut no_redirects = tool(&["127.0.0.1"]);
        no_redirects.max_redirects = 0;
        let err = failed(fetch(&no_redirects, &format!("{base}/hop")).await);
        assert!(err.contains("more than 0 times"), "{err}");
    }

    #[tokio::test]
    async fn binary_content_is_refused() {
        for mime in ["image/png", "application/octet-stream"] {
            let server = server_with(
                ResponseTemplate::new(200).set_body_raw(vec![0x89, b'P', b'N', b'G', 0], mime),
            )
            .await;
            let err = failed(fetch(&tool(&["127.0.0.1"]), &format!("{}/page", server.uri())).await);
            assert!(err.contains(mime) && err.contains("not text"), "{err}");
        }
    }

    #[tokio::test]
    async fn error_statuses_are_returned_to_the_model() {
        let server =
            server_with(ResponseTemplate::new(404).set_body_raw("{\"e\":1}", "application/json"))
                .await;
        let out = fetch(&tool(&["127.0.0.1"]), &format!("{}/page", server.uri()))
            .await
            .unwrap();
        assert_eq!(out["status"], 404);
        assert_eq!(out["body"], "{\"e\":1}");
    }
}
