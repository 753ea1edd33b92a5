//! A Discord interaction's reply context: what its answer is sent on
//! (<https://discord.com/developers/docs/interactions/receiving-and-responding#followup-messages>).
//! It travels with the run from ingest to delivery ([`super::Inbound::interaction`],
//! [`super::ReplyTo::interaction`]), in the queued messages only: the run's own row and its
//! `metadata`, which agents and API callers read, never hold it.

use std::fmt;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// How long Discord accepts an interaction's token for follow-ups: 15 minutes.
pub const INTERACTION_TOKEN_LIFE: chrono::TimeDelta = chrono::TimeDelta::minutes(15);

/// An interaction token: a credential to the interaction's webhook for 15 minutes. Its
/// `Debug` and `Display` never show it, so no log line can carry it.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct InteractionToken(String);

impl InteractionToken {
    /// The token as Discord sent it.
    pub fn new(token: impl Into<String>) -> Self {
        Self(token.into())
    }

    /// The token itself, for the follow-up URL alone.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for InteractionToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("InteractionToken(***)")
    }
}

/// Where the answer to a Discord slash command goes: the interaction's webhook.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Interaction {
    /// The application's id (a snowflake), the webhook's id.
    pub application_id: String,
    /// The interaction's token.
    pub token: InteractionToken,
    /// When the token stops being accepted (15 minutes after ingest received it).
    pub expires_at: DateTime<Utc>,
}

impl Interaction {
    /// The context of an interaction received at `received_at`.
    pub fn received(
        application_id: impl Into<String>,
        token: InteractionToken,
        received_at: DateTime<Utc>,
    ) -> Self {
        Self {
            application_id: application_id.into(),
            token,
            expires_at: received_at + INTERACTION_TOKEN_LIFE,
        }
    }

    /// Whether its token is still accepted at `now`.
    pub fn live_at(&self, now: DateTime<Utc>) -> bool {
        now < self.expires_at
    }
}

/// `v` (a queued message as JSON, say) with every interaction's token masked, wherever it
/// sits (an `Inbound`'s `interaction`, a `ReplyTo`'s, a tool round's request's): for showing a
/// parked message to an operator, whose terminal is no place for a live credential.
pub fn redact_tokens(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(map) => {
            for (key, value) in map.iter_mut() {
                if key == "interaction"
                    && let Some(token) = value.get_mut("token")
                    && token.is_string()
                {
                    *token = "***".into();
                }
                redact_tokens(value);
            }
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(redact_tokens),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_masked_wherever_a_message_carries_them() {
        let mut v = serde_json::json!({"payload": {
            "interaction": {"application_id": "1", "token": "secret-a"},
            "request": {"reply_to": {"interaction": {"token": "secret-b"}}},
            "parts": [{"reply_to": {"interaction": {"token": "secret-c"}}}],
            "text": "token",
        }});
        redact_tokens(&mut v);
        let shown = v.to_string();
        assert!(!shown.contains("secret-"), "{shown}");
        assert_eq!(v["payload"]["interaction"]["application_id"], "1");
        assert_eq!(v["payload"]["text"], "token");
    }

    #[test]
    fn the_token_is_never_printed_and_expires_after_fifteen_minutes() {
        let at = Utc::now();
        let i = Interaction::received("1", InteractionToken::new("aW50ZXJhY3Rpb24"), at);
        assert!(!format!("{i:?}").contains("aW50ZXJhY3Rpb24"));
        assert_eq!(
            serde_json::to_value(&i).unwrap()["token"],
            "aW50ZXJhY3Rpb24"
        );
        assert!(i.live_at(at + chrono::TimeDelta::minutes(14)));
        assert!(!i.live_at(at + INTERACTION_TOKEN_LIFE));
    }
}
