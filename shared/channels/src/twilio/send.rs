//! SMS sends through Twilio's Messages API
//! (<https://www.twilio.com/docs/messaging/api/message-resource#create-a-message-resource>):
//! `POST {base}/2010-04-01/Accounts/{AccountSid}/Messages.json`, form-encoded, with the
//! account SID and auth token as basic auth: `To`, `From` (or `MessagingServiceSid`), `Body`,
//! `MediaUrl` for an image (an MMS), and `StatusCallback`, the webhook's public URL, where
//! Twilio reports the message's statuses (docs/channels.md, "Statuses"). A reply is cut into
//! messages of at most `[channels.sms] max_segments` segments ([`super::segments`]); Twilio's
//! error codes are read by [`super::errors`].

use hermes_config::{SmsSender, TwilioFrom};
use hermes_net::failure::FailureReason;
use hermes_types::model::Platform;
use reqwest::header::CONTENT_TYPE;
use secrecy::{ExposeSecret, SecretString};

use super::{errors, segments};
use crate::meta::answer_id;
use crate::{Limits, Outbound, Part, RetryPolicy, SendFailure};

/// Twilio's longest body of one message (1,600 characters); the segment limit is stricter.
pub const LIMITS: Limits = Limits {
    max_chars: 1600,
    max_caption: Some(1600),
};

/// Sends SMS (and MMS) from one Twilio number or messaging service.
pub struct Sms {
    http: reqwest::Client,
    url: url::Url,
    account_sid: String,
    auth_token: SecretString,
    from: TwilioFrom,
    status_callback: Option<url::Url>,
    max_segments: usize,
}

impl Sms {
    /// The sender `settings` names, its messages at most `max_segments` segments, on the
    /// stage's client `http`.
    pub fn new(settings: &SmsSender, max_segments: u8, http: reqwest::Client) -> Self {
        let mut url = settings.base_url.clone();
        url.set_path(&format!(
            "{}/2010-04-01/Accounts/{}/Messages.json",
            url.path().trim_end_matches('/'),
            settings.account_sid
        ));
        Self {
            http,
            url,
            account_sid: settings.account_sid.clone(),
            auth_token: settings.auth_token.clone(),
            from: settings.from.clone(),
            status_callback: settings.status_callback.clone(),
            max_segments: usize::from(max_segments),
        }
    }

    /// The form of one message to `to`.
    fn form(&self, to: &str, part: &Part) -> Vec<(&'static str, String)> {
        let mut form = vec![("To", to.to_string())];
        form.push(match &self.from {
            TwilioFrom::Number(n) => ("From", n.clone()),
            TwilioFrom::MessagingService(s) => ("MessagingServiceSid", s.clone()),
        });
        match part {
            Part::Text(text) => form.push(("Body", text.clone())),
            Part::Image { url, caption } => {
                form.push(("MediaUrl", url.clone()));
                if let Some(caption) = caption {
                    form.push(("Body", caption.clone()));
                }
            }
        }
        if let Some(callback) = &self.status_callback {
            form.push(("StatusCallback", callback.to_string()));
        }
        form
    }
}

impl Outbound for Sms {
    fn platform(&self) -> Platform {
        Platform::Sms
    }

    fn limits(&self) -> Limits {
        LIMITS
    }

    fn parts(&self, text: &str) -> Vec<Part> {
        segments::sms_parts(text, self.max_segments)
    }

    /// Send one part to the number `to`; SMS quotes nothing. Returns the message's SID,
    /// which its status callbacks name.
    async fn send(
        &self,
        policy: &RetryPolicy,
        to: &str,
        part: &Part,
        _quote: Option<&str>,
        on_failure: impl FnMut(FailureReason) + Send,
    ) -> Result<Option<String>, SendFailure> {
        let form = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(self.form(to, part))
            .finish();
        let answer = policy
            .send(
                || {
                    self.http
                        .post(self.url.clone())
                        .basic_auth(&self.account_sid, Some(self.auth_token.expose_secret()))
                        .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
                        .body(form.clone())
                },
                on_failure,
            )
            .await
            .map_err(errors::reclassify)?;
        Ok(answer_id(answer, "/sid").await)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use hermes_config::TwilioFrom;
    use wiremock::matchers::{basic_auth, body_string_contains, method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};

    use super::*;

    fn sender(base: &str, from: TwilioFrom) -> Sms {
        let settings = SmsSender {
            account_sid: "AC123".into(),
            auth_token: "tok".into(),
            from,
            base_url: base.parse().unwrap(),
            status_callback: Some("https://hermes.example/webhooks/twilio".parse().unwrap()),
            per_sec: 1.0,
        };
        hermes_net::install_crypto_provider();
        Sms::new(&settings, 4, reqwest::Client::new())
    }

    #[tokio::test]
    async fn a_message_is_posted_as_a_form_with_basic_auth_and_its_sid_returned() {
        let api = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/2010-04-01/Accounts/AC123/Messages.json"))
            .and(basic_auth("AC123", "tok"))
            .and(body_string_contains("To=%2B14155550100"))
            .and(body_string_contains("From=%2B15558675310"))
            .and(body_string_contains("Body=hi+there"))
            .and(body_string_contains(
                "StatusCallback=https%3A%2F%2Fhermes.example%2Fwebhooks%2Ftwilio",
            ))
            .respond_with(
                ResponseTemplate::new(201)
                    .set_body_json(serde_json::json!({"sid": "SMabc", "status": "queued"})),
            )
            .expect(1)
            .mount(&api)
            .await;
        let s = sender(&api.uri(), TwilioFrom::Number("+15558675310".into()));
        let id = s
            .send(
                &RetryPolicy::fast(),
                "+14155550100",
                &Part::Text("hi there".into()),
                None,
                |_| {},
            )
            .await
            .unwrap();
        assert_eq!(id.as_deref(), Some("SMabc"));
    }

    #[tokio::test]
    async fn an_unsubscribed_number_is_parked_as_opted_out_and_a_429_is_retried() {
        let api = MockServer::start().await;
        Mock::given(method("POST"))
            .and(body_string_contains("To=%2B1000"))
            .and(body_string_contains("MessagingServiceSid=MG1"))
            .respond_with(ResponseTemplate::new(400).set_body_json(serde_json::json!({
                "code": 21610, "message": "Attempt to send to unsubscribed recipient", "status": 400
            })))
            .mount(&api)
            .await;
        Mock::given(method("POST"))
            .and(body_string_contains("To=%2B2000"))
            .respond_with(
                ResponseTemplate::new(429)
                    .insert_header("retry-after", "1")
                    .set_body_json(
                        serde_json::json!({"code": 20429, "message": "Too Many Requests"}),
                    ),
            )
            .mount(&api)
            .await;
        let s = sender(&api.uri(), TwilioFrom::MessagingService("MG1".into()));
        let text = Part::Text("x".into());
        let f = s
            .send(&RetryPolicy::fast(), "+1000", &text, None, |_| {})
            .await
            .unwrap_err();
        assert_eq!((f.reason, f.tries), (FailureReason::OptedOut, 1));
        let policy = RetryPolicy {
            max_retry_after: Duration::from_secs(1),
            ..RetryPolicy::fast()
        };
        let f = s
            .send(&policy, "+2000", &text, None, |_| {})
            .await
            .unwrap_err();
        assert_eq!(f.reason, FailureReason::RateLimited);
        assert!(f.tries > 1, "a 429 is tried again within the call");
    }

    #[test]
    fn long_replies_are_cut_to_the_configured_segments() {
        let s = sender("https://api.twilio.com", TwilioFrom::Number("+1".into()));
        let parts = s.parts(&"word ".repeat(300));
        assert!(parts.len() > 1);
        for p in parts {
            let Part::Text(t) = p else { panic!() };
            assert!(segments::segments(&t) <= 4);
        }
    }
}
