//! A Meta app's webhook behind [`inbound::Webhook`], the same for every Meta platform: the
//! body signed with the app secret, the `GET` handshake answered with the verify token, the
//! body parsed by the platform's own parser.

use hermes_types::model::{Inbound, MessageEvent, Platform};
use http::HeaderMap;
use secrecy::SecretString;

use super::MetaApp;
use crate::decode::ParseError;
use crate::inbound::{self, Auth, Handshake, Received, Refusal};

/// One Meta platform's webhook route.
pub struct MetaWebhook {
    platform: Platform,
    path: &'static str,
    app: MetaApp,
    max_body_bytes: usize,
    parse: Parser,
}

/// How a platform's body becomes what ingest handles.
enum Parser {
    /// Messages, statuses and skips (WhatsApp).
    Full(fn(&[u8]) -> Result<Received, ParseError>),
    /// Messages only, every one answered (Instagram, Messenger).
    Messages(fn(&[u8]) -> Result<Vec<MessageEvent>, ParseError>),
}

impl MetaWebhook {
    /// `platform`'s route at `path`: on when `app_secret` is set, its handshake when
    /// `verify_token` is; bodies up to `max_body_bytes` read by `parse`.
    pub fn new(
        platform: Platform,
        path: &'static str,
        secrets: (Option<SecretString>, Option<SecretString>),
        max_body_bytes: usize,
        parse: fn(&[u8]) -> Result<Received, ParseError>,
    ) -> Self {
        Self::with(platform, path, secrets, max_body_bytes, Parser::Full(parse))
    }

    /// As [`MetaWebhook::new`], for a platform whose webhook carries messages only, each of
    /// them answered.
    pub fn messages(
        platform: Platform,
        path: &'static str,
        secrets: (Option<SecretString>, Option<SecretString>),
        max_body_bytes: usize,
        parse: fn(&[u8]) -> Result<Vec<MessageEvent>, ParseError>,
    ) -> Self {
        let parse = Parser::Messages(parse);
        Self::with(platform, path, secrets, max_body_bytes, parse)
    }

    fn with(
        platform: Platform,
        path: &'static str,
        (app_secret, verify_token): (Option<SecretString>, Option<SecretString>),
        max_body_bytes: usize,
        parse: Parser,
    ) -> Self {
        Self {
            platform,
            path,
            app: MetaApp::new(app_secret, verify_token),
            max_body_bytes,
            parse,
        }
    }
}

impl inbound::Webhook for MetaWebhook {
    fn platform(&self) -> Platform {
        self.platform
    }

    fn path(&self) -> &'static str {
        self.path
    }

    fn auth(&self) -> Auth {
        Auth::Signature
    }

    fn enabled(&self) -> bool {
        self.app.enabled()
    }

    fn max_body_bytes(&self) -> usize {
        self.max_body_bytes
    }

    fn check_headers(&self, headers: &HeaderMap, _: Option<&str>) -> Result<(), Refusal> {
        self.app.check_headers(headers)
    }

    fn check_body(&self, headers: &HeaderMap, body: &[u8]) -> Result<(), Refusal> {
        self.app.check_body(headers, body)
    }

    fn handshake(&self) -> Option<&dyn Handshake> {
        Some(&self.app)
    }

    fn parse(&self, body: &[u8]) -> Result<Received, ParseError> {
        match self.parse {
            Parser::Full(parse) => parse(body),
            Parser::Messages(parse) => Ok(Received {
                messages: parse(body)?.into_iter().map(Inbound::of).collect(),
                ..Received::default()
            }),
        }
    }
}
