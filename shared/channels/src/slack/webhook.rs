//! `POST /webhooks/slack` behind [`inbound::Webhook`]: the Events API's Request URL. The
//! signature is checked on the raw body in ingest's pool of unverified bodies, before the
//! request takes a slot; then the `url_verification` challenge is answered, or the event read
//! (docs/channels.md, "Slack").

use std::time::Duration;

use hermes_config::{Config, SlackChannelReplies};
use hermes_types::model::Platform;
use http::HeaderMap;
use secrecy::SecretString;

use super::{Request, parse, verify};
use crate::decode::ParseError;
use crate::inbound::{self, Auth, Received, Refusal};

/// Slack counts a delivery failed when its answer takes longer than 3 s and sends it again
/// (<https://api.slack.com/apis/events-api#responding>); ingest answers within this, with a
/// 503 if the message is not confirmed by then, which Slack retries like the timeout.
pub const ACK_WITHIN: Duration = Duration::from_millis(2500);

/// Slack's webhook, on when `SLACK_SIGNING_SECRET` is set.
pub struct Webhook {
    secret: Option<SecretString>,
    replies: SlackChannelReplies,
    max_body_bytes: usize,
}

impl Webhook {
    /// The webhook as `config` sets it up: its signing secret and `[channels.slack]`.
    pub fn new(config: &Config) -> Self {
        Self {
            secret: config.ingest.webhooks.slack_signing_secret.clone(),
            replies: config.channels.slack.channel_replies,
            max_body_bytes: config.ingest.max_body_bytes,
        }
    }
}

impl inbound::Webhook for Webhook {
    fn platform(&self) -> Platform {
        Platform::Slack
    }

    fn path(&self) -> &'static str {
        "/webhooks/slack"
    }

    fn auth(&self) -> Auth {
        Auth::Signature
    }

    fn enabled(&self) -> bool {
        self.secret.is_some()
    }

    fn max_body_bytes(&self) -> usize {
        self.max_body_bytes
    }

    fn check_headers(&self, headers: &HeaderMap, _: Option<&str>) -> Result<(), Refusal> {
        verify::check_headers(self.secret.as_ref(), headers)
    }

    fn check_body(&self, headers: &HeaderMap, body: &[u8]) -> Result<(), Refusal> {
        verify::check_body(self.secret.as_ref(), headers, body)
    }

    fn parse(&self, body: &[u8]) -> Result<Received, ParseError> {
        let mut received = Received::default();
        match parse(body, self.replies)? {
            Request::Challenge(c) => received.challenge = Some(c),
            Request::Message(m) => received.messages.push(*m),
            Request::Skipped(why) => received.skip(why, 1),
        }
        Ok(received)
    }

    fn ack_within(&self) -> Option<Duration> {
        Some(ACK_WITHIN)
    }
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;
    use crate::inbound::Skip;
    use crate::inbound::Webhook as _;
    use crate::inbound::tests::config;

    const IM: &[u8] = include_bytes!("../../tests/fixtures/slack/im_message.json");

    fn signed(secret: &str, body: &[u8]) -> HeaderMap {
        let ts = chrono::Utc::now().timestamp().to_string();
        let mut h = HeaderMap::new();
        let sig = verify::sign(secret.as_bytes(), &ts, body);
        h.insert(verify::SIGNATURE, HeaderValue::from_str(&sig).unwrap());
        h.insert(verify::TIMESTAMP, HeaderValue::from_str(&ts).unwrap());
        h
    }

    #[test]
    fn the_route_takes_a_body_signed_with_the_signing_secret() {
        let hook = Webhook::new(&config(&[("SLACK_SIGNING_SECRET", "shh")]));
        assert!(hook.enabled());
        assert_eq!(hook.auth(), Auth::Signature);
        assert_eq!(
            hook.check_headers(&HeaderMap::new(), None),
            Err(Refusal::BadSignature)
        );
        let headers = signed("shh", IM);
        assert_eq!(hook.check_headers(&headers, None), Ok(()));
        assert_eq!(hook.check_body(&headers, IM), Ok(()));
        assert_eq!(hook.check_body(&headers, b"{}"), Err(Refusal::BadSignature));
        assert_eq!(
            hook.check_body(&signed("other", IM), IM),
            Err(Refusal::BadSignature)
        );
        assert_eq!(hook.ack_within(), Some(ACK_WITHIN));
    }

    #[test]
    fn a_challenge_a_message_and_a_skip_each_come_out_as_such() {
        let hook = Webhook::new(&config(&[("SLACK_SIGNING_SECRET", "shh")]));
        let challenge = include_bytes!("../../tests/fixtures/slack/url_verification.json");
        let r = hook.parse(challenge).unwrap();
        assert!(r.challenge.is_some() && r.messages.is_empty());
        let r = hook.parse(IM).unwrap();
        assert_eq!((r.messages.len(), r.challenge), (1, None));
        let bot = include_bytes!("../../tests/fixtures/slack/bot_message.json");
        let r = hook.parse(bot).unwrap();
        assert_eq!(r.skipped, vec![(Skip::Ignored, 1)]);
        assert!(hook.parse(b"[]").is_err());
    }
}
