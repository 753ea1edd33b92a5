//! What every HTTP adapter shares: one client per process, sending with a deadline, and
//! turning a refused answer into a [`ProviderError`] with the provider's own message.

use std::time::Duration;

use reqwest::{RequestBuilder, Response, StatusCode};
use serde_json::Value;

use super::ProviderError;

/// Why a provider refused a request (a 4xx other than 429).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RejectReason {
    /// The prompt does not fit the model's context window.
    ContextLength,
    /// The provider's safety system refused the content.
    ContentFilter,
    /// The key is missing, wrong or lacks permission (401/403).
    Unauthorized,
    /// Anything else the provider calls a bad request.
    Invalid,
}

impl RejectReason {
    pub fn as_str(self) -> &'static str {
        match self {
            RejectReason::ContextLength => "context_length",
            RejectReason::ContentFilter => "content_filter",
            RejectReason::Unauthorized => "unauthorized",
            RejectReason::Invalid => "invalid_request",
        }
    }
}

impl std::fmt::Display for RejectReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The process's HTTP client for model calls (connection pools are shared by backends).
#[derive(Clone)]
pub struct HttpClient {
    pub(crate) inner: reqwest::Client,
}

impl HttpClient {
    pub fn new() -> anyhow::Result<Self> {
        let inner = hermes_net::http::client_builder(hermes_net::http::USER_AGENT)
            .connect_timeout(Duration::from_secs(5))
            .pool_idle_timeout(Duration::from_secs(90))
            .build()?;
        Ok(Self { inner })
    }
}

/// Send `req` and return the response if its status is a success; otherwise the error the
/// status and body mean. `timeout` bounds the wait for the response head.
pub async fn send(req: RequestBuilder, timeout: Duration) -> Result<Response, ProviderError> {
    let resp = match tokio::time::timeout(timeout, req.send()).await {
        Err(_) => return Err(ProviderError::Timeout(timeout)),
        Ok(Err(e)) => return Err(transport_error(e, timeout)),
        Ok(Ok(r)) => r,
    };
    if resp.status().is_success() {
        return Ok(resp);
    }
    let status = resp.status();
    let retry_after = resp
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(seconds);
    let body = tokio::time::timeout(timeout, resp.text())
        .await
        .ok()
        .and_then(Result::ok)
        .unwrap_or_default();
    Err(status_error(status, retry_after, &body))
}

/// Read a whole (successful) response body within `timeout`.
pub async fn body(resp: Response, timeout: Duration) -> Result<String, ProviderError> {
    match tokio::time::timeout(timeout, resp.text()).await {
        Err(_) => Err(ProviderError::Timeout(timeout)),
        Ok(Err(e)) => Err(transport_error(e, timeout)),
        Ok(Ok(t)) => Ok(t),
    }
}

/// A transport failure, without the URL (it may carry a key, as Gemini's does).
pub fn transport_error(e: reqwest::Error, timeout: Duration) -> ProviderError {
    if e.is_timeout() {
        ProviderError::Timeout(timeout)
    } else if e.is_body() || e.is_decode() {
        ProviderError::Interrupted(e.without_url().to_string())
    } else {
        ProviderError::Connect(e.without_url().to_string())
    }
}

/// The error an unsuccessful status means, with the provider's message from its body.
pub fn status_error(
    status: StatusCode,
    retry_after: Option<Duration>,
    body: &str,
) -> ProviderError {
    let message = error_message(body);
    if status == StatusCode::TOO_MANY_REQUESTS {
        return ProviderError::RateLimited {
            retry_after: retry_after.or_else(|| body_retry_delay(body)),
        };
    }
    // Anthropic answers 529 "overloaded"; every 5xx is the provider's trouble.
    if status.is_server_error() {
        return ProviderError::Server {
            status: status.as_u16(),
            message,
        };
    }
    let reason = if matches!(status.as_u16(), 401 | 403) {
        RejectReason::Unauthorized
    } else {
        classify_refusal(body)
    };
    ProviderError::Rejected {
        status: status.as_u16(),
        reason,
        message,
    }
}

/// Gemini puts the wait in the body rather than a header:
/// `error.details[] {"@type": ".../google.rpc.RetryInfo", "retryDelay": "29s"}`.
fn body_retry_delay(body: &str) -> Option<Duration> {
    let v: Value = serde_json::from_str(body).ok()?;
    v.pointer("/error/details")?
        .as_array()?
        .iter()
        .find_map(|d| d.get("retryDelay")?.as_str())
        .and_then(|s| seconds(s.trim().strip_suffix('s')?))
}

/// A wait a peer asked for, in (possibly fractional) seconds. `None` for what is not a
/// number, negative, or too large for a `Duration`: a peer's header must never panic us.
fn seconds(text: &str) -> Option<Duration> {
    Duration::try_from_secs_f64(text.trim().parse::<f64>().ok()?).ok()
}

/// Tell a context-window overflow and a content-policy refusal from other bad requests,
/// by the codes and phrases the three providers use.
pub fn classify_refusal(body: &str) -> RejectReason {
    let b = body.to_ascii_lowercase();
    const CONTEXT: &[&str] = &[
        "context_length_exceeded",
        "maximum context length",
        "prompt is too long",
        "context window",
        "input token count",
        "too many tokens",
    ];
    const FILTER: &[&str] = &[
        "content_filter",
        "content_policy",
        "content policy",
        "responsible ai",
        "safety",
        "blocked",
    ];
    if CONTEXT.iter().any(|p| b.contains(p)) {
        RejectReason::ContextLength
    } else if FILTER.iter().any(|p| b.contains(p)) {
        RejectReason::ContentFilter
    } else {
        RejectReason::Invalid
    }
}

/// The human message of an error body (`error.message` in all three formats), else its
/// first 200 characters.
pub fn error_message(body: &str) -> String {
    serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|v| {
            v.pointer("/error/message")
                .or_else(|| v.pointer("/0/error/message"))
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .unwrap_or_else(|| body.chars().take(200).collect())
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_wait_too_long_for_a_duration_is_ignored_not_a_panic() {
        use super::{body_retry_delay, seconds};
        use std::time::Duration;
        assert_eq!(seconds(" 2.5 "), Some(Duration::from_millis(2500)));
        for bad in ["1e300", "-1", "NaN", "inf", "soon", ""] {
            assert_eq!(seconds(bad), None, "{bad}");
        }
        let body = |d: &str| {
            format!(
                r#"{{"error":{{"details":[{{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"{d}"}}]}}}}"#
            )
        };
        assert_eq!(
            body_retry_delay(&body("29s")),
            Some(Duration::from_secs(29))
        );
        assert_eq!(body_retry_delay(&body("1e300s")), None);
    }

    use super::*;

    #[test]
    fn statuses_map_to_errors() {
        let e = status_error(
            StatusCode::TOO_MANY_REQUESTS,
            Some(Duration::from_secs(2)),
            "",
        );
        assert_eq!(
            e,
            ProviderError::RateLimited {
                retry_after: Some(Duration::from_secs(2))
            }
        );
        let e = status_error(
            StatusCode::from_u16(529).unwrap(),
            None,
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        );
        assert_eq!(
            e,
            ProviderError::Server {
                status: 529,
                message: "Overloaded".into()
            }
        );
        assert!(e.fails_over());
        let gemini = r#"{"error":{"code":429,"message":"Resource has been exhausted","status":"RESOURCE_EXHAUSTED",
            "details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"2.5s"}]}}"#;
        assert_eq!(
            status_error(StatusCode::TOO_MANY_REQUESTS, None, gemini),
            ProviderError::RateLimited {
                retry_after: Some(Duration::from_millis(2500))
            }
        );
    }

    #[test]
    fn refusals_are_classified_across_providers() {
        let openai = r#"{"error":{"message":"This model's maximum context length is 128000 tokens.","type":"invalid_request_error","code":"context_length_exceeded"}}"#;
        let anthropic = r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}"#;
        let filter = r#"{"error":{"message":"The response was filtered","code":"content_filter"}}"#;
        let other = r#"{"error":{"message":"max_tokens: must be positive"}}"#;
        for (body, reason) in [
            (openai, RejectReason::ContextLength),
            (anthropic, RejectReason::ContextLength),
            (filter, RejectReason::ContentFilter),
            (other, RejectReason::Invalid),
        ] {
            let e = status_error(StatusCode::BAD_REQUEST, None, body);
            let ProviderError::Rejected { reason: got, .. } = &e else {
                panic!("{e:?}")
            };
            assert_eq!(*got, reason, "{body}");
        }
        assert!(status_error(StatusCode::BAD_REQUEST, None, openai).fails_over());
        assert!(!status_error(StatusCode::BAD_REQUEST, None, filter).fails_over());
        assert!(!status_error(StatusCode::BAD_REQUEST, None, other).fails_over());
        assert!(status_error(StatusCode::UNAUTHORIZED, None, other).fails_over());
        assert_eq!(
            error_message(anthropic),
            "prompt is too long: 210000 tokens > 200000 maximum"
        );
    }
}
