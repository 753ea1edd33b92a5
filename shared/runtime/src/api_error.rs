//! The error every public HTTP surface answers with (docs/api.md, "Routes"): a status, a
//! code from one closed list, and a message, rendered as the OpenAI-style JSON body
//! `{"error": {"message", "type", "code"}}`. Callers and tests match on the code, so it is
//! an enum; its strings are the wire format and never change.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use hermes_types::model::FailureCode;
use serde_json::json;

/// The machine-readable code of an [`ApiError`] (the body's `error.code`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ApiErrorCode {
    /// No key, or a key that names no live key (401).
    InvalidApiKey,
    /// The key may not do this: a scope it lacks, another tenant's object (403).
    Forbidden,
    /// Without `API_SERVER_KEY`, a `Host` that is not a loopback name (421).
    HostNotAllowed,
    /// A request that is well-formed JSON but asks for something invalid.
    InvalidRequest,
    /// A body that is not the JSON the route expects.
    InvalidJson,
    /// A body that could not be read (other than too large).
    InvalidBody,
    /// A `Content-Type` the route does not take (415), or an image of a type no model takes.
    UnsupportedContentType,
    /// A parameter of the OpenAI API that Hermes does not serve.
    UnsupportedParameter,
    /// An `X-Request-Id` that is not a usable id.
    InvalidRequestId,
    /// An `Idempotency-Key` that is empty, too long or not visible ASCII.
    InvalidIdempotencyKey,
    /// An `Idempotency-Key` reused with another body (422).
    IdempotencyKeyConflict,
    /// The first request with this `Idempotency-Key` is still being answered (409).
    IdempotencyKeyInUse,
    /// An image part that cannot be decoded or used.
    InvalidImage,
    /// More images in one request than `HERMES_MAX_IMAGES_PER_REQUEST`.
    TooManyImages,
    /// One image over its byte bound.
    ImageTooLarge,
    /// A body over its route's bound (413).
    BodyTooLarge,
    /// A body that did not arrive within its deadline (408).
    BodyTimeout,
    /// A webhook with more items than any platform sends (413).
    TooManyItems,
    /// The key already holds `HERMES_STREAMS_PER_KEY` requests open (429).
    TooManyStreams,
    /// The client address sent too many keys that name no live key (429).
    TooManyUnknownKeys,
    /// A rate limit of the key, the sender or the agent (429, with `Retry-After`).
    RateLimited,
    /// No such route, object, or channel configured (404).
    NotFound,
    /// A method the route does not serve (405).
    MethodNotAllowed,
    /// A webhook's signature or token missing or wrong (401).
    InvalidSignature,
    /// A Forge wake without its signature header (401).
    MissingSignature,
    /// A Forge wake whose timestamp is not Unix seconds (401).
    InvalidTimestamp,
    /// A Forge wake whose timestamp is outside the tolerance (401).
    StaleTimestamp,
    /// A webhook's payload that could not be understood.
    MalformedPayload,
    /// A Forge wake that names no agent.
    MissingProfileKey,
    /// A Forge wake without `X-Forge-Delivery`.
    MissingDeliveryId,
    /// A Forge wake whose `X-Forge-Delivery` is not a usable id.
    InvalidDeliveryId,
    /// A Forge wake's signed content already taken under another delivery id (409).
    Replayed,
    /// A Forge wake for an agent that does not exist.
    UnknownAgent,
    /// A Forge wake for an agent that runs outside the fleet.
    ExternalAgent,
    /// A `provider:model` whose provider Hermes does not know (the message lists them).
    UnknownProvider,
    /// A `provider:model` that is not one of the configured models (the message lists them).
    ModelNotFound,
    /// A job's schedule that does not parse or is not allowed.
    InvalidSchedule,
    /// A job's target that names nothing it may run.
    InvalidTarget,
    /// The key already has `HERMES_JOBS_PER_KEY` jobs.
    JobLimitReached,
    /// A schedule, or a run now, closer than `HERMES_JOB_MIN_INTERVAL_SECS`.
    JobTooFrequent,
    /// A `previous_response_id` that names no stored response.
    PreviousResponseNotFound,
    /// A waiting caller's run did not finish within its wait.
    RunTimeout,
    /// A run not yet taken by the fleet, asked for what only a started run has.
    RunQueued,
    /// A run already finished, asked to change.
    RunFinished,
    /// A dependency is down or a pool is full: retry (503, with `Retry-After`).
    Unavailable,
    /// A fault of ours (500).
    Internal,
    /// A run that ended failed, answered to the caller who waited for it with the run's
    /// own code (`providers_unavailable`, `budget_exceeded`, …).
    RunFailed(FailureCode),
}

impl ApiErrorCode {
    /// Every code but a run's failure codes ([`FailureCode::ALL`]).
    pub const ALL: [ApiErrorCode; 46] = [
        ApiErrorCode::InvalidApiKey,
        ApiErrorCode::Forbidden,
        ApiErrorCode::HostNotAllowed,
        ApiErrorCode::InvalidRequest,
        ApiErrorCode::InvalidJson,
        ApiErrorCode::InvalidBody,
        ApiErrorCode::UnsupportedContentType,
        ApiErrorCode::UnsupportedParameter,
        ApiErrorCode::InvalidRequestId,
        ApiErrorCode::InvalidIdempotencyKey,
        ApiErrorCode::IdempotencyKeyConflict,
        ApiErrorCode::IdempotencyKeyInUse,
        ApiErrorCode::InvalidImage,
        ApiErrorCode::TooManyImages,
        ApiErrorCode::ImageTooLarge,
        ApiErrorCode::BodyTooLarge,
        ApiErrorCode::BodyTimeout,
        ApiErrorCode::TooManyItems,
        ApiErrorCode::TooManyStreams,
        ApiErrorCode::TooManyUnknownKeys,
        ApiErrorCode::RateLimited,
        ApiErrorCode::NotFound,
        ApiErrorCode::MethodNotAllowed,
        ApiErrorCode::InvalidSignature,
        ApiErrorCode::MissingSignature,
        ApiErrorCode::InvalidTimestamp,
        ApiErrorCode::StaleTimestamp,
        ApiErrorCode::MalformedPayload,
        ApiErrorCode::MissingProfileKey,
        ApiErrorCode::MissingDeliveryId,
        ApiErrorCode::InvalidDeliveryId,
        ApiErrorCode::Replayed,
        ApiErrorCode::UnknownAgent,
        ApiErrorCode::ExternalAgent,
        ApiErrorCode::UnknownProvider,
        ApiErrorCode::ModelNotFound,
        ApiErrorCode::InvalidSchedule,
        ApiErrorCode::InvalidTarget,
        ApiErrorCode::JobLimitReached,
        ApiErrorCode::JobTooFrequent,
        ApiErrorCode::PreviousResponseNotFound,
        ApiErrorCode::RunTimeout,
        ApiErrorCode::RunQueued,
        ApiErrorCode::RunFinished,
        ApiErrorCode::Unavailable,
        ApiErrorCode::Internal,
    ];

    /// The code on the wire (also the `outcome` label of the metrics that count refusals).
    pub fn as_str(self) -> &'static str {
        match self {
            ApiErrorCode::InvalidApiKey => "invalid_api_key",
            ApiErrorCode::Forbidden => "forbidden",
            ApiErrorCode::HostNotAllowed => "host_not_allowed",
            ApiErrorCode::InvalidRequest => "invalid_request",
            ApiErrorCode::InvalidJson => "invalid_json",
            ApiErrorCode::InvalidBody => "invalid_body",
            ApiErrorCode::UnsupportedContentType => "unsupported_content_type",
            ApiErrorCode::UnsupportedParameter => "unsupported_parameter",
            ApiErrorCode::InvalidRequestId => "invalid_request_id",
            ApiErrorCode::InvalidIdempotencyKey => "invalid_idempotency_key",
            ApiErrorCode::IdempotencyKeyConflict => "idempotency_key_conflict",
            ApiErrorCode::IdempotencyKeyInUse => "idempotency_key_in_use",
            ApiErrorCode::InvalidImage => "invalid_image",
            ApiErrorCode::TooManyImages => "too_many_images",
            ApiErrorCode::ImageTooLarge => "image_too_large",
            ApiErrorCode::BodyTooLarge => "body_too_large",
            ApiErrorCode::BodyTimeout => "body_timeout",
            ApiErrorCode::TooManyItems => "too_many_items",
            ApiErrorCode::TooManyStreams => "too_many_streams",
            ApiErrorCode::TooManyUnknownKeys => "too_many_unknown_keys",
            ApiErrorCode::RateLimited => "rate_limited",
            ApiErrorCode::NotFound => "not_found",
            ApiErrorCode::MethodNotAllowed => "method_not_allowed",
            ApiErrorCode::InvalidSignature => "invalid_signature",
            ApiErrorCode::MissingSignature => "missing_signature",
            ApiErrorCode::InvalidTimestamp => "invalid_timestamp",
            ApiErrorCode::StaleTimestamp => "stale_timestamp",
            ApiErrorCode::MalformedPayload => "malformed_payload",
            ApiErrorCode::MissingProfileKey => "missing_profile_key",
            ApiErrorCode::MissingDeliveryId => "missing_delivery_id",
            ApiErrorCode::InvalidDeliveryId => "invalid_delivery_id",
            ApiErrorCode::Replayed => "replayed",
            ApiErrorCode::UnknownAgent => "unknown_agent",
            ApiErrorCode::ExternalAgent => "external_agent",
            ApiErrorCode::UnknownProvider => "unknown_provider",
            ApiErrorCode::ModelNotFound => "model_not_found",
            ApiErrorCode::InvalidSchedule => "invalid_schedule",
            ApiErrorCode::InvalidTarget => "invalid_target",
            ApiErrorCode::JobLimitReached => "job_limit_reached",
            ApiErrorCode::JobTooFrequent => "job_too_frequent",
            ApiErrorCode::PreviousResponseNotFound => "previous_response_not_found",
            ApiErrorCode::RunTimeout => "run_timeout",
            ApiErrorCode::RunQueued => "run_queued",
            ApiErrorCode::RunFinished => "run_finished",
            ApiErrorCode::Unavailable => "unavailable",
            ApiErrorCode::Internal => "internal",
            ApiErrorCode::RunFailed(code) => code.as_str(),
        }
    }
}

impl std::fmt::Display for ApiErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An error answered to an HTTP caller: status, a machine-readable code, a human message.
#[derive(Clone, Debug, thiserror::Error)]
#[error("{status} {code}: {message}")]
pub struct ApiError {
    pub status: StatusCode,
    pub code: ApiErrorCode,
    pub message: String,
    /// Seconds the caller should wait before retrying (adds `Retry-After`).
    pub retry_after: Option<u64>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: ApiErrorCode, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            retry_after: None,
        }
    }

    pub fn unauthorized() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            ApiErrorCode::InvalidApiKey,
            "missing or invalid API key",
        )
    }

    pub fn bad_request(code: ApiErrorCode, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, code, message)
    }

    pub fn unavailable(message: impl Into<String>) -> Self {
        Self {
            retry_after: Some(5),
            ..Self::new(
                StatusCode::SERVICE_UNAVAILABLE,
                ApiErrorCode::Unavailable,
                message,
            )
        }
    }

    fn kind(&self) -> &'static str {
        match self.status.as_u16() {
            401 | 403 => "authentication_error",
            400..=499 => "invalid_request_error",
            _ => "server_error",
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = json!({
            "error": { "message": self.message, "type": self.kind(), "code": self.code.as_str() }
        });
        let mut resp = (self.status, Json(body)).into_response();
        if let Some(secs) = self.retry_after {
            resp.headers_mut()
                .insert(axum::http::header::RETRY_AFTER, secs.into());
        }
        resp
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_is_a_distinct_snake_case_string() {
        let mut seen = std::collections::HashSet::new();
        for code in ApiErrorCode::ALL {
            let s = code.as_str();
            assert!(s.chars().all(|c| c.is_ascii_lowercase() || c == '_'), "{s}");
            assert!(seen.insert(s), "{s} twice");
        }
        for failure in FailureCode::ALL {
            assert!(seen.insert(ApiErrorCode::RunFailed(failure).as_str()));
        }
    }

    #[tokio::test]
    async fn the_body_carries_the_code_as_its_string() {
        let resp = ApiError::bad_request(ApiErrorCode::InvalidJson, "no").into_response();
        assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
        let bytes = axum::body::to_bytes(resp.into_body(), 1 << 16)
            .await
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(
            v,
            json!({"error": {"message": "no", "type": "invalid_request_error", "code": "invalid_json"}})
        );
    }
}
