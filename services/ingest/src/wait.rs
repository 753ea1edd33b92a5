//! Waiting for a run's outcome on behalf of an HTTP caller: read the run's event stream
//! when woken (or on a backstop tick); when Redis is unavailable, read the run row in
//! PostgreSQL instead, which delivery closes with the same outcome.

use std::time::{Duration, Instant};

use hermes_cache::run_events::{RunEvent, RunEvents, WaiterGuard};
use hermes_db::runs::{self, RunStatus};
use hermes_runtime::Ctx;
use hermes_types::ids::RunId;
use hermes_types::model::{FailureCode, Outcome};

/// Backstop poll when no wake-up arrives (a lost pub/sub message costs at most this).
pub(crate) const BACKSTOP: Duration = Duration::from_millis(500);

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
    loop {
        match events.read_after(run, &last).await {
            Ok(batch) => {
                for (id, event) in batch {
                    last = id;
                    if let RunEvent::Final { outcome } = event {
                        return Some(outcome);
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
            return None;
        }
        tokio::select! {
            _ = guard.notify.notified() => {}
            _ = tokio::time::sleep(BACKSTOP.min(deadline - now)) => {}
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
        }),
        RunStatus::Failed => Some(Outcome::Failed {
            code: FailureCode::parse(row.error_code.as_deref().unwrap_or_default()),
            message: row.output_text.unwrap_or_default(),
        }),
        _ => None,
    }
}
