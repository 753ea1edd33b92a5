//! Ingest: the API key, how long and how much it accepts, the channel webhook secrets that
//! open each route, and the per-sender inbound rate.

use secrecy::SecretString;
use std::time::Duration;

use super::Unset::{Means, Value};
use super::{kinds, settings};

settings! {
    /// The front door.
    SETTINGS = [
        API_SERVER_KEY: SecretString {
            kind: kinds::STRONG_KEY,
            unset: Means("(none)"),
            secret: true,
            help: "Bearer key of the HTTP API, at least 16 characters; required unless ingest binds to loopback",
        },
        HERMES_RUN_TIMEOUT_SECS: Duration {
            kind: kinds::SECS,
            unset: Value("120"),
            secret: false,
            help: "how long an API caller waits for its run's answer before 504",
        },
        HERMES_RUN_EVENTS_TTL_SECS: Duration {
            kind: kinds::SECS_POSITIVE,
            unset: Value("3600"),
            secret: false,
            help: "how long a run's event stream (deltas, tool start/finish, lifecycle; what `GET /v1/runs/{id}/events` replays) is kept in Redis after its last event",
        },
        HERMES_RUN_EVENTS_MAX_BYTES: usize {
            kind: kinds::COUNT_POSITIVE,
            unset: Value("262144"),
            secret: false,
            help: "bytes of events one run's event stream may hold in Redis; further deltas and tool events are dropped (the final answer still carries the whole text) and a final event that does not fit points to the run's row",
        },
        HERMES_MAX_BODY_BYTES: usize {
            kind: kinds::COUNT,
            unset: Value("1048576"),
            secret: false,
            help: "largest accepted request body; larger is 413",
        },
        HERMES_META_MAX_BODY_BYTES: usize {
            kind: kinds::COUNT,
            unset: Value("4194304"),
            secret: false,
            help: "largest accepted body on the WhatsApp, 360dialog and Instagram webhook routes (Meta sends up to 3 MB); larger is 413",
        },
        HERMES_HTTP_HEADER_TIMEOUT_SECS: Duration {
            kind: kinds::SECS_POSITIVE,
            unset: Value("10"),
            secret: false,
            help: "how long a client may take to send a request's headers before ingest hangs up (slow clients cannot hold connections)",
        },
        HERMES_HTTP_BODY_TIMEOUT_SECS: Duration {
            kind: kinds::SECS_POSITIVE,
            unset: Value("30"),
            secret: false,
            help: "how long a client may take to send a request's body, counted from its headers; beyond, 408 and the connection is closed",
        },
        HERMES_MAX_IN_FLIGHT: usize {
            kind: kinds::COUNT_POSITIVE,
            unset: Value("1024"),
            secret: false,
            help: "HTTP requests ingest handles at once; beyond, it answers 503 with `Retry-After` instead of queueing (health checks are never shed)",
        },
        HERMES_HTTP_WRITE_TIMEOUT_SECS: Duration {
            kind: kinds::SECS_POSITIVE,
            unset: Value("30"),
            secret: false,
            help: "how long a client may leave written bytes untaken (it stopped reading) before ingest closes the connection",
        },
        HERMES_STREAMS_PER_KEY: usize {
            kind: kinds::COUNT_POSITIVE,
            unset: Value("64"),
            secret: false,
            help: "requests one API key may hold open at once on one ingest replica (event streams, streamed answers, callers waiting for their run); beyond, 429 `too_many_streams` with `Retry-After` (`API_SERVER_KEY` is bounded by `HERMES_MAX_IN_FLIGHT` only)",
        },
        HERMES_STREAM_MAX_SECS: Duration {
            kind: kinds::SECS_POSITIVE,
            unset: Value("3600"),
            secret: false,
            help: "longest an event stream is held open; then it ends (a run's event stream is resumed with `Last-Event-ID`)",
        },
        TELEGRAM_WEBHOOK_SECRET: SecretString {
            kind: kinds::SECRET,
            unset: Means("(none: route off)"),
            secret: true,
            help: "secret Telegram sends in `X-Telegram-Bot-Api-Secret-Token`; enables `POST /webhooks/telegram`",
        },
        WHATSAPP_VERIFY_TOKEN: SecretString {
            kind: kinds::SECRET,
            unset: Means("(none: route off)"),
            secret: true,
            help: "token of Meta's subscription handshake; enables `GET /webhooks/whatsapp`",
        },
        WHATSAPP_APP_SECRET: SecretString {
            kind: kinds::SECRET,
            unset: Means("(none: route off)"),
            secret: true,
            help: "app secret that signs `X-Hub-Signature-256`; enables `POST /webhooks/whatsapp`",
        },
        D360_WEBHOOK_TOKEN: SecretString {
            kind: kinds::SECRET,
            unset: Means("(none: route off)"),
            secret: true,
            help: "shared token 360dialog sends (header or path segment); enables `POST /webhooks/360dialog`",
        },
        D360_WEBHOOK_TOKEN_HEADER: String {
            kind: kinds::HEADER_NAME,
            unset: Value("x-hermes-webhook-token"),
            secret: false,
            help: "header carrying `D360_WEBHOOK_TOKEN` (or use `POST /webhooks/360dialog/<token>`)",
        },
        INSTAGRAM_VERIFY_TOKEN: SecretString {
            kind: kinds::SECRET,
            unset: Means("(none: route off)"),
            secret: true,
            help: "token of Meta's subscription handshake; enables `GET /webhooks/instagram`",
        },
        INSTAGRAM_APP_SECRET: SecretString {
            kind: kinds::SECRET,
            unset: Means("(none: route off)"),
            secret: true,
            help: "app secret that signs `X-Hub-Signature-256`; enables `POST /webhooks/instagram`",
        },
        SLACK_SIGNING_SECRET: SecretString {
            kind: kinds::SECRET,
            unset: Means("(none: route off)"),
            secret: true,
            help: "signing secret of the Slack app (`X-Slack-Signature` v0); enables `POST /webhooks/slack`",
        },
        DISCORD_PUBLIC_KEY: String {
            kind: kinds::TEXT,
            unset: Means("(none: route off)"),
            secret: false,
            help: "the Discord application's public key, 64 hex digits (`X-Signature-Ed25519`); enables `POST /webhooks/discord`",
        },
        HERMES_INBOUND_PER_MINUTE: u32 {
            kind: kinds::U32_POSITIVE,
            unset: Value("20"),
            secret: false,
            help: "messages one sender may send per minute before being slowed down (per platform in `[ingest.rate_limits]`)",
        },
        HERMES_INBOUND_BURST: u32 {
            kind: kinds::U32_POSITIVE,
            unset: Value("10"),
            secret: false,
            help: "messages one sender may send at once before the per-minute rate applies",
        },
        HERMES_OPERATOR_SENDS_PER_MINUTE: u32 {
            kind: kinds::U32_POSITIVE,
            unset: Value("30"),
            secret: false,
            help: "messages one operator key may send per minute with `messages_send` (as many at once), over MCP",
        },
    ]
}
