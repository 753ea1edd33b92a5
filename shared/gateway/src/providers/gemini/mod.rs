//! Google's native Gemini API (`generateContent` / `streamGenerateContent?alt=sse`): this
//! folder owns the translation of a neutral call into Gemini's wire format (`contents` with
//! `user`/`model` roles, `systemInstruction`, `functionDeclarations` with an OpenAPI-subset
//! schema, `generationConfig`), thought signatures carried through tool calls, the answer and
//! its stream back into a [`Completion`], and the usage normalizer (thinking billed as output).
//! This file is the backend itself; [`request`] builds the body, [`schema`] rewrites tool and
//! output schemas, [`response`] reads an answer and [`stream`] assembles a streamed one.
//!
//! The key travels in the `x-goog-api-key` header, never in the URL: URLs end up in logs and
//! in transport errors.

mod request;
mod response;
mod schema;
mod stream;

use hermes_config::{BackendKind, Resolved};
use reqwest::header::HeaderValue;
use secrecy::{ExposeSecret, SecretString};
use serde_json::Value;

use super::http::{self, HttpClient};
use super::sse::SseReader;
use super::{Adapter, CallSpec, Completion, DeltaSink, ProviderError};
use request::request_body;
use response::parse_response;
use stream::StreamAcc;

/// The header Gemini reads its API key from.
const KEY_HEADER: &str = "x-goog-api-key";

/// The native Gemini backend.
pub struct Gemini {
    http: HttpClient,
    /// The API root without its trailing slash (`…/v1beta`).
    base: String,
    key: Option<SecretString>,
}

impl Gemini {
    /// A Gemini backend at `resolved.base_url`, authenticated with `resolved.key`.
    pub fn new(http: HttpClient, resolved: Resolved) -> Self {
        Self {
            http,
            base: resolved.base_url.as_str().trim_end_matches('/').to_string(),
            key: resolved.key,
        }
    }

    /// `{base}/models/{model}:{method}`; a model id configured as `models/…` (the form
    /// Gemini's own model list uses) is accepted too.
    fn model_url(&self, model_id: &str, method: &str) -> String {
        let model = model_id.strip_prefix("models/").unwrap_or(model_id);
        format!("{}/models/{model}:{method}", self.base)
    }

    fn authed(&self, req: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        let Some(key) = &self.key else {
            return req;
        };
        match HeaderValue::from_str(key.expose_secret()) {
            Ok(mut value) => {
                // Keeps the key out of any Debug output of the request.
                value.set_sensitive(true);
                req.header(KEY_HEADER, value)
            }
            // A key that is no valid header value: reqwest records the error and `send`
            // fails with a builder error that does not echo the value.
            Err(_) => req.header(KEY_HEADER, key.expose_secret()),
        }
    }

    fn post(&self, url: String, body: &Value) -> reqwest::RequestBuilder {
        self.authed(self.http.inner.post(url).json(body))
    }
}

impl Adapter for Gemini {
    fn kind(&self) -> BackendKind {
        BackendKind::Gemini
    }

    fn supports_tools(&self) -> bool {
        true
    }

    async fn complete(&self, call: &CallSpec<'_>) -> Result<Completion, ProviderError> {
        let body = request_body(call);
        let req = self
            .post(self.model_url(call.model_id, "generateContent"), &body)
            .timeout(call.timeout);
        let resp = http::send(req, call.timeout).await?;
        parse_response(&http::body(resp, call.timeout).await?)
    }

    async fn stream(
        &self,
        call: &CallSpec<'_>,
        sink: &dyn DeltaSink,
    ) -> Result<Completion, ProviderError> {
        let body = request_body(call);
        let url = self.model_url(call.model_id, "streamGenerateContent") + "?alt=sse";
        // No whole-request timeout on a stream: the reader bounds the first event and every
        // silence, and the chain bounds the attempt.
        let resp = http::send(self.post(url, &body), call.first_token_timeout).await?;
        let mut reader = SseReader::new(resp, call.first_token_timeout, call.idle_timeout);
        let mut acc = StreamAcc::default();
        while let Some(event) = reader.next().await? {
            if event.data.trim().is_empty() {
                continue;
            }
            acc.chunk(&event.data, sink)?;
        }
        // Gemini sends no end marker: the body simply ends after the last chunk.
        acc.finish()
    }

    async fn health_check(&self) -> Result<(), ProviderError> {
        let timeout = std::time::Duration::from_secs(10);
        let url = format!("{}/models?pageSize=1", self.base);
        let req = self.authed(self.http.inner.get(url)).timeout(timeout);
        http::send(req, timeout).await.map(|_| ())
    }
}

#[cfg(test)]
/// Fixtures and a backend on a mock server, shared by the tests of every file here.
mod test_support {
    use crate::providers::gemini::Gemini;
    use crate::providers::http::HttpClient;
    use crate::providers::testing::resolved;
    use hermes_config::BackendKind;
    use hermes_types::model::{ChatMessage, Role, ToolCall};
    use serde_json::Value;
    use wiremock::{MockServer, ResponseTemplate};

    pub(super) const TEXT: &str = include_str!("../../../tests/fixtures/gemini/generate_text.json");
    pub(super) const FUNCTION_CALL: &str =
        include_str!("../../../tests/fixtures/gemini/generate_function_call.json");
    pub(super) const BLOCKED: &str =
        include_str!("../../../tests/fixtures/gemini/blocked_prompt.json");
    pub(super) const ERROR_429: &str =
        include_str!("../../../tests/fixtures/gemini/error_429.json");
    pub(super) const ERROR_503: &str =
        include_str!("../../../tests/fixtures/gemini/error_503.json");
    pub(super) const STREAM_TEXT: &str =
        include_str!("../../../tests/fixtures/gemini/stream_text.sse");
    pub(super) const STREAM_CALL: &str =
        include_str!("../../../tests/fixtures/gemini/stream_function_call.sse");

    pub(super) const MODEL: &str = "gemini-2.5-flash";

    pub(super) async fn backend() -> (MockServer, Gemini) {
        hermes_net::install_crypto_provider();
        let server = MockServer::start().await;
        // The trailing slash must not double up in the URLs.
        let base = format!("{}/v1beta/", server.uri());
        let gemini = Gemini::new(
            HttpClient::new().unwrap(),
            resolved(BackendKind::Gemini, &base),
        );
        (server, gemini)
    }

    pub(super) fn endpoint(m: &str) -> String {
        format!("/v1beta/models/{MODEL}:{m}")
    }

    pub(super) fn sse(body: &str) -> ResponseTemplate {
        ResponseTemplate::new(200)
            .insert_header("content-type", "text/event-stream")
            .set_body_string(body)
    }

    pub(super) fn user(text: &str) -> Vec<ChatMessage> {
        vec![ChatMessage::text(Role::User, text)]
    }

    pub(super) fn signed_call(id: &str, name: &str, args: Value, sig: Option<&str>) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: args,
            signature: sig.map(str::to_string),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::test_support::*;
    use super::*;
    use crate::providers::http::RejectReason;
    use crate::providers::testing::{Collect, call, resolved};
    use hermes_types::model::CallParams;
    use hermes_types::model::{ChatMessage, Role, Usage};
    use serde_json::json;
    use std::time::Duration;
    use wiremock::ResponseTemplate;
    use wiremock::matchers::{body_partial_json, header, method, path, query_param};

    #[tokio::test]
    async fn complete_sends_key_header_and_returns_signed_tool_calls() {
        let (server, gemini) = backend().await;
        wiremock::Mock::given(method("POST"))
            .and(path(endpoint("generateContent")))
            .and(header(KEY_HEADER, "test-key"))
            .and(header("content-type", "application/json"))
            .and(body_partial_json(json!({
                "contents": [{"role": "user", "parts": [{"text": "time in Tokyo?"}]}],
                "generationConfig": {"maxOutputTokens": 256}
            })))
            .respond_with(ResponseTemplate::new(200).set_body_string(FUNCTION_CALL))
            .expect(1)
            .mount(&server)
            .await;
        let messages = user("time in Tokyo?");
        let params = CallParams::default();
        let c = gemini
            .complete(&call(MODEL, &messages, &[], &params))
            .await
            .unwrap();

        assert_eq!(c.text, None);
        assert_eq!(c.finish_reason, "tool_calls");
        assert_eq!(c.tool_calls.len(), 2);
        let first = &c.tool_calls[0];
        assert_eq!(first.name, "current_time");
        assert_eq!(first.arguments, json!({"timezone": "Asia/Tokyo"}));
        assert!(first.id.starts_with("call_"), "{}", first.id);
        assert!(
            first
                .signature
                .as_deref()
                .is_some_and(|s| s.starts_with("CiwBVKhc7nGJbv2s") && s.ends_with("nvM=")),
            "the signature is kept verbatim"
        );
        // Gemini signs only the first of parallel calls.
        assert_eq!(c.tool_calls[1].name, "weather");
        assert_eq!(c.tool_calls[1].signature, None);
        assert_ne!(c.tool_calls[0].id, c.tool_calls[1].id);
        assert_eq!(
            c.usage,
            Usage {
                input_tokens: 112,
                output_tokens: 38 + 86,
                cost_micro_usd: 0
            }
        );

        // The key went in the header only.
        let requests = server.received_requests().await.unwrap();
        assert_eq!(requests[0].url.query(), None);
        assert!(!requests[0].url.as_str().contains("test-key"));

        // Next turn: the signature goes back exactly as received, the result by name.
        let history = vec![
            ChatMessage::text(Role::User, "time in Tokyo?"),
            ChatMessage {
                role: Role::Assistant,
                content: c.text.clone(),
                tool_calls: c.tool_calls.clone(),
                tool_call_id: None,
                images: Vec::new(),
            },
            ChatMessage::tool_result(&c.tool_calls[0].id, "12:00"),
        ];
        let body = request_body(&call(MODEL, &history, &[], &params));
        assert_eq!(
            body["contents"][1]["parts"][0]["thoughtSignature"],
            json!(first.signature.as_deref().unwrap())
        );
        assert_eq!(
            body["contents"][2]["parts"][0]["functionResponse"]["name"],
            "current_time"
        );
    }

    #[tokio::test]
    async fn blocked_prompt_is_rejected_as_content_filter() {
        let (server, gemini) = backend().await;
        wiremock::Mock::given(method("POST"))
            .and(path(endpoint("generateContent")))
            .respond_with(ResponseTemplate::new(200).set_body_string(BLOCKED))
            .mount(&server)
            .await;
        let stream_body = format!("data: {}\r\n\r\n", BLOCKED.replace('\n', ""));
        wiremock::Mock::given(method("POST"))
            .and(path(endpoint("streamGenerateContent")))
            .respond_with(sse(&stream_body))
            .mount(&server)
            .await;
        let messages = user("something forbidden");
        let params = CallParams::default();
        let spec = call(MODEL, &messages, &[], &params);
        let complete = gemini.complete(&spec).await.unwrap_err();
        let streamed = gemini.stream(&spec, &Collect::default()).await.unwrap_err();
        for e in [complete, streamed] {
            let ProviderError::Rejected {
                status,
                reason,
                message,
            } = &e
            else {
                panic!("{e:?}")
            };
            assert_eq!(*status, 400);
            assert_eq!(*reason, RejectReason::ContentFilter);
            assert!(message.contains("PROHIBITED_CONTENT"), "{message}");
            assert!(!e.fails_over());
        }
    }

    #[tokio::test]
    async fn rate_limit_carries_retry_after() {
        let (server, gemini) = backend().await;
        wiremock::Mock::given(method("POST"))
            .respond_with(
                ResponseTemplate::new(429)
                    .insert_header("retry-after", "29")
                    .insert_header("content-type", "application/json; charset=UTF-8")
                    .set_body_string(ERROR_429),
            )
            .mount(&server)
            .await;
        let messages = user("hi");
        let params = CallParams::default();
        let spec = call(MODEL, &messages, &[], &params);
        let expected = ProviderError::RateLimited {
            retry_after: Some(Duration::from_secs(29)),
        };
        assert_eq!(gemini.complete(&spec).await.unwrap_err(), expected);
        assert_eq!(
            gemini.stream(&spec, &Collect::default()).await.unwrap_err(),
            expected
        );
    }

    #[tokio::test]
    async fn unavailable_is_a_server_error_that_fails_over() {
        let (server, gemini) = backend().await;
        wiremock::Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(503).set_body_string(ERROR_503))
            .mount(&server)
            .await;
        let messages = user("hi");
        let params = CallParams::default();
        let e = gemini
            .complete(&call(MODEL, &messages, &[], &params))
            .await
            .unwrap_err();
        assert_eq!(
            e,
            ProviderError::Server {
                status: 503,
                message: "The model is overloaded. Please try again later.".into()
            }
        );
        assert!(e.fails_over());
    }

    #[tokio::test]
    async fn health_check_lists_one_model_with_the_key_header() {
        let (server, gemini) = backend().await;
        wiremock::Mock::given(method("GET"))
            .and(path("/v1beta/models"))
            .and(query_param("pageSize", "1"))
            .and(header(KEY_HEADER, "test-key"))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({
                "models": [{"name": "models/gemini-2.5-flash"}],
                "nextPageToken": "Ch5tb2RlbHMvZ2VtaW5pLTIuNS1mbGFzaA=="
            })))
            .expect(1)
            .mount(&server)
            .await;
        gemini.health_check().await.unwrap();
    }

    #[test]
    fn model_ids_with_the_models_prefix_are_accepted() {
        hermes_net::install_crypto_provider();
        let g = Gemini::new(
            HttpClient::new().unwrap(),
            resolved(
                BackendKind::Gemini,
                "https://generativelanguage.googleapis.com/v1beta/",
            ),
        );
        for id in ["gemini-2.5-flash", "models/gemini-2.5-flash"] {
            assert_eq!(
                g.model_url(id, "generateContent"),
                "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:generateContent"
            );
        }
    }
}
