//! The approvals' timekeeper (docs/operator-mcp.md, approvals): every
//! `HERMES_APPROVAL_SWEEP_SECS` it denies as `timed_out` each call nobody answered within
//! `HERMES_APPROVAL_TIMEOUT` (and at once each call of a run asked to stop), which resumes
//! its round; sets `hermes_approvals_pending` and `hermes_approval_oldest_pending_seconds`;
//! and raises an `approval_waiting` alert when the oldest call has waited longer than
//! `HERMES_ALERT_APPROVAL_WAIT`.
//!
//! Every tools replica runs it: an answer is taken once whatever the number of replicas
//! (`hermes_db::approvals`, module doc), and the alert is deduplicated across replicas.

use hermes_db::approvals::{self, Answered};
use hermes_runtime::Ctx;
use hermes_telemetry::AlertKind;
use hermes_types::duration::duration_label;

/// Most calls timed out in one pass; the rest wait for the next.
const BATCH: i64 = 100;

/// Sweep until `ctx.stop`.
pub async fn run(ctx: Ctx) {
    let every = ctx.config.tools.approvals.sweep_every;
    loop {
        if let Err(e) = pass(&ctx).await {
            tracing::warn!(error = %e, "approval sweep failed; trying again at the next one");
        }
        tokio::select! {
            _ = ctx.stop.cancelled() => return,
            _ = tokio::time::sleep(every) => {}
        }
    }
}

/// One pass: time out, then measure what still waits.
async fn pass(ctx: &Ctx) -> anyhow::Result<()> {
    for answered in approvals::time_out(&ctx.db, BATCH).await? {
        if let Answered::Decided { approval, resumed } = answered {
            tracing::info!(
                approval = %approval.id,
                run = %approval.run_id,
                tool = approval.tool,
                status = approval.status.as_str(),
                resumed,
                "approval answered by the sweeper"
            );
        }
    }
    let (pending, oldest) = {
        let client = ctx.db.get().await?;
        approvals::pending_stats(&client).await?
    };
    let m = &ctx.metrics.operator;
    m.approvals_pending.set(pending);
    m.approval_oldest.set(oldest);
    let threshold = ctx.config.alerts.approval_wait;
    if pending > 0 && oldest > threshold.as_secs_f64() {
        ctx.alerts.raise(
            AlertKind::ApprovalWaiting,
            "oldest",
            format!(
                "{pending} tool call(s) wait for an operator's approval; the oldest for {:.0} s (alert above {}): see `hermes approvals list`",
                oldest,
                duration_label(threshold)
            ),
        );
    }
    Ok(())
}
