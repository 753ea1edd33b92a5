//! WhatsApp's 24-hour customer-service window at send time (docs/channels.md, "WhatsApp's
//! window and templates"). Meta refuses free text to a user more than 24 hours after their
//! last message (error 131047); a reply sent later (an agent answering late, a scheduled
//! job, an operator's `messages_send`) must go as an approved template. Before a WhatsApp
//! reply is sent, the chat's window is read (`whatsapp_windows`, written by the router with
//! each message's run): inside it the reply goes as free text; outside it as the configured
//! template (`[channels.whatsapp] outside_window_template`), its parameters filled with the
//! reply's text and the user's name; with no template it is parked as `outside_window`,
//! never attempted. The rules are WhatsApp's and live in its folder
//! (`hermes_channels::whatsapp::window` and `templates`); this is their read at send time.
//! Messenger's window is the same 24 hours ([`MessengerWindow`]): outside it a reply goes
//! with the configured message tag, or is parked.

use anyhow::anyhow;
use chrono::{TimeDelta, Utc};
use hermes_channels::whatsapp::TemplateMessage;
use hermes_channels::whatsapp::templates::template_message;
use hermes_channels::whatsapp::window;
use hermes_config::{MessageTag, WhatsappFile};
use hermes_db::{Db, messenger_windows, whatsapp_windows};
use hermes_net::failure::FailureReason;
use hermes_runtime::stage::StageError;

/// How long before the window closes free text is no longer risked: a send may wait at the
/// rate gate (up to `HERMES_RATE_GATE_WAIT_SECS`) and retry within the call before it
/// reaches Meta.
pub const MARGIN: TimeDelta = TimeDelta::minutes(2);

/// How a WhatsApp reply goes out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Plan {
    /// Inside the window: the reply's text as usual.
    FreeText,
    /// Outside it: this template instead.
    Template(TemplateMessage),
}

/// The window rule of the WhatsApp sender.
pub struct WindowRule {
    db: Db,
    file: WhatsappFile,
}

impl WindowRule {
    pub fn new(db: Db, file: WhatsappFile) -> Self {
        Self { db, file }
    }

    /// How `text` goes to the WhatsApp user of `chat_id` now; outside the window with no
    /// template configured, the `outside_window` failure that parks it.
    pub async fn plan(&self, chat_id: &str, text: &str) -> Result<Plan, StageError> {
        let window = {
            let client = self.db.get().await?;
            whatsapp_windows::read(&client, chat_id).await?
        };
        if window
            .as_ref()
            .is_some_and(|w| window::is_open(w.last_inbound_at, Utc::now(), MARGIN))
        {
            return Ok(Plan::FreeText);
        }
        let Some(spec) = self.file.outside_window() else {
            let since = window.map_or_else(
                || "the user never wrote".to_string(),
                |w| format!("the user last wrote at {}", w.last_inbound_at.to_rfc3339()),
            );
            return Err(StageError::Retry {
                reason: FailureReason::OutsideWindow,
                error: anyhow!(
                    "WhatsApp's 24-hour window is closed ({since}) and no [channels.whatsapp] outside_window_template is configured: parked, not sent as free text"
                ),
            });
        };
        let name = window
            .and_then(|w| w.user_name)
            .unwrap_or_else(|| self.file.unknown_user_name.clone());
        Ok(Plan::Template(template_message(spec, text, &name)))
    }
}

/// How a Messenger reply goes out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MessengerPlan {
    /// Inside the window: a `RESPONSE`.
    Response,
    /// Outside it: under this message tag.
    Tagged(MessageTag),
}

/// Messenger's window rule (docs/channels.md, "Facebook Messenger"): the same 24 hours as
/// WhatsApp's (Meta's standard messaging window), read from `messenger_windows`; outside it
/// the configured tag, or the `outside_window` failure that parks the reply unsent.
pub struct MessengerWindow {
    db: Db,
    tag: Option<MessageTag>,
}

impl MessengerWindow {
    pub fn new(db: Db, tag: Option<MessageTag>) -> Self {
        Self { db, tag }
    }

    /// How a reply to the person of `chat_id` goes now.
    pub async fn plan(&self, chat_id: &str) -> Result<MessengerPlan, StageError> {
        let last = {
            let client = self.db.get().await?;
            messenger_windows::last_inbound_at(&client, chat_id).await?
        };
        if last.is_some_and(|at| window::is_open(at, Utc::now(), MARGIN)) {
            return Ok(MessengerPlan::Response);
        }
        match self.tag {
            Some(tag) => Ok(MessengerPlan::Tagged(tag)),
            None => Err(StageError::Retry {
                reason: FailureReason::OutsideWindow,
                error: anyhow!(
                    "Messenger's 24-hour window is closed ({}) and no [channels.messenger] outside_window_tag is configured: parked, not sent",
                    last.map_or_else(
                        || "the person never wrote".to_string(),
                        |at| format!("the person last wrote at {}", at.to_rfc3339())
                    )
                ),
            }),
        }
    }
}
