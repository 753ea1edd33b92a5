//! [`App`]: a running fleet as a test sees it, its addresses and the requests a test sends
//! it, one method each (zero2prod's `TestApp`): a test says what it sends, not how the HTTP
//! call is built, and every call has the same bounds. Each method returns what its callers
//! look at; [`App::post`] is there for a request no method covers (a header of its own, a
//! stream read as it comes). [`crate::Fleet`] and [`crate::KillableFleet`] dereference to it.

use std::net::SocketAddr;
use std::time::Duration;

use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::Sha256;

use crate::KEY;

/// Longer than `HERMES_RUN_TIMEOUT_SECS` (30 s in tests): a request that hangs fails its test
/// instead of holding it for ever.
const TIMEOUT: Duration = Duration::from_secs(90);

/// The `X-Hub-Signature-256` value Meta (WhatsApp, Instagram) signs `body` with under
/// `app_secret`.
pub fn meta_signature(app_secret: &str, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(app_secret.as_bytes()).expect("any key length");
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

/// The status and the JSON answer of `resp` (`null` when the answer is not JSON).
pub async fn status_and_json(resp: reqwest::Response) -> (u16, Value) {
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

/// A running fleet's public and admin addresses, and the requests a test sends it.
#[derive(Debug, Clone, Copy)]
pub struct App {
    /// The public (ingest) server.
    pub http: SocketAddr,
    /// The admin server (`/metrics`, `/readyz`).
    pub admin: SocketAddr,
}

impl App {
    /// The fleet's public address of `path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.http, path)
    }

    /// The Prometheus text the fleet's admin server exports.
    pub async fn metrics(&self) -> String {
        reqwest::get(format!("http://{}/metrics", self.admin))
            .await
            .expect("admin server answers")
            .text()
            .await
            .expect("metrics are text")
    }

    /// Whether the fleet answers ready now.
    pub(crate) async fn ready(&self) -> bool {
        reqwest::get(format!("http://{}/readyz", self.admin))
            .await
            .is_ok_and(|r| r.status().is_success())
    }

    /// A POST to `path` with the kit's timeout and nothing else: the caller adds the key,
    /// headers and body.
    pub fn post(&self, path: &str) -> reqwest::RequestBuilder {
        reqwest::Client::new().post(self.url(path)).timeout(TIMEOUT)
    }

    /// `method` on `path` with the Bearer `key` and `body` as JSON if any: the status and
    /// the JSON answer.
    pub async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        key: &str,
        body: Option<&Value>,
    ) -> (u16, Value) {
        let mut req = reqwest::Client::new()
            .request(method, self.url(path))
            .timeout(TIMEOUT)
            .bearer_auth(key);
        if let Some(body) = body {
            req = req.json(body);
        }
        status_and_json(req.send().await.expect("ingest answers")).await
    }

    /// POST `body` as JSON to `path` with the Bearer `key`: the status and the JSON answer.
    pub async fn post_json(&self, path: &str, key: &str, body: &Value) -> (u16, Value) {
        self.call(reqwest::Method::POST, path, key, Some(body))
            .await
    }

    /// GET `path` with the Bearer `key`: the status and the JSON answer.
    pub async fn get_json(&self, path: &str, key: &str) -> (u16, Value) {
        self.call(reqwest::Method::GET, path, key, None).await
    }

    /// POST `body` as JSON to `path` with the fleet's key and the `Idempotency-Key`
    /// `idempotency_key`, to look at the answer's headers (a replay says so).
    pub async fn post_idempotent(
        &self,
        path: &str,
        idempotency_key: &str,
        body: &Value,
    ) -> reqwest::Response {
        self.post(path)
            .bearer_auth(KEY)
            .header("idempotency-key", idempotency_key)
            .json(body)
            .send()
            .await
            .expect("ingest answers")
    }

    /// POST the chat completions request `body` with the fleet's key.
    pub async fn post_chat(&self, body: &Value) -> reqwest::Response {
        self.post("/v1/chat/completions")
            .bearer_auth(KEY)
            .json(body)
            .send()
            .await
            .expect("ingest answers")
    }

    /// POST a chat completion with `text` as the one user message.
    pub async fn chat(&self, text: &str) -> reqwest::Response {
        self.post_chat(&serde_json::json!({"model": "hermes", "messages": [{"role": "user", "content": text}]}))
            .await
    }

    /// POST the Responses API request `body` with `key`: the status and the JSON answer.
    pub async fn post_responses(&self, key: &str, body: &Value) -> (u16, Value) {
        self.post_json("/v1/responses", key, body).await
    }

    /// POST `text` on the REST channel as `sender` with `key`: the id of the run it started
    /// (asserted accepted).
    pub async fn rest_message(&self, key: &str, sender: &str, text: &str) -> String {
        let body = serde_json::json!({"sender_id": sender, "text": text});
        let (status, answer) = self.post_json("/v1/messages", key, &body).await;
        assert!((200..300).contains(&status), "{status}: {answer}");
        answer["run_id"].as_str().expect("a run id").to_string()
    }

    /// POST the raw `body` to the webhook at `path` with `headers`, as a platform sends it
    /// (JSON content type); the caller signs it, or signs it wrong.
    pub async fn post_webhook(
        &self,
        path: &str,
        headers: &[(&str, String)],
        body: Vec<u8>,
    ) -> reqwest::Response {
        let mut req = self
            .post(path)
            .header("content-type", "application/json")
            .body(body);
        for (name, value) in headers {
            req = req.header(*name, value);
        }
        req.send().await.expect("ingest answers")
    }

    /// POST the Telegram `update` to the Telegram webhook with its `secret`, as Telegram
    /// does: asserted accepted (Telegram retries anything else), its JSON answer returned.
    /// A test of refusals posts with [`App::post_webhook`].
    pub async fn telegram_update(&self, secret: &str, update: &Value) -> Value {
        let headers = [("x-telegram-bot-api-secret-token", secret.to_string())];
        let resp = self
            .post_webhook(
                "/webhooks/telegram",
                &headers,
                update.to_string().into_bytes(),
            )
            .await;
        let (status, answer) = status_and_json(resp).await;
        assert_eq!(
            status, 200,
            "the Telegram webhook refused an update: {answer}"
        );
        answer
    }

    /// POST the WhatsApp Cloud API webhook `body`, signed with `app_secret` as Meta does:
    /// asserted accepted, its JSON answer returned.
    pub async fn whatsapp_message(&self, app_secret: &str, body: &Value) -> Value {
        let raw = serde_json::to_vec(body).expect("JSON");
        let headers = [("x-hub-signature-256", meta_signature(app_secret, &raw))];
        let resp = self.post_webhook("/webhooks/whatsapp", &headers, raw).await;
        let (status, answer) = status_and_json(resp).await;
        assert_eq!(
            status, 200,
            "the WhatsApp webhook refused a message: {answer}"
        );
        answer
    }

    /// POST the raw Forge wake `body` with `headers` (its signature, or a wrong one) to the
    /// Forge route, as the Forge does.
    pub async fn forge_wake(&self, body: &[u8], headers: &[(String, String)]) -> reqwest::Response {
        let headers: Vec<(&str, String)> = headers
            .iter()
            .map(|(name, value)| (name.as_str(), value.clone()))
            .collect();
        self.post_webhook("/agents/forge", &headers, body.to_vec())
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::meta_signature;

    #[test]
    fn meta_signs_with_hmac_sha256_in_hex_after_its_prefix() {
        // The HMAC-SHA256 example of Wikipedia's HMAC article, in Meta's header format.
        assert_eq!(
            meta_signature("key", b"The quick brown fox jumps over the lazy dog"),
            "sha256=f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8"
        );
    }
}
