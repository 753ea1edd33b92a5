//! The one way the fleet builds an outbound HTTP client.
//!
//! [`client_builder`] is the base every client starts from: the process-wide TLS provider
//! installed and a user agent naming Hermes. Clients that talk to peers the operator
//! configured (model providers, channel APIs, alert hooks, MCP servers) add their own
//! timeouts to it.
//!
//! A client whose URL a user or a model chose (the `http_fetch` tool, agent wake webhooks)
//! is built with [`AddressPolicy::client_builder`] instead: the host is checked by the SSRF
//! guard ([`crate::guard`]) and the client's resolver pinned to exactly the checked
//! addresses; no proxy (it would resolve the name itself, after the check: the rebinding hole
//! the guard closes) and no redirects (each target needs the same check, so a caller that
//! follows them does it by hand).

use url::Url;

use crate::guard::{AddressPolicy, GuardError};

/// The user agent of clients that have no more specific one.
pub const USER_AGENT: &str = concat!("hermes/", env!("CARGO_PKG_VERSION"));

/// A client builder with TLS ready and `user_agent` set; the caller adds its timeouts.
pub fn client_builder(user_agent: &str) -> reqwest::ClientBuilder {
    // reqwest is built without a default crypto provider and panics when it finds none;
    // installing it here (idempotent) keeps tests, benchmarks and CLI commands that never went
    // through the binary's start from panicking.
    crate::install_crypto_provider();
    reqwest::Client::builder().user_agent(user_agent)
}

impl AddressPolicy {
    /// Check `url`'s host and return a builder for a client that may request it: connected
    /// only to the checked addresses, with no proxy and no redirects. A client is per URL
    /// because the pin is a client setting; it also means no pooled connection made for
    /// another name is ever reused.
    pub async fn client_builder(
        &self,
        url: &Url,
        user_agent: &str,
    ) -> Result<reqwest::ClientBuilder, GuardError> {
        let pinned = self.resolve(url).await?;
        let builder = client_builder(user_agent)
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy();
        Ok(match &pinned {
            Some((name, addrs)) => builder.resolve_to_addrs(name, addrs),
            None => builder,
        })
    }
}

/// A reqwest error as text: its kind and causes, without the URL (the caller adds a shown
/// one, see [`crate::guard::shown`]) and never a header, since reqwest errors carry none.
pub fn describe(e: reqwest::Error) -> String {
    let e = e.without_url();
    let mut text = if e.is_timeout() {
        "timed out".to_string()
    } else if e.is_connect() {
        "could not connect".to_string()
    } else if e.is_body() || e.is_decode() {
        "the body could not be read".to_string()
    } else {
        "the request failed".to_string()
    };
    let mut source = std::error::Error::source(&e);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    /// A server answering every connection with a redirect to `/elsewhere`; returns its port
    /// and how many connections it accepted so far.
    async fn redirecting_server() -> (u16, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let accepted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let count = accepted.clone();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let mut buf = [0u8; 1024];
                let _ = socket.read(&mut buf).await;
                let _ = socket
                    .write_all(
                        b"HTTP/1.1 302 Found\r\nLocation: /elsewhere\r\n\
                          Content-Length: 0\r\nConnection: close\r\n\r\n",
                    )
                    .await;
            }
        });
        (port, accepted)
    }

    fn policy(allow: &[&str]) -> AddressPolicy {
        AddressPolicy::new(
            allow.iter().map(|a| a.parse().unwrap()).collect(),
            "TEST_ALLOW",
        )
    }

    #[tokio::test]
    async fn a_refused_host_gets_no_client_and_no_connection() {
        let (port, accepted) = redirecting_server().await;
        for host in ["127.0.0.1", "localhost"] {
            let url = Url::parse(&format!("http://{host}:{port}/")).unwrap();
            let refused = policy(&[]).client_builder(&url, USER_AGENT).await;
            assert!(
                matches!(&refused, Err(GuardError::Refused { why, .. }) if why.contains("loopback")),
                "{host}: {:?}",
                refused.err()
            );
        }
        assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 0);
    }

    #[tokio::test]
    async fn an_allowed_host_is_requested_and_redirects_are_not_followed() {
        let (port, accepted) = redirecting_server().await;
        for (allow, host) in [("127.0.0.1", "127.0.0.1"), ("localhost", "localhost")] {
            let url = Url::parse(&format!("http://{host}:{port}/start")).unwrap();
            let client = policy(&[allow])
                .client_builder(&url, USER_AGENT)
                .await
                .unwrap()
                .build()
                .unwrap();
            let resp = client.get(url).send().await.unwrap();
            assert_eq!(
                resp.status().as_u16(),
                302,
                "{host}: the redirect is returned"
            );
        }
        assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_failed_request_is_described_without_its_url() {
        let client = client_builder(USER_AGENT).build().unwrap();
        // Port 9 (discard) on loopback: nothing listens in the test environment.
        let err = client
            .get("http://user:hunter2@127.0.0.1:9/secret-path")
            .send()
            .await
            .unwrap_err();
        let text = describe(err);
        assert!(text.starts_with("could not connect"), "{text}");
        assert!(
            !text.contains("hunter2") && !text.contains("secret-path"),
            "{text}"
        );
    }
}
