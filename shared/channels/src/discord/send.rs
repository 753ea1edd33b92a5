//! Discord's sends, through the REST API (`DISCORD_API_URL`).
//!
//! The answer to a slash command follows up on its interaction
//! (<https://discord.com/developers/docs/interactions/receiving-and-responding#followup-messages>):
//! its first part edits the deferred response, `PATCH /webhooks/{application id}/{token}/messages/@original`,
//! which replaces the bot's "thinking"; further parts are follow-ups,
//! `POST /webhooks/{application id}/{token}`. These need no credential but the token, which
//! Discord accepts for 15 minutes. Past that (by the clock, or Discord answering `10015
//! Unknown Webhook`) the part goes to the channel with the bot token,
//! `POST /channels/{channel id}/messages` with `Authorization: Bot …`, when
//! `DISCORD_BOT_TOKEN` is set, and is parked with that reason otherwise. A reply without an
//! interaction (an external agent's, an operator's) goes to the channel the same way.
//!
//! Every message is sent with `allowed_mentions: {"parse": []}`, so a model's `@everyone` or
//! `<@id>` is shown, never pings. Every request passes Discord's rate-limit buckets first
//! ([`super::buckets`]).

use std::hash::{DefaultHasher, Hash, Hasher};
use std::time::Instant;

use chrono::Utc;
use hermes_config::DiscordSender;
use hermes_net::failure::FailureReason;
use hermes_types::model::{Interaction, Platform};
use reqwest::Method;
use reqwest::header::AUTHORIZATION;
use secrecy::{ExposeSecret, SecretString};
use serde_json::{Value, json};

use super::buckets::Buckets;
use super::errors;
use super::limits::LIMITS;
use super::parse::snowflake;
use crate::{Limits, Outbound, Part, RetryPolicy, SendFailure};

/// Why an answer is parked when its interaction's token has expired and no bot token is set.
pub const EXPIRED: &str = "the interaction's token has expired (Discord accepts an answer for 15 minutes) and DISCORD_BOT_TOKEN is not set to answer in the channel";

/// Sends as one Discord application.
pub struct Discord {
    http: reqwest::Client,
    api: String,
    bot_token: Option<SecretString>,
    buckets: Buckets,
}

/// One request: where it goes, under which rate-limit route, and whether it carries the bot
/// token.
struct Request<'a> {
    method: Method,
    url: String,
    route: String,
    bot: Option<&'a SecretString>,
}

impl Discord {
    /// The sender `settings` configures, on the stage's client `http`.
    pub fn new(settings: &DiscordSender, http: reqwest::Client) -> Self {
        Self {
            http,
            api: settings.api_url.as_str().trim_end_matches('/').to_owned(),
            bot_token: settings.bot_token.clone(),
            buckets: Buckets::new(),
        }
    }

    /// Send `body` as `request` once its bucket allows; Discord's answer.
    async fn call(
        &self,
        policy: &RetryPolicy,
        request: Request<'_>,
        body: &Value,
        on_failure: impl FnMut(FailureReason) + Send,
    ) -> Result<Value, SendFailure> {
        let wait = self.buckets.wait(&request.route, Instant::now());
        if wait > policy.max_retry_after {
            return Err(failure(
                FailureReason::RateLimited,
                format!(
                    "Discord's rate-limit bucket refills in {wait:?}: left to the queued retry"
                ),
            ));
        }
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
        let build = || {
            let r = self.http.request(request.method.clone(), &request.url);
            let r = match request.bot {
                Some(token) => r.header(AUTHORIZATION, format!("Bot {}", token.expose_secret())),
                None => r,
            };
            r.json(body)
        };
        let observe = |status, headers: &_| {
            self.buckets
                .observe(&request.route, status, headers, Instant::now())
        };
        let answer = policy
            .send_observed(build, on_failure, observe)
            .await
            .map_err(errors::described)?;
        Ok(answer.json().await.unwrap_or(Value::Null))
    }

    /// Send part `index` of the answer to `interaction`, run in the channel `chat_id`: the
    /// first edits the deferred response, the others follow up; past the token's life, in
    /// the channel ([`Discord::to_channel`]). Returns the message's id.
    pub async fn answer(
        &self,
        policy: &RetryPolicy,
        interaction: &Interaction,
        chat_id: &str,
        index: usize,
        part: &Part,
        mut on_failure: impl FnMut(FailureReason) + Send,
    ) -> Result<Option<String>, SendFailure> {
        if !interaction.live_at(Utc::now()) {
            return self
                .instead_of_token(policy, chat_id, part, None, on_failure)
                .await;
        }
        if !snowflake(&interaction.application_id) {
            return Err(failure(
                FailureReason::InvalidRecipient,
                "the interaction's application id is not a snowflake".into(),
            ));
        }
        let webhook = format!(
            "{}/webhooks/{}/{}",
            self.api,
            interaction.application_id,
            interaction.token.expose()
        );
        let (method, url) = match index {
            0 => (Method::PATCH, format!("{webhook}/messages/@original")),
            _ => (Method::POST, webhook),
        };
        // Buckets are per webhook: the route names it by a digest, so the table holds no token.
        let mut digest = DefaultHasher::new();
        interaction.token.expose().hash(&mut digest);
        let route = format!(
            "{method} webhooks/{}/{:016x}",
            interaction.application_id,
            digest.finish()
        );
        let request = Request {
            method,
            url,
            route,
            bot: None,
        };
        match self
            .call(policy, request, &body(part), &mut on_failure)
            .await
        {
            Ok(answer) => Ok(message_id(&answer)),
            Err(f) if errors::token_gone(&f) => {
                self.instead_of_token(policy, chat_id, part, Some(f), on_failure)
                    .await
            }
            Err(f) => Err(f),
        }
    }

    /// A part whose interaction token is no longer accepted (`refused`: Discord said so; by
    /// the clock otherwise): sent to the channel with the bot token, or parked with the reason.
    async fn instead_of_token(
        &self,
        policy: &RetryPolicy,
        chat_id: &str,
        part: &Part,
        refused: Option<SendFailure>,
        on_failure: impl FnMut(FailureReason) + Send,
    ) -> Result<Option<String>, SendFailure> {
        if self.bot_token.is_some() {
            tracing::info!(
                "the interaction's token has expired: the answer goes to the channel with the bot token"
            );
            return self.to_channel(policy, chat_id, part, on_failure).await;
        }
        let detail = match &refused {
            Some(f) => format!("{EXPIRED} ({})", f.detail),
            None => EXPIRED.to_owned(),
        };
        Err(SendFailure {
            reason: FailureReason::InvalidRecipient,
            status: refused.as_ref().and_then(|f| f.status),
            body: refused.and_then(|f| f.body),
            detail,
            tries: 0,
        })
    }

    /// Post `part` in the channel `chat_id` with the bot token; the message's id. Without a
    /// bot token nothing is sent: the reply is parked as `no_sender`, for replay once it is set.
    pub async fn to_channel(
        &self,
        policy: &RetryPolicy,
        chat_id: &str,
        part: &Part,
        on_failure: impl FnMut(FailureReason) + Send,
    ) -> Result<Option<String>, SendFailure> {
        let Some(token) = &self.bot_token else {
            return Err(failure(
                FailureReason::NoSender,
                "a Discord answer without a live interaction goes to its channel, which needs DISCORD_BOT_TOKEN".into(),
            ));
        };
        if !snowflake(chat_id) {
            return Err(failure(
                FailureReason::InvalidRecipient,
                "the chat id is not a Discord channel".into(),
            ));
        }
        let request = Request {
            method: Method::POST,
            url: format!("{}/channels/{chat_id}/messages", self.api),
            route: format!("POST channels/{chat_id}"),
            bot: Some(token),
        };
        let answer = self.call(policy, request, &body(part), on_failure).await?;
        Ok(message_id(&answer))
    }
}

/// A failure before anything was sent.
fn failure(reason: FailureReason, detail: String) -> SendFailure {
    SendFailure {
        reason,
        status: None,
        body: None,
        detail,
        tries: 0,
    }
}

/// The message body of one part: its text, or an image as an embed with its caption beside
/// it; mentions never ping.
fn body(part: &Part) -> Value {
    let mut body = match part {
        Part::Text(text) => json!({ "content": text }),
        Part::Image { url, caption } => json!({
            "content": caption.as_deref().unwrap_or(""),
            "embeds": [{ "image": { "url": url } }],
        }),
    };
    body["allowed_mentions"] = json!({ "parse": [] });
    body
}

/// The `id` of the message Discord answered with.
fn message_id(answer: &Value) -> Option<String> {
    answer.get("id")?.as_str().map(str::to_owned)
}

impl Outbound for Discord {
    fn platform(&self) -> Platform {
        Platform::Discord
    }

    fn limits(&self) -> Limits {
        LIMITS
    }

    /// Send one part to the channel `chat_id` with the bot token (a reply that has no
    /// interaction to follow up on). Discord's replies do not quote here.
    async fn send(
        &self,
        policy: &RetryPolicy,
        chat_id: &str,
        part: &Part,
        _quote: Option<&str>,
        on_failure: impl FnMut(FailureReason) + Send,
    ) -> Result<Option<String>, SendFailure> {
        self.to_channel(policy, chat_id, part, on_failure).await
    }
}

#[cfg(test)]
mod tests;
