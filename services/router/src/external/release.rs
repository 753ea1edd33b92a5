//! Held runs released (docs/agents.md, "BUSY pauses the dispatcher"): a run assigned to an
//! external agent while it was BUSY or OFFLINE waits, unwoken and out of its inbox, until the
//! agent is ONLINE again (a heartbeat, `hermes agents set --status ONLINE`). Then it is
//! released: woken as a first wake (a new `webhook_deliveries` row and an `agent_wake`
//! message in the outbox), or, for a pull-only agent, simply listed in its inbox. A run whose
//! deadline passes while held expires like any other (`expiry`).

use hermes_db::agents;
use hermes_db::inbox::{self, due};
use hermes_runtime::Ctx;
use hermes_types::envelope::Envelope;

/// One batch: release the held runs whose agent is ONLINE again and queue their wakes.
/// Returns how many.
pub async fn sweep(ctx: &Ctx) -> anyhow::Result<usize> {
    let mut client = ctx.db.get().await?;
    let tx = client.transaction().await?;
    let released = due::take_released(&tx, ctx.config.router.agent_presence, super::BATCH).await?;
    if released.is_empty() {
        return Ok(0);
    }
    let mut wakes = Vec::with_capacity(released.len());
    for r in released.iter().filter(|r| r.woken) {
        // A run whose record cannot make a wake is left to its inbox and its deadline.
        let wake = match super::rewake::wake_of(&r.rewake) {
            Ok(wake) => wake,
            Err(e) => {
                tracing::error!(run_id = %r.rewake.due.run.id, error = %format!("{e:#}"), "cannot build the released run's wake");
                continue;
            }
        };
        agents::owe_wake(
            &tx,
            wake.delivery_id,
            r.rewake.due.run.id,
            wake.agent_id,
            wake.event,
        )
        .await?;
        wakes.push(Envelope::new(r.rewake.due.run.id, None, &wake));
    }
    inbox::enqueue(&tx, &wakes).await?;
    tx.commit().await?;
    for r in &released {
        let agent = r.rewake.due.profile_key.as_str();
        ctx.metrics
            .agents
            .held_runs
            .with_label_values(&[agent, "released"])
            .inc();
        tracing::info!(
            run_id = %r.rewake.due.run.id,
            agent,
            woken = r.woken,
            "agent ONLINE again: its held run released"
        );
    }
    Ok(released.len())
}
