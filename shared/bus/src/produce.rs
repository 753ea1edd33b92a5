//! The producer span of a publish (docs/tracing.md, "The span tree of one message"), by
//! OpenTelemetry's messaging conventions: `send {queue}`, `messaging.system = rabbitmq`, the
//! exchange, routing key and message id. Inside a stage it is a child of the stage's
//! consumer span; published by a relay (no span around it), it continues the trace the
//! outbox row carries.

use tracing::Span;
use tracing::field::Empty;

use hermes_telemetry::trace::{TARGET, adopt, follows_unsampled, traceparent_of};
use hermes_types::stage::Outgoing;
use hermes_types::trace::TraceParent;

/// The span of publishing `msg` to `exchange` with `routing_key` (`label` names its queue).
pub(crate) fn span(exchange: &str, routing_key: &str, label: &str, msg: &Outgoing) -> Span {
    let outside = traceparent_of(&Span::current()).is_none();
    let parent = if outside {
        msg.traceparent.as_deref().and_then(TraceParent::parse)
    } else {
        None
    };
    // A relay's publish of a message whose trace is not sampled would be dropped whatever it
    // held (docs/tracing.md, "Sampling"); inside a stage, the trace layer's filter decides.
    if follows_unsampled(parent.as_ref()) {
        return Span::none();
    }
    let span = tracing::info_span!(
        target: TARGET,
        "send",
        otel.name = %format!("send {label}"),
        otel.kind = "producer",
        otel.status_code = Empty,
        messaging.system = "rabbitmq",
        messaging.operation.type = "send",
        messaging.operation.name = "publish",
        messaging.destination.name = exchange,
        messaging.rabbitmq.destination.routing_key = routing_key,
        messaging.message.id = %msg.message_id,
        messaging.message.body.size = msg.body.len() as i64,
        error.type = Empty,
    );
    if outside {
        adopt(&span, parent.as_ref());
    }
    span
}

/// A publish the broker did not confirm is an error of its span.
pub(crate) fn finish<E: std::fmt::Display>(span: &Span, result: &Result<(), E>, outcome: &str) {
    if result.is_err() {
        span.record("otel.status_code", "ERROR");
        span.record("error.type", outcome);
    }
}
