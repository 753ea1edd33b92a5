//! Waiting for a run's outcome on behalf of an HTTP caller: read the run's event stream
//! when woken (by the run's last event alone, for a caller that registered for it) or on a
//! backstop tick. The run row in PostgreSQL, which delivery closes with
//! the same outcome, is the truth behind the stream (docs/architecture.md#5-what-redis-may-lose): it is read
//! when Redis is unavailable, every few backstop ticks that bring no final event (a lost
//! append, a Redis restart), and once more before the caller is told the run timed out.

use std::time::{Duration, Instant};

use hermes_cache::run_events::{RunEvent, RunEvents, WaiterGuard, Wake};
use hermes_db::runs::{self, RunStatus};
use hermes_runtime::Ctx;
use hermes_types::ids::RunId;
use hermes_types::model::{FailureCode, Outcome};

/// Backstop poll when no wake-up arrives (a lost pub/sub message costs at most this).
pub(crate) const BACKSTOP: Duration = Duration::from_millis(500);
/// Every this many backstop ticks without a final event, the run row is read too: a final
/// event that never reached the stream costs a caller at most this many ticks.
const ROW_EVERY_TICKS: u32 = 4;

/// Wait until the run ends or `timeout` passes (`None`).
pub async fn outcome(
    ctx: &Ctx,
    events: &RunEvents,
    guard: WaiterGuard,
    run: RunId,
    timeout: Duration,
) -> Option<Outcome> {
    let deadline = Instant::now() + timeout;
    let mut last = "0".to_string();
    let mut quiet = QuietTicks::default();
    // A waiter for the last event was registered before its run's message was published:
    // the stream is empty until a wake-up (or a backstop tick) says otherwise, so it is read
    // once, when the run ends.
    let mut read = guard.wake == Wake::Every;
    loop {
        let batch = if read {
            events.read_after(run, &last).await
        } else {
            Ok(Vec::new())
        };
        read = true;
        match batch {
            Ok(batch) => {
                for (id, event) in batch {
                    last = id;
                    match event {
                        RunEvent::Final { outcome } => return Some(outcome),
                        // The outcome was too large for the stream: the row holds it.
                        RunEvent::Closed => {
                            if let Some(o) = from_row(ctx, run).await {
                                return Some(o);
                            }
                        }
                        _ => {}
                    }
                }
            }
            Err(e) => {
                tracing::debug!(%run, error = %e, "run stream unreadable; checking the run row");
                if let Some(o) = from_row(ctx, run).await {
                    return Some(o);
                }
            }
        }
        let now = Instant::now();
        if now >= deadline {
            return from_row(ctx, run).await;
        }
        tokio::select! {
            _ = guard.notify.notified() => {}
            _ = tokio::time::sleep(BACKSTOP.min(deadline - now)) => {
                if let Some(o) = quiet.tick(ctx, run).await {
                    return Some(o);
                }
            }
        }
    }
}

/// Backstop ticks that brought no final event; every [`ROW_EVERY_TICKS`] of them the run
/// row is read, in case the final event never reaches the stream.
#[derive(Default)]
pub(crate) struct QuietTicks(u32);

impl QuietTicks {
    /// Count one quiet tick; the run's outcome when this tick read a closed row.
    pub(crate) async fn tick(&mut self, ctx: &Ctx, run: RunId) -> Option<Outcome> {
        self.0 += 1;
        if self.0.is_multiple_of(ROW_EVERY_TICKS) {
            from_row(ctx, run).await
        } else {
            None
        }
    }
}

/// The run's outcome from its row in PostgreSQL (`None` while it is still open), for when
/// the event stream in Redis cannot be read.
pub(crate) async fn from_row(ctx: &Ctx, run: RunId) -> Option<Outcome> {
    let client = ctx.db.get().await.ok()?;
    let row = runs::get(&client, run).await.ok()??;
    match row.status {
        RunStatus::Completed => Some(Outcome::Answered {
            text: row.output_text.unwrap_or_default(),
            model: row.model.unwrap_or_default(),
            usage: row.usage,
            finish_reason: hermes_types::model::FinishReason::Stop,
            tools_used: row.tools_used,
            transcript: row.transcript,
        }),
        RunStatus::Failed | RunStatus::Cancelled | RunStatus::Expired => Some(Outcome::Failed {
            code: FailureCode::parse(row.error_code.as_deref().unwrap_or_default()),
            message: row.output_text.unwrap_or_default(),
        }),
        _ => None,
    }
}
