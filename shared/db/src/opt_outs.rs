//! Who opted out of messages (`opt_outs`, docs/channels.md, "SMS through Twilio"): ingest
//! records an SMS `STOP` ([`record`]) before it answers Twilio and deletes the row on
//! `START`; delivery asks [`is_opted_out`] before every send to the platform, so no reply,
//! late answer, job or operator's send reaches a number that said `STOP`.

use hermes_types::model::Platform;

use super::{DbError, GenericClient, stmt};

/// Record that `sender_id` on `platform` opted out (`opted_out`) or back in, said by the
/// message `message_id`. Opting out again keeps the first time; opting in deletes the row.
pub async fn record(
    c: &impl GenericClient,
    platform: Platform,
    sender_id: &str,
    opted_out: bool,
    message_id: Option<&str>,
) -> Result<(), DbError> {
    let platform = platform.as_str();
    if opted_out {
        let sql = "INSERT INTO opt_outs (platform, sender_id, message_id) VALUES ($1, $2, $3)
                   ON CONFLICT (platform, sender_id) DO NOTHING";
        c.execute(&stmt(c, sql).await?, &[&platform, &sender_id, &message_id])
            .await?;
    } else {
        let sql = "DELETE FROM opt_outs WHERE platform = $1 AND sender_id = $2";
        c.execute(&stmt(c, sql).await?, &[&platform, &sender_id])
            .await?;
    }
    Ok(())
}

/// Whether `sender_id` on `platform` opted out and has not opted back in.
pub async fn is_opted_out(
    c: &impl GenericClient,
    platform: Platform,
    sender_id: &str,
) -> Result<bool, DbError> {
    let row = c
        .query_opt(
            &stmt(
                c,
                "SELECT 1 FROM opt_outs WHERE platform = $1 AND sender_id = $2",
            )
            .await?,
            &[&platform.as_str(), &sender_id],
        )
        .await?;
    Ok(row.is_some())
}
