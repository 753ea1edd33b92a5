//! The metrics of delivery (docs/channels.md, "Delivery"): replies handed to their
//! destination, failed send attempts by reason, what platforms reported about our sends,
//! circuit breakers, the outbound rate gate, presence calls and agent wake webhooks.

use prometheus::{HistogramVec, IntCounterVec, IntGaugeVec, Registry};

use crate::metrics::{LATENCY, counter_vec, gauge_vec, histogram_vec};

/// Delivery's metric handles.
#[derive(Clone)]
pub struct DeliveryMetrics {
    /// Replies handed to their destination, by platform and outcome.
    pub replies: IntCounterVec,
    /// Failed outbound send attempts (each in-call try), by platform and failure reason.
    pub attempts: IntCounterVec,
    /// What the platforms reported about our sends (docs/channels.md, "Statuses"), by
    /// platform and status; `accepted` counts the sends whose platform named the message.
    pub statuses: IntCounterVec,
    /// Parts a platform reported failed after accepting them, by platform and what followed
    /// (`resent`, `parked`, `unknown` for a send whose reply was not kept).
    pub late_failures: IntCounterVec,
    /// 1 while the platform's circuit breaker is open, by platform.
    pub breaker_open: IntGaugeVec,
    /// Time a send waited at the outbound rate gate, by platform.
    pub rate_wait: HistogramVec,
    /// Presence calls while a run answers a chat message (WhatsApp's read receipt with the
    /// typing indicator, Telegram's typing action), by platform and outcome (`sent`, `failed`).
    pub chat_presence: IntCounterVec,
    /// Agent wake webhooks by outcome: delivered, retried, parked, refused.
    pub webhooks: IntCounterVec,
}

impl DeliveryMetrics {
    /// Register delivery's metrics in `r`.
    pub fn register(r: &Registry) -> Self {
        Self {
            replies: counter_vec(
                r,
                "hermes_deliveries_total",
                "Replies handed to their destination, by platform and outcome.",
                &["platform", "outcome"],
            ),
            attempts: counter_vec(
                r,
                "hermes_delivery_attempts_total",
                "Failed outbound send attempts (each in-call try), by platform and failure reason.",
                &["platform", "reason"],
            ),
            statuses: counter_vec(
                r,
                "hermes_delivery_statuses_total",
                "Statuses platforms reported for sent messages (accepted, sent, delivered, read, failed), by platform and status; each send's status counted once.",
                &["platform", "status"],
            ),
            late_failures: counter_vec(
                r,
                "hermes_delivery_late_failures_total",
                "Sent messages a platform reported failed after accepting them, by platform and what followed (resent, parked, unknown).",
                &["platform", "outcome"],
            ),
            breaker_open: gauge_vec(
                r,
                "hermes_delivery_breaker_open",
                "1 while the platform's circuit breaker is open (sends skipped), else 0.",
                &["platform"],
            ),
            rate_wait: histogram_vec(
                r,
                "hermes_delivery_rate_wait_seconds",
                "Time a send waited at the outbound rate gate, by platform.",
                &["platform"],
                LATENCY.to_vec(),
            ),
            chat_presence: counter_vec(
                r,
                "hermes_chat_presence_total",
                "Read receipts and typing indicators sent while a run answers, by platform and outcome (sent, failed).",
                &["platform", "outcome"],
            ),
            webhooks: counter_vec(
                r,
                "hermes_webhook_deliveries_total",
                "Agent wake webhooks by outcome (delivered, retried, parked, refused).",
                &["outcome"],
            ),
        }
    }
}
