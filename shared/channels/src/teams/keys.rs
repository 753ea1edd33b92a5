//! The keys that sign the Bot Framework's tokens: a JWKS document
//! (<https://learn.microsoft.com/en-us/azure/bot-service/rest-api/bot-framework-rest-connector-authentication#step-2-get-the-list-of-valid-signing-keys>),
//! RSA keys by `kid`, each with the channels it is endorsed for.
//!
//! Microsoft rolls its keys, so [`Keys`] is read again while the process runs: a URL daily
//! (and sooner when a token names a key it does not hold, at most every five minutes), a
//! file when it changes. Until the first read succeeds every request is refused, which the
//! Connector retries.

use std::sync::{Arc, RwLock, Weak};
use std::time::{Duration, Instant, SystemTime};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hermes_config::KeySource;
use serde::Deserialize;
use tokio::sync::Notify;

/// How often a URL's keys are read again (Microsoft: "at least once every 24 hours").
const URL_EVERY: Duration = Duration::from_secs(24 * 60 * 60);
/// How often a file is looked at for a change.
const FILE_EVERY: Duration = Duration::from_secs(60);
/// The soonest a read is made again when a token names an unknown key, or after a failure.
const SOONEST: Duration = Duration::from_secs(5 * 60);
/// The largest JWKS document read.
const MAX_DOCUMENT_BYTES: usize = 256 * 1024;
/// The most keys kept from one document.
const MAX_KEYS: usize = 64;

/// One RSA signing key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RsaKey {
    pub kid: String,
    /// The modulus and exponent, big-endian.
    pub n: Vec<u8>,
    pub e: Vec<u8>,
    /// The channels (`msteams`, …) it signs for; empty: any.
    pub endorsements: Vec<String>,
}

#[derive(Deserialize)]
struct RawDocument {
    #[serde(default)]
    keys: Vec<serde_json::Value>,
}

#[derive(Deserialize)]
struct RawKey {
    kty: String,
    kid: String,
    n: String,
    e: String,
    #[serde(default)]
    endorsements: Vec<String>,
}

/// The RSA keys of a JWKS document; other kinds of keys and unreadable entries are left
/// out. `None` when it is not a JWKS document or names no RSA key.
pub fn read_document(bytes: &[u8]) -> Option<Vec<RsaKey>> {
    if bytes.len() > MAX_DOCUMENT_BYTES {
        return None;
    }
    let doc: RawDocument = serde_json::from_slice(bytes).ok()?;
    let keys: Vec<RsaKey> = doc
        .keys
        .into_iter()
        .filter_map(|k| serde_json::from_value::<RawKey>(k).ok())
        .filter(|k| k.kty == "RSA")
        .filter_map(|k| {
            Some(RsaKey {
                n: URL_SAFE_NO_PAD.decode(k.n.trim_end_matches('=')).ok()?,
                e: URL_SAFE_NO_PAD.decode(k.e.trim_end_matches('=')).ok()?,
                kid: k.kid,
                endorsements: k.endorsements,
            })
        })
        .take(MAX_KEYS)
        .collect();
    (!keys.is_empty()).then_some(keys)
}

/// The keys held now, shared by the webhook and its refresh task.
pub struct Keys {
    held: RwLock<Arc<Vec<RsaKey>>>,
    /// Woken when a token names a key not held.
    wanted: Notify,
}

impl Keys {
    /// Keys read from `source`: a file at once, then both kinds again by a task on the
    /// current tokio runtime (none outside one: the keys read at once stay).
    pub fn new(source: &KeySource) -> Arc<Self> {
        let keys = Arc::new(Self {
            held: RwLock::new(Arc::new(Vec::new())),
            wanted: Notify::new(),
        });
        let mut seen = None;
        if let KeySource::File(path) = source {
            seen = read_file(path, None, &keys);
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(refresh(Arc::downgrade(&keys), source.clone(), seen));
        }
        keys
    }

    /// The keys `keys` holds, fixed (for tests).
    pub fn fixed(keys: Vec<RsaKey>) -> Arc<Self> {
        Arc::new(Self {
            held: RwLock::new(Arc::new(keys)),
            wanted: Notify::new(),
        })
    }

    /// The key `kid`, if held; asking for one not held asks for a new read.
    pub fn get(&self, kid: &str) -> Option<RsaKey> {
        let held = self.held.read().map(|h| Arc::clone(&h)).ok()?;
        let found = held.iter().find(|k| k.kid == kid).cloned();
        if found.is_none() {
            self.wanted.notify_one();
        }
        found
    }

    /// Whether any key is held.
    pub fn any(&self) -> bool {
        self.held.read().is_ok_and(|h| !h.is_empty())
    }

    fn replace(&self, keys: Vec<RsaKey>) {
        if let Ok(mut held) = self.held.write() {
            *held = Arc::new(keys);
        }
    }
}

/// Read `path` if it changed since `seen`; its modification time when read.
fn read_file(path: &std::path::Path, seen: Option<SystemTime>, keys: &Keys) -> Option<SystemTime> {
    let modified = std::fs::metadata(path).and_then(|m| m.modified()).ok();
    if modified.is_some() && modified == seen {
        return seen;
    }
    match std::fs::read(path).ok().as_deref().and_then(read_document) {
        Some(read) => {
            keys.replace(read);
            modified
        }
        None => {
            tracing::warn!(path = %path.display(), "TEAMS_OPENID_KEYS: the file holds no RSA key; Teams requests are refused");
            seen
        }
    }
}

/// Read the keys again while the webhook lives.
async fn refresh(keys: Weak<Keys>, source: KeySource, mut seen: Option<SystemTime>) {
    let http = hermes_net::http::client_builder(hermes_net::http::USER_AGENT)
        .timeout(Duration::from_secs(10))
        .build();
    let mut last_try: Option<Instant> = None;
    loop {
        let Some(held) = keys.upgrade() else { return };
        let wait = match &source {
            KeySource::File(path) => {
                seen = read_file(path, seen, &held);
                FILE_EVERY
            }
            KeySource::Url(url) => {
                let soon_enough = last_try.is_none_or(|t| t.elapsed() >= SOONEST);
                match (&http, soon_enough) {
                    (Ok(http), true) => {
                        last_try = Some(Instant::now());
                        match fetch(http, url).await {
                            Some(read) => {
                                held.replace(read);
                                URL_EVERY
                            }
                            None => SOONEST,
                        }
                    }
                    _ => SOONEST,
                }
            }
        };
        let wanted = Arc::clone(&held);
        drop(held);
        // A token naming an unknown key wakes the loop early; the `SOONEST` bound above keeps
        // a stream of such tokens from becoming a stream of reads.
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = wanted.wanted.notified() => {}
        }
    }
}

/// GET the JWKS document at `url`.
async fn fetch(http: &reqwest::Client, url: &url::Url) -> Option<Vec<RsaKey>> {
    let answer = http.get(url.clone()).send().await;
    let read = match answer {
        Ok(r) if r.status().is_success() => r.bytes().await.ok().and_then(|b| read_document(&b)),
        _ => None,
    };
    if read.is_none() {
        tracing::warn!(url = %url, "TEAMS_OPENID_KEYS: the keys could not be read; trying again in 5 minutes");
    }
    read
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_jwks_document_gives_its_rsa_keys() {
        let doc = serde_json::json!({"keys": [
            {"kty": "RSA", "use": "sig", "kid": "k1", "n": "AQAB", "e": "AQAB",
             "endorsements": ["msteams", "skype"]},
            {"kty": "EC", "kid": "k2", "crv": "P-256", "x": "AA", "y": "AA"},
            {"kty": "RSA", "kid": "k3", "n": "!!", "e": "AQAB"},
            {"kty": "RSA"}
        ]});
        let keys = read_document(doc.to_string().as_bytes()).unwrap();
        assert_eq!(keys.len(), 1);
        assert_eq!(keys[0].kid, "k1");
        assert_eq!(keys[0].e, [1, 0, 1]);
        assert_eq!(keys[0].endorsements, ["msteams", "skype"]);
        assert!(read_document(b"{\"keys\": []}").is_none());
        assert!(read_document(b"[]").is_none());
        let held = Keys::fixed(keys);
        assert!(held.any() && held.get("k1").is_some() && held.get("k9").is_none());
    }
}
