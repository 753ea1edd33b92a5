//! `[channels]` of the TOML file: how the chat channels behave beyond their credentials
//! (docs/channels.md): Telegram's groups and edited messages, WhatsApp's templates, where
//! Slack's answers go, SMS segments and keywords, Messenger's message tag.

mod slack;
mod sms;
mod telegram;
mod whatsapp;

use serde::Deserialize;

pub use slack::{SlackChannelReplies, SlackSettings};
pub use sms::{MAX_SEGMENTS, MessageTag, MessengerSettings, SmsSettings};
pub use telegram::{EditPolicy, GroupAnswer, GroupSettings, TelegramSettings};
pub use whatsapp::{Piece, TemplateSpec, TemplateText, WhatsappFile};

/// The `[channels]` section.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ChannelsSettings {
    /// `[channels.telegram]`.
    pub telegram: TelegramSettings,
    /// `[channels.whatsapp]`.
    pub whatsapp: WhatsappFile,
    /// `[channels.slack]`.
    pub slack: SlackSettings,
    /// `[channels.sms]`.
    pub sms: SmsSettings,
    /// `[channels.messenger]`.
    pub messenger: MessengerSettings,
}

impl ChannelsSettings {
    pub(crate) fn validate(&self, problems: &mut Vec<String>) {
        self.telegram.validate(problems);
        self.whatsapp.validate(problems);
        self.sms.validate(problems);
    }
}
