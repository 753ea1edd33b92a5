//! A Twilio webhook's form body
//! (<https://www.twilio.com/docs/messaging/guides/webhook-request>) into what ingest does with
//! it. One route takes both kinds Twilio posts: an incoming message (`MessageSid`, `From`,
//! `Body`, `NumMedia` and `MediaUrl{N}` / `MediaContentType{N}` of an MMS) and the status
//! callback of a message Hermes sent (`MessageStatus`, `ErrorCode`,
//! <https://www.twilio.com/docs/messaging/guides/track-outbound-message-status>). A message
//! that is a keyword changes the sender's consent instead of starting a run
//! ([`super::keywords`]). The answer is TwiML, as Twilio expects: empty, or the configured
//! help text for `HELP`.
//!
//! Total over its input: form decoding cannot fail, every field is bounded, a body naming no
//! message is acknowledged and ignored.

use std::collections::HashMap;

use chrono::Utc;
use hermes_types::model::{Inbound, Media, MessageEvent, Platform};
use serde_json::json;

use super::keywords::{Keyword, keyword};
use crate::fields::media_kind;
use crate::inbound::{Answer, Consent, Received, Skip};
use crate::limits::{MAX_ATTACHMENTS, short_field, text_field};
use crate::statuses::{DeliveryStatus, MAX_ERROR_TITLE_CHARS, StatusUpdate};

/// Twilio's `Content-Type` for TwiML.
pub const TWIML: &str = "text/xml";

/// The form's fields by name, the first value of each.
struct Form(HashMap<String, String>);

impl Form {
    fn new(params: &[(String, String)]) -> Self {
        let mut map = HashMap::new();
        for (k, v) in params {
            map.entry(k.clone()).or_insert_with(|| v.clone());
        }
        Self(map)
    }

    /// A short field (an id, a number, a word), bounded.
    fn short(&self, name: &str) -> Option<String> {
        short_field(self.0.get(name).cloned())
    }
}

/// What one webhook posted, from its decoded form `params`; `help_text` answers `HELP`.
pub fn parse(params: &[(String, String)], help_text: Option<&str>) -> Received {
    let form = Form::new(params);
    let mut received = Received {
        answer: Some(twiml(None)),
        ..Received::default()
    };
    let Some(sid) = form.short("MessageSid").or_else(|| form.short("SmsSid")) else {
        received.skip(Skip::Ignored, 1);
        return received;
    };
    if let Some(status) = form.short("MessageStatus") {
        received.statuses.push(status_update(&form, sid, &status));
        return received;
    }
    let Some(from) = form.short("From") else {
        received.skip(Skip::Ignored, 1);
        return received;
    };
    let body = text_field(form.0.get("Body").cloned());
    match keyword(body.as_deref(), form.short("OptOutType").as_deref()) {
        Some(Keyword::Help) => {
            received.skip(Skip::Keyword, 1);
            received.answer = Some(twiml(help_text));
        }
        Some(k) => {
            received.skip(Skip::Keyword, 1);
            received.consents.push(Consent {
                platform: Platform::Sms,
                sender_id: from,
                opted_out: k == Keyword::Stop,
                message_id: Some(sid),
            });
        }
        None => {
            let media = media(&form);
            if body.is_none() && media.is_empty() {
                received.skip(Skip::Ignored, 1);
                return received;
            }
            received.messages.push(Inbound::of(MessageEvent {
                platform: Platform::Sms,
                sender_id: from.clone(),
                chat_id: from,
                text: body,
                media,
                external_message_id: Some(sid),
                sender_name: None,
                received_at: Utc::now(),
                metadata: None,
            }));
        }
    }
    received
}

/// The MMS items of a message: each `MediaUrl{N}` with its `MediaContentType{N}`, the URL
/// kept as the platform's file id (fetched with the account's credentials, only from
/// Twilio's host, [`super::media`]).
fn media(form: &Form) -> Vec<Media> {
    let count = form
        .short("NumMedia")
        .and_then(|n| n.parse::<usize>().ok())
        .unwrap_or(0)
        .min(MAX_ATTACHMENTS);
    (0..count)
        .filter_map(|i| {
            let url = form.short(&format!("MediaUrl{i}"))?;
            let mime = form.short(&format!("MediaContentType{i}"));
            let kind = media_kind(mime.as_deref());
            Some(Media {
                kind,
                platform_id: Some(url),
                url: None,
                mime_type: mime,
            })
        })
        .collect()
}

/// A status callback of the message `sid`.
fn status_update(form: &Form, sid: String, status: &str) -> StatusUpdate {
    let status = match status {
        // Twilio's `undelivered` is a failure the carrier reported: the same to us.
        "undelivered" => DeliveryStatus::Failed,
        other => DeliveryStatus::parse(Some(other)),
    };
    let error_code = form.short("ErrorCode").and_then(|c| c.parse::<i64>().ok());
    let error_title = form
        .short("ErrorMessage")
        .map(|t| t.chars().take(MAX_ERROR_TITLE_CHARS).collect::<String>());
    let error = error_code.map(|code| json!({ "code": code, "message": error_title }));
    StatusUpdate {
        platform: Platform::Sms,
        platform_message_id: sid,
        status,
        recipient_id: form.short("To"),
        occurred_at: Utc::now(),
        error,
        error_code,
        error_title,
    }
}

/// The TwiML answer: empty, or one message of `text`.
fn twiml(text: Option<&str>) -> Answer {
    let body = match text {
        None => r#"<?xml version="1.0" encoding="UTF-8"?><Response/>"#.to_string(),
        Some(text) => format!(
            r#"<?xml version="1.0" encoding="UTF-8"?><Response><Message>{}</Message></Response>"#,
            xml_escape(text)
        ),
    };
    Answer {
        content_type: TWIML,
        body,
    }
}

/// `text` safe inside an XML element.
fn xml_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests;
