//! Bursts (docs/channels.md, bursts): with `HERMES_BURST_QUIET_MS` set, a chat message is
//! not routed at once. The router's commit holds it in PostgreSQL (with its processed-message
//! record, so the broker's message is acked only once it is held), and every router replica
//! runs a sweeper that claims conversations whose quiet window passed (or whose first held
//! message waited `HERMES_BURST_MAX_WAIT_MS`) with `SKIP LOCKED`, and queues their messages
//! as one inbound message in the outbox, in one transaction: texts joined in order, the
//! media of all, the first message's run id and platform message id, so the burst is one
//! run, charged once, deduplicated like one message. A crash inside the window leaves the
//! messages held for any replica; a crash after the claim leaves the turn to the relay.

use std::time::Duration;

use hermes_db::bursts::{self, Burst, Hold};
use hermes_db::{DbError, Transaction, outbox};
use hermes_runtime::Ctx;
use hermes_types::envelope::Envelope;
use hermes_types::model::Inbound;
use hermes_types::stage::Outgoing;
use hermes_types::trace::TraceParent;

use crate::periodic;

/// Conversations claimed per transaction (the next round takes the rest at once).
const BATCH: i64 = 100;

/// How often released messages past their keep are pruned, in ticks of the sweeper (about
/// every ten minutes with bursts on, every twenty hours with them off).
const PRUNE_EVERY: u32 = 2400;

/// Whether `inbound` waits in its conversation's quiet window: bursts are on and it is a
/// message that may be held ([`holdable`]).
pub fn holds(ctx: &Ctx, inbound: &Inbound) -> bool {
    ctx.config.router.bursts.on() && holdable(inbound)
}

/// Whether `inbound` may be held: a chat message, not a burst already routed as one turn, nor
/// a scheduled job's run, nor a Discord slash command, which is a request of its own
/// awaiting its own answer on its interaction (merged, the others would never be answered).
fn holdable(inbound: &Inbound) -> bool {
    inbound.event.platform.is_chat()
        && inbound.burst.is_none()
        && inbound.job.is_none()
        && inbound.interaction.is_none()
}

/// The conversation a message belongs to: one sender in one chat (a group member's burst is
/// their own, as their session is).
fn conversation(inbound: &Inbound) -> String {
    let e = &inbound.event;
    format!("{}:{}:{}", e.platform.as_str(), e.chat_id, e.sender_id)
}

/// Hold `env`'s message in `tx` (the router's commit); false for a duplicate platform
/// message already held.
pub async fn hold(
    env: &Envelope,
    inbound: &Inbound,
    tx: &Transaction<'_>,
) -> Result<bool, DbError> {
    let traceparent = env.traceparent.as_ref().map(|t| t.to_string());
    let conversation = conversation(inbound);
    bursts::hold(
        tx,
        &Hold {
            message_id: env.id,
            conversation: &conversation,
            platform: inbound.event.platform,
            sender_id: &inbound.event.sender_id,
            external_message_id: inbound.event.external_message_id.as_deref(),
            run_id: env.run_id,
            inbound: &env.payload,
            traceparent: traceparent.as_deref(),
        },
    )
    .await
}

/// One turn of a burst's messages: the first message with every text joined in order (one
/// per line) and the media of all.
pub fn combine(mut held: Vec<Inbound>) -> Option<Inbound> {
    if held.is_empty() {
        return None;
    }
    let count = u32::try_from(held.len()).unwrap_or(u32::MAX);
    let rest = held.split_off(1);
    let mut turn = held.pop()?;
    let mut texts: Vec<String> = turn.event.text.take().into_iter().collect();
    for m in rest {
        texts.extend(m.event.text);
        turn.event.media.extend(m.event.media);
    }
    texts.retain(|t| !t.trim().is_empty());
    turn.event.text = (!texts.is_empty()).then(|| texts.join("\n"));
    turn.burst = Some(count);
    Some(turn)
}

/// The one message a burst is routed as: the first message's run and trace.
fn turn_of(burst: &Burst) -> Option<Envelope> {
    let first = burst.messages.first()?;
    let held: Vec<Inbound> = burst
        .messages
        .iter()
        .filter_map(|m| match serde_json::from_value::<Inbound>(m.inbound.clone()) {
            Ok(i) => Some(i),
            Err(e) => {
                tracing::error!(error = %e, message_id = %m.message_id, "a held message does not decode; left out of its burst");
                None
            }
        })
        .collect();
    let turn = combine(held)?;
    let trace = first.traceparent.as_deref().and_then(TraceParent::parse);
    Some(Envelope::new(first.run_id, trace, &turn))
}

/// The sweeper's pause between rounds: a quarter of the quiet window, within 50 ms and 1 s.
fn tick_of(quiet: Duration) -> Duration {
    (quiet / 4).clamp(Duration::from_millis(50), Duration::from_secs(1))
}

/// How often a router with bursts off looks for messages held while they were on (a
/// replica that held them, stopped, or a setting turned off since), to route them at once.
const OFF_TICK: Duration = Duration::from_secs(30);

/// The windows a sweep applies: the configured ones, or none while bursts are off, so that
/// messages held before are routed at once, not left behind.
fn windows(ctx: &Ctx) -> (Duration, Duration) {
    let settings = ctx.config.router.bursts;
    if settings.on() {
        (settings.quiet, settings.max_wait)
    } else {
        (Duration::ZERO, Duration::ZERO)
    }
}

/// Route due bursts until `ctx.stop`.
pub async fn run(ctx: Ctx) {
    let settings = ctx.config.router.bursts;
    let pause = if settings.on() {
        tick_of(settings.quiet)
    } else {
        OFF_TICK
    };
    let mut every = periodic::ticker(pause);
    let mut ticks = 0u32;
    while periodic::next(&ctx, &mut every).await {
        periodic::drain("due bursts", BATCH, || tick(&ctx)).await;
        ticks = ticks.wrapping_add(1);
        if ticks.is_multiple_of(PRUNE_EVERY)
            && let Ok(c) = ctx.db.get().await
            && let Err(e) = bursts::prune(&c).await
        {
            tracing::warn!(error = %e, "cannot prune released burst messages");
        }
    }
}

/// One round: claim the due conversations and queue each burst as one turn, in one
/// transaction. Returns how many conversations it claimed.
pub async fn tick(ctx: &Ctx) -> anyhow::Result<usize> {
    let (quiet, max_wait) = windows(ctx);
    let mut client = ctx.db.get().await?;
    let tx = client.transaction().await?;
    let due = bursts::claim_due(&tx, quiet, max_wait, BATCH).await?;
    if due.is_empty() {
        return Ok(0);
    }
    let turns: Vec<Outgoing> = due
        .iter()
        .filter_map(turn_of)
        .map(|env| Outgoing::from_envelope(&env))
        .collect();
    outbox::enqueue(&tx, &turns).await?;
    tx.commit().await?;
    ctx.metrics
        .router
        .bursts
        .with_label_values(&["routed"])
        .inc_by(turns.len() as u64);
    tracing::info!(bursts = turns.len(), "bursts routed as one turn each");
    Ok(due.len())
}

#[cfg(test)]
mod tests {
    use hermes_types::model::{MessageEvent, Platform};

    use super::*;

    fn message(text: Option<&str>, id: &str) -> Inbound {
        Inbound::of(MessageEvent {
            platform: Platform::Whatsapp,
            sender_id: "1".into(),
            chat_id: "1".into(),
            text: text.map(str::to_string),
            media: Vec::new(),
            external_message_id: Some(id.into()),
            sender_name: None,
            received_at: chrono::Utc::now(),
            metadata: None,
        })
    }

    #[test]
    fn a_burst_is_one_turn_with_every_text_in_order_keyed_by_its_first_message() {
        let turn = combine(vec![
            message(Some("first"), "a"),
            message(None, "b"),
            message(Some("third"), "c"),
        ])
        .unwrap();
        assert_eq!(turn.event.text.as_deref(), Some("first\nthird"));
        assert_eq!(turn.event.external_message_id.as_deref(), Some("a"));
        assert_eq!(turn.burst, Some(3));
        assert!(combine(Vec::new()).is_none());
    }

    #[test]
    fn a_discord_command_is_never_held() {
        use hermes_types::model::{Interaction, InteractionToken};
        let mut m = message(Some("hi"), "a");
        assert!(holdable(&m));
        m.interaction = Some(Interaction::received(
            "1",
            InteractionToken::new("t"),
            chrono::Utc::now(),
        ));
        assert!(!holdable(&m));
    }

    #[test]
    fn the_sweeper_ticks_within_bounds() {
        assert_eq!(
            tick_of(Duration::from_millis(40)),
            Duration::from_millis(50)
        );
        assert_eq!(tick_of(Duration::from_secs(2)), Duration::from_millis(500));
        assert_eq!(tick_of(Duration::from_secs(60)), Duration::from_secs(1));
    }
}
