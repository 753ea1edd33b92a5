//! The core of the test kit (docs/development.md, "Tests"): where the servers the tests use
//! are, and waiting on a condition instead of for a fixed time. It depends on no Hermes
//! crate, so any crate's unit tests can use it; the fleet kit (`hermes-testkit`) builds on
//! it and re-exports it.

mod servers;
mod wait;

pub use servers::{amqp_url, env_or, pg_base, redis_url};
pub use wait::{eventually, eventually_sync};
