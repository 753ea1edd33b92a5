//! WhatsApp's two routes behind [`inbound::Webhook`], one payload: `POST /webhooks/whatsapp`
//! (the Cloud API, a Meta app's [`MetaWebhook`], with its `GET` handshake) and
//! `POST /webhooks/360dialog` (also `/webhooks/360dialog/{token}`, our token).

use hermes_config::Config;
use hermes_types::model::{Inbound, Platform};
use http::HeaderMap;
use secrecy::SecretString;

use super::verify::check_d360;
use super::{Batch, parse};
use crate::decode::ParseError;
use crate::inbound::{self, Auth, Received, Refusal, Skip};
use crate::meta::MetaWebhook;
use crate::token::configured;

/// What a Cloud API payload carried, whichever route brought it.
fn received(batch: Batch) -> Received {
    let mut received = Received {
        messages: batch.messages.into_iter().map(Inbound::of).collect(),
        statuses: batch.statuses,
        ..Received::default()
    };
    received.skip(Skip::Ignored, batch.ignored);
    received
}

/// The Cloud API's webhook, on when `WHATSAPP_APP_SECRET` is set (its handshake when
/// `WHATSAPP_VERIFY_TOKEN` is).
pub fn cloud_webhook(config: &Config) -> MetaWebhook {
    let c = &config.ingest.webhooks;
    MetaWebhook::new(
        Platform::Whatsapp,
        "/webhooks/whatsapp",
        (
            c.whatsapp_app_secret.clone(),
            c.whatsapp_verify_token.clone(),
        ),
        config.ingest.meta_max_body_bytes,
        |body| parse(body).map(received),
    )
}

/// 360dialog's webhook, on when `D360_WEBHOOK_TOKEN` is set.
pub struct D360Webhook {
    token: Option<SecretString>,
    header: String,
    max_body_bytes: usize,
}

impl D360Webhook {
    /// The webhook as `config` sets it up.
    pub fn new(config: &Config) -> Self {
        let c = &config.ingest.webhooks;
        Self {
            token: c.d360_webhook_token.clone(),
            header: c.d360_token_header.clone(),
            max_body_bytes: config.ingest.meta_max_body_bytes,
        }
    }
}

impl inbound::Webhook for D360Webhook {
    fn platform(&self) -> Platform {
        Platform::Whatsapp
    }

    fn path(&self) -> &'static str {
        "/webhooks/360dialog"
    }

    fn auth(&self) -> Auth {
        Auth::Token { in_path: true }
    }

    fn enabled(&self) -> bool {
        self.token.is_some()
    }

    fn max_body_bytes(&self) -> usize {
        self.max_body_bytes
    }

    fn check_headers(&self, headers: &HeaderMap, path_token: Option<&str>) -> Result<(), Refusal> {
        check_d360(self.token.as_ref(), &self.header, headers, path_token)
    }

    fn check_body(&self, _: &HeaderMap, _: &[u8]) -> Result<(), Refusal> {
        configured(self.token.as_ref())
    }

    fn parse(&self, body: &[u8]) -> Result<Received, ParseError> {
        parse(body).map(received)
    }
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;
    use crate::inbound::Webhook as _;
    use crate::inbound::tests::config;
    use crate::meta::verify::{HUB_SIGNATURE, sign_hub};

    const MIXED: &str = include_str!("../../tests/fixtures/whatsapp/mixed.json");

    #[test]
    fn the_cloud_api_route_takes_a_body_signed_by_the_app() {
        let hook = cloud_webhook(&config(&[("WHATSAPP_APP_SECRET", "app")]));
        let mut headers = HeaderMap::new();
        assert_eq!(
            hook.check_headers(&headers, None),
            Err(Refusal::BadSignature)
        );
        let signature = sign_hub(b"app", MIXED.as_bytes());
        headers.insert(HUB_SIGNATURE, HeaderValue::from_str(&signature).unwrap());
        assert_eq!(hook.check_headers(&headers, None), Ok(()));
        assert_eq!(hook.check_body(&headers, MIXED.as_bytes()), Ok(()));
        assert_eq!(hook.check_body(&headers, b"{}"), Err(Refusal::BadSignature));
        let handshake = hook.handshake().expect("Meta's handshake");
        assert!(!handshake.enabled(), "no verify token configured");
    }

    #[test]
    fn both_routes_read_the_same_payload() {
        let cloud = cloud_webhook(&config(&[("WHATSAPP_APP_SECRET", "app")]));
        let d360 = D360Webhook::new(&config(&[("D360_WEBHOOK_TOKEN", "tok")]));
        let batch = parse(MIXED.as_bytes()).unwrap();
        for r in [cloud.parse(MIXED.as_bytes()), d360.parse(MIXED.as_bytes())] {
            let r = r.unwrap();
            let events: Vec<_> = r.messages.iter().map(|m| m.event.clone()).collect();
            assert_eq!(events, batch.messages);
            assert_eq!(r.statuses, batch.statuses);
            assert_eq!(r.skipped, vec![(Skip::Ignored, batch.ignored)]);
        }
    }

    #[test]
    fn the_360dialog_route_takes_its_token_from_the_configured_header_or_the_path() {
        let hook = D360Webhook::new(&config(&[
            ("D360_WEBHOOK_TOKEN", "tok"),
            ("D360_WEBHOOK_TOKEN_HEADER", "x-my-token"),
        ]));
        assert_eq!(hook.auth(), Auth::Token { in_path: true });
        let mut headers = HeaderMap::new();
        assert_eq!(hook.check_headers(&headers, Some("tok")), Ok(()));
        assert_eq!(
            hook.check_headers(&headers, None),
            Err(Refusal::BadSignature)
        );
        headers.insert("x-my-token", HeaderValue::from_static("tok"));
        assert_eq!(hook.check_headers(&headers, None), Ok(()));
        assert_eq!(hook.check_body(&headers, b"{}"), Ok(()));
    }
}
