//! The delivery stage's part of the configuration, all from the environment: the channel
//! senders (credentials and base URLs), the in-call retry pauses, the per-platform circuit
//! breaker, the outbound rate gate, the agent webhook allowlist; and where ops alerts go.

use std::time::Duration;

use secrecy::SecretString;
use url::Url;

use super::{AllowRule, Reader};

/// Telegram's Bot API.
#[derive(Clone, Debug)]
pub struct TelegramSender {
    pub bot_token: SecretString,
    pub base_url: Url,
}

/// How WhatsApp replies are sent.
#[derive(Clone, Debug)]
pub enum WhatsappSender {
    /// 360dialog: `POST {base}/messages` with the `D360-API-KEY` header.
    Dialog360 {
        api_key: SecretString,
        base_url: Url,
    },
    /// Meta's Cloud API: `POST {base}/{phone_number_id}/messages` with a Bearer token.
    Cloud {
        access_token: SecretString,
        phone_number_id: String,
        base_url: Url,
    },
}

/// Instagram messaging through the Graph API.
#[derive(Clone, Debug)]
pub struct InstagramSender {
    pub access_token: SecretString,
    pub base_url: Url,
}

/// The per-platform circuit breaker (seed 001: 10 failures in 5 minutes open it for 2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BreakerSettings {
    pub threshold: u32,
    pub window: Duration,
    pub open_for: Duration,
}

/// The outbound rate gate: token buckets per chat and per bot / number.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RateGateSettings {
    /// Messages per second to one chat, and how many may go at once.
    pub chat_per_sec: f64,
    pub chat_burst: u32,
    /// Messages per second through one bot token / phone number / account.
    pub bot_per_sec: f64,
    /// The longest a send waits at the gate before it is retried later instead.
    pub max_wait: Duration,
}

/// Everything the delivery stage reads.
#[derive(Clone, Debug)]
pub struct DeliverySettings {
    pub telegram: Option<TelegramSender>,
    pub whatsapp: Option<WhatsappSender>,
    pub instagram: Option<InstagramSender>,
    /// Pauses between the in-call tries of one send (seed: 1 s, 3 s, 9 s).
    pub send_pauses: Vec<Duration>,
    /// The longest `Retry-After` waited within a call.
    pub max_retry_after: Duration,
    pub breaker: BreakerSettings,
    pub rate_gate: RateGateSettings,
    /// Hosts and ranges agent webhook URLs may reach although they are not public
    /// (`HERMES_WEBHOOK_ALLOW`); everything else non-public is refused.
    pub webhook_allow: Vec<AllowRule>,
}

/// Where and how often ops alerts are sent.
#[derive(Clone, Debug)]
pub struct AlertSettings {
    pub slack_url: Option<SecretString>,
    pub discord_url: Option<SecretString>,
    /// One alert of a kind (and subject) per this window, across every replica.
    pub dedupe_window: Duration,
    /// A parking queue holding more than this many messages raises an alert.
    pub parking_threshold: u32,
}

impl Reader<'_> {
    fn base_url(&mut self, name: &str) -> Url {
        let raw = self
            .raw(name)
            .unwrap_or_else(|| Self::default_of(name).to_string());
        match Url::parse(&raw) {
            Ok(u) if matches!(u.scheme(), "http" | "https") => u,
            _ => {
                self.problems.push(format!("{name} must be an http(s) URL"));
                Url::parse("http://invalid.invalid").expect("a valid URL")
            }
        }
    }

    fn millis_list(&mut self, name: &str) -> Vec<Duration> {
        let value = self
            .raw(name)
            .unwrap_or_else(|| Self::default_of(name).to_string());
        let parsed: Result<Vec<Duration>, _> = value
            .split(',')
            .map(|s| s.trim().parse::<u64>().map(Duration::from_millis))
            .collect();
        parsed.unwrap_or_else(|_| {
            self.problems.push(format!(
                "{name}={value:?} must be comma-separated milliseconds, e.g. 1000,3000,9000"
            ));
            Vec::new()
        })
    }

    fn positive_f64(&mut self, name: &str) -> f64 {
        match self.parsed::<f64>(name) {
            Some(v) if v > 0.0 && v.is_finite() => v,
            Some(v) => {
                self.problems
                    .push(format!("{name}={v} must be a positive number"));
                1.0
            }
            None => 1.0,
        }
    }

    /// 360dialog or the Cloud API: by `WHATSAPP_SENDER`, else by which credential is set.
    fn whatsapp(&mut self) -> Option<WhatsappSender> {
        let d360 = self.secret("D360_API_KEY");
        let cloud = self.secret("WHATSAPP_ACCESS_TOKEN");
        let choice = match self.raw("WHATSAPP_SENDER").as_deref() {
            Some("360dialog") => "360dialog",
            Some("cloud") => "cloud",
            Some(other) => {
                self.problems.push(format!(
                    "WHATSAPP_SENDER={other:?} must be 360dialog or cloud"
                ));
                return None;
            }
            None => match (&d360, &cloud) {
                (None, None) => return None,
                (Some(_), None) => "360dialog",
                (None, Some(_)) => "cloud",
                (Some(_), Some(_)) => {
                    self.problems.push(
                        "both D360_API_KEY and WHATSAPP_ACCESS_TOKEN are set: choose one with WHATSAPP_SENDER=360dialog|cloud".into(),
                    );
                    return None;
                }
            },
        };
        if choice == "360dialog" {
            let Some(api_key) = d360 else {
                self.problems
                    .push("WHATSAPP_SENDER=360dialog needs D360_API_KEY".into());
                return None;
            };
            return Some(WhatsappSender::Dialog360 {
                api_key,
                base_url: self.base_url("D360_BASE_URL"),
            });
        }
        match (cloud, self.raw("WHATSAPP_PHONE_NUMBER_ID")) {
            (Some(access_token), Some(phone_number_id)) => Some(WhatsappSender::Cloud {
                access_token,
                phone_number_id,
                base_url: self.base_url("WHATSAPP_API_BASE_URL"),
            }),
            _ => {
                self.problems.push(
                    "the WhatsApp Cloud API needs WHATSAPP_ACCESS_TOKEN and WHATSAPP_PHONE_NUMBER_ID"
                        .into(),
                );
                None
            }
        }
    }

    pub(super) fn delivery(&mut self) -> DeliverySettings {
        let telegram = self
            .secret("TELEGRAM_BOT_TOKEN")
            .map(|bot_token| TelegramSender {
                bot_token,
                base_url: self.base_url("TELEGRAM_API_BASE_URL"),
            });
        let whatsapp = self.whatsapp();
        let instagram = self
            .secret("INSTAGRAM_ACCESS_TOKEN")
            .map(|access_token| InstagramSender {
                access_token,
                base_url: self.base_url("INSTAGRAM_API_BASE_URL"),
            });
        let send_pauses = self.millis_list("HERMES_SEND_PAUSES_MS");
        let max_retry_after =
            Duration::from_secs(self.parsed("HERMES_MAX_RETRY_AFTER_SECS").unwrap_or(30));
        let breaker = BreakerSettings {
            threshold: self
                .parsed::<u32>("HERMES_BREAKER_THRESHOLD")
                .unwrap_or(10)
                .max(1),
            window: Duration::from_secs(
                self.parsed::<u64>("HERMES_BREAKER_WINDOW_SECS")
                    .unwrap_or(300)
                    .max(1),
            ),
            open_for: Duration::from_secs(
                self.parsed::<u64>("HERMES_BREAKER_OPEN_SECS")
                    .unwrap_or(120)
                    .max(1),
            ),
        };
        let rate_gate = RateGateSettings {
            chat_per_sec: self.positive_f64("HERMES_DELIVERY_CHAT_PER_SEC"),
            chat_burst: self
                .parsed::<u32>("HERMES_DELIVERY_CHAT_BURST")
                .unwrap_or(1)
                .max(1),
            bot_per_sec: self.positive_f64("HERMES_DELIVERY_BOT_PER_SEC"),
            max_wait: Duration::from_secs(
                self.parsed::<u64>("HERMES_RATE_GATE_WAIT_SECS")
                    .unwrap_or(30),
            ),
        };
        let mut webhook_allow = Vec::new();
        for entry in self
            .raw("HERMES_WEBHOOK_ALLOW")
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
            .filter(|e| !e.is_empty())
        {
            match entry.parse::<AllowRule>() {
                Ok(rule) => webhook_allow.push(rule),
                Err(e) => self.problems.push(format!("HERMES_WEBHOOK_ALLOW: {e}")),
            }
        }
        DeliverySettings {
            webhook_allow,
            telegram,
            whatsapp,
            instagram,
            send_pauses,
            max_retry_after,
            breaker,
            rate_gate,
        }
    }

    pub(super) fn alerts(&mut self) -> AlertSettings {
        let mut webhook = |name: &str| {
            let s = self.secret(name)?;
            match Url::parse(secrecy::ExposeSecret::expose_secret(&s)) {
                Ok(u) if matches!(u.scheme(), "http" | "https") => Some(s),
                _ => {
                    self.problems.push(format!("{name} must be an http(s) URL"));
                    None
                }
            }
        };
        let slack_url = webhook("HERMES_ALERT_SLACK_URL");
        let discord_url = webhook("HERMES_ALERT_DISCORD_URL");
        AlertSettings {
            slack_url,
            discord_url,
            dedupe_window: Duration::from_secs(
                self.parsed::<u64>("HERMES_ALERT_DEDUPE_SECS")
                    .unwrap_or(300)
                    .max(1),
            ),
            parking_threshold: self
                .parsed::<u32>("HERMES_ALERT_PARKING_ABOVE")
                .unwrap_or(100),
        }
    }
}

impl DeliverySettings {
    /// The platforms whose replies can be sent, by name (for the start-up log and doctor).
    pub fn configured(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        if self.telegram.is_some() {
            out.push("telegram");
        }
        match &self.whatsapp {
            Some(WhatsappSender::Dialog360 { .. }) => out.push("whatsapp (360dialog)"),
            Some(WhatsappSender::Cloud { .. }) => out.push("whatsapp (cloud api)"),
            None => {}
        }
        if self.instagram.is_some() {
            out.push("instagram");
        }
        out
    }
}
