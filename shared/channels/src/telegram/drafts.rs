//! An external agent's draft on Telegram (docs/agents.md, "How drafts are shown"): one
//! message, sent as plain text with the first update and edited (`editMessageText`,
//! <https://core.telegram.org/bots/api#editmessagetext>) as the draft grows; the final reply
//! edits it once more, as Markdown, or goes as a new message when the draft's message is
//! gone or can no longer be edited. When to show what is the delivery stage's plan; this
//! file is how Telegram does it.

use hermes_net::failure::FailureReason;
use serde_json::{Value, json};

use super::Telegram;
use super::errors::{Refusal, refused};
use super::format::Format;
use crate::outbound::send_anew_if_gone;
use crate::{RetryPolicy, SendFailure, ShowsDrafts};

/// The message id Telegram gave a sent message (`result.message_id`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MessageRef(pub i64);

impl MessageRef {
    /// The id as kept in `agent_drafts.platform_message_id`.
    pub fn to_stored(self) -> String {
        self.0.to_string()
    }

    /// The id from `agent_drafts.platform_message_id`; `None` if it is not Telegram's.
    pub fn from_stored(s: &str) -> Option<Self> {
        s.trim().parse().ok().map(Self)
    }
}

/// What an edit did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Edited {
    /// The message now shows the new text.
    Changed,
    /// It showed that text already ("message is not modified"): not a failure.
    Unchanged,
}

/// `result.message_id` of Telegram's answer to a send.
pub(super) fn message_id(answer: &Value) -> Option<MessageRef> {
    answer
        .get("result")?
        .get("message_id")?
        .as_i64()
        .map(MessageRef)
}

impl Telegram {
    /// Replace the text of message `message` in `chat_id` (at most
    /// [`super::LIMITS`]`.max_chars`).
    pub async fn edit_text(
        &self,
        policy: &RetryPolicy,
        chat_id: &str,
        message: MessageRef,
        text: &str,
        format: Format,
        on_failure: impl FnMut(FailureReason) + Send,
    ) -> Result<Edited, SendFailure> {
        let body = json!({ "chat_id": chat_id, "message_id": message.0, "text": text });
        match self
            .post(policy, &self.edit_message, body, format, on_failure)
            .await
        {
            Ok(_) => Ok(Edited::Changed),
            Err(f) if refused(&f, Refusal::NotModified) => Ok(Edited::Unchanged),
            Err(f) => Err(f),
        }
    }
}

impl ShowsDrafts for Telegram {
    type Message = MessageRef;

    /// The draft's first message, as plain text (a text cut mid-stream often holds half a
    /// Markdown entity).
    async fn show_draft(
        &self,
        policy: &RetryPolicy,
        chat_id: &str,
        text: &str,
        on_failure: impl FnMut(FailureReason) + Send,
    ) -> Result<MessageRef, SendFailure> {
        self.send_text(policy, chat_id, text, Format::Plain, on_failure)
            .await
    }

    async fn edit_draft(
        &self,
        policy: &RetryPolicy,
        chat_id: &str,
        message: MessageRef,
        text: &str,
        on_failure: impl FnMut(FailureReason) + Send,
    ) -> Result<Edited, SendFailure> {
        self.edit_text(policy, chat_id, message, text, Format::Plain, on_failure)
            .await
    }

    /// The answer's first part in place of the draft, as Markdown like any reply; sent anew
    /// when the draft's message is gone (the user deleted it) or can no longer be edited.
    async fn replace_draft(
        &self,
        policy: &RetryPolicy,
        chat_id: &str,
        message: MessageRef,
        text: &str,
        mut on_failure: impl FnMut(FailureReason) + Send,
    ) -> Result<Option<String>, SendFailure> {
        match self
            .edit_text(
                policy,
                chat_id,
                message,
                text,
                Format::Markdown,
                &mut on_failure,
            )
            .await
        {
            Ok(_) => Ok(Some(message.to_stored())),
            Err(f) => {
                let gone = refused(&f, Refusal::MessageToEditNotFound)
                    || refused(&f, Refusal::MessageCantBeEdited);
                send_anew_if_gone(self, policy, chat_id, text, f, gone, on_failure).await
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use wiremock::matchers::{body_partial_json, method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};

    use super::super::send::for_tests;
    use super::*;

    fn refusing(what: &str) -> ResponseTemplate {
        ResponseTemplate::new(400).set_body_json(
            json!({"ok": false, "error_code": 400, "description": format!("Bad Request: {what}")}),
        )
    }

    #[tokio::test]
    async fn an_edit_to_the_text_shown_already_is_not_a_failure_and_others_are() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/bot1:t/editMessageText"))
            .and(body_partial_json(json!({"message_id": 5})))
            .respond_with(refusing(
                "message is not modified: specified new message content is the same",
            ))
            .mount(&server)
            .await;
        Mock::given(method("POST"))
            .and(path("/bot1:t/editMessageText"))
            .and(body_partial_json(json!({"message_id": 6})))
            .respond_with(refusing("message to edit not found"))
            .mount(&server)
            .await;
        let tg = for_tests(&server);
        let policy = RetryPolicy::fast();
        let edit = |m| tg.edit_draft(&policy, "9", MessageRef(m), "same", |_| {});
        assert_eq!(edit(5).await.unwrap(), Edited::Unchanged);
        let gone = edit(6).await.unwrap_err();
        assert!(refused(&gone, Refusal::MessageToEditNotFound), "{gone}");
        assert_eq!(gone.tries, 1, "a 400 is not tried again");
    }

    #[tokio::test]
    async fn an_answer_whose_draft_is_gone_goes_as_a_new_message() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/bot1:t/editMessageText"))
            .respond_with(refusing("message can't be edited"))
            .mount(&server)
            .await;
        Mock::given(method("POST"))
            .and(path("/bot1:t/sendMessage"))
            .respond_with(
                ResponseTemplate::new(200)
                    .set_body_json(json!({"ok": true, "result": {"message_id": 8}})),
            )
            .expect(1)
            .mount(&server)
            .await;
        let tg = for_tests(&server);
        let sent = tg
            .replace_draft(&RetryPolicy::fast(), "9", MessageRef(5), "answer", |_| {})
            .await
            .unwrap();
        assert_eq!(sent.as_deref(), Some("8"), "the new message's id");
        server.verify().await;
    }

    #[test]
    fn a_sent_message_id_is_read_from_the_answer_and_kept_as_text() {
        let answer = json!({"ok": true, "result": {"message_id": 77, "chat": {"id": 1}}});
        let id = message_id(&answer).unwrap();
        assert_eq!(id, MessageRef(77));
        assert_eq!(MessageRef::from_stored(&id.to_stored()), Some(id));
        assert_eq!(message_id(&json!({"ok": true})), None);
        assert_eq!(MessageRef::from_stored("wamid.1"), None);
    }
}
