//! Messenger sends through the Send API
//! (<https://developers.facebook.com/docs/messenger-platform/send-messages>), shared with
//! Instagram ([`crate::meta::send_api`]): `messaging_type: RESPONSE` answers a person inside
//! the 24-hour window after their last message; outside it a message goes only with a
//! message tag (`messaging_type: MESSAGE_TAG`, `tag`,
//! <https://developers.facebook.com/docs/messenger-platform/send-messages/message-tags>), which
//! the delivery stage chooses (docs/channels.md, "Facebook Messenger").

use hermes_config::{MessageTag, MessengerSender};
use hermes_net::failure::FailureReason;
use hermes_types::model::Platform;
use serde_json::json;

use crate::meta::send_api::SendApi;
use crate::{Limits, Outbound, Part, RetryPolicy, SendFailure};

/// One Messenger message: texts of 2,000 characters, no captions.
pub const LIMITS: Limits = Limits {
    max_chars: 2000,
    max_caption: None,
};

/// Sends from one Facebook Page.
pub struct Messenger {
    api: SendApi,
}

impl Messenger {
    /// The sender of the Page `settings` names, on the stage's client `http`.
    pub fn new(settings: &MessengerSender, http: reqwest::Client) -> Self {
        Self {
            api: SendApi::new(&settings.base_url, &settings.page_access_token, http),
        }
    }

    /// Send one part to `psid` outside the 24-hour window, under `tag`.
    pub async fn send_tagged(
        &self,
        policy: &RetryPolicy,
        psid: &str,
        part: &Part,
        tag: MessageTag,
        on_failure: impl FnMut(FailureReason) + Send,
    ) -> Result<Option<String>, SendFailure> {
        let body = json!({
            "recipient": { "id": psid },
            "messaging_type": "MESSAGE_TAG",
            "tag": tag.as_str(),
            "message": SendApi::message(part),
        });
        self.api.send(policy, &body, on_failure).await
    }
}

impl Outbound for Messenger {
    fn platform(&self) -> Platform {
        Platform::Messenger
    }

    fn limits(&self) -> Limits {
        LIMITS
    }

    /// Send one part to `psid` as the answer to their message (`RESPONSE`, inside the
    /// window); Messenger quotes nothing. Returns the message's id.
    async fn send(
        &self,
        policy: &RetryPolicy,
        psid: &str,
        part: &Part,
        _quote: Option<&str>,
        on_failure: impl FnMut(FailureReason) + Send,
    ) -> Result<Option<String>, SendFailure> {
        let body = json!({
            "recipient": { "id": psid },
            "messaging_type": "RESPONSE",
            "message": SendApi::message(part),
        });
        self.api.send(policy, &body, on_failure).await
    }
}

#[cfg(test)]
mod tests {
    use wiremock::matchers::{body_partial_json, method, path, query_param};
    use wiremock::{Mock, MockServer, ResponseTemplate};

    use super::*;

    #[tokio::test]
    async fn answers_are_responses_and_tagged_sends_name_their_tag() {
        hermes_net::install_crypto_provider();
        let api = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/me/messages"))
            .and(query_param("access_token", "page-token"))
            .and(body_partial_json(json!({"messaging_type": "RESPONSE", "recipient": {"id": "psid-1"}, "message": {"text": "hi"}})))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({"recipient_id": "psid-1", "message_id": "m_1"})))
            .expect(1)
            .mount(&api)
            .await;
        Mock::given(method("POST"))
            .and(body_partial_json(json!({"messaging_type": "MESSAGE_TAG", "tag": "ACCOUNT_UPDATE"})))
            .respond_with(ResponseTemplate::new(400).set_body_json(json!({"error": {"code": 613, "message": "Calls to this api have exceeded the rate limit."}})))
            .mount(&api)
            .await;
        let settings = MessengerSender {
            page_access_token: "page-token".into(),
            base_url: api.uri().parse().unwrap(),
        };
        let m = Messenger::new(&settings, reqwest::Client::new());
        let text = Part::Text("hi".into());
        let id = m
            .send(&RetryPolicy::fast(), "psid-1", &text, None, |_| {})
            .await
            .unwrap();
        assert_eq!(id.as_deref(), Some("m_1"));
        let f = m
            .send_tagged(
                &RetryPolicy::fast(),
                "psid-1",
                &text,
                MessageTag::AccountUpdate,
                |_| {},
            )
            .await
            .unwrap_err();
        assert_eq!(
            f.reason,
            FailureReason::RateLimited,
            "Meta's table reads the code"
        );
    }
}
