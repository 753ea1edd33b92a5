//! `POST /webhooks/discord` behind [`inbound::Webhook`]: the application's Interactions
//! Endpoint URL. The Ed25519 signature is checked on the raw body in ingest's pool of
//! unverified bodies, before the request takes a slot ([`verify`]); then the interaction is
//! answered in the body of the response
//! (<https://discord.com/developers/docs/interactions/receiving-and-responding#responding-to-an-interaction>):
//! a `PING` with a `PONG`, a command, once it is queued, with a deferred response (the user
//! sees the bot thinking; the answer follows up on the interaction's token).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use chrono::Utc;
use hermes_config::Config;
use hermes_types::model::{
    ChatKind, Inbound, Interaction as ReplyContext, InteractionToken, MessageEvent, Platform,
};
use http::HeaderMap;

use super::verify::{self, PublicKey};
use super::{Command, Interaction, parse};
use crate::decode::ParseError;
use crate::inbound::{self, Answer, Auth, Received, Refusal, Skip};
use crate::limits::text_field;

/// Discord needs the first answer to an interaction within 3 s, or shows it failed; ingest
/// answers within this, with a 503 if the command is not queued by then.
pub const ACK_WITHIN: Duration = Duration::from_millis(2500);

/// An interaction response's type (`type` of the body answered).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Response {
    /// `PONG` (1), to a `PING`.
    Pong,
    /// `DEFERRED_CHANNEL_MESSAGE_WITH_SOURCE` (5): the answer comes later, by follow-up.
    Deferred,
}

impl Response {
    /// The response body, `{"type":n}`.
    pub fn answer(self) -> Answer {
        let n = match self {
            Response::Pong => 1,
            Response::Deferred => 5,
        };
        Answer {
            content_type: "application/json",
            body: format!("{{\"type\":{n}}}"),
        }
    }
}

/// Discord's webhook, on when `DISCORD_PUBLIC_KEY` is set.
pub struct Webhook {
    key: Option<PublicKey>,
    max_body_bytes: usize,
}

impl Webhook {
    /// The webhook as `config` sets it up: the application's public key.
    pub fn new(config: &Config) -> Self {
        let hex = config.ingest.webhooks.discord_public_key.as_deref();
        Self::with_key(
            hex.and_then(PublicKey::from_hex),
            config.ingest.max_body_bytes,
        )
    }

    /// The webhook checking signatures with `key`.
    pub fn with_key(key: Option<PublicKey>, max_body_bytes: usize) -> Self {
        Self {
            key,
            max_body_bytes,
        }
    }
}

/// The message a command is routed as: from the user who ran it, in its channel, carrying
/// the interaction its answer is sent on.
fn message(c: Command) -> Inbound {
    let received_at = Utc::now();
    let interaction = ReplyContext::received(
        c.application_id,
        InteractionToken::new(c.token),
        received_at,
    );
    let mut inbound = Inbound::of(MessageEvent {
        platform: Platform::Discord,
        sender_id: c.user_id,
        chat_id: c.channel_id,
        text: text_field(Some(c.text)),
        media: Vec::new(),
        sender_name: c.user_name,
        // The interaction id is unique per interaction: a redelivery is answered once.
        external_message_id: Some(c.id),
        received_at,
        metadata: None,
    });
    inbound.interaction = Some(interaction);
    if c.guild_id.is_some() {
        // Everyone in a guild channel reads the answer.
        inbound.chat_kind = ChatKind::Group;
    }
    inbound
}

impl inbound::Webhook for Webhook {
    fn platform(&self) -> Platform {
        Platform::Discord
    }

    fn path(&self) -> &'static str {
        "/webhooks/discord"
    }

    fn auth(&self) -> Auth {
        Auth::Signature
    }

    fn enabled(&self) -> bool {
        self.key.is_some()
    }

    fn max_body_bytes(&self) -> usize {
        self.max_body_bytes
    }

    fn check_headers(&self, headers: &HeaderMap, _: Option<&str>) -> Result<(), Refusal> {
        verify::check_headers(self.key.as_ref(), headers)
    }

    fn check_body(&self, headers: &HeaderMap, body: &[u8]) -> Result<(), Refusal> {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        verify::check_body_at(self.key.as_ref(), headers, body, now)
    }

    fn parse(&self, body: &[u8]) -> Result<Received, ParseError> {
        let mut received = Received::default();
        match parse(body)? {
            Interaction::Ping => received.answer = Some(Response::Pong.answer()),
            Interaction::Command(c) => {
                received.messages.push(message(*c));
                received.answer = Some(Response::Deferred.answer());
            }
            // Components, autocomplete and modals are not ours: Discord shows them failed.
            Interaction::Other(_) => received.skip(Skip::Ignored, 1),
        }
        Ok(received)
    }

    fn ack_within(&self) -> Option<Duration> {
        Some(ACK_WITHIN)
    }
}

#[cfg(test)]
mod tests;
