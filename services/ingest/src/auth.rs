//! Bearer-key authentication of the HTTP API, checked before the body is read and compared
//! in constant time.

use axum::extract::{Request, State};
use axum::http::header::AUTHORIZATION;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use hermes_runtime::http::ApiError;
use secrecy::{ExposeSecret, SecretString};
use subtle::ConstantTimeEq;

/// The configured key, if any (none only when bound to loopback).
#[derive(Clone)]
pub struct ApiKey(pub Option<SecretString>);

impl ApiKey {
    /// Is `key` (already stripped of `Bearer `) the operator key?
    pub fn is_operator_key(&self, key: &str) -> bool {
        match &self.0 {
            Some(expected) => bool::from(key.as_bytes().ct_eq(expected.expose_secret().as_bytes())),
            None => false,
        }
    }

    /// Does the `Authorization` header value carry the key?
    pub fn accepts(&self, header: Option<&str>) -> bool {
        let Some(expected) = &self.0 else {
            return true;
        };
        let Some(given) = header.and_then(|h| h.strip_prefix("Bearer ")) else {
            return false;
        };
        bool::from(
            given
                .trim()
                .as_bytes()
                .ct_eq(expected.expose_secret().as_bytes()),
        )
    }
}

/// Middleware: 401 with a JSON error unless the request carries the key.
pub async fn require_key(State(key): State<ApiKey>, req: Request, next: Next) -> Response {
    let header = req
        .headers()
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    if !key.accepts(header) {
        return ApiError::unauthorized().into_response();
    }
    next.run(req).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_exact_bearer_key_passes() {
        let key = ApiKey(Some(SecretString::from("0123456789abcdef")));
        assert!(key.accepts(Some("Bearer 0123456789abcdef")));
        assert!(!key.accepts(Some("Bearer 0123456789abcdeX")));
        assert!(!key.accepts(Some("Bearer 0123456789abcdef0")));
        assert!(!key.accepts(Some("0123456789abcdef")));
        assert!(!key.accepts(Some("Basic 0123456789abcdef")));
        assert!(!key.accepts(None));
        assert!(ApiKey(None).accepts(None));
    }
}
