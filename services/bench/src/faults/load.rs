//! The ledgered load and the fake platform: Telegram updates from linked users, each sent
//! again until ingest answers 2xx (as Telegram does), and a fake Bot API on loopback that
//! records every `sendMessage` with the time it came and its chat. Some messages come from
//! users whose daily token budget is already spent (their answer must be the budget's
//! refusal, whatever the servers do), and some go through the API ([`Mix`]).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

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
    /// Each send to the fake platform.
    pub sends: Mutex<Vec<Sent>>,
    /// What the API callers saw.
    pub api: super::api_load::ApiSeen,
}

/// One send to the fake platform: to which chat, and its text.
#[derive(Clone, Debug)]
pub struct Sent {
    pub chat: i64,
    pub text: String,
}

impl Seen {
    /// The sends so far.
    pub fn sent(&self) -> Vec<Sent> {
        self.sends.lock().map(|s| s.clone()).unwrap_or_default()
    }

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
    let body = serde_json::from_slice::<Value>(&body).unwrap_or_default();
    let sent = Sent {
        chat: body["chat_id"]
            .as_i64()
            .or_else(|| body["chat_id"].as_str().and_then(|c| c.parse().ok()))
            .unwrap_or_default(),
        text: body["text"].as_str().unwrap_or_default().to_string(),
    };
    if let Ok(mut sends) = seen.sends.lock() {
        sends.push(sent);
    }
    axum::Json(json!({"ok": true, "result": {"message_id": 1}}))
}

/// Serve the fake Bot API; returns its base URL.
pub async fn fake_telegram(seen: Arc<Seen>) -> anyhow::Result<String> {
    serve_bot_api(TG_TOKEN, post(send_message), seen).await
}

/// Serve a fake Bot API on loopback whose `sendMessage` for `token` is `send_message`;
/// returns its base URL. Shared with `hermes bench fleet`'s Telegram kind.
pub async fn serve_bot_api<S: Clone + Send + Sync + 'static>(
    token: &str,
    send_message: axum::routing::MethodRouter<S>,
    state: S,
) -> anyhow::Result<String> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let app = Router::new()
        .route(&format!("/bot{token}/sendMessage"), send_message)
        .with_state(state);
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(format!("http://{addr}"))
}

/// The token that ties message `i` to its answer (`echo: hello <token>`).
pub fn token(i: usize) -> String {
    format!("ledger-{i:06}")
}

/// How many users have a spent budget.
pub const CAPPED_USERS: usize = 3;

/// Which way each message of the load goes, and from whom.
#[derive(Clone, Copy, Debug)]
pub struct Mix {
    /// Linked users with ample credits and budget.
    pub users: usize,
    /// Every this many messages, one through the OpenAI-compatible API (0: none).
    pub api_every: usize,
    /// Every this many messages, one from a user whose daily budget is spent (0: none).
    pub capped_every: usize,
}

/// The path of one message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Path {
    /// A streamed completion through the API.
    Api,
    /// A Telegram update from this sender, to be answered by the model.
    Chat(i64),
    /// A Telegram update from this sender, whose budget is spent: to be refused.
    Capped(i64),
}

impl Mix {
    pub fn path(&self, i: usize) -> Path {
        let every = |n: usize, at: usize| n > 0 && i % n == at % n;
        if every(self.api_every, self.api_every.saturating_sub(1)) {
            Path::Api
        } else if every(self.capped_every, self.capped_every / 2) {
            Path::Capped(capped_sender(i))
        } else {
            Path::Chat(sender(i, self.users))
        }
    }

    /// Messages of the run that take `want`'s kind of path.
    pub fn count(&self, messages: usize, want: fn(Path) -> bool) -> usize {
        (0..messages).filter(|i| want(self.path(*i))).count()
    }
}

/// The Telegram sender of message `i` (also the chat: private chats).
pub fn sender(i: usize, users: usize) -> i64 {
    900_000 + (i % users) as i64
}

/// The Slack member id a seeded user with Telegram sender `sender` also has.
pub fn slack_member(sender: &str) -> String {
    format!("UB{sender}")
}

/// The SMS number a seeded user with Telegram sender number `n` also has.
pub fn sms_number(n: i64) -> String {
    format!("+1555{n:07}")
}

/// The Telegram sender number of a seeded user's SMS number.
pub fn sms_sender(number: &str) -> Option<i64> {
    number.strip_prefix("+1555")?.parse().ok()
}

/// Where the seeded users' Messenger page-scoped ids start.
pub const MESSENGER_FROM: i64 = 30_000_000;

/// The Messenger page-scoped id a seeded user with Telegram sender number `n` also has.
pub fn messenger_psid(n: i64) -> i64 {
    MESSENGER_FROM + n
}

/// The Teams id a seeded user with Telegram sender number `n` also has.
pub fn teams_member(n: i64) -> String {
    format!("29:B{n}")
}

/// The Discord user id (a snowflake) a seeded user with Telegram sender number `n` also has.
pub fn discord_member(n: i64) -> String {
    format!("{}", 1_600_000_000_000_000_000i64 + n)
}

/// The capped sender of message `i`.
pub fn capped_sender(i: usize) -> i64 {
    800_000 + (i % CAPPED_USERS) as i64
}

/// Whether `chat` is one of the capped users'.
pub fn is_capped(chat: i64) -> bool {
    (800_000..800_000 + CAPPED_USERS as i64).contains(&chat)
}

/// The update of message `i` from `from`.
pub fn update(i: usize, from: i64) -> Value {
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
/// are doing), each the way `mix` says: through the API as a streamed completion (sent once,
/// see [`super::api_load`]), or as a Telegram update, sent again every 200 ms until ingest
/// answers 2xx.
pub async fn run(base: String, messages: usize, mix: Mix, rate: f64, seen: Arc<Seen>) {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .expect("an HTTP client");
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate.max(0.1)));
    let mut sending = tokio::task::JoinSet::new();
    for i in 0..messages {
        tick.tick().await;
        let (client, base, seen) = (client.clone(), base.clone(), seen.clone());
        let from = match mix.path(i) {
            Path::Api => {
                sending.spawn(async move {
                    let text = format!("hello {}", token(i));
                    super::api_load::send(&client, &base, &text, &seen.api).await;
                });
                continue;
            }
            Path::Chat(from) | Path::Capped(from) => from,
        };
        sending.spawn(async move {
            let url = format!("{base}/webhooks/telegram");
            let body = update(i, from);
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
