//! How each platform shows a person that their message is being answered (docs/channels.md,
//! "Presence"): the call, and how often it is made. Each platform's `presence.rs` builds its
//! request; `hermes-presence` decides when to call, runs the calls on their own tasks and
//! counts them. [`PresenceCall::configured`] is where a platform's presence is registered.

use std::time::Duration;

use hermes_config::DeliverySettings;
use hermes_types::model::{Platform, ReplyTo};
use reqwest::RequestBuilder;

use crate::{discord, messenger, teams, telegram, whatsapp};

/// When a platform's presence call is made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cadence {
    /// Once, when the run starts on the message it names (the platform clears it when the
    /// reply arrives).
    Once,
    /// At once and again at this period while the work goes on (the platform shows it for a
    /// few seconds only).
    Every(Duration),
}

/// The presence call of one platform.
pub enum PresenceCall {
    /// Telegram's renewed `typing` action.
    Telegram(telegram::presence::Typing),
    /// WhatsApp's read receipt with typing indicator.
    Whatsapp(whatsapp::presence::ReadAndTyping),
    /// Messenger's sender actions: `mark_seen` first, then a renewed `typing_on`.
    Messenger(messenger::presence::SenderActions),
    /// Teams' renewed `typing` activity.
    Teams(teams::presence::Typing),
    /// Discord's renewed typing indicator, for a message the Gateway connector received.
    Discord(discord::presence::Typing),
}

impl PresenceCall {
    /// The platforms that show presence, so their metric series start at 0.
    pub const PLATFORMS: [Platform; 5] = [
        Platform::Whatsapp,
        Platform::Telegram,
        Platform::Messenger,
        Platform::Teams,
        Platform::Discord,
    ];

    /// The calls of the platforms `settings` has credentials for.
    pub fn configured(settings: &DeliverySettings) -> Vec<PresenceCall> {
        let calls = [
            (settings.telegram.as_ref())
                .map(|s| PresenceCall::Telegram(telegram::presence::Typing::new(s))),
            (settings.whatsapp.as_ref())
                .map(|s| PresenceCall::Whatsapp(whatsapp::presence::ReadAndTyping::new(s))),
            (settings.messenger.as_ref())
                .map(|s| PresenceCall::Messenger(messenger::presence::SenderActions::new(s))),
            (settings.teams.as_ref()).map(|s| PresenceCall::Teams(teams::presence::Typing::new(s))),
            discord::presence::Typing::new(&settings.discord).map(PresenceCall::Discord),
        ];
        calls.into_iter().flatten().collect()
    }

    /// The platform it shows presence on.
    pub fn platform(&self) -> Platform {
        match self {
            PresenceCall::Telegram(_) => Platform::Telegram,
            PresenceCall::Whatsapp(_) => Platform::Whatsapp,
            PresenceCall::Messenger(_) => Platform::Messenger,
            PresenceCall::Teams(_) => Platform::Teams,
            PresenceCall::Discord(_) => Platform::Discord,
        }
    }

    /// When it is made.
    pub fn cadence(&self) -> Cadence {
        match self {
            PresenceCall::Telegram(_) => Cadence::Every(telegram::presence::TYPING_EVERY),
            PresenceCall::Whatsapp(_) => Cadence::Once,
            PresenceCall::Messenger(_) => Cadence::Every(messenger::presence::TYPING_EVERY),
            PresenceCall::Teams(_) => Cadence::Every(teams::presence::TYPING_EVERY),
            PresenceCall::Discord(_) => Cadence::Every(discord::presence::TYPING_EVERY),
        }
    }

    /// The request that shows the person of `to` their message is being worked on, on
    /// `http`; `read` names their message where the platform marks it read. `None` when
    /// there is nothing to call (WhatsApp without a message to mark).
    pub fn request(
        &self,
        http: &reqwest::Client,
        to: &ReplyTo,
        read: Option<&str>,
    ) -> Option<RequestBuilder> {
        match self {
            PresenceCall::Telegram(t) => Some(t.request(http, &to.chat_id)),
            PresenceCall::Whatsapp(w) => read.map(|wamid| w.request(http, wamid)),
            PresenceCall::Messenger(m) => Some(m.typing_on(http, &to.chat_id)),
            PresenceCall::Teams(t) => t.request(http, &to.chat_id),
            PresenceCall::Discord(d) => d.request(http, to),
        }
    }

    /// The call made once before the renewed ones, where the platform has one (Messenger's
    /// `mark_seen`: its message is seen, then the typing begins).
    pub fn first(&self, http: &reqwest::Client, to: &ReplyTo) -> Option<RequestBuilder> {
        match self {
            PresenceCall::Messenger(m) => Some(m.mark_seen(http, &to.chat_id)),
            PresenceCall::Telegram(_)
            | PresenceCall::Whatsapp(_)
            | PresenceCall::Teams(_)
            | PresenceCall::Discord(_) => None,
        }
    }
}
