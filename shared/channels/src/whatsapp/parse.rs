//! WhatsApp Cloud API webhooks (also what 360dialog forwards): one body carries any number of
//! entries, each with changes whose `value` holds inbound `messages` and delivery `statuses`.
//!
//! Routed message types: `text`, `image`, `document`, `audio` (a voice note when
//! `audio.voice` is true), `voice`, `video`, `sticker`, `interactive` (button and list
//! replies), `button` (template quick replies) and `location`. Anything else (`reaction`,
//! `unsupported`, `system`, `order`, …), a message that does not parse, and changes that are
//! not `messages` are counted in [`Batch::ignored`]: one odd item never loses the others.

use hermes_types::model::{Media, MediaKind, MessageEvent, Platform};
use serde::Deserialize;
use serde_json::{Map, Value};

use super::statuses::{RawStatus, status};
use crate::decode::{ParseError, decode};
use crate::fields::{from_unix_seconds, lenient_i64, location_text};
use crate::limits::{MAX_ITEMS, short_field, text_field, truncate_utf8};
use crate::statuses::StatusUpdate;

/// What one webhook body carried.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Batch {
    /// Inbound messages to route, in body order.
    pub messages: Vec<MessageEvent>,
    /// Delivery receipts of messages we sent.
    pub statuses: Vec<StatusUpdate>,
    /// Items not routed: unknown message types, items that did not parse, non-`messages`
    /// changes.
    pub ignored: usize,
}

/// Parses one webhook body. `Err` when it is not JSON, not an object, names another `object`
/// than `whatsapp_business_account`, or its entries/changes are not arrays/objects. Items
/// inside a change that do not parse are counted as ignored instead.
pub fn parse(body: &[u8]) -> Result<Batch, ParseError> {
    let raw: RawBody = decode(body)?;
    if let Some(object) = raw.object.as_deref()
        && object != "whatsapp_business_account"
    {
        return Err(ParseError::Shape(format!(
            "object is {:?}, not \"whatsapp_business_account\"",
            truncate_utf8(object, 64)
        )));
    }
    let mut batch = Batch::default();
    let (mut messages, mut statuses) = (0usize, 0usize);
    for change in raw.entry.into_iter().flat_map(|e| e.changes) {
        let is_messages = change.field.as_deref().is_none_or(|f| f == "messages");
        let Some(value) = change.value.filter(|_| is_messages) else {
            batch.ignored += 1;
            continue;
        };
        // Messages and statuses each have their own bound, checked before any work.
        messages += value.messages.len();
        statuses += value.statuses.len();
        if messages.max(statuses) > MAX_ITEMS {
            return Err(ParseError::TooMany(messages.max(statuses)));
        }
        let phone_number_id = value.metadata.and_then(|m| short_field(m.phone_number_id));
        for item in value.messages {
            match serde_json::from_value::<RawMessage>(item) {
                Ok(m) => match event(m, &value.contacts, phone_number_id.as_deref()) {
                    Some(e) => batch.messages.push(e),
                    None => batch.ignored += 1,
                },
                Err(_) => batch.ignored += 1,
            }
        }
        for item in value.statuses {
            match serde_json::from_value::<RawStatus>(item)
                .ok()
                .and_then(status)
            {
                Some(s) => batch.statuses.push(s),
                None => batch.ignored += 1,
            }
        }
    }
    Ok(batch)
}

fn event(
    m: RawMessage,
    contacts: &[RawContact],
    phone_number_id: Option<&str>,
) -> Option<MessageEvent> {
    let from = short_field(m.from)?;
    let mut reply_id = None;
    let mut media = Vec::new();
    let mut push = |kind, f: Option<RawMedia>| -> Option<String> {
        let f = f?;
        if let Some(id) = short_field(f.id.clone()) {
            media.push(Media {
                kind,
                platform_id: Some(id),
                url: short_field(f.link),
                mime_type: short_field(f.mime_type),
            });
        }
        f.caption
    };
    let text = match m.kind.as_deref()? {
        "text" => m.text.and_then(|t| t.body),
        "image" => push(MediaKind::Image, m.image),
        "document" => push(MediaKind::Document, m.document),
        "video" => push(MediaKind::Video, m.video),
        "sticker" => push(MediaKind::Sticker, m.sticker),
        "voice" => push(MediaKind::Voice, m.voice.or(m.audio)),
        "audio" => {
            let kind = if m.audio.as_ref().is_some_and(|a| a.voice) {
                MediaKind::Voice
            } else {
                MediaKind::Audio
            };
            push(kind, m.audio)
        }
        "interactive" => {
            let i = m.interactive?;
            let reply = i.button_reply.or(i.list_reply)?;
            reply_id = reply.id;
            reply.title
        }
        "button" => {
            let b = m.button?;
            reply_id = b.payload;
            b.text
        }
        "location" => {
            let l = m.location?;
            Some(location_text(
                l.name.as_deref(),
                l.address.as_deref(),
                l.latitude,
                l.longitude,
            ))
        }
        _ => return None,
    };
    let text = text_field(text);
    if text.is_none() && media.is_empty() {
        return None;
    }

    let sender_name = contacts
        .iter()
        .find(|c| c.wa_id.as_deref() == Some(from.as_str()))
        .or(match contacts {
            [only] => Some(only),
            _ => None,
        })
        .and_then(|c| c.profile.as_ref())
        .and_then(|p| short_field(p.name.clone()));

    let mut meta = Map::new();
    if let Some(id) = phone_number_id {
        meta.insert("phone_number_id".into(), Value::String(id.to_owned()));
    }
    if let Some(id) = short_field(reply_id) {
        meta.insert("reply_id".into(), Value::String(id));
    }

    Some(MessageEvent {
        platform: Platform::Whatsapp,
        sender_id: from.clone(),
        chat_id: from,
        text,
        media,
        external_message_id: short_field(m.id),
        sender_name,
        received_at: from_unix_seconds(m.timestamp),
        metadata: (!meta.is_empty()).then_some(Value::Object(meta)),
    })
}

#[derive(Deserialize)]
struct RawBody {
    #[serde(default)]
    object: Option<String>,
    #[serde(default)]
    entry: Vec<RawEntry>,
}

#[derive(Deserialize)]
struct RawEntry {
    #[serde(default)]
    changes: Vec<RawChange>,
}

#[derive(Deserialize)]
struct RawChange {
    #[serde(default)]
    field: Option<String>,
    #[serde(default)]
    value: Option<RawValue>,
}

#[derive(Deserialize)]
struct RawValue {
    #[serde(default)]
    metadata: Option<RawPhoneMetadata>,
    #[serde(default)]
    contacts: Vec<RawContact>,
    /// Parsed one by one, so one odd message does not lose the others.
    #[serde(default)]
    messages: Vec<Value>,
    #[serde(default)]
    statuses: Vec<Value>,
}

#[derive(Deserialize)]
struct RawPhoneMetadata {
    #[serde(default)]
    phone_number_id: Option<String>,
}

#[derive(Deserialize)]
struct RawContact {
    #[serde(default)]
    wa_id: Option<String>,
    #[serde(default)]
    profile: Option<RawProfile>,
}

#[derive(Deserialize)]
struct RawProfile {
    #[serde(default)]
    name: Option<String>,
}

#[derive(Deserialize)]
struct RawMessage {
    #[serde(default)]
    from: Option<String>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default, deserialize_with = "lenient_i64")]
    timestamp: Option<i64>,
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    text: Option<RawText>,
    #[serde(default)]
    image: Option<RawMedia>,
    #[serde(default)]
    document: Option<RawMedia>,
    #[serde(default)]
    audio: Option<RawMedia>,
    #[serde(default)]
    voice: Option<RawMedia>,
    #[serde(default)]
    video: Option<RawMedia>,
    #[serde(default)]
    sticker: Option<RawMedia>,
    #[serde(default)]
    interactive: Option<RawInteractive>,
    #[serde(default)]
    button: Option<RawButton>,
    #[serde(default)]
    location: Option<RawLocation>,
}

#[derive(Deserialize)]
struct RawText {
    #[serde(default)]
    body: Option<String>,
}

#[derive(Deserialize)]
struct RawMedia {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    mime_type: Option<String>,
    #[serde(default)]
    caption: Option<String>,
    /// Some BSPs add a download link.
    #[serde(default)]
    link: Option<String>,
    /// `audio` only: a voice note recorded in the app.
    #[serde(default)]
    voice: bool,
}

#[derive(Deserialize)]
struct RawInteractive {
    #[serde(default)]
    button_reply: Option<RawReply>,
    #[serde(default)]
    list_reply: Option<RawReply>,
}

#[derive(Deserialize)]
struct RawReply {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    title: Option<String>,
}

#[derive(Deserialize)]
struct RawButton {
    #[serde(default)]
    payload: Option<String>,
    #[serde(default)]
    text: Option<String>,
}

#[derive(Deserialize)]
struct RawLocation {
    #[serde(default)]
    latitude: Option<f64>,
    #[serde(default)]
    longitude: Option<f64>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    address: Option<String>,
}

#[cfg(test)]
mod tests;
