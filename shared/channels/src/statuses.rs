//! Delivery statuses a platform reports for messages we sent (docs/channels.md,
//! "Statuses"), in the one shape ingest records and applies whatever the platform: each
//! platform folder reads its own payload into [`StatusUpdate`].

use chrono::{DateTime, Utc};
use hermes_net::failure::FailureReason;
use hermes_types::model::Platform;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A delivery receipt for a message we sent.
#[derive(Clone, Debug, PartialEq)]
pub struct StatusUpdate {
    /// The platform that reported it.
    pub platform: Platform,
    /// The platform's id of the message we sent (WhatsApp's `wamid…`).
    pub platform_message_id: String,
    pub status: DeliveryStatus,
    /// Whom the message went to (WhatsApp: the number).
    pub recipient_id: Option<String>,
    pub occurred_at: DateTime<Utc>,
    /// The status's errors, as sent (failed deliveries), recorded verbatim.
    pub error: Option<Value>,
    /// The platform's code of the first error, read as a failed send's is.
    pub error_code: Option<i64>,
    /// The first error's title, at most [`MAX_ERROR_TITLE_CHARS`] characters.
    pub error_title: Option<String>,
}

impl StatusUpdate {
    /// Why the message this `failed` status names failed, read with its platform's table of
    /// codes as a failed send's are (Twilio's for SMS, Meta's for the others).
    pub fn failure_reason(&self) -> FailureReason {
        match self.platform {
            Platform::Sms => crate::twilio::errors::status_reason(self.error_code),
            _ => crate::meta::errors::classify(self.error_code, false),
        }
    }
}

/// The longest error title kept with a status.
pub const MAX_ERROR_TITLE_CHARS: usize = 200;

/// Where a sent message got to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeliveryStatus {
    Sent,
    Delivered,
    Read,
    Failed,
    /// Anything else the platform reports (WhatsApp's `deleted`, `warning`, new values).
    Other,
}

impl DeliveryStatus {
    /// The status a platform's word names; [`DeliveryStatus::Other`] for any other word.
    pub fn parse(s: Option<&str>) -> Self {
        match s {
            Some("sent") => DeliveryStatus::Sent,
            Some("delivered") => DeliveryStatus::Delivered,
            Some("read") => DeliveryStatus::Read,
            Some("failed") => DeliveryStatus::Failed,
            _ => DeliveryStatus::Other,
        }
    }

    /// The metric label of this status.
    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryStatus::Sent => "sent",
            DeliveryStatus::Delivered => "delivered",
            DeliveryStatus::Read => "read",
            DeliveryStatus::Failed => "failed",
            DeliveryStatus::Other => "other",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_name_statuses_and_labels_name_them_back() {
        for s in [
            DeliveryStatus::Sent,
            DeliveryStatus::Delivered,
            DeliveryStatus::Read,
            DeliveryStatus::Failed,
        ] {
            assert_eq!(DeliveryStatus::parse(Some(s.as_str())), s);
        }
        assert_eq!(
            DeliveryStatus::parse(Some("deleted")),
            DeliveryStatus::Other
        );
        assert_eq!(DeliveryStatus::parse(None), DeliveryStatus::Other);
    }
}
