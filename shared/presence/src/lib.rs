//! Presence (docs/channels.md, "Presence"): while a run works on a person's chat message,
//! show them so. Each platform's call and how often it is made are in its folder of
//! `hermes-channels` (`presence.rs`): on WhatsApp (Cloud API or 360dialog) one call when the
//! run starts marks their message read and shows the typing indicator, which WhatsApp clears
//! when the reply arrives; on Telegram the `typing` chat action is sent at once and renewed
//! while the work goes on, and stops when the [`Working`] guard is dropped.
//!
//! All of it is best effort: the calls run on their own tasks, so they never delay the model
//! call nor the reply, and a failure is logged at debug level and counted in
//! `hermes_chat_presence_total{outcome="failed"}`, nothing else. Shared by the stages that
//! work on a run (no service depends on another); the channels' credentials are the delivery
//! settings' (`HERMES_PRESENCE=false` turns it all off).

use std::sync::Arc;
use std::time::Duration;

use hermes_channels::presence::{Cadence, PresenceCall};
use hermes_config::DeliverySettings;
use hermes_telemetry::Metrics;
use hermes_types::model::{Platform, ReplyTo};
use tokio::task::JoinHandle;

/// A presence call's deadline: one that takes longer is of no use to the person any more.
const CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// Shows people that their message is being answered, where the platform allows it.
#[derive(Clone)]
pub struct Presence {
    inner: Arc<Inner>,
}

struct Inner {
    http: reqwest::Client,
    calls: Vec<PresenceCall>,
    metrics: Metrics,
}

/// While this lives, the person keeps seeing that their message is being worked on (a
/// renewed call, like Telegram's typing action, goes on); dropping it stops the renewals.
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
        let calls = if settings.presence {
            PresenceCall::configured(settings)
        } else {
            Vec::new()
        };
        for platform in PresenceCall::PLATFORMS {
            for outcome in ["sent", "failed"] {
                metrics
                    .delivery
                    .chat_presence
                    .with_label_values(&[platform.as_str(), outcome]);
            }
        }
        Ok(Self {
            inner: Arc::new(Inner {
                http,
                calls,
                metrics,
            }),
        })
    }

    /// Start showing the person of `to` that a run works on their message: where the
    /// platform marks messages read (WhatsApp) and `read` names theirs (the run's first model
    /// call), once; where its indicator fades (Telegram), renewed until the guard is dropped.
    /// Returns at once; must be called within a Tokio runtime.
    pub fn working(&self, to: &ReplyTo, read: Option<&str>) -> Working {
        let Some(index) = self.inner.position(to.platform) else {
            return Working(None);
        };
        let call = &self.inner.calls[index];
        // The renewed calls begin once the first has been answered (or there is none).
        let (first_done, first_answered) = tokio::sync::oneshot::channel::<()>();
        if let Some(request) = call.first(&self.inner.http, to) {
            let inner = self.inner.clone();
            let platform = call.platform();
            // Not aborted with the guard (Messenger's `mark_seen`: the message was seen even
            // when the answer came first).
            tokio::spawn(async move {
                inner.count(platform, request.send().await);
                let _ = first_done.send(());
            });
        } else {
            drop(first_done);
        }
        match call.cadence() {
            Cadence::Once => {
                if let Some(request) = call.request(&self.inner.http, to, read) {
                    let inner = self.inner.clone();
                    let platform = call.platform();
                    // Not aborted with the guard: a read receipt is worth having even when
                    // the answer came first.
                    tokio::spawn(async move { inner.count(platform, request.send().await) });
                }
                Working(None)
            }
            Cadence::Every(period) => {
                let inner = self.inner.clone();
                let to = to.clone();
                Working(Some(tokio::spawn(async move {
                    // Seen, then typing, in that order (a dropped sender also ends the wait).
                    let _ = first_answered.await;
                    let mut every = tokio::time::interval(period);
                    loop {
                        every.tick().await;
                        inner.call(index, &to, None).await;
                    }
                })))
            }
        }
    }
}

impl Inner {
    /// Which of the configured calls is `platform`'s.
    fn position(&self, platform: Platform) -> Option<usize> {
        self.calls.iter().position(|c| c.platform() == platform)
    }

    /// Make call `index` for `to` once, and count it.
    async fn call(&self, index: usize, to: &ReplyTo, read: Option<&str>) {
        let call = &self.calls[index];
        if let Some(request) = call.request(&self.http, to, read) {
            self.count(call.platform(), request.send().await);
        }
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
    use serde_json::json;
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
        let whatsapp = on.inner.position(Platform::Whatsapp).unwrap();
        let to = ReplyTo::chat(Platform::Whatsapp, "16315551181");
        on.inner.call(whatsapp, &to, Some("wamid.1")).await;
        api.verify().await;
        let sent = metrics
            .delivery
            .chat_presence
            .with_label_values(&["whatsapp", "sent"])
            .get();
        assert_eq!(sent, 1);

        let off = [&vars[..], &[("HERMES_PRESENCE", "false")]].concat();
        let off = Presence::new(&settings(&off), Metrics::new()).unwrap();
        assert!(off.inner.calls.is_empty());
    }
}
