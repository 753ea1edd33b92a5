//! What Slack's refusals mean. The Web API answers most of them with HTTP 200 and
//! `{"ok": false, "error": "<code>"}` (<https://api.slack.com/web#evaluating_responses>),
//! so the status alone does not say; a rate limit is a 429 with `Retry-After`
//! (<https://api.slack.com/apis/rate-limits>), which the in-call retry honours like any
//! platform's. Each code is read as the failure reason the queued retry and the parking
//! queue go by: a bad token is `unauthorized`, a gone or closed conversation
//! `invalid_recipient` (both parked at once, with the code in the failure's detail), a
//! `ratelimited` or server-side error retried later.

use hermes_net::failure::FailureReason;
use reqwest::StatusCode;
use serde_json::Value;

use crate::SendFailure;

/// A refusal the sender answers in its own way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The message to update is gone (deleted).
    MessageNotFound,
    /// The message can no longer be updated (not the bot's, or too old).
    CantUpdateMessage,
    /// The workspace's edit window for the message has closed.
    EditWindowClosed,
}

impl Refusal {
    /// Slack's code of it.
    fn code(self) -> &'static str {
        match self {
            Refusal::MessageNotFound => "message_not_found",
            Refusal::CantUpdateMessage => "cant_update_message",
            Refusal::EditWindowClosed => "edit_window_closed",
        }
    }
}

/// The failure reason of Slack's `error` code.
pub fn classify(code: &str) -> FailureReason {
    match code {
        "not_authed"
        | "invalid_auth"
        | "account_inactive"
        | "token_revoked"
        | "token_expired"
        | "no_permission"
        | "missing_scope"
        | "not_allowed_token_type"
        | "ekm_access_denied"
        | "team_access_not_granted"
        | "access_denied"
        | "org_login_required" => FailureReason::Unauthorized,
        "ratelimited" | "rate_limited" => FailureReason::RateLimited,
        "internal_error" | "fatal_error" | "service_unavailable" | "request_timeout" => {
            FailureReason::ServiceUnavailable
        }
        _ => FailureReason::InvalidRecipient,
    }
}

/// Slack's answer `answer` (to a request it answered 2xx), or the failure its `ok: false`
/// names, which `on_failure` sees too.
pub(super) fn check(
    answer: Value,
    mut on_failure: impl FnMut(FailureReason),
) -> Result<Value, SendFailure> {
    if answer.get("ok").and_then(Value::as_bool) == Some(true) {
        return Ok(answer);
    }
    let code = answer
        .get("error")
        .and_then(Value::as_str)
        .unwrap_or("no ok in the answer");
    let code: String = code.chars().take(100).collect();
    let reason = classify(&code);
    on_failure(reason);
    Err(SendFailure {
        reason,
        status: Some(StatusCode::OK),
        body: Some(answer.to_string().chars().take(2000).collect()),
        detail: format!("Slack answered ok: false, error {code}"),
        tries: 1,
    })
}

/// Whether Slack refused a request with `refusal`.
pub fn refused(f: &SendFailure, refusal: Refusal) -> bool {
    f.reason == FailureReason::InvalidRecipient
        && f.detail.ends_with(&format!("error {}", refusal.code()))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn codes_are_read_as_reasons() {
        assert_eq!(classify("invalid_auth"), FailureReason::Unauthorized);
        assert_eq!(classify("missing_scope"), FailureReason::Unauthorized);
        assert_eq!(classify("ratelimited"), FailureReason::RateLimited);
        assert_eq!(
            classify("internal_error"),
            FailureReason::ServiceUnavailable
        );
        assert_eq!(
            classify("channel_not_found"),
            FailureReason::InvalidRecipient
        );
        assert_eq!(classify("is_archived"), FailureReason::InvalidRecipient);
    }

    #[test]
    fn an_ok_false_answer_is_a_failure_naming_its_code() {
        let ok = json!({"ok": true, "ts": "1.000001"});
        assert_eq!(check(ok.clone(), |_| {}).unwrap(), ok);
        let mut seen = Vec::new();
        let f = check(json!({"ok": false, "error": "not_in_channel"}), |r| {
            seen.push(r)
        })
        .unwrap_err();
        assert_eq!(f.reason, FailureReason::InvalidRecipient);
        assert_eq!(f.detail, "Slack answered ok: false, error not_in_channel");
        assert_eq!(seen, [FailureReason::InvalidRecipient]);
        let f = check(json!({"ok": false, "error": "message_not_found"}), |_| {}).unwrap_err();
        assert!(refused(&f, Refusal::MessageNotFound));
        assert!(!refused(&f, Refusal::CantUpdateMessage));
        let f = check(Value::Null, |_| {}).unwrap_err();
        assert_eq!(f.reason, FailureReason::InvalidRecipient);
    }
}
