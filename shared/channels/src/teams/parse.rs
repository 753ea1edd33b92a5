//! One Bot Framework activity as Teams posts it to the bot's messaging endpoint
//! (<https://learn.microsoft.com/en-us/azure/bot-service/rest-api/bot-framework-rest-connector-api-reference#activity-object>,
//! and Teams' additions in
//! <https://learn.microsoft.com/en-us/microsoftteams/platform/bots/how-to/conversations/conversation-messages>).
//!
//! - A `message` in a personal chat (`conversationType: personal`) is routed.
//! - In a channel or a group chat only a message that mentions the bot (an entity of type
//!   `mention` naming the `recipient`) is routed; the mention's `<at>…</at>` text is taken
//!   out, and the answer is a reply to the message (its `id` as the quote). Others are
//!   `not_addressed`.
//! - Files come as attachments: a file's pre-authorized `downloadUrl`
//!   (`application/vnd.microsoft.teams.file.download.info`), or an inline image's
//!   `contentUrl` on the Connector service, fetched with the bot's token.
//! - Everything else (`conversationUpdate`, `messageReaction`, `invoke`, `typing`, the bot's
//!   own messages, edits) is acknowledged without a run.
//!
//! The dedupe key is the activity's `id`, the same when the Connector sends it again.
//! Total over its input: a body that is not a JSON object is `Err`; an activity that does
//! not read as a message is skipped, never a panic.

use hermes_types::model::{ChatKind, Inbound, Media, MessageEvent, Platform};
use serde::Deserialize;
use serde_json::Value;
use url::Url;

use super::chat::{TeamsChat, is_conversation_id};
use crate::decode::{ParseError, decode};
use crate::fields::media_kind;
use crate::inbound::Skip;
use crate::limits::{
    MAX_ATTACHMENTS, MAX_FIELD_BYTES, MAX_ITEMS, short_field, text_field, truncate_utf8,
};

/// The content type of a file sent to the bot, with its pre-authorized download URL.
const FILE_DOWNLOAD_INFO: &str = "application/vnd.microsoft.teams.file.download.info";

/// What one activity asks of us.
#[derive(Clone, Debug)]
pub enum Request {
    /// A message to answer.
    Message(Box<Inbound>),
    /// Acknowledged without a run, for this reason.
    Skipped(Skip),
}

/// An activity, loosely: a field of another type reads as absent.
#[derive(Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct RawActivity {
    #[serde(rename = "type")]
    kind: Option<Value>,
    id: Option<Value>,
    timestamp: Option<Value>,
    service_url: Option<Value>,
    from: Option<Value>,
    recipient: Option<Value>,
    conversation: Option<Value>,
    text: Option<Value>,
    attachments: Option<Vec<Value>>,
    entities: Option<Vec<Value>>,
}

/// A string field, cut to [`MAX_FIELD_BYTES`]; anything else is absent.
fn field(v: Option<&Value>) -> Option<String> {
    short_field(v.and_then(Value::as_str).map(str::to_owned))
}

/// The `serviceUrl` an activity names, as its token's `serviceurl` claim must name it.
pub fn service_url(body: &[u8]) -> Option<String> {
    let raw: RawActivity = decode(body).ok()?;
    field(raw.service_url.as_ref())
}

/// Read one activity.
pub fn parse(body: &[u8]) -> Result<Request, ParseError> {
    let a: RawActivity = decode(body)?;
    if field(a.kind.as_ref()).as_deref() != Some("message") {
        return Ok(Request::Skipped(Skip::Ignored));
    }
    let conversation = a.conversation.as_ref();
    let (Some(id), Some(service_url), Some(sender), Some(conversation_id)) = (
        field(a.id.as_ref()),
        field(a.service_url.as_ref()).and_then(|u| Url::parse(&u).ok()),
        field(a.from.as_ref().and_then(|f| f.get("id"))),
        field(conversation.and_then(|c| c.get("id"))).filter(|c| is_conversation_id(c)),
    ) else {
        return Ok(Request::Skipped(Skip::Ignored));
    };
    let bot = field(a.recipient.as_ref().and_then(|r| r.get("id")));
    // The bot's own messages never come back in Teams, but a loop is cheap to refuse.
    if bot.as_deref() == Some(sender.as_str()) {
        return Ok(Request::Skipped(Skip::Ignored));
    }
    let personal = match field(conversation.and_then(|c| c.get("conversationType"))).as_deref() {
        Some("personal") => true,
        Some(_) => false,
        None => {
            conversation
                .and_then(|c| c.get("isGroup"))
                .and_then(Value::as_bool)
                != Some(true)
        }
    };
    let entities = a.entities.unwrap_or_default();
    let mentions: Vec<String> = entities
        .iter()
        .take(MAX_ITEMS)
        .filter(|e| e.get("type").and_then(Value::as_str) == Some("mention"))
        .filter(|e| bot.is_some() && field(e.get("mentioned").and_then(|m| m.get("id"))) == bot)
        .filter_map(|e| field(e.get("text")))
        .collect();
    if !personal && mentions.is_empty() {
        return Ok(Request::Skipped(Skip::NotAddressed));
    }
    let text = a.text.as_ref().and_then(Value::as_str).map(|t| {
        let mut t = t.to_owned();
        for m in &mentions {
            t = t.replace(m.as_str(), "");
        }
        t.trim().to_owned()
    });
    let text = text_field(text.filter(|t| !t.is_empty()));
    let media = attachments(a.attachments.unwrap_or_default());
    if text.is_none() && media.is_empty() {
        return Ok(Request::Skipped(Skip::Ignored));
    }
    let received_at = field(a.timestamp.as_ref())
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(&t).ok())
        .map_or_else(chrono::Utc::now, |t| t.with_timezone(&chrono::Utc));
    let chat = TeamsChat {
        service_url,
        conversation: conversation_id,
    };
    let mut inbound = Inbound::of(MessageEvent {
        platform: Platform::Teams,
        sender_id: sender,
        chat_id: chat.chat_id(),
        text,
        media,
        sender_name: field(a.from.as_ref().and_then(|f| f.get("name"))),
        external_message_id: Some(id.clone()),
        received_at,
        metadata: None,
    });
    if !personal {
        inbound.chat_kind = ChatKind::Group;
        // In a channel the answer is a reply to the message that mentioned the bot.
        inbound.quote = Some(id);
    }
    Ok(Request::Message(Box::new(inbound)))
}

/// The message's files, as references to fetch later ([`super::media`]): a file's
/// `downloadUrl`, or an image's `contentUrl`. Cards and the HTML copy of the text are not
/// files.
fn attachments(raw: Vec<Value>) -> Vec<Media> {
    raw.iter()
        .take(MAX_ITEMS)
        .filter_map(|a| {
            let content_type = field(a.get("contentType"))?;
            let (url, mime) = if content_type == FILE_DOWNLOAD_INFO {
                let content = a.get("content")?;
                let url = field(content.get("downloadUrl"))?;
                let mime = field(content.get("fileType")).and_then(|t| mime_of(&t));
                (url, mime)
            } else if content_type.starts_with("image/") {
                (field(a.get("contentUrl"))?, Some(content_type))
            } else {
                return None;
            };
            let kind = media_kind(mime.as_deref());
            Some(Media {
                kind,
                platform_id: None,
                url: Some(truncate_utf8(&url, MAX_FIELD_BYTES).to_owned()),
                // `image/*` says only that it is an image: the fetch reads the real type.
                mime_type: mime.filter(|m| !m.ends_with("/*")),
            })
        })
        .take(MAX_ATTACHMENTS)
        .collect()
}

/// The media type of a file's extension as Teams names it (`png`, `jpg`, …).
fn mime_of(file_type: &str) -> Option<String> {
    let mime = match file_type.to_ascii_lowercase().as_str() {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "pdf" => "application/pdf",
        "mp3" => "audio/mpeg",
        "m4a" => "audio/mp4",
        "wav" => "audio/wav",
        "mp4" => "video/mp4",
        _ => return None,
    };
    Some(mime.to_owned())
}

#[cfg(test)]
mod tests;
