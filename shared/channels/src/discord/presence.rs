//! Discord's presence for a message the Gateway connector received: the bot shown typing in
//! the channel, `POST /channels/{id}/typing` with the bot token
//! (<https://discord.com/developers/docs/resources/channel#trigger-typing-indicator>).
//! Discord shows it for 10 seconds or until the bot's message arrives, so it is renewed
//! every [`TYPING_EVERY`] while the work goes on. A slash command needs none: its deferred
//! response already shows the bot thinking.

use std::time::Duration;

use hermes_config::DiscordSender;
use hermes_types::model::ReplyTo;
use reqwest::RequestBuilder;
use reqwest::header::AUTHORIZATION;
use secrecy::{ExposeSecret, SecretString};

use super::parse::snowflake;

/// How often the typing indicator is renewed, inside Discord's 10 seconds.
pub const TYPING_EVERY: Duration = Duration::from_secs(8);

/// The typing indicator of the bot.
pub struct Typing {
    api: String,
    bot_token: SecretString,
}

impl Typing {
    /// The bot `settings` names; `None` without a bot token, which the call needs.
    pub fn new(settings: &DiscordSender) -> Option<Self> {
        Some(Self {
            api: settings.api_url.as_str().trim_end_matches('/').to_owned(),
            bot_token: settings.bot_token.clone()?,
        })
    }

    /// The typing indicator in the channel of `to`; `None` for a slash command's run (its
    /// deferred response shows the bot thinking) or a chat id that is not a channel id.
    pub fn request(&self, http: &reqwest::Client, to: &ReplyTo) -> Option<RequestBuilder> {
        if to.interaction.is_some() || !snowflake(&to.chat_id) {
            return None;
        }
        Some(
            http.post(format!("{}/channels/{}/typing", self.api, to.chat_id))
                .header(
                    AUTHORIZATION,
                    format!("Bot {}", self.bot_token.expose_secret()),
                ),
        )
    }
}

#[cfg(test)]
mod tests {
    use hermes_types::model::{Interaction, InteractionToken, Platform};
    use url::Url;

    use super::*;

    fn typing(token: Option<&str>) -> Option<Typing> {
        Typing::new(&DiscordSender {
            bot_token: token.map(|t| SecretString::from(t.to_owned())),
            api_url: Url::parse("https://discord.example/api/v10/").unwrap(),
        })
    }

    #[test]
    fn a_gateway_message_shows_typing_in_its_channel_with_the_bot_token() {
        assert!(typing(None).is_none(), "the call needs the bot token");
        let t = typing(Some("bot-token")).unwrap();
        let http = hermes_net::http::client_builder("test").build().unwrap();
        let to = ReplyTo::chat(Platform::Discord, "4400");
        let request = t.request(&http, &to).unwrap().build().unwrap();
        assert_eq!(
            request.url().as_str(),
            "https://discord.example/api/v10/channels/4400/typing"
        );
        assert_eq!(request.headers()[AUTHORIZATION], "Bot bot-token");
        assert!(
            t.request(&http, &ReplyTo::chat(Platform::Discord, "../x"))
                .is_none()
        );
    }

    #[test]
    fn a_slash_command_shows_none_its_deferred_response_does() {
        let t = typing(Some("bot-token")).unwrap();
        let mut to = ReplyTo::chat(Platform::Discord, "4400");
        to.interaction = Some(Interaction::received(
            "2200",
            InteractionToken::new("tok".to_owned()),
            chrono::Utc::now(),
        ));
        let http = hermes_net::http::client_builder("test").build().unwrap();
        assert!(t.request(&http, &to).is_none());
    }
}
