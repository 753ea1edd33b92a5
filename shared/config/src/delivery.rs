//! The delivery stage's part of the configuration, all from the environment: the channel
//! senders (credentials and base URLs), the in-call retry pauses, the per-platform circuit
//! breaker, the outbound rate gate, the agent webhook allowlist; and where ops alerts go.

use std::time::Duration;

use secrecy::SecretString;
use url::Url;

use crate::AllowRule;
use crate::env::Reader;
use crate::env::delivery::*;

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

/// Slack's Web API: the bot token, the API's base URL, and where its private files are.
#[derive(Clone, Debug)]
pub struct SlackSender {
    pub bot_token: SecretString,
    pub base_url: Url,
    /// Only `url_private` links under this URL are fetched with the bot token.
    pub files_base_url: Url,
}

/// Discord's REST API: interaction follow-ups need no credential; the bot token, when set,
/// answers in the channel once an interaction's token has expired.
#[derive(Clone, Debug)]
pub struct DiscordSender {
    pub bot_token: Option<SecretString>,
    pub api_url: Url,
}

/// The per-platform circuit breaker (docs/channels.md: 10 failures in 5 minutes open it for 2).
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
    /// Messages per second through one WhatsApp business number (Meta's throughput), in
    /// place of `bot_per_sec` for WhatsApp.
    pub whatsapp_per_sec: f64,
    /// The longest a send waits at the gate before it is retried later instead.
    pub max_wait: Duration,
}

/// Everything the delivery stage reads.
#[derive(Clone, Debug)]
pub struct DeliverySettings {
    pub telegram: Option<TelegramSender>,
    pub whatsapp: Option<WhatsappSender>,
    pub instagram: Option<InstagramSender>,
    pub slack: Option<SlackSender>,
    /// SMS through Twilio.
    pub sms: Option<crate::SmsSender>,
    /// Facebook Messenger.
    pub messenger: Option<crate::MessengerSender>,
    /// Microsoft Teams, through the Bot Framework Connector.
    pub teams: Option<crate::TeamsSender>,
    /// Discord, always on: an interaction's answer needs only its token.
    pub discord: DiscordSender,
    /// Pauses between the in-call tries of one send (seed: 1 s, 3 s, 9 s).
    pub send_pauses: Vec<Duration>,
    /// The longest `Retry-After` waited within a call.
    pub max_retry_after: Duration,
    pub breaker: BreakerSettings,
    pub rate_gate: RateGateSettings,
    /// Read receipts and typing indicators while a run answers (`HERMES_PRESENCE`).
    pub presence: bool,
    /// Hosts and ranges agent webhook URLs may reach although they are not public
    /// (`HERMES_WEBHOOK_ALLOW`); everything else non-public is refused.
    pub webhook_allow: Vec<AllowRule>,
    /// Non-public hosts and ranges REST callbacks may reach (`HERMES_CALLBACK_ALLOW`);
    /// everything else non-public is refused.
    pub callback_allow: Vec<AllowRule>,
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
    /// A tool call waiting longer than this for an operator raises an alert.
    pub approval_wait: Duration,
}

/// 360dialog or the Cloud API: by `WHATSAPP_SENDER`, else by which credential is set.
fn read_whatsapp(r: &mut Reader<'_>) -> Option<WhatsappSender> {
    let d360 = r.get(&D360_API_KEY);
    let cloud = r.get(&WHATSAPP_ACCESS_TOKEN);
    let choice = match r.get(&WHATSAPP_SENDER) {
        Some(choice) => choice,
        // Invalid: its problem is recorded, and no guess is made.
        None if r.is_set(&WHATSAPP_SENDER) => return None,
        None => match (&d360, &cloud) {
            (None, None) => return None,
            (Some(_), None) => "360dialog",
            (None, Some(_)) => "cloud",
            (Some(_), Some(_)) => {
                r.problem(
                    "both D360_API_KEY and WHATSAPP_ACCESS_TOKEN are set: choose one with WHATSAPP_SENDER=360dialog|cloud",
                );
                return None;
            }
        },
    };
    if choice == "360dialog" {
        let Some(api_key) = d360 else {
            r.problem("WHATSAPP_SENDER=360dialog needs D360_API_KEY");
            return None;
        };
        return Some(WhatsappSender::Dialog360 {
            api_key,
            base_url: r.get(&D360_BASE_URL)?,
        });
    }
    match (cloud, r.get(&WHATSAPP_PHONE_NUMBER_ID)) {
        (Some(access_token), Some(phone_number_id)) => Some(WhatsappSender::Cloud {
            access_token,
            phone_number_id,
            base_url: r.get(&WHATSAPP_API_BASE_URL)?,
        }),
        _ => {
            r.problem(
                "the WhatsApp Cloud API needs WHATSAPP_ACCESS_TOKEN and WHATSAPP_PHONE_NUMBER_ID",
            );
            None
        }
    }
}

/// The delivery stage's settings; `None` only when a problem was recorded.
pub(crate) fn read_delivery(r: &mut Reader<'_>) -> Option<DeliverySettings> {
    // A sender's base URL is read only when its credential is set: an unused URL is not
    // validated.
    let telegram = match r.get(&TELEGRAM_BOT_TOKEN) {
        Some(bot_token) => r
            .get(&TELEGRAM_API_BASE_URL)
            .map(|base_url| TelegramSender {
                bot_token,
                base_url,
            }),
        None => None,
    };
    let whatsapp = read_whatsapp(r);
    let instagram = match r.get(&INSTAGRAM_ACCESS_TOKEN) {
        Some(access_token) => r
            .get(&INSTAGRAM_API_BASE_URL)
            .map(|base_url| InstagramSender {
                access_token,
                base_url,
            }),
        None => None,
    };
    let slack = match r.get(&SLACK_BOT_TOKEN) {
        Some(bot_token) => match (r.get(&SLACK_API_BASE_URL), r.get(&SLACK_FILES_BASE_URL)) {
            (Some(base_url), Some(files_base_url)) => Some(SlackSender {
                bot_token,
                base_url,
                files_base_url,
            }),
            _ => None,
        },
        None => None,
    };
    let sms = crate::sms::read_sms_sender(r);
    let messenger = crate::sms::read_messenger_sender(r);
    let teams = crate::teams::read_teams_sender(r);
    let discord_bot_token = r.get(&DISCORD_BOT_TOKEN);
    let discord_api_url = r.get(&DISCORD_API_URL);
    let send_pauses = r.get(&HERMES_SEND_PAUSES_MS);
    let max_retry_after = r.get(&HERMES_MAX_RETRY_AFTER_SECS);
    let threshold = r.get(&HERMES_BREAKER_THRESHOLD);
    let window = r.get(&HERMES_BREAKER_WINDOW_SECS);
    let open_for = r.get(&HERMES_BREAKER_OPEN_SECS);
    let chat_per_sec = r.get(&HERMES_DELIVERY_CHAT_PER_SEC);
    let chat_burst = r.get(&HERMES_DELIVERY_CHAT_BURST);
    let bot_per_sec = r.get(&HERMES_DELIVERY_BOT_PER_SEC);
    let whatsapp_per_sec = r.get(&HERMES_WHATSAPP_PER_SEC);
    let presence = r.get(&HERMES_PRESENCE);
    let max_wait = r.get(&HERMES_RATE_GATE_WAIT_SECS);
    let webhook_allow = r.get(&HERMES_WEBHOOK_ALLOW).unwrap_or_default();
    let callback_allow = r.get(&HERMES_CALLBACK_ALLOW).unwrap_or_default();
    Some(DeliverySettings {
        telegram,
        whatsapp,
        instagram,
        slack,
        sms,
        messenger,
        teams,
        discord: DiscordSender {
            bot_token: discord_bot_token,
            api_url: discord_api_url?,
        },
        send_pauses: send_pauses?,
        max_retry_after: max_retry_after?,
        breaker: BreakerSettings {
            threshold: threshold?,
            window: window?,
            open_for: open_for?,
        },
        rate_gate: RateGateSettings {
            chat_per_sec: chat_per_sec?,
            chat_burst: chat_burst?,
            bot_per_sec: bot_per_sec?,
            whatsapp_per_sec: whatsapp_per_sec?,
            max_wait: max_wait?,
        },
        presence: presence?,
        webhook_allow,
        callback_allow,
    })
}

/// Where ops alerts go; `None` only when a problem was recorded.
pub(crate) fn read_alerts(r: &mut Reader<'_>) -> Option<AlertSettings> {
    let slack_url = r.get(&HERMES_ALERT_SLACK_URL);
    let discord_url = r.get(&HERMES_ALERT_DISCORD_URL);
    let dedupe_window = r.get(&HERMES_ALERT_DEDUPE_SECS);
    let parking_threshold = r.get(&HERMES_ALERT_PARKING_ABOVE);
    let approval_wait = r.get(&HERMES_ALERT_APPROVAL_WAIT);
    Some(AlertSettings {
        slack_url,
        discord_url,
        dedupe_window: dedupe_window?,
        parking_threshold: parking_threshold?,
        approval_wait: approval_wait?,
    })
}

impl WhatsappSender {
    /// The business number replies are sent from, as the rate gate names it: the phone
    /// number id (Cloud API); a 360dialog key belongs to one number, the only one a process
    /// sends from.
    pub fn number(&self) -> &str {
        match self {
            WhatsappSender::Cloud {
                phone_number_id, ..
            } => phone_number_id,
            WhatsappSender::Dialog360 { .. } => "360dialog",
        }
    }

    /// Where messages (and read receipts) are POSTed: `{base}/messages` (360dialog) or
    /// `{base}/{phone number id}/messages` (Cloud API).
    pub fn messages_url(&self) -> String {
        match self {
            WhatsappSender::Dialog360 { base_url, .. } => {
                format!("{}/messages", base_url.as_str().trim_end_matches('/'))
            }
            WhatsappSender::Cloud {
                phone_number_id,
                base_url,
                ..
            } => format!(
                "{}/{phone_number_id}/messages",
                base_url.as_str().trim_end_matches('/')
            ),
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
        if self.slack.is_some() {
            out.push("slack");
        }
        if self.sms.is_some() {
            out.push("sms (twilio)");
        }
        if self.messenger.is_some() {
            out.push("messenger");
        }
        if self.teams.is_some() {
            out.push("teams");
        }
        out.push(match self.discord.bot_token {
            Some(_) => "discord (interactions and channels)",
            None => "discord (interactions)",
        });
        out
    }
}
