//! Instagram sends through the Graph API
//! (<https://developers.facebook.com/docs/messenger-platform/instagram/features/send-message>),
//! the Send API it shares with Messenger ([`crate::meta::send_api`]): a text, or an image
//! attachment by URL (Instagram has no captions: the text follows as its own message). Its
//! error codes are Meta's ([`crate::meta::errors`]).

use hermes_config::InstagramSender;
use hermes_net::failure::FailureReason;
use hermes_types::model::Platform;
use serde_json::json;

use crate::meta::send_api::SendApi;
use crate::{Limits, Outbound, Part, RetryPolicy, SendFailure};

/// Sends to Instagram users.
pub struct Instagram {
    api: SendApi,
}

impl Instagram {
    /// The sender of the account `settings` names, on the stage's client `http`.
    pub fn new(settings: &InstagramSender, http: reqwest::Client) -> Self {
        Self {
            api: SendApi::new(&settings.base_url, &settings.access_token, http),
        }
    }
}

impl Outbound for Instagram {
    fn platform(&self) -> Platform {
        Platform::Instagram
    }

    fn limits(&self) -> Limits {
        super::LIMITS
    }

    /// Send one part to the user `recipient` (their Instagram-scoped id); Instagram quotes
    /// nothing. Returns the message's id (`message_id` of the answer).
    async fn send(
        &self,
        policy: &RetryPolicy,
        recipient: &str,
        part: &Part,
        _quote: Option<&str>,
        on_failure: impl FnMut(FailureReason) + Send,
    ) -> Result<Option<String>, SendFailure> {
        let body = json!({ "recipient": { "id": recipient }, "message": SendApi::message(part) });
        self.api.send(policy, &body, on_failure).await
    }
}
