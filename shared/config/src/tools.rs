//! The tools stage's settings, one struct whatever the source: the limits and the operator
//! allowlist of the built-in `http_fetch` tool, and which built-in tools or whole toolsets
//! wait for an operator's approval (docs/operator-mcp.md, approvals), from `[tools]` in the
//! TOML file; how long approvals wait and readiness waits for MCP servers, from the
//! environment.
//!
//! The allowlist parser lives here rather than in the tools crate so that a bad entry is
//! reported at start with every other configuration problem, and the tool matches with the
//! exact same rules that validation accepted.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;
use std::time::Duration;

use serde::Deserialize;

use crate::env;

/// Everything the tools stage reads (`ctx.config.tools`). The fields without
/// `#[serde(skip)]` are `[tools]` in the TOML file; the skipped ones come from the
/// environment (`crate::env::tools`, `crate::env::approvals`) and are set by
/// `Config::from_lookup`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ToolsSettings {
    /// `[tools.http_fetch]`.
    pub http_fetch: HttpFetchSettings,
    /// Built-in tools (`http_fetch`) and whole toolsets (`builtin`, `mcp-<server>`) whose
    /// calls wait for an operator's approval before they run. An MCP server's own tools
    /// are named in its `[mcp_servers.<name>]` table instead.
    pub require_approval: Vec<String>,
    /// `HERMES_TOOLS_READY_TIMEOUT`: how long the tools stage's readiness waits for its MCP
    /// servers' first discovery.
    #[serde(skip)]
    pub ready_timeout: Duration,
    /// Tool calls waiting for an operator.
    #[serde(skip)]
    pub approvals: ApprovalSettings,
}

impl Default for ToolsSettings {
    fn default() -> Self {
        Self {
            http_fetch: HttpFetchSettings::default(),
            require_approval: Vec::new(),
            ready_timeout: env::tools::HERMES_TOOLS_READY_TIMEOUT.unset_value(),
            approvals: ApprovalSettings {
                timeout: env::approvals::HERMES_APPROVAL_TIMEOUT.unset_value(),
                sweep_every: env::approvals::HERMES_APPROVAL_SWEEP_SECS.unset_value(),
            },
        }
    }
}

/// Tool calls that wait for an operator (docs/operator-mcp.md, approvals).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApprovalSettings {
    /// How long a call waits before it is denied as timed out (`HERMES_APPROVAL_TIMEOUT`).
    pub timeout: Duration,
    /// How often the tools service times out calls and updates the gauges.
    pub sweep_every: Duration,
}

impl ToolsSettings {
    /// Append one line per problem to `problems`; `servers` are the configured MCP
    /// servers, the only `mcp-<server>` toolsets `require_approval` may name.
    pub fn validate(&self, servers: &[&str], problems: &mut Vec<String>) {
        self.http_fetch.validate(problems);
        for entry in &self.require_approval {
            if entry.trim().is_empty() {
                problems.push("tools.require_approval: an entry is empty".into());
            } else if entry.starts_with("mcp_") {
                problems.push(format!(
                    "tools.require_approval: {entry:?} looks like an MCP tool; name it in [mcp_servers.<server>] requires_approval or tools.require_approval"
                ));
            } else if let Some(server) = entry.strip_prefix("mcp-")
                && !servers.contains(&server)
            {
                problems.push(format!(
                    "tools.require_approval: {entry:?} names no configured MCP server"
                ));
            }
        }
    }
}

/// `[tools.http_fetch]`: limits of the `http_fetch` tool and the hosts it may reach although
/// they are not public.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HttpFetchSettings {
    /// Exact host names (`wiki.internal`) or IP ranges in CIDR form (`10.1.0.0/16`, a bare
    /// address meaning one host) that may be fetched even though they resolve to loopback,
    /// private, link-local or otherwise non-public addresses.
    pub allow_hosts: Vec<String>,
    /// Bytes of response body kept; the rest is not read and the result says `truncated`.
    pub max_bytes: usize,
    /// Deadline of one whole fetch: resolution, connection, every redirect and the body.
    pub timeout_secs: u64,
    /// Redirects followed before giving up (0: none is followed).
    pub max_redirects: u32,
}

impl Default for HttpFetchSettings {
    fn default() -> Self {
        Self {
            allow_hosts: Vec::new(),
            max_bytes: 256 * 1024,
            timeout_secs: 10,
            max_redirects: 5,
        }
    }
}

impl HttpFetchSettings {
    /// The deadline of one fetch.
    pub fn timeout(&self) -> Duration {
        Duration::from_secs(self.timeout_secs)
    }

    /// The parsed allowlist; entries that do not parse are left out (validation has already
    /// reported them, and leaving them out can only refuse more, never allow more).
    pub fn allow_rules(&self) -> Vec<AllowRule> {
        self.allow_hosts
            .iter()
            .filter_map(|entry| entry.parse().ok())
            .collect()
    }

    fn validate(&self, problems: &mut Vec<String>) {
        for entry in &self.allow_hosts {
            if let Err(e) = entry.parse::<AllowRule>() {
                problems.push(format!("tools.http_fetch.allow_hosts: {e}"));
            }
        }
        if self.max_bytes == 0 {
            problems.push("tools.http_fetch.max_bytes must be above 0".into());
        }
        if self.timeout_secs == 0 {
            problems.push("tools.http_fetch.timeout_secs must be above 0".into());
        }
    }
}

/// One entry of `allow_hosts`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AllowRule {
    /// An exact host name, lower case, without a trailing dot. It does not cover subdomains.
    Host(String),
    /// Every address of a range.
    Net(Cidr),
}

impl AllowRule {
    /// Whether this rule names `host` (a host name as it appears in a URL).
    pub fn matches_host(&self, host: &str) -> bool {
        match self {
            AllowRule::Host(name) => *name == normalize_host(host),
            AllowRule::Net(_) => false,
        }
    }

    /// Whether this rule covers `ip`.
    pub fn matches_ip(&self, ip: IpAddr) -> bool {
        match self {
            AllowRule::Host(_) => false,
            AllowRule::Net(net) => net.contains(ip),
        }
    }
}

impl FromStr for AllowRule {
    type Err = String;

    /// An entry with a `/` or that is an IP address is a range; anything else must be a DNS
    /// host name (so `host:port` or a URL is refused rather than silently never matching).
    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim();
        if s.contains('/') || s.parse::<IpAddr>().is_ok() {
            return s.parse().map(AllowRule::Net);
        }
        let name = normalize_host(s);
        let valid = !name.is_empty()
            && name.split('.').all(|label| {
                !label.is_empty()
                    && label.len() <= 63
                    && label
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            });
        if valid {
            Ok(AllowRule::Host(name))
        } else {
            Err(format!("{s:?} is neither a host name nor a CIDR range"))
        }
    }
}

/// URL hosts compare case-insensitively and `example.com.` is `example.com`.
fn normalize_host(host: &str) -> String {
    host.trim_end_matches('.').to_ascii_lowercase()
}

/// An IP range such as `10.0.0.0/8` or `fd00::/8`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cidr {
    network: IpAddr,
    prefix: u8,
}

impl Cidr {
    /// Whether `ip` is in this range. Addresses of the other family never are: an
    /// IPv4-mapped IPv6 address is the caller's to convert (`IpAddr::to_canonical`).
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.network, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = mask_u32(self.prefix);
                u32::from(ip) & mask == u32::from(net)
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = mask_u128(self.prefix);
                u128::from(ip) & mask == u128::from(net)
            }
            _ => false,
        }
    }
}

fn mask_u32(prefix: u8) -> u32 {
    // `checked_shl` because shifting a u32 by 32 overflows: /0 is the empty mask.
    u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0)
}

fn mask_u128(prefix: u8) -> u128 {
    u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0)
}

impl FromStr for Cidr {
    type Err = String;

    /// `addr/prefix`, or a bare address (a single host). Host bits set below the prefix are
    /// refused: `10.0.0.1/8` is more likely a typo than a wish to allow all of 10/8.
    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim();
        let bad = || format!("{s:?} is not a CIDR range such as \"10.0.0.0/8\"");
        let (addr, prefix) = match s.split_once('/') {
            Some((addr, prefix)) => (addr, Some(prefix)),
            None => (s, None),
        };
        let network: IpAddr = addr.parse().map_err(|_| bad())?;
        let max = if network.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => max,
            Some(p) if !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()) => {
                p.parse::<u8>().map_err(|_| bad())?
            }
            Some(_) => return Err(bad()),
        };
        if prefix > max {
            return Err(bad());
        }
        let cidr = Cidr { network, prefix };
        if !cidr.contains(network) {
            return Err(format!(
                "{s:?} has bits set below its /{prefix} prefix; write the network address"
            ));
        }
        Ok(cidr)
    }
}

impl fmt::Display for AllowRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AllowRule::Host(name) => f.write_str(name),
            AllowRule::Net(cidr) => cidr.fmt(f),
        }
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn cidrs_parse_and_match() {
        let net: Cidr = "10.0.0.0/8".parse().unwrap();
        assert!(net.contains(ip("10.255.1.2")));
        assert!(!net.contains(ip("11.0.0.1")));
        assert!(!net.contains(ip("::ffff:10.0.0.1")), "families never mix");
        let one: Cidr = "127.0.0.1".parse().unwrap();
        assert_eq!(one.to_string(), "127.0.0.1/32");
        assert!(one.contains(ip("127.0.0.1")));
        assert!(!one.contains(ip("127.0.0.2")));
        let all: Cidr = "0.0.0.0/0".parse().unwrap();
        assert!(all.contains(ip("203.0.113.9")));
        let v6: Cidr = "fd00::/8".parse().unwrap();
        assert!(v6.contains(ip("fd12::1")));
        assert!(!v6.contains(ip("fe80::1")));
        let all6: Cidr = "::/0".parse().unwrap();
        assert!(all6.contains(ip("2001:db8::1")));
    }

    #[test]
    fn bad_cidrs_are_refused() {
        for bad in [
            "10.0.0.0/33",
            "::/129",
            "10.0.0.0/",
            "10.0.0.0/+8",
            "10.0.0/8",
            "10.0.0.1/8",
            "nope/8",
        ] {
            assert!(bad.parse::<Cidr>().is_err(), "{bad}");
        }
    }

    #[test]
    fn allow_rules_are_hosts_or_ranges() {
        assert_eq!(
            "Wiki.Internal.".parse::<AllowRule>().unwrap(),
            AllowRule::Host("wiki.internal".into())
        );
        assert!(matches!(
            "192.168.0.0/16".parse::<AllowRule>().unwrap(),
            AllowRule::Net(_)
        ));
        assert!(matches!(
            "::1".parse::<AllowRule>().unwrap(),
            AllowRule::Net(_)
        ));
        for bad in ["", "host:8080", "http://host", "a..b", "sp ace"] {
            assert!(bad.parse::<AllowRule>().is_err(), "{bad:?}");
        }
        let rule: AllowRule = "wiki.internal".parse().unwrap();
        assert!(rule.matches_host("WIKI.internal."));
        assert!(!rule.matches_host("x.wiki.internal"));
        assert!(!rule.matches_ip(ip("10.0.0.1")));
    }

    #[test]
    fn validation_reports_bad_entries_and_zero_limits() {
        let mut problems = Vec::new();
        ToolsSettings::default().validate(&[], &mut problems);
        assert!(problems.is_empty(), "{problems:?}");
        let settings = ToolsSettings {
            http_fetch: HttpFetchSettings {
                allow_hosts: vec!["10.0.0.0/8".into(), "10.0.0.0/99".into(), "a b".into()],
                max_bytes: 0,
                timeout_secs: 0,
                max_redirects: 0,
            },
            require_approval: vec!["mcp-github".into(), "mcp-gone".into(), "mcp_x_y".into()],
            ..ToolsSettings::default()
        };
        settings.validate(&["github"], &mut problems);
        assert_eq!(problems.len(), 6, "{problems:?}");
        assert!(
            problems
                .iter()
                .any(|p| p.contains("\"mcp-gone\" names no configured MCP server"))
        );
        assert_eq!(settings.http_fetch.allow_rules().len(), 1);
    }

    #[test]
    fn parses_from_toml_with_defaults() {
        let s: ToolsSettings =
            toml::from_str("[http_fetch]\nallow_hosts = [\"wiki.internal\", \"10.1.0.0/16\"]\n")
                .unwrap();
        assert_eq!(s.http_fetch.allow_rules().len(), 2);
        assert_eq!(s.http_fetch.max_bytes, 256 * 1024);
        assert_eq!(s.http_fetch.timeout(), Duration::from_secs(10));
        assert_eq!(s.http_fetch.max_redirects, 5);
        assert!(toml::from_str::<ToolsSettings>("[http_fetch]\nmethod = \"POST\"\n").is_err());
        let s: ToolsSettings =
            toml::from_str("require_approval = [\"http_fetch\", \"mcp-github\"]\n").unwrap();
        assert_eq!(s.require_approval, ["http_fetch", "mcp-github"]);
    }
}
