//! Anthropic's native Messages API (`POST /v1/messages`): system blocks in the top-level
//! `system` array, strictly alternating `user`/`assistant` turns (consecutive same-role
//! turns merged), assistant tool calls as `tool_use` blocks and tool results as
//! `tool_result` blocks leading the next user turn, images as base64 or URL image blocks,
//! structured output through the `output_format` beta, usage with cache tokens counted as
//! input, the SSE event stream, and `{"type":"error"}` bodies or events after a 200.
//! This file is the backend itself; [`request`] builds the body, [`response`] reads an
//! answer and [`stream`] assembles the event stream.

mod request;
mod response;
mod stream;

use std::time::Duration;

use hermes_config::{BackendKind, Resolved};
use reqwest::RequestBuilder;
use reqwest::header::HeaderValue;
use secrecy::{ExposeSecret, SecretString};

use super::http::{self, HttpClient};
use super::sse::SseReader;
use super::{Adapter, CallSpec, Completion, DeltaSink, ProviderError};
use request::request_body;
use response::parse_response;
use stream::StreamAcc;

/// The beta that enables `output_format` (structured outputs) on the Messages API.
const STRUCTURED_OUTPUTS_BETA: &str = "structured-outputs-2025-11-13";

/// The native Anthropic backend.
pub struct Anthropic {
    http: HttpClient,
    /// The base URL without a trailing slash (it may carry a path prefix, e.g. a proxy's).
    base: String,
    key: Option<SecretString>,
    /// The `anthropic-version` header value (the API's wire-format version).
    version: String,
}

impl Anthropic {
    /// An adapter for the resolved Anthropic backend, speaking wire-format `version`
    /// (the `anthropic-version` header, e.g. `2023-06-01`).
    pub fn new(http: HttpClient, resolved: Resolved, version: String) -> Self {
        Self {
            http,
            base: resolved.base_url.as_str().trim_end_matches('/').to_string(),
            key: resolved.key,
            version,
        }
    }

    /// The headers every request carries: the key and the API version.
    fn authed(&self, req: RequestBuilder) -> RequestBuilder {
        let req = req.header("anthropic-version", self.version.as_str());
        // Built by hand and marked sensitive so the key never shows in a Debug print; a key
        // that is not a valid header value is left out (the 401 that follows names no key).
        match self
            .key
            .as_ref()
            .and_then(|k| HeaderValue::from_str(k.expose_secret()).ok())
        {
            Some(mut v) => {
                v.set_sensitive(true);
                req.header("x-api-key", v)
            }
            None => req,
        }
    }

    /// The Messages request for `call`.
    fn post(&self, call: &CallSpec<'_>, stream: bool) -> RequestBuilder {
        // `.json` sets `content-type: application/json`.
        let req = self
            .http
            .inner
            .post(format!("{}/v1/messages", self.base))
            .json(&request_body(call, stream));
        let req = if call.params.response_format.is_some() {
            req.header("anthropic-beta", STRUCTURED_OUTPUTS_BETA)
        } else {
            req
        };
        self.authed(req)
    }
}

impl Adapter for Anthropic {
    fn kind(&self) -> BackendKind {
        BackendKind::Anthropic
    }

    fn supports_tools(&self) -> bool {
        true
    }

    async fn complete(&self, call: &CallSpec<'_>) -> Result<Completion, ProviderError> {
        let req = self.post(call, false).timeout(call.timeout);
        let resp = http::send(req, call.timeout).await?;
        parse_response(&http::body(resp, call.timeout).await?)
    }

    async fn stream(
        &self,
        call: &CallSpec<'_>,
        sink: &dyn DeltaSink,
    ) -> Result<Completion, ProviderError> {
        // No whole-request timeout on a stream: the reader bounds the first event and every
        // silence, and the chain bounds the attempt.
        let resp = http::send(self.post(call, true), call.first_token_timeout).await?;
        let mut reader = SseReader::new(resp, call.first_token_timeout, call.idle_timeout);
        let mut acc = StreamAcc::default();
        while let Some(event) = reader.next().await? {
            if acc.event(event.event.as_deref(), &event.data, sink)? {
                return acc.finish();
            }
        }
        Err(ProviderError::Interrupted(
            "the stream ended without message_stop".into(),
        ))
    }

    async fn health_check(&self) -> Result<(), ProviderError> {
        let timeout = Duration::from_secs(10);
        let req = self.http.inner.get(format!("{}/v1/models", self.base));
        http::send(self.authed(req).timeout(timeout), timeout)
            .await
            .map(|_| ())
    }
}

#[cfg(test)]
/// Fixtures and a backend on a mock server, shared by the tests of every file here.
mod test_support {
    use crate::providers::anthropic::Anthropic;
    use crate::providers::http::HttpClient;
    use crate::providers::testing::resolved;
    use hermes_config::BackendKind;
    use hermes_types::model::ToolSpec;
    use hermes_types::model::{ChatMessage, Role, ToolCall};
    use serde_json::{Value, json};
    use wiremock::matchers::{method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};

    pub(super) const MESSAGE_TEXT: &str =
        include_str!("../../../tests/fixtures/anthropic/message_text.json");
    pub(super) const MESSAGE_TOOL_USE: &str =
        include_str!("../../../tests/fixtures/anthropic/message_tool_use.json");
    pub(super) const STREAM_TEXT: &str =
        include_str!("../../../tests/fixtures/anthropic/stream_text.sse");
    pub(super) const STREAM_TOOL_USE: &str =
        include_str!("../../../tests/fixtures/anthropic/stream_tool_use.sse");
    pub(super) const ERROR_OVERLOADED_SSE: &str =
        include_str!("../../../tests/fixtures/anthropic/error_overloaded.sse");
    pub(super) const ERROR_OVERLOADED: &str =
        include_str!("../../../tests/fixtures/anthropic/error_overloaded.json");
    pub(super) const ERROR_RATE_LIMIT: &str =
        include_str!("../../../tests/fixtures/anthropic/error_rate_limit.json");

    pub(super) fn msg(role: Role, text: &str) -> ChatMessage {
        ChatMessage::text(role, text)
    }

    pub(super) fn assistant_calls(
        text: Option<&str>,
        calls: &[(&str, &str, Value)],
    ) -> ChatMessage {
        ChatMessage {
            role: Role::Assistant,
            content: text.map(str::to_string),
            tool_calls: calls
                .iter()
                .map(|(id, name, args)| ToolCall {
                    id: id.to_string(),
                    name: name.to_string(),
                    arguments: args.clone(),
                    signature: None,
                })
                .collect(),
            tool_call_id: None,
            images: Vec::new(),
        }
    }

    pub(super) fn weather_tool() -> ToolSpec {
        ToolSpec {
            name: "get_weather".into(),
            description: "Get the current weather in a given location".into(),
            parameters: json!({
                "type": "object",
                "properties": { "location": { "type": "string" } },
                "required": ["location"],
            }),
            toolset: "builtin".into(),
        }
    }

    pub(super) fn backend(server: &MockServer, suffix: &str) -> Anthropic {
        hermes_net::install_crypto_provider();
        Anthropic::new(
            HttpClient::new().unwrap(),
            resolved(BackendKind::Anthropic, &format!("{}{suffix}", server.uri())),
            "2023-06-01".into(),
        )
    }

    pub(super) fn sse(body: &str) -> ResponseTemplate {
        ResponseTemplate::new(200).set_body_raw(body.to_string(), "text/event-stream")
    }

    /// Mount `response` for any Messages POST on `server`.
    pub(super) async fn answer_with(server: &MockServer, response: ResponseTemplate) {
        Mock::given(method("POST"))
            .and(path("/v1/messages"))
            .respond_with(response)
            .mount(server)
            .await;
    }
}

#[cfg(test)]
mod tests {
    use super::test_support::*;
    use super::*;
    use crate::providers::http::RejectReason;
    use crate::providers::testing::{Collect, call};
    use hermes_types::model::Role;
    use hermes_types::model::{CallParams, JsonSchemaFormat};
    use serde_json::json;
    use wiremock::matchers::{body_json, header, method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};

    #[tokio::test]
    async fn complete_posts_to_the_prefixed_base_with_headers_and_body() {
        let server = MockServer::start().await;
        let messages = vec![
            msg(Role::System, "You are Hermes."),
            msg(Role::User, "Hello"),
        ];
        let params = CallParams {
            response_format: Some(JsonSchemaFormat {
                name: "greeting".into(),
                schema: json!({ "type": "object" }),
                strict: true,
            }),
            ..CallParams::default()
        };
        let spec = call("claude-haiku-4-5-20251001", &messages, &[], &params);
        Mock::given(method("POST"))
            .and(path("/anthropic/v1/messages"))
            .and(header("x-api-key", "test-key"))
            .and(header("anthropic-version", "2023-06-01"))
            .and(header("content-type", "application/json"))
            .and(header("anthropic-beta", STRUCTURED_OUTPUTS_BETA))
            .and(body_json(request_body(&spec, false)))
            .respond_with(ResponseTemplate::new(200).set_body_raw(MESSAGE_TEXT, "application/json"))
            .expect(1)
            .mount(&server)
            .await;
        // The base URL may carry a path prefix and a trailing slash.
        let c = backend(&server, "/anthropic/")
            .complete(&spec)
            .await
            .unwrap();
        assert_eq!(c.usage.output_tokens, 18);

        let sent = request_body(&spec, false);
        assert_eq!(sent["system"][0]["text"], "You are Hermes.");
        assert_eq!(sent["max_tokens"], 256);
        assert!(sent.get("stream").is_none());
    }

    #[tokio::test]
    async fn no_beta_header_without_structured_output() {
        let server = MockServer::start().await;
        answer_with(
            &server,
            ResponseTemplate::new(200).set_body_raw(MESSAGE_TOOL_USE, "application/json"),
        )
        .await;
        let messages = vec![msg(Role::User, "weather?")];
        let tools = vec![weather_tool()];
        let params = CallParams::default();
        let c = backend(&server, "")
            .complete(&call("claude", &messages, &tools, &params))
            .await
            .unwrap();
        assert_eq!(c.tool_calls[0].name, "get_weather");
        let requests = server.received_requests().await.unwrap();
        assert_eq!(requests.len(), 1);
        assert!(requests[0].headers.get("anthropic-beta").is_none());
        assert_eq!(requests[0].headers["x-api-key"], "test-key");
    }

    #[tokio::test]
    async fn rate_limit_carries_retry_after() {
        let server = MockServer::start().await;
        answer_with(
            &server,
            ResponseTemplate::new(429)
                .insert_header("retry-after", "7")
                .insert_header("anthropic-ratelimit-input-tokens-remaining", "0")
                .set_body_raw(ERROR_RATE_LIMIT, "application/json"),
        )
        .await;
        let messages = vec![msg(Role::User, "Hello")];
        let params = CallParams::default();
        let b = backend(&server, "");
        let spec = call("claude", &messages, &[], &params);
        let want = ProviderError::RateLimited {
            retry_after: Some(Duration::from_secs(7)),
        };
        assert_eq!(b.complete(&spec).await.unwrap_err(), want);
        assert_eq!(
            b.stream(&spec, &Collect::default()).await.unwrap_err(),
            want
        );
    }

    #[tokio::test]
    async fn overloaded_529_is_a_server_error_that_fails_over() {
        let server = MockServer::start().await;
        answer_with(
            &server,
            ResponseTemplate::new(529).set_body_raw(ERROR_OVERLOADED, "application/json"),
        )
        .await;
        let messages = vec![msg(Role::User, "Hello")];
        let params = CallParams::default();
        let err = backend(&server, "")
            .complete(&call("claude", &messages, &[], &params))
            .await
            .unwrap_err();
        assert_eq!(
            err,
            ProviderError::Server {
                status: 529,
                message: "Overloaded".into()
            }
        );
        assert!(err.fails_over());
    }

    #[tokio::test]
    async fn health_check_lists_models_with_the_key() {
        let server = MockServer::start().await;
        Mock::given(method("GET"))
            .and(path("/v1/models"))
            .and(header("x-api-key", "test-key"))
            .and(header("anthropic-version", "2023-06-01"))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({
                "data": [{
                    "type": "model",
                    "id": "claude-haiku-4-5-20251001",
                    "display_name": "Claude Haiku 4.5",
                    "created_at": "2025-10-15T00:00:00Z"
                }],
                "has_more": false,
                "first_id": "claude-haiku-4-5-20251001",
                "last_id": "claude-haiku-4-5-20251001"
            })))
            .expect(1)
            .mount(&server)
            .await;
        backend(&server, "/").health_check().await.unwrap();
    }

    #[tokio::test]
    async fn a_refused_key_fails_without_showing_it() {
        let server = MockServer::start().await;
        let refusal = r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"},"request_id":"req_011CSHr1nUaCkzWQNdTbNgQ2"}"#;
        Mock::given(method("GET"))
            .and(path("/v1/models"))
            .respond_with(ResponseTemplate::new(401).set_body_raw(refusal, "application/json"))
            .mount(&server)
            .await;
        let err = backend(&server, "").health_check().await.unwrap_err();
        assert!(matches!(
            err,
            ProviderError::Rejected {
                status: 401,
                reason: RejectReason::Unauthorized,
                ..
            }
        ));
        assert!(!format!("{err} {err:?}").contains("test-key"));
    }
}
