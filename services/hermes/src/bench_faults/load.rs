//! The ledgered load and the fake platform: Telegram updates from linked users, each sent
//! again until ingest answers 2xx (as Telegram does), and a fake Bot API on loopback that
//! records every `sendMessage` with the time it came.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::State;
use axum::routing::post;
use serde_json::{Value, json};
use tokio::net::TcpListener;

/// The webhook secret and bot token of the fleet under test.
pub const TG_SECRET: &str = "faults-webhook-secret-0123";
pub const TG_TOKEN: &str = "424242:faults-bot-token";

/// What the load and the fake platform saw.
#[derive(Default)]
pub struct Seen {
    pub accepted: AtomicUsize,
    pub refused: AtomicUsize,
    /// Each send to the fake platform: when, and its text.
    pub sends: Mutex<Vec<(Instant, String)>>,
    /// What the API callers saw.
    pub api: super::api_load::ApiSeen,
}

impl Seen {
    /// Chat sends and API streams finished (answered or not).
    pub fn answered(&self) -> usize {
        let api = &self.api;
        self.sends.lock().map(|s| s.len()).unwrap_or(0)
            + api.answered.load(Ordering::SeqCst)
            + api.cut.load(Ordering::SeqCst)
            + api.wrong.load(Ordering::SeqCst)
    }

    /// Messages taken: chat updates answered 2xx and API calls answered 200.
    pub fn taken(&self) -> usize {
        self.accepted.load(Ordering::SeqCst) + self.api.accepted()
    }
}

async fn send_message(State(seen): State<Arc<Seen>>, body: axum::body::Bytes) -> axum::Json<Value> {
    let text = serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|b| b["text"].as_str().map(str::to_string))
        .unwrap_or_default();
    if let Ok(mut sends) = seen.sends.lock() {
        sends.push((Instant::now(), text));
    }
    axum::Json(json!({"ok": true, "result": {"message_id": 1}}))
}

/// Serve the fake Bot API; returns its base URL.
pub async fn fake_telegram(seen: Arc<Seen>) -> anyhow::Result<String> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let app = Router::new()
        .route(&format!("/bot{TG_TOKEN}/sendMessage"), post(send_message))
        .with_state(seen);
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(format!("http://{addr}"))
}

/// The token that ties message `i` to its answer (`echo: hello <token>`).
pub fn token(i: usize) -> String {
    format!("ledger-{i:06}")
}

/// The Telegram sender of message `i`.
pub fn sender(i: usize, users: usize) -> i64 {
    900_000 + (i % users) as i64
}

fn update(i: usize, users: usize) -> Value {
    let from = sender(i, users);
    json!({
        "update_id": 1_000_000 + i,
        "message": {
            "message_id": 1_000_000 + i,
            "from": {"id": from, "is_bot": false, "first_name": "Ledger"},
            "chat": {"id": from, "type": "private"},
            "date": 1_760_000_000,
            "text": format!("hello {}", token(i))
        }
    })
}

/// Send `messages` at `rate` a second (open loop: each on its schedule, whatever the others
/// are doing): every `api_every`th through the API as a streamed completion (sent once, see
/// [`super::api_load`]), the others as Telegram updates, each again every 200 ms until ingest
/// answers 2xx.
pub async fn run(
    base: String,
    messages: usize,
    users: usize,
    rate: f64,
    api_every: usize,
    seen: Arc<Seen>,
) {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .expect("an HTTP client");
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate.max(0.1)));
    let mut sending = tokio::task::JoinSet::new();
    for i in 0..messages {
        tick.tick().await;
        let (client, base, seen) = (client.clone(), base.clone(), seen.clone());
        if is_api(i, api_every) {
            sending.spawn(async move {
                super::api_load::send(&client, &base, &format!("hello {}", token(i)), &seen.api)
                    .await;
            });
            continue;
        }
        sending.spawn(async move {
            let url = format!("{base}/webhooks/telegram");
            let body = update(i, users);
            let mut again = tokio::time::interval(Duration::from_millis(200));
            loop {
                again.tick().await;
                let ok = client
                    .post(&url)
                    .header("x-telegram-bot-api-secret-token", TG_SECRET)
                    .json(&body)
                    .send()
                    .await
                    .is_ok_and(|r| r.status().is_success());
                if ok {
                    seen.accepted.fetch_add(1, Ordering::SeqCst);
                    return;
                }
                seen.refused.fetch_add(1, Ordering::SeqCst);
            }
        });
    }
    while sending.join_next().await.is_some() {}
}

/// Whether message `i` goes through the API (every `api_every`th; none when 0).
pub fn is_api(i: usize, api_every: usize) -> bool {
    api_every > 0 && i % api_every == api_every - 1
}
