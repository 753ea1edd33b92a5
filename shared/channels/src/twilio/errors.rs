//! Twilio's error codes (<https://www.twilio.com/docs/api/errors>) read as failure reasons
//! (docs/channels.md, "Failure reasons"), for a refused send (the REST API's JSON `code`) and
//! for a message Twilio accepted and later reported `failed` or `undelivered` (the status
//! callback's `ErrorCode`), so the two never disagree. Throttling (its own or a carrier's) is
//! `rate_limited`, trouble on Twilio's or the network's side `service_unavailable`, both
//! retried later; a recipient who opted out is `opted_out` and bad credentials
//! `unauthorized`, parked; any other code refuses that message for good.

use hermes_net::failure::FailureReason;

use crate::SendFailure;

/// Too many requests (20429), the account's send rate (14107), the queue overflowing
/// (30001), US A2P 10DLC throughput and daily caps (30022, 30023).
pub const RATE_LIMIT_CODES: [i64; 5] = [20429, 14107, 30001, 30022, 30023];
/// Internal error and service unavailable (20500, 20503), handset unreachable for now
/// (30003), unknown carrier error (30008), carrier congestion (30017).
pub const TRANSIENT_CODES: [i64; 5] = [20500, 20503, 30003, 30008, 30017];
/// The recipient sent `STOP` (21610: "Attempt to send to unsubscribed recipient").
pub const OPTED_OUT_CODE: i64 = 21610;
/// Authentication failed (20003), account not active (20005), account suspended (30002).
pub const ACCOUNT_CODES: [i64; 3] = [20003, 20005, 30002];

/// The reason of Twilio's error `code`; `None` for a code this table does not name.
pub fn classify(code: i64) -> Option<FailureReason> {
    if code == OPTED_OUT_CODE {
        Some(FailureReason::OptedOut)
    } else if RATE_LIMIT_CODES.contains(&code) {
        Some(FailureReason::RateLimited)
    } else if TRANSIENT_CODES.contains(&code) {
        Some(FailureReason::ServiceUnavailable)
    } else if ACCOUNT_CODES.contains(&code) {
        Some(FailureReason::Unauthorized)
    } else {
        None
    }
}

/// The reason of a message Twilio reported failed with `code`: a named code's, else refused
/// for good (the message was Twilio's to deliver and it could not).
pub fn status_reason(code: Option<i64>) -> FailureReason {
    code.and_then(classify)
        .unwrap_or(FailureReason::InvalidRecipient)
}

/// A failed send `f` with its reason read from the body's `code` where the table names it
/// (a 400 that is Twilio's rate limit is retried, a 400 for an unsubscribed number parked
/// as `opted_out`).
pub fn reclassify(mut f: SendFailure) -> SendFailure {
    let error = f
        .body
        .as_deref()
        .and_then(|b| serde_json::from_str::<serde_json::Value>(b).ok());
    let Some(code) = error
        .as_ref()
        .and_then(|v| v.get("code").and_then(serde_json::Value::as_i64))
    else {
        return f;
    };
    if let Some(reason) = classify(code) {
        f.reason = reason;
    }
    // The code and Twilio's words go with the parked message, for the operator.
    let message = error
        .as_ref()
        .and_then(|v| v.get("message").and_then(serde_json::Value::as_str))
        .unwrap_or_default();
    let message: String = message.chars().take(200).collect();
    f.detail = format!("{} (Twilio error {code}: {message})", f.detail);
    f
}

#[cfg(test)]
mod tests {
    use reqwest::StatusCode;

    use super::*;

    fn failure(status: u16, body: &str) -> SendFailure {
        let status = StatusCode::from_u16(status).unwrap();
        SendFailure {
            reason: FailureReason::from_status(status).unwrap(),
            status: Some(status),
            body: Some(body.into()),
            detail: format!("answered {status}"),
            tries: 1,
        }
    }

    #[test]
    fn twilios_codes_are_retried_or_parked_with_their_reason() {
        let r = |s, b: &str| reclassify(failure(s, b)).reason;
        // The REST API's error shape.
        assert_eq!(
            r(
                400,
                r#"{"code": 21610, "message": "Attempt to send to unsubscribed recipient", "more_info": "https://www.twilio.com/docs/errors/21610", "status": 400}"#
            ),
            FailureReason::OptedOut
        );
        assert_eq!(
            r(429, r#"{"code": 20429, "message": "Too Many Requests"}"#),
            FailureReason::RateLimited
        );
        assert_eq!(r(400, r#"{"code": 14107}"#), FailureReason::RateLimited);
        assert_eq!(r(401, r#"{"code": 20003}"#), FailureReason::Unauthorized);
        assert_eq!(
            r(
                400,
                r#"{"code": 21211, "message": "The 'To' number is not a valid phone number."}"#
            ),
            FailureReason::InvalidRecipient
        );
        assert_eq!(r(503, "<html>"), FailureReason::ServiceUnavailable);
        let f = reclassify(failure(
            400,
            r#"{"code": 21211, "message": "Invalid 'To' Phone Number"}"#,
        ));
        assert!(
            f.detail
                .contains("Twilio error 21211: Invalid 'To' Phone Number"),
            "{}",
            f.detail
        );
        assert!(FailureReason::OptedOut.is_permanent());
    }

    #[test]
    fn a_failed_status_is_read_with_the_same_table() {
        assert_eq!(
            status_reason(Some(30003)),
            FailureReason::ServiceUnavailable
        );
        assert_eq!(status_reason(Some(30001)), FailureReason::RateLimited);
        assert_eq!(status_reason(Some(21610)), FailureReason::OptedOut);
        assert_eq!(status_reason(Some(30007)), FailureReason::InvalidRecipient);
        assert_eq!(status_reason(None), FailureReason::InvalidRecipient);
    }
}
