//! The Hermes test kit: each test gets its own namespace (queues and Redis keys) and its own
//! database cloned from a migrated template, and can start any set of services in-process on
//! free ports, or the real binary. The end-to-end tests (`tests/`) and any crate testing
//! against the real servers use it. Its core (`hermes-testkit-core`: the servers, waiting on
//! a condition) has no Hermes dependency and is re-exported here.

mod builder;
pub use hermes_net::chaos;
mod db;
mod env;
pub mod fakes;
mod fleet;
mod harness;
mod killable;
mod process;
pub mod tls;

pub use builder::{TestFleet, TestFleetBuilder};
pub use db::{count, queued_llm_requests, routed_run};
pub use env::OPENAI_KEY;
pub use env::{Server, TestEnv};
pub use fakes::{
    api_inbound, channel_inbound, drain, metric, openai_answer, openai_fake, openai_tool_call,
    openai_tool_then_answer, rest_inbound, send, telegram_fake, tool_result,
};
pub use fleet::Fleet;
pub use harness::StageHarness;
pub use hermes_testkit_core::{amqp_url, eventually, eventually_sync, pg_base, redis_url};
pub use killable::KillableFleet;
pub use process::{
    RealProcess, everything_server_js, everything_server_toml, free_port, hermes_bin,
};

/// The Bearer key every test fleet uses.
pub const KEY: &str = "test-key-0123456789abcdef";
