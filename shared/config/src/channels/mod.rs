//! `[channels]` of the TOML file: how the chat channels behave beyond their credentials
//! (docs/channels.md): Telegram's groups and edited messages, WhatsApp's templates.

mod telegram;
mod whatsapp;

use serde::Deserialize;

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
}

impl ChannelsSettings {
    pub(crate) fn validate(&self, problems: &mut Vec<String>) {
        self.telegram.validate(problems);
        self.whatsapp.validate(problems);
    }
}
