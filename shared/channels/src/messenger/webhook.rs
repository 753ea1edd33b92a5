//! `POST /webhooks/messenger` (and its `GET` handshake): a Meta app's [`MetaWebhook`] for a
//! Page (`object: page`), messages only.

use hermes_config::Config;
use hermes_types::model::Platform;

use super::parse;
use crate::meta::MetaWebhook;

/// Messenger's webhook, on when `MESSENGER_APP_SECRET` is set (its handshake when
/// `MESSENGER_VERIFY_TOKEN` is).
pub fn webhook(config: &Config) -> MetaWebhook {
    let m = &config.ingest.webhooks.messenger;
    MetaWebhook::messages(
        Platform::Messenger,
        "/webhooks/messenger",
        (m.app_secret.clone(), m.verify_token.clone()),
        config.ingest.meta_max_body_bytes,
        parse,
    )
}

#[cfg(test)]
mod tests {
    use http::{HeaderMap, HeaderValue};

    use super::*;
    use crate::inbound::tests::config;
    use crate::inbound::{Refusal, Webhook as _};
    use crate::meta::verify::{HUB_SIGNATURE, sign_hub};

    #[test]
    fn page_messages_are_signed_by_the_app_and_the_handshake_answers_its_token() {
        let hook = webhook(&config(&[
            ("MESSENGER_APP_SECRET", "app"),
            ("MESSENGER_VERIFY_TOKEN", "vt"),
        ]));
        assert_eq!(hook.platform(), Platform::Messenger);
        let body = include_str!("../../tests/fixtures/messenger/text.json");
        let mut headers = HeaderMap::new();
        assert_eq!(
            hook.check_body(&headers, body.as_bytes()),
            Err(Refusal::BadSignature)
        );
        let signature = sign_hub(b"app", body.as_bytes());
        headers.insert(HUB_SIGNATURE, HeaderValue::from_str(&signature).unwrap());
        assert_eq!(hook.check_body(&headers, body.as_bytes()), Ok(()));
        let r = hook.parse(body.as_bytes()).unwrap();
        assert_eq!(r.messages.len(), 1);
        assert_eq!(r.messages[0].event.platform, Platform::Messenger);
        let q = "hub.mode=subscribe&hub.verify_token=vt&hub.challenge=42";
        assert_eq!(hook.handshake().unwrap().answer(Some(q)), Ok("42".into()));
    }
}
