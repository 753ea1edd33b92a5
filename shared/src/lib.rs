//! hermes-shared: what every Hermes service stands on — the envelope and domain payloads,
//! the bus, PostgreSQL with migrations and the outbox, Redis, configuration, telemetry,
//! and the generic consume → commit → ack loop of a stage.

pub mod agent;
pub mod alerts;
pub mod bus;
pub mod cache;
pub mod config;
pub mod context;
pub mod db;
pub mod embeddings;
pub mod envelope;
pub mod failure;
pub mod http;
pub mod ids;
pub mod intent;
pub mod keyring;
pub mod model;
pub mod net_guard;
pub mod openai_wire;
pub mod redact;
pub mod shutdown;
pub mod signing;
pub mod stage;
pub mod telemetry;
pub mod trace;

pub use context::Ctx;

/// Install the process-wide TLS crypto provider (ring) once, before any TLS client is built.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}
