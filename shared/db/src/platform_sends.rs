//! What became of each message a chat reply was sent as (`platform_sends`, docs/channels.md,
//! statuses): the platform's id of it (a WhatsApp wamid, a Telegram or Instagram message id),
//! recorded with the part in the statement that records the part as sent, and the last
//! status the platform reported (WhatsApp `statuses[]`), which only moves forward. A part
//! Meta reports `failed` after it accepted the send is sent again through the delivery stage
//! (a reply queued in the outbox naming only that part), or parked with its reason: the
//! reply of a platform that reports failures late is kept (`platform_send_replies`) for it.

use chrono::{DateTime, Utc};
use hermes_net::failure::FailureReason;
use hermes_types::ids::{MessageId, RunId};
use hermes_types::model::Platform;
use serde::Serialize;

use super::{DbError, GenericClient, stmt};

/// How long sends and kept replies are kept: as long as an unfinished `delivery_sends` row.
pub const KEEP: &str = super::delivery_sends::KEEP;

/// Where a sent message got to, as its platform reported it. Ordered: a status only
/// replaces an earlier one (`failed` comes before `read`, so a message read after a late
/// failure report shows read, and a failure reported after it was read changes nothing).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SendStatus {
    /// The platform answered the send with the message's id; nothing reported yet.
    Accepted,
    Sent,
    Delivered,
    Failed,
    Read,
}

impl SendStatus {
    pub const ALL: [SendStatus; 5] = [
        SendStatus::Accepted,
        SendStatus::Sent,
        SendStatus::Delivered,
        SendStatus::Failed,
        SendStatus::Read,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            SendStatus::Accepted => "accepted",
            SendStatus::Sent => "sent",
            SendStatus::Delivered => "delivered",
            SendStatus::Failed => "failed",
            SendStatus::Read => "read",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|x| x.as_str() == s)
    }

    /// The rank compared in SQL (the enum's order).
    fn rank(self) -> i32 {
        self as i32
    }
}

/// The SQL rank of the stored `status` column, in [`SendStatus`]'s order.
const RANK: &str = "CASE status WHEN 'accepted' THEN 0 WHEN 'sent' THEN 1 WHEN 'delivered' THEN 2 \
                    WHEN 'failed' THEN 3 WHEN 'read' THEN 4 ELSE 5 END";

/// One message a reply part became on its platform.
#[derive(Clone, Copy, Debug)]
pub struct NewSend<'a> {
    pub run_id: RunId,
    pub platform: Platform,
    pub chat_id: &'a str,
    pub platform_message_id: &'a str,
    /// The reply's envelope payload, kept for a platform that reports failures late, and
    /// how many messages (parts) it became.
    pub reply: Option<(&'a serde_json::Value, usize)>,
}

/// Record that part `index` of message `id` reached the platform as `send`, in one statement
/// with the sent-parts record (`delivery_sends`). A part sent again (a copy killed between
/// the send and this record) keeps its newest id.
pub async fn mark_sent(
    c: &impl GenericClient,
    id: MessageId,
    index: usize,
    send: &NewSend<'_>,
) -> Result<(), DbError> {
    let index =
        i32::try_from(index).map_err(|_| DbError::Refused("part index too large".into()))?;
    let parts = send
        .reply
        .map_or(0, |(_, n)| i32::try_from(n).unwrap_or(i32::MAX));
    c.execute(
        &stmt(
            c,
            "WITH parts AS (
                INSERT INTO delivery_sends (message_id, sent_parts) VALUES ($1, ARRAY[$2::integer])
                ON CONFLICT (message_id) DO UPDATE
                   SET sent_parts = CASE WHEN $2 = ANY(delivery_sends.sent_parts)
                                         THEN delivery_sends.sent_parts
                                         ELSE delivery_sends.sent_parts || $2 END,
                       updated_at = now()
             ), sends AS (
                INSERT INTO platform_sends (message_id, part, run_id, platform, chat_id, platform_message_id)
                VALUES ($1, $2, $3, $4, $5, $6)
                ON CONFLICT (message_id, part) DO UPDATE
                   SET platform_message_id = EXCLUDED.platform_message_id, sent_at = now(),
                       status = 'accepted', status_at = NULL, error_code = NULL, error_title = NULL
             )
             INSERT INTO platform_send_replies (message_id, run_id, payload, parts)
             SELECT $1, $3, $7::jsonb, $8 WHERE $7::jsonb IS NOT NULL
             ON CONFLICT (message_id) DO NOTHING",
        )
        .await?,
        &[
            &id.as_uuid(),
            &index,
            &send.run_id.as_uuid(),
            &send.platform.as_str(),
            &send.chat_id,
            &send.platform_message_id,
            &send.reply.map(|(payload, _)| payload),
            &parts,
        ],
    )
    .await?;
    Ok(())
}

/// A status a platform reported for one of our messages.
#[derive(Clone, Debug)]
pub struct Reported<'a> {
    pub platform: Platform,
    pub platform_message_id: &'a str,
    pub status: SendStatus,
    pub at: DateTime<Utc>,
    /// Of a failure: Meta's error code and title.
    pub error_code: Option<i64>,
    pub error_title: Option<&'a str>,
}

/// The send a reported status moved on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Moved {
    pub message_id: MessageId,
    pub part: usize,
    pub run_id: RunId,
}

/// Apply a reported status to the send it names: only forward, so a status reported again
/// (a redelivered webhook) or late (`delivered` after `read`) changes nothing. Returns the
/// send when the status moved it; `None` for an unknown id or no move.
pub async fn apply_status(
    c: &impl GenericClient,
    r: &Reported<'_>,
) -> Result<Option<Moved>, DbError> {
    let failed = r.status == SendStatus::Failed;
    let rows = c
        .query(
            &stmt(
                c,
                &format!(
                    "UPDATE platform_sends
                        SET status = $3, status_at = $4,
                            error_code = CASE WHEN $6 THEN $5 ELSE error_code END,
                            error_title = CASE WHEN $6 THEN $7 ELSE error_title END
                      WHERE platform = $1 AND platform_message_id = $2 AND ({RANK}) < $8
                  RETURNING message_id, part, run_id"
                ),
            )
            .await?,
            &[
                &r.platform.as_str(),
                &r.platform_message_id,
                &r.status.as_str(),
                &r.at,
                &r.error_code,
                &failed,
                &r.error_title,
                &r.status.rank(),
            ],
        )
        .await?;
    // A WhatsApp id names one message; a Telegram id is unique only within its chat, but
    // Telegram reports no statuses.
    Ok(rows.first().map(|row| Moved {
        message_id: MessageId::from(row.get::<_, uuid::Uuid>(0)),
        part: usize::try_from(row.get::<_, i32>(1)).unwrap_or_default(),
        run_id: RunId::from(row.get::<_, uuid::Uuid>(2)),
    }))
}

/// A reply kept for sending a part again.
#[derive(Clone, Debug)]
pub struct KeptReply {
    pub run_id: RunId,
    pub payload: serde_json::Value,
    /// How many messages the reply became.
    pub parts: i32,
    /// How many times a part of the reply was sent again before this one (0: the reply).
    pub attempt: u32,
    /// The parts of the reply other than the failed one.
    pub other_parts: Vec<i32>,
}

/// The reply `id` belongs to and its parts other than `failed_part`, if it was kept.
pub async fn kept_reply(
    c: &impl GenericClient,
    id: MessageId,
    failed_part: usize,
) -> Result<Option<KeptReply>, DbError> {
    let failed_part = i32::try_from(failed_part).unwrap_or(i32::MAX);
    let row = c
        .query_opt(
            &stmt(
                c,
                "SELECT r.run_id, r.payload, r.attempt, r.parts,
                        ARRAY(SELECT p FROM generate_series(0, r.parts - 1) p WHERE p <> $2 ORDER BY p)
                   FROM platform_send_replies r WHERE r.message_id = $1",
            )
            .await?,
            &[&id.as_uuid(), &failed_part],
        )
        .await?;
    Ok(row.map(|row| KeptReply {
        run_id: RunId::from(row.get::<_, uuid::Uuid>(0)),
        payload: row.get(1),
        attempt: u32::try_from(row.get::<_, i32>(2)).unwrap_or_default(),
        parts: row.get(3),
        other_parts: row.get(4),
    }))
}

/// What a failed part's new reply is for.
#[derive(Clone, Debug)]
pub enum Again<'a> {
    /// Send the part again.
    Send,
    /// Park the reply with this reason and detail (the failure is for good, or the part's
    /// sends again ran out).
    Park {
        reason: FailureReason,
        detail: &'a str,
    },
}

/// Seed the reply `new_id` that sends again only the failed part of `of` (every other part
/// recorded as sent), or that delivery parks at once; false when it exists already.
pub async fn seed_again(
    c: &impl GenericClient,
    new_id: MessageId,
    of: MessageId,
    kept: &KeptReply,
    again: &Again<'_>,
) -> Result<bool, DbError> {
    let (reason, detail) = match again {
        Again::Send => (None, None),
        Again::Park { reason, detail } => (Some(reason.as_str()), Some(*detail)),
    };
    let attempt = i32::try_from(kept.attempt + 1).unwrap_or(i32::MAX);
    let n = c
        .execute(
            &stmt(
                c,
                "WITH kept AS (
                    INSERT INTO platform_send_replies (message_id, run_id, payload, parts, resend_of, attempt)
                    VALUES ($1, $2, $3, $9, $4, $5) ON CONFLICT (message_id) DO NOTHING RETURNING 1
                 )
                 INSERT INTO delivery_sends (message_id, sent_parts, park_reason, park_detail)
                 SELECT $1, $6, $7, $8 FROM kept
                 ON CONFLICT (message_id) DO NOTHING",
            )
            .await?,
            &[
                &new_id.as_uuid(),
                &kept.run_id.as_uuid(),
                &kept.payload,
                &of.as_uuid(),
                &attempt,
                &kept.other_parts,
                &reason,
                &detail,
                &kept.parts,
            ],
        )
        .await?;
    Ok(n == 1)
}

/// One send as the run views show it.
#[derive(Clone, Debug, Serialize)]
pub struct SendView {
    pub message_id: uuid::Uuid,
    pub part: i32,
    pub platform: String,
    pub platform_message_id: String,
    pub sent_at: DateTime<Utc>,
    pub status: String,
    pub status_at: Option<DateTime<Utc>>,
    pub error_code: Option<i64>,
    pub error_title: Option<String>,
}

/// Every send of run `id`, oldest first.
pub async fn of_run(c: &impl GenericClient, id: RunId) -> Result<Vec<SendView>, DbError> {
    let rows = c
        .query(
            &stmt(
                c,
                "SELECT message_id, part, platform, platform_message_id, sent_at, status, status_at,
                        error_code, error_title
                   FROM platform_sends WHERE run_id = $1 ORDER BY sent_at, part",
            )
            .await?,
            &[&id.as_uuid()],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| SendView {
            message_id: r.get(0),
            part: r.get(1),
            platform: r.get(2),
            platform_message_id: r.get(3),
            sent_at: r.get(4),
            status: r.get(5),
            status_at: r.get(6),
            error_code: r.get(7),
            error_title: r.get(8),
        })
        .collect())
}

/// Remove sends and kept replies older than [`KEEP`]; returns how many.
pub async fn prune(c: &impl GenericClient) -> Result<u64, DbError> {
    let sends = c
        .execute(
            &format!("DELETE FROM platform_sends WHERE sent_at < now() - interval '{KEEP}'"),
            &[],
        )
        .await?;
    let replies = c
        .execute(
            &format!(
                "DELETE FROM platform_send_replies WHERE created_at < now() - interval '{KEEP}'"
            ),
            &[],
        )
        .await?;
    Ok(sends + replies)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scratch::ScratchDb;

    #[tokio::test]
    async fn statuses_move_forward_once_and_a_failed_part_is_seeded_alone() {
        ScratchDb::with(|db| async move {
            let c = db.get().await.unwrap();
            let (id, run) = (MessageId::new(), RunId::new());
            let reply = serde_json::json!({"reply_to": {"platform": "whatsapp", "chat_id": "1"}});
            // A reply of three parts, two of them sent so far.
            for (part, wamid) in [(0, "wamid.A"), (1, "wamid.B")] {
                let send = NewSend {
                    run_id: run,
                    platform: Platform::Whatsapp,
                    chat_id: "1",
                    platform_message_id: wamid,
                    reply: Some((&reply, 3)),
                };
                mark_sent(&c, id, part, &send).await.unwrap();
            }
            let report = |wamid, status| Reported {
                platform: Platform::Whatsapp,
                platform_message_id: wamid,
                status,
                at: Utc::now(),
                error_code: (status == SendStatus::Failed).then_some(131000),
                error_title: None,
            };
            let moved = apply_status(&c, &report("wamid.A", SendStatus::Read))
                .await
                .unwrap();
            assert_eq!(moved.map(|m| m.part), Some(0));
            assert_eq!(
                apply_status(&c, &report("wamid.A", SendStatus::Delivered))
                    .await
                    .unwrap(),
                None,
                "never backwards"
            );
            assert!(
                apply_status(&c, &report("wamid.B", SendStatus::Failed))
                    .await
                    .unwrap()
                    .is_some()
            );
            assert_eq!(
                apply_status(&c, &report("wamid.B", SendStatus::Failed))
                    .await
                    .unwrap(),
                None,
                "a failure reported again is no news"
            );
            // Every other part counts as sent, also the one still on its way.
            let kept = kept_reply(&c, id, 1).await.unwrap().unwrap();
            assert_eq!((kept.attempt, kept.other_parts.clone()), (0, vec![0, 2]));
            let again = MessageId::new();
            assert!(
                seed_again(&c, again, id, &kept, &Again::Send)
                    .await
                    .unwrap()
            );
            assert!(
                !seed_again(&c, again, id, &kept, &Again::Send)
                    .await
                    .unwrap()
            );
            let seeded = kept_reply(&c, again, 1).await.unwrap().unwrap();
            assert_eq!((seeded.attempt, seeded.other_parts), (1, vec![0, 2]));
            let shown = of_run(&c, run).await.unwrap();
            let statuses: Vec<&str> = shown.iter().map(|s| s.status.as_str()).collect();
            assert_eq!(statuses, ["read", "failed"]);
            assert_eq!(shown[1].error_code, Some(131000));
        })
        .await;
    }
}
