//! What Meta's platforms share (WhatsApp's Cloud API and Instagram, both apps of Meta's
//! Graph API).
//!
//! In: both are webhooks of a Meta app
//! (<https://developers.facebook.com/docs/graph-api/webhooks>): the app secret that signs
//! every body and the verify token of the subscription handshake ([`verify`], [`MetaApp`]).
//! Each platform folder registers a [`MetaWebhook`] with its path and parser.
//!
//! Out: the Graph API's error table ([`errors`], also read for `failed` statuses) and how a
//! send's answer names the message it accepted.

pub mod errors;
pub mod messaging;
pub mod send_api;
pub mod verify;
mod webhook;

pub use webhook::MetaWebhook;

use http::HeaderMap;
use secrecy::{ExposeSecret, SecretString};

use crate::inbound::{Handshake, Refusal};
use crate::token::header;
use verify::{HUB_SIGNATURE, handshake, hub_signature_valid};

/// One Meta app's webhook secrets. Without the app secret its `POST` route is off, without
/// the verify token its handshake.
#[derive(Clone, Debug, Default)]
pub struct MetaApp {
    app_secret: Option<SecretString>,
    verify_token: Option<SecretString>,
}

impl MetaApp {
    /// The app whose bodies `app_secret` signs and whose handshake `verify_token` answers.
    pub fn new(app_secret: Option<SecretString>, verify_token: Option<SecretString>) -> Self {
        Self {
            app_secret,
            verify_token,
        }
    }

    /// Whether bodies are taken: the app secret is set.
    pub fn enabled(&self) -> bool {
        self.app_secret.is_some()
    }

    /// Before the body: the route is on and the signature header is there.
    pub fn check_headers(&self, headers: &HeaderMap) -> Result<(), Refusal> {
        match &self.app_secret {
            None => Err(Refusal::Off),
            Some(_) if headers.contains_key(HUB_SIGNATURE) => Ok(()),
            Some(_) => Err(Refusal::BadSignature),
        }
    }

    /// `X-Hub-Signature-256` over the raw body.
    pub fn check_body(&self, headers: &HeaderMap, body: &[u8]) -> Result<(), Refusal> {
        let Some(secret) = &self.app_secret else {
            return Err(Refusal::Off);
        };
        let signature = header(headers, HUB_SIGNATURE);
        if hub_signature_valid(secret.expose_secret().as_bytes(), body, signature) {
            Ok(())
        } else {
            Err(Refusal::BadSignature)
        }
    }
}

impl Handshake for MetaApp {
    fn enabled(&self) -> bool {
        self.verify_token.is_some()
    }

    fn answer(&self, query: Option<&str>) -> Result<String, Refusal> {
        let Some(expected) = &self.verify_token else {
            return Err(Refusal::Off);
        };
        let (mut mode, mut token, mut challenge) = (None, None, None);
        for (name, value) in url::form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
            let slot = match name.as_ref() {
                "hub.mode" => &mut mode,
                "hub.verify_token" => &mut token,
                "hub.challenge" => &mut challenge,
                _ => continue,
            };
            slot.get_or_insert(value);
        }
        handshake(
            expected.expose_secret(),
            mode.as_deref(),
            token.as_deref(),
            challenge.as_deref(),
        )
        .ok_or(Refusal::BadSignature)
    }
}

/// The id a Meta platform gave the message it accepted, at JSON `pointer` of its `answer`
/// (a string, or a number as Instagram may send); `None` when the answer names none.
pub(crate) async fn answer_id(answer: reqwest::Response, pointer: &str) -> Option<String> {
    let body: serde_json::Value = answer.json().await.ok()?;
    match body.pointer(pointer)? {
        serde_json::Value::String(s) if !s.is_empty() => Some(s.clone()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::verify::sign_hub;
    use super::*;

    fn app() -> MetaApp {
        MetaApp::new(Some("s3cret".into()), Some("vt".into()))
    }

    #[test]
    fn a_body_is_genuine_only_under_the_app_secret() {
        let mut headers = HeaderMap::new();
        assert_eq!(app().check_headers(&headers), Err(Refusal::BadSignature));
        assert_eq!(
            MetaApp::default().check_headers(&headers),
            Err(Refusal::Off)
        );
        let signature = sign_hub(b"s3cret", b"{}");
        headers.insert(HUB_SIGNATURE, HeaderValue::from_str(&signature).unwrap());
        assert_eq!(app().check_headers(&headers), Ok(()));
        assert_eq!(app().check_body(&headers, b"{}"), Ok(()));
        assert_eq!(
            app().check_body(&headers, b"{ }"),
            Err(Refusal::BadSignature)
        );
        assert_eq!(
            MetaApp::default().check_body(&headers, b"{}"),
            Err(Refusal::Off)
        );
    }

    #[test]
    fn the_handshake_reads_its_query() {
        let q = "hub.mode=subscribe&hub.verify_token=vt&hub.challenge=1158201444";
        assert_eq!(app().answer(Some(q)), Ok("1158201444".into()));
        let spaced = "hub.challenge=a+b%21&hub.mode=subscribe&hub.verify_token=vt&x=1";
        assert_eq!(app().answer(Some(spaced)), Ok("a b!".into()));
        let wrong = "hub.mode=subscribe&hub.verify_token=no&hub.challenge=1";
        assert_eq!(app().answer(Some(wrong)), Err(Refusal::BadSignature));
        assert_eq!(app().answer(None), Err(Refusal::BadSignature));
        assert_eq!(MetaApp::default().answer(Some(q)), Err(Refusal::Off));
        assert!(Handshake::enabled(&app()));
        assert!(!Handshake::enabled(&MetaApp::default()));
    }
}
