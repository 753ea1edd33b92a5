//! How a request to WhatsApp is authorized: 360dialog takes its API key in a
//! `D360-API-KEY` header (<https://docs.360dialog.com/docs/waba-messaging>), Meta's Cloud API
//! a Bearer access token
//! (<https://developers.facebook.com/docs/whatsapp/cloud-api/get-started>). Sends, read
//! receipts and media look-ups all go with it.

use hermes_config::WhatsappSender;
use reqwest::RequestBuilder;
use reqwest::header::{AUTHORIZATION, HeaderName, HeaderValue};
use secrecy::{ExposeSecret, SecretString};

/// The credential of the configured WhatsApp provider.
#[derive(Clone)]
pub enum Auth {
    /// 360dialog's API key.
    D360(SecretString),
    /// The Cloud API's access token.
    Bearer(SecretString),
}

impl Auth {
    /// The credential `settings` configures.
    pub fn of(settings: &WhatsappSender) -> Self {
        match settings {
            WhatsappSender::Dialog360 { api_key, .. } => Auth::D360(api_key.clone()),
            WhatsappSender::Cloud { access_token, .. } => Auth::Bearer(access_token.clone()),
        }
    }

    /// `req` carrying the credential.
    pub fn apply(&self, req: RequestBuilder) -> RequestBuilder {
        match self {
            Auth::D360(key) => req.header("D360-API-KEY", key.expose_secret()),
            Auth::Bearer(token) => req.bearer_auth(token.expose_secret()),
        }
    }

    /// The credential as a header marked sensitive, so no debug output shows it; `None`
    /// when it holds what no header may.
    pub fn header(&self) -> Option<(HeaderName, HeaderValue)> {
        let (name, value) = match self {
            Auth::D360(key) => (
                HeaderName::from_static("d360-api-key"),
                key.expose_secret().to_string(),
            ),
            Auth::Bearer(token) => (AUTHORIZATION, format!("Bearer {}", token.expose_secret())),
        };
        let mut value = HeaderValue::from_str(&value).ok()?;
        value.set_sensitive(true);
        Some((name, value))
    }
}

/// The messages endpoint of the configured number, where messages and read receipts are
/// POSTed, with its credential.
#[derive(Clone)]
pub struct Messages {
    url: String,
    auth: Auth,
}

impl Messages {
    /// The endpoint `settings` configures.
    pub fn new(settings: &WhatsappSender) -> Self {
        Self {
            url: settings.messages_url(),
            auth: Auth::of(settings),
        }
    }

    /// A POST of the JSON `body` to it on `http`, authorized.
    pub fn post(&self, http: &reqwest::Client, body: &serde_json::Value) -> RequestBuilder {
        self.auth.apply(http.post(&self.url).json(body))
    }
}
