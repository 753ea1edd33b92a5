//! The delivery stage: channel senders (credentials and base URLs), in-call retries, the
//! circuit breaker, the outbound rate gate and the agent webhook allowlist; and the ops
//! alerts delivery raises.

use secrecy::SecretString;
use std::time::Duration;
use url::Url;

use super::Unset::{Means, Value};
use super::{kinds, settings};
use crate::AllowRule;

settings! {
    /// Senders and how sends are paced and retried.
    SETTINGS = [
        TELEGRAM_BOT_TOKEN: SecretString {
            kind: kinds::SECRET,
            unset: Means("(none: Telegram replies parked)"),
            secret: true,
            help: "bot token of Telegram's Bot API; enables sending Telegram replies",
        },
        TELEGRAM_API_BASE_URL: Url {
            kind: kinds::HTTP_URL,
            unset: Value("https://api.telegram.org"),
            secret: false,
            help: "base URL of the Bot API (`/bot<token>/sendMessage` is appended)",
        },
        WHATSAPP_SENDER: &'static str {
            kind: kinds::WHATSAPP_API,
            unset: Means("(by key)"),
            secret: false,
            help: "how WhatsApp replies are sent: `360dialog` or `cloud`; needed only when both keys are set",
        },
        D360_API_KEY: SecretString {
            kind: kinds::SECRET,
            unset: Means("(none)"),
            secret: true,
            help: "360dialog API key (`D360-API-KEY` header); enables WhatsApp replies through 360dialog",
        },
        D360_BASE_URL: Url {
            kind: kinds::HTTP_URL,
            unset: Value("https://waba-v2.360dialog.io"),
            secret: false,
            help: "base URL of 360dialog's WhatsApp API (`/messages` is appended)",
        },
        WHATSAPP_ACCESS_TOKEN: SecretString {
            kind: kinds::SECRET,
            unset: Means("(none)"),
            secret: true,
            help: "Bearer token of Meta's WhatsApp Cloud API; enables WhatsApp replies through it",
        },
        WHATSAPP_PHONE_NUMBER_ID: String {
            kind: kinds::TEXT,
            unset: Means("(none)"),
            secret: false,
            help: "phone number id replies are sent from with the Cloud API",
        },
        WHATSAPP_API_BASE_URL: Url {
            kind: kinds::HTTP_URL,
            unset: Value("https://graph.facebook.com/v21.0"),
            secret: false,
            help: "base URL of the Cloud API (`/{phone number id}/messages` is appended)",
        },
        INSTAGRAM_ACCESS_TOKEN: SecretString {
            kind: kinds::SECRET,
            unset: Means("(none: Instagram replies parked)"),
            secret: true,
            help: "page access token of the Instagram Graph API (`access_token` parameter); enables Instagram replies",
        },
        INSTAGRAM_API_BASE_URL: Url {
            kind: kinds::HTTP_URL,
            unset: Value("https://graph.facebook.com/v21.0"),
            secret: false,
            help: "base URL of the Graph API (`/me/messages` is appended)",
        },
        SLACK_BOT_TOKEN: SecretString {
            kind: kinds::SECRET,
            unset: Means("(none: Slack replies parked)"),
            secret: true,
            help: "bot token of the Slack app (`xoxb-…`, Bearer); enables Slack replies and fetching Slack files",
        },
        SLACK_API_BASE_URL: Url {
            kind: kinds::HTTP_URL,
            unset: Value("https://slack.com/api"),
            secret: false,
            help: "base URL of Slack's Web API (`/chat.postMessage` is appended)",
        },
        SLACK_FILES_BASE_URL: Url {
            kind: kinds::HTTP_URL,
            unset: Value("https://files.slack.com"),
            secret: false,
            help: "where Slack's `url_private` files are; only URLs under it are fetched with the bot token",
        },
        DISCORD_BOT_TOKEN: SecretString {
            kind: kinds::SECRET,
            unset: Means("(none: a Discord reply without a live interaction is parked)"),
            secret: true,
            help: "bot token of the Discord application (`Authorization: Bot …`); answers in the channel a reply whose interaction token has expired (15 minutes) or that has none, and is the bot `hermes discord-gateway` connects as",
        },
        DISCORD_API_URL: Url {
            kind: kinds::HTTP_URL,
            unset: Value("https://discord.com/api/v10"),
            secret: false,
            help: "base URL of Discord's REST API (`/webhooks/…` and `/channels/…/messages` are appended)",
        },
        HERMES_SEND_PAUSES_MS: Vec<Duration> {
            kind: kinds::MILLIS_LIST,
            unset: Value("1000,3000,9000"),
            secret: false,
            help: "pauses between the in-call tries of one outbound send (jittered ±20 %)",
        },
        HERMES_MAX_RETRY_AFTER_SECS: Duration {
            kind: kinds::SECS,
            unset: Value("30"),
            secret: false,
            help: "longest `Retry-After` waited within a send; longer ends the send as `rate_limited` for the queued retry",
        },
        HERMES_BREAKER_THRESHOLD: u32 {
            kind: kinds::U32_POSITIVE,
            unset: Value("10"),
            secret: false,
            help: "consecutive failed sends to a platform that open its circuit breaker",
        },
        HERMES_BREAKER_WINDOW_SECS: Duration {
            kind: kinds::SECS_POSITIVE,
            unset: Value("300"),
            secret: false,
            help: "sliding window in which those failures must fall",
        },
        HERMES_BREAKER_OPEN_SECS: Duration {
            kind: kinds::SECS_POSITIVE,
            unset: Value("120"),
            secret: false,
            help: "how long an open breaker skips sends to its platform",
        },
        HERMES_DELIVERY_CHAT_PER_SEC: f64 {
            kind: kinds::POSITIVE_RATE,
            unset: Value("1"),
            secret: false,
            help: "outbound messages per second to one chat",
        },
        HERMES_DELIVERY_CHAT_BURST: u32 {
            kind: kinds::U32_POSITIVE,
            unset: Value("1"),
            secret: false,
            help: "outbound messages to one chat that may go at once",
        },
        HERMES_DELIVERY_BOT_PER_SEC: f64 {
            kind: kinds::POSITIVE_RATE,
            unset: Value("25"),
            secret: false,
            help: "outbound messages per second through one bot token, phone number or account",
        },
        HERMES_WHATSAPP_PER_SEC: f64 {
            kind: kinds::POSITIVE_RATE,
            unset: Value("80"),
            secret: false,
            help: "outbound WhatsApp messages per second through one business number (Meta's default throughput; raise it when Meta raised the number's)",
        },
        HERMES_PRESENCE: bool {
            kind: kinds::BOOL,
            unset: Value("true"),
            secret: false,
            help: "while a run answers a chat message: mark the WhatsApp message read with the typing indicator, and show Telegram's typing action (best effort)",
        },
        HERMES_RATE_GATE_WAIT_SECS: Duration {
            kind: kinds::SECS,
            unset: Value("30"),
            secret: false,
            help: "longest a send waits at the rate gate before it is retried later instead",
        },
        HERMES_WEBHOOK_ALLOW: Vec<AllowRule> {
            kind: kinds::ALLOW_LIST,
            unset: Means("(none)"),
            secret: false,
            help: "comma-separated host names or CIDR ranges agent webhook URLs may reach although not public (else refused)",
        },
        HERMES_CALLBACK_ALLOW: Vec<AllowRule> {
            kind: kinds::ALLOW_LIST,
            unset: Means("(none)"),
            secret: false,
            help: "comma-separated host names or CIDR ranges REST callback URLs may reach although not public (else refused)",
        },
    ]
}

settings! {
    /// Ops alerts.
    ALERTS = [
        HERMES_ALERT_SLACK_URL: SecretString {
            kind: kinds::SECRET_HTTP_URL,
            unset: Means("(none)"),
            secret: true,
            help: "Slack incoming-webhook URL that receives ops alerts",
        },
        HERMES_ALERT_DISCORD_URL: SecretString {
            kind: kinds::SECRET_HTTP_URL,
            unset: Means("(none)"),
            secret: true,
            help: "Discord webhook URL that receives ops alerts",
        },
        HERMES_ALERT_DEDUPE_SECS: Duration {
            kind: kinds::SECS_POSITIVE,
            unset: Value("300"),
            secret: false,
            help: "one alert of a kind (and subject) per this many seconds, across replicas",
        },
        HERMES_ALERT_PARKING_ABOVE: u32 {
            kind: kinds::U32,
            unset: Value("100"),
            secret: false,
            help: "a parking queue holding more messages than this raises an alert",
        },
        HERMES_ALERT_APPROVAL_WAIT: Duration {
            kind: kinds::DURATION,
            unset: Value("5m"),
            secret: false,
            help: "a tool call waiting longer than this for an operator's approval raises an alert (docs/operator-mcp.md, approvals)",
        },
    ]
}
