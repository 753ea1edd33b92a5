//! Runs past their reply deadline (docs/agents.md, "When an external run ends"): the run's
//! reply is claimed (so the agent's late answer finds the run ended) and the fallback reply
//! queued in the same transaction. Delivery sends it to the user's chat or the API caller,
//! closes the run `expired` and refunds its credit once, like any failed reply; the agent's
//! slot frees with the run, since capacity counts open runs only.

use hermes_db::inbox::{self, due};
use hermes_runtime::Ctx;
use hermes_types::envelope::Envelope;
use hermes_types::ids::MessageId;
use hermes_types::model::{FailureCode, Reply};

/// What the user (or API caller) is told when the agent did not answer in time.
pub const EXPIRED_TEXT: &str = "Sorry, the agent didn't answer your message in time, so \
    you haven't been charged for it. Please try again later.";

/// Bits flipped in an expired run's id to name its fallback reply: one reply per run,
/// however often it is queued.
const EXPIRED_REPLY_ID: u128 = 0x6578_7069_7265_642d_7265_706c_7900_0001;

/// The fallback reply of an expired run, its envelope named after the run.
pub fn fallback(run: &inbox::ExternalRun) -> Envelope {
    let reply = Reply {
        exchange: run.exchange(),
        draft_id: run.open_draft,
        ..Reply::failed(run.reply_to(), FailureCode::Expired, EXPIRED_TEXT)
    };
    let mut env = Envelope::new(run.id, None, &reply);
    env.id = MessageId::derived(run.id.as_uuid(), EXPIRED_REPLY_ID);
    env
}

/// One batch: claim the expired runs' replies and queue their fallbacks. Returns how many.
pub async fn sweep(ctx: &Ctx) -> anyhow::Result<usize> {
    let mut client = ctx.db.get().await?;
    let tx = client.transaction().await?;
    let expired = due::claim_expired(&tx, super::BATCH).await?;
    if expired.is_empty() {
        return Ok(0);
    }
    let replies: Vec<Envelope> = expired.iter().map(|d| fallback(&d.run)).collect();
    inbox::enqueue(&tx, &replies).await?;
    tx.commit().await?;
    for d in &expired {
        ctx.metrics
            .agents
            .runs
            .with_label_values(&[d.profile_key.as_str(), "expired"])
            .inc();
        tracing::warn!(
            run_id = %d.run.id,
            agent = d.profile_key,
            wakes = d.run.wakes,
            acked = d.run.acked_at.is_some(),
            "external run past its reply deadline: fallback reply queued, the run ends expired"
        );
    }
    Ok(expired.len())
}
