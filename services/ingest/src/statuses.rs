//! Delivery statuses a platform reports for messages we sent (WhatsApp `statuses[]`):
//! recorded against the outbound message id, never routed to a model.

use hermes_db::DbError;
use hermes_runtime::Ctx;

use crate::channels::whatsapp::StatusUpdate;

/// Record the statuses (idempotent: a redelivered status is ignored).
pub async fn record(ctx: &Ctx, statuses: &[StatusUpdate]) -> Result<(), DbError> {
    let client = ctx.db.get().await?;
    for s in statuses {
        let status = s.status.as_str();
        client
            .execute(
                "INSERT INTO message_statuses (platform, platform_message_id, status, recipient_id, error, occurred_at)
                 VALUES ('whatsapp', $1, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
                &[&s.platform_message_id, &status, &s.recipient_id, &s.error, &s.occurred_at],
            )
            .await?;
    }
    Ok(())
}
