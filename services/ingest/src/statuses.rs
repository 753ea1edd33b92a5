//! Delivery statuses a platform reports for messages we sent (docs/channels.md, "Statuses";
//! read from the platform's payload by its folder of `hermes_channels`, WhatsApp's
//! `statuses[]` today): recorded against the outbound message id, never routed to a
//! model, and applied to the send they name (`platform_sends`): sent → delivered → read,
//! never backwards. A `failed` status of a message the platform first accepted (Meta's
//! `failed`, Twilio's `failed` or `undelivered`) is a failed send: its error code is read like
//! a send's (`StatusUpdate::failure_reason`: `hermes_channels::meta::errors`, or
//! `hermes_channels::twilio::errors`); a code worth
//! retrying sends that part again through the delivery stage (a reply naming only that part,
//! queued in the outbox), at most as many times as the delivery retry schedule has delays,
//! and anything else parks the reply with its reason, which fails its run. Each status is
//! one transaction, and only the status that moves a send acts, so a redelivered webhook
//! changes nothing twice.

use hermes_channels::statuses::{DeliveryStatus, StatusUpdate};
use hermes_db::outbox;
use hermes_db::platform_sends::{self, Again, Moved, Reported, SendStatus};
use hermes_db::{DbError, Transaction};
use hermes_runtime::Ctx;
use hermes_types::envelope::Envelope;
use hermes_types::model::Reply;
use hermes_types::stage::Outgoing;

/// What followed a part reported failed after its send was accepted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LateFailure {
    /// Sent again through the delivery stage.
    Resent,
    /// Its reply parked with the reason; the run fails.
    Parked,
    /// The send's reply was not kept (another platform, or older than its retention).
    Unknown,
}

impl LateFailure {
    fn as_str(self) -> &'static str {
        match self {
            LateFailure::Resent => "resent",
            LateFailure::Parked => "parked",
            LateFailure::Unknown => "unknown",
        }
    }
}

/// Record the statuses and apply them to our sends (idempotent: a redelivered status is
/// ignored).
pub async fn record(ctx: &Ctx, statuses: &[StatusUpdate]) -> Result<(), DbError> {
    let mut client = ctx.db.get().await?;
    for s in statuses {
        let platform = s.platform;
        let tx = client.transaction().await?;
        tx.execute(
            "INSERT INTO message_statuses (platform, platform_message_id, status, recipient_id, error, occurred_at)
             VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING",
            &[&platform.as_str(), &s.platform_message_id, &s.status.as_str(), &s.recipient_id, &s.error, &s.occurred_at],
        )
        .await?;
        let Some(status) = send_status(s.status) else {
            tx.commit().await?;
            continue;
        };
        let reported = Reported {
            platform,
            platform_message_id: &s.platform_message_id,
            status,
            at: s.occurred_at,
            error_code: s.error_code,
            error_title: s.error_title.as_deref(),
        };
        let moved = platform_sends::apply_status(&tx, &reported).await?;
        let late = match (&moved, status) {
            (Some(moved), SendStatus::Failed) => Some(late_failure(ctx, &tx, s, moved).await?),
            _ => None,
        };
        tx.commit().await?;
        if moved.is_some() {
            ctx.metrics
                .delivery
                .statuses
                .with_label_values(&[platform.as_str(), status.as_str()])
                .inc();
        }
        if let Some(late) = late {
            ctx.metrics
                .delivery
                .late_failures
                .with_label_values(&[platform.as_str(), late.as_str()])
                .inc();
        }
    }
    Ok(())
}

/// The send status a platform's status is; `None` for statuses that say nothing about
/// delivery (WhatsApp's `deleted`, `warning`, new values).
fn send_status(s: DeliveryStatus) -> Option<SendStatus> {
    match s {
        DeliveryStatus::Sent => Some(SendStatus::Sent),
        DeliveryStatus::Delivered => Some(SendStatus::Delivered),
        DeliveryStatus::Read => Some(SendStatus::Read),
        DeliveryStatus::Failed => Some(SendStatus::Failed),
        DeliveryStatus::Other => None,
    }
}

/// A part the platform reported failed (`s`) after accepting it: queue its reply again,
/// naming only that part, to be sent or parked, in `tx` (the status's own transaction).
async fn late_failure(
    ctx: &Ctx,
    tx: &Transaction<'_>,
    s: &StatusUpdate,
    moved: &Moved,
) -> Result<LateFailure, DbError> {
    let (code, title) = (s.error_code, s.error_title.as_deref());
    let platform = s.platform.as_str();
    let Some(kept) = platform_sends::kept_reply(tx, moved.message_id, moved.part).await? else {
        tracing::warn!(run_id = %moved.run_id, part = moved.part, platform, "a platform reported a sent message failed, but its reply was not kept: not sent again");
        return Ok(LateFailure::Unknown);
    };
    let reply: Reply = serde_json::from_value(kept.payload.clone())
        .map_err(|e| DbError::Invalid(format!("kept reply: {e}")))?;
    let reason = s.failure_reason();
    let said = format!(
        "{} reported the message failed after accepting it: {} {}",
        platform,
        code.map_or_else(|| "no code".to_string(), |c| c.to_string()),
        title.unwrap_or("")
    );
    let bound = u32::try_from(ctx.config.bus.retry_delays.len()).unwrap_or(u32::MAX);
    let detail = if reason.is_permanent() {
        said
    } else {
        format!("{said} (sent again {} of {bound} times)", kept.attempt)
    };
    let again = if reason.is_permanent() || kept.attempt >= bound {
        Again::Park {
            reason,
            detail: &detail,
        }
    } else {
        Again::Send
    };
    let mut env = Envelope::new(kept.run_id, None, &reply);
    if matches!(again, Again::Park { .. }) {
        // Parked at its first failure whatever the reason: the schedule is used up.
        env.attempt = bound;
    }
    if !platform_sends::seed_again(tx, env.id, moved.message_id, &kept, &again).await? {
        return Ok(LateFailure::Unknown);
    }
    outbox::enqueue(tx, &[Outgoing::from_envelope(&env)]).await?;
    let late = match again {
        Again::Send => LateFailure::Resent,
        Again::Park { .. } => LateFailure::Parked,
    };
    tracing::warn!(
        run_id = %moved.run_id,
        part = moved.part,
        reason = reason.as_str(),
        outcome = late.as_str(),
        "{detail}"
    );
    Ok(late)
}

#[cfg(test)]
mod tests {
    use hermes_channels::whatsapp;

    use super::*;

    #[test]
    fn only_statuses_about_delivery_move_a_send() {
        assert_eq!(send_status(DeliveryStatus::Read), Some(SendStatus::Read));
        assert_eq!(
            send_status(DeliveryStatus::Failed),
            Some(SendStatus::Failed)
        );
        assert_eq!(send_status(DeliveryStatus::Other), None);
    }

    /// Meta's published shape of a `failed` status: its code one that is sent again (131000,
    /// "Something went wrong"), where the 24-hour window's 131047 is not.
    #[test]
    fn a_failed_status_from_metas_payload_is_classified_like_a_send() {
        let body =
            include_str!("../../../shared/channels/tests/fixtures/whatsapp/status_failed.json");
        let batch = whatsapp::parse(body.as_bytes()).unwrap();
        let s = &batch.statuses[0];
        assert_eq!(send_status(s.status), Some(SendStatus::Failed));
        assert_eq!(s.error_code, Some(131000));
        assert!(!s.failure_reason().is_permanent());
        let window = include_str!("../../../shared/channels/tests/fixtures/whatsapp/statuses.json");
        let batch = whatsapp::parse(window.as_bytes()).unwrap();
        assert!(batch.statuses[3].failure_reason().is_permanent());
    }
}
