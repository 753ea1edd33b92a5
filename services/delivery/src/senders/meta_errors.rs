//! Meta's Graph API (the WhatsApp Cloud API, which 360dialog relays, and Instagram) reports
//! throttling and its own transient trouble as HTTP 400 with an error code in the body,
//! which the status alone would call a refused recipient and park for good. The codes Meta
//! documents as rate limits are read as `rate_limited`, and those it marks transient as
//! `service_unavailable`, so the queued retry tries them again later. WhatsApp's 131047
//! (more than 24 hours since the user last wrote: free text refused) is `outside_window`,
//! parked for replay (docs/channels.md, "WhatsApp's window and templates").

use hermes_net::failure::FailureReason;
use hermes_net::meta_errors::classify;

use crate::retry_policy::SendFailure;

/// `f` with its reason corrected from the body's `error.code` / `error.is_transient`
/// (`hermes_net::meta_errors`, which ingest reads `failed` statuses with too).
pub fn reclassify(mut f: SendFailure) -> SendFailure {
    if f.reason != FailureReason::InvalidRecipient {
        return f;
    }
    let Some(error) = f
        .body
        .as_deref()
        .and_then(|b| serde_json::from_str::<serde_json::Value>(b).ok())
        .and_then(|v| v.get("error").cloned())
    else {
        return f;
    };
    let code = error.get("code").and_then(serde_json::Value::as_i64);
    let transient = error
        .get("is_transient")
        .and_then(serde_json::Value::as_bool)
        == Some(true);
    f.reason = classify(code, transient);
    f
}

#[cfg(test)]
mod tests {
    use reqwest::StatusCode;

    use super::*;

    fn failure(body: &str) -> SendFailure {
        SendFailure {
            reason: FailureReason::InvalidRecipient,
            status: Some(StatusCode::BAD_REQUEST),
            body: Some(body.into()),
            detail: "answered 400".into(),
            tries: 1,
        }
    }

    #[test]
    fn meta_rate_limits_and_transient_errors_are_retried_later() {
        let r = |b: &str| reclassify(failure(b)).reason;
        assert_eq!(
            r(r#"{"error":{"message":"(#130429) Rate limit hit","code":130429}}"#),
            FailureReason::RateLimited
        );
        assert_eq!(r(r#"{"error":{"code":613}}"#), FailureReason::RateLimited);
        assert_eq!(
            r(r#"{"error":{"code":2,"is_transient":true}}"#),
            FailureReason::ServiceUnavailable
        );
        assert_eq!(
            r(r#"{"error":{"code":99,"is_transient":true}}"#),
            FailureReason::ServiceUnavailable
        );
        // A recipient Meta refuses stays refused.
        assert_eq!(
            r(
                r#"{"error":{"message":"Recipient phone number not in allowed list","code":131030}}"#
            ),
            FailureReason::InvalidRecipient
        );
        assert_eq!(r("not json"), FailureReason::InvalidRecipient);
        // Free text after the 24-hour window.
        assert_eq!(
            r(
                r#"{"error":{"message":"(#131047) Re-engagement message","type":"OAuthException","code":131047,"error_data":{"messaging_product":"whatsapp","details":"Message failed to send because more than 24 hours have passed since the customer last replied to this number."}}}"#
            ),
            FailureReason::OutsideWindow
        );
    }
}
