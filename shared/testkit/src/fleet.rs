//! [`Fleet`]: services started in this process on free ports, and what a test asks of them.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::KEY;

/// A fleet started in-process.
pub struct Fleet {
    pub http: SocketAddr,
    pub admin: SocketAddr,
    pub(crate) stop: Option<oneshot::Sender<()>>,
    pub(crate) handle: Option<JoinHandle<anyhow::Result<()>>>,
}

impl Fleet {
    pub(crate) async fn wait_ready(&self) {
        let started = Instant::now();
        loop {
            if reqwest::get(format!("http://{}/readyz", self.admin))
                .await
                .is_ok_and(|r| r.status().is_success())
            {
                return;
            }
            if let Some(h) = &self.handle {
                assert!(!h.is_finished(), "fleet stopped during start");
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "fleet not ready within 30s"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

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

    /// POST a chat completion with `text` as the user message.
    pub async fn chat(&self, text: &str) -> reqwest::Response {
        reqwest::Client::new()
            .post(self.url("/v1/chat/completions"))
            // Longer than HERMES_RUN_TIMEOUT_SECS (30 s in tests): a hang fails the test.
            .timeout(Duration::from_secs(90))
            .bearer_auth(KEY)
            .json(&serde_json::json!({"model": "hermes", "messages": [{"role": "user", "content": text}]}))
            .send()
            .await
            .expect("ingest answers")
    }

    /// POST `text` on the REST channel as `sender` with `key`: the id of the run it started
    /// (asserted accepted).
    pub async fn rest_message(&self, key: &str, sender: &str, text: &str) -> String {
        let resp = reqwest::Client::new()
            .post(self.url("/v1/messages"))
            .timeout(Duration::from_secs(30))
            .bearer_auth(key)
            .json(&serde_json::json!({"sender_id": sender, "text": text}))
            .send()
            .await
            .expect("ingest answers");
        assert!(resp.status().is_success(), "{}", resp.status());
        let body: serde_json::Value = resp.json().await.expect("a JSON answer");
        body["run_id"].as_str().expect("a run id").to_string()
    }

    /// Stop the fleet the way SIGTERM does and return its result.
    pub async fn stop(mut self) -> anyhow::Result<()> {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        self.handle
            .take()
            .expect("running")
            .await
            .expect("fleet task did not panic")
    }
}
