//! One Events API request (<https://api.slack.com/apis/events-api#receiving-events>): its
//! outer envelope, and the one event inside it.
//!
//! - `url_verification` (<https://api.slack.com/events/url_verification>): the challenge,
//!   echoed back once the signature holds.
//! - `event_callback` with a `message` in a direct message (`channel_type: "im"`, the
//!   `message.im` subscription) or an `app_mention` in a channel: routed, its text and its
//!   files (<https://api.slack.com/types/file>). The run's chat id names the thread the
//!   answer goes in ([`super::chat`]): the message's own thread, else, for a mention at a
//!   channel's top level, a new thread under it (`[channels.slack] channel_replies`).
//!   The dedupe key is the envelope's `event_id`, the same on each of Slack's retries.
//! - Everything else is acknowledged without a run: the bot's own messages and other bots'
//!   (`bot_id`), edits and deletions (`message_changed`, `message_deleted`), other subtypes,
//!   channel messages that do not mention the bot (`not_addressed`), `app_rate_limited`
//!   notices and events of other types.
//!
//! Total over its input: a body that is not a JSON object is `Err`; an event that does not
//! read as one is skipped, never a panic.

use hermes_config::SlackChannelReplies;
use hermes_types::model::{ChatKind, Inbound, Media, MessageEvent, Platform};
use serde::Deserialize;
use serde_json::Value;

use super::chat::{SlackChat, Ts, is_conversation_id};
use crate::decode::{ParseError, decode};
use crate::fields::from_unix_seconds;
use crate::inbound::Skip;
use crate::limits::{MAX_ATTACHMENTS, MAX_FIELD_BYTES, short_field, text_field, truncate_utf8};

/// The longest `url_verification` challenge echoed back (Slack's are about 50 characters).
pub const MAX_CHALLENGE_CHARS: usize = 512;

/// What one Events API request asks of us.
#[derive(Clone, Debug)]
pub enum Request {
    /// `url_verification`: answer with this challenge.
    Challenge(String),
    /// A message to answer.
    Message(Box<Inbound>),
    /// Acknowledged without a run, for this reason.
    Skipped(Skip),
}

/// The outer envelope of every request.
#[derive(Deserialize)]
struct RawEnvelope {
    #[serde(rename = "type", default)]
    kind: Option<Value>,
    #[serde(default)]
    challenge: Option<Value>,
    #[serde(default)]
    event_id: Option<Value>,
    #[serde(default)]
    event: Option<Value>,
    #[serde(default)]
    authorizations: Option<Value>,
}

/// The inner event of an `event_callback`, loosely: a field of another type reads as absent.
#[derive(Default, Deserialize)]
#[serde(default)]
struct RawEvent {
    #[serde(rename = "type")]
    kind: Option<Value>,
    subtype: Option<Value>,
    channel: Option<Value>,
    channel_type: Option<Value>,
    user: Option<Value>,
    bot_id: Option<Value>,
    text: Option<Value>,
    ts: Option<Value>,
    thread_ts: Option<Value>,
    files: Option<Vec<Value>>,
    user_profile: Option<Value>,
}

/// One of the event's files, loosely.
#[derive(Default, Deserialize)]
#[serde(default)]
struct RawFile {
    id: Option<Value>,
    mimetype: Option<Value>,
    url_private_download: Option<Value>,
    url_private: Option<Value>,
}

/// A string field, cut to [`MAX_FIELD_BYTES`]; anything else is absent.
fn field(v: Option<&Value>) -> Option<String> {
    short_field(v.and_then(Value::as_str).map(str::to_owned))
}

/// Read one Events API request. `replies` says where a mention at a channel's top level is
/// answered.
pub fn parse(body: &[u8], replies: SlackChannelReplies) -> Result<Request, ParseError> {
    let raw: RawEnvelope = decode(body)?;
    match raw.kind.as_ref().and_then(Value::as_str) {
        Some("url_verification") => {
            let challenge = raw.challenge.as_ref().and_then(Value::as_str);
            let printable = |c: &str| c.bytes().all(|b| (0x20..=0x7e).contains(&b));
            match challenge {
                Some(c) if !c.is_empty() && c.len() <= MAX_CHALLENGE_CHARS && printable(c) => {
                    Ok(Request::Challenge(c.to_owned()))
                }
                _ => Err(ParseError::Shape(
                    "url_verification without a printable challenge".into(),
                )),
            }
        }
        Some("event_callback") => {
            let bot = raw
                .authorizations
                .as_ref()
                .and_then(Value::as_array)
                .and_then(|a| a.first())
                .and_then(|a| field(a.get("user_id")));
            let event_id = field(raw.event_id.as_ref());
            let event = raw
                .event
                .and_then(|e| serde_json::from_value::<RawEvent>(e).ok())
                .unwrap_or_default();
            Ok(message(event, event_id, bot.as_deref(), replies))
        }
        _ => Ok(Request::Skipped(Skip::Ignored)),
    }
}

/// The message an event is, or why it is skipped.
fn message(
    e: RawEvent,
    event_id: Option<String>,
    bot: Option<&str>,
    replies: SlackChannelReplies,
) -> Request {
    let kind = field(e.kind.as_ref());
    // A file upload is a message with its files; every other subtype (edits, deletions,
    // joins, …) is not something a person asked.
    match field(e.subtype.as_ref()).as_deref() {
        None | Some("file_share" | "thread_broadcast") => {}
        Some("message_changed") => return Request::Skipped(Skip::EditIgnored),
        Some(_) => return Request::Skipped(Skip::Ignored),
    }
    // A conversation id that is not one (a `.` or `:` in it) could not be answered there.
    let (Some(channel), Some(user), Some(ts)) = (
        field(e.channel.as_ref()).filter(|c| is_conversation_id(c)),
        field(e.user.as_ref()),
        field(e.ts.as_ref()).and_then(|t| t.parse::<Ts>().ok()),
    ) else {
        return Request::Skipped(Skip::Ignored);
    };
    // The bot's own messages come back as events too: answering them would loop.
    if e.bot_id.is_some() || Some(user.as_str()) == bot {
        return Request::Skipped(Skip::Ignored);
    }
    let direct = field(e.channel_type.as_ref()).as_deref() == Some("im");
    let thread = field(e.thread_ts.as_ref()).and_then(|t| t.parse::<Ts>().ok());
    let (chat_kind, thread) = match kind.as_deref() {
        Some("message") if direct => (ChatKind::Direct, thread),
        // A channel message reaches us only if the app subscribed to more than it needs:
        // the bot answers in channels only when mentioned, and the mention comes as its own
        // `app_mention` event.
        Some("message") => return Request::Skipped(Skip::NotAddressed),
        // In a direct message the `message.im` event is the one answered.
        Some("app_mention") if channel.starts_with('D') => return Request::Skipped(Skip::Ignored),
        Some("app_mention") => match (thread, replies) {
            (Some(t), _) => (ChatKind::Group, Some(t)),
            (None, SlackChannelReplies::Thread) => (ChatKind::Group, Some(ts)),
            (None, SlackChannelReplies::Channel) => (ChatKind::Group, None),
        },
        _ => return Request::Skipped(Skip::Ignored),
    };
    let text = e
        .text
        .as_ref()
        .and_then(Value::as_str)
        .map(|t| without_mention(t, bot));
    let media = files(e.files.unwrap_or_default());
    let text = text_field(text.map(|t| t.trim().to_owned()));
    if text.is_none() && media.is_empty() {
        return Request::Skipped(Skip::Ignored);
    }
    let sender_name = e.user_profile.as_ref().and_then(|p| {
        field(p.get("display_name"))
            .or_else(|| field(p.get("real_name")))
            .filter(|n| !n.trim().is_empty())
    });
    let chat = SlackChat { channel, thread };
    let mut inbound = Inbound::of(MessageEvent {
        platform: Platform::Slack,
        sender_id: user,
        chat_id: chat.chat_id(),
        text,
        media,
        // Each of Slack's retries carries the event's id again: the dedupe key.
        external_message_id: event_id,
        sender_name,
        received_at: from_unix_seconds(i64::try_from(ts.secs()).ok()),
        metadata: None,
    });
    inbound.chat_kind = chat_kind;
    Request::Message(Box::new(inbound))
}

/// `text` without the bot's own mention (`<@U…>`), which only addresses it.
fn without_mention(text: &str, bot: Option<&str>) -> String {
    match bot {
        Some(bot) => text.replace(&format!("<@{bot}>"), ""),
        None => text.to_owned(),
    }
}

/// The files of a message, as references: the file's id and its `url_private` download,
/// fetched later with the bot token ([`super::media`]).
fn files(raw: Vec<Value>) -> Vec<Media> {
    raw.into_iter()
        .take(MAX_ATTACHMENTS)
        .filter_map(|f| serde_json::from_value::<RawFile>(f).ok())
        .filter_map(|f| {
            let url =
                field(f.url_private_download.as_ref()).or_else(|| field(f.url_private.as_ref()))?;
            let mime = field(f.mimetype.as_ref());
            // Slack's voice clips are audio files (`audio/webm`, `audio/mp4`).
            Some(Media {
                kind: crate::media::kind_of_mime(mime.as_deref()),
                platform_id: field(f.id.as_ref()),
                url: Some(truncate_utf8(&url, MAX_FIELD_BYTES).to_owned()),
                mime_type: mime,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests;
