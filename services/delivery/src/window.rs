//! WhatsApp's 24-hour customer-service window at send time (docs/channels.md, "WhatsApp's
//! window and templates"). Meta refuses free text to a user more than 24 hours after their
//! last message (error 131047); a reply sent later (an agent answering late, a scheduled
//! job, an operator's `messages_send`) must go as an approved template. Before a WhatsApp
//! reply is sent, the chat's window is read (`whatsapp_windows`, written by the router with
//! each message's run): inside it the reply goes as free text; outside it as the configured
//! template (`[channels.whatsapp] outside_window_template`), its parameters filled with the
//! reply's text and the user's name; with no template it is parked as `outside_window`,
//! never attempted.

use anyhow::anyhow;
use chrono::{TimeDelta, Utc};
use hermes_config::{TemplateSpec, WhatsappFile};
use hermes_db::{Db, whatsapp_windows};
use hermes_net::failure::FailureReason;
use hermes_runtime::stage::StageError;

use crate::senders::TemplateMessage;

/// How long before the window closes free text is no longer risked: a send may wait at the
/// rate gate (up to `HERMES_RATE_GATE_WAIT_SECS`) and retry within the call before it
/// reaches Meta.
pub const MARGIN: TimeDelta = TimeDelta::minutes(2);

/// The most characters of the reply a template parameter carries (Meta caps a template's
/// body at 1,024 characters, the template's own words included).
pub const REPLY_PARAM_CHARS: usize = 700;

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
            .is_some_and(|w| w.is_open(Utc::now(), MARGIN))
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

/// `spec` with its parameters filled for a reply `reply` to `user_name`. Meta refuses a
/// parameter with a line break, a tab or more than four spaces in a row, so each is one
/// line of single spaces; the reply is cut to [`REPLY_PARAM_CHARS`].
pub fn template_message(spec: &TemplateSpec, reply: &str, user_name: &str) -> TemplateMessage {
    let reply = cut(&one_line(reply), REPLY_PARAM_CHARS);
    let user_name = one_line(user_name);
    TemplateMessage {
        name: spec.name.clone(),
        language: spec.language.clone(),
        parameters: spec
            .parameters
            .iter()
            .map(|p| one_line(&p.render(&reply, &user_name)))
            .collect(),
    }
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn cut(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut out: String = s.chars().take(max - 1).collect();
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use hermes_config::TemplateText;

    use super::*;

    fn spec(params: &[&str]) -> TemplateSpec {
        TemplateSpec {
            name: "follow_up".into(),
            language: "en_US".into(),
            parameters: params
                .iter()
                .map(|p| TemplateText::parse(p).unwrap())
                .collect(),
        }
    }

    #[test]
    fn parameters_carry_the_reply_and_the_name_on_one_line() {
        let t = template_message(
            &spec(&["{user_name}", "Re: {reply}"]),
            "Your table\n\nis booked.\tSee you     at 8.",
            "Ada\nL.",
        );
        assert_eq!(t.name, "follow_up");
        assert_eq!(t.language, "en_US");
        assert_eq!(
            t.parameters,
            ["Ada L.", "Re: Your table is booked. See you at 8."]
        );
        assert_eq!(
            t.body(),
            serde_json::json!({
                "name": "follow_up", "language": {"code": "en_US"},
                "components": [{"type": "body", "parameters": [
                    {"type": "text", "text": "Ada L."},
                    {"type": "text", "text": "Re: Your table is booked. See you at 8."}
                ]}]
            })
        );
    }

    #[test]
    fn a_long_reply_is_cut_and_a_template_without_parameters_has_no_components() {
        let t = template_message(&spec(&["{reply}"]), &"é".repeat(2000), "x");
        assert_eq!(t.parameters[0].chars().count(), REPLY_PARAM_CHARS);
        assert!(t.parameters[0].ends_with('…'));
        let bare = template_message(&spec(&[]), "hi", "x");
        assert_eq!(
            bare.body(),
            serde_json::json!({"name": "follow_up", "language": {"code": "en_US"}})
        );
    }
}
