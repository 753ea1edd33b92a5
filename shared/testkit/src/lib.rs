//! The Hermes test kit: each test gets its own namespace (queues and Redis keys) and its own
//! database cloned from a migrated template, and can start any set of services in-process on
//! free ports, or the real binary. The end-to-end tests (`tests/`) and any crate testing
//! against the real servers use it. Its core (`hermes-testkit-core`: the servers, waiting on
//! a condition) has no Hermes dependency and is re-exported here.
//!
//! One way to a running fleet, in two stages (docs/development.md, "Tests"):
//!
//! ```no_run
//! # async fn example() {
//! use hermes::Service;
//! use hermes_testkit::{KEY, TestEnv, openai_fake};
//!
//! let provider = openai_fake("hello").await;
//! // The environment: namespace, database, settings; users, agents and proxies go here.
//! let mut env = TestEnv::new().await;
//! env.openai_mock(&provider.uri()).set("HERMES_COMMIT_GROUP", "1");
//! // The fleet on it: the handle a test sends its requests through.
//! let fleet = env.start(&[Service::Ingest, Service::Router, Service::Llm]).await;
//! let run = fleet.rest_message(KEY, "alice", "hi").await;
//! # }
//! ```
//!
//! [`TestEnv::start_killable`] and [`TestEnv::spawn`] are the same second stage for a fleet
//! a test kills, and for the real binary; [`StageHarness`] drives one stage's handler on a
//! [`TestEnv`] with no fleet at all.

pub use hermes_net::chaos;
pub mod browser;
mod db;
mod discord;
mod discord_gateway;
mod env;
pub mod fakes;
mod fleet;
mod harness;
mod killable;
mod messenger;
pub mod otlp;
mod process;
mod replies;
mod requests;
mod slack;
mod teams;
pub mod tls;
mod twilio;

pub use db::{count, queued_llm_requests, routed_run};
pub use discord::{
    DiscordCall, DiscordOk, discord_api_url, discord_calls, discord_fake, discord_ok,
    discord_rate_limited, discord_route, discord_unknown_webhook,
};
pub use discord_gateway::{FakeGateway, GatewayConn, discord_gateway_bot, discord_recommends};
pub use env::OPENAI_KEY;
pub use env::{Server, TestEnv};
pub use fakes::{
    api_inbound, channel_inbound, drain, metric, openai_answer, openai_fake, openai_reply,
    openai_tool_call, openai_tool_then_answer, rest_inbound, send, send_on, telegram_fake,
    telegram_ok, telegram_send_message, telegram_sent, telegram_text, telegram_texts_to,
    tool_result,
};
pub use fleet::Fleet;
pub use harness::StageHarness;
pub use hermes_testkit_core::{amqp_url, eventually, eventually_sync, pg_base, redis_url};
pub use killable::KillableFleet;
pub use messenger::{
    MESSENGER_TOKEN, MessengerAnswers, messenger_answers, messenger_fake, messenger_send,
    messenger_sent, messenger_text,
};
pub use otlp::{OtlpReceiver, ReceivedSpan};
pub use process::{
    RealProcess, everything_server_js, everything_server_toml, free_port, hermes_bin,
};
pub use replies::answered;
pub use requests::{App, meta_signature, status_and_json};
pub use slack::{
    SLACK_BOT_USER, SlackOk, slack_api_base, slack_dm, slack_event, slack_fake, slack_headers,
    slack_headers_at, slack_mention, slack_method, slack_ok, slack_posts, slack_refusal,
};
pub use teams::{
    TEAMS_ACCESS_TOKEN, TEAMS_APP_ID, TEAMS_BOT, TeamsCreated, teams_activities,
    teams_channel_message, teams_fake, teams_message, teams_posted, teams_service_url,
};
pub use twilio::{
    TWILIO_FROM, TWILIO_SID, TWILIO_TOKEN, TwilioCreated, twilio_created, twilio_fake,
    twilio_messages, twilio_sent, twilio_sms,
};

/// The Bearer key every test fleet uses.
pub const KEY: &str = "test-key-0123456789abcdef";
