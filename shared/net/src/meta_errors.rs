//! Meta's error codes (the Graph API, the WhatsApp Cloud API that 360dialog relays, and
//! Instagram) read as failure reasons. Meta reports throttling and its own transient trouble
//! with a code, as an HTTP 400 to a send or as a `failed` status of a message it first
//! accepted (docs/channels.md, "Failure reasons" and "Statuses"); the codes it documents as
//! rate limits are `rate_limited`, those it marks transient `service_unavailable`, and any
//! other code is a refusal of that message for good. The delivery stage (send answers) and
//! ingest (status webhooks) both read codes here, so the two never disagree.

use crate::failure::FailureReason;

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
