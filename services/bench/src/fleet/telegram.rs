//! The Telegram kind of `hermes bench fleet`: a webhook update from one of the linked users
//! (with credits, seeded like the fault harness's), answered when the fleet's `sendMessage`
//! carrying its token reaches a fake Bot API on loopback. The request's latency runs from its
//! scheduled instant to that send, so it covers the whole path: ingest, router, model,
//! delivery and the channel call. A second send of one token is a doubled answer, which the
//! ledger counts and which voids the run; a text to the chat that is no echo (a failure
//! notice) answers that chat's oldest waiting update as failed-with-an-answer.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::routing::post;
use serde_json::{Value, json};
use tokio::sync::oneshot;

use super::load::Ending;

/// The webhook secret and bot token of the fleet under test.
pub const SECRET: &str = "bench-fleet-webhook-secret-0123";
pub const TOKEN: &str = "515151:bench-fleet-bot-token";
/// Linked users the updates come from, round robin: enough that no chat's own pace (about
/// one message a second, as Telegram allows) is what the bench measures.
pub const USERS: usize = 500;

/// The fake Bot API's side of the ledger: who waits for which answer, and what came twice.
#[derive(Default)]
pub struct Channel {
    waiting: Mutex<Waiting>,
    /// Tokens answered already, to tell a doubled send from an unknown one.
    answered: Mutex<HashSet<String>>,
    doubled: AtomicUsize,
    next: AtomicUsize,
}

/// The updates still waiting for their answer, by token and by chat in the order sent.
#[derive(Default)]
struct Waiting {
    by_token: HashMap<String, (i64, oneshot::Sender<Ending>)>,
    by_chat: HashMap<i64, VecDeque<String>>,
}

impl Waiting {
    fn insert(&mut self, token: &str, chat: i64, tx: oneshot::Sender<Ending>) {
        self.by_token.insert(token.to_string(), (chat, tx));
        self.by_chat
            .entry(chat)
            .or_default()
            .push_back(token.to_string());
    }

    fn remove(&mut self, token: &str) -> Option<oneshot::Sender<Ending>> {
        let (chat, tx) = self.by_token.remove(token)?;
        if let Some(q) = self.by_chat.get_mut(&chat) {
            q.retain(|t| t != token);
        }
        Some(tx)
    }

    /// The oldest waiting update of `chat`.
    fn oldest_of(&mut self, chat: i64) -> Option<oneshot::Sender<Ending>> {
        let token = self.by_chat.get_mut(&chat)?.pop_front()?;
        self.by_token.remove(&token).map(|(_, tx)| tx)
    }
}

impl Channel {
    /// Sends of a token that had been answered before, since the last call.
    pub fn take_doubled(&self) -> usize {
        self.doubled.swap(0, Ordering::SeqCst)
    }

    fn sent(&self, chat: i64, text: &str) {
        let Some(token) = text.strip_prefix("echo: ") else {
            if let Some(tx) = self.waiting.lock().ok().and_then(|mut w| w.oldest_of(chat)) {
                let _ = tx.send(Ending::FailedWithAnswer);
            }
            return;
        };
        let waiter = self.waiting.lock().ok().and_then(|mut w| w.remove(token));
        let first = self
            .answered
            .lock()
            .map(|mut a| a.insert(token.to_string()))
            .unwrap_or(true);
        match waiter {
            Some(tx) => {
                let _ = tx.send(Ending::Answered);
            }
            None if !first => {
                self.doubled.fetch_add(1, Ordering::SeqCst);
            }
            // An answer to a request that already timed out: its sample is `Lost`.
            None => {}
        }
    }
}

async fn send_message(
    State(channel): State<Arc<Channel>>,
    body: axum::body::Bytes,
) -> axum::Json<Value> {
    let body = serde_json::from_slice::<Value>(&body).unwrap_or_default();
    let chat = body["chat_id"]
        .as_i64()
        .or_else(|| body["chat_id"].as_str().and_then(|c| c.parse().ok()))
        .unwrap_or_default();
    channel.sent(chat, body["text"].as_str().unwrap_or_default());
    axum::Json(json!({"ok": true, "result": {"message_id": 1}}))
}

/// Serve the fake Bot API; returns its base URL.
pub async fn serve(channel: Arc<Channel>) -> anyhow::Result<String> {
    crate::faults::load::serve_bot_api(TOKEN, post(send_message), channel).await
}

/// The Telegram sender (and private chat) of the `i`th update; the users seeded for the run.
pub fn sender(i: usize) -> i64 {
    crate::faults::load::sender(i, USERS)
}

/// Send one update carrying `token` and wait for its answer. The caller bounds the wait.
pub async fn one(client: &reqwest::Client, base: &str, channel: &Channel, token: &str) -> Ending {
    let i = channel.next.fetch_add(1, Ordering::SeqCst);
    let from = sender(i);
    let (tx, rx) = oneshot::channel();
    if let Ok(mut w) = channel.waiting.lock() {
        w.insert(token, from, tx);
    }
    let update = json!({
        "update_id": 10_000_000 + i,
        "message": {
            "message_id": 10_000_000 + i,
            "from": {"id": from, "is_bot": false, "first_name": "Bench"},
            "chat": {"id": from, "type": "private"},
            "date": chrono::Utc::now().timestamp(),
            "text": token
        }
    });
    let resp = client
        .post(format!("{base}/webhooks/telegram"))
        .header("X-Telegram-Bot-Api-Secret-Token", SECRET)
        .json(&update)
        .send()
        .await;
    let forget = || {
        if let Ok(mut w) = channel.waiting.lock() {
            w.remove(token);
        }
    };
    match resp {
        Ok(r) if r.status().is_success() => {}
        Ok(r) if super::load::refused(r.status()) => {
            forget();
            return Ending::Refused;
        }
        _ => {
            forget();
            return Ending::Lost;
        }
    }
    rx.await.unwrap_or(Ending::Lost)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_send_of_an_answered_token_is_counted_as_doubled() {
        let channel = Channel::default();
        let (tx, mut rx) = oneshot::channel();
        channel.waiting.lock().unwrap().insert("bench a-1", 7, tx);
        channel.sent(7, "echo: bench a-1");
        assert_eq!(rx.try_recv().ok(), Some(Ending::Answered));
        assert_eq!(channel.take_doubled(), 0);
        channel.sent(7, "echo: bench a-1");
        assert_eq!(channel.take_doubled(), 1);
    }

    #[test]
    fn a_failure_notice_answers_the_oldest_waiting_update_of_its_chat() {
        let channel = Channel::default();
        let (first, mut first_rx) = oneshot::channel();
        let (second, mut second_rx) = oneshot::channel();
        let (other, mut other_rx) = oneshot::channel();
        {
            let mut w = channel.waiting.lock().unwrap();
            w.insert("bench b-1", 7, first);
            w.insert("bench b-2", 7, second);
            w.insert("bench b-3", 8, other);
        }
        channel.sent(7, "Sorry, something went wrong");
        assert_eq!(first_rx.try_recv().ok(), Some(Ending::FailedWithAnswer));
        assert!(second_rx.try_recv().is_err());
        assert!(other_rx.try_recv().is_err());
        channel.sent(7, "echo: bench b-2");
        assert_eq!(second_rx.try_recv().ok(), Some(Ending::Answered));
        assert_eq!(channel.take_doubled(), 0);
    }
}
