//! A parked message ends its run (docs/architecture.md, poison is parked): the run is not
//! left open with its caller waiting, its credit spent and an agent's slot taken. A message
//! parked on its way to an answer (router, llm, tools) sends the run a failure reply through
//! the delivery stage, which closes the run as failed, refunds its credit once and tells the
//! caller or chat, like any failed run. A reply that could not be delivered closes its run
//! here, as failed, with its refund: there is nobody left to tell.
//! A reply queued only to be parked because its platform reported a part failed after
//! accepting it (docs/channels.md, statuses) fails its run too, though the run was answered.
//!
//! A wake that could not be delivered does not end its run when the run waits for its
//! external agent until a reply deadline (docs/agents.md, "When an external run ends"): the
//! wake is only a nudge and the agent's inbox is the truth, so the agent may still pull the
//! run, and the deadline ends it with a fallback reply to the user and a refund if it does
//! not (an answered run is closed by delivery with its answer). Only a wake of a run with
//! no deadline (dispatched by an older build) closes its run here, as before.
//!
//! The failure reply's id is derived from the parked message's, so parking two copies of one
//! message sends one reply. If the run cannot be ended now (PostgreSQL or the broker away),
//! the stuck-run sweeper ends it later.

use hermes_db::events::{self, EventKind, NewEvent};
use hermes_db::{credits, delivery_sends, inbox, runs};
use hermes_types::envelope::{Envelope, MessageKind};
use hermes_types::ids::MessageId;
use hermes_types::model::{FailureCode, Inbound, LlmRequest, Outcome, Reply, ToolRequest};

use crate::context::Ctx;

/// What the user is told when their message could not be processed.
pub const PARKED_TEXT: &str =
    "Sorry, something went wrong with this message and I couldn't answer it. Please try again.";

/// Bits flipped in a parked message's id to name its failure reply (stable, so two copies
/// of one parked message make one reply).
const FAILURE_REPLY_ID: u128 = 0x7061_726b_6564_2d72_6570_6c79_0000_0001;

/// End `env`'s run because `env` was parked. Best effort: a run this cannot end is left to
/// the sweeper, and the message is parked either way.
/// `why` names the failure (a `FailureReason`, `poison` or `delivery_limit`).
pub(super) async fn end_run(ctx: &Ctx, env: &Envelope, why: &str) {
    let result = match env.kind {
        MessageKind::Inbound => match env.payload::<Inbound>() {
            Ok(inbound) => {
                reply(
                    ctx,
                    env,
                    Reply::failed(inbound.reply_to(), FailureCode::Invalid, PARKED_TEXT),
                )
                .await
            }
            Err(e) => Err(e.into()),
        },
        MessageKind::LlmRequest => match env.payload::<LlmRequest>() {
            Ok(req) => reply(ctx, env, failed(req)).await,
            Err(e) => Err(e.into()),
        },
        MessageKind::ToolRequest => match env.payload::<ToolRequest>() {
            Ok(tr) => reply(ctx, env, failed(tr.request)).await,
            Err(e) => Err(e.into()),
        },
        MessageKind::Reply => close(ctx, env, why).await,
        MessageKind::AgentWake => leave_to_deadline(ctx, env).await,
        // Memory extraction follows a closed run: nothing is open.
        MessageKind::MemoryExtract => Ok(()),
        // A draft that could not be shown: the run's answer still comes as its reply.
        MessageKind::DraftUpdate => Ok(()),
    };
    if let Err(e) = result {
        tracing::error!(error = %format!("{e:#}"), "cannot end the parked message's run now; the stuck-run sweeper will");
    }
}

fn failed(req: LlmRequest) -> Reply {
    Reply {
        exchange: req.exchange,
        ..Reply::failed(req.reply_to, FailureCode::Invalid, PARKED_TEXT)
    }
}

/// Queue the run's failure reply for the delivery stage (confirmed by the broker).
async fn reply(ctx: &Ctx, parked: &Envelope, reply: Reply) -> anyhow::Result<()> {
    let mut env = parked.follow(&reply);
    env.id = MessageId::from(uuid::Uuid::from_u128(
        parked.id.as_uuid().as_u128() ^ FAILURE_REPLY_ID,
    ));
    ctx.bus.publish(&env).await?;
    tracing::warn!(run_id = %parked.run_id, "message parked: its run gets a failure reply");
    Ok(())
}

/// A parked wake: a run with a reply deadline is left to its agent's pull and its
/// deadline (answered, delivery closes it; unanswered, the expiry sweeper does); a run with
/// none is closed as failed.
async fn leave_to_deadline(ctx: &Ctx, env: &Envelope) -> anyhow::Result<()> {
    let client = ctx.db.get().await?;
    if let Some(deadline) = inbox::deadline_of(&client, env.run_id).await? {
        tracing::warn!(run_id = %env.run_id, %deadline, "agent wake parked: the run stays in the agent's inbox until its reply deadline");
        return Ok(());
    }
    drop(client);
    close(ctx, env, "wake_parked").await
}

/// Close the run as failed and refund it, when its reply (or a wake of a run with no reply
/// deadline) is what was parked. A reply given up on is a `delivery_failed` event for
/// operators (docs/operator-mcp.md, events), written with the close.
async fn close(ctx: &Ctx, env: &Envelope, why: &str) -> anyhow::Result<()> {
    let mut client = ctx.db.get().await?;
    let tx = client.transaction().await?;
    let outcome = Outcome::Failed {
        code: FailureCode::Invalid,
        message: PARKED_TEXT.into(),
    };
    let mut closed = runs::finish(&tx, env.run_id, &outcome, None).await?;
    // A part the platform reported failed after the run was answered (docs/channels.md,
    // statuses): the answered run fails now, with the usual refund and event.
    if !closed
        && env.kind == MessageKind::Reply
        && let Some((reason, detail)) = delivery_sends::park_reason(&tx, env.id).await?
    {
        let detail = detail.unwrap_or(reason);
        closed = runs::fail_after_answer(&tx, env.run_id, &detail).await?;
    }
    let refunded = closed && credits::refund(&tx, env.run_id).await?;
    if closed
        && env.kind == MessageKind::Reply
        && let Ok(reply) = env.payload::<Reply>()
    {
        let to = &reply.reply_to;
        let event = NewEvent {
            platform: Some(to.platform),
            chat_id: Some(&to.chat_id),
            ..NewEvent::of_run(
                EventKind::DeliveryFailed,
                env.run_id,
                serde_json::json!({ "reason": why, "message_id": env.id }),
            )
        };
        events::record(&tx, &event).await?;
    }
    tx.commit().await?;
    if closed {
        tracing::warn!(run_id = %env.run_id, refunded, "undeliverable message parked: its run closed as failed");
    }
    Ok(())
}
