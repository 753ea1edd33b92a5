//! Opt-outs at send time (docs/channels.md, "SMS through Twilio"): a number that sent `STOP`
//! is never sent to until it sends `START`. Ingest records both in `opt_outs`; before an SMS
//! reply is sent (an answer, an agent answering late, a scheduled job's run, an operator's
//! `messages_send`, a failure notice), the number's row is read, and a reply to a number that
//! opted out is parked as `opted_out`, never attempted. `hermes dlq replay --reason opted_out`
//! sends it once the person opted back in.

use anyhow::anyhow;
use hermes_db::{Db, opt_outs};
use hermes_net::failure::FailureReason;
use hermes_runtime::stage::StageError;
use hermes_types::model::ReplyTo;

/// The opt-out rule of the platforms whose people opt out by keyword.
pub struct ConsentRule {
    db: Db,
}

impl ConsentRule {
    pub fn new(db: Db) -> Self {
        Self { db }
    }

    /// `Ok` when the person of `to` may be sent to; the `opted_out` failure that parks the
    /// reply when they said `STOP`.
    pub async fn check(&self, to: &ReplyTo) -> Result<(), StageError> {
        let opted_out = {
            let client = self.db.get().await?;
            opt_outs::is_opted_out(&client, to.platform, &to.chat_id).await?
        };
        if opted_out {
            return Err(StageError::Retry {
                reason: FailureReason::OptedOut,
                error: anyhow!(
                    "the recipient opted out of {} messages (STOP); parked unsent until they send START",
                    to.platform.as_str()
                ),
            });
        }
        Ok(())
    }
}
