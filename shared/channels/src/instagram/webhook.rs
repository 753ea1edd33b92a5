//! `POST /webhooks/instagram` (and its `GET` handshake): a Meta app's [`MetaWebhook`],
//! messages only (Instagram reports no delivery statuses here).

use hermes_config::Config;
use hermes_types::model::Platform;

use super::parse;
use crate::meta::MetaWebhook;

/// Instagram's webhook, on when `INSTAGRAM_APP_SECRET` is set (its handshake when
/// `INSTAGRAM_VERIFY_TOKEN` is).
pub fn webhook(config: &Config) -> MetaWebhook {
    let c = &config.ingest.webhooks;
    MetaWebhook::messages(
        Platform::Instagram,
        "/webhooks/instagram",
        (
            c.instagram_app_secret.clone(),
            c.instagram_verify_token.clone(),
        ),
        config.ingest.meta_max_body_bytes,
        parse,
    )
}

#[cfg(test)]
mod tests {
    use http::HeaderMap;

    use super::*;
    use crate::inbound::tests::config;
    use crate::inbound::{Refusal, Webhook as _};

    #[test]
    fn messages_are_routed_and_the_handshake_answers_its_token() {
        let hook = webhook(&config(&[
            ("INSTAGRAM_APP_SECRET", "app"),
            ("INSTAGRAM_VERIFY_TOKEN", "vt"),
        ]));
        assert_eq!(hook.platform(), Platform::Instagram);
        let body = include_str!("../../tests/fixtures/instagram/multiple.json");
        let r = hook.parse(body.as_bytes()).unwrap();
        assert_eq!(r.messages.len(), 3);
        assert_eq!((r.statuses.len(), r.skipped.len()), (0, 0));
        let q = "hub.mode=subscribe&hub.verify_token=vt&hub.challenge=42";
        assert_eq!(hook.handshake().unwrap().answer(Some(q)), Ok("42".into()));
        assert_eq!(
            hook.check_body(&HeaderMap::new(), body.as_bytes()),
            Err(Refusal::BadSignature)
        );
    }
}
