//! The platforms that show an external agent's draft as one message edited as it grows
//! (docs/agents.md, "How drafts are shown"), behind one handle: [`Drafts`], what
//! [`crate::Sender::drafts`] gives the delivery stage, and [`DraftMessage`], the id of the
//! message showing a draft as each platform names it, kept in `agent_drafts`. A platform
//! that shows drafts adds a variant to both.

use hermes_net::failure::FailureReason;
use hermes_types::model::Platform;

use crate::slack::{Slack, Ts};
use crate::telegram::{Edited, MessageRef, Telegram};
use crate::{Limits, Outbound, Part, RetryPolicy, SendFailure, ShowsDrafts};

/// The sender of a platform that shows drafts.
#[derive(Clone, Copy)]
pub enum Drafts<'a> {
    /// Telegram: `sendMessage`, then `editMessageText`.
    Telegram(&'a Telegram),
    /// Slack: `chat.postMessage`, then `chat.update`.
    Slack(&'a Slack),
}

/// The platform's id of the message showing a draft.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DraftMessage {
    /// Telegram's `message_id`.
    Telegram(MessageRef),
    /// Slack's `ts`.
    Slack(Ts),
}

impl DraftMessage {
    /// The id as kept in `agent_drafts.platform_message_id`.
    pub fn to_stored(self) -> String {
        match self {
            DraftMessage::Telegram(m) => m.to_stored(),
            DraftMessage::Slack(ts) => ts.to_string(),
        }
    }

    /// What the message showing a draft holds on its platform.
    pub fn limits(self) -> Limits {
        match self {
            DraftMessage::Telegram(_) => crate::telegram::LIMITS,
            DraftMessage::Slack(_) => crate::slack::LIMITS,
        }
    }

    /// What one message of `platform` holds, where the platform shows drafts.
    pub fn limits_on(platform: Platform) -> Option<Limits> {
        match platform {
            Platform::Telegram => Some(crate::telegram::LIMITS),
            Platform::Slack => Some(crate::slack::LIMITS),
            _ => None,
        }
    }

    /// The id of a message on `platform` from `agent_drafts.platform_message_id`; `None` if
    /// it is not one of that platform's.
    pub fn from_stored(platform: Platform, stored: &str) -> Option<Self> {
        match platform {
            Platform::Telegram => MessageRef::from_stored(stored).map(DraftMessage::Telegram),
            Platform::Slack => stored.parse().ok().map(DraftMessage::Slack),
            _ => None,
        }
    }
}

/// A draft message handed to another platform's sender: never sent.
fn foreign() -> SendFailure {
    SendFailure {
        reason: FailureReason::InvalidRecipient,
        status: None,
        body: None,
        detail: "the draft's message is another platform's".into(),
        tries: 0,
    }
}

impl Outbound for Drafts<'_> {
    fn platform(&self) -> Platform {
        match self {
            Drafts::Telegram(s) => s.platform(),
            Drafts::Slack(s) => s.platform(),
        }
    }

    fn limits(&self) -> Limits {
        match self {
            Drafts::Telegram(s) => s.limits(),
            Drafts::Slack(s) => s.limits(),
        }
    }

    async fn send(
        &self,
        policy: &RetryPolicy,
        chat_id: &str,
        part: &Part,
        quote: Option<&str>,
        on_failure: impl FnMut(FailureReason) + Send,
    ) -> Result<Option<String>, SendFailure> {
        match self {
            Drafts::Telegram(s) => s.send(policy, chat_id, part, quote, on_failure).await,
            Drafts::Slack(s) => s.send(policy, chat_id, part, quote, on_failure).await,
        }
    }
}

impl ShowsDrafts for Drafts<'_> {
    type Message = DraftMessage;

    async fn show_draft(
        &self,
        policy: &RetryPolicy,
        chat_id: &str,
        text: &str,
        on_failure: impl FnMut(FailureReason) + Send,
    ) -> Result<DraftMessage, SendFailure> {
        match self {
            Drafts::Telegram(s) => {
                (s.show_draft(policy, chat_id, text, on_failure).await).map(DraftMessage::Telegram)
            }
            Drafts::Slack(s) => {
                (s.show_draft(policy, chat_id, text, on_failure).await).map(DraftMessage::Slack)
            }
        }
    }

    async fn edit_draft(
        &self,
        policy: &RetryPolicy,
        chat_id: &str,
        message: DraftMessage,
        text: &str,
        on_failure: impl FnMut(FailureReason) + Send,
    ) -> Result<Edited, SendFailure> {
        match (self, message) {
            (Drafts::Telegram(s), DraftMessage::Telegram(m)) => {
                s.edit_draft(policy, chat_id, m, text, on_failure).await
            }
            (Drafts::Slack(s), DraftMessage::Slack(ts)) => {
                s.edit_draft(policy, chat_id, ts, text, on_failure).await
            }
            _ => Err(foreign()),
        }
    }

    async fn replace_draft(
        &self,
        policy: &RetryPolicy,
        chat_id: &str,
        message: DraftMessage,
        text: &str,
        on_failure: impl FnMut(FailureReason) + Send,
    ) -> Result<Option<String>, SendFailure> {
        match (self, message) {
            (Drafts::Telegram(s), DraftMessage::Telegram(m)) => {
                s.replace_draft(policy, chat_id, m, text, on_failure).await
            }
            (Drafts::Slack(s), DraftMessage::Slack(ts)) => {
                s.replace_draft(policy, chat_id, ts, text, on_failure).await
            }
            _ => Err(foreign()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_id_reads_back_only_on_its_platform() {
        let tg = DraftMessage::Telegram(MessageRef(42));
        assert_eq!(
            DraftMessage::from_stored(Platform::Telegram, &tg.to_stored()),
            Some(tg)
        );
        let slack = DraftMessage::Slack("1503435956.000247".parse().unwrap());
        assert_eq!(slack.to_stored(), "1503435956.000247");
        assert_eq!(
            DraftMessage::from_stored(Platform::Slack, "1503435956.000247"),
            Some(slack)
        );
        assert_eq!(DraftMessage::from_stored(Platform::Slack, "42"), None);
        assert_eq!(DraftMessage::from_stored(Platform::Whatsapp, "42"), None);
    }
}
