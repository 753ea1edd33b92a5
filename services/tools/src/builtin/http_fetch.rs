//! `http_fetch`: GET one `http`/`https` URL and return its text to the model.
//!
//! The URL comes from a model, which may have read it in an untrusted message, so the tool is
//! built to be harmless to the network it runs in (server-side request forgery):
//!
//! - GET only: the arguments carry a URL and nothing else, so there is no method, header or
//!   body for a prompt to smuggle in.
//! - The host is resolved here, and the fetch is refused if *any* of its addresses is not
//!   public (loopback, private, link-local, CGNAT, documentation, reserved…, IPv4-mapped
//!   forms included). The connection then goes to exactly the addresses that were checked
//!   (the client's resolver is pinned to them), so a DNS answer that changes between the
//!   check and the connection (rebinding) cannot reach anything else.
//! - Redirects are followed by hand, at most `max_redirects`, each target checked like the
//!   first URL.
//! - The whole fetch has a deadline and the body is read chunk by chunk up to `max_bytes`,
//!   so a slow or huge answer costs neither time nor memory.
//! - Only textual content types are returned; binary content is refused.
//!
//! The guard is `hermes_net::guard`; the operator's `[tools.http_fetch] allow_hosts` (host names or CIDR ranges) lifts the
//! non-public refusal for internal services. Unspecified, multicast and broadcast addresses
//! are refused even then: no HTTP service is reachable there.

use std::time::Duration;

use hermes_config::HttpFetchSettings;
use hermes_net::guard::{AddressPolicy, GuardError, shown};
use hermes_net::http::describe;
use hermes_types::model::ToolSpec;
use reqwest::header::{ACCEPT, CONTENT_TYPE, LOCATION};
use serde_json::json;
use url::Url;

use crate::registry::{Tool, ToolError, ToolFuture};

/// What the tool asks servers for: text first, anything else last (it is refused anyway,
/// but a server with only one representation should still answer rather than 406).
const ACCEPT_TEXT: &str = "text/html, text/plain;q=0.9, application/json;q=0.9, \
                           application/xml;q=0.8, text/*;q=0.8, */*;q=0.1";

const USER_AGENT: &str = concat!("hermes-http-fetch/", env!("CARGO_PKG_VERSION"));

/// The `http_fetch` tool, with its limits and the operator's allowlist.
pub struct HttpFetch {
    policy: AddressPolicy,
    max_bytes: usize,
    timeout: Duration,
    max_redirects: u32,
}

impl HttpFetch {
    /// The tool as `[tools.http_fetch]` configures it.
    pub fn new(settings: &HttpFetchSettings) -> Self {
        Self {
            policy: AddressPolicy::new(settings.allow_rules(), "[tools.http_fetch] allow_hosts"),
            max_bytes: settings.max_bytes,
            timeout: settings.timeout(),
            max_redirects: settings.max_redirects,
        }
    }

    /// Fetch what `arguments` names, within the time limit.
    async fn run(&self, arguments: &serde_json::Value) -> Result<String, ToolError> {
        let url = parse_arguments(arguments)?;
        let shown = shown(&url);
        match tokio::time::timeout(self.timeout, self.fetch(url)).await {
            Ok(result) => result,
            Err(_) => Err(ToolError::Failed(format!(
                "fetching {shown} timed out after {:?}",
                self.timeout
            ))),
        }
    }

    /// GET `url`, following redirects, and render the final answer.
    async fn fetch(&self, mut url: Url) -> Result<String, ToolError> {
        let mut redirects = 0;
        loop {
            let resp = self.get_once(&url).await?;
            // 300 and 304 are not redirects to follow, and a redirect without a Location
            // has nowhere to go: both are returned as they are.
            let followed = matches!(resp.status().as_u16(), 301 | 302 | 303 | 307 | 308);
            let location = match resp.headers().get(LOCATION) {
                Some(location) if followed => location.clone(),
                _ => return self.read(url, resp).await,
            };
            if redirects >= self.max_redirects {
                return Err(ToolError::Failed(format!(
                    "{} redirected more than {} times; giving up",
                    shown(&url),
                    self.max_redirects
                )));
            }
            let next = location
                .to_str()
                .ok()
                .and_then(|l| url.join(l).ok())
                .ok_or_else(|| {
                    ToolError::Failed(format!("{} redirected to an invalid location", shown(&url)))
                })?;
            check_url(&next).map_err(|why| {
                ToolError::Failed(format!(
                    "{} redirected to a refused URL: {why}",
                    shown(&url)
                ))
            })?;
            redirects += 1;
            url = next;
        }
    }

    /// One GET, with no redirect followed, connected only to addresses the policy accepted.
    async fn get_once(&self, url: &Url) -> Result<reqwest::Response, ToolError> {
        let builder = self
            .policy
            .client_builder(url, USER_AGENT)
            .await
            .map_err(|e| match e {
                GuardError::NoHost => ToolError::InvalidArguments(e.to_string()),
                _ => ToolError::Failed(e.to_string()),
            })?;
        let client = builder.build().map_err(|e| {
            ToolError::Failed(format!("cannot build an HTTP client: {}", describe(e)))
        })?;
        client
            .get(url.clone())
            .header(ACCEPT, ACCEPT_TEXT)
            .send()
            .await
            .map_err(|e| ToolError::Failed(format!("fetching {}: {}", shown(url), describe(e))))
    }

    /// The result for the model: refuse non-text, read at most `max_bytes` of body.
    async fn read(&self, url: Url, mut resp: reqwest::Response) -> Result<String, ToolError> {
        let status = resp.status().as_u16();
        let content_type = resp
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let content_type = match content_type {
            Some(ct) if is_text(&ct) => ct,
            Some(ct) => {
                return Err(ToolError::Failed(format!(
                    "{} answered {status} with content type {ct:?}, which is not text; \
                     http_fetch only returns text",
                    shown(&url)
                )));
            }
            None => {
                return Err(ToolError::Failed(format!(
                    "{} answered {status} without a content type; http_fetch only returns \
                     content declared as text",
                    shown(&url)
                )));
            }
        };
        let mut body = Vec::new();
        let mut truncated = false;
        // Chunk by chunk so that a body larger than the limit is never held whole: the rest
        // is not read, and dropping the response closes the connection.
        while let Some(chunk) = resp
            .chunk()
            .await
            .map_err(|e| ToolError::Failed(format!("reading {}: {}", shown(&url), describe(e))))?
        {
            let room = self.max_bytes - body.len();
            if chunk.len() > room {
                body.extend_from_slice(&chunk[..room]);
                truncated = true;
                break;
            }
            body.extend_from_slice(&chunk);
        }
        Ok(json!({
            "url": shown(&url),
            "status": status,
            "content_type": content_type,
            "truncated": truncated,
            "body": decode(&body, truncated),
        })
        .to_string())
    }
}

impl Tool for HttpFetch {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "http_fetch".into(),
            description: format!(
                "Fetch a web page or other text document with an HTTP GET and return its \
                 status, content type and text. Only public http:// and https:// URLs; \
                 binary content is refused; the body is cut after {} and the whole fetch \
                 must finish within {} s.",
                size(self.max_bytes),
                self.timeout.as_secs()
            ),
            parameters: json!({
                "type": "object",
                "properties": {
                    "url": {
                        "type": "string",
                        "description": "Absolute http:// or https:// URL to GET"
                    }
                },
                "required": ["url"],
                "additionalProperties": false
            }),
            toolset: super::TOOLSET.into(),
        }
    }

    fn call<'a>(&'a self, arguments: &'a serde_json::Value) -> ToolFuture<'a> {
        Box::pin(self.run(arguments))
    }
}

/// `n` bytes as the description shows them.
fn size(n: usize) -> String {
    if n >= 1024 && n.is_multiple_of(1024) {
        format!("{} KiB", n / 1024)
    } else {
        format!("{n} bytes")
    }
}

/// The URL of `{"url": "..."}`. Any other key is refused so that a model asking for a
/// method, headers or a body learns that it cannot have them.
fn parse_arguments(arguments: &serde_json::Value) -> Result<Url, ToolError> {
    let object = arguments
        .as_object()
        .ok_or_else(|| ToolError::InvalidArguments("expected an object with \"url\"".into()))?;
    if let Some(other) = object.keys().find(|k| *k != "url") {
        return Err(ToolError::InvalidArguments(format!(
            "unknown argument {other:?}: http_fetch takes only \"url\" and always uses GET"
        )));
    }
    let raw = match object.get("url") {
        Some(serde_json::Value::String(s)) => s,
        Some(_) => return Err(ToolError::InvalidArguments("url must be a string".into())),
        None => return Err(ToolError::InvalidArguments("url is required".into())),
    };
    let url = Url::parse(raw.trim())
        .map_err(|e| ToolError::InvalidArguments(format!("url is not an absolute URL: {e}")))?;
    check_url(&url).map_err(ToolError::InvalidArguments)?;
    Ok(url)
}

/// The URL rules that do not need the network: scheme, credentials, a host.
fn check_url(url: &Url) -> Result<(), String> {
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!(
            "scheme {:?} is not allowed; only http and https",
            url.scheme()
        ));
    }
    // Credentials in a URL would be sent to whoever answers, redirects included.
    if !url.username().is_empty() || url.password().is_some() {
        return Err("URLs with credentials (user:password@) are not allowed".into());
    }
    if url.host().is_none() {
        return Err("the URL has no host".into());
    }
    Ok(())
}

/// Whether a `Content-Type` is text the model can read.
fn is_text(content_type: &str) -> bool {
    let essence = content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    let Some((kind, sub)) = essence.split_once('/') else {
        return false;
    };
    match kind {
        "text" => true,
        "application" => {
            matches!(
                sub,
                "json"
                    | "xml"
                    | "javascript"
                    | "x-javascript"
                    | "ecmascript"
                    | "yaml"
                    | "x-yaml"
                    | "toml"
                    | "x-www-form-urlencoded"
            ) || sub.ends_with("+json")
                || sub.ends_with("+xml")
        }
        _ => false,
    }
}

/// The body as text. Invalid UTF-8 becomes U+FFFD, except a character cut in half by the
/// size limit, which is simply dropped.
fn decode(bytes: &[u8], truncated: bool) -> String {
    let mut out = String::with_capacity(bytes.len());
    let mut chunks = bytes.utf8_chunks().peekable();
    while let Some(chunk) = chunks.next() {
        out.push_str(chunk.valid());
        let invalid = chunk.invalid();
        // Only the very end can hold a character the limit cut in half: an incomplete
        // sequence (no error length) rather than an invalid one.
        let cut_by_limit = truncated
            && chunks.peek().is_none()
            && std::str::from_utf8(invalid).is_err_and(|e| e.error_len().is_none());
        if !invalid.is_empty() && !cut_by_limit {
            out.push(char::REPLACEMENT_CHARACTER);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use wiremock::matchers::{method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};

    use super::*;

    fn tool(allow: &[&str]) -> HttpFetch {
        HttpFetch::new(&HttpFetchSettings {
            allow_hosts: allow.iter().map(|a| a.to_string()).collect(),
            ..HttpFetchSettings::default()
        })
    }

    async fn fetch(tool: &HttpFetch, url: &str) -> Result<serde_json::Value, ToolError> {
        let out = tool.call(&json!({ "url": url })).await?;
        Ok(serde_json::from_str(&out).unwrap())
    }

    fn failed(result: Result<serde_json::Value, ToolError>) -> String {
        match result {
            Err(ToolError::Failed(text)) => text,
            other => panic!("expected a failure, got {other:?}"),
        }
    }

    #[test]
    fn urls_must_be_plain_http_or_https() {
        for good in [
            "http://example.com/a?b=c",
            "https://example.com",
            "HTTPS://Example.com:8443/",
        ] {
            assert!(parse_arguments(&json!({ "url": good })).is_ok(), "{good}");
        }
        for (bad, why) in [
            ("ftp://example.com/", "scheme"),
            ("file:///etc/passwd", "scheme"),
            ("gopher://example.com/", "scheme"),
            ("javascript:alert(1)", "scheme"),
            ("data:text/plain,hi", "scheme"),
            ("/relative/path", "absolute"),
            ("example.com", "absolute"),
            ("http://user:hunter2@example.com/", "credentials"),
            ("http://user@example.com/", "credentials"),
        ] {
            match parse_arguments(&json!({ "url": bad })) {
                Err(ToolError::InvalidArguments(text)) => {
                    assert!(text.contains(why), "{bad}: {text}");
                    assert!(!text.contains("hunter2"), "{text}");
                }
                other => panic!("{bad}: {other:?}"),
            }
        }
    }

    #[test]
    fn only_a_url_is_accepted_so_only_get_exists() {
        for bad in [
            json!({}),
            json!({ "url": 5 }),
            json!("http://example.com"),
            json!({ "url": "http://example.com", "method": "POST" }),
            json!({ "url": "http://example.com", "headers": { "x": "y" } }),
            json!({ "url": "http://example.com", "body": "x" }),
        ] {
            assert!(
                matches!(parse_arguments(&bad), Err(ToolError::InvalidArguments(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn spec_is_builtin_and_needs_a_url() {
        let spec = tool(&[]).spec();
        assert_eq!(spec.name, "http_fetch");
        assert_eq!(spec.toolset, "builtin");
        assert_eq!(spec.parameters["required"], json!(["url"]));
        assert_eq!(spec.parameters["properties"]["url"]["type"], "string");
        assert!(spec.description.contains("256 KiB"), "{}", spec.description);
    }

    #[test]
    fn text_types_are_recognised_and_cut_characters_dropped() {
        for t in [
            "text/html; charset=utf-8",
            "TEXT/PLAIN",
            "application/json",
            "application/ld+json",
            "application/atom+xml",
        ] {
            assert!(is_text(t), "{t}");
        }
        for t in [
            "image/png",
            "application/octet-stream",
            "application/pdf",
            "",
            "text",
        ] {
            assert!(!is_text(t), "{t}");
        }
        let e_acute = "é".as_bytes();
        assert_eq!(decode(&[b'a', e_acute[0]], true), "a");
        assert_eq!(decode(&[b'a', 0xff, b'b'], true), "a\u{fffd}b");
        assert_eq!(decode(&[b'a', 0xff], true), "a\u{fffd}");
        assert_eq!(decode(&[b'a', e_acute[0]], false), "a\u{fffd}");
    }

    /// A server with `GET /page` answering `template`.
    async fn server_with(template: ResponseTemplate) -> MockServer {
        let server = MockServer::start().await;
        Mock::given(method("GET"))
            .and(path("/page"))
            .respond_with(template)
            .mount(&server)
            .await;
        server
    }

    #[tokio::test]
    async fn loopback_is_refused_by_default_and_fetched_when_allowlisted() {
        let server =
            server_with(ResponseTemplate::new(200).set_body_raw("hello", "text/plain")).await;
        let url = format!("{}/page", server.uri());

        let err = failed(fetch(&tool(&[]), &url).await);
        assert!(err.contains("loopback"), "{err}");
        assert!(
            server.received_requests().await.unwrap().is_empty(),
            "a refused URL is never connected to"
        );

        for allow in ["127.0.0.1/32", "127.0.0.1"] {
            let out = fetch(&tool(&[allow]), &url).await.unwrap();
            assert_eq!(out["status"], 200);
            assert_eq!(out["body"], "hello");
            assert_eq!(out["truncated"], false);
            assert_eq!(out["content_type"], "text/plain");
            assert_eq!(out["url"], url);
        }

        // By name: `localhost` resolves to loopback, refused unless the name is allowlisted.
        let by_name = url.replace("127.0.0.1", "localhost");
        let err = failed(fetch(&tool(&[]), &by_name).await);
        assert!(err.contains("loopback"), "{err}");
        let out = fetch(&tool(&["localhost"]), &by_name).await.unwrap();
        assert_eq!(out["body"], "hello");

        let methods: Vec<String> = server
            .received_requests()
            .await
            .unwrap()
            .iter()
            .map(|r| r.method.to_string())
            .collect();
        assert_eq!(methods, ["GET", "GET", "GET"]);
    }

    #[tokio::test]
    async fn the_body_is_cut_at_max_bytes() {
        let big = "x".repeat(100_000);
        let server = server_with(ResponseTemplate::new(200).set_body_raw(big, "text/plain")).await;
        let mut t = tool(&["127.0.0.1"]);
        t.max_bytes = 1000;
        let out = fetch(&t, &format!("{}/page", server.uri())).await.unwrap();
        assert_eq!(out["truncated"], true);
        assert_eq!(out["body"].as_str().unwrap().len(), 1000);

        // Exactly the limit is not truncated.
        t.max_bytes = 100_000;
        let out = fetch(&t, &format!("{}/page", server.uri())).await.unwrap();
        assert_eq!(out["truncated"], false);
        assert_eq!(out["body"].as_str().unwrap().len(), 100_000);
    }

    #[tokio::test]
    async fn a_slow_server_hits_the_time_limit() {
        let server = server_with(
            ResponseTemplate::new(200)
                .set_body_raw("late", "text/plain")
                .set_delay(Duration::from_secs(5)),
        )
        .await;
        let mut t = tool(&["127.0.0.1"]);
        t.timeout = Duration::from_millis(300);
        let started = Instant::now();
        let err = failed(fetch(&t, &format!("{}/page", server.uri())).await);
        assert!(err.contains("timed out"), "{err}");
        assert!(started.elapsed() < Duration::from_secs(3));
    }

    #[tokio::test]
    async fn redirects_are_followed_and_each_target_checked() {
        let server =
            server_with(ResponseTemplate::new(200).set_body_raw("landed", "text/plain")).await;
        let redirect = |to: &str| ResponseTemplate::new(302).insert_header("location", to);
        for (from, to) in [
            ("/hop", "/page".to_string()),
            (
                "/metadata",
                "http://169.254.169.254/latest/meta-data/".to_string(),
            ),
            ("/private", "http://10.0.0.1/".to_string()),
            ("/file", "file:///etc/passwd".to_string()),
            ("/creds", "http://user:hunter2@example.com/".to_string()),
            ("/loop", "/loop".to_string()),
        ] {
            Mock::given(method("GET"))
                .and(path(from))
                .respond_with(redirect(&to))
                .mount(&server)
                .await;
        }
        let t = tool(&["127.0.0.1"]);
        let base = server.uri();

        let out = fetch(&t, &format!("{base}/hop")).await.unwrap();
        assert_eq!(out["body"], "landed");
        assert_eq!(out["url"], format!("{base}/page"));

        for (from, why) in [
            ("/metadata", "link-local"),
            ("/private", "private"),
            ("/file", "scheme"),
            ("/creds", "credentials"),
            ("/loop", "more than 5 times"),
        ] {
            let err = failed(fetch(&t, &format!("{base}{from}")).await);
            assert!(err.contains(why), "{from}: {err}");
            assert!(!err.contains("hunter2"), "{err}");
        }

        // A host allowlisted by name does not extend to where it redirects.
        Mock::given(method("GET"))
            .and(path("/to-literal"))
            .respond_with(redirect(&format!("{base}/page")))
            .mount(&server)
            .await;
        let by_name = tool(&["localhost"]);
        let err = failed(
            fetch(
                &by_name,
                &format!("{}/to-literal", base.replace("127.0.0.1", "localhost")),
            )
            .await,
        );
        assert!(err.contains("loopback"), "{err}");

        let mut no_redirects = tool(&["127.0.0.1"]);
        no_redirects.max_redirects = 0;
        let err = failed(fetch(&no_redirects, &format!("{base}/hop")).await);
        assert!(err.contains("more than 0 times"), "{err}");
    }

    #[tokio::test]
    async fn binary_content_is_refused() {
        for mime in ["image/png", "application/octet-stream"] {
            let server = server_with(
                ResponseTemplate::new(200).set_body_raw(vec![0x89, b'P', b'N', b'G', 0], mime),
            )
            .await;
            let err = failed(fetch(&tool(&["127.0.0.1"]), &format!("{}/page", server.uri())).await);
            assert!(err.contains(mime) && err.contains("not text"), "{err}");
        }
    }

    #[tokio::test]
    async fn error_statuses_are_returned_to_the_model() {
        let server =
            server_with(ResponseTemplate::new(404).set_body_raw("{\"e\":1}", "application/json"))
                .await;
        let out = fetch(&tool(&["127.0.0.1"]), &format!("{}/page", server.uri()))
            .await
            .unwrap();
        assert_eq!(out["status"], 404);
        assert_eq!(out["body"], "{\"e\":1}");
    }
}
