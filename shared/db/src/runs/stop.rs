//! A run's stop requests and the llm stage's safe point before each model call
//! (docs/api.md, runs): asking an open run to stop, reading whether it was asked, and the
//! one statement that marks a run `running` with the stage's duplicate check folded in, and
//! that reports a closed run as closed so a late message of it has no effect.

use hermes_types::ids::{MessageId, RunId};

use crate::{Client, DbError};

/// Ask an open run to stop at its next safe point (docs/api.md, runs): true when the run
/// was open and is now asked to stop (asking twice is still true), false when it is closed
/// or unknown. The runs it delegated, and theirs, are asked too (docs/a2a.md, "Delegating to
/// other workspaces"), after it, so locks are taken parent first as a close takes them.
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
    if n == 1 {
        crate::delegations::stop_children(client, &[id]).await?;
    }
    Ok(n == 1)
}

/// What a safe point that does not mark the run (the tools stage's, before a round) found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checked {
    /// The run is open (or unknown); `stop` tells whether a stop was asked for.
    Open { stop: bool },
    /// The run is closed: a late message of it must have no effect.
    Closed,
}

/// Whether a stop was asked for the run, or it is closed already: each stage checks before
/// its next tool call.
pub async fn check(client: &Client, id: RunId) -> Result<Checked, DbError> {
    let row = client
        .query_opt(
            &crate::stmt(
                client,
                "SELECT stop_requested_at IS NOT NULL,
                        status IN ('completed', 'failed', 'cancelled', 'expired')
                 FROM agent_runs WHERE id = $1",
            )
            .await?,
            &[&id.as_uuid()],
        )
        .await?;
    Ok(match row {
        Some(r) if r.get::<_, bool>(1) => Checked::Closed,
        Some(r) => Checked::Open { stop: r.get(0) },
        None => Checked::Open { stop: false },
    })
}

/// What [`begin_call`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Begin {
    /// `consumer` processed this message already: nothing was changed.
    Processed,
    /// The run is closed (completed, failed, cancelled or expired: answered, swept by the
    /// stuck-run sweeper, refunded): a late or backlogged message of it makes no model call
    /// and no second reply. Nothing was changed.
    Closed,
    /// The run is marked `running`; `stop` tells whether a stop was asked for.
    Call { stop: bool },
}

/// Mark an open run `running` as a model call of it begins, and tell whether a stop was
/// asked for (the llm stage's safe point), unless `consumer` processed `message_id` already
/// (a redelivery, skipped before the model is called) or the run is closed: one statement,
/// so neither the duplicate check nor the mark costs a round trip of its own. The run is
/// closed when its row exists and the update found it closed, also when it was closed (by
/// the sweeper, say) while this statement waited for its lock. An unknown run (no row) is
/// left alone and reads as open and not stopped.
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
                 SELECT (SELECT done FROM d), (SELECT stop FROM u),
                        EXISTS (SELECT 1 FROM agent_runs WHERE id = $1)",
            )
            .await?,
            &[&id.as_uuid(), &consumer, &message_id.as_uuid()],
        )
        .await?;
    Ok(
        match (
            row.get::<_, bool>(0),
            row.get::<_, Option<bool>>(1),
            row.get::<_, bool>(2),
        ) {
            (true, _, _) => Begin::Processed,
            (false, Some(stop), _) => Begin::Call { stop },
            (false, None, true) => Begin::Closed,
            (false, None, false) => Begin::Call { stop: false },
        },
    )
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
    async fn a_call_marks_the_run_running_and_reads_its_stop_unless_processed_or_closed() {
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
            assert_eq!(
                check(&client, run).await.unwrap(),
                Checked::Open { stop: true }
            );
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

            // A closed run stays closed and reads as closed, whichever way it closed.
            for closed_as in ["completed", "failed", "cancelled", "expired"] {
                let closed = run_with_status(&client, closed_as).await;
                assert!(!request_stop(&client, closed).await.unwrap());
                assert_eq!(
                    begin_call(&client, closed, "llm", MessageId::new())
                        .await
                        .unwrap(),
                    Begin::Closed,
                    "{closed_as}"
                );
                assert_eq!(status(&client, closed).await, closed_as);
                assert_eq!(check(&client, closed).await.unwrap(), Checked::Closed);
            }
            // A processed message of a closed run is still a duplicate.
            assert_eq!(
                begin_call(
                    &client,
                    run_with_status(&client, "failed").await,
                    "llm",
                    first
                )
                .await
                .unwrap(),
                Begin::Processed
            );
            // An unknown run is left alone and reads as open.
            assert_eq!(
                begin_call(&client, RunId::new(), "llm", MessageId::new())
                    .await
                    .unwrap(),
                Begin::Call { stop: false }
            );
        })
        .await;
    }
}
