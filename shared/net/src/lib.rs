//! hermes-net: talking to peers outside the fleet safely — the SSRF guard for URLs that
//! come from users and models, the one outbound HTTP client builder, HMAC and Standard
//! Webhooks signing, the compact JWT reader, credential redaction, the Fernet key ring for
//! secrets at rest, the classification of failed sends, and free ports for servers a test
//! starts.

pub mod chaos;
pub mod failure;
pub mod guard;
pub mod http;
pub mod jws;
pub mod keyring;
pub mod ports;
pub mod redact;
pub mod signing;

/// Install the process-wide TLS crypto provider (ring) once, before any TLS client is built.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}
