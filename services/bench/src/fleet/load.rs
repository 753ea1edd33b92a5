//! The open-loop load of `hermes bench fleet`: requests of one kind sent at a fixed rate,
//! each at its scheduled instant whatever the answers to the others, and timed from that
//! instant (a request held back by a slow fleet counts its wait: no coordinated omission).
//! Every request carries a token of its own and must come back as that token's echo, once.

use std::sync::Arc;
use std::time::Duration;

use clap::ValueEnum;
use futures_util::future::BoxFuture;
use serde_json::{Value, json};
use tokio::sync::Mutex;

use hermes_types::model::Platform;

use crate::fleet_process::read_sse;
use crate::platforms::{self, Fakes};

/// The key the fleet under test is given.
pub const API_KEY: &str = "bench-fleet-api-key-0123456789";

/// What a request asks of the fleet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Kind {
    /// `POST /v1/chat/completions`, answered when the run ends.
    Chat,
    /// `POST /v1/chat/completions` with `"stream": true`, read to `[DONE]`.
    ChatStream,
    /// `POST /v1/responses`, stored, answered when the run ends.
    Responses,
    /// `POST /v1/runs`, then its events read to the final one.
    Runs,
    /// A Telegram webhook update from a linked user, answered by the fleet's `sendMessage`.
    Telegram,
    /// A WhatsApp message (a signed Cloud API webhook) from a linked number, answered by the
    /// fleet's Cloud API send.
    Whatsapp,
    /// An Instagram direct message (a signed Meta webhook) from a linked Instagram-scoped id,
    /// answered by the fleet's Send API call.
    Instagram,
    /// A Slack direct message (a signed Events API callback) from a linked member, answered
    /// by the fleet's `chat.postMessage`.
    Slack,
    /// An incoming SMS (a signed Twilio webhook) from a linked number, answered by the fleet's
    /// `Messages.json` send.
    Sms,
    /// A Messenger message (a signed Meta webhook) from a linked page-scoped id, answered by
    /// the fleet's Send API call.
    Messenger,
    /// A Teams personal message (a Bot Framework activity with its JWT) from a linked member,
    /// answered by the fleet's activity to the Connector.
    Teams,
    /// A Discord slash command (an interaction signed with Ed25519) from a linked user,
    /// answered by the fleet's edit of its deferred response.
    Discord,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Chat => "chat",
            Kind::ChatStream => "chat-stream",
            Kind::Responses => "responses",
            Kind::Runs => "runs",
            Kind::Telegram => "telegram",
            Kind::Whatsapp => "whatsapp",
            Kind::Instagram => "instagram",
            Kind::Slack => "slack",
            Kind::Sms => "sms",
            Kind::Messenger => "messenger",
            Kind::Teams => "teams",
            Kind::Discord => "discord",
        }
    }

    /// Whether the kind named `name` comes in as a chat platform's webhook.
    pub fn chat_kind(name: &str) -> bool {
        let api = [Kind::Chat, Kind::ChatStream, Kind::Responses, Kind::Runs];
        Kind::value_variants()
            .iter()
            .any(|k| k.name() == name && !api.contains(k))
    }
}

/// Linked users the chat kinds' messages come from, round robin: enough that no chat's own
/// pace (about one message a second, as Telegram allows) is what the bench measures.
pub const USERS: usize = 500;

/// How one request ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ending {
    /// The echo of its own token, once.
    Answered,
    /// An answer that says the run failed (an error the fleet chose to give).
    FailedWithAnswer,
    /// Refused before it was accepted (503 at capacity, 429): the caller knows.
    Refused,
    /// An answer other than its own echo (another request's, a doubled delta).
    Wrong,
    /// No answer at all (a cut stream, a timeout): the ledger's loss.
    Lost,
}

/// One request's outcome and its latency from its scheduled instant.
#[derive(Clone, Copy, Debug)]
pub struct Sample {
    pub ending: Ending,
    pub latency: Duration,
}

/// Where the requests go: the fleet's ingest, the fake platform APIs that see its answers
/// to chat messages, and their ledger.
#[derive(Clone)]
pub struct Target {
    pub client: reqwest::Client,
    pub base: String,
    pub chats: Arc<super::ledger::Chats>,
    pub fakes: Arc<Fakes>,
}

/// Something that answers requests: the fleet through one kind of request, or the floor
/// (`hermes bench floor`). Each request carries `token`; it ends answered only when the echo
/// of that token came back, once.
pub trait Requests: Send + Sync + 'static {
    /// Send one request and tell how it ended.
    fn one<'a>(&'a self, token: &'a str) -> BoxFuture<'a, Ending>;
}

/// One kind of request to the fleet.
pub struct FleetRequests {
    pub target: Target,
    pub kind: Kind,
}

impl Requests for FleetRequests {
    fn one<'a>(&'a self, token: &'a str) -> BoxFuture<'a, Ending> {
        Box::pin(one(&self.target, self.kind, token))
    }
}

/// Send `rate` requests a second to `requests` for `secs` seconds; every sample, once each
/// request ended (or after `timeout`).
pub async fn step(
    requests: &Arc<dyn Requests>,
    rate: f64,
    secs: f64,
    tag: &str,
    timeout: Duration,
) -> Vec<Sample> {
    let total = (rate * secs).round().max(1.0) as usize;
    let samples = Arc::new(Mutex::new(Vec::with_capacity(total)));
    let start = tokio::time::Instant::now();
    let mut tasks = Vec::with_capacity(total);
    for i in 0..total {
        let due = start + Duration::from_secs_f64(i as f64 / rate);
        tokio::time::sleep_until(due).await;
        let (requests, samples) = (requests.clone(), samples.clone());
        let token = format!("bench {tag}-{i}");
        tasks.push(tokio::spawn(async move {
            let ending = tokio::time::timeout(timeout, requests.one(&token))
                .await
                .unwrap_or(Ending::Lost);
            let latency = due.into_std().elapsed();
            samples.lock().await.push(Sample { ending, latency });
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
    let samples = samples.lock().await;
    samples.clone()
}

/// `count` requests one at a time, each sent once the one before ended: the latency of the
/// path itself, with nothing queued ahead of it.
pub async fn serial(
    requests: &Arc<dyn Requests>,
    count: usize,
    tag: &str,
    timeout: Duration,
) -> Vec<Sample> {
    let mut samples = Vec::with_capacity(count);
    for i in 0..count {
        let token = format!("bench {tag}-{i}");
        let sent = std::time::Instant::now();
        let ending = tokio::time::timeout(timeout, requests.one(&token))
            .await
            .unwrap_or(Ending::Lost);
        samples.push(Sample {
            ending,
            latency: sent.elapsed(),
        });
    }
    samples
}

/// Send one message carrying `token` from the next linked user on `platform`, and wait for
/// its answer to reach the platform's fake API. The caller bounds the wait.
async fn chat_message(target: &Target, platform: Platform, token: &str) -> Ending {
    let i = target.chats.next();
    let n = crate::faults::load::sender(i, USERS);
    let rx = target.chats.expect(token, platforms::chat(platform, n));
    let message = platforms::Message { i, n, text: token };
    let resp = (target.fakes)
        .webhook(platform, &target.client, &target.base, message)
        .send()
        .await;
    target.chats.ended(token, resp, rx).await
}

/// Send one request and tell how it ended.
async fn one(target: &Target, kind: Kind, token: &str) -> Ending {
    let (client, base) = (&target.client, target.base.as_str());
    let expected = format!("echo: {token}");
    match kind {
        Kind::Telegram => chat_message(target, Platform::Telegram, token).await,
        Kind::Whatsapp => chat_message(target, Platform::Whatsapp, token).await,
        Kind::Instagram => chat_message(target, Platform::Instagram, token).await,
        Kind::Slack => chat_message(target, Platform::Slack, token).await,
        Kind::Sms => chat_message(target, Platform::Sms, token).await,
        Kind::Messenger => chat_message(target, Platform::Messenger, token).await,
        Kind::Teams => chat_message(target, Platform::Teams, token).await,
        Kind::Discord => chat_message(target, Platform::Discord, token).await,
        Kind::Chat => {
            let body = json!({"messages": [{"role": "user", "content": token}]});
            let Some(resp) = post(client, base, "/v1/chat/completions", &body).await else {
                return Ending::Refused;
            };
            match resp {
                Ok(v) if v["choices"][0]["message"]["content"] == expected.as_str() => {
                    Ending::Answered
                }
                Ok(_) => Ending::Wrong,
                Err(true) => Ending::FailedWithAnswer,
                Err(false) => Ending::Lost,
            }
        }
        Kind::Responses => {
            let body = json!({"input": token});
            let Some(resp) = post(client, base, "/v1/responses", &body).await else {
                return Ending::Refused;
            };
            match resp {
                Ok(v) if v["status"] == "completed" && answer_text(&v) == expected => {
                    Ending::Answered
                }
                Ok(v) if v["status"] == "failed" => Ending::FailedWithAnswer,
                Ok(_) => Ending::Wrong,
                Err(true) => Ending::FailedWithAnswer,
                Err(false) => Ending::Lost,
            }
        }
        Kind::Runs => {
            let body = json!({"input": token});
            let Some(resp) = post(client, base, "/v1/runs", &body).await else {
                return Ending::Refused;
            };
            let run = match resp {
                Ok(v) => v["run_id"].as_str().unwrap_or_default().to_string(),
                Err(true) => return Ending::FailedWithAnswer,
                Err(false) => return Ending::Lost,
            };
            let events = client
                .get(format!("{base}/v1/runs/{run}/events"))
                .bearer_auth(API_KEY)
                .send()
                .await;
            let events = match events {
                Ok(r) if r.status().is_success() => read_sse(r).await,
                _ => return Ending::Lost,
            };
            match events.last() {
                Some((name, data)) if name == "run.completed" => {
                    let v: Value = serde_json::from_str(data).unwrap_or(Value::Null);
                    if v["output"] == expected.as_str() {
                        Ending::Answered
                    } else {
                        Ending::Wrong
                    }
                }
                Some((name, _)) if name == "run.failed" || name == "run.cancelled" => {
                    Ending::FailedWithAnswer
                }
                _ => Ending::Lost,
            }
        }
        Kind::ChatStream => {
            let body = json!({"messages": [{"role": "user", "content": token}], "stream": true});
            let resp = client
                .post(format!("{base}/v1/chat/completions"))
                .bearer_auth(API_KEY)
                .json(&body)
                .send()
                .await;
            let resp = match resp {
                Ok(r) if r.status().is_success() => r,
                Ok(r) if refused(r.status()) => return Ending::Refused,
                Ok(_) => return Ending::FailedWithAnswer,
                Err(_) => return Ending::Lost,
            };
            let events = read_sse(resp).await;
            let mut text = String::new();
            let mut done = false;
            let mut failed = false;
            for (_, data) in &events {
                if data.trim() == "[DONE]" {
                    done = true;
                } else if let Ok(v) = serde_json::from_str::<Value>(data) {
                    if v.get("error").is_some() {
                        failed = true;
                    }
                    if let Some(delta) = v["choices"][0]["delta"]["content"].as_str() {
                        text.push_str(delta);
                    }
                }
            }
            match (done, failed) {
                (false, _) => Ending::Lost,
                (true, true) => Ending::FailedWithAnswer,
                (true, false) if text == expected => Ending::Answered,
                (true, false) => Ending::Wrong,
            }
        }
    }
}

/// The text of a `response` object's message item.
fn answer_text(response: &Value) -> String {
    response["output"]
        .as_array()
        .and_then(|items| items.iter().rev().find(|i| i["type"] == "message"))
        .and_then(|m| m["content"][0]["text"].as_str())
        .unwrap_or_default()
        .to_string()
}

/// 503 and 429 answers: the request was not taken, and the caller was told.
pub fn refused(status: reqwest::StatusCode) -> bool {
    status == reqwest::StatusCode::SERVICE_UNAVAILABLE
        || status == reqwest::StatusCode::TOO_MANY_REQUESTS
}

/// POST `body` to `path`: `None` when refused; `Ok(json)` for a 2xx; `Err(true)` for another
/// answer (the fleet said the run failed), `Err(false)` for none.
async fn post(
    client: &reqwest::Client,
    base: &str,
    path: &str,
    body: &Value,
) -> Option<Result<Value, bool>> {
    let resp = match client
        .post(format!("{base}{path}"))
        .bearer_auth(API_KEY)
        .json(body)
        .send()
        .await
    {
        Ok(r) => r,
        Err(_) => return Some(Err(false)),
    };
    let status = resp.status();
    if refused(status) {
        return None;
    }
    match resp.json::<Value>().await {
        Ok(v) if status.is_success() => Some(Ok(v)),
        Ok(_) => Some(Err(true)),
        Err(_) => Some(Err(false)),
    }
}

/// The end of a run: void (an error, so the process exits non-zero) when a Telegram answer
/// was doubled after its step (`late_doubled`) or any step's ledger broke (`void`, why each).
pub fn close_ledger(late_doubled: usize, mut void: Vec<String>) -> anyhow::Result<()> {
    if late_doubled > 0 {
        void.push(format!(
            "{late_doubled} chat answers doubled after their step"
        ));
    }
    if !void.is_empty() {
        anyhow::bail!(
            "the ledger does not add up, the run is void: {}",
            void.join("; ")
        );
    }
    println!("bench fleet: the ledger adds up");
    Ok(())
}

/// The samples' figures.
#[derive(Clone, Copy, Debug, Default)]
pub struct Figures {
    pub sent: usize,
    pub answered: usize,
    pub failed_with_answer: usize,
    pub refused: usize,
    pub wrong: usize,
    pub lost: usize,
    pub p50: Duration,
    pub p99: Duration,
    pub p999: Duration,
}

impl Figures {
    pub fn of(samples: &[Sample]) -> Self {
        let count = |e: Ending| samples.iter().filter(|s| s.ending == e).count();
        let mut latencies: Vec<Duration> = samples
            .iter()
            .filter(|s| matches!(s.ending, Ending::Answered | Ending::FailedWithAnswer))
            .map(|s| s.latency)
            .collect();
        latencies.sort();
        let at = |q: f64| -> Duration {
            if latencies.is_empty() {
                return Duration::ZERO;
            }
            let i = ((latencies.len() as f64 * q).ceil() as usize).clamp(1, latencies.len()) - 1;
            latencies[i]
        };
        Self {
            sent: samples.len(),
            answered: count(Ending::Answered),
            failed_with_answer: count(Ending::FailedWithAnswer),
            refused: count(Ending::Refused),
            wrong: count(Ending::Wrong),
            lost: count(Ending::Lost),
            p50: at(0.50),
            p99: at(0.99),
            p999: at(0.999),
        }
    }

    /// Every request answered as itself, none refused, none failed.
    pub fn clean(&self) -> bool {
        self.answered == self.sent
    }

    /// The ledger: every request sent is answered (as itself, or with a failure), none lost,
    /// none answered with another's text.
    pub fn adds_up(&self) -> bool {
        self.wrong == 0
            && self.lost == 0
            && self.answered + self.failed_with_answer + self.refused == self.sent
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(ending: Ending, ms: u64) -> Sample {
        Sample {
            ending,
            latency: Duration::from_millis(ms),
        }
    }

    #[test]
    fn percentiles_are_taken_over_answered_requests_only() {
        let mut samples: Vec<Sample> = (1..=100).map(|ms| sample(Ending::Answered, ms)).collect();
        samples.push(sample(Ending::Lost, 10_000));
        let f = Figures::of(&samples);
        assert_eq!(f.p50, Duration::from_millis(50));
        assert_eq!(f.p99, Duration::from_millis(99));
        assert_eq!(f.p999, Duration::from_millis(100));
        assert_eq!(f.lost, 1);
        assert!(!f.adds_up(), "a lost request voids the ledger");
        assert!(!f.clean());
    }

    #[test]
    fn refusals_and_failures_with_an_answer_keep_the_ledger() {
        let samples = vec![
            sample(Ending::Answered, 5),
            sample(Ending::Refused, 1),
            sample(Ending::FailedWithAnswer, 9),
        ];
        let f = Figures::of(&samples);
        assert!(f.adds_up());
        assert!(!f.clean(), "a refusal is not a clean step of the frontier");
        let wrong = Figures::of(&[sample(Ending::Wrong, 3)]);
        assert!(!wrong.adds_up());
    }
}
