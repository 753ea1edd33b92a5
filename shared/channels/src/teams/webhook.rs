//! `POST /webhooks/teams` behind [`inbound::Webhook`]: the bot's messaging endpoint. The Bot
//! Framework's token is checked before the body is read ([`verify`]); once the body is in,
//! its `serviceUrl` must be the one the token names; then the activity is read
//! (docs/channels.md, "Microsoft Teams").

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use hermes_config::Config;
use hermes_types::model::Platform;
use http::HeaderMap;

use super::keys::Keys;
use super::{Request, parse, verify};
use crate::decode::ParseError;
use crate::inbound::{self, Auth, Received, Refusal};

/// Teams' webhook, on when `TEAMS_APP_ID` is set.
pub struct Webhook {
    app_id: Option<String>,
    keys: Option<Arc<Keys>>,
    max_body_bytes: usize,
}

impl Webhook {
    /// The webhook as `config` sets it up: the bot's app id and where its keys are (read from
    /// then on while the process runs).
    pub fn new(config: &Config) -> Self {
        let teams = &config.ingest.webhooks.teams;
        let keys = match (&teams.app_id, &teams.keys) {
            (Some(_), Some(source)) => Some(Keys::new(source)),
            _ => None,
        };
        Self::with_keys(teams.app_id.clone(), keys, config.ingest.max_body_bytes)
    }

    /// The webhook of the bot `app_id` with `keys`.
    pub fn with_keys(
        app_id: Option<String>,
        keys: Option<Arc<Keys>>,
        max_body_bytes: usize,
    ) -> Self {
        Self {
            app_id,
            keys,
            max_body_bytes,
        }
    }

    fn check_at(&self, headers: &HeaderMap, now: f64) -> Result<Option<String>, Refusal> {
        verify::check(self.keys.as_deref(), self.app_id.as_deref(), headers, now)
    }
}

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

impl inbound::Webhook for Webhook {
    fn platform(&self) -> Platform {
        Platform::Teams
    }

    fn path(&self) -> &'static str {
        "/webhooks/teams"
    }

    fn auth(&self) -> Auth {
        // The token is the proof, whole in a header: nothing is read from a caller without it.
        Auth::Token { in_path: false }
    }

    fn enabled(&self) -> bool {
        self.app_id.is_some() && self.keys.is_some()
    }

    fn max_body_bytes(&self) -> usize {
        self.max_body_bytes
    }

    fn check_headers(&self, headers: &HeaderMap, _: Option<&str>) -> Result<(), Refusal> {
        self.check_at(headers, now()).map(|_| ())
    }

    fn check_body(&self, headers: &HeaderMap, body: &[u8]) -> Result<(), Refusal> {
        let claimed = self.check_at(headers, now())?;
        let named = parse::service_url(body);
        if verify::service_url_matches(claimed.as_deref(), named.as_deref()) {
            Ok(())
        } else {
            tracing::debug!("a Teams activity's serviceUrl is not the one its token names");
            Err(Refusal::BadSignature)
        }
    }

    fn parse(&self, body: &[u8]) -> Result<Received, ParseError> {
        let mut received = Received::default();
        match parse(body)? {
            Request::Message(m) => received.messages.push(*m),
            Request::Skipped(why) => received.skip(why, 1),
        }
        Ok(received)
    }

    fn warnings(&self) -> Vec<&'static str> {
        match &self.keys {
            Some(keys) if !keys.any() => vec![
                "the Bot Framework's signing keys are not read yet: Teams requests are refused until they are",
            ],
            _ => Vec::new(),
        }
    }
}
