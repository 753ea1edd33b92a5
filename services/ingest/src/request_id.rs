//! Run ids a retry can find again (docs/api.md, "Retrying safely"). A `503 unavailable` after
//! the broker did not confirm a publish in time leaves the caller not knowing whether the
//! first try was queued; a retry must then name the same run, which the router does not make
//! twice. A chat completion sent with an `Idempotency-Key` or an `X-Request-Id` (the key
//! wins), and a REST message sent without `message_id` but with an `X-Request-Id`, become
//! the run whose id is derived from the calling key, the surface, that id and the request
//! body: every retry of the request names the same run, and another request sent with the
//! same id (another body) another run.

use axum::http::HeaderMap;
use hermes_runtime::http::{ApiError, ApiErrorCode};
use hermes_types::ids::RunId;
use sha2::{Digest, Sha256};

use crate::rest::Caller;

/// The request header.
pub const HEADER: &str = "x-request-id";
/// Longest request id taken.
const MAX_LEN: usize = 128;

/// The surface a request id was sent to: the same id on two surfaces names two runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Surface {
    /// `POST /v1/messages`.
    Rest,
    /// `POST /v1/chat/completions`.
    Chat,
}

impl Surface {
    fn as_str(self) -> &'static str {
        match self {
            Surface::Rest => "rest",
            Surface::Chat => "chat",
        }
    }
}

/// The request's `X-Request-Id`, when it sent one: 1 to 128 printable ASCII characters,
/// else `400 invalid_request_id`.
pub fn of(headers: &HeaderMap) -> Result<Option<String>, ApiError> {
    let Some(value) = headers.get(HEADER) else {
        return Ok(None);
    };
    let bytes = value.as_bytes();
    if bytes.is_empty() || bytes.len() > MAX_LEN || !bytes.iter().all(|b| (0x20..=0x7e).contains(b))
    {
        return Err(ApiError::bad_request(
            ApiErrorCode::InvalidRequestId,
            format!("X-Request-Id must be 1 to {MAX_LEN} printable ASCII characters"),
        ));
    }
    Ok(Some(String::from_utf8_lossy(bytes).into_owned()))
}

/// The run of `caller`'s request `id` with `body` on `surface`: the same for every retry,
/// different for every key, surface and body (a UUID of the custom version built from a
/// SHA-256 of the four).
pub fn run_for(caller: &Caller, surface: Surface, id: &str, body: &[u8]) -> RunId {
    let scope = caller
        .key_id()
        .map_or_else(|| "operator".to_string(), |k| k.to_string());
    let digest = Sha256::new()
        .chain_update(b"hermes request id\0")
        .chain_update(surface.as_str().as_bytes())
        .chain_update([0])
        .chain_update(scope.as_bytes())
        .chain_update([0])
        .chain_update(id.as_bytes())
        .chain_update([0])
        .chain_update(Sha256::digest(body))
        .finalize();
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    RunId::from(uuid::Builder::from_custom_bytes(bytes).into_uuid())
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    #[test]
    fn a_request_id_names_one_run_per_key_surface_and_body() {
        let op = Caller::Operator;
        let a = run_for(&op, Surface::Chat, "req-1", b"{}");
        assert_eq!(a, run_for(&op, Surface::Chat, "req-1", b"{}"));
        assert_ne!(a, run_for(&op, Surface::Chat, "req-2", b"{}"));
        assert_ne!(a, run_for(&op, Surface::Rest, "req-1", b"{}"));
        assert_ne!(a, run_for(&op, Surface::Chat, "req-1", b"{\"other\":1}"));
    }

    #[test]
    fn only_printable_request_ids_are_taken() {
        let mut h = HeaderMap::new();
        assert_eq!(of(&h).unwrap(), None);
        h.insert(HEADER, HeaderValue::from_static("abc-123"));
        assert_eq!(of(&h).unwrap().as_deref(), Some("abc-123"));
        h.insert(HEADER, HeaderValue::from_str(&"x".repeat(129)).unwrap());
        assert_eq!(of(&h).unwrap_err().code, ApiErrorCode::InvalidRequestId);
        h.insert(HEADER, HeaderValue::from_static(""));
        assert_eq!(of(&h).unwrap_err().code, ApiErrorCode::InvalidRequestId);
    }
}
