//! One `MESSAGE_CREATE` the Gateway dispatches
//! (<https://discord.com/developers/docs/events/gateway-events#message-create>), read into the
//! message the router takes, or the reason it is not one: a direct message is always
//! answered; in a guild channel only a message that mentions the bot or replies to it (the
//! rule every chat channel follows, "answered only when addressed"). The bot's own messages
//! and those of other bots and webhooks are never answered, or two bots would talk forever.
//!
//! No interaction travels with the message, so its answer goes to the channel with the bot
//! token (`POST /channels/{id}/messages`, [`super::send`]).

use chrono::{DateTime, Utc};
use hermes_types::model::{ChatKind, Inbound, Media, MessageEvent, Platform};
use serde::Deserialize;

use super::parse::snowflake;
use crate::decode::{ParseError, decode};
use crate::limits::{MAX_ATTACHMENTS, MAX_FIELD_BYTES, short_field, text_field, truncate_utf8};

/// The bot's own user id (READY's `user.id`): a snowflake.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct BotId(String);

impl BotId {
    /// `id` as the bot's id, or `None` when it is not a snowflake.
    pub fn new(id: impl Into<String>) -> Option<Self> {
        let id = id.into();
        snowflake(&id).then_some(Self(id))
    }

    /// The id's digits.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Why a `MESSAGE_CREATE` is not routed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Skipped {
    /// The bot's own message (its answers come back as events too).
    Own,
    /// Another bot's or a webhook's message.
    Bot,
    /// A guild message that neither mentions the bot nor replies to it.
    NotAddressed,
    /// Nothing to answer: no text and no attachment, or a system message (joins, pins, …).
    Empty,
}

impl Skipped {
    /// The metric label (`hermes_discord_gateway_events_total{outcome}`).
    pub fn as_str(self) -> &'static str {
        match self {
            Skipped::Own => "own",
            Skipped::Bot => "bot",
            Skipped::NotAddressed => "not_addressed",
            Skipped::Empty => "empty",
        }
    }
}

/// What one `MESSAGE_CREATE` is.
#[derive(Clone, Debug)]
pub enum Message {
    /// A message to route.
    Routed(Box<Inbound>),
    /// Not one to answer, and why.
    Skipped(Skipped),
}

/// Message types a person writes: `DEFAULT` (0) and `REPLY` (19)
/// (<https://discord.com/developers/docs/resources/message#message-object-message-types>).
const PERSON_TYPES: [u8; 2] = [0, 19];

#[derive(Deserialize)]
struct Raw {
    id: String,
    channel_id: String,
    guild_id: Option<String>,
    author: Author,
    member: Option<Member>,
    #[serde(default)]
    content: String,
    timestamp: Option<String>,
    #[serde(rename = "type", default)]
    kind: u8,
    webhook_id: Option<String>,
    #[serde(default)]
    mentions: Vec<Mentioned>,
    #[serde(default)]
    attachments: Vec<serde_json::Value>,
    referenced_message: Option<Box<Referenced>>,
}

#[derive(Deserialize)]
struct Author {
    id: String,
    username: Option<String>,
    global_name: Option<String>,
    #[serde(default)]
    bot: bool,
}

#[derive(Deserialize)]
struct Member {
    nick: Option<String>,
}

#[derive(Deserialize)]
struct Mentioned {
    id: String,
}

/// The message replied to; only its author matters.
#[derive(Deserialize)]
struct Referenced {
    author: Option<Mentioned>,
}

#[derive(Deserialize)]
struct Attachment {
    id: Option<String>,
    url: Option<String>,
    content_type: Option<String>,
}

/// Reads the `d` of one `MESSAGE_CREATE` dispatch, for the bot `bot`.
pub fn parse_message(d: &[u8], bot: &BotId) -> Result<Message, ParseError> {
    let raw: Raw = decode(d)?;
    let ids = [&raw.id, &raw.channel_id, &raw.author.id];
    if !ids
        .into_iter()
        .chain(raw.guild_id.as_ref())
        .all(|id| snowflake(id))
    {
        return Err(ParseError::Shape("an id that is not a snowflake".into()));
    }
    if raw.author.id == bot.0 {
        return Ok(Message::Skipped(Skipped::Own));
    }
    if raw.author.bot || raw.webhook_id.is_some() {
        return Ok(Message::Skipped(Skipped::Bot));
    }
    if !PERSON_TYPES.contains(&raw.kind) {
        return Ok(Message::Skipped(Skipped::Empty));
    }
    let direct = raw.guild_id.is_none();
    let mentioned = raw.mentions.iter().any(|m| m.id == bot.0);
    let replied_to = (raw.referenced_message.as_ref())
        .and_then(|r| r.author.as_ref())
        .is_some_and(|a| a.id == bot.0);
    if !direct && !mentioned && !replied_to {
        return Ok(Message::Skipped(Skipped::NotAddressed));
    }
    let text = text_field(Some(without_mention(&raw.content, bot).trim().to_owned()));
    let media = attachments(raw.attachments);
    if text.is_none() && media.is_empty() {
        return Ok(Message::Skipped(Skipped::Empty));
    }
    let sender_name = (raw.member.and_then(|m| m.nick))
        .or(raw.author.global_name)
        .or(raw.author.username)
        .filter(|n| !n.trim().is_empty());
    let received_at = (raw.timestamp.as_deref())
        .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
        .map_or_else(Utc::now, |t| t.with_timezone(&Utc));
    let mut inbound = Inbound::of(MessageEvent {
        platform: Platform::Discord,
        sender_id: raw.author.id,
        chat_id: raw.channel_id,
        text,
        media,
        // A resumed session replays what it missed: the message id makes one run of it.
        external_message_id: Some(raw.id),
        sender_name: short_field(sender_name),
        received_at,
        metadata: None,
    });
    if !direct {
        // Everyone in a guild channel reads the answer.
        inbound.chat_kind = ChatKind::Group;
    }
    Ok(Message::Routed(Box::new(inbound)))
}

/// `text` without the bot's mention (`<@id>`, or `<@!id>` by nickname), which only
/// addresses it.
fn without_mention(text: &str, bot: &BotId) -> String {
    let id = bot.as_str();
    text.replace(&format!("<@{id}>"), "")
        .replace(&format!("<@!{id}>"), "")
}

/// A message's attachments as media: their CDN URLs (signed by Discord, fetched without a
/// credential) and content types. Only web URLs are kept; which hosts a fetch may reach is
/// the SSRF guard's to decide at fetch time, as for every platform (docs/channels.md,
/// "Media").
fn attachments(raw: Vec<serde_json::Value>) -> Vec<Media> {
    raw.into_iter()
        .take(MAX_ATTACHMENTS)
        .filter_map(|a| serde_json::from_value::<Attachment>(a).ok())
        .filter_map(|a| {
            let url = a
                .url
                .filter(|u| u.starts_with("https://") || u.starts_with("http://"))?;
            let mime = short_field(a.content_type);
            // Discord's voice messages are `audio/ogg` attachments.
            Some(Media {
                kind: crate::media::kind_of_mime(mime.as_deref()),
                platform_id: short_field(a.id),
                url: Some(truncate_utf8(&url, MAX_FIELD_BYTES).to_owned()),
                mime_type: mime,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests;
