//! WhatsApp's delivery receipts (`value.statuses[]` of a Cloud API webhook, docs/channels.md,
//! "Statuses"), read into [`StatusUpdate`]s: the `wamid`, the status word, and the code and
//! title of the first error in Meta's shape (`code`, `title`, `message`,
//! `error_data.details`).

use hermes_types::model::Platform;
use serde::Deserialize;
use serde_json::Value;

use crate::fields::{from_unix_seconds, lenient_i64};
use crate::limits::short_field;
use crate::statuses::{DeliveryStatus, MAX_ERROR_TITLE_CHARS, StatusUpdate};

/// One item of `statuses[]`, as much as is read of it.
#[derive(Deserialize)]
pub(super) struct RawStatus {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    status: Option<String>,
    #[serde(default, deserialize_with = "lenient_i64")]
    timestamp: Option<i64>,
    #[serde(default)]
    recipient_id: Option<String>,
    #[serde(default)]
    errors: Option<Value>,
}

/// The status one item reports; `None` when it does not name the message.
pub(super) fn status(s: RawStatus) -> Option<StatusUpdate> {
    let error = s
        .errors
        .filter(|e| !matches!(e, Value::Null) && e.as_array().is_none_or(|a| !a.is_empty()));
    let (error_code, error_title) = first_error(error.as_ref());
    Some(StatusUpdate {
        platform: Platform::Whatsapp,
        platform_message_id: short_field(s.id)?,
        status: DeliveryStatus::parse(s.status.as_deref()),
        recipient_id: short_field(s.recipient_id),
        occurred_at: from_unix_seconds(s.timestamp),
        error,
        error_code,
        error_title,
    })
}

/// The code and title of a status's first error (`errors[0]`, or the value itself when it
/// is not an array).
fn first_error(errors: Option<&Value>) -> (Option<i64>, Option<String>) {
    let Some(first) = errors.and_then(|e| e.get(0).or(Some(e))) else {
        return (None, None);
    };
    let code = first.get("code").and_then(Value::as_i64);
    let title = first
        .get("title")
        .or_else(|| first.get("message"))
        .and_then(Value::as_str)
        .map(|t| t.chars().take(MAX_ERROR_TITLE_CHARS).collect());
    (code, title)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::whatsapp::parse;

    #[test]
    fn the_first_error_of_metas_shape_is_read() {
        let errors = serde_json::json!([{
            "code": 131026,
            "title": "Message undeliverable",
            "message": "Message undeliverable",
            "error_data": {"details": "Message Undeliverable."}
        }]);
        assert_eq!(
            first_error(Some(&errors)),
            (Some(131026), Some("Message undeliverable".into()))
        );
        let bare = serde_json::json!({"code": 1, "message": "m"});
        assert_eq!(first_error(Some(&bare)), (Some(1), Some("m".into())));
        assert_eq!(first_error(None), (None, None));
        let long = serde_json::json!([{"title": "é".repeat(1000)}]);
        let (_, title) = first_error(Some(&long));
        assert_eq!(title.unwrap().chars().count(), MAX_ERROR_TITLE_CHARS);
    }

    /// Meta's published shape of a `failed` status: its error read (131000, "Something went
    /// wrong"), where the 24-hour window's status carries 131047.
    #[test]
    fn a_failed_status_from_metas_payload_carries_its_code_and_title() {
        let body = include_str!("../../tests/fixtures/whatsapp/status_failed.json");
        let batch = parse(body.as_bytes()).unwrap();
        let s = &batch.statuses[0];
        assert_eq!(s.status, DeliveryStatus::Failed);
        assert_eq!(
            (s.error_code, s.error_title.as_deref()),
            (Some(131000), Some("Something went wrong"))
        );
        let window = include_str!("../../tests/fixtures/whatsapp/statuses.json");
        let batch = parse(window.as_bytes()).unwrap();
        assert_eq!(batch.statuses[3].error_code, Some(131047));
    }
}
