//! Telegram Bot API webhooks: one `Update` per request.
//!
//! Routed: `message`, `edited_message`, `channel_post` and `edited_channel_post` that carry
//! text, a caption, media (photo, document, voice, audio, video, video note, sticker) or a
//! location/venue. Everything else (callback queries, chat member changes, polls, service
//! messages such as "X joined") parses to an [`Update`] without an event, so the webhook can
//! still be acknowledged. Whom a message addresses (groups) and whether it is an edit are
//! read into [`Addressing`], which [`super::groups::admit`] judges.

use hermes_types::model::{Media, MediaKind, MessageEvent, Platform};
use serde::Deserialize;

use super::groups::{Addressing, Author, Facts, RawEntity};
use crate::decode::{ParseError, decode};
use crate::fields::{from_unix_seconds, lenient_i64, location_text};
use crate::limits::{short_field, text_field};

/// One parsed update.
#[derive(Clone, Debug, PartialEq)]
pub struct Update {
    /// Telegram's sequence number of the update.
    pub update_id: i64,
    /// The message to route; `None` for updates we acknowledge but do not route.
    pub event: Option<MessageEvent>,
    /// Whom the message addresses, and whether it is an edit (with every event).
    pub addressing: Option<Addressing>,
}

/// Parses one webhook body. `Err` when it is not JSON or not an `Update` (no `update_id`, or a
/// message without `message_id`/`chat`, or fields of the wrong type).
pub fn parse(body: &[u8]) -> Result<Update, ParseError> {
    let raw: RawUpdate = decode(body)?;
    let (msg, edited) = if let Some(m) = raw.message {
        (m, false)
    } else if let Some(m) = raw.edited_message {
        (m, true)
    } else if let Some(m) = raw.channel_post {
        (m, false)
    } else if let Some(m) = raw.edited_channel_post {
        (m, true)
    } else {
        return Ok(Update {
            update_id: raw.update_id,
            event: None,
            addressing: None,
        });
    };
    let entities = match msg.text {
        Some(_) => &msg.entities,
        None => &msg.caption_entities,
    };
    let replies_to = msg.reply_to_message.as_ref().and_then(|r| r.from.as_ref());
    let facts = Facts::new(
        msg.chat.kind.as_deref(),
        msg.message_id,
        edited,
        entities.clone(),
        replies_to.map(|u| Author {
            id: Some(u.id),
            is_bot: u.is_bot.unwrap_or(false),
            username: short_field(u.username.clone()),
        }),
    );
    let event = event(msg, edited);
    let addressing = event.as_ref().map(|e| facts.addressing(e.text.as_deref()));
    Ok(Update {
        update_id: raw.update_id,
        event,
        addressing,
    })
}

fn event(m: RawMessage, edited: bool) -> Option<MessageEvent> {
    let media = media(&m);
    let text = text_field(m.text.or(m.caption)).or_else(|| {
        if let Some(v) = &m.venue {
            let loc = v.location.as_ref();
            Some(location_text(
                v.title.as_deref(),
                v.address.as_deref(),
                loc.and_then(|l| l.latitude),
                loc.and_then(|l| l.longitude),
            ))
        } else {
            m.location
                .as_ref()
                .map(|l| location_text(None, None, l.latitude, l.longitude))
        }
    });
    if text.is_none() && media.is_empty() {
        return None;
    }

    let chat_id = m.chat.id.to_string();
    let (sender_id, sender_name) = match (&m.from, &m.sender_chat) {
        (Some(u), _) => (u.id.to_string(), user_name(u)),
        (None, Some(c)) => (c.id.to_string(), short_field(c.title.clone())),
        (None, None) => (chat_id.clone(), short_field(m.chat.title.clone())),
    };
    let external_message_id = if edited {
        let at = m.edit_date.or(m.date).unwrap_or(0);
        format!("{chat_id}:{}:edit:{at}", m.message_id)
    } else {
        format!("{chat_id}:{}", m.message_id)
    };
    // An edit arrives when it is made, so it is received then.
    let received_at = from_unix_seconds(if edited {
        m.edit_date.or(m.date)
    } else {
        m.date
    });

    Some(MessageEvent {
        platform: Platform::Telegram,
        sender_id,
        chat_id,
        text,
        media,
        external_message_id: Some(external_message_id),
        sender_name,
        received_at,
        metadata: None,
    })
}

/// "First Last", else "First", else the username.
fn user_name(u: &RawUser) -> Option<String> {
    let full: Vec<&str> = [u.first_name.as_deref(), u.last_name.as_deref()]
        .into_iter()
        .flatten()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    if full.is_empty() {
        short_field(u.username.clone())
    } else {
        short_field(Some(full.join(" ")))
    }
}

fn media(m: &RawMessage) -> Vec<Media> {
    let mut out = Vec::new();
    // Telegram sends every size of a photo; the largest is the original.
    let largest = m
        .photo
        .iter()
        .enumerate()
        .max_by_key(|(i, p)| {
            let area = p.width.unwrap_or(0).saturating_mul(p.height.unwrap_or(0));
            (p.file_size.unwrap_or(0), area, *i)
        })
        .map(|(_, p)| p);
    if let Some(id) = largest.and_then(|p| short_field(p.file_id.clone())) {
        out.push(Media {
            kind: MediaKind::Image,
            platform_id: Some(id),
            url: None,
            mime_type: None,
        });
    }
    let files = [
        (MediaKind::Document, &m.document),
        (MediaKind::Voice, &m.voice),
        (MediaKind::Audio, &m.audio),
        (MediaKind::Video, &m.video),
        (MediaKind::Video, &m.video_note),
        (MediaKind::Sticker, &m.sticker),
    ];
    for (kind, file) in files {
        let Some(f) = file else { continue };
        let Some(id) = short_field(f.file_id.clone()) else {
            continue;
        };
        out.push(Media {
            kind,
            platform_id: Some(id),
            url: None,
            mime_type: short_field(f.mime_type.clone()),
        });
    }
    out
}

#[derive(Deserialize)]
struct RawUpdate {
    update_id: i64,
    #[serde(default)]
    message: Option<RawMessage>,
    #[serde(default)]
    edited_message: Option<RawMessage>,
    #[serde(default)]
    channel_post: Option<RawMessage>,
    #[serde(default)]
    edited_channel_post: Option<RawMessage>,
}

#[derive(Deserialize)]
struct RawMessage {
    message_id: i64,
    #[serde(default)]
    from: Option<RawUser>,
    #[serde(default)]
    sender_chat: Option<RawChat>,
    chat: RawChat,
    #[serde(default, deserialize_with = "lenient_i64")]
    date: Option<i64>,
    #[serde(default, deserialize_with = "lenient_i64")]
    edit_date: Option<i64>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    caption: Option<String>,
    #[serde(default)]
    entities: Vec<RawEntity>,
    #[serde(default)]
    caption_entities: Vec<RawEntity>,
    #[serde(default)]
    reply_to_message: Option<Box<RawReplied>>,
    #[serde(default)]
    photo: Vec<RawPhotoSize>,
    #[serde(default)]
    document: Option<RawFile>,
    #[serde(default)]
    voice: Option<RawFile>,
    #[serde(default)]
    audio: Option<RawFile>,
    #[serde(default)]
    video: Option<RawFile>,
    #[serde(default)]
    video_note: Option<RawFile>,
    #[serde(default)]
    sticker: Option<RawFile>,
    #[serde(default)]
    location: Option<RawLocation>,
    #[serde(default)]
    venue: Option<RawVenue>,
}

/// The message a message replies to: only its author is read.
#[derive(Deserialize)]
struct RawReplied {
    #[serde(default)]
    from: Option<RawUser>,
}

#[derive(Deserialize)]
struct RawUser {
    id: i64,
    #[serde(default)]
    is_bot: Option<bool>,
    #[serde(default)]
    first_name: Option<String>,
    #[serde(default)]
    last_name: Option<String>,
    #[serde(default)]
    username: Option<String>,
}

#[derive(Deserialize)]
struct RawChat {
    id: i64,
    #[serde(default)]
    title: Option<String>,
    #[serde(default, rename = "type")]
    kind: Option<String>,
}

#[derive(Deserialize)]
struct RawPhotoSize {
    #[serde(default)]
    file_id: Option<String>,
    #[serde(default)]
    width: Option<u64>,
    #[serde(default)]
    height: Option<u64>,
    #[serde(default)]
    file_size: Option<u64>,
}

#[derive(Deserialize)]
struct RawFile {
    #[serde(default)]
    file_id: Option<String>,
    #[serde(default)]
    mime_type: Option<String>,
}

#[derive(Deserialize)]
struct RawLocation {
    #[serde(default)]
    latitude: Option<f64>,
    #[serde(default)]
    longitude: Option<f64>,
}

#[derive(Deserialize)]
struct RawVenue {
    #[serde(default)]
    location: Option<RawLocation>,
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    address: Option<String>,
}

#[cfg(test)]
mod tests;
