//! The kinds of value a variable holds: how its text is parsed (with the problem texts
//! operators see) and how the result is shown by `hermes doctor`. Kinds holding a
//! credential show it masked.

use std::fmt::Display;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};
use url::Url;

use super::Kind;
use crate::discord_gateway::GatewayCompression;
use crate::{AllowRule, BackendKind, LogFormat, Namespace, Price, mask_url};

/// How a set secret is shown.
const MASKED: &str = "******** (set)";

fn masked(_: &SecretString) -> String {
    MASKED.into()
}

fn display<T: Display>(v: &T) -> String {
    v.to_string()
}

fn from_str<T: FromStr>(name: &str, value: &str) -> Result<T, Vec<String>>
where
    T::Err: Display,
{
    value
        .parse()
        .map_err(|e| vec![format!("{name}={value:?} is invalid: {e}")])
}

fn join<T>(items: &[T], each: impl Fn(&T) -> String) -> String {
    items.iter().map(each).collect::<Vec<_>>().join(",")
}

/// A connection URL with one of `schemes`; it may carry a password, so it shows masked.
fn url_of(name: &str, value: &str, schemes: &[&str]) -> Result<SecretString, Vec<String>> {
    match Url::parse(value) {
        Ok(u) if schemes.contains(&u.scheme()) => Ok(SecretString::from(value.to_string())),
        Ok(u) => Err(vec![format!(
            "{name} has scheme {:?}; expected {}",
            u.scheme(),
            schemes.join(" or ")
        )]),
        Err(e) => Err(vec![format!(
            "{name} is not a URL ({e}): {}",
            mask_url(value)
        )]),
    }
}

fn show_url(u: &SecretString) -> String {
    mask_url(u.expose_secret())
}

/// A PostgreSQL URL.
pub(crate) const POSTGRES_URL: Kind<SecretString> = Kind {
    parse: |n, v| url_of(n, v, &["postgres", "postgresql"]),
    show: show_url,
};

/// A RabbitMQ URL.
pub(crate) const AMQP_URL: Kind<SecretString> = Kind {
    parse: |n, v| url_of(n, v, &["amqp", "amqps"]),
    show: show_url,
};

/// A Redis URL.
pub(crate) const REDIS_URL: Kind<SecretString> = Kind {
    parse: |n, v| url_of(n, v, &["redis", "rediss"]),
    show: show_url,
};

/// An http(s) URL that is not secret (base URLs of providers and channels).
pub(crate) const HTTP_URL: Kind<Url> = Kind {
    parse: |name, value| match Url::parse(value) {
        Ok(u) if matches!(u.scheme(), "http" | "https") => Ok(u),
        _ => Err(vec![format!("{name} must be an http(s) URL")]),
    },
    show: display,
};

/// A WebSocket URL (`ws://` or `wss://`; the Discord Gateway's).
pub(crate) const WS_URL: Kind<Url> = Kind {
    parse: |name, value| match Url::parse(value) {
        Ok(u) if matches!(u.scheme(), "ws" | "wss") => Ok(u),
        _ => Err(vec![format!("{name} must be a ws(s) URL")]),
    },
    show: display,
};

/// An http(s) URL that is itself a credential (an incoming-webhook URL).
pub(crate) const SECRET_HTTP_URL: Kind<SecretString> = Kind {
    parse: |name, value| match Url::parse(value) {
        Ok(u) if matches!(u.scheme(), "http" | "https") => {
            Ok(SecretString::from(value.to_string()))
        }
        _ => Err(vec![format!("{name} must be an http(s) URL")]),
    },
    show: masked,
};

/// A secret of any form.
pub(crate) const SECRET: Kind<SecretString> = Kind {
    parse: |_, value| Ok(SecretString::from(value.to_string())),
    show: masked,
};

/// A key callers present: at least 16 characters, so it cannot be guessed by trying.
pub(crate) const STRONG_KEY: Kind<SecretString> = Kind {
    parse: |name, value| {
        if value.chars().count() < 16 {
            Err(vec![format!("{name} is shorter than 16 characters")])
        } else {
            Ok(SecretString::from(value.to_string()))
        }
    },
    show: masked,
};

/// Comma-separated Fernet keys, newest first. A malformed key is named by its position,
/// never by its value.
pub(crate) const FERNET_KEYS: Kind<Vec<SecretString>> = Kind {
    parse: |name, value| {
        let mut keys = Vec::new();
        let mut problems = Vec::new();
        for (i, key) in value.split(',').map(str::trim).enumerate() {
            if fernet::Fernet::new(key).is_none() {
                problems.push(format!(
                    "{name}: key {} is not a Fernet key (32 bytes, URL-safe base64)",
                    i + 1
                ));
            } else {
                keys.push(SecretString::from(key.to_string()));
            }
        }
        if problems.is_empty() {
            Ok(keys)
        } else {
            Err(problems)
        }
    },
    show: |keys| {
        let n = keys.len();
        format!("******** ({n} key{})", if n == 1 { "" } else { "s" })
    },
};

/// Comma-separated secrets, any of which is accepted (rotation lists the new beside the
/// old); blanks between commas are skipped. Shown as a count, never a value.
pub(crate) const SECRET_LIST: Kind<Vec<SecretString>> = Kind {
    parse: |name, value| {
        let secrets: Vec<SecretString> = value
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| SecretString::from(s.to_string()))
            .collect();
        if secrets.is_empty() {
            Err(vec![format!("{name} lists no secret")])
        } else {
            Ok(secrets)
        }
    },
    show: |secrets| {
        let n = secrets.len();
        format!("******** ({n} secret{})", if n == 1 { "" } else { "s" })
    },
};

/// `true` or `false`.
pub(crate) const BOOL: Kind<bool> = Kind {
    parse: |name, value| match value.to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" => Ok(true),
        "false" | "0" | "no" => Ok(false),
        _ => Err(vec![format!("{name}={value:?} must be true or false")]),
    },
    show: display,
};

/// A subscription tier: `free`, `starter`, `pro` or `venue-growth`.
pub(crate) const TIER: Kind<hermes_types::model::Tier> = Kind {
    parse: from_str,
    show: |t| t.as_str().to_string(),
};

/// An absolute URL path to mount a route on: starts with `/`, no parameters, query or
/// fragment, and not under a prefix the API owns.
pub(crate) const ROUTE_PATH: Kind<String> = Kind {
    parse: |name, value| {
        let plain = value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/-_.".contains(&b));
        let reserved = ["/v1/", "/api/", "/webhooks/", "/health", "/openapi.json"]
            .iter()
            .any(|p| value.starts_with(p));
        if value.len() > 1 && value.starts_with('/') && !value.ends_with('/') && plain && !reserved
        {
            Ok(value.to_string())
        } else {
            Err(vec![format!(
                "{name}={value:?} must be a path such as /agents/forge (letters, digits, '/', '-', '_', '.'; not under /v1/, /api/, /webhooks/ or /health)"
            )])
        }
    },
    show: Clone::clone,
};

/// Free text that is not secret.
pub(crate) const TEXT: Kind<String> = Kind {
    parse: |_, value| Ok(value.to_string()),
    show: Clone::clone,
};

/// A filesystem path.
pub(crate) const PATH: Kind<PathBuf> = Kind {
    parse: |_, value| Ok(PathBuf::from(value)),
    show: |p| p.display().to_string(),
};

/// An address to listen on.
pub(crate) const SOCKET_ADDR: Kind<SocketAddr> = Kind {
    parse: from_str,
    show: display,
};

/// An IP address to listen on (`127.0.0.1`, `0.0.0.0`, `::`).
pub(crate) const IP_ADDR: Kind<IpAddr> = Kind {
    parse: from_str,
    show: display,
};

/// The namespace (its parser names the variable itself).
pub(crate) const NAMESPACE: Kind<Namespace> = Kind {
    parse: |_, value| Namespace::parse(value).map_err(|e| vec![e]),
    show: display,
};

/// `json` or `text`.
pub(crate) const LOG_FORMAT: Kind<LogFormat> = Kind {
    parse: |name, value| match value {
        "json" => Ok(LogFormat::Json),
        "text" => Ok(LogFormat::Text),
        other => Err(vec![format!("{name}={other:?} must be json or text")]),
    },
    show: |f| format!("{f:?}").to_lowercase(),
};

/// `zlib-stream` or `none`.
pub(crate) const GATEWAY_COMPRESSION: Kind<GatewayCompression> = Kind {
    parse: |name, value| match value {
        "zlib-stream" => Ok(GatewayCompression::ZlibStream),
        "none" => Ok(GatewayCompression::None),
        other => Err(vec![format!(
            "{name}={other:?} must be zlib-stream or none"
        )]),
    },
    show: |c| c.as_str().to_string(),
};

/// A model backend by name.
pub(crate) const BACKEND: Kind<BackendKind> = Kind {
    parse: |name, value| {
        value
            .parse::<BackendKind>()
            .map_err(|e| vec![format!("{name}: {e}")])
    },
    show: display,
};

/// Dollars as an exact decimal, kept in micro-dollars.
pub(crate) const DOLLARS: Kind<u64> = Kind {
    parse: |name, value| {
        Price::parse(value)
            .map(|p| p.0)
            .map_err(|e| vec![format!("{name}: {e}")])
    },
    show: |m| format!("{}.{:06}", m / 1_000_000, m % 1_000_000),
};

/// A whole number, raised to `MIN` when below it (a zero there would stall the fleet).
fn at_least<T, const MIN: u64>(name: &str, value: &str) -> Result<T, Vec<String>>
where
    T: FromStr + TryFrom<u64> + Ord,
    T::Err: Display,
{
    let n = from_str::<T>(name, value)?;
    Ok(match T::try_from(MIN) {
        Ok(min) => n.max(min),
        Err(_) => n,
    })
}

/// A whole number parsed by `parse`, shown as written.
const fn whole<T: Display>(parse: fn(&str, &str) -> Result<T, Vec<String>>) -> Kind<T> {
    Kind {
        parse,
        show: display::<T>,
    }
}

/// Any `u32`.
pub(crate) const U32: Kind<u32> = whole(from_str);
/// A `u32` of at least 1.
pub(crate) const U32_POSITIVE: Kind<u32> = whole(at_least::<u32, 1>);
/// An AMQP frame size in bytes, raised to the protocol's minimum frame of 4096.
pub(crate) const AMQP_FRAME: Kind<u32> = whole(at_least::<u32, 4096>);
/// A TCP port (`0`: any free one).
pub(crate) const PORT: Kind<u16> = whole(from_str);
/// A `u16` of at least 1.
pub(crate) const U16_POSITIVE: Kind<u16> = whole(at_least::<u16, 1>);
/// Any `u64`.
pub(crate) const U64: Kind<u64> = whole(from_str);
/// Any `usize`.
pub(crate) const COUNT: Kind<usize> = whole(from_str);
/// A `usize` of at least 1.
pub(crate) const COUNT_POSITIVE: Kind<usize> = whole(at_least::<usize, 1>);
/// A `usize` of at least 2 (a pool that a listener and a worker share).
pub(crate) const COUNT_TWO_OR_MORE: Kind<usize> = whole(at_least::<usize, 2>);

fn show_secs(d: &Duration) -> String {
    d.as_secs().to_string()
}

/// Whole seconds.
pub(crate) const SECS: Kind<Duration> = Kind {
    parse: |name, value| from_str::<u64>(name, value).map(Duration::from_secs),
    show: show_secs,
};

/// Whole seconds, raised to 1 when 0.
pub(crate) const SECS_POSITIVE: Kind<Duration> = Kind {
    parse: |name, value| at_least::<u64, 1>(name, value).map(Duration::from_secs),
    show: show_secs,
};

/// Whole seconds above 0, refused when 0.
pub(crate) const SECS_ABOVE_ZERO: Kind<Duration> = Kind {
    parse: |name, value| match value.parse::<u64>() {
        Ok(s) if s > 0 => Ok(Duration::from_secs(s)),
        _ => Err(vec![format!(
            "{name}={value:?} must be a positive number of seconds"
        )]),
    },
    show: show_secs,
};

/// Comma-separated positive whole seconds, e.g. `60,300,1500`.
pub(crate) const SECS_LIST: Kind<Vec<Duration>> = Kind {
    parse: |name, value| {
        value
            .split(',')
            .map(|s| match s.trim().parse::<u64>() {
                Ok(n) if n > 0 => Ok(Duration::from_secs(n)),
                _ => Err(()),
            })
            .collect::<Result<Vec<_>, ()>>()
            .map_err(|()| {
                vec![format!(
                    "{name}={value:?} must be comma-separated positive seconds, e.g. 60,300,1500"
                )]
            })
    },
    show: |d| join(d, |d| d.as_secs().to_string()),
};

/// One positive duration with a unit (`90s`, `10m`, `2h`; a bare number is seconds).
pub(crate) const DURATION: Kind<Duration> = Kind {
    parse: |name, value| match hermes_types::duration::parse_duration(value) {
        Ok(d) if !d.is_zero() => Ok(d),
        Ok(_) => Err(vec![format!("{name}={value:?} must be above 0")]),
        Err(e) => Err(vec![format!(
            "{name}: {e}; expected a duration such as 90s, 10m or 2h"
        )]),
    },
    show: |d| hermes_types::duration::duration_label(*d),
};

/// Comma-separated durations with units (`1m,5m`; bare numbers are seconds), or `none` for
/// the empty list.
pub(crate) const DURATION_LIST: Kind<Vec<Duration>> = Kind {
    parse: |name, value| {
        if value.eq_ignore_ascii_case("none") {
            return Ok(Vec::new());
        }
        hermes_types::duration::parse_durations(value).map_err(|e| {
            vec![format!(
                "{name}: {e}; expected comma-separated durations such as 1m,5m, or none"
            )]
        })
    },
    show: |d| {
        if d.is_empty() {
            "none".into()
        } else {
            join(d, |d| hermes_types::duration::duration_label(*d))
        }
    },
};

/// Whole milliseconds (0 allowed).
pub(crate) const MILLIS: Kind<Duration> = Kind {
    parse: |name, value| from_str::<u64>(name, value).map(Duration::from_millis),
    show: |d| d.as_millis().to_string(),
};

/// Comma-separated milliseconds, e.g. `1000,3000,9000`.
pub(crate) const MILLIS_LIST: Kind<Vec<Duration>> = Kind {
    parse: |name, value| {
        value
            .split(',')
            .map(|s| s.trim().parse::<u64>().map(Duration::from_millis))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| {
                vec![format!(
                    "{name}={value:?} must be comma-separated milliseconds, e.g. 1000,3000,9000"
                )]
            })
    },
    show: |d| join(d, |d| d.as_millis().to_string()),
};

/// A finite number above 0.
pub(crate) const POSITIVE_RATE: Kind<f64> = Kind {
    parse: |name, value| match from_str::<f64>(name, value)? {
        v if v > 0.0 && v.is_finite() => Ok(v),
        v => Err(vec![format!("{name}={v} must be a positive number")]),
    },
    show: display,
};

/// An HTTP header name, lower-cased.
pub(crate) const HEADER_NAME: Kind<String> = Kind {
    parse: |name, value| {
        let header = value.to_ascii_lowercase();
        if header
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            Ok(header)
        } else {
            Err(vec![format!("{name} is not a valid header name")])
        }
    },
    show: Clone::clone,
};

/// Comma-separated host names or CIDR ranges; blanks between commas are skipped.
pub(crate) const ALLOW_LIST: Kind<Vec<AllowRule>> = Kind {
    parse: |name, value| {
        let mut rules = Vec::new();
        let mut problems = Vec::new();
        for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            match entry.parse::<AllowRule>() {
                Ok(rule) => rules.push(rule),
                Err(e) => problems.push(format!("{name}: {e}")),
            }
        }
        if problems.is_empty() {
            Ok(rules)
        } else {
            Err(problems)
        }
    },
    show: |rules| join(rules, ToString::to_string),
};

/// Comma-separated browser origins (`scheme://host[:port]`, no path), compared exactly as
/// browsers send them in `Origin`; blanks between commas are skipped.
pub(crate) const ORIGIN_LIST: Kind<Vec<String>> = Kind {
    parse: |name, value| {
        let mut origins = Vec::new();
        let mut problems = Vec::new();
        for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            match Url::parse(entry) {
                Ok(u)
                    if matches!(u.scheme(), "http" | "https")
                        && u.host_str().is_some()
                        && u.path() == "/"
                        && !entry.ends_with('/')
                        && u.query().is_none()
                        && u.username().is_empty() =>
                {
                    // `Url` lower-cases the host and drops a default port, as browsers do.
                    origins.push(u.origin().ascii_serialization())
                }
                _ => problems.push(format!(
                    "{name}: {entry:?} is not an origin such as https://app.example or http://localhost:3000"
                )),
            }
        }
        if problems.is_empty() {
            Ok(origins)
        } else {
            Err(problems)
        }
    },
    show: |origins| origins.join(","),
};

/// One of a fixed set of words.
pub(crate) fn one_of(
    name: &str,
    value: &str,
    words: &[&'static str],
) -> Result<&'static str, Vec<String>> {
    words
        .iter()
        .find(|w| **w == value)
        .copied()
        .ok_or_else(|| vec![format!("{name}={value:?} must be {}", words.join(" or "))])
}

/// `360dialog` or `cloud`.
pub(crate) const WHATSAPP_API: Kind<&'static str> = Kind {
    parse: |name, value| one_of(name, value, &["360dialog", "cloud"]),
    show: |w| w.to_string(),
};

/// `wait` or `fallback` (docs/agents.md, "BUSY pauses the dispatcher").
pub(crate) const PAUSED_ASSIGNMENTS: Kind<crate::PausedAssignments> = Kind {
    parse: |name, value| value.parse().map_err(|e| vec![format!("{name}: {e}")]),
    show: display,
};

/// The shortest HS256 secret a JWT bearer may be signed with (RFC 7518 §3.2 asks for at
/// least the hash's 256 bits).
const MIN_JWT_SECRET_CHARS: usize = 32;

/// Comma-separated `kid:alg:key` entries verifying JWT bearers; a bad entry is named by its
/// position, never by its key. Shown as a list of `kid:alg`, never a key.
pub(crate) const JWT_KEYS: Kind<Vec<crate::JwtKey>> = Kind {
    parse: |name, value| {
        let mut keys: Vec<crate::JwtKey> = Vec::new();
        let mut problems = Vec::new();
        for (i, entry) in value.split(',').map(str::trim).enumerate() {
            let n = i + 1;
            let mut parts = entry.splitn(3, ':');
            let (Some(kid), Some(alg), Some(key)) = (parts.next(), parts.next(), parts.next())
            else {
                problems.push(format!("{name}: entry {n} is not kid:alg:key"));
                continue;
            };
            let alg = match alg.parse::<crate::JwtAlg>() {
                Ok(a) => a,
                Err(e) => {
                    problems.push(format!("{name}: entry {n}: {e}"));
                    continue;
                }
            };
            let key_ok = match alg {
                crate::JwtAlg::Hs256 => key.chars().count() >= MIN_JWT_SECRET_CHARS,
                // 32 bytes in unpadded base64url.
                crate::JwtAlg::EdDsa => {
                    key.len() == 43
                        && key
                            .bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
                }
            };
            if kid.is_empty() || !key_ok {
                problems.push(format!(
                    "{name}: entry {n} needs a kid and, for {}, {}",
                    alg.as_str(),
                    match alg {
                        crate::JwtAlg::Hs256 => "a secret of at least 32 characters",
                        crate::JwtAlg::EdDsa =>
                            "an Ed25519 public key as base64url (43 characters)",
                    }
                ));
                continue;
            }
            if keys.iter().any(|k| k.kid == kid) {
                problems.push(format!("{name}: kid {kid:?} is listed twice"));
                continue;
            }
            keys.push(crate::JwtKey {
                kid: kid.to_string(),
                alg,
                key: SecretString::from(key.to_string()),
            });
        }
        if problems.is_empty() {
            Ok(keys)
        } else {
            Err(problems)
        }
    },
    show: |keys| {
        let listed = join(keys, |k| format!("{}:{}", k.kid, k.alg.as_str()));
        format!("{listed} (keys ********)")
    },
};
