//! What Discord's refusals say. Discord answers with an HTTP status the in-call retry
//! classifies like any platform's (401/403 `unauthorized`, 404 and other 4xx
//! `invalid_recipient`, 429 `rate_limited`, 5xx retried) and a JSON body
//! `{"code": …, "message": …}` (<https://discord.com/developers/docs/topics/opcodes-and-status-codes#json>)
//! whose code goes into the failure's detail, so a parked reply says why. An interaction
//! whose token has expired answers `10015 Unknown Webhook` (or `50027 Invalid Webhook
//! Token`): [`token_gone`] tells it apart.

use serde_json::Value;

use crate::SendFailure;

/// Unknown Webhook: the interaction's webhook, its token expired, is gone.
pub const UNKNOWN_WEBHOOK: u64 = 10015;
/// Invalid Webhook Token.
pub const INVALID_WEBHOOK_TOKEN: u64 = 50027;

/// Discord's JSON error code in a failure's body, if any.
pub fn code(f: &SendFailure) -> Option<u64> {
    let body: Value = serde_json::from_str(f.body.as_deref()?).ok()?;
    body.get("code")?.as_u64()
}

/// `f` with Discord's error code and message in its detail.
pub fn described(mut f: SendFailure) -> SendFailure {
    let body: Option<Value> = f.body.as_deref().and_then(|b| serde_json::from_str(b).ok());
    if let Some(code) = body.as_ref().and_then(|b| b.get("code")?.as_u64()) {
        let message = body.as_ref().and_then(|b| b.get("message")?.as_str());
        let message: String = message.unwrap_or("").chars().take(200).collect();
        f.detail = format!("{}: Discord error {code} {message}", f.detail);
    }
    f
}

/// Whether `f` says the interaction's token is no longer accepted: 15 minutes have passed.
pub fn token_gone(f: &SendFailure) -> bool {
    let status = f.status.map(|s| s.as_u16());
    matches!(status, Some(401 | 404))
        && matches!(code(f), Some(UNKNOWN_WEBHOOK | INVALID_WEBHOOK_TOKEN))
}

#[cfg(test)]
mod tests {
    use hermes_net::failure::FailureReason;
    use reqwest::StatusCode;

    use super::*;

    fn failure(status: u16, body: &str) -> SendFailure {
        SendFailure {
            reason: FailureReason::InvalidRecipient,
            status: Some(StatusCode::from_u16(status).unwrap()),
            body: Some(body.into()),
            detail: format!("answered {status}"),
            tries: 1,
        }
    }

    #[test]
    fn an_expired_token_is_told_apart_and_every_code_is_named() {
        let gone = failure(404, r#"{"message": "Unknown Webhook", "code": 10015}"#);
        assert!(token_gone(&gone));
        assert_eq!(
            described(gone).detail,
            "answered 404: Discord error 10015 Unknown Webhook"
        );
        let channel = failure(404, r#"{"message": "Unknown Channel", "code": 10003}"#);
        assert!(!token_gone(&channel));
        assert!(!token_gone(&failure(404, "not json")));
        assert_eq!(described(failure(400, "not json")).detail, "answered 400");
    }
}
