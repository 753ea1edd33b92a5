//! The API slice of the fault run's load: streamed chat completions through the
//! OpenAI-compatible API, sent once each (a caller without an idempotency key does not send
//! again), read to `[DONE]`, and checked: the answer is the echo of its own message, once.
//! A stream cut because the ingest replica holding it was killed is counted apart from a lost
//! answer: the run still completes, and the caller saw the cut.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};

/// The API key the fleet is given.
pub const API_KEY: &str = "faults-api-key-0123456789";

/// What the API callers saw.
#[derive(Default, Debug)]
pub struct ApiSeen {
    /// Requests sent.
    pub sent: AtomicUsize,
    /// Answered other than 200 (or not at all): the caller knows it was not taken.
    pub refused: AtomicUsize,
    /// Streams read to `[DONE]` holding exactly the echo of their message.
    pub answered: AtomicUsize,
    /// Streams that began but broke before `[DONE]`.
    pub cut: AtomicUsize,
    /// Streams that ended with text other than the echo (a failure, a doubled delta).
    pub wrong: AtomicUsize,
    /// The first few of those, `sent → got`, to say in the ledger what went wrong.
    pub wrong_samples: std::sync::Mutex<Vec<String>>,
}

/// Wrong answers quoted in the ledger.
const WRONG_SAMPLES: usize = 3;

impl ApiSeen {
    pub fn accepted(&self) -> usize {
        self.sent.load(Ordering::SeqCst) - self.refused.load(Ordering::SeqCst)
    }
}

/// Send message `text` as one streamed completion and record what came back.
pub async fn send(client: &reqwest::Client, base: &str, text: &str, seen: &ApiSeen) {
    seen.sent.fetch_add(1, Ordering::SeqCst);
    let response = client
        .post(format!("{base}/v1/chat/completions"))
        .bearer_auth(API_KEY)
        .json(&json!({"messages": [{"role": "user", "content": text}], "stream": true}))
        .timeout(Duration::from_secs(180))
        .send()
        .await;
    let response = match response {
        Ok(r) if r.status().is_success() => r,
        _ => {
            seen.refused.fetch_add(1, Ordering::SeqCst);
            return;
        }
    };
    let mut content = String::new();
    let mut done = false;
    for (_, data) in crate::fleet_process::read_sse(response).await {
        if data.trim() == "[DONE]" {
            done = true;
        } else if let Ok(v) = serde_json::from_str::<Value>(&data)
            && let Some(delta) = v["choices"][0]["delta"]["content"].as_str()
        {
            content.push_str(delta);
        }
    }
    let counter = if !done {
        &seen.cut
    } else if content == format!("echo: {text}") {
        &seen.answered
    } else {
        if let Ok(mut samples) = seen.wrong_samples.lock()
            && samples.len() < WRONG_SAMPLES
        {
            samples.push(format!("{text:?} → {content:?}"));
        }
        &seen.wrong
    };
    counter.fetch_add(1, Ordering::SeqCst);
}
