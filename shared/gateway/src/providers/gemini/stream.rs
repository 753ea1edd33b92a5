//! A streamed Gemini answer assembled chunk by chunk: each chunk is a whole response holding
//! the next parts.

use hermes_types::model::Usage;

use super::response::{Parts, WireResponse};
use crate::providers::{Completion, DeltaSink, ProviderError};

/// A streamed answer being assembled: every chunk is a whole response holding the next
/// parts; usage is cumulative, so the last one counts.
#[derive(Default)]
pub(super) struct StreamAcc {
    parts: Parts,
    usage: Usage,
    finish_reason: Option<String>,
}

impl StreamAcc {
    pub(super) fn chunk(&mut self, data: &str, sink: &dyn DeltaSink) -> Result<(), ProviderError> {
        let chunk: WireResponse = serde_json::from_str(data)
            .map_err(|e| ProviderError::Malformed(format!("stream chunk is not JSON: {e}")))?;
        if let Some(e) = chunk.refusal() {
            return Err(e);
        }
        if let Some(u) = &chunk.usage_metadata {
            self.usage = u.normalize();
        }
        if let Some(candidate) = chunk.into_first_candidate() {
            let parts = candidate.content.map(|c| c.parts).unwrap_or_default();
            for text in self.parts.add(parts) {
                sink.delta(&text);
            }
            if let Some(r) = candidate.finish_reason {
                self.finish_reason = Some(r);
            }
        }
        Ok(())
    }

    /// The answer, if the stream got as far as a finish reason (Gemini's only sign that
    /// the answer is whole).
    pub(super) fn finish(self) -> Result<Completion, ProviderError> {
        let Some(raw) = self.finish_reason else {
            return Err(ProviderError::Interrupted(
                "the stream ended without a finishReason".into(),
            ));
        };
        Ok(self.parts.into_completion(self.usage, Some(&raw)))
    }
}

#[cfg(test)]
mod tests {
    use crate::providers::gemini::KEY_HEADER;
    use crate::providers::gemini::test_support::*;
    use crate::providers::testing::{Collect, call};
    use crate::providers::{Adapter, ProviderError};
    use hermes_types::model::CallParams;
    use hermes_types::model::Usage;
    use wiremock::matchers::{header, method, path, query_param};

    #[tokio::test]
    async fn stream_delivers_deltas_and_takes_the_last_usage() {
        let (server, gemini) = backend().await;
        wiremock::Mock::given(method("POST"))
            .and(path(endpoint("streamGenerateContent")))
            .and(query_param("alt", "sse"))
            .and(header(KEY_HEADER, "test-key"))
            .respond_with(sse(STREAM_TEXT))
            .expect(1)
            .mount(&server)
            .await;
        let messages = user("When do you open on Sunday?");
        let params = CallParams::default();
        let sink = Collect::default();
        let c = gemini
            .stream(&call(MODEL, &messages, &[], &params), &sink)
            .await
            .unwrap();
        assert_eq!(
            *sink.0.lock().unwrap(),
            vec!["We open", " at 10:00 on Sundays and close", " at 18:00."]
        );
        assert_eq!(
            c.text.as_deref(),
            Some("We open at 10:00 on Sundays and close at 18:00.")
        );
        assert_eq!(c.finish_reason, "stop");
        assert_eq!(
            c.usage,
            Usage {
                input_tokens: 57,
                output_tokens: 14 + 330,
                cost_micro_usd: 0
            }
        );
        let requests = server.received_requests().await.unwrap();
        assert_eq!(requests[0].url.query(), Some("alt=sse"));
    }

    #[tokio::test]
    async fn stream_assembles_signed_function_calls() {
        let (server, gemini) = backend().await;
        wiremock::Mock::given(method("POST"))
            .and(path(endpoint("streamGenerateContent")))
            .respond_with(sse(STREAM_CALL))
            .mount(&server)
            .await;
        let messages = user("time in Tokyo?");
        let params = CallParams::default();
        let sink = Collect::default();
        let c = gemini
            .stream(&call(MODEL, &messages, &[], &params), &sink)
            .await
            .unwrap();
        assert_eq!(sink.joined(), "Let me look that up.");
        assert_eq!(c.finish_reason, "tool_calls");
        assert_eq!(c.tool_calls.len(), 1);
        assert_eq!(c.tool_calls[0].name, "current_time");
        assert_eq!(c.tool_calls[0].arguments["timezone"], "Asia/Tokyo");
        assert!(
            c.tool_calls[0]
                .signature
                .as_deref()
                .is_some_and(|s| s.starts_with("CiQBVKhc7lR0") && s.ends_with("B6Q=="))
        );
        assert_eq!(c.usage.output_tokens, 21 + 86);
    }

    #[tokio::test]
    async fn stream_ending_without_finish_reason_is_interrupted() {
        let (server, gemini) = backend().await;
        // The recorded transcript cut before its last chunk (the one with finishReason).
        let events: Vec<&str> = STREAM_TEXT.split_inclusive("\r\n\r\n").collect();
        assert_eq!(events.len(), 3);
        let truncated = events[..2].concat();
        wiremock::Mock::given(method("POST"))
            .respond_with(sse(&truncated))
            .mount(&server)
            .await;
        let messages = user("hi");
        let params = CallParams::default();
        let sink = Collect::default();
        let e = gemini
            .stream(&call(MODEL, &messages, &[], &params), &sink)
            .await
            .unwrap_err();
        assert!(matches!(e, ProviderError::Interrupted(_)), "{e:?}");
        assert_eq!(sink.joined(), "We open at 10:00 on Sundays and close");
    }

    #[tokio::test]
    async fn malformed_stream_chunk_is_malformed() {
        let (server, gemini) = backend().await;
        let first = STREAM_TEXT.split_inclusive("\r\n\r\n").next().unwrap();
        let body = format!("{first}data: {{\"candidates\": [{{\"content\": \r\n\r\n");
        wiremock::Mock::given(method("POST"))
            .respond_with(sse(&body))
            .mount(&server)
            .await;
        let messages = user("hi");
        let params = CallParams::default();
        let e = gemini
            .stream(&call(MODEL, &messages, &[], &params), &Collect::default())
            .await
            .unwrap_err();
        assert!(matches!(e, ProviderError::Malformed(_)), "{e:?}");
    }

    #[tokio::test]
    async fn error_inside_a_stream_is_mapped_by_its_code() {
        let (server, gemini) = backend().await;
        let body = format!("data: {}\r\n\r\n", ERROR_503.replace('\n', ""));
        wiremock::Mock::given(method("POST"))
            .respond_with(sse(&body))
            .mount(&server)
            .await;
        let messages = user("hi");
        let params = CallParams::default();
        let e = gemini
            .stream(&call(MODEL, &messages, &[], &params), &Collect::default())
            .await
            .unwrap_err();
        assert_eq!(
            e,
            ProviderError::Server {
                status: 503,
                message: "The model is overloaded. Please try again later.".into()
            }
        );
    }
}
