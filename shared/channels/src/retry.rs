//! The in-call retry of one outbound HTTP request (docs/channels.md, "In-call retries"): tries
//! at 0 s, 1 s, 3 s and 9 s with jitter; a 429 waits what `Retry-After` asks (bounded);
//! 5xx and network failures are tried again; permanent 4xx are not. What still fails comes
//! back classified, for the queued retry schedule (`StageError::Retry`) to take over.
//! Every sender uses it: the channel senders here, and the REST callback and agent-webhook
//! senders of the delivery stage. The wait of a 429 comes from its `Retry-After` header, or
//! from the body: Telegram's `parameters.retry_after`, Discord's `retry_after` (seconds, with
//! a fraction). [`RetryPolicy::send_observed`] shows every answer's status and headers to
//! the caller, for a platform that paces itself by them (Discord's rate-limit buckets).

use std::time::Duration;

use hermes_net::failure::{FailureReason, scrub};
use hermes_types::trace::TARGET;
use rand::Rng;
use reqwest::header::{HeaderMap, RETRY_AFTER};
use reqwest::{RequestBuilder, Response, StatusCode};
use tracing::field::Empty;
use tracing::{Instrument, Span};

/// The longest response body kept on a failure (enough for a platform's error description).
const MAX_BODY_CHARS: usize = 2000;

/// How one request is tried.
#[derive(Clone, Debug)]
pub struct RetryPolicy {
    /// Pauses before the second, third, … try (seed: 1 s, 3 s, 9 s).
    pub pauses: Vec<Duration>,
    /// Each pause is stretched or shrunk by up to this fraction, so replicas do not retry in step.
    pub jitter: f64,
    /// The longest `Retry-After` waited in the call; a longer one ends the call as
    /// `rate_limited` and leaves the wait to the queued retry.
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            pauses: vec![
                Duration::from_secs(1),
                Duration::from_secs(3),
                Duration::from_secs(9),
            ],
            jitter: 0.2,
            max_retry_after: Duration::from_secs(30),
        }
    }
}

/// A request that did not succeed, with what the peer said.
#[derive(Debug, thiserror::Error)]
#[error("{reason} after {tries} tr{}: {detail}", if *.tries == 1 { "y" } else { "ies" })]
pub struct SendFailure {
    /// Why it failed, as the queued retry schedule and the metrics read it.
    pub reason: FailureReason,
    /// The last HTTP status, if the peer answered at all.
    pub status: Option<StatusCode>,
    /// The last response body (cut short), for error descriptions such as Telegram's.
    pub body: Option<String>,
    /// What went wrong, credentials scrubbed.
    pub detail: String,
    /// How many times the request was tried.
    pub tries: u32,
}

impl RetryPolicy {
    /// Three quick tries 10 ms apart, without jitter, for the tests of this crate.
    #[cfg(test)]
    pub(crate) fn fast() -> Self {
        Self {
            pauses: vec![Duration::from_millis(10); 3],
            jitter: 0.0,
            max_retry_after: Duration::from_secs(2),
        }
    }

    /// Send the request `build` makes (once per try) until it succeeds, fails for good, or
    /// the pauses run out. `on_failure` sees every failed try (for metrics).
    pub async fn send(
        &self,
        build: impl FnMut() -> RequestBuilder,
        on_failure: impl FnMut(FailureReason),
    ) -> Result<Response, SendFailure> {
        self.send_observed(build, on_failure, |_, _| {}).await
    }

    /// [`RetryPolicy::send`], showing `observe` the status and headers of every answer, a
    /// failed try's too, before the next try is paused for.
    pub async fn send_observed(
        &self,
        mut build: impl FnMut() -> RequestBuilder,
        mut on_failure: impl FnMut(FailureReason),
        mut observe: impl FnMut(StatusCode, &HeaderMap),
    ) -> Result<Response, SendFailure> {
        let mut tries = 0u32;
        loop {
            tries += 1;
            let (client, request) = build().build_split();
            let span = try_span(request.as_ref().ok(), tries);
            let sent = match request {
                Ok(request) => client.execute(request).instrument(span.clone()).await,
                Err(e) => Err(e),
            };
            if let Ok(resp) = &sent {
                observe(resp.status(), resp.headers());
                span.record(
                    "http.response.status_code",
                    i64::from(resp.status().as_u16()),
                );
            }
            let failure = match sent {
                Ok(resp) => match FailureReason::from_status(resp.status()) {
                    None => return Ok(resp),
                    Some(reason) => {
                        let status = resp.status();
                        let header = retry_after(&resp);
                        let raw = resp.text().await.ok();
                        let retry_after =
                            header.or_else(|| raw.as_deref().and_then(body_retry_after));
                        let body = raw.map(|b| cut(&b));
                        Failed {
                            reason,
                            status: Some(status),
                            detail: format!("answered {status}"),
                            body,
                            retry_after,
                        }
                    }
                },
                Err(e) => Failed {
                    reason: FailureReason::from_reqwest(&e),
                    status: None,
                    detail: scrub(&e.without_url().to_string()),
                    body: None,
                    retry_after: None,
                },
            };
            on_failure(failure.reason);
            span.record("otel.status_code", "ERROR");
            span.record("error.type", failure.reason.as_str());
            let pause = self.pauses.get(tries as usize - 1).copied();
            let wait = match (failure.reason, pause) {
                (r, _) if r.is_permanent() => None,
                (_, None) => None,
                (FailureReason::RateLimited, Some(p)) => match failure.retry_after {
                    Some(asked) if asked > self.max_retry_after => None,
                    Some(asked) => Some(asked.max(p)),
                    None => Some(self.jittered(p)),
                },
                (_, Some(p)) => Some(self.jittered(p)),
            };
            match wait {
                Some(w) => {
                    // The retry is an event of the failed try's span; the next try has its own.
                    span.in_scope(|| {
                        tracing::info!(target: TARGET, wait_ms = w.as_millis() as u64, "retry");
                    });
                    drop(span);
                    tokio::time::sleep(w).await
                }
                None => return Err(failure.into_send_failure(tries)),
            }
        }
    }

    fn jittered(&self, pause: Duration) -> Duration {
        if self.jitter <= 0.0 {
            return pause;
        }
        let factor = rand::rng().random_range(1.0 - self.jitter..=1.0 + self.jitter);
        pause.mul_f64(factor.max(0.0))
    }
}

/// The HTTP client span of one try (docs/tracing.md#the-span-tree-of-one-message): method, host and port, never
/// the path or query, which carry tokens on some platforms (Telegram's `/bot<token>/`).
fn try_span(request: Option<&reqwest::Request>, tries: u32) -> Span {
    let method = request.map_or("POST", |r| r.method().as_str());
    let url = request.map(|r| r.url());
    tracing::info_span!(
        target: TARGET,
        "send",
        otel.name = method,
        otel.kind = "client",
        otel.status_code = Empty,
        error.type = Empty,
        http.request.method = method,
        server.address = url.and_then(|u| u.host_str()),
        server.port = url.and_then(|u| u.port_or_known_default()).map(i64::from),
        http.request.resend_count = i64::from(tries - 1),
        http.response.status_code = Empty,
    )
}

struct Failed {
    reason: FailureReason,
    status: Option<StatusCode>,
    detail: String,
    body: Option<String>,
    retry_after: Option<Duration>,
}

impl Failed {
    fn into_send_failure(self, tries: u32) -> SendFailure {
        SendFailure {
            reason: self.reason,
            status: self.status,
            body: self.body,
            detail: self.detail,
            tries,
        }
    }
}

/// `Retry-After` in whole seconds (the HTTP-date form is rare on APIs and read as absent).
fn retry_after(resp: &Response) -> Option<Duration> {
    resp.headers()
        .get(RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse::<u64>()
        .ok()
        .map(Duration::from_secs)
}

/// The wait a 429's body names: Telegram's `{"parameters": {"retry_after": 5}}`, Discord's
/// `{"retry_after": 1.337}` (<https://discord.com/developers/docs/topics/rate-limits#exceeding-a-rate-limit>).
fn body_retry_after(body: &str) -> Option<Duration> {
    let v: serde_json::Value = serde_json::from_str(body).ok()?;
    let secs = (v.get("parameters").and_then(|p| p.get("retry_after")))
        .or_else(|| v.get("retry_after"))?
        .as_f64()?;
    // A negative, infinite or absurd value is no wait to honour.
    (0.0..=86_400.0)
        .contains(&secs)
        .then(|| Duration::from_secs_f64(secs))
}

fn cut(body: &str) -> String {
    scrub(&body.chars().take(MAX_BODY_CHARS).collect::<String>())
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};
    use std::time::Instant;

    use wiremock::matchers::method;
    use wiremock::{Mock, MockServer, ResponseTemplate};

    use super::*;

    async fn run(
        server: &MockServer,
        policy: &RetryPolicy,
    ) -> (Result<u16, SendFailure>, Vec<FailureReason>) {
        hermes_net::install_crypto_provider();
        let client = reqwest::Client::new();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = seen.clone();
        let r = policy
            .send(
                || client.post(format!("{}/send", server.uri())),
                move |reason| s.lock().unwrap().push(reason),
            )
            .await
            .map(|r| r.status().as_u16());
        let seen = seen.lock().unwrap().clone();
        (r, seen)
    }

    #[tokio::test]
    async fn server_errors_are_tried_four_times_then_classified() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(503).set_body_string("down"))
            .mount(&server)
            .await;
        let (r, seen) = run(&server, &RetryPolicy::fast()).await;
        let f = r.unwrap_err();
        assert_eq!(f.reason, FailureReason::ServiceUnavailable);
        assert_eq!(f.tries, 4);
        assert_eq!(f.body.as_deref(), Some("down"));
        assert_eq!(seen, vec![FailureReason::ServiceUnavailable; 4]);
        assert_eq!(server.received_requests().await.unwrap().len(), 4);
    }

    #[tokio::test]
    async fn a_permanent_refusal_is_not_retried() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(400))
            .mount(&server)
            .await;
        let (r, _) = run(&server, &RetryPolicy::fast()).await;
        let f = r.unwrap_err();
        assert_eq!(f.reason, FailureReason::InvalidRecipient);
        assert_eq!(f.tries, 1);
        assert_eq!(server.received_requests().await.unwrap().len(), 1);
    }

    #[tokio::test]
    async fn retry_after_is_waited_then_the_send_succeeds() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(429).insert_header("retry-after", "1"))
            .up_to_n_times(1)
            .mount(&server)
            .await;
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(200))
            .mount(&server)
            .await;
        let started = Instant::now();
        let (r, seen) = run(&server, &RetryPolicy::fast()).await;
        assert_eq!(r.unwrap(), 200);
        assert!(
            started.elapsed() >= Duration::from_secs(1),
            "Retry-After waited"
        );
        assert_eq!(seen, vec![FailureReason::RateLimited]);
    }

    #[tokio::test]
    async fn telegrams_retry_after_in_the_body_is_waited() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(429).set_body_json(
                serde_json::json!({"ok": false, "error_code": 429, "parameters": {"retry_after": 1}}),
            ))
            .up_to_n_times(1)
            .mount(&server)
            .await;
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(200))
            .mount(&server)
            .await;
        let started = Instant::now();
        let (r, _) = run(&server, &RetryPolicy::fast()).await;
        assert_eq!(r.unwrap(), 200);
        assert!(started.elapsed() >= Duration::from_secs(1));
    }

    #[test]
    fn discords_fractional_retry_after_in_the_body_is_read() {
        let d = body_retry_after(
            r#"{"message":"You are being rate limited.","retry_after":0.25,"global":false}"#,
        );
        assert_eq!(d, Some(Duration::from_millis(250)));
        assert_eq!(body_retry_after(r#"{"retry_after":-1}"#), None);
        assert_eq!(
            body_retry_after(r#"{"parameters":{"retry_after":2}}"#),
            Some(Duration::from_secs(2))
        );
    }

    #[tokio::test]
    async fn a_retry_after_beyond_the_bound_ends_the_call() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(429).insert_header("retry-after", "3600"))
            .mount(&server)
            .await;
        let started = Instant::now();
        let (r, _) = run(&server, &RetryPolicy::fast()).await;
        let f = r.unwrap_err();
        assert_eq!(f.reason, FailureReason::RateLimited);
        assert_eq!(f.tries, 1);
        assert!(started.elapsed() < Duration::from_secs(2));
    }

    #[tokio::test]
    async fn network_failures_are_retried_and_classified() {
        hermes_net::install_crypto_provider();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let client = reqwest::Client::new();
        let mut tries = 0;
        let f = RetryPolicy::fast()
            .send(
                || client.post(format!("http://127.0.0.1:{port}/")),
                |_| tries += 1,
            )
            .await
            .unwrap_err();
        assert_eq!(f.reason, FailureReason::NetworkTimeout);
        assert_eq!(tries, 4);
    }

    #[test]
    fn jitter_stays_within_its_fraction() {
        let p = RetryPolicy::default();
        for _ in 0..100 {
            let j = p.jittered(Duration::from_secs(1));
            assert!(
                j >= Duration::from_millis(799) && j <= Duration::from_millis(1201),
                "{j:?}"
            );
        }
    }
}
