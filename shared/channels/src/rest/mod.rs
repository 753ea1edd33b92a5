//! The REST channel (`POST /v1/messages`, docs/api.md, "The REST channel"): Hermes's own, for
//! a customer's app, answered by a signed callback or by polling.
//!
//! In: [`parse`] reads and checks the message. Its route stays with the API surface in
//! ingest (keys, scopes, idempotency), and its callback with the delivery stage, which signs
//! it with the key's own secret read from the database; neither is a rule of a platform.

pub mod parse;

pub use parse::{RestError, parse};
