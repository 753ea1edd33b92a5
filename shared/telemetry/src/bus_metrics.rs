//! The metrics of the bus (docs/architecture.md#12-observability): the connection to
//! RabbitMQ, publishes and their confirms, consumed messages by outcome, the sampled depth
//! and consumers of each queue, delayed retries, and what a full parking queue refused.

use prometheus::{Histogram, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Registry};

use crate::metrics::{LATENCY, counter, counter_vec, gauge, gauge_vec, histogram};

/// The bus's metric handles.
#[derive(Clone)]
pub struct BusMetrics {
    /// 1 while connected to RabbitMQ.
    pub connected: IntGauge,
    /// Successful reconnections after a lost connection.
    pub reconnects: IntCounter,
    /// Publishes by target queue and outcome.
    pub published: IntCounterVec,
    /// Time from publish to broker confirm.
    pub publish_duration: Histogram,
    /// Consumed messages by queue and outcome.
    pub messages: IntCounterVec,
    /// Messages ready in each queue (work and parking), sampled.
    pub queue_messages: IntGaugeVec,
    /// Consumers attached to each work queue, sampled.
    pub queue_consumers: IntGaugeVec,
    /// Messages sent to a wait queue before a retry, by stage and delay.
    pub retries: IntCounterVec,
    /// Messages a full parking queue refused (they stay where they were), by queue.
    pub parking_rejected: IntCounterVec,
}

impl BusMetrics {
    /// Register the bus's metrics in `r`.
    pub fn register(r: &Registry) -> Self {
        Self {
            connected: gauge(r, "hermes_bus_connected", "1 while connected to RabbitMQ."),
            reconnects: counter(
                r,
                "hermes_bus_reconnects_total",
                "Successful reconnections to RabbitMQ after a lost connection.",
            ),
            published: counter_vec(
                r,
                "hermes_bus_published_total",
                "Publishes by target queue and outcome (confirmed, nacked, unroutable, error).",
                &["queue", "outcome"],
            ),
            publish_duration: histogram(
                r,
                "hermes_bus_publish_duration_seconds",
                "Time from publish to broker confirm.",
                LATENCY,
            ),
            messages: counter_vec(
                r,
                "hermes_bus_messages_total",
                "Consumed messages by queue and outcome (acked, duplicate, requeued, rejected, parked, retry_scheduled; ack_lost when the ack could not be sent and the broker will redeliver).",
                &["queue", "outcome"],
            ),
            queue_messages: gauge_vec(
                r,
                "hermes_queue_messages",
                "Messages ready in each queue (work and parking), sampled.",
                &["queue"],
            ),
            queue_consumers: gauge_vec(
                r,
                "hermes_queue_consumers",
                "Consumers attached to each work queue, sampled.",
                &["queue"],
            ),
            retries: counter_vec(
                r,
                "hermes_delivery_retries_total",
                "Messages sent to wait before a queued retry, by stage and delay (wait-queue label).",
                &["stage", "delay"],
            ),
            parking_rejected: counter_vec(
                r,
                "hermes_parking_rejected_total",
                "Messages a full parking queue refused (they stay where they were), by queue.",
                &["queue"],
            ),
        }
    }
}
