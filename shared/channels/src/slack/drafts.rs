//! An external agent's draft on Slack (docs/agents.md, "How drafts are shown"): one message,
//! posted with the first update and edited with `chat.update`
//! (<https://api.slack.com/methods/chat.update>) as the draft grows; the final reply edits it
//! once more, or goes as a new message when the draft's message is gone or can no longer be
//! edited. When to show what is the delivery stage's plan; this file is how Slack does it.

use hermes_net::failure::FailureReason;
use serde_json::json;

use super::Slack;
use super::chat::Ts;
use super::errors::{Refusal, refused};
use super::send::chat_of;
use crate::outbound::send_anew_if_gone;
use crate::telegram::Edited;
use crate::{RetryPolicy, SendFailure, ShowsDrafts};

impl Slack {
    /// Replace the text of the message `ts` in the conversation of `chat_id`.
    pub async fn update_text(
        &self,
        policy: &RetryPolicy,
        chat_id: &str,
        ts: Ts,
        text: &str,
        on_failure: impl FnMut(FailureReason) + Send,
    ) -> Result<Edited, SendFailure> {
        let chat = chat_of(chat_id)?;
        let text = super::mrkdwn::from_markdown(text);
        let body = json!({ "channel": chat.channel, "ts": ts.to_string(), "text": text });
        self.call(policy, &self.update, &body, on_failure).await?;
        // Slack accepts an update to the text a message shows already.
        Ok(Edited::Changed)
    }
}

impl ShowsDrafts for Slack {
    type Message = Ts;

    async fn show_draft(
        &self,
        policy: &RetryPolicy,
        chat_id: &str,
        text: &str,
        on_failure: impl FnMut(FailureReason) + Send,
    ) -> Result<Ts, SendFailure> {
        self.post_text(policy, &chat_of(chat_id)?, text, on_failure)
            .await
    }

    async fn edit_draft(
        &self,
        policy: &RetryPolicy,
        chat_id: &str,
        message: Ts,
        text: &str,
        on_failure: impl FnMut(FailureReason) + Send,
    ) -> Result<Edited, SendFailure> {
        self.update_text(policy, chat_id, message, text, on_failure)
            .await
    }

    /// The answer's first part in place of the draft; posted anew when the draft's message
    /// is gone or can no longer be edited.
    async fn replace_draft(
        &self,
        policy: &RetryPolicy,
        chat_id: &str,
        message: Ts,
        text: &str,
        mut on_failure: impl FnMut(FailureReason) + Send,
    ) -> Result<Option<String>, SendFailure> {
        match self
            .update_text(policy, chat_id, message, text, &mut on_failure)
            .await
        {
            Ok(_) => Ok(Some(message.to_string())),
            Err(f) => {
                let gone = [
                    Refusal::MessageNotFound,
                    Refusal::CantUpdateMessage,
                    Refusal::EditWindowClosed,
                ]
                .into_iter()
                .any(|r| refused(&f, r));
                send_anew_if_gone(self, policy, chat_id, text, f, gone, on_failure).await
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Value;
    use wiremock::matchers::{method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};

    use super::super::send::for_tests;
    use super::*;

    #[tokio::test]
    async fn a_draft_is_posted_then_updated_then_replaced() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/chat.postMessage"))
            .respond_with(
                ResponseTemplate::new(200)
                    .set_body_json(json!({"ok": true, "channel": "C1", "ts": "1503435956.000247"})),
            )
            .mount(&server)
            .await;
        Mock::given(method("POST"))
            .and(path("/chat.update"))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({"ok": true})))
            .mount(&server)
            .await;
        let slack = for_tests(&server);
        let p = RetryPolicy::fast();
        let chat = "C1:1503435900.000100";
        let ts = slack
            .show_draft(&p, chat, "Thinking", |_| {})
            .await
            .unwrap();
        assert_eq!(ts.to_string(), "1503435956.000247");
        let edited = slack
            .edit_draft(&p, chat, ts, "Thinking more", |_| {})
            .await;
        assert_eq!(edited.unwrap(), Edited::Changed);
        let shown = slack.replace_draft(&p, chat, ts, "Done", |_| {}).await;
        assert_eq!(shown.unwrap().as_deref(), Some("1503435956.000247"));
        let sent: Vec<Value> = server
            .received_requests()
            .await
            .unwrap()
            .iter()
            .map(|r| serde_json::from_slice(&r.body).unwrap())
            .collect();
        assert_eq!(sent[0]["thread_ts"], "1503435900.000100");
        assert_eq!(
            sent[2],
            json!({"channel": "C1", "ts": "1503435956.000247", "text": "Done"})
        );
    }

    #[tokio::test]
    async fn a_message_that_cannot_be_updated_is_replaced_by_a_new_one() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/chat.update"))
            .respond_with(
                ResponseTemplate::new(200)
                    .set_body_json(json!({"ok": false, "error": "message_not_found"})),
            )
            .mount(&server)
            .await;
        Mock::given(method("POST"))
            .and(path("/chat.postMessage"))
            .respond_with(
                ResponseTemplate::new(200).set_body_json(json!({"ok": true, "ts": "2.000002"})),
            )
            .mount(&server)
            .await;
        let slack = for_tests(&server);
        let ts: Ts = "1.000001".parse().unwrap();
        let shown = slack
            .replace_draft(&RetryPolicy::fast(), "D1", ts, "Done", |_| {})
            .await;
        assert_eq!(shown.unwrap().as_deref(), Some("2.000002"));
    }
}
