//! A run's stop requests and the llm stage's safe point before each model call
//! (docs/api.md, runs): asking an open run to stop, reading whether it was asked, and the
//! one statement that marks a run `running` with the stage's duplicate check folded in.

use hermes_types::ids::{MessageId, RunId};

use crate::{Client, DbError};

/// Ask an open run to stop at its next safe point (docs/api.md, runs): true when the run
/// was open and is now asked to stop (asking twice is still true), false when it is closed
/// or unknown.
pub async fn request_stop(client: &Client, id: RunId) -> Result<bool, DbError> {
    let n = client
        .execute(
            &crate::stmt(
                client,
                "UPDATE agent_runs SET stop_requested_at = COALESCE(stop_requested_at, now()),
                    updated_at = now()
                 WHERE id = $1 AND status NOT IN ('completed', 'failed', 'cancelled', 'expired')",
            )
            .await?,
            &[&id.as_uuid()],
        )
        .await?;
    Ok(n == 1)
}

/// Whether a stop was asked for the run: each stage checks before its next model or tool
/// call.
pub async fn stop_requested(client: &Client, id: RunId) -> Result<bool, DbError> {
    let row = client
        .query_opt(
            &crate::stmt(
                client,
                "SELECT stop_requested_at IS NOT NULL FROM agent_runs WHERE id = $1",
            )
            .await?,
            &[&id.as_uuid()],
        )
        .await?;
    Ok(row.is_some_and(|r| r.get::<_, bool>(0)))
}

/// What [`begin_call`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Begin {
    /// `consumer` processed this message already: nothing was changed.
    Processed,
    /// The run is marked `running`; `stop` tells whether a stop was asked for.
    Call { stop: bool },
}

/// Mark an open run `running` as a model call of it begins, and tell whether a stop was
/// asked for (the llm stage's safe point), unless `consumer` processed `message_id` already
/// (a redelivery, skipped before the model is called): one statement, so neither the
/// duplicate check nor the mark costs a round trip of its own. A closed or unknown run is
/// left alone and reads as not stopped.
pub async fn begin_call(
    client: &Client,
    id: RunId,
    consumer: &str,
    message_id: MessageId,
) -> Result<Begin, DbError> {
    let row = client
        .query_one(
            &crate::stmt(
                client,
                "WITH d AS (SELECT EXISTS (SELECT 1 FROM processed_messages
                                           WHERE consumer = $2 AND message_id = $3) AS done),
                      u AS (UPDATE agent_runs SET status = 'running', updated_at = now()
                            WHERE id = $1
                              AND status NOT IN ('completed', 'failed', 'cancelled', 'expired')
                              AND NOT (SELECT done FROM d)
                            RETURNING stop_requested_at IS NOT NULL AS stop)
                 SELECT (SELECT done FROM d), COALESCE((SELECT stop FROM u), false)",
            )
            .await?,
            &[&id.as_uuid(), &consumer, &message_id.as_uuid()],
        )
        .await?;
    Ok(if row.get::<_, bool>(0) {
        Begin::Processed
    } else {
        Begin::Call {
            stop: row.get::<_, bool>(1),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scratch::ScratchDb;

    async fn run_with_status(client: &Client, status: &str) -> RunId {
        let id = RunId::new();
        client
            .execute(
                "INSERT INTO agent_runs (id, platform, sender_id, chat_id, status, tier)
                 VALUES ($1, 'api', 'caller', 'caller', $2, 'free')",
                &[&id.as_uuid(), &status],
            )
            .await
            .unwrap();
        id
    }

    async fn status(client: &Client, id: RunId) -> String {
        client
            .query_one(
                "SELECT status FROM agent_runs WHERE id = $1",
                &[&id.as_uuid()],
            )
            .await
            .unwrap()
            .get(0)
    }

    #[tokio::test]
    async fn a_call_marks_the_run_running_and_reads_its_stop_unless_the_message_was_processed() {
        ScratchDb::with(|db| async move {
            let client = db.get().await.unwrap();
            let run = run_with_status(&client, "routed").await;
            let first = MessageId::new();
            assert_eq!(
                begin_call(&client, run, "llm", first).await.unwrap(),
                Begin::Call { stop: false }
            );
            assert_eq!(status(&client, run).await, "running");

            assert!(request_stop(&client, run).await.unwrap());
            assert!(stop_requested(&client, run).await.unwrap());
            assert_eq!(
                begin_call(&client, run, "llm", MessageId::new())
                    .await
                    .unwrap(),
                Begin::Call { stop: true }
            );

            // A redelivery of a message the stage processed changes nothing.
            client
                .execute(
                    "INSERT INTO processed_messages (consumer, message_id) VALUES ('llm', $1)",
                    &[&first.as_uuid()],
                )
                .await
                .unwrap();
            client
                .execute(
                    "UPDATE agent_runs SET status = 'routed' WHERE id = $1",
                    &[&run.as_uuid()],
                )
                .await
                .unwrap();
            assert_eq!(
                begin_call(&client, run, "llm", first).await.unwrap(),
                Begin::Processed
            );
            assert_eq!(status(&client, run).await, "routed", "left as it was");
            assert_eq!(
                begin_call(&client, run, "tools", first).await.unwrap(),
                Begin::Call { stop: true },
                "another consumer's record is not this one's"
            );

            // A closed run stays closed and reads as not stopped.
            let closed = run_with_status(&client, "completed").await;
            assert!(!request_stop(&client, closed).await.unwrap());
            assert_eq!(
                begin_call(&client, closed, "llm", MessageId::new())
                    .await
                    .unwrap(),
                Begin::Call { stop: false }
            );
            assert_eq!(status(&client, closed).await, "completed");
        })
        .await;
    }
}
