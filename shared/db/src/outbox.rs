//! The transactional outbox (docs/architecture.md#2-every-state-change-travels-with-its-message-the-outbox): stages insert their next messages in the same
//! transaction as their effects and publish them themselves after the commit; the relay
//! publishes, with confirms, whatever is left (other writers' rows, and what a crash left).
//!
//! The relay that publishes them lives in the runtime crate (the `relay` module).

use std::time::Duration;

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
/// `None` (and nothing enqueued) when the message was processed already; otherwise the new
/// rows' ids, in the order of `messages`.
///
/// With `hold` the writer publishes the rows itself right after its commit
/// (docs/architecture.md#2-every-state-change-travels-with-its-message-the-outbox): the rows skip `NOTIFY` and the relays leave them alone for `hold`, after
/// which any relay sweeps up what the writer did not mark published. Without it the rows are
/// the relays' at once, woken by `NOTIFY`.
pub async fn record_processed(
    tx: &Transaction<'_>,
    consumer: &str,
    message_id: MessageId,
    messages: &[Outgoing],
    hold: Option<Duration>,
) -> Result<Option<Vec<i64>>, DbError> {
    let ids: Vec<uuid::Uuid> = messages.iter().map(|m| m.message_id.as_uuid()).collect();
    let stages: Vec<&str> = messages.iter().map(|m| m.stage.as_str()).collect();
    let traces: Vec<Option<&str>> = messages.iter().map(|m| m.traceparent.as_deref()).collect();
    let bodies: Vec<&[u8]> = messages.iter().map(|m| m.body.as_slice()).collect();
    let hold_secs: Option<f64> = hold.map(|h| h.as_secs_f64());
    let row = tx
        .query_one(
            &crate::stmt(
                tx,
                // `clock_timestamp()`, not `now()`: the hold counts from the insert, close to
                // the commit, not from the start of a transaction that may have been long.
                "WITH p AS (INSERT INTO processed_messages (consumer, message_id) VALUES ($1, $2)
                            ON CONFLICT DO NOTHING RETURNING 1),
                      l AS (SELECT set_config('hermes.local_relay',
                                              CASE WHEN $7::float8 IS NOT NULL THEN 'on' ELSE 'off' END,
                                              true) AS v),
                      o AS (INSERT INTO outbox (message_id, stage, traceparent, body, held_until)
                            SELECT m, s, t, b, clock_timestamp() + make_interval(secs => $7::float8)
                            FROM UNNEST($3::uuid[], $4::text[], $5::text[], $6::bytea[]) AS u(m, s, t, b)
                            WHERE EXISTS (SELECT 1 FROM p) AND (SELECT v FROM l) IS NOT NULL
                            RETURNING id, message_id)
                 SELECT EXISTS (SELECT 1 FROM p),
                        ARRAY(SELECT id FROM o ORDER BY id),
                        ARRAY(SELECT message_id FROM o ORDER BY id)",
            )
            .await?,
            &[
                &consumer,
                &message_id.as_uuid(),
                &ids,
                &stages,
                &traces,
                &bodies,
                &hold_secs,
            ],
        )
        .await?;
    if !row.get::<_, bool>(0) {
        return Ok(None);
    }
    let rows: Vec<i64> = row.get(1);
    let written: Vec<uuid::Uuid> = row.get(2);
    // Each message's row, matched by message id (two messages never share one).
    let by_message: std::collections::HashMap<uuid::Uuid, i64> =
        written.into_iter().zip(rows).collect();
    Ok(Some(
        ids.iter()
            .map(|id| by_message.get(id).copied().unwrap_or_default())
            .collect(),
    ))
}

/// Mark rows published, outside any transaction: one statement (and round trip) for every
/// row the writers of this process published since the last mark. A row a relay published
/// meanwhile keeps its time.
pub async fn mark_published(client: &crate::Client, ids: &[i64]) -> Result<u64, DbError> {
    let marked = client
        .execute(
            &crate::stmt(
                client,
                "UPDATE outbox SET published_at = now() WHERE id = ANY($1) AND published_at IS NULL",
            )
            .await?,
            &[&ids],
        )
        .await?;
    Ok(marked)
}

/// Hand rows whose publish by their writer failed to the relays at once (their hold lifted),
/// counting the attempt like a relay's failed publish.
pub async fn release(client: &crate::Client, ids: &[i64], error: &str) -> Result<(), DbError> {
    client
        .execute(
            &crate::stmt(
                client,
                "UPDATE outbox SET held_until = NULL, attempts = attempts + 1, last_error = $2
                 WHERE id = ANY($1) AND published_at IS NULL",
            )
            .await?,
            &[&ids, &error],
        )
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
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

    /// Commit one message's record and row; with `eager` the writer holds the row (and
    /// skips `NOTIFY`). True when recorded (not a duplicate).
    async fn commit(db: &Db, id: MessageId, eager: bool) -> bool {
        let mut client = db.get().await.unwrap();
        let tx = client.transaction().await.unwrap();
        let hold = eager.then_some(Duration::from_secs(5));
        let recorded = record_processed(&tx, "test", id, &[outgoing()], hold)
            .await
            .unwrap();
        tx.commit().await.unwrap();
        recorded.is_some()
    }

    #[tokio::test]
    async fn held_rows_come_back_in_order_and_a_mark_publishes_them() {
        ScratchDb::with(|db| async move {
            let mut client = db.get().await.unwrap();
            let tx = client.transaction().await.unwrap();
            let messages = [outgoing(), outgoing(), outgoing()];
            let ids = record_processed(
                &tx,
                "test",
                MessageId::new(),
                &messages,
                Some(Duration::from_secs(5)),
            )
            .await
            .unwrap()
            .expect("recorded");
            tx.commit().await.unwrap();
            assert_eq!(ids.len(), 3);
            for (id, m) in ids.iter().zip(&messages) {
                let row = client
                    .query_one(
                        "SELECT message_id, held_until > now(), published_at IS NULL
                         FROM outbox WHERE id = $1",
                        &[id],
                    )
                    .await
                    .unwrap();
                assert_eq!(row.get::<_, uuid::Uuid>(0), m.message_id.as_uuid());
                assert!(row.get::<_, bool>(1), "held by its writer");
                assert!(row.get::<_, bool>(2));
            }
            assert_eq!(mark_published(&client, &ids[..2]).await.unwrap(), 2);
            assert_eq!(
                mark_published(&client, &ids).await.unwrap(),
                1,
                "a row marked already keeps its time"
            );
            let unpublished: i64 = client
                .query_one(
                    "SELECT count(*) FROM outbox WHERE published_at IS NULL",
                    &[],
                )
                .await
                .unwrap()
                .get(0);
            assert_eq!(unpublished, 0);
        })
        .await;
    }

    #[tokio::test]
    async fn a_released_row_is_the_relays_at_once_and_a_published_one_is_left_alone() {
        ScratchDb::with(|db| async move {
            let mut client = db.get().await.unwrap();
            let tx = client.transaction().await.unwrap();
            let ids = record_processed(
                &tx,
                "test",
                MessageId::new(),
                &[outgoing(), outgoing()],
                Some(Duration::from_secs(5)),
            )
            .await
            .unwrap()
            .expect("recorded");
            tx.commit().await.unwrap();
            mark_published(&client, &ids[1..]).await.unwrap();
            release(&client, &ids, "broker gone").await.unwrap();
            let rows = client
                .query(
                    "SELECT held_until IS NULL, attempts, last_error, published_at IS NULL
                     FROM outbox WHERE id = ANY($1) ORDER BY id",
                    &[&ids],
                )
                .await
                .unwrap();
            let state = |i: usize| {
                let r = &rows[i];
                (
                    r.get::<_, bool>(0),
                    r.get::<_, i32>(1),
                    r.get::<_, Option<String>>(2),
                    r.get::<_, bool>(3),
                )
            };
            assert_eq!(
                state(0),
                (true, 1, Some("broker gone".to_string()), true),
                "the failed row loses its hold and counts the attempt"
            );
            assert_eq!(
                state(1),
                (false, 0, None, false),
                "a row published meanwhile is left as it is"
            );
        })
        .await;
    }

    #[tokio::test]
    async fn held_commits_skip_notify_and_duplicates_enqueue_nothing() {
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
                "a commit whose writer publishes must not NOTIFY"
            );
            assert!(commit(&db, MessageId::new(), false).await);
            assert!(
                notified(&mut notifications).await,
                "rows left to the relays notify"
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
