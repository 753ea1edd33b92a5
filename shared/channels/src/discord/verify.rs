//! Discord's request signature
//! (<https://discord.com/developers/docs/interactions/overview#setting-up-an-endpoint-validating-security-request-headers>):
//! `X-Signature-Ed25519` is the hex Ed25519 signature of `{X-Signature-Timestamp}{raw body}`
//! under the application's public key (`DISCORD_PUBLIC_KEY`, hex). It is checked on the raw
//! bytes before anything parses them, and fails closed: no key is the route off, a missing,
//! malformed or wrong header is refused (Discord itself sends bad signatures to an endpoint
//! when it is saved, and expects a 401). A timestamp more than [`REPLAY_WINDOW_SECS`] from now
//! is refused too, so a captured request cannot be replayed later.

use http::HeaderMap;
use ring::signature::{ED25519, Ed25519KeyPair, KeyPair, UnparsedPublicKey};

use crate::inbound::Refusal;
use crate::token::Signed;

/// The header with the hex signature.
pub const SIGNATURE: &str = "x-signature-ed25519";
/// The header with the timestamp the signature covers (Unix seconds).
pub const TIMESTAMP: &str = "x-signature-timestamp";
/// How far a request's timestamp may be from now, in seconds. Discord names no window of its
/// own; five minutes is Slack's, and ample for a request answered within 3 s.
pub const REPLAY_WINDOW_SECS: i64 = 5 * 60;

/// An Ed25519 public key is 32 bytes, a signature 64.
const KEY_BYTES: usize = 32;
const SIGNATURE_BYTES: usize = 64;

/// The application's public key, read from its hex form.
#[derive(Clone, PartialEq, Eq)]
pub struct PublicKey([u8; KEY_BYTES]);

impl PublicKey {
    /// The key of 64 hex digits, or `None` for anything else.
    pub fn from_hex(hex_key: &str) -> Option<Self> {
        let bytes = hex::decode(hex_key.trim()).ok()?;
        bytes.try_into().ok().map(Self)
    }
}

impl std::fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PublicKey({})", hex::encode(self.0))
    }
}

/// The public key (hex) of the key pair with the 32-byte `seed`, and its signature (hex) of
/// `body` at `timestamp`, as Discord signs a request: what the fleet bench sends with.
pub fn sign(seed: &[u8; KEY_BYTES], timestamp: &str, body: &[u8]) -> Option<(String, String)> {
    let pair = Ed25519KeyPair::from_seed_unchecked(seed).ok()?;
    let mut message = timestamp.as_bytes().to_vec();
    message.extend_from_slice(body);
    Some((
        hex::encode(pair.public_key().as_ref()),
        hex::encode(pair.sign(&message).as_ref()),
    ))
}

/// Discord's signed headers.
const SIGNED: Signed = Signed {
    signature: SIGNATURE,
    timestamp: TIMESTAMP,
    window_secs: REPLAY_WINDOW_SECS,
};

/// The check made before the body is read: the route is on and both headers are there.
pub fn check_headers(key: Option<&PublicKey>, headers: &HeaderMap) -> Result<(), Refusal> {
    SIGNED.check_headers(key.is_some(), headers)
}

/// Whether `body` was signed with the application's key at a timestamp within the replay
/// window of the Unix time `now`.
pub fn check_body_at(
    key: Option<&PublicKey>,
    headers: &HeaderMap,
    body: &[u8],
    now: i64,
) -> Result<(), Refusal> {
    let key = key.ok_or(Refusal::Off)?;
    let (given, timestamp) = SIGNED.fresh(headers, Some(now))?;
    let signature = hex::decode(given).map_err(|_| Refusal::BadSignature)?;
    if signature.len() != SIGNATURE_BYTES {
        return Err(Refusal::BadSignature);
    }
    // The signed message is the timestamp's bytes followed by the body's, as sent.
    let mut message = Vec::with_capacity(timestamp.len() + body.len());
    message.extend_from_slice(timestamp.as_bytes());
    message.extend_from_slice(body);
    UnparsedPublicKey::new(&ED25519, &key.0)
        .verify(&message, &signature)
        .map_err(|_| Refusal::BadSignature)
}

#[cfg(test)]
mod tests;
