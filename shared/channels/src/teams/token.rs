//! The bot's own token for the Connector
//! (<https://learn.microsoft.com/en-us/azure/bot-service/rest-api/bot-framework-rest-connector-authentication#bot-to-connector>):
//! the OAuth 2.0 client-credentials grant with the app id and password, for the scope
//! `https://api.botframework.com/.default`. It is kept until a minute before it expires
//! (about an hour), fetched by one caller at a time, and forgotten when the Connector
//! answers 401, so a rolled password or a revoked token costs one failed send.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use hermes_config::TeamsSender;
use hermes_net::failure::FailureReason;
use reqwest::header::CONTENT_TYPE;
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;

use crate::{RetryPolicy, SendFailure};

/// The scope of a token for the Connector.
pub const SCOPE: &str = "https://api.botframework.com/.default";
/// How long before its expiry a token is fetched again.
const MARGIN: Duration = Duration::from_secs(60);
/// The longest a token is kept, whatever it says.
const MAX_LIFE: Duration = Duration::from_secs(24 * 60 * 60);

/// How long a request to the token endpoint may take.
const TIMEOUT: Duration = Duration::from_secs(10);

/// A client of the token endpoint (and of files fetched with the token) for the places that
/// have no stage client of their own: presence and media location.
pub fn client() -> reqwest::Client {
    hermes_net::http::client_builder(hermes_net::http::USER_AGENT)
        .timeout(TIMEOUT)
        .build()
        .unwrap_or_default()
}

/// The bot's token, fetched when needed.
pub struct Token {
    http: reqwest::Client,
    url: url::Url,
    app_id: String,
    password: SecretString,
    cached: Mutex<Option<(SecretString, Instant)>>,
    /// One fetch at a time: callers that find none cached wait for it.
    fetching: tokio::sync::Mutex<()>,
}

#[derive(Deserialize)]
struct Answer {
    access_token: String,
    #[serde(default)]
    expires_in: Option<u64>,
}

impl Token {
    /// The token of the bot `settings` names, fetched on `http`.
    pub fn new(settings: &TeamsSender, http: reqwest::Client) -> Self {
        Self {
            http,
            url: settings.token_url.clone(),
            app_id: settings.app_id.clone(),
            password: settings.app_password.clone(),
            cached: Mutex::new(None),
            fetching: tokio::sync::Mutex::new(()),
        }
    }

    /// The token held now, if it is still good.
    pub fn current(&self) -> Option<SecretString> {
        let cached = self.cached.lock().ok()?;
        let (token, until) = cached.as_ref()?;
        (Instant::now() < *until).then(|| token.clone())
    }

    /// Forget the token held (the Connector refused it).
    pub fn forget(&self) {
        if let Ok(mut cached) = self.cached.lock() {
            *cached = None;
        }
    }

    /// The token: the one held, or a new one.
    pub async fn get(&self, policy: &RetryPolicy) -> Result<SecretString, SendFailure> {
        if let Some(t) = self.current() {
            return Ok(t);
        }
        let _one = self.fetching.lock().await;
        if let Some(t) = self.current() {
            return Ok(t);
        }
        let form = url::form_urlencoded::Serializer::new(String::new())
            .append_pair("grant_type", "client_credentials")
            .append_pair("client_id", &self.app_id)
            .append_pair("client_secret", self.password.expose_secret())
            .append_pair("scope", SCOPE)
            .finish();
        let request = || {
            (self.http.post(self.url.clone()))
                .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
                .body(form.clone())
        };
        let answer = policy.send(request, |_| {}).await.map_err(|mut f| {
            // The token endpoint refusing our credentials is never a bad recipient.
            if f.reason == FailureReason::InvalidRecipient {
                f.reason = FailureReason::Unauthorized;
            }
            f.detail = format!("the Teams token endpoint {}", f.detail);
            f
        })?;
        let read: Answer = answer.json().await.map_err(|_| SendFailure {
            reason: FailureReason::ServiceUnavailable,
            status: None,
            body: None,
            detail: "the Teams token endpoint answered without an access_token".into(),
            tries: 1,
        })?;
        let life = Duration::from_secs(read.expires_in.unwrap_or(3600)).min(MAX_LIFE);
        let token = SecretString::from(read.access_token);
        if let Ok(mut cached) = self.cached.lock() {
            *cached = Some((token.clone(), Instant::now() + life.saturating_sub(MARGIN)));
        }
        Ok(token)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use wiremock::matchers::{body_string_contains, method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};

    use super::*;

    pub(crate) fn settings(server: &MockServer) -> TeamsSender {
        TeamsSender {
            app_id: "app-id".into(),
            app_password: SecretString::from("app-password"),
            token_url: format!("{}/token", server.uri()).parse().unwrap(),
            service_hosts: vec!["127.0.0.1".into()],
        }
    }

    #[tokio::test]
    async fn one_token_is_fetched_kept_and_fetched_again_once_forgotten() {
        hermes_net::install_crypto_provider();
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/token"))
            .and(body_string_contains("grant_type=client_credentials"))
            .and(body_string_contains("client_id=app-id"))
            .and(body_string_contains("client_secret=app-password"))
            .and(body_string_contains(
                "scope=https%3A%2F%2Fapi.botframework.com%2F.default",
            ))
            .respond_with(ResponseTemplate::new(200).set_body_json(serde_json::json!({
                "token_type": "Bearer", "expires_in": 3599, "access_token": "tok-1"
            })))
            .expect(2)
            .mount(&server)
            .await;
        let token = Token::new(&settings(&server), reqwest::Client::new());
        assert!(token.current().is_none());
        let p = RetryPolicy::fast();
        assert_eq!(token.get(&p).await.unwrap().expose_secret(), "tok-1");
        assert_eq!(token.get(&p).await.unwrap().expose_secret(), "tok-1");
        assert!(token.current().is_some());
        token.forget();
        token.get(&p).await.unwrap();
    }

    #[tokio::test]
    async fn refused_credentials_are_unauthorized_and_never_echoed() {
        hermes_net::install_crypto_provider();
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(400).set_body_json(serde_json::json!({
                "error": "invalid_client", "error_description": "AADSTS7000215: Invalid client secret provided."
            })))
            .mount(&server)
            .await;
        let token = Token::new(&settings(&server), reqwest::Client::new());
        let f = token.get(&RetryPolicy::fast()).await.unwrap_err();
        assert_eq!(f.reason, FailureReason::Unauthorized);
        assert!(!f.to_string().contains("app-password"));
    }
}
