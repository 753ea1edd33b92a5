//! The ledger of the chat kinds of `hermes bench fleet` (one per chat platform): each message's
//! token waits in its chat until the fleet's send to the fake platform API echoes it. A second
//! send of one token is a doubled answer, which the ledger counts and which voids the run; a
//! text to the chat that is no echo (a failure notice) answers that chat's oldest waiting
//! message as failed-with-an-answer.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::oneshot;

use super::load::Ending;

/// The fake platform APIs' side of the ledger: who waits for which answer, and what came
/// twice. One ledger serves every chat kind; each kind's chats are numbers of its own range.
#[derive(Default)]
pub struct Chats {
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

impl Chats {
    /// The index of the next message of a kind (its sender, round robin).
    pub fn next(&self) -> usize {
        self.next.fetch_add(1, Ordering::SeqCst)
    }

    /// Wait for the answer carrying `token` in `chat`.
    pub fn expect(&self, token: &str, chat: i64) -> oneshot::Receiver<Ending> {
        let (tx, rx) = oneshot::channel();
        if let Ok(mut w) = self.waiting.lock() {
            w.insert(token, chat, tx);
        }
        rx
    }

    /// Stop waiting for `token` (its message was refused or lost on the way in).
    pub fn forget(&self, token: &str) {
        if let Ok(mut w) = self.waiting.lock() {
            w.remove(token);
        }
    }

    /// How a message whose webhook answered `resp` ends, waiting on `rx` for its answer when
    /// the webhook took it.
    pub async fn ended(
        &self,
        token: &str,
        resp: reqwest::Result<reqwest::Response>,
        rx: oneshot::Receiver<Ending>,
    ) -> Ending {
        match resp {
            Ok(r) if r.status().is_success() => rx.await.unwrap_or(Ending::Lost),
            Ok(r) if super::load::refused(r.status()) => {
                self.forget(token);
                Ending::Refused
            }
            _ => {
                self.forget(token);
                Ending::Lost
            }
        }
    }

    /// Sends of a token that had been answered before, since the last call.
    pub fn take_doubled(&self) -> usize {
        self.doubled.swap(0, Ordering::SeqCst)
    }
}

impl crate::platforms::Sink for Chats {
    /// The fleet sent `text` to `chat`: the answer of the token it echoes, else a failure
    /// notice answering the chat's oldest waiting message.
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::platforms::Sink;

    #[test]
    fn a_second_send_of_an_answered_token_is_counted_as_doubled() {
        let channel = Chats::default();
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
        let channel = Chats::default();
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
