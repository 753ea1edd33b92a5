//! The inbound side of a chat platform, as ingest sees it (docs/development.md, "Adding a
//! chat platform"): a [`Webhook`] per route a platform POSTs to, found in [`webhooks`].
//!
//! Ingest keeps the generic plumbing (body limits, the pool of unverified bodies, in-flight
//! slots, dedupe, accepting and publishing, metrics) and asks the webhook only what differs
//! per platform, in this order:
//!
//! 1. [`Webhook::check_headers`], before a byte of the body is read: a shared token (Telegram,
//!    360dialog) is checked whole here; a signature ([`Auth::Signature`]) only for its headers.
//! 2. [`Webhook::check_body`], on the raw bytes, before anything parses them: for
//!    [`Auth::Signature`] in ingest's pool of unverified bodies (docs/security.md, "The front
//!    door under slow or hostile clients"), before the request takes a slot; for
//!    [`Auth::Token`] once the body is read (the token was the proof: only whether the route
//!    is on is left).
//! 3. [`Webhook::parse`]: the body into the messages to route, the statuses to record, and
//!    what is acknowledged without a run.
//!
//! The shape leaves room for the platforms to come: Slack signs `v0:{timestamp}:{body}` and
//! Discord signs timestamp and body with ed25519 ([`Auth::Signature`], their headers checked
//! in step 1, the signature in step 2); Teams sends a JWT (step 1, against keys the webhook
//! holds); a platform that confirms its subscription with a `GET` answers through
//! [`Webhook::handshake`], as Meta's do. One that is checked by a `POST` answered with
//! something of its own (Slack's `url_verification`) puts that answer in
//! [`Received::challenge`]. One that retries an answer slower than a few seconds (Slack's 3)
//! names that bound in [`Webhook::ack_within`].

use std::sync::Arc;
use std::time::Duration;

use hermes_config::Config;
use hermes_types::model::{Inbound, Platform};
use http::HeaderMap;

use crate::decode::ParseError;
use crate::statuses::StatusUpdate;
use crate::{discord, instagram, messenger, slack, teams, telegram, twilio, whatsapp};

/// Every webhook route of every platform, each on or off as `config` sets its secret: the
/// one registration of a platform's inbound side.
pub fn webhooks(config: &Config) -> Vec<Arc<dyn Webhook>> {
    vec![
        Arc::new(telegram::Webhook::new(config)),
        Arc::new(whatsapp::cloud_webhook(config)),
        Arc::new(whatsapp::D360Webhook::new(config)),
        Arc::new(instagram::webhook(config)),
        Arc::new(slack::Webhook::new(config)),
        Arc::new(twilio::Webhook::new(config)),
        Arc::new(messenger::webhook(config)),
        Arc::new(teams::Webhook::new(config)),
        Arc::new(discord::Webhook::new(config)),
    ]
}

/// One route a platform POSTs its updates to.
pub trait Webhook: Send + Sync + 'static {
    /// The platform its messages come from.
    fn platform(&self) -> Platform;

    /// Its path (`/webhooks/<name>`).
    fn path(&self) -> &'static str;

    /// How its requests prove where they come from.
    fn auth(&self) -> Auth;

    /// Whether the route is on (its secret is configured); off, it answers 404.
    fn enabled(&self) -> bool;

    /// The largest body it takes, in bytes.
    fn max_body_bytes(&self) -> usize;

    /// The check made before the body is read, on the headers and the path's token (see
    /// [`Auth::Token`]).
    fn check_headers(&self, headers: &HeaderMap, path_token: Option<&str>) -> Result<(), Refusal>;

    /// The check made on the raw body once it has arrived, before it is parsed.
    fn check_body(&self, headers: &HeaderMap, body: &[u8]) -> Result<(), Refusal>;

    /// The `GET` on the same path that confirms a subscription, when the platform has one.
    fn handshake(&self) -> Option<&dyn Handshake> {
        None
    }

    /// What a verified body carried. Total over its input: untrusted bytes give `Err` or an
    /// empty [`Received`], never a panic.
    fn parse(&self, body: &[u8]) -> Result<Received, ParseError>;

    /// How soon the platform needs its answer before it counts the delivery failed and sends
    /// it again (Slack: 3 s); `None`: no bound of its own. Ingest answers 503 by then rather
    /// than late, and finishes accepting what it started meanwhile.
    fn ack_within(&self) -> Option<Duration> {
        None
    }

    /// Lines for the start-up log about how the route is configured (beside its on/off line).
    fn warnings(&self) -> Vec<&'static str> {
        Vec::new()
    }
}

/// A platform's subscription handshake: a `GET` whose query it answers with a challenge.
pub trait Handshake: Send + Sync {
    /// Whether it is on (its verify token is configured); off, it answers 404.
    fn enabled(&self) -> bool;

    /// The challenge to echo for the raw query string, or why not.
    fn answer(&self, query: Option<&str>) -> Result<String, Refusal>;
}

/// How a webhook's requests prove they come from the platform.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Auth {
    /// A shared secret in a header or the path: checked whole before the body is read, so a
    /// caller without it never gets to send one.
    Token {
        /// Also served at `{path}/{token}`, for platforms that cannot add a header
        /// (360dialog); the token reaches [`Webhook::check_headers`].
        in_path: bool,
    },
    /// A signature over the raw body: the body is read first, bounded, in ingest's pool of
    /// unverified bodies, and checked there.
    Signature,
}

/// Why a request is refused before its body is parsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The route's secret is not configured: the route is off (404).
    Off,
    /// The secret, token or signature is missing or wrong (401).
    BadSignature,
}

/// What one verified body carried.
#[derive(Clone, Debug, Default)]
pub struct Received {
    /// The messages to route, in body order.
    pub messages: Vec<Inbound>,
    /// Delivery statuses of messages we sent, to record (never routed).
    pub statuses: Vec<StatusUpdate>,
    /// Items acknowledged without a run, counted by why.
    pub skipped: Vec<(Skip, usize)>,
    /// A subscription check sent as a `POST` (Slack's `url_verification`): the challenge the
    /// answer must echo, `{"challenge": …}`.
    pub challenge: Option<String>,
    /// People who opted out of messages or back in (an SMS `STOP` or `START`), to record
    /// before the platform is answered.
    pub consents: Vec<Consent>,
    /// What the platform expects as the answer, in place of ingest's JSON acknowledgement
    /// (Twilio's TwiML); sent only once everything above is recorded and accepted.
    pub answer: Option<Answer>,
}

/// A person's consent to messages, changed by a keyword (docs/channels.md, "SMS through
/// Twilio"): nothing is sent to a sender who opted out until they opt in again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Consent {
    pub platform: Platform,
    /// The sender (an SMS number), who is also the chat replies go to.
    pub sender_id: String,
    /// Opted out (`STOP`), or back in (`START`).
    pub opted_out: bool,
    /// The platform's id of the message that said so.
    pub message_id: Option<String>,
}

/// A webhook's answer of the platform's own kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    /// Its `Content-Type`.
    pub content_type: &'static str,
    pub body: String,
}

impl Received {
    /// Count `n` items skipped for `why` (nothing when `n` is 0).
    pub fn skip(&mut self, why: Skip, n: usize) {
        if n > 0 {
            self.skipped.push((why, n));
        }
    }
}

/// Why an item of a verified body creates no run (the `outcome` of
/// `hermes_ingest_messages_total`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Skip {
    /// Not a message we route: another kind of update, an unknown message type, an item that
    /// did not parse.
    Ignored,
    /// A group message that neither mentions nor replies to the bot nor commands it.
    NotAddressed,
    /// A group whose rule is `never`.
    GroupSilent,
    /// An edit, with `edits = "ignore"`.
    EditIgnored,
    /// A keyword (`STOP`, `START`, `HELP`): handled by ingest, no run.
    Keyword,
}

impl Skip {
    /// The metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            Skip::Ignored => "ignored",
            Skip::NotAddressed => "not_addressed",
            Skip::GroupSilent => "group_silent",
            Skip::EditIgnored => "edit_ignored",
            Skip::Keyword => "keyword",
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::collections::HashMap;

    use super::*;

    /// The configuration these variables make (and defaults for the rest).
    pub(crate) fn config(vars: &[(&str, &str)]) -> Config {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Config::from_lookup(&move |k| map.get(k).cloned(), None).expect("configuration")
    }

    #[test]
    fn every_route_is_registered_once_and_off_without_its_secret() {
        let hooks = webhooks(&config(&[]));
        let mut paths: Vec<&str> = hooks.iter().map(|h| h.path()).collect();
        paths.sort_unstable();
        paths.dedup();
        assert_eq!(paths.len(), hooks.len(), "{paths:?}");
        for h in &hooks {
            assert!(h.path().starts_with("/webhooks/"), "{}", h.path());
            assert!(h.platform().is_chat(), "{}", h.path());
            assert!(!h.enabled(), "{} is on without a secret", h.path());
            let refused = h.check_headers(&HeaderMap::new(), Some("x"));
            assert_eq!(refused, Err(Refusal::Off), "{}", h.path());
            assert_eq!(h.check_body(&HeaderMap::new(), b"{}"), Err(Refusal::Off));
            if let Some(handshake) = h.handshake() {
                assert!(!handshake.enabled());
            }
        }
    }

    #[test]
    fn every_route_is_on_with_its_secret() {
        let hooks = webhooks(&config(&[
            ("TELEGRAM_WEBHOOK_SECRET", "t"),
            ("WHATSAPP_APP_SECRET", "w"),
            ("WHATSAPP_VERIFY_TOKEN", "wv"),
            ("D360_WEBHOOK_TOKEN", "d"),
            ("INSTAGRAM_APP_SECRET", "i"),
            ("INSTAGRAM_VERIFY_TOKEN", "iv"),
            ("SLACK_SIGNING_SECRET", "s"),
            ("TWILIO_AUTH_TOKEN", "tw"),
            (
                "TWILIO_WEBHOOK_URL",
                "https://hermes.example/webhooks/twilio",
            ),
            ("MESSENGER_APP_SECRET", "m"),
            ("MESSENGER_VERIFY_TOKEN", "mv"),
            ("TEAMS_APP_ID", "c9e8c047-2a74-40a2-b28a-b162d5f5327c"),
            (
                "DISCORD_PUBLIC_KEY",
                "e4b1fc4a3dd2e0b9b6c2f0a9a2b4c6d8e0f1a3b5c7d9e1f3a5b7c9d1e3f5a7b9",
            ),
        ]));
        for h in &hooks {
            assert!(h.enabled(), "{}", h.path());
            if let Some(handshake) = h.handshake() {
                assert!(handshake.enabled(), "{}", h.path());
            }
        }
    }

    #[test]
    fn skips_are_counted_only_when_there_are_some() {
        let mut r = Received::default();
        r.skip(Skip::Ignored, 0);
        r.skip(Skip::NotAddressed, 2);
        assert_eq!(r.skipped, vec![(Skip::NotAddressed, 2)]);
        assert_eq!(Skip::EditIgnored.as_str(), "edit_ignored");
    }
}
