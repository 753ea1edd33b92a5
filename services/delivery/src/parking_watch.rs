//! Watches the depth of every parking queue and alerts ops when one holds more than
//! `HERMES_ALERT_PARKING_ABOVE` messages: parked messages wait for a person
//! (`hermes dlq`), and a queue that fills up (5,000) starts refusing new ones. The depth is
//! read by passive declaration and also kept in `hermes_queue_messages{queue}`.

use std::time::Duration;

use hermes_alerts::AlertKind;
use hermes_bus::{PARKING_MAX_LENGTH, Stage};
use hermes_runtime::Ctx;

/// How often the parking queues are looked at.
const EVERY: Duration = Duration::from_secs(5);

/// Check the parking queues every [`EVERY`] until `ctx.stop`.
pub async fn run(ctx: Ctx) {
    let threshold = ctx.config.alerts.parking_threshold;
    loop {
        for stage in Stage::ALL {
            let queue = ctx.bus.names().parking(stage);
            let Ok((depth, _)) = ctx.bus.queue_stats(&queue).await else {
                continue;
            };
            ctx.metrics
                .bus
                .queue_messages
                .with_label_values(&[&queue])
                .set(i64::from(depth));
            if depth > threshold {
                ctx.alerts.raise(
                    AlertKind::ParkingQueueGrowth,
                    &queue,
                    format!(
                        "parking queue {queue} holds {depth} messages (alert above {threshold}, full at {PARKING_MAX_LENGTH}): see `hermes dlq list --queue {queue}`"
                    ),
                );
            }
        }
        tokio::select! {
            _ = ctx.stop.cancelled() => return,
            _ = tokio::time::sleep(EVERY) => {}
        }
    }
}
