//! The channel senders: one per chat platform, each in its own file, all on the stage's one
//! HTTP client (10 s timeout) and the shared in-call [`RetryPolicy`]. A platform whose
//! credentials are not configured has no sender; its replies are parked for replay.

mod instagram;
mod markdown;
mod meta_errors;
mod parts;
mod split;
mod telegram;
mod whatsapp;

use hermes_config::DeliverySettings;
use hermes_net::failure::FailureReason;
use hermes_types::model::Platform;

pub use instagram::Instagram;
pub use parts::{Part, parts};
pub use split::split_text;
pub use telegram::{
    Edited, Format, MAX_CHARS as TELEGRAM_MAX_CHARS, MessageRef, Telegram, says as telegram_says,
};
pub use whatsapp::{TemplateMessage, Whatsapp};

use crate::retry_policy::{RetryPolicy, SendFailure};

/// The sender of one chat platform.
pub enum Sender {
    Telegram(Telegram),
    Whatsapp(Whatsapp),
    Instagram(Instagram),
}

impl Sender {
    /// The messages a reply's text becomes on this platform (split to its size; one
    /// Markdown image as a photo).
    pub fn parts(&self, text: &str) -> Vec<Part> {
        match self {
            Sender::Telegram(_) => parts(text, telegram::MAX_CHARS, Some(telegram::MAX_CAPTION)),
            Sender::Whatsapp(_) => parts(text, whatsapp::MAX_CHARS, Some(whatsapp::MAX_CAPTION)),
            Sender::Instagram(_) => parts(text, instagram::MAX_CHARS, None),
        }
    }

    /// The Telegram sender, the one platform whose messages are edited as a draft grows.
    pub fn telegram(&self) -> Option<&Telegram> {
        match self {
            Sender::Telegram(t) => Some(t),
            Sender::Whatsapp(_) | Sender::Instagram(_) => None,
        }
    }

    /// Send an approved template to `chat_id`, with in-call retries: WhatsApp's alone (a
    /// reply outside its 24-hour window); any other platform refuses it. Returns the
    /// message's wamid, which its statuses name.
    pub async fn send_template(
        &self,
        policy: &RetryPolicy,
        chat_id: &str,
        template: &TemplateMessage,
        on_failure: impl FnMut(FailureReason),
    ) -> Result<Option<String>, SendFailure> {
        match self {
            Sender::Whatsapp(s) => s.send_template(policy, chat_id, template, on_failure).await,
            Sender::Telegram(_) | Sender::Instagram(_) => Err(SendFailure {
                reason: FailureReason::InvalidRecipient,
                status: None,
                body: None,
                detail: "message templates are WhatsApp's".into(),
                tries: 0,
            }),
        }
    }

    /// Send one part to `chat_id`, with in-call retries; on Telegram quoting the message
    /// `quote` when there is one (a group's question, docs/channels.md "Group chats").
    /// Returns the platform's id of the message when its answer names one
    /// (docs/channels.md, statuses).
    pub async fn send(
        &self,
        policy: &RetryPolicy,
        chat_id: &str,
        part: &Part,
        quote: Option<&str>,
        on_failure: impl FnMut(FailureReason),
    ) -> Result<Option<String>, SendFailure> {
        match self {
            Sender::Telegram(s) => s.send(policy, chat_id, part, quote, on_failure).await,
            Sender::Whatsapp(s) => s.send(policy, chat_id, part, on_failure).await,
            Sender::Instagram(s) => s.send(policy, chat_id, part, on_failure).await,
        }
    }
}

/// The senders this process has credentials for.
pub struct Senders {
    telegram: Option<Sender>,
    whatsapp: Option<Sender>,
    instagram: Option<Sender>,
}

impl Senders {
    pub fn new(settings: &DeliverySettings, http: &reqwest::Client) -> Self {
        Self {
            telegram: settings
                .telegram
                .as_ref()
                .map(|s| Sender::Telegram(Telegram::new(s, http.clone()))),
            whatsapp: settings
                .whatsapp
                .as_ref()
                .map(|s| Sender::Whatsapp(Whatsapp::new(s, http.clone()))),
            instagram: settings
                .instagram
                .as_ref()
                .map(|s| Sender::Instagram(Instagram::new(s, http.clone()))),
        }
    }

    /// The sender of a chat platform, if configured (`None` for the API channels and Forge
    /// runs too).
    pub fn get(&self, platform: Platform) -> Option<&Sender> {
        match platform {
            Platform::Telegram => self.telegram.as_ref(),
            Platform::Whatsapp => self.whatsapp.as_ref(),
            Platform::Instagram => self.instagram.as_ref(),
            Platform::Api | Platform::Rest | Platform::Forge => None,
        }
    }
}

/// The id a Meta platform gave the message it accepted, at JSON `pointer` of its `answer`
/// (a string, or a number as Instagram may send); `None` when the answer names none.
async fn answer_id(answer: reqwest::Response, pointer: &str) -> Option<String> {
    let body: serde_json::Value = answer.json().await.ok()?;
    match body.pointer(pointer)? {
        serde_json::Value::String(s) if !s.is_empty() => Some(s.clone()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// What enables the sender of `platform`, for a parked reply's reason.
pub fn how_to_enable(platform: Platform) -> &'static str {
    match platform {
        Platform::Telegram => "set TELEGRAM_BOT_TOKEN",
        Platform::Whatsapp => {
            "set D360_API_KEY, or WHATSAPP_ACCESS_TOKEN and WHATSAPP_PHONE_NUMBER_ID"
        }
        Platform::Instagram => "set INSTAGRAM_ACCESS_TOKEN",
        Platform::Api | Platform::Rest => "nothing: API replies need no sender",
        Platform::Forge => "nothing: a Forge run's reply is not sent",
    }
}
