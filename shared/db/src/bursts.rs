//! Bursts of chat messages (docs/channels.md, bursts): a message held in its conversation's
//! quiet window is a `burst_messages` row written in the router's commit (with its
//! processed-message record), and its conversation a `burst_conversations` row with the
//! times of its first and last held message. A router claims a conversation whose window
//! passed with `FOR UPDATE SKIP LOCKED` (replicas share them, none takes a row another
//! holds), marks its messages released and removes the conversation, in the transaction
//! that queues their one turn in the outbox: a crash before that commit leaves them held for
//! the next round, after it leaves the turn to the relay. Released rows stay for a while so
//! that a duplicate of any message of a burst is still refused by the unique index.

use std::time::Duration;

use chrono::{DateTime, Utc};
use hermes_types::ids::{MessageId, RunId};
use hermes_types::model::Platform;

use super::{DbError, GenericClient, Transaction, stmt};

/// How long released messages are kept to refuse duplicates: as long as processed-message
/// records.
pub const KEEP_RELEASED: &str = "3 days";

/// A chat message to hold.
#[derive(Clone, Copy, Debug)]
pub struct Hold<'a> {
    pub message_id: MessageId,
    /// One sender in one chat of one platform.
    pub conversation: &'a str,
    pub platform: Platform,
    pub sender_id: &'a str,
    pub external_message_id: Option<&'a str>,
    pub run_id: RunId,
    /// The message's payload as it came (an `Inbound`).
    pub inbound: &'a serde_json::Value,
    pub traceparent: Option<&'a str>,
}

/// Hold a message in its conversation's window, in the router's commit; false when its
/// platform message id was held before (a duplicate that slipped past ingest's dedupe).
pub async fn hold(tx: &Transaction<'_>, h: &Hold<'_>) -> Result<bool, DbError> {
    let n = tx
        .execute(
            &stmt(
                tx,
                "INSERT INTO burst_messages (message_id, conversation, platform, sender_id,
                        external_message_id, run_id, inbound, traceparent)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT DO NOTHING",
            )
            .await?,
            &[
                &h.message_id.as_uuid(),
                &h.conversation,
                &h.platform.as_str(),
                &h.sender_id,
                &h.external_message_id,
                &h.run_id.as_uuid(),
                &h.inbound,
                &h.traceparent,
            ],
        )
        .await?;
    if n == 0 {
        return Ok(false);
    }
    tx.execute(
        &stmt(
            tx,
            "INSERT INTO burst_conversations (conversation, first_at, last_at)
             VALUES ($1, now(), now())
             ON CONFLICT (conversation) DO UPDATE SET last_at = now()",
        )
        .await?,
        &[&h.conversation],
    )
    .await?;
    Ok(true)
}

/// One held message, released.
#[derive(Clone, Debug)]
pub struct Released {
    pub message_id: MessageId,
    pub run_id: RunId,
    pub inbound: serde_json::Value,
    pub traceparent: Option<String>,
    pub received_at: DateTime<Utc>,
}

/// A conversation's burst, its messages in arrival order.
#[derive(Clone, Debug)]
pub struct Burst {
    pub conversation: String,
    pub messages: Vec<Released>,
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// Claim up to `limit` conversations quiet for `quiet` (or whose first message waited
/// `max_wait`), release their messages and remove them, in `tx`.
pub async fn claim_due(
    tx: &Transaction<'_>,
    quiet: Duration,
    max_wait: Duration,
    limit: i64,
) -> Result<Vec<Burst>, DbError> {
    let due: Vec<String> = tx
        .query(
            &stmt(
                tx,
                "SELECT conversation FROM burst_conversations
                  WHERE last_at <= now() - $1::bigint * interval '1 millisecond'
                     OR first_at <= now() - $2::bigint * interval '1 millisecond'
                  ORDER BY first_at LIMIT $3
                  FOR UPDATE SKIP LOCKED",
            )
            .await?,
            &[&millis(quiet), &millis(max_wait), &limit],
        )
        .await?
        .iter()
        .map(|r| r.get(0))
        .collect();
    if due.is_empty() {
        return Ok(Vec::new());
    }
    let rows = tx
        .query(
            &stmt(
                tx,
                "UPDATE burst_messages SET released_at = now()
                  WHERE conversation = ANY($1) AND released_at IS NULL
              RETURNING conversation, message_id, run_id, inbound, traceparent, received_at",
            )
            .await?,
            &[&due],
        )
        .await?;
    tx.execute(
        &stmt(
            tx,
            "DELETE FROM burst_conversations WHERE conversation = ANY($1)",
        )
        .await?,
        &[&due],
    )
    .await?;
    let mut bursts: Vec<Burst> = due
        .into_iter()
        .map(|conversation| Burst {
            conversation,
            messages: Vec::new(),
        })
        .collect();
    for r in rows {
        let conversation: String = r.get(0);
        if let Some(b) = bursts.iter_mut().find(|b| b.conversation == conversation) {
            b.messages.push(Released {
                message_id: MessageId::from(r.get::<_, uuid::Uuid>(1)),
                run_id: RunId::from(r.get::<_, uuid::Uuid>(2)),
                inbound: r.get(3),
                traceparent: r.get(4),
                received_at: r.get(5),
            });
        }
    }
    for b in &mut bursts {
        // Ingest's ids are time-ordered (UUID v7): arrival order, also within one commit.
        b.messages.sort_by_key(|m| m.message_id.as_uuid());
    }
    bursts.retain(|b| !b.messages.is_empty());
    Ok(bursts)
}

/// How many messages are held now (for the gauge and the tests).
pub async fn held(c: &impl GenericClient) -> Result<i64, DbError> {
    Ok(c.query_one(
        "SELECT count(*) FROM burst_messages WHERE released_at IS NULL",
        &[],
    )
    .await?
    .get(0))
}

/// Remove released messages older than [`KEEP_RELEASED`]; returns how many.
pub async fn prune(c: &impl GenericClient) -> Result<u64, DbError> {
    Ok(c.execute(
        &format!(
            "DELETE FROM burst_messages WHERE released_at < now() - interval '{KEEP_RELEASED}'"
        ),
        &[],
    )
    .await?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scratch::ScratchDb;

    #[tokio::test]
    async fn held_messages_are_released_once_in_order_and_duplicates_refused() {
        ScratchDb::with(|db| async move {
            let mut c = db.get().await.unwrap();
            let payload = serde_json::json!({"event": {}});
            let ids: Vec<MessageId> = (0..3).map(|_| MessageId::new()).collect();
            let tx = c.transaction().await.unwrap();
            for (i, id) in ids.iter().enumerate() {
                let ext = format!("wamid.{i}");
                let h = Hold {
                    message_id: *id,
                    conversation: "whatsapp:1:1",
                    platform: Platform::Whatsapp,
                    sender_id: "1",
                    external_message_id: Some(&ext),
                    run_id: RunId::new(),
                    inbound: &payload,
                    traceparent: None,
                };
                assert!(hold(&tx, &h).await.unwrap());
                let again = Hold {
                    message_id: MessageId::new(),
                    ..h
                };
                assert!(!hold(&tx, &again).await.unwrap(), "a duplicate platform id");
            }
            tx.commit().await.unwrap();
            assert_eq!(held(&c).await.unwrap(), 3);
            let long = Duration::from_secs(3600);
            let tx = c.transaction().await.unwrap();
            assert!(
                claim_due(&tx, long, long, 10).await.unwrap().is_empty(),
                "not quiet yet"
            );
            let bursts = claim_due(&tx, Duration::ZERO, long, 10).await.unwrap();
            tx.commit().await.unwrap();
            assert_eq!(bursts.len(), 1);
            let got: Vec<MessageId> = bursts[0].messages.iter().map(|m| m.message_id).collect();
            assert_eq!(got, ids);
            let tx = c.transaction().await.unwrap();
            assert!(
                claim_due(&tx, Duration::ZERO, long, 10)
                    .await
                    .unwrap()
                    .is_empty(),
                "released once"
            );
            tx.commit().await.unwrap();
            assert_eq!(held(&c).await.unwrap(), 0);
            assert_eq!(prune(&c).await.unwrap(), 0, "kept while recent");
        })
        .await;
    }
}
