//! The Redis bytes of run event streams per chat run, by platform, for `hermes bench abuse`
//! (docs/security.md, "Abuse"): a run that no caller can read (a Telegram or WhatsApp
//! message) must leave no stream behind; an API run's stream is bounded.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use redis::AsyncCommands;
use serde_json::json;

use super::attacks::Target;

/// Secrets of the channels the measurement posts to (the fleet is started with them).
pub const TELEGRAM_SECRET: &str = "abuse-telegram-webhook-secret-0123456789";
pub const WHATSAPP_APP_SECRET: &str = "abuse-whatsapp-app-secret-0123456789";
/// The linked senders the messages come from.
pub const TELEGRAM_SENDER: i64 = 880_001;
pub const WHATSAPP_SENDER: &str = "15550008800";

/// The platforms measured.
#[derive(Clone, Copy, Debug)]
pub enum Kind {
    Telegram,
    WhatsApp,
    Api,
}

impl Kind {
    pub const ALL: [Kind; 3] = [Kind::Telegram, Kind::WhatsApp, Kind::Api];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Telegram => "telegram",
            Kind::WhatsApp => "whatsapp",
            Kind::Api => "api chat",
        }
    }
}

/// The bytes Redis holds under `{ns}:run:*` (event streams), by `MEMORY USAGE`.
async fn stream_bytes(redis: &mut redis::aio::MultiplexedConnection, ns: &str) -> u64 {
    let mut keys: Vec<String> = Vec::new();
    let pattern = format!("{ns}:run:*");
    if let Ok(mut iter) = redis.scan_match::<_, String>(&pattern).await {
        while let Some(k) = futures_util::StreamExt::next(&mut iter).await {
            if let Ok(k) = k {
                keys.push(k);
            }
        }
    }
    let mut total = 0u64;
    for k in keys {
        let used: Option<u64> = redis::cmd("MEMORY")
            .arg("USAGE")
            .arg(&k)
            .query_async(redis)
            .await
            .unwrap_or(None);
        total += used.unwrap_or(0);
    }
    total
}

/// The stream bytes once they stopped changing (two reads 300 ms apart agree), at most 10 s.
async fn settled_bytes(redis: &mut redis::aio::MultiplexedConnection, ns: &str) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut last = stream_bytes(redis, ns).await;
    loop {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let now = stream_bytes(redis, ns).await;
        if now == last || Instant::now() > deadline {
            return now;
        }
        last = now;
    }
}

/// Send `n` messages of `kind` and return the stream bytes they added, per run.
pub async fn per_run(
    t: &Target,
    redis_url: &str,
    ns: &str,
    kind: Kind,
    n: usize,
    offset: usize,
) -> anyhow::Result<f64> {
    let mut redis = redis::Client::open(redis_url)?
        .get_multiplexed_async_connection()
        .await?;
    let before = settled_bytes(&mut redis, ns).await;
    let sends_before = t.upstream.sends.load(Ordering::SeqCst);
    let client = reqwest::Client::new();
    for i in 0..n {
        let id = offset + i + 1;
        let resp = match kind {
            Kind::Telegram => {
                let update = json!({"update_id": id, "message": {
                    "message_id": id, "date": 1_760_000_000, "text": format!("bytes {id}"),
                    "from": {"id": TELEGRAM_SENDER, "is_bot": false, "first_name": "Abuse"},
                    "chat": {"id": TELEGRAM_SENDER, "type": "private"}}});
                client
                    .post(format!("{}/webhooks/telegram", t.http))
                    .header("x-telegram-bot-api-secret-token", TELEGRAM_SECRET)
                    .json(&update)
                    .send()
                    .await?
            }
            Kind::WhatsApp => {
                let body = serde_json::to_vec(&json!({
                    "object": "whatsapp_business_account",
                    "entry": [{"id": "WABA", "changes": [{"field": "messages", "value": {
                        "messaging_product": "whatsapp",
                        "metadata": {"display_phone_number": "15550001111", "phone_number_id": "PHONE"},
                        "contacts": [{"profile": {"name": "Abuse"}, "wa_id": WHATSAPP_SENDER}],
                        "messages": [{"from": WHATSAPP_SENDER, "id": format!("wamid.bytes{id}"),
                            "timestamp": "1760000000", "type": "text", "text": {"body": format!("bytes {id}")}}]
                    }}]}]
                }))?;
                let tag = hermes_net::signing::sha256_tag(WHATSAPP_APP_SECRET.as_bytes(), &body);
                client
                    .post(format!("{}/webhooks/whatsapp", t.http))
                    .header("x-hub-signature-256", tag)
                    .header("content-type", "application/json")
                    .body(body)
                    .send()
                    .await?
            }
            Kind::Api => {
                client
                    .post(format!("{}/v1/chat/completions", t.http))
                    .bearer_auth(&t.normal_key)
                    .json(
                        &json!({"messages": [{"role": "user", "content": format!("bytes {id}")}]}),
                    )
                    .send()
                    .await?
            }
        };
        anyhow::ensure!(
            resp.status().is_success(),
            "{}: {}",
            kind.name(),
            resp.status()
        );
    }
    if !matches!(kind, Kind::Api) {
        // Answered when the fake channel API has had every reply.
        let deadline = Instant::now() + Duration::from_secs(60);
        while t.upstream.sends.load(Ordering::SeqCst) < sends_before + n {
            anyhow::ensure!(
                Instant::now() < deadline,
                "{}: not every message answered in 60 s",
                kind.name()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let after = settled_bytes(&mut redis, ns).await;
    Ok(after.saturating_sub(before) as f64 / n as f64)
}
