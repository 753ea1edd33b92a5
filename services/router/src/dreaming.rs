//! The dreaming engine's schedule (docs/models-and-budgets.md, "The dreaming engine"): every
//! router replica looks, every `HERMES_DREAMING_CHECK_SECS`, for the users who talked in the
//! ISO week just over and have not dreamt about it, and queues one [`Dream`] for each to the
//! llm stage. The `user_dreams` row and the outbox message are written in one transaction,
//! and the row's key (user, week) is what makes a week dreamt once: a replica that looks
//! again, or at the same time, finds it taken. A week is only looked at while it is the
//! last one over: a fleet stopped for a whole week skips it rather than dream in a burst.

use chrono::{DateTime, Datelike, Duration as Days, TimeZone, Utc};
use hermes_db::{dreams, outbox};
use hermes_runtime::Ctx;
use hermes_types::envelope::Envelope;
use hermes_types::ids::{MessageId, RunId};
use hermes_types::model::Dream;
use hermes_types::stage::Outgoing;

use crate::periodic;

/// Users queued per transaction (the next round takes the rest at once).
const BATCH: i64 = 100;
/// Bits flipped in a user's id to name their dream of a week (with the week's start): the
/// same message id however often the week is queued, so the llm stage dreams it once.
const DREAM_ID: u128 = 0x6472_6561_6d00_0000_0000_0000_0000_0000;

/// Queue the dreams of each week as it ends, until `ctx.stop`; nothing when
/// `HERMES_DREAMING` is off.
pub async fn run(ctx: Ctx) {
    let settings = ctx.config.router.dreaming;
    if !settings.on {
        return;
    }
    let mut every = periodic::ticker(settings.check_every);
    while periodic::next(&ctx, &mut every).await {
        periodic::drain("dreaming", BATCH, || tick(&ctx, Utc::now())).await;
    }
}

/// Monday 00:00 UTC of the ISO week before the one `now` is in: the last week over.
pub fn last_week(now: DateTime<Utc>) -> DateTime<Utc> {
    let today = now.date_naive();
    let monday = today - Days::days(i64::from(today.weekday().num_days_from_monday()));
    let this_week = Utc.from_utc_datetime(&monday.and_hms_opt(0, 0, 0).unwrap_or_default());
    this_week - Days::days(7)
}

/// One round at `now`: queue the dreams of up to a batch of the last week's users, with
/// their rows, in one transaction. Returns how many it queued. `now` is a parameter so that
/// tests can drive the clock.
pub async fn tick(ctx: &Ctx, now: DateTime<Utc>) -> anyhow::Result<usize> {
    let week_start = last_week(now);
    let mut client = ctx.db.get().await?;
    let tx = client.transaction().await?;
    let due = dreams::queue_week(&tx, week_start, BATCH).await?;
    if due.is_empty() {
        return Ok(0);
    }
    let tier = ctx.config.router.dreaming.tier;
    let week_tag = week_start.timestamp() as u128;
    let messages: Vec<Outgoing> = due
        .iter()
        .map(|&(user_id, own_tier)| {
            let dream = Dream {
                user_id,
                week_start,
                tier: tier.unwrap_or(own_tier),
            };
            // No run: a dream answers no one, so its envelope names a run of its own.
            let mut env = Envelope::new(RunId::new(), None, &dream);
            env.id = MessageId::derived(user_id.as_uuid(), DREAM_ID ^ week_tag);
            Outgoing::from_envelope(&env)
        })
        .collect();
    outbox::enqueue(&tx, &messages).await?;
    tx.commit().await?;
    ctx.metrics
        .router
        .dreams
        .with_label_values(&["queued"])
        .inc_by(due.len() as u64);
    tracing::info!(users = due.len(), week = %week_start.format("%G-W%V"), "dreams queued");
    Ok(due.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_week_is_the_iso_week_before_this_one() {
        let at = |s: &str| DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc);
        // Saturday 2026-11-28: this week began Monday 2026-11-23, the last one on the 16th.
        assert_eq!(
            last_week(at("2026-11-28T15:00:00Z")),
            at("2026-11-16T00:00:00Z")
        );
        // Monday 00:00 is already the new week.
        assert_eq!(
            last_week(at("2026-11-23T00:00:00Z")),
            at("2026-11-16T00:00:00Z")
        );
        // Sunday 23:59 is still the old one.
        assert_eq!(
            last_week(at("2026-11-22T23:59:59Z")),
            at("2026-11-09T00:00:00Z")
        );
        // Across a year: Friday 2027-01-01 is in ISO week 2026-W53.
        let w = last_week(at("2027-01-01T12:00:00Z"));
        assert_eq!(w, at("2026-12-21T00:00:00Z"));
        assert_eq!(w.format("%G-W%V").to_string(), "2026-W52");
    }
}
