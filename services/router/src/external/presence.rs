//! Presence expires (docs/agents.md, "When an external run ends"): an external agent with no
//! 2xx to a wake and no heartbeat for `HERMES_AGENT_PRESENCE_SECS` is marked OFFLINE, counted
//! and logged. Dispatch already passes such an agent over before this runs (it reads the same
//! silence); marking it makes `hermes agents list` and the alerts say so. A 2xx to a wake or a
//! heartbeat brings it back ONLINE.

use hermes_db::agents;
use hermes_runtime::Ctx;

/// One batch: mark the silent agents OFFLINE. Returns how many.
pub async fn sweep(ctx: &Ctx) -> anyhow::Result<usize> {
    let mut client = ctx.db.get().await?;
    let tx = client.transaction().await?;
    let silent =
        agents::expire_presence(&tx, ctx.config.router.agent_presence, super::BATCH).await?;
    if silent.is_empty() {
        return Ok(0);
    }
    tx.commit().await?;
    for a in &silent {
        ctx.metrics
            .agents
            .presence_expired
            .with_label_values(&[a.profile_key.as_str()])
            .inc();
        tracing::warn!(
            agent = a.profile_key,
            agent_id = %a.id,
            workspace_id = %a.workspace_id,
            last_heartbeat_at = ?a.last_heartbeat_at,
            "external agent silent past the presence window: marked OFFLINE"
        );
    }
    Ok(silent.len())
}
