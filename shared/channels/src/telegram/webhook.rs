//! `POST /webhooks/telegram` behind [`inbound::Webhook`]: the secret token before the body,
//! then one `Update` parsed and judged by the group and edit rules (docs/channels.md, "Group
//! chats" and "Edited messages").

use hermes_config::{Config, TelegramSettings};
use hermes_types::model::Platform;
use http::HeaderMap;
use secrecy::{ExposeSecret, SecretString};

use super::groups::{Bot, admit};
use super::{parse, verify};
use crate::decode::ParseError;
use crate::inbound::{self, Auth, Received, Refusal, Skip};
use crate::token::configured;

/// Telegram's webhook, on when `TELEGRAM_WEBHOOK_SECRET` is set.
pub struct Webhook {
    secret: Option<SecretString>,
    settings: TelegramSettings,
    bot: Bot,
    max_body_bytes: usize,
}

impl Webhook {
    /// The webhook as `config` sets it up: its secret, `[channels.telegram]`, and who the
    /// bot is (its username there, its id in `TELEGRAM_BOT_TOKEN`).
    pub fn new(config: &Config) -> Self {
        let settings = config.channels.telegram.clone();
        let token = config.delivery.telegram.as_ref().map(|t| &t.bot_token);
        Self {
            secret: config.ingest.webhooks.telegram_webhook_secret.clone(),
            bot: Bot::new(&settings, token.map(|t| t.expose_secret())),
            settings,
            max_body_bytes: config.ingest.max_body_bytes,
        }
    }
}

impl inbound::Webhook for Webhook {
    fn platform(&self) -> Platform {
        Platform::Telegram
    }

    fn path(&self) -> &'static str {
        "/webhooks/telegram"
    }

    fn auth(&self) -> Auth {
        Auth::Token { in_path: false }
    }

    fn enabled(&self) -> bool {
        self.secret.is_some()
    }

    fn max_body_bytes(&self) -> usize {
        self.max_body_bytes
    }

    fn check_headers(&self, headers: &HeaderMap, _: Option<&str>) -> Result<(), Refusal> {
        verify::check(self.secret.as_ref(), headers)
    }

    fn check_body(&self, _: &HeaderMap, _: &[u8]) -> Result<(), Refusal> {
        configured(self.secret.as_ref())
    }

    fn parse(&self, body: &[u8]) -> Result<Received, ParseError> {
        let update = parse(body)?;
        let mut received = Received::default();
        match (update.event, update.addressing) {
            (Some(event), Some(facts)) => match admit(event, &facts, &self.settings, &self.bot) {
                Ok(inbound) => received.messages.push(inbound),
                Err(why) => received.skip(why, 1),
            },
            _ => received.skip(Skip::Ignored, 1),
        }
        Ok(received)
    }

    fn warnings(&self) -> Vec<&'static str> {
        if self.enabled() && self.settings.username().is_none() {
            vec![
                "[channels.telegram] bot_username is not set: in groups the bot hears replies to it and bare commands, not @mentions",
            ]
        } else {
            Vec::new()
        }
    }
}

#[cfg(test)]
mod tests {
    use hermes_types::model::ChatKind;
    use http::HeaderValue;

    use super::*;
    use crate::inbound::Webhook as _;
    use crate::inbound::tests::config;

    fn hook(vars: &[(&str, &str)]) -> Webhook {
        let mut all = vec![("TELEGRAM_WEBHOOK_SECRET", "s3cret")];
        all.extend_from_slice(vars);
        Webhook::new(&config(&all))
    }

    #[test]
    fn the_secret_header_opens_it() {
        let hook = hook(&[]);
        let mut headers = HeaderMap::new();
        assert_eq!(
            hook.check_headers(&headers, None),
            Err(Refusal::BadSignature)
        );
        headers.insert(verify::SECRET_HEADER, HeaderValue::from_static("s3cret"));
        assert_eq!(hook.check_headers(&headers, None), Ok(()));
        // A token in the path is not Telegram's way.
        assert_eq!(
            hook.check_headers(&HeaderMap::new(), Some("s3cret")),
            Err(Refusal::BadSignature)
        );
        assert_eq!(hook.check_body(&headers, b"{}"), Ok(()));
    }

    #[test]
    fn a_group_message_is_routed_or_skipped_by_its_rule() {
        let hook = hook(&[("TELEGRAM_BOT_TOKEN", "7000000001:AAH")]);
        assert!(!hook.warnings().is_empty(), "no bot_username configured");
        let mention = include_str!("../../tests/fixtures/telegram/group_reply_to_bot.json");
        let r = hook.parse(mention.as_bytes()).unwrap();
        assert_eq!(r.messages.len(), 1, "{r:?}");
        assert_eq!(r.messages[0].chat_kind, ChatKind::Group);
        assert_eq!(r.skipped, vec![]);
        let other = include_str!("../../tests/fixtures/telegram/group_no_mention.json");
        let r = hook.parse(other.as_bytes()).unwrap();
        assert_eq!(
            (r.messages.len(), r.skipped),
            (0, vec![(Skip::NotAddressed, 1)])
        );
    }

    #[test]
    fn an_update_without_a_message_is_acknowledged_and_garbage_refused() {
        let hook = hook(&[]);
        let poll = include_str!("../../tests/fixtures/telegram/poll.json");
        let r = hook.parse(poll.as_bytes()).unwrap();
        assert_eq!((r.messages.len(), r.skipped), (0, vec![(Skip::Ignored, 1)]));
        let text = include_str!("../../tests/fixtures/telegram/text.json");
        let r = hook.parse(text.as_bytes()).unwrap();
        assert_eq!(r.messages[0].chat_kind, ChatKind::Direct);
        assert!(hook.parse(b"[]").is_err());
    }
}
