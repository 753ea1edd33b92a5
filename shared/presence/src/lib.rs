//! Presence (docs/channels.md, "Presence"): while a run works on a person's chat message,
//! show them so. On WhatsApp (Cloud API or 360dialog) one call when the run starts marks
//! their message read and shows the typing indicator, which WhatsApp clears when the reply
//! arrives (or after 25 s). On Telegram the `typing` chat action is sent at once and every
//! [`TYPING_EVERY`] while the work goes on (Telegram shows it 5 s, or until a message
//! arrives), and stops when the [`Working`] guard is dropped.
//!
//! All of it is best effort: the calls run on their own tasks, so they never delay the model
//! call nor the reply, and a failure is logged at debug level and counted in
//! `hermes_chat_presence_total{outcome="failed"}`, nothing else. Shared by the stages that
//! work on a run (no service depends on another); the channels' credentials are the delivery
//! settings' (`HERMES_PRESENCE=false` turns it all off).

use std::time::Duration;

use hermes_config::{DeliverySettings, WhatsappSender};
use hermes_telemetry::Metrics;
use hermes_types::model::{Platform, ReplyTo};
use secrecy::{ExposeSecret, SecretString};
use serde_json::json;
use tokio::task::JoinHandle;

/// How often Telegram's typing action is renewed (Telegram shows it for 5 s).
pub const TYPING_EVERY: Duration = Duration::from_secs(4);

/// A presence call's deadline: one that takes longer is of no use to the person any more.
const CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// How WhatsApp's endpoint is authorized.
enum Auth {
    D360(SecretString),
    Bearer(SecretString),
}

/// WhatsApp's messages endpoint, where a read receipt is POSTed.
struct WhatsappEndpoint {
    url: String,
    auth: Auth,
}

/// Telegram's Bot API of the configured bot.
struct TelegramEndpoint {
    /// `{base}/bot{token}/sendChatAction`: holds the token, so it is never logged.
    url: SecretString,
}

/// Shows people that their message is being answered, where the platform allows it.
#[derive(Clone)]
pub struct Presence {
    inner: std::sync::Arc<Inner>,
}

struct Inner {
    http: reqwest::Client,
    whatsapp: Option<WhatsappEndpoint>,
    telegram: Option<TelegramEndpoint>,
    metrics: Metrics,
}

/// While this lives, the person keeps seeing that their message is being worked on (the
/// Telegram typing action is renewed); dropping it stops the renewals.
#[must_use = "presence stops when the guard is dropped"]
pub struct Working(Option<JoinHandle<()>>);

impl Drop for Working {
    fn drop(&mut self) {
        if let Some(task) = self.0.take() {
            task.abort();
        }
    }
}

impl Presence {
    /// Presence through the channels `settings` has credentials for; none at all when
    /// `settings.presence` is off.
    pub fn new(settings: &DeliverySettings, metrics: Metrics) -> Result<Self, reqwest::Error> {
        let http = hermes_net::http::client_builder(hermes_net::http::USER_AGENT)
            .timeout(CALL_TIMEOUT)
            .build()?;
        let on = settings.presence;
        let whatsapp = settings
            .whatsapp
            .as_ref()
            .filter(|_| on)
            .map(|s| WhatsappEndpoint {
                url: s.messages_url(),
                auth: match s {
                    WhatsappSender::Dialog360 { api_key, .. } => Auth::D360(api_key.clone()),
                    WhatsappSender::Cloud { access_token, .. } => {
                        Auth::Bearer(access_token.clone())
                    }
                },
            });
        let telegram = settings
            .telegram
            .as_ref()
            .filter(|_| on)
            .map(|t| TelegramEndpoint {
                url: SecretString::from(format!(
                    "{}/bot{}/sendChatAction",
                    t.base_url.as_str().trim_end_matches('/'),
                    t.bot_token.expose_secret()
                )),
            });
        for platform in [Platform::Whatsapp, Platform::Telegram] {
            for outcome in ["sent", "failed"] {
                metrics
                    .delivery
                    .chat_presence
                    .with_label_values(&[platform.as_str(), outcome]);
            }
        }
        Ok(Self {
            inner: std::sync::Arc::new(Inner {
                http,
                whatsapp,
                telegram,
                metrics,
            }),
        })
    }

    /// Start showing the person of `to` that a run works on their message: on WhatsApp,
    /// when `read` names their message (the run's first model call), it is marked read with
    /// the typing indicator; on Telegram the typing action runs until the guard is dropped.
    /// Returns at once; must be called within a Tokio runtime.
    pub fn working(&self, to: &ReplyTo, read: Option<&str>) -> Working {
        match to.platform {
            Platform::Whatsapp => {
                if let (Some(_), Some(wamid)) = (&self.inner.whatsapp, read) {
                    let inner = self.inner.clone();
                    let wamid = wamid.to_string();
                    // Not aborted with the guard: the receipt is worth having even when the
                    // answer came first.
                    tokio::spawn(async move { inner.read_and_typing(&wamid).await });
                }
                Working(None)
            }
            Platform::Telegram if self.inner.telegram.is_some() => {
                let inner = self.inner.clone();
                let chat = to.chat_id.clone();
                Working(Some(tokio::spawn(async move {
                    let mut every = tokio::time::interval(TYPING_EVERY);
                    loop {
                        every.tick().await;
                        inner.typing(&chat).await;
                    }
                })))
            }
            _ => Working(None),
        }
    }
}

impl Inner {
    /// WhatsApp: mark message `wamid` read and show the typing indicator, in one call.
    async fn read_and_typing(&self, wamid: &str) {
        let Some(wa) = &self.whatsapp else { return };
        let body = json!({
            "messaging_product": "whatsapp",
            "status": "read",
            "message_id": wamid,
            "typing_indicator": {"type": "text"},
        });
        let req = self.http.post(&wa.url).json(&body);
        let req = match &wa.auth {
            Auth::D360(key) => req.header("D360-API-KEY", key.expose_secret()),
            Auth::Bearer(token) => req.bearer_auth(token.expose_secret()),
        };
        self.count(Platform::Whatsapp, req.send().await);
    }

    /// Telegram: the `typing` action in `chat`.
    async fn typing(&self, chat: &str) {
        let Some(tg) = &self.telegram else { return };
        let req = self
            .http
            .post(tg.url.expose_secret())
            .json(&json!({"chat_id": chat, "action": "typing"}));
        self.count(Platform::Telegram, req.send().await);
    }

    /// Count a call's outcome; a failure is logged without its URL (a Telegram URL holds
    /// the bot token).
    fn count(&self, platform: Platform, sent: Result<reqwest::Response, reqwest::Error>) {
        let failed = match sent {
            Ok(resp) if resp.status().is_success() => None,
            Ok(resp) => Some(format!("answered {}", resp.status())),
            Err(e) => Some(e.without_url().to_string()),
        };
        let outcome = match &failed {
            None => "sent",
            Some(why) => {
                tracing::debug!(platform = platform.as_str(), error = %why, "presence call failed");
                "failed"
            }
        };
        self.metrics
            .delivery
            .chat_presence
            .with_label_values(&[platform.as_str(), outcome])
            .inc();
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use hermes_config::Config;
    use wiremock::matchers::{body_json, header, method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};

    use super::*;

    fn settings(vars: &[(&str, &str)]) -> DeliverySettings {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Config::from_lookup(&move |k| map.get(k).cloned(), None)
            .unwrap()
            .delivery
    }

    #[tokio::test]
    async fn a_360dialog_receipt_goes_with_its_key_and_presence_off_calls_nothing() {
        let api = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/messages"))
            .and(header("D360-API-KEY", "d360-key"))
            .and(body_json(json!({
                "messaging_product": "whatsapp", "status": "read", "message_id": "wamid.1",
                "typing_indicator": {"type": "text"}
            })))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({"success": true})))
            .expect(1)
            .mount(&api)
            .await;
        let uri = api.uri();
        let vars = [
            ("D360_API_KEY", "d360-key"),
            ("D360_BASE_URL", uri.as_str()),
        ];
        let metrics = Metrics::new();
        let on = Presence::new(&settings(&vars), metrics.clone()).unwrap();
        on.inner.read_and_typing("wamid.1").await;
        api.verify().await;
        let sent = metrics
            .delivery
            .chat_presence
            .with_label_values(&["whatsapp", "sent"])
            .get();
        assert_eq!(sent, 1);

        let off = [&vars[..], &[("HERMES_PRESENCE", "false")]].concat();
        let off = Presence::new(&settings(&off), Metrics::new()).unwrap();
        assert!(off.inner.whatsapp.is_none() && off.inner.telegram.is_none());
    }
}
