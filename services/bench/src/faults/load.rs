//! The ledgered load: messages from linked users over the chat platforms in turn (Telegram,
//! WhatsApp, Instagram, Messenger, Slack, Discord, Teams, SMS), each sent again until ingest
//! answers 2xx (as the platforms retry), and the platforms' fake APIs on loopback
//! (`crate::platforms`), which record every send with its chat. Some messages come from
//! users whose daily token budget is already spent (their answer must be the budget's
//! refusal, whatever the servers do), and some go through the API ([`Mix`]).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hermes_types::model::Platform;

use crate::platforms::{Fakes, Message, Sink};

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

impl Sink for Seen {
    fn sent(&self, chat: i64, text: &str) {
        if let Ok(mut sends) = self.sends.lock() {
            sends.push(Sent {
                chat,
                text: text.to_string(),
            });
        }
    }
}

/// The token that ties message `i` to its answer (`echo: hello <token>`).
pub fn token(i: usize) -> String {
    format!("ledger-{i:06}")
}

/// How many users have a spent budget.
pub const CAPPED_USERS: usize = 3;

/// Which way each message of the load goes, and from whom.
#[derive(Clone, Debug)]
pub struct Mix {
    /// Linked users with ample credits and budget.
    pub users: usize,
    /// The chat platforms the users' messages come over, in turn.
    pub platforms: Vec<Platform>,
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
    /// A message over this platform from this member, to be answered by the model.
    Chat(Platform, i64),
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
            let platform = self.platforms[i % self.platforms.len().max(1)];
            Path::Chat(platform, sender(i, self.users))
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

/// The capped sender of message `i`.
pub fn capped_sender(i: usize) -> i64 {
    800_000 + (i % CAPPED_USERS) as i64
}

/// Whether `chat` is one of the capped users'.
pub fn is_capped(chat: i64) -> bool {
    (800_000..800_000 + CAPPED_USERS as i64).contains(&chat)
}

/// Send `messages` at `rate` a second (open loop: each on its schedule, whatever the others
/// are doing), each the way `mix` says: through the API as a streamed completion (sent once,
/// see [`super::api_load`]), or as its platform's webhook (a capped user's over Telegram),
/// sent again every 200 ms until ingest answers 2xx.
pub async fn run(
    base: String,
    messages: usize,
    mix: Mix,
    rate: f64,
    (seen, fakes): (Arc<Seen>, Arc<Fakes>),
) {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .expect("an HTTP client");
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate.max(0.1)));
    let mut sending = tokio::task::JoinSet::new();
    for i in 0..messages {
        tick.tick().await;
        let (client, base, seen, fakes) =
            (client.clone(), base.clone(), seen.clone(), fakes.clone());
        let (platform, from) = match mix.path(i) {
            Path::Api => {
                sending.spawn(async move {
                    let text = format!("hello {}", token(i));
                    super::api_load::send(&client, &base, &text, &seen.api).await;
                });
                continue;
            }
            Path::Chat(platform, from) => (platform, from),
            Path::Capped(from) => (Platform::Telegram, from),
        };
        sending.spawn(async move {
            let text = format!("hello {}", token(i));
            let message = Message {
                i,
                n: from,
                text: &text,
            };
            let mut again = tokio::time::interval(Duration::from_millis(200));
            loop {
                again.tick().await;
                let ok = fakes
                    .webhook(platform, &client, &base, message)
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
