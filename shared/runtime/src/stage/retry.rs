//! The retry schedule of a failed send to a peer outside the fleet ([`StageError::Retry`],
//! docs/architecture.md, "4. Poison is parked, never looped"): the message waits in the
//! stage's next wait queue and comes back with the same id and `attempt + 1`; when the
//! schedule is used up, or the failure is permanent, it is parked with its failure reason in
//! the headers and its stage told. The new copy is confirmed by the broker before the
//! original is acked, so nothing is lost in between.
//!
//! [`StageError::Retry`]: super::StageError::Retry

use std::time::Duration;

use hermes_alerts::AlertKind;
use hermes_bus::{BusError, Outgoing, delay_label};
use hermes_net::failure::{FailureReason, scrub};
use hermes_types::envelope::Envelope;

use super::park::{self, ParkCause};
use super::{Disposition, FAILURE_DETAIL_HEADER, FAILURE_REASON_HEADER, Handler};
use crate::context::Ctx;

/// Send a failed message to wait for its next attempt, or park it with its reason. The
/// original is acked only once the broker confirmed the copy; if the copy cannot be placed
/// (broker trouble, parking queue full) the original is requeued and nothing is lost.
pub(super) async fn later<H: Handler>(
    ctx: &Ctx,
    handler: &H,
    env: &Envelope,
    reason: FailureReason,
    error: &anyhow::Error,
) -> Disposition {
    let stage = H::STAGE;
    let detail = scrub(&format!("{error:#}"));
    let delays: &[Duration] = if stage.retries_later() {
        &ctx.config.bus.retry_delays
    } else {
        &[]
    };
    let next_delay = usize::try_from(env.attempt)
        .ok()
        .and_then(|i| delays.get(i))
        .filter(|_| !reason.is_permanent());
    let names = ctx.bus.names();
    match next_delay {
        Some(&delay) => {
            let queue = names.wait(stage, delay);
            let mut again = env.clone();
            again.attempt += 1;
            match ctx
                .bus
                .publish_to("", &queue, &queue, &Outgoing::from_envelope(&again))
                .await
            {
                Ok(()) => {
                    let label = delay_label(delay);
                    ctx.metrics
                        .bus
                        .retries
                        .with_label_values(&[stage.as_str(), &label])
                        .inc();
                    tracing::warn!(%reason, error = %detail, attempt = again.attempt, delay = %label, "send failed; retrying later");
                    Disposition::Ack("retry_scheduled")
                }
                Err(e) => {
                    tracing::error!(%reason, error = %e, queue, "cannot schedule the retry; requeueing");
                    pause_then_requeue().await
                }
            }
        }
        None => {
            let queue = names.parking(stage);
            let headers = [
                (FAILURE_REASON_HEADER, reason.as_str()),
                (FAILURE_DETAIL_HEADER, detail.as_str()),
            ];
            match ctx
                .bus
                .publish_with_headers(
                    &names.dead_exchange(),
                    stage.as_str(),
                    &queue,
                    &Outgoing::from_envelope(env),
                    &headers,
                )
                .await
            {
                Ok(()) => {
                    tracing::error!(%reason, error = %detail, attempt = env.attempt, queue, "send failed for good; message parked");
                    park::tell(ctx, handler, env, ParkCause::SendFailed(reason)).await;
                    Disposition::Ack("parked")
                }
                Err(e) => {
                    if matches!(e, BusError::Nacked { .. }) {
                        ctx.metrics
                            .bus
                            .parking_rejected
                            .with_label_values(&[&queue])
                            .inc();
                        ctx.alerts.raise(
                            AlertKind::ParkingQueueFull,
                            &queue,
                            format!("parking queue {queue} is full and refused a message; it stays in its work queue until the parking queue is drained (`hermes dlq`)"),
                        );
                    }
                    tracing::error!(alert = true, %reason, error = %e, queue, "cannot park the message (parking queue full?); it stays in its queue");
                    pause_then_requeue().await
                }
            }
        }
    }
}

/// Requeue after a short pause so a full parking queue or a broker hiccup is not hammered.
async fn pause_then_requeue() -> Disposition {
    tokio::time::sleep(Duration::from_secs(1)).await;
    Disposition::Requeue
}
