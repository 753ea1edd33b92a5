//! OpenAI-compatible chat completions (OpenAI, OpenRouter, the Hermes gateway, Ollama, any
//! endpoint speaking `/chat/completions`): tools with arguments as a JSON string, streamed
//! tool calls assembled by index, `stream_options.include_usage`, `choices: null` on the
//! usage chunk tolerated, `response_format` json_schema. Ollama takes no tools. The
//! presets (DeepSeek, Groq, Together, Mistral, Fireworks, xAI) are this same backend with
//! their [`presets::Quirks`]. This file is the backend itself; [`request`] builds the body,
//! [`response`] reads an answer and [`stream`] assembles a streamed one.

pub mod presets;
mod request;
mod response;
mod stream;

use hermes_config::{BackendKind, Resolved};
use secrecy::{ExposeSecret, SecretString};
use serde_json::Value;

use super::http::{self, HttpClient};
use super::sse::SseReader;
use super::{Adapter, CallSpec, Completion, DeltaSink, ProviderError};
use presets::{Quirks, quirks};
use request::request_body;
use response::parse_response;
use stream::StreamAcc;

/// An OpenAI-compatible backend.
pub struct OpenAi {
    http: HttpClient,
    kind: BackendKind,
    base: String,
    key: Option<SecretString>,
    quirks: Quirks,
}

impl OpenAi {
    pub fn new(http: HttpClient, resolved: Resolved) -> Self {
        Self {
            http,
            kind: resolved.kind,
            base: resolved.base_url.as_str().trim_end_matches('/').to_string(),
            key: resolved.key,
            quirks: quirks(resolved.kind),
        }
    }

    fn post(&self, body: &Value) -> reqwest::RequestBuilder {
        let req = self
            .http
            .inner
            .post(format!("{}/chat/completions", self.base))
            .json(body);
        match &self.key {
            Some(k) => req.bearer_auth(k.expose_secret()),
            None => req,
        }
    }
}

impl Adapter for OpenAi {
    fn kind(&self) -> BackendKind {
        self.kind
    }

    fn supports_tools(&self) -> bool {
        self.kind.supports_tools()
    }

    async fn complete(&self, call: &CallSpec<'_>) -> Result<Completion, ProviderError> {
        let body = request_body(call, false, self.quirks);
        let resp = http::send(self.post(&body).timeout(call.timeout), call.timeout).await?;
        parse_response(&http::body(resp, call.timeout).await?, self.quirks)
    }

    async fn stream(
        &self,
        call: &CallSpec<'_>,
        sink: &dyn DeltaSink,
    ) -> Result<Completion, ProviderError> {
        let body = request_body(call, true, self.quirks);
        // No whole-request timeout on a stream: the reader bounds the first event and every
        // silence, and the chain bounds the attempt.
        let resp = http::send(self.post(&body), call.first_token_timeout).await?;
        let mut reader = SseReader::new(resp, call.first_token_timeout, call.idle_timeout);
        let mut acc = StreamAcc::new(self.quirks);
        while let Some(event) = reader.next().await? {
            if event.data.trim() == "[DONE]" {
                return acc.finish();
            }
            acc.chunk(&event.data, sink)?;
        }
        // Some compatible servers close without `[DONE]`; an answer whose finish reason
        // and usage both arrived is whole. Anything less was cut off.
        if acc.finish_reason.is_some() && acc.saw_usage {
            tracing::debug!(backend = %self.kind, "stream ended without [DONE] after its usage chunk");
            return acc.finish();
        }
        Err(ProviderError::Interrupted(
            "the stream ended before its finish reason and usage ([DONE] missing)".into(),
        ))
    }

    async fn health_check(&self) -> Result<(), ProviderError> {
        let timeout = std::time::Duration::from_secs(10);
        let req = self.http.inner.get(format!("{}/models", self.base));
        let req = match &self.key {
            Some(k) => req.bearer_auth(k.expose_secret()),
            None => req,
        };
        http::send(req.timeout(timeout), timeout).await.map(|_| ())
    }
}
