//! `POST /webhooks/twilio` behind [`inbound::Webhook`]: Twilio's incoming messages and the
//! status callbacks of the messages Hermes sent, on one route, signed with the auth token
//! over the configured public URL and the form ([`super::verify`]). The signature is checked
//! on the raw body in ingest's pool of unverified bodies, before a slot is taken; the body is
//! decoded again to parse it once it is genuine (a form is cheap to decode, and the check
//! holds no state between the two).

use hermes_config::Config;
use hermes_types::model::Platform;
use http::HeaderMap;
use secrecy::{ExposeSecret, SecretString};
use url::Url;

use super::parse::parse;
use super::verify::{TWILIO_SIGNATURE, form_params, signature_valid};
use crate::decode::ParseError;
use crate::inbound::{self, Auth, Received, Refusal};
use crate::token::header;

/// Twilio's webhook, on when `TWILIO_AUTH_TOKEN` and `TWILIO_WEBHOOK_URL` are set.
pub struct Webhook {
    auth_token: Option<SecretString>,
    public_url: Option<Url>,
    max_body_bytes: usize,
    help_text: Option<String>,
}

impl Webhook {
    /// The webhook as `config` sets it up.
    pub fn new(config: &Config) -> Self {
        let twilio = &config.ingest.webhooks.twilio;
        Self {
            auth_token: twilio.auth_token.clone(),
            public_url: twilio.public_url.clone(),
            max_body_bytes: config.ingest.max_body_bytes,
            help_text: config.channels.sms.help_text.clone(),
        }
    }

    /// The token and URL the signature is checked with, when both are set.
    fn keys(&self) -> Result<(&SecretString, &Url), Refusal> {
        match (&self.auth_token, &self.public_url) {
            (Some(token), Some(url)) => Ok((token, url)),
            _ => Err(Refusal::Off),
        }
    }
}

impl inbound::Webhook for Webhook {
    fn platform(&self) -> Platform {
        Platform::Sms
    }

    fn path(&self) -> &'static str {
        "/webhooks/twilio"
    }

    fn auth(&self) -> Auth {
        Auth::Signature
    }

    fn enabled(&self) -> bool {
        self.keys().is_ok()
    }

    fn max_body_bytes(&self) -> usize {
        self.max_body_bytes
    }

    fn check_headers(&self, headers: &HeaderMap, _: Option<&str>) -> Result<(), Refusal> {
        self.keys()?;
        match header(headers, TWILIO_SIGNATURE) {
            Some(_) => Ok(()),
            None => Err(Refusal::BadSignature),
        }
    }

    fn check_body(&self, headers: &HeaderMap, body: &[u8]) -> Result<(), Refusal> {
        let (token, url) = self.keys()?;
        let params = form_params(body);
        let given = header(headers, TWILIO_SIGNATURE);
        if signature_valid(token.expose_secret().as_bytes(), url, &params, given) {
            Ok(())
        } else {
            Err(Refusal::BadSignature)
        }
    }

    fn parse(&self, body: &[u8]) -> Result<Received, ParseError> {
        Ok(parse(&form_params(body), self.help_text.as_deref()))
    }

    fn warnings(&self) -> Vec<&'static str> {
        match (&self.auth_token, &self.public_url) {
            (Some(_), None) => vec![
                "TWILIO_AUTH_TOKEN is set without TWILIO_WEBHOOK_URL: POST /webhooks/twilio stays off (the signature covers the public URL)",
            ],
            _ => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;
    use crate::inbound::Webhook as _;
    use crate::inbound::tests::config;
    use crate::twilio::verify::signature;

    const URL: &str = "https://hermes.example/webhooks/twilio";
    const SMS: &str = include_str!("../../tests/fixtures/twilio/sms.txt");

    #[test]
    fn a_body_is_genuine_only_signed_over_the_configured_url() {
        let hook = Webhook::new(&config(&[
            ("TWILIO_AUTH_TOKEN", "tok"),
            ("TWILIO_WEBHOOK_URL", URL),
        ]));
        assert!(hook.enabled());
        let mut headers = HeaderMap::new();
        assert_eq!(
            hook.check_headers(&headers, None),
            Err(Refusal::BadSignature)
        );
        let good = signature(b"tok", URL, &form_params(SMS.as_bytes()));
        headers.insert(TWILIO_SIGNATURE, HeaderValue::from_str(&good).unwrap());
        assert_eq!(hook.check_headers(&headers, None), Ok(()));
        assert_eq!(hook.check_body(&headers, SMS.as_bytes()), Ok(()));
        let tampered = SMS.replace("Hello", "Hallo");
        assert_eq!(
            hook.check_body(&headers, tampered.as_bytes()),
            Err(Refusal::BadSignature)
        );
        let elsewhere = signature(
            b"tok",
            "https://evil.example/webhooks/twilio",
            &form_params(SMS.as_bytes()),
        );
        headers.insert(TWILIO_SIGNATURE, HeaderValue::from_str(&elsewhere).unwrap());
        assert_eq!(
            hook.check_body(&headers, SMS.as_bytes()),
            Err(Refusal::BadSignature)
        );
        assert_eq!(hook.parse(SMS.as_bytes()).unwrap().messages.len(), 1);
    }

    #[test]
    fn the_route_is_off_without_both_the_token_and_the_url() {
        let hook = Webhook::new(&config(&[("TWILIO_AUTH_TOKEN", "tok")]));
        assert!(!hook.enabled());
        assert_eq!(hook.warnings().len(), 1);
        assert_eq!(hook.check_body(&HeaderMap::new(), b""), Err(Refusal::Off));
    }
}
