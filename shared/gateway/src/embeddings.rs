//! A client of OpenAI-compatible embeddings endpoints (`POST {base}/embeddings`), used by
//! semantic recall (docs/architecture.md#9-postgresql): the router embeds each non-trivial inbound message and the
//! facts it stores, then ranks the user's facts by cosine similarity itself.
//!
//! Failures are typed so the caller can tell a slow endpoint from a refusing one, and they
//! never carry the API key: a status error keeps only a short, redacted body excerpt.

use std::sync::Arc;
use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use serde_json::json;
use url::Url;

use hermes_config::RouterSettings;

/// Longest body excerpt kept in [`EmbedError::Status`]; enough to read the provider's
/// message, short enough for a log line.
pub const BODY_EXCERPT_CHARS: usize = 200;

/// What can go wrong with an embeddings call.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    /// The HTTP client could not be built (TLS set-up); nothing was sent.
    #[error("cannot build the embeddings HTTP client: {0}")]
    Client(#[source] reqwest::Error),
    /// No complete answer within the deadline.
    #[error("embeddings call timed out after {} ms", .0.as_millis())]
    Timeout(Duration),
    /// The endpoint answered with a non-success status.
    #[error("embeddings endpoint answered {status}: {body}")]
    Status {
        /// The HTTP status code.
        status: u16,
        /// At most [`BODY_EXCERPT_CHARS`] characters of the body, with the key redacted.
        body: String,
    },
    /// Connection refused, reset, DNS, TLS… the request may not have reached the endpoint.
    #[error("embeddings call failed: {0}")]
    Transport(#[source] reqwest::Error),
    /// A success status with a body that is not the embeddings we asked for.
    #[error("malformed embeddings response: {0}")]
    Malformed(#[from] Malformed),
}

/// Why a successful response was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Malformed {
    /// Not JSON, or not the `{ "data": [{ "embedding", "index" }] }` shape.
    #[error("not an embeddings JSON body: {0}")]
    Json(String),
    /// A different number of embeddings than inputs.
    #[error("{got} embeddings for {expected} inputs")]
    Count {
        /// Inputs sent.
        expected: usize,
        /// Embeddings received.
        got: usize,
    },
    /// An index outside the inputs, or the same index twice.
    #[error("embedding index {0} is out of range or repeated")]
    Index(usize),
    /// An embedding with no component.
    #[error("embedding {0} is empty")]
    EmptyVector(usize),
    /// Embeddings of one response with different lengths.
    #[error("embedding {index} has {got} dimensions, embedding 0 has {expected}")]
    Dimensions {
        /// Index of the odd embedding.
        index: usize,
        /// Length of the first embedding.
        expected: usize,
        /// Length of the odd one.
        got: usize,
    },
}

/// An embeddings client: one endpoint, one model, one deadline per call. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Embedder {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    http: reqwest::Client,
    endpoint: Url,
    api_key: Option<SecretString>,
    model: String,
    timeout: Duration,
}

/// The HTTP client embeddings calls use, built like the other outbound clients of the
/// fleet.
pub fn http_client() -> Result<reqwest::Client, EmbedError> {
    hermes_net::http::client_builder(hermes_net::http::USER_AGENT)
        .connect_timeout(Duration::from_secs(5))
        .pool_idle_timeout(Duration::from_secs(90))
        .build()
        .map_err(EmbedError::Client)
}

impl Embedder {
    /// An embedder calling `{base_url}/embeddings`, whether or not `base_url` ends with `/`
    /// (so `https://api.openai.com/v1` and `https://api.openai.com/v1/` are the same).
    /// A query string on `base_url` is kept.
    pub fn new(
        http: reqwest::Client,
        base_url: Url,
        api_key: Option<SecretString>,
        model: String,
        timeout: Duration,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                http,
                endpoint: endpoint(base_url),
                api_key,
                model,
                timeout,
            }),
        }
    }

    /// The embedder the router's configuration describes, or `None` when no endpoint is
    /// configured (recall is then off, not failing).
    pub fn from_settings(router: &RouterSettings) -> Result<Option<Self>, EmbedError> {
        let Some(base) = router.embeddings_url.clone() else {
            return Ok(None);
        };
        let recall = &router.recall;
        Ok(Some(Self::new(
            http_client()?,
            base,
            router.embeddings_api_key.clone(),
            recall.model.clone(),
            Duration::from_millis(recall.timeout_ms),
        )))
    }

    /// The embeddings model sent with every call.
    pub fn model(&self) -> &str {
        &self.inner.model
    }

    /// The embedding of one text.
    pub async fn embed(&self, text: &str) -> Result<Vec<f32>, EmbedError> {
        let mut all = self.embed_many(&[text.to_string()]).await?;
        // embed_many checked that there is exactly one embedding per input.
        Ok(all.pop().unwrap_or_default())
    }

    /// The embeddings of several texts in one call, in the order of `texts`. No call is
    /// made for an empty slice.
    pub async fn embed_many(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let deadline = self.inner.timeout;
        // One deadline over connect, send and body: reqwest's own timeout is per request
        // too, but the body read is where a slow endpoint usually stalls.
        match tokio::time::timeout(deadline, self.call(texts)).await {
            Ok(result) => result,
            Err(_) => Err(EmbedError::Timeout(deadline)),
        }
    }

    async fn call(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let inner = &self.inner;
        let mut req = inner
            .http
            .post(inner.endpoint.clone())
            .timeout(inner.timeout)
            .json(&json!({ "model": inner.model, "input": texts }));
        if let Some(key) = &inner.api_key {
            req = req.bearer_auth(key.expose_secret());
        }
        let resp = req.send().await.map_err(|e| self.transport(e))?;
        let status = resp.status();
        let body = resp.bytes().await.map_err(|e| self.transport(e))?;
        if !status.is_success() {
            return Err(EmbedError::Status {
                status: status.as_u16(),
                body: self.excerpt(&body),
            });
        }
        Ok(parse(&body, texts.len())?)
    }

    fn transport(&self, e: reqwest::Error) -> EmbedError {
        if e.is_timeout() {
            EmbedError::Timeout(self.inner.timeout)
        } else {
            EmbedError::Transport(e)
        }
    }

    /// Some providers echo a (partly masked) key in their 401 message; the excerpt goes
    /// to logs, so the key is removed before truncating (truncation could cut it in two).
    fn excerpt(&self, body: &[u8]) -> String {
        let mut text = String::from_utf8_lossy(body).into_owned();
        if let Some(key) = &self.inner.api_key {
            let key = key.expose_secret();
            if !key.is_empty() {
                text = text.replace(key, "[redacted]");
            }
        }
        let collapsed = text.split_whitespace().collect::<Vec<_>>().join(" ");
        collapsed.chars().take(BODY_EXCERPT_CHARS).collect()
    }
}

fn endpoint(mut base: Url) -> Url {
    // Only cannot-be-a-base URLs (mailto:, data:) refuse path segments; configuration
    // accepts http(s) only, so such a URL fails later as a transport error.
    if let Ok(mut segments) = base.path_segments_mut() {
        segments.pop_if_empty().push("embeddings");
    }
    base
}

#[derive(Deserialize)]
struct Response {
    data: Vec<Item>,
}

#[derive(Deserialize)]
struct Item {
    embedding: Vec<f32>,
    /// Some compatible servers omit it; their order is then the input order.
    #[serde(default)]
    index: Option<usize>,
}

fn parse(body: &[u8], expected: usize) -> Result<Vec<Vec<f32>>, Malformed> {
    let resp: Response =
        serde_json::from_slice(body).map_err(|e| Malformed::Json(e.to_string()))?;
    if resp.data.len() != expected {
        return Err(Malformed::Count {
            expected,
            got: resp.data.len(),
        });
    }
    let mut slots: Vec<Option<Vec<f32>>> = vec![None; expected];
    for (position, item) in resp.data.into_iter().enumerate() {
        let index = item.index.unwrap_or(position);
        let slot = slots
            .get_mut(index)
            .filter(|s| s.is_none())
            .ok_or(Malformed::Index(index))?;
        if item.embedding.is_empty() {
            return Err(Malformed::EmptyVector(index));
        }
        *slot = Some(item.embedding);
    }
    // Count matched and no index repeated, so every slot is filled.
    let out: Vec<Vec<f32>> = slots.into_iter().flatten().collect();
    let dims = out[0].len();
    if let Some((index, v)) = out.iter().enumerate().find(|(_, v)| v.len() != dims) {
        return Err(Malformed::Dimensions {
            index,
            expected: dims,
            got: v.len(),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use wiremock::matchers::{body_json, header, method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};

    fn embedder(server: &MockServer, key: Option<&str>, timeout: Duration) -> Embedder {
        hermes_net::install_crypto_provider();
        let base = Url::parse(&format!("{}/v1", server.uri())).unwrap();
        Embedder::new(
            http_client().unwrap(),
            base,
            key.map(SecretString::from),
            "test-embed".into(),
            timeout,
        )
    }

    fn texts(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn endpoint_joins_with_or_without_trailing_slash() {
        for base in ["https://h.example/v1", "https://h.example/v1/"] {
            let url = endpoint(Url::parse(base).unwrap());
            assert_eq!(url.as_str(), "https://h.example/v1/embeddings");
        }
        let root = endpoint(Url::parse("http://h.example").unwrap());
        assert_eq!(root.as_str(), "http://h.example/embeddings");
        let query = endpoint(Url::parse("https://h.example/v1?api-version=2").unwrap());
        assert_eq!(
            query.as_str(),
            "https://h.example/v1/embeddings?api-version=2"
        );
    }

    #[tokio::test]
    async fn embeddings_returned_out_of_order_are_reordered_by_index() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/v1/embeddings"))
            .and(body_json(
                json!({ "model": "test-embed", "input": ["first", "second"] }),
            ))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({
                "object": "list",
                "data": [
                    { "object": "embedding", "index": 1, "embedding": [0.0, 1.0] },
                    { "object": "embedding", "index": 0, "embedding": [1.0, 0.0] }
                ],
                "model": "test-embed"
            })))
            .expect(1)
            .mount(&server)
            .await;
        let e = embedder(&server, None, Duration::from_secs(5));
        let got = e.embed_many(&texts(&["first", "second"])).await.unwrap();
        assert_eq!(got, vec![vec![1.0, 0.0], vec![0.0, 1.0]]);
    }

    #[tokio::test]
    async fn single_embed_sends_the_bearer_key() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/v1/embeddings"))
            .and(header("authorization", "Bearer sk-test-123"))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({
                "data": [{ "index": 0, "embedding": [0.5, 0.25, 0.125] }]
            })))
            .expect(1)
            .mount(&server)
            .await;
        let e = embedder(&server, Some("sk-test-123"), Duration::from_secs(5));
        assert_eq!(e.embed("hello").await.unwrap(), vec![0.5, 0.25, 0.125]);
    }

    #[tokio::test]
    async fn no_authorization_header_without_a_key() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({
                "data": [{ "index": 0, "embedding": [1.0] }]
            })))
            .mount(&server)
            .await;
        let e = embedder(&server, None, Duration::from_secs(5));
        e.embed("hello").await.unwrap();
        let requests = server.received_requests().await.unwrap();
        assert_eq!(requests.len(), 1);
        assert!(!requests[0].headers.contains_key("authorization"));
    }

    #[tokio::test]
    async fn server_error_keeps_status_and_a_short_redacted_excerpt() {
        let server = MockServer::start().await;
        let body = format!("upstream broke for key sk-secret-999 {}", "x".repeat(500));
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(500).set_body_string(body))
            .mount(&server)
            .await;
        let e = embedder(&server, Some("sk-secret-999"), Duration::from_secs(5));
        match e.embed("hello").await {
            Err(EmbedError::Status { status, body }) => {
                assert_eq!(status, 500);
                assert!(body.starts_with("upstream broke"));
                assert!(body.chars().count() <= BODY_EXCERPT_CHARS);
                assert!(!body.contains("sk-secret-999"));
                assert!(body.contains("[redacted]"));
            }
            other => panic!("expected a status error, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn a_slow_endpoint_is_a_timeout() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .respond_with(
                ResponseTemplate::new(200)
                    .set_body_json(json!({ "data": [{ "index": 0, "embedding": [1.0] }] }))
                    .set_delay(Duration::from_secs(2)),
            )
            .mount(&server)
            .await;
        let e = embedder(&server, None, Duration::from_millis(100));
        match e.embed("hello").await {
            Err(EmbedError::Timeout(after)) => assert_eq!(after, Duration::from_millis(100)),
            other => panic!("expected a timeout, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn a_refused_connection_is_a_transport_error() {
        hermes_net::install_crypto_provider();
        // Bind then drop: the port is very likely free and refuses connections.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let e = Embedder::new(
            http_client().unwrap(),
            Url::parse(&format!("http://127.0.0.1:{port}/v1")).unwrap(),
            None,
            "m".into(),
            Duration::from_secs(5),
        );
        assert!(matches!(
            e.embed("hello").await,
            Err(EmbedError::Transport(_))
        ));
    }

    #[tokio::test]
    async fn malformed_json_is_rejected() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(200).set_body_string("{\"data\": [oops"))
            .mount(&server)
            .await;
        let e = embedder(&server, None, Duration::from_secs(5));
        assert!(matches!(
            e.embed("hello").await,
            Err(EmbedError::Malformed(Malformed::Json(_)))
        ));
    }

    #[tokio::test]
    async fn no_call_for_no_input() {
        let server = MockServer::start().await;
        let e = embedder(&server, None, Duration::from_secs(5));
        assert!(e.embed_many(&[]).await.unwrap().is_empty());
        assert!(server.received_requests().await.unwrap().is_empty());
    }

    #[test]
    fn wrong_count_is_rejected() {
        let body = br#"{"data":[{"index":0,"embedding":[1.0]}]}"#;
        assert_eq!(
            parse(body, 2),
            Err(Malformed::Count {
                expected: 2,
                got: 1
            })
        );
    }

    #[test]
    fn empty_vector_is_rejected() {
        let body = br#"{"data":[{"index":0,"embedding":[]}]}"#;
        assert_eq!(parse(body, 1), Err(Malformed::EmptyVector(0)));
    }

    #[test]
    fn mismatched_dimensions_are_rejected() {
        let body = br#"{"data":[{"index":0,"embedding":[1.0,2.0]},{"index":1,"embedding":[1.0]}]}"#;
        assert_eq!(
            parse(body, 2),
            Err(Malformed::Dimensions {
                index: 1,
                expected: 2,
                got: 1
            })
        );
    }

    #[test]
    fn repeated_or_out_of_range_index_is_rejected() {
        let repeated = br#"{"data":[{"index":0,"embedding":[1.0]},{"index":0,"embedding":[2.0]}]}"#;
        assert_eq!(parse(repeated, 2), Err(Malformed::Index(0)));
        let outside = br#"{"data":[{"index":3,"embedding":[1.0]}]}"#;
        assert_eq!(parse(outside, 1), Err(Malformed::Index(3)));
    }

    #[test]
    fn missing_index_means_input_order() {
        let body = br#"{"data":[{"embedding":[1.0]},{"embedding":[2.0]}]}"#;
        assert_eq!(parse(body, 2).unwrap(), vec![vec![1.0], vec![2.0]]);
    }
}
