//! Meta's error codes (the Graph API, the WhatsApp Cloud API that 360dialog relays, and
//! Instagram) read as failure reasons
//! (<https://developers.facebook.com/docs/graph-api/guides/error-handling>,
//! <https://developers.facebook.com/docs/whatsapp/cloud-api/support/error-codes>). Meta reports
//! throttling and its own transient trouble with a code, as an HTTP 400 to a send (which the
//! status alone would call a refused recipient and park for good) or as a `failed` status of
//! a message it first accepted (docs/channels.md, "Failure reasons" and "Statuses"). The codes
//! it documents as rate limits are `rate_limited`, those it marks transient
//! `service_unavailable`, so the queued retry tries them again later; WhatsApp's 131047 (more
//! than 24 hours since the user last wrote: free text refused) is `outside_window`, parked for
//! replay (docs/channels.md, "WhatsApp's window and templates"); any other code refuses that
//! message for good. Sends ([`reclassify`]) and status webhooks ([`classify`]) both read codes
//! here, so the two never disagree.

use hermes_net::failure::FailureReason;

use crate::SendFailure;

/// Application, account and pair rate limits (Graph API 4, 17, 32, 613; WhatsApp 80007,
/// 130429 throughput, 131048 spam rate, 131056 pair rate).
pub const RATE_LIMIT_CODES: [i64; 8] = [4, 17, 32, 613, 80007, 130429, 131048, 131056];
/// Unknown error, service temporarily unavailable, and WhatsApp's "service unavailable".
pub const TRANSIENT_CODES: [i64; 3] = [1, 2, 131000];
/// Re-engagement message: the customer-service window is closed.
pub const OUTSIDE_WINDOW_CODE: i64 = 131047;

/// The reason of a Meta error with `code` (if any), `transient` when Meta marked it
/// `is_transient`: `outside_window` (131047: the chat's 24-hour window closed),
/// `rate_limited`, `service_unavailable`, or `invalid_recipient` for good.
pub fn classify(code: Option<i64>, transient: bool) -> FailureReason {
    if code == Some(OUTSIDE_WINDOW_CODE) {
        FailureReason::OutsideWindow
    } else if code.is_some_and(|c| RATE_LIMIT_CODES.contains(&c)) {
        FailureReason::RateLimited
    } else if transient || code.is_some_and(|c| TRANSIENT_CODES.contains(&c)) {
        FailureReason::ServiceUnavailable
    } else {
        FailureReason::InvalidRecipient
    }
}

/// A refused send `f` with its reason corrected from the body's `error.code` /
/// `error.is_transient` by [`classify`].
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
    fn rate_limits_and_transient_codes_are_retryable_others_are_not() {
        assert_eq!(classify(Some(130429), false), FailureReason::RateLimited);
        assert_eq!(
            classify(Some(131000), false),
            FailureReason::ServiceUnavailable
        );
        assert_eq!(classify(Some(99), true), FailureReason::ServiceUnavailable);
        assert_eq!(
            classify(Some(131026), false),
            FailureReason::InvalidRecipient
        );
        assert_eq!(classify(None, false), FailureReason::InvalidRecipient);
        assert!(!classify(Some(131056), false).is_permanent());
        assert_eq!(classify(Some(131047), false), FailureReason::OutsideWindow);
        assert!(classify(Some(131047), false).is_permanent());
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
