//! The retention sweeper (`docs/security.md`, "What is stored where, and for how long"):
//! every `HERMES_RETENTION_SWEEP_SECS` a router removes the rows past their family's
//! retention (`hermes_db::retention`), counts them in `hermes_retention_removed_total`, and
//! logs what it did. With several routers, one sweeps and the others yield each round.

use hermes_db::retention;
use hermes_runtime::Ctx;

/// Rows deleted per transaction: small, so no batch holds locks for long.
pub const BATCH: i64 = 500;

/// Sweep until `ctx.stop`.
pub async fn run(ctx: Ctx) {
    let mut every = crate::periodic::ticker(ctx.config.router.retention.sweep_every);
    while crate::periodic::next(&ctx, &mut every).await {
        let sweep = tokio::select! {
            _ = ctx.stop.cancelled() => return,
            sweep = retention::sweep(&ctx.db, &ctx.config.router.retention, BATCH) => sweep,
        };
        let m = &ctx.metrics;
        match sweep {
            Ok(swept) => {
                for (table, rows) in &swept.removed {
                    m.process
                        .retention_removed
                        .with_label_values(&[table.as_str()])
                        .inc_by(*rows);
                    tracing::info!(
                        table = table.as_str(),
                        rows,
                        "retention: expired rows removed"
                    );
                }
                let outcome = if swept.yielded { "yielded" } else { "done" };
                m.process
                    .retention_sweeps
                    .with_label_values(&[outcome])
                    .inc();
            }
            Err(e) => {
                m.process
                    .retention_sweeps
                    .with_label_values(&["failed"])
                    .inc();
                tracing::warn!(error = %e, "retention sweep failed; trying again next round");
            }
        }
    }
}
