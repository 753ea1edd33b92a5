//! Accepting one normalized message, the same for every route: skip it if the platform
//! already delivered it, hold back a sender over their rate, hand it to the router with a
//! broker confirm, and only then remember its id. Redis trouble never refuses a message:
//! dedupe and rate limits fail open (counted), the router's unique index still guarantees
//! one run per platform message.

use std::time::Duration;

use hermes_cache::rate_limit::Verdict;
use hermes_runtime::http::ApiError;
use hermes_types::envelope::Envelope;
use hermes_types::ids::RunId;
use hermes_types::model::{FinishReason, Inbound, Reply};
use hermes_types::trace::TraceParent;
use redis::AsyncCommands;

use crate::AppState;

/// What the sender is told, once a minute at most, when over their inbound rate.
pub const SLOW_DOWN: &str =
    "You're sending messages faster than I can answer them. Please wait a moment and try again.";

/// What became of an accepted request's message.
#[derive(Debug, PartialEq, Eq)]
pub enum Accepted {
    /// Published to the router as this run.
    Routed(RunId),
    /// The platform delivered this message before; nothing new was created.
    Duplicate,
    /// The sender is over their rate; the message was not routed.
    RateLimited { retry_after: Duration },
}

/// Accept `inbound`; `Err` (503) only when the broker did not take it.
pub async fn accept(
    app: &AppState,
    inbound: Inbound,
    traceparent: Option<TraceParent>,
) -> Result<Accepted, ApiError> {
    let event = &inbound.event;
    let platform = event.platform;
    let m = &app.ctx.metrics;
    // One round trip: the dedupe check, then a token from the sender's bucket.
    let seen_key = event
        .external_message_id
        .as_deref()
        .map(|id| app.dedupe.key(platform, id));
    let bucket = format!("in:{}:{}", platform.as_str(), event.sender_id);
    let limit = app.ctx.config.inbound_rate_for(platform);
    match app
        .limiter
        .take_unless_seen(&bucket, limit, seen_key.as_deref())
        .await
    {
        Ok(Verdict::Allowed) => {}
        Ok(Verdict::Seen) => {
            m.ingest_messages
                .with_label_values(&[platform.as_str(), "duplicate"])
                .inc();
            return Ok(Accepted::Duplicate);
        }
        Ok(Verdict::Limited { retry_after }) => {
            m.ingest_messages
                .with_label_values(&[platform.as_str(), "rate_limited"])
                .inc();
            tracing::info!(
                platform = platform.as_str(),
                retry_after_ms = retry_after.as_millis() as u64,
                "sender over the inbound rate"
            );
            slow_down_once(app, &inbound, traceparent).await;
            return Ok(Accepted::RateLimited { retry_after });
        }
        Err(e) => {
            tracing::warn!(error = %e, "dedupe and rate limit unavailable; letting the message through")
        }
    }
    let run = RunId::new();
    let envelope = Envelope::new(
        run,
        Some(traceparent.unwrap_or_else(TraceParent::generate)),
        &inbound,
    );
    if let Err(e) = app.ctx.bus.publish(&envelope).await {
        m.ingest_messages
            .with_label_values(&[platform.as_str(), "unavailable"])
            .inc();
        tracing::error!(%run, error = %e, "inbound message not accepted by the broker");
        return Err(ApiError::unavailable(
            "the message could not be queued; retry shortly",
        ));
    }
    if let Some(id) = &event.external_message_id
        && let Err(e) = app.dedupe.remember(platform, id).await
    {
        tracing::warn!(error = %e, "cannot remember the message id; a redelivery will be caught by the router");
    }
    m.ingest_messages
        .with_label_values(&[platform.as_str(), "accepted"])
        .inc();
    // The router logs every run at info; here a line per message would double the volume.
    tracing::debug!(%run, platform = platform.as_str(), "message accepted");
    Ok(Accepted::Routed(run))
}

/// Tell a chat sender to slow down, once per minute per sender (the platform is still
/// answered 2xx so it does not retry). The REST channel answers 429 instead.
async fn slow_down_once(app: &AppState, inbound: &Inbound, traceparent: Option<TraceParent>) {
    let platform = inbound.event.platform;
    if matches!(
        platform,
        hermes_types::model::Platform::Rest | hermes_types::model::Platform::Api
    ) {
        return;
    }
    let key = app.ctx.cache.key(format_args!(
        "slowdown:{}:{}",
        platform.as_str(),
        inbound.event.sender_id
    ));
    let mut c = app.ctx.cache.conn();
    let first: Result<bool, _> = redis::cmd("SET")
        .arg(&key)
        .arg(1)
        .arg("NX")
        .arg("EX")
        .arg(60)
        .query_async(&mut c)
        .await;
    if !matches!(first, Ok(true)) {
        return;
    }
    let reply = Reply::notice(inbound.reply_to(), FinishReason::RateLimited, SLOW_DOWN);
    let env = Envelope::new(RunId::new(), traceparent, &reply);
    if let Err(e) = app.ctx.bus.publish(&env).await {
        tracing::warn!(error = %e, "cannot queue the slow-down reply");
        let _: Result<(), _> = c.del(&key).await;
    }
}
