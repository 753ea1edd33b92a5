//! The spans of one message in a stage (docs/tracing.md, "The span tree of one message"):
//! the log span every line of the message carries (`run_id`, `message_id`, `trace_id`,
//! `span_id`), and, for traces only, the consumer span that continues the envelope's
//! `traceparent`, with the queue wait as an attribute and the commit as a child. The
//! messages the stage sends carry the consumer span as their parent, so each stage's span
//! hangs under the one before it; a redelivered or retried copy continues the same trace,
//! never a new root. A message whose trace is not sampled gets no consumer span, and
//! nothing made while the stage handles it is traced (docs/tracing.md, "Sampling").

use chrono::Utc;
use tracing::Span;
use tracing::field::Empty;

use hermes_bus::Stage;
use hermes_telemetry::trace::{TARGET, adopt, follows_unsampled};
use hermes_types::envelope::Envelope;
use hermes_types::trace::TraceParent;

/// The spans of one message in a stage.
pub(super) struct Spans {
    /// The span every log line of the message carries.
    pub log: Span,
    /// The consumer span; none when tracing is off or the message's trace is dropped.
    pub consumer: Span,
    /// Whether every span of the message would be dropped: the stage handles it inside
    /// [`hermes_telemetry::trace::untraced`].
    pub dropped: bool,
}

/// The log span and the consumer span of `env`, which from now on carries the consumer
/// span as its `traceparent` (when tracing is on) so the stage's next messages follow it.
pub(super) fn spans(stage: Stage, queue: &str, env: &mut Envelope, deliveries: u32) -> Spans {
    let stage = stage.as_str();
    let log = tracing::info_span!(
        "message",
        stage,
        run_id = %env.run_id,
        message_id = %env.id,
        trace_id = Empty,
        span_id = Empty,
    );
    let dropped = follows_unsampled(env.traceparent.as_ref());
    let consumer = if dropped {
        // Dropped whatever it would hold: no span, only the ids a span of this stage would
        // have, for the log and the next stage (docs/tracing.md, "Sampling").
        let own = env.traceparent.as_ref().map(TraceParent::child);
        if let Some(own) = &own {
            log.record("span_id", own.parent_id());
        }
        env.traceparent = own;
        Span::none()
    } else {
        let consumer = consumer_span(stage, queue, env, deliveries);
        if let Some(own) = adopt(&consumer, env.traceparent.as_ref()) {
            log.record("span_id", own.parent_id());
            env.traceparent = Some(own);
        }
        consumer
    };
    if let Some(tp) = &env.traceparent {
        log.record("trace_id", tp.trace_id());
    }
    Spans {
        log,
        consumer,
        dropped,
    }
}

/// The consumer span of `env`, with its messaging attributes.
fn consumer_span(stage: &str, queue: &str, env: &Envelope, deliveries: u32) -> Span {
    // Enqueue to start: the envelope is made when its stage commits or ingest accepts it.
    let wait_ms = (Utc::now() - env.created_at).num_milliseconds().max(0);
    tracing::info_span!(
        target: TARGET,
        "process",
        otel.name = %format!("process {queue}"),
        otel.kind = "consumer",
        otel.status_code = Empty,
        messaging.system = "rabbitmq",
        messaging.operation.type = "process",
        messaging.operation.name = "process",
        messaging.destination.name = queue,
        messaging.consumer.group.name = stage,
        messaging.message.id = %env.id,
        messaging.message.body.size = Empty,
        hermes.stage = stage,
        hermes.run_id = %env.run_id,
        hermes.message.kind = ?env.kind,
        hermes.queue.wait_ms = wait_ms,
        hermes.deliveries = i64::from(deliveries),
        hermes.attempt = i64::from(env.attempt),
        hermes.outcome = Empty,
    )
}

/// What became of the message, on its consumer span; a parked message is an error.
pub(super) fn finish(consumer: &Span, outcome: &str, size: usize) {
    consumer.record("hermes.outcome", outcome);
    consumer.record("messaging.message.body.size", size as i64);
    if outcome == "rejected" {
        consumer.record("otel.status_code", "ERROR");
    }
}

/// The span of the transaction that commits a message's effects and next messages.
pub(super) fn commit_span(stage: Stage, grouped: bool) -> Span {
    tracing::info_span!(
        target: TARGET,
        "commit",
        otel.name = "COMMIT",
        otel.kind = "client",
        db.system.name = "postgresql",
        db.operation.name = "COMMIT",
        hermes.stage = stage.as_str(),
        hermes.commit.grouped = grouped,
    )
}
