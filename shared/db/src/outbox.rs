//! The transactional outbox (docs/architecture.md §2): stages insert their next messages in the same
//! transaction as their effects; the relay publishes them with confirms and marks them.
//!
//! The relay that publishes them lives in the runtime crate (the `relay` module).

use hermes_types::ids::MessageId;
use hermes_types::stage::Outgoing;

use super::{DbError, Transaction};

/// Insert messages into the outbox within the caller's transaction.
pub async fn enqueue(tx: &Transaction<'_>, messages: &[Outgoing]) -> Result<(), DbError> {
    if messages.is_empty() {
        return Ok(());
    }
    let ids: Vec<uuid::Uuid> = messages.iter().map(|m| m.message_id.as_uuid()).collect();
    let stages: Vec<&str> = messages.iter().map(|m| m.stage.as_str()).collect();
    let traces: Vec<Option<&str>> = messages.iter().map(|m| m.traceparent.as_deref()).collect();
    let bodies: Vec<&[u8]> = messages.iter().map(|m| m.body.as_slice()).collect();
    tx.execute(
        &crate::stmt(
            tx,
            "INSERT INTO outbox (message_id, stage, traceparent, body)
         SELECT * FROM UNNEST($1::uuid[], $2::text[], $3::text[], $4::bytea[])",
        )
        .await?,
        &[&ids, &stages, &traces, &bodies],
    )
    .await?;
    Ok(())
}

/// Record `message_id` as processed by `consumer` and enqueue `messages`, in one statement.
/// False (and nothing enqueued) when the message was processed already. With `local_relay`
/// (this process runs a relay, woken after the commit) the rows skip `NOTIFY`.
pub async fn record_processed(
    tx: &Transaction<'_>,
    consumer: &str,
    message_id: MessageId,
    messages: &[Outgoing],
    local_relay: bool,
) -> Result<bool, DbError> {
    let ids: Vec<uuid::Uuid> = messages.iter().map(|m| m.message_id.as_uuid()).collect();
    let stages: Vec<&str> = messages.iter().map(|m| m.stage.as_str()).collect();
    let traces: Vec<Option<&str>> = messages.iter().map(|m| m.traceparent.as_deref()).collect();
    let bodies: Vec<&[u8]> = messages.iter().map(|m| m.body.as_slice()).collect();
    let row = tx
        .query_one(
            &crate::stmt(
                tx,
                "WITH p AS (INSERT INTO processed_messages (consumer, message_id) VALUES ($1, $2)
                            ON CONFLICT DO NOTHING RETURNING 1),
                      l AS (SELECT set_config('hermes.local_relay',
                                              CASE WHEN $7 THEN 'on' ELSE 'off' END, true) AS v),
                      o AS (INSERT INTO outbox (message_id, stage, traceparent, body)
                            SELECT * FROM UNNEST($3::uuid[], $4::text[], $5::text[], $6::bytea[])
                            WHERE EXISTS (SELECT 1 FROM p) AND (SELECT v FROM l) IS NOT NULL
                            RETURNING 1)
                 SELECT EXISTS (SELECT 1 FROM p), (SELECT count(*) FROM o)",
            )
            .await?,
            &[
                &consumer,
                &message_id.as_uuid(),
                &ids,
                &stages,
                &traces,
                &bodies,
                &local_relay,
            ],
        )
        .await?;
    Ok(row.get(0))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use futures_util::StreamExt;
    use tokio_postgres::AsyncMessage;

    use super::*;
    use crate::Db;
    use crate::scratch::ScratchDb;
    use hermes_types::stage::Stage;

    fn outgoing() -> Outgoing {
        Outgoing {
            stage: Stage::Llm,
            message_id: MessageId::new(),
            traceparent: None,
            body: b"{}".to_vec(),
        }
    }

    /// Did a notification arrive within half a second?
    async fn notified(rx: &mut tokio::sync::mpsc::UnboundedReceiver<()>) -> bool {
        tokio::time::timeout(Duration::from_millis(500), rx.recv())
            .await
            .is_ok()
    }

    async fn commit(db: &Db, id: MessageId, local_relay: bool) -> bool {
        let mut client = db.get().await.unwrap();
        let tx = client.transaction().await.unwrap();
        let recorded = record_processed(&tx, "test", id, &[outgoing()], local_relay)
            .await
            .unwrap();
        tx.commit().await.unwrap();
        recorded
    }

    #[tokio::test]
    async fn commits_with_a_local_relay_skip_notify_and_duplicates_enqueue_nothing() {
        ScratchDb::with(|db| async move {
            let (listener, mut conn) = db.pg_config().connect(db.tls()).await.unwrap();
            let (tx, mut notifications) = tokio::sync::mpsc::unbounded_channel();
            let driver = tokio::spawn(async move {
                let mut messages = futures_util::stream::poll_fn(move |cx| conn.poll_message(cx));
                while let Some(Ok(m)) = messages.next().await {
                    if let AsyncMessage::Notification(_) = m {
                        let _ = tx.send(());
                    }
                }
            });
            listener
                .batch_execute("LISTEN hermes_outbox")
                .await
                .unwrap();

            assert!(commit(&db, MessageId::new(), true).await);
            assert!(
                !notified(&mut notifications).await,
                "a local relay's commit must not NOTIFY"
            );
            assert!(commit(&db, MessageId::new(), false).await);
            assert!(
                notified(&mut notifications).await,
                "without a local relay the commit notifies"
            );

            let id = MessageId::new();
            assert!(commit(&db, id, true).await);
            assert!(
                !commit(&db, id, true).await,
                "the second record of an id is refused"
            );
            let rows: i64 = db
                .get()
                .await
                .unwrap()
                .query_one("SELECT count(*) FROM outbox", &[])
                .await
                .unwrap()
                .get(0);
            assert_eq!(rows, 3, "the duplicate enqueued nothing");
            drop(listener);
            let _ = driver.await;
        })
        .await;
    }
}
