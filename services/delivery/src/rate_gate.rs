//! The outbound rate gate: a burst of replies to one chat is spread out instead of earning
//! a flood ban. Two buckets in Redis, shared by every replica — one per platform and chat,
//! one per platform's bot / number / account — reserved together with
//! [`RateLimiter::reserve`] (not the admit-or-refuse `take` ingest uses: every reply must go,
//! only later), so a send reserves its slot and learns at once how long to wait. Telegram allows
//! about 1 message a second per chat and 30 per bot; the defaults stay under that (and
//! under WhatsApp's and Instagram's pair limits). A wait longer than the configured bound
//! is refused (the send is retried later); Redis down lets sends through unthrottled.
//!
//! WhatsApp's second bucket is its business number's, at Meta's per-number throughput
//! (`HERMES_WHATSAPP_PER_SEC`, 80 by default) rather than the bot rate of the other platforms,
//! and named by the number, so every replica sending from it shares it. SMS's is its Twilio
//! number's (or messaging service's), at `HERMES_SMS_PER_SEC` (1 by default: Twilio's
//! long-code limit of one segment a second).

use std::time::Duration;

use hermes_cache::Cache;
use hermes_cache::rate_limit::{Pace, RateLimiter};
use hermes_config::RateGateSettings;
use hermes_telemetry::Metrics;
use hermes_types::model::Platform;

/// Why a send may not go now.
#[derive(Debug, thiserror::Error)]
#[error("the outbound rate to {platform} chat {chat} would need a wait beyond {bound:?}")]
pub struct TooBusy {
    pub platform: &'static str,
    pub chat: String,
    pub bound: Duration,
}

/// The gate of every platform.
#[derive(Clone)]
pub struct RateGate {
    limiter: RateLimiter,
    /// Hashes the chat id into the key name (on WhatsApp it is a phone number).
    cache: Cache,
    settings: RateGateSettings,
    metrics: Metrics,
    /// The WhatsApp business number sends go from (its bucket's name).
    whatsapp_number: String,
    /// The Twilio number (or messaging service) SMS go from, and its rate.
    sms_number: Option<(String, f64)>,
}

impl RateGate {
    pub fn new(cache: Cache, settings: RateGateSettings, metrics: Metrics) -> Self {
        Self {
            limiter: RateLimiter::new(cache.clone()),
            cache,
            settings,
            metrics,
            whatsapp_number: String::new(),
            sms_number: None,
        }
    }

    /// The gate with SMS's second bucket named after the Twilio number (or messaging service)
    /// `from` at `per_sec` (`HERMES_SMS_PER_SEC`: Twilio's long-code limit is one a second).
    pub fn for_sms_number(mut self, from: Option<(&str, f64)>) -> Self {
        self.sms_number = from.map(|(n, rate)| (n.to_string(), rate));
        self
    }

    /// The gate with WhatsApp's number bucket named after `number` (the business number
    /// sends go from, docs/channels.md "Rate gate").
    pub fn for_whatsapp_number(mut self, number: &str) -> Self {
        self.whatsapp_number = number.to_string();
        self
    }

    /// Wait until one more message may go to `chat_id` on `platform`.
    pub async fn pass(&self, platform: Platform, chat_id: &str) -> Result<Duration, TooBusy> {
        let s = &self.settings;
        let wait = match self.reserve(platform, chat_id, s.max_wait).await {
            Ok(Some(wait)) => wait,
            Ok(None) => {
                return Err(TooBusy {
                    platform: platform.as_str(),
                    chat: chat_id.to_string(),
                    bound: s.max_wait,
                });
            }
            Err(e) => {
                tracing::warn!(error = %e, "outbound rate gate unavailable; sending unthrottled");
                Duration::ZERO
            }
        };
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
        self.metrics
            .delivery
            .rate_wait
            .with_label_values(&[platform.as_str()])
            .observe(wait.as_secs_f64());
        Ok(wait)
    }

    /// Whether one more message may go to `chat_id` on `platform` now, reserving its slot if
    /// so: a draft's edit that would have to wait for the chat is skipped instead (the next
    /// edit carries the whole text). It waits at most one slot of the bot's bucket, so other
    /// chats' replies going out do not starve it, and it is refused when the bot is busier than
    /// that (replies first). Redis down lets it through, as [`RateGate::pass`] does.
    pub async fn try_pass(&self, platform: Platform, chat_id: &str) -> bool {
        let bound = per_sec_interval(self.settings.bot_per_sec);
        match self.reserve(platform, chat_id, bound).await {
            Ok(Some(wait)) => {
                if !wait.is_zero() {
                    tokio::time::sleep(wait).await;
                }
                true
            }
            Ok(None) => false,
            Err(e) => {
                tracing::warn!(error = %e, "outbound rate gate unavailable; editing unthrottled");
                true
            }
        }
    }

    /// Reserve the next slot of the chat's and the bot's buckets, if it comes within `bound`.
    async fn reserve(
        &self,
        platform: Platform,
        chat_id: &str,
        bound: Duration,
    ) -> Result<Option<Duration>, hermes_cache::CacheError> {
        // Slack paces by conversation, whatever thread a message goes in.
        let paced = hermes_channels::outbound::pacing_chat(platform, chat_id);
        let chat = format!(
            "rate:out:{}:chat:{}",
            platform.as_str(),
            self.cache.opaque(paced)
        );
        let s = &self.settings;
        let (bot, bot_per_sec) = match platform {
            Platform::Whatsapp => (
                format!("rate:out:whatsapp:number:{}", self.whatsapp_number),
                s.whatsapp_per_sec,
            ),
            Platform::Sms if let Some((number, per_sec)) = &self.sms_number => (
                format!("rate:out:sms:number:{}", self.cache.opaque(number)),
                *per_sec,
            ),
            _ => (format!("rate:out:{}:bot", platform.as_str()), s.bot_per_sec),
        };
        let paces = [
            Pace {
                name: &chat,
                interval: per_sec_interval(s.chat_per_sec),
                burst: s.chat_burst,
            },
            Pace {
                name: &bot,
                interval: per_sec_interval(bot_per_sec),
                burst: 1,
            },
        ];
        self.limiter.reserve(&paces, bound).await
    }
}

/// The time between two sends at `per_sec`.
fn per_sec_interval(per_sec: f64) -> Duration {
    Duration::from_millis((1000.0 / per_sec).ceil().max(1.0) as u64)
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use hermes_config::Namespace;
    use secrecy::SecretString;

    use super::*;

    fn gate(redis: &str, ns: &str, settings: RateGateSettings) -> RateGate {
        let metrics = Metrics::new();
        let cache = Cache::new(
            &SecretString::from(redis.to_string()),
            Namespace::parse(ns).unwrap(),
            metrics.clone(),
        )
        .unwrap();
        RateGate::new(cache, settings, metrics)
    }

    use hermes_testkit_core::redis_url;

    const FIVE_A_SECOND: RateGateSettings = RateGateSettings {
        chat_per_sec: 5.0,
        chat_burst: 1,
        bot_per_sec: 100.0,
        whatsapp_per_sec: 100.0,
        max_wait: Duration::from_secs(5),
    };

    #[tokio::test]
    async fn a_burst_to_one_chat_is_spread_and_other_chats_are_not_held_up() {
        let ns = format!("gate{:016x}", rand::random::<u64>());
        // Two replicas share the buckets.
        let a = gate(&redis_url(), &ns, FIVE_A_SECOND);
        let b = gate(&redis_url(), &ns, FIVE_A_SECOND);
        let started = Instant::now();
        for i in 0..5 {
            let g = if i % 2 == 0 { &a } else { &b };
            g.pass(Platform::Telegram, "42").await.unwrap();
        }
        // Five messages at 5/s with no burst: the last goes about 800 ms after the first.
        let spread = started.elapsed();
        assert!(spread >= Duration::from_millis(750), "{spread:?}");
        let other = Instant::now();
        assert_eq!(
            a.pass(Platform::Telegram, "43").await.unwrap(),
            Duration::ZERO
        );
        assert!(other.elapsed() < Duration::from_millis(150));
    }

    /// A gate of its own namespace, one message per two seconds to a chat.
    fn slow_gate(max_wait: Duration) -> RateGate {
        let ns = format!("gate{:016x}", rand::random::<u64>());
        let settings = RateGateSettings {
            chat_per_sec: 0.5,
            max_wait,
            ..FIVE_A_SECOND
        };
        gate(&redis_url(), &ns, settings)
    }

    #[tokio::test]
    async fn a_wait_beyond_the_bound_is_refused_without_reserving() {
        let g = slow_gate(Duration::from_millis(500));
        g.pass(Platform::Whatsapp, "1").await.unwrap();
        assert!(g.pass(Platform::Whatsapp, "1").await.is_err());
        assert!(g.pass(Platform::Whatsapp, "2").await.is_ok());
    }

    #[tokio::test]
    async fn a_try_that_would_wait_is_refused_at_once_and_reserves_nothing() {
        let g = slow_gate(FIVE_A_SECOND.max_wait);
        assert!(g.try_pass(Platform::Telegram, "7").await);
        let refused = Instant::now();
        assert!(
            !g.try_pass(Platform::Telegram, "7").await,
            "two seconds apart"
        );
        assert!(refused.elapsed() < Duration::from_millis(500), "not waited");
        assert!(g.try_pass(Platform::Telegram, "8").await, "another chat");
        // The refused try reserved nothing: a send waits one interval, not two.
        let wait = g.pass(Platform::Telegram, "7").await.unwrap();
        assert!(wait <= Duration::from_secs(2), "{wait:?}");
    }

    #[tokio::test]
    async fn whatsapp_sends_share_their_business_numbers_bucket_at_its_own_rate() {
        let ns = format!("gate{:016x}", rand::random::<u64>());
        // Chats are free (100/s); the number allows 2 a second, the other bots 100.
        let settings = RateGateSettings {
            chat_per_sec: 100.0,
            chat_burst: 10,
            bot_per_sec: 100.0,
            whatsapp_per_sec: 2.0,
            max_wait: Duration::from_millis(700),
        };
        // Two replicas sending from the same number share its bucket.
        let a = gate(&redis_url(), &ns, settings).for_whatsapp_number("555000");
        let b = gate(&redis_url(), &ns, settings).for_whatsapp_number("555000");
        assert_eq!(
            a.pass(Platform::Whatsapp, "1").await.unwrap(),
            Duration::ZERO
        );
        // The next slot of the number is 500 ms away whatever the chat, on either replica.
        let wait = b.pass(Platform::Whatsapp, "2").await.unwrap();
        assert!(wait > Duration::from_millis(300), "{wait:?}");
        // The next slot is another 500 ms away: beyond a 300 ms bound, refused.
        let strict = RateGateSettings {
            max_wait: Duration::from_millis(300),
            ..settings
        };
        let c = gate(&redis_url(), &ns, strict).for_whatsapp_number("555000");
        assert!(c.pass(Platform::Whatsapp, "3").await.is_err());
        // Another number has its own bucket; Telegram's bot bucket is apart too.
        let other = gate(&redis_url(), &ns, settings).for_whatsapp_number("777000");
        assert_eq!(
            other.pass(Platform::Whatsapp, "4").await.unwrap(),
            Duration::ZERO
        );
        assert_eq!(
            a.pass(Platform::Telegram, "5").await.unwrap(),
            Duration::ZERO
        );
    }

    #[tokio::test]
    async fn redis_down_lets_sends_through() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let g = gate(
            &format!("redis://127.0.0.1:{port}"),
            "gatedown",
            FIVE_A_SECOND,
        );
        for _ in 0..3 {
            assert_eq!(
                g.pass(Platform::Telegram, "1").await.unwrap(),
                Duration::ZERO
            );
            assert!(g.try_pass(Platform::Telegram, "1").await);
        }
    }
}
