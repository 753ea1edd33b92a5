//! Messenger's sender actions
//! (<https://developers.facebook.com/docs/messenger-platform/send-messages/sender-actions>):
//! `mark_seen` once when a run starts on the person's message, then `typing_on`, renewed while
//! the work goes on (Messenger shows it for 20 seconds, or until the reply arrives).

use std::time::Duration;

use hermes_config::MessengerSender;
use reqwest::RequestBuilder;

use crate::meta::send_api::MessagesUrl;

/// How often `typing_on` is renewed.
pub const TYPING_EVERY: Duration = Duration::from_secs(15);

/// The sender actions of the configured Page.
pub struct SenderActions {
    url: MessagesUrl,
}

impl SenderActions {
    /// The actions of the Page `settings` names.
    pub fn new(settings: &MessengerSender) -> Self {
        Self {
            url: MessagesUrl::new(&settings.base_url, &settings.page_access_token),
        }
    }

    /// Mark the person's last message seen.
    pub fn mark_seen(&self, http: &reqwest::Client, psid: &str) -> RequestBuilder {
        self.url.sender_action(http, psid, "mark_seen")
    }

    /// Show the typing indicator.
    pub fn typing_on(&self, http: &reqwest::Client, psid: &str) -> RequestBuilder {
        self.url.sender_action(http, psid, "typing_on")
    }
}
