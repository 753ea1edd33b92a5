//! A2A tasks (docs/a2a.md): each task is a run (its id is the run's), linked here to the
//! workspace and the context (`contextId`) it was sent in, with the key that sent it and
//! the text it sent. The run's row holds its status and answer; a context's earlier tasks,
//! read back in order, are the history a new message of the context is answered with.

use hermes_types::ids::{ApiKeyId, RunId, SessionId, WorkspaceId};

use super::{Client, DbError, GenericClient};

/// A task as ingest records it, before its run is handed to the broker.
pub struct NewTask<'a> {
    pub run_id: RunId,
    pub workspace_id: WorkspaceId,
    /// The key that sent it (`None`: the operator key).
    pub api_key_id: Option<ApiKeyId>,
    pub context_id: &'a str,
    pub message_id: &'a str,
    pub input: &'a str,
}

/// Record a task.
pub async fn insert(client: &impl GenericClient, t: &NewTask<'_>) -> Result<(), DbError> {
    client
        .execute(
            &crate::stmt(
                client,
                "INSERT INTO a2a_tasks (run_id, workspace_id, api_key_id, context_id, message_id, input)
                 VALUES ($1, $2, $3, $4, $5, $6)",
            )
            .await?,
            &[
                &t.run_id.as_uuid(),
                &t.workspace_id,
                &t.api_key_id,
                &t.context_id,
                &t.message_id,
                &t.input,
            ],
        )
        .await?;
    Ok(())
}

/// A recorded task.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredTask {
    pub run_id: RunId,
    pub context_id: String,
    pub message_id: String,
    pub input: String,
    pub created_at: chrono::DateTime<chrono::Utc>,
}

/// The task `run_id` of `workspace`, as `viewer` may see it: a key its own tasks, the
/// operator key (`None`) every one.
pub async fn get(
    client: &Client,
    workspace: WorkspaceId,
    run_id: RunId,
    viewer: Option<ApiKeyId>,
) -> Result<Option<StoredTask>, DbError> {
    let row = client
        .query_opt(
            &crate::stmt(
                client,
                "SELECT context_id, message_id, input, created_at FROM a2a_tasks
                 WHERE workspace_id = $1 AND run_id = $2
                   AND ($3::uuid IS NULL OR api_key_id = $3)",
            )
            .await?,
            &[&workspace, &run_id.as_uuid(), &viewer],
        )
        .await?;
    Ok(row.map(|r| StoredTask {
        run_id,
        context_id: r.get(0),
        message_id: r.get(1),
        input: r.get(2),
        created_at: r.get(3),
    }))
}

/// One earlier turn of a context: what was sent and, when its run completed, the answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Turn {
    pub input: String,
    pub answer: Option<String>,
    /// The session its run was routed into (`None` until routed): a context's runs share
    /// one, as a chain of responses does (docs/a2a.md, "Contexts").
    pub session: Option<SessionId>,
}

/// The latest `limit` tasks of `context` in `workspace` that `viewer` sent, oldest first,
/// with their runs' answers: the history a new message of the context is answered with.
pub async fn context_turns(
    client: &Client,
    workspace: WorkspaceId,
    context: &str,
    viewer: Option<ApiKeyId>,
    limit: i64,
) -> Result<Vec<Turn>, DbError> {
    // The operator key's context is its own: `viewer` NULL matches only NULL here, so two
    // callers naming the same contextId never share a history.
    let rows = client
        .query(
            &crate::stmt(
                client,
                "SELECT input, answer, session_id FROM (
                     SELECT t.input, t.created_at, r.session_id,
                            CASE WHEN r.status = 'completed' THEN r.output_text END AS answer
                     FROM a2a_tasks t LEFT JOIN agent_runs r ON r.id = t.run_id
                     WHERE t.workspace_id = $1 AND t.context_id = $2
                       AND t.api_key_id IS NOT DISTINCT FROM $3
                     ORDER BY t.created_at DESC LIMIT $4) recent
                 ORDER BY created_at",
            )
            .await?,
            &[&workspace, &context, &viewer, &limit],
        )
        .await?;
    Ok(rows
        .into_iter()
        .map(|r| Turn {
            input: r.get(0),
            answer: r.get(1),
            session: r.get(2),
        })
        .collect())
}

/// Forget the task of a run the broker never took: no run answers it.
pub async fn forget(client: &Client, run_id: RunId) -> Result<(), DbError> {
    client
        .execute(
            &crate::stmt(client, "DELETE FROM a2a_tasks WHERE run_id = $1").await?,
            &[&run_id.as_uuid()],
        )
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scratch::ScratchDb;
    use crate::workspace_api::{self, Profile};

    #[tokio::test]
    async fn a_contexts_history_is_its_callers_own_latest_turns_in_order() {
        ScratchDb::with(|db| async move {
            let c = db.get().await.unwrap();
            let ws = workspace_api::create(&c, "A2A one", &Profile::default())
                .await
                .unwrap()
                .id;
            let other_ws = workspace_api::create(&c, "A2A two", &Profile::default())
                .await
                .unwrap()
                .id;
            let a = crate::api_keys::create(&c, "a", None, None)
                .await
                .unwrap()
                .key
                .id;
            let b = crate::api_keys::create(&c, "b", None, None)
                .await
                .unwrap()
                .key
                .id;
            let mut runs = Vec::new();
            for (workspace, key, context, input) in [
                (ws, Some(a), "c", "first"),
                (ws, Some(a), "c", "second"),
                (ws, Some(b), "c", "b's"),
                (other_ws, Some(a), "c", "elsewhere"),
                (ws, None, "c", "the operator's"),
                (ws, Some(a), "d", "another context"),
                (ws, Some(a), "c", "third"),
            ] {
                let run_id = RunId::new();
                let task = NewTask {
                    run_id,
                    workspace_id: workspace,
                    api_key_id: key,
                    context_id: context,
                    message_id: "m",
                    input,
                };
                insert(&c, &task).await.unwrap();
                runs.push(run_id);
            }
            let inputs =
                |turns: Vec<Turn>| -> Vec<String> { turns.into_iter().map(|t| t.input).collect() };
            let turns = context_turns(&c, ws, "c", Some(a), 10).await.unwrap();
            assert!(
                turns
                    .iter()
                    .all(|t| t.answer.is_none() && t.session.is_none()),
                "no runs yet"
            );
            assert_eq!(inputs(turns), ["first", "second", "third"]);
            let latest = context_turns(&c, ws, "c", Some(a), 2).await.unwrap();
            assert_eq!(inputs(latest), ["second", "third"]);
            let operator = context_turns(&c, ws, "c", None, 10).await.unwrap();
            assert_eq!(inputs(operator), ["the operator's"]);

            // A key sees its own tasks of the workspace; the operator every one.
            assert!(get(&c, ws, runs[0], Some(a)).await.unwrap().is_some());
            assert!(get(&c, ws, runs[0], Some(b)).await.unwrap().is_none());
            assert!(get(&c, other_ws, runs[0], Some(a)).await.unwrap().is_none());
            let seen = get(&c, ws, runs[2], None).await.unwrap().unwrap();
            assert_eq!(
                (seen.context_id.as_str(), seen.input.as_str()),
                ("c", "b's")
            );
            forget(&c, runs[0]).await.unwrap();
            assert!(get(&c, ws, runs[0], None).await.unwrap().is_none());
        })
        .await;
    }
}
