//! Re-wakes (docs/agents.md, "When an external run ends"): a run its agent has not
//! acknowledged is woken again after each delay of `HERMES_AGENT_REWAKE_DELAYS`, counted
//! from its previous wake, while its reply deadline is ahead. A re-wake is a wake like the
//! first: a new `webhook_deliveries` row (so a new `X-Forge-Delivery` id: it is a new nudge,
//! not a retry of the old one) and an `agent_wake` message in the outbox, with the first
//! wake's payload rebuilt from the run.

use hermes_db::agents;
use hermes_db::inbox::{self, due};
use hermes_runtime::Ctx;
use hermes_types::agent::{CONTRACT_VERSION, Dispatch, WakeEvent};
use hermes_types::envelope::Envelope;
use hermes_types::ids::DeliveryId;
use hermes_types::model::{AgentWake, MessageEvent};

/// One batch: take the runs due for a re-wake, owe each a wake and queue it. Returns how many.
pub async fn sweep(ctx: &Ctx) -> anyhow::Result<usize> {
    let mut client = ctx.db.get().await?;
    let tx = client.transaction().await?;
    let due = due::take_rewakes(&tx, &ctx.config.router.agent_rewake_delays, super::BATCH).await?;
    if due.is_empty() {
        return Ok(0);
    }
    let mut wakes = Vec::with_capacity(due.len());
    for r in &due {
        // A run whose record cannot make a wake keeps its count (so it is not taken again
        // each tick) and is left to its deadline; the agent can still pull it.
        let wake = match wake_of(r) {
            Ok(wake) => wake,
            Err(e) => {
                tracing::error!(run_id = %r.due.run.id, error = %format!("{e:#}"), "cannot rebuild the run's wake; not woken again");
                continue;
            }
        };
        agents::owe_wake(
            &tx,
            wake.delivery_id,
            r.due.run.id,
            wake.agent_id,
            wake.event,
        )
        .await?;
        wakes.push(Envelope::new(r.due.run.id, None, &wake));
    }
    inbox::enqueue(&tx, &wakes).await?;
    tx.commit().await?;
    for r in &due {
        let agent = r.due.profile_key.as_str();
        ctx.metrics.agents.rewakes.with_label_values(&[agent]).inc();
        tracing::info!(
            run_id = %r.due.run.id,
            agent,
            wake = r.due.run.wakes + 1,
            "external run not acknowledged: woken again"
        );
    }
    Ok(due.len())
}

/// The wake of a run due again: the first wake's payload, rebuilt from the run (the message
/// as recorded, its media references included, and the event its platform gives).
pub fn wake_of(r: &due::Rewake) -> anyhow::Result<AgentWake> {
    let run = &r.due.run;
    let dispatch: Dispatch = serde_json::from_value(
        run.dispatch
            .clone()
            .ok_or_else(|| anyhow::anyhow!("run {} has no dispatch record", run.id))?,
    )?;
    let engagement_mode = run.engagement_mode.unwrap_or_default();
    Ok(AgentWake {
        delivery_id: DeliveryId::new(),
        agent_id: run.agent_id,
        profile_key: r.due.profile_key.clone(),
        event: WakeEvent::of_run(run.platform),
        dispatch,
        engagement_mode,
        contract_version: run
            .contract_version
            .clone()
            .unwrap_or_else(|| CONTRACT_VERSION.into()),
        tool_allowlist: r.tool_allowlist.clone(),
        message: MessageEvent {
            platform: run.platform,
            sender_id: run.sender_id.clone(),
            chat_id: run.chat_id.clone(),
            text: run.input_text.clone(),
            media: r.media.clone(),
            external_message_id: r.external_message_id.clone(),
            sender_name: None,
            received_at: run.created_at,
            metadata: r.metadata.clone(),
        },
    })
}
