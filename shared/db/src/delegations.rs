//! Delegated runs (docs/a2a.md, "Delegating to other workspaces"). The tools stage holds a
//! tool round whose `delegate_task_async` calls started runs in other workspaces: it keeps
//! the round whole ([`hold`]) and links each run to it ([`link`]), in the transaction that
//! queues those runs. Each delegated run is an ordinary run; when it closes, its close
//! records how it ended on its link ([`ended`], called by `runs::close` only), and the close
//! that ends the last of a round's runs queues the round again, with every answer as the
//! calls' results ([`resume_if_done`]).
//!
//! **A round resumes once, whichever replicas close its runs at once.** Each close locks the
//! round's row before it counts the runs still open, so two closes are counted one after
//! the other, and the round is queued by the one that finds none open and marks it resumed.
//!
//! **A delegated run is stopped with its parent.** A stop asked of a run is asked of every
//! run it delegated, and theirs ([`stop_children`]); so is the close of a run that did not
//! answer; and a run routed after its parent was stopped is stopped at once
//! ([`inherit_stop`]).

use hermes_types::envelope::Envelope;
use hermes_types::ids::{RunId, WorkspaceId};
use hermes_types::model::delegation::{self, Ended};
use hermes_types::model::{ToolRequest, ToolResult};
use hermes_types::trace::TraceParent;

use super::{DbError, GenericClient, Transaction, inbox};

/// A delegated run as the tools stage starts it.
pub struct NewDelegation<'a> {
    pub child: RunId,
    pub parent: RunId,
    pub call_id: &'a str,
    pub workspace: WorkspaceId,
    /// 1 for a run delegated by a run nobody delegated.
    pub depth: u8,
    pub task: &'a str,
}

/// In the tools stage's transaction: keep `request`'s round whole, to resume it once its
/// delegated runs have ended. False when it is kept already (a redelivered round).
pub async fn hold(
    tx: &Transaction<'_>,
    parent: RunId,
    request: &ToolRequest,
) -> Result<bool, DbError> {
    let stored = serde_json::to_value(request)
        .map_err(|e| DbError::Invalid(format!("tool request: {e}")))?;
    let n = tx
        .execute(
            "INSERT INTO delegation_rounds (parent_run_id, round, request) VALUES ($1, $2, $3)
             ON CONFLICT DO NOTHING",
            &[&parent, &i16::from(request.request.tool_round), &stored],
        )
        .await?;
    Ok(n == 1)
}

/// In the same transaction: link delegated run `d.child` to its parent's held round.
pub async fn link(tx: &Transaction<'_>, round: u8, d: &NewDelegation<'_>) -> Result<(), DbError> {
    tx.execute(
        "INSERT INTO delegations (child_run_id, parent_run_id, round, call_id, workspace_id,
                                  depth, task)
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
        &[
            &d.child,
            &d.parent,
            &i16::from(round),
            &d.call_id,
            &d.workspace,
            &i16::from(d.depth),
            &d.task,
        ],
    )
    .await?;
    Ok(())
}

/// How deep run `run` is: 0 when nobody delegated it.
pub async fn depth_of(client: &impl GenericClient, run: RunId) -> Result<u8, DbError> {
    Ok(client
        .query_opt(
            "SELECT depth FROM delegations WHERE child_run_id = $1",
            &[&run],
        )
        .await?
        .map(|r| u8::try_from(r.get::<_, i16>(0)).unwrap_or(u8::MAX))
        .unwrap_or(0))
}

/// The round of a delegated run that just ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Round {
    pub parent: RunId,
    pub round: u8,
}

/// In the close's transaction: record how delegated run `child` ended (`text`: its answer,
/// or its failure's message). `None` when `child` is no delegated run or its end is
/// recorded already; else its parent's round, for [`resume_if_done`].
pub async fn ended(
    tx: &Transaction<'_>,
    child: RunId,
    how: Ended,
    text: Option<&str>,
    code: Option<&str>,
) -> Result<Option<Round>, DbError> {
    let row = tx
        .query_opt(
            &crate::stmt(
                tx,
                "UPDATE delegations SET status = $2, result = $3, error_code = $4,
                    finished_at = now()
                 WHERE child_run_id = $1 AND finished_at IS NULL
                 RETURNING parent_run_id, round",
            )
            .await?,
            &[&child.as_uuid(), &how.as_str(), &text, &code],
        )
        .await?;
    Ok(row.map(|r| Round {
        parent: r.get(0),
        round: u8::try_from(r.get::<_, i16>(1)).unwrap_or(u8::MAX),
    }))
}

/// Queue `round` again when none of its delegated runs is open, with every call's result:
/// each delegated run's end, and what the round's other calls returned before it was held.
/// True when this call queued it (see the module doc for why only one does).
pub async fn resume_if_done(tx: &Transaction<'_>, round: Round) -> Result<bool, DbError> {
    let Round { parent, round } = round;
    let round = i16::from(round);
    let Some(held) = tx
        .query_opt(
            "SELECT request FROM delegation_rounds
             WHERE parent_run_id = $1 AND round = $2 AND resumed_at IS NULL FOR UPDATE",
            &[&parent, &round],
        )
        .await?
    else {
        return Ok(false);
    };
    let rows = tx
        .query(
            "SELECT d.child_run_id, d.call_id, d.status, d.result, d.error_code, w.slug
             FROM delegations d JOIN workspaces w ON w.id = d.workspace_id
             WHERE d.parent_run_id = $1 AND d.round = $2",
            &[&parent, &round],
        )
        .await?;
    let mut results = Vec::with_capacity(rows.len());
    for r in &rows {
        let Some(how) = Ended::parse(r.get(2)) else {
            return Ok(false); // still running
        };
        let child: RunId = r.get(0);
        let text = delegation::result_text(child, r.get(5), how, r.get(3), r.get(4));
        results.push(ToolResult {
            call_id: r.get(1),
            text,
        });
    }
    let mut request: ToolRequest = serde_json::from_value(held.get(0))
        .map_err(|e| DbError::Invalid(format!("held tool round of run {parent}: {e}")))?;
    request.results.extend(results);
    tx.execute(
        "UPDATE delegation_rounds SET resumed_at = now() WHERE parent_run_id = $1 AND round = $2",
        &[&parent, &round],
    )
    .await?;
    let traceparent: Option<String> = tx
        .query_opt(
            "SELECT traceparent FROM agent_runs WHERE id = $1",
            &[&parent],
        )
        .await?
        .and_then(|r| r.get(0));
    let env = Envelope::new(
        parent,
        traceparent.as_deref().and_then(TraceParent::parse),
        &request,
    );
    inbox::enqueue(tx, &[env]).await?;
    Ok(true)
}

/// Ask every open run that `parents` delegated, and the runs they delegated, to stop at
/// its next safe point. Returns how many were asked.
pub async fn stop_children(client: &impl GenericClient, parents: &[RunId]) -> Result<u64, DbError> {
    let parents: Vec<uuid::Uuid> = parents.iter().map(|p| p.as_uuid()).collect();
    Ok(client
        .execute(
            "WITH RECURSIVE tree (id) AS (
                 SELECT child_run_id FROM delegations
                 WHERE parent_run_id = ANY($1) AND finished_at IS NULL
               UNION
                 SELECT d.child_run_id FROM delegations d JOIN tree t ON d.parent_run_id = t.id
                 WHERE d.finished_at IS NULL)
             UPDATE agent_runs SET stop_requested_at = COALESCE(stop_requested_at, now()),
                 updated_at = now()
             WHERE id IN (SELECT id FROM tree)
               AND status NOT IN ('completed', 'failed', 'cancelled', 'expired')",
            &[&parents],
        )
        .await?)
}

/// In the router's transaction that created delegated run `child`: stop it at once when
/// its parent was asked to stop or closed meanwhile (it was queued before, so no stop
/// could reach its row). True when it was stopped.
pub async fn inherit_stop(tx: &Transaction<'_>, child: RunId) -> Result<bool, DbError> {
    let n = tx
        .execute(
            "UPDATE agent_runs c SET stop_requested_at = now(), updated_at = now()
             FROM delegations d JOIN agent_runs p ON p.id = d.parent_run_id
             WHERE c.id = $1 AND d.child_run_id = c.id
               AND (p.stop_requested_at IS NOT NULL
                    OR p.status IN ('completed', 'failed', 'cancelled', 'expired'))",
            &[&child],
        )
        .await?;
    Ok(n == 1)
}

/// One link of a run's delegations, as the console shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Link {
    /// The other run: the parent of a delegated run, or a run it delegated.
    pub run: RunId,
    /// The workspace the delegated run went to.
    pub workspace: String,
    pub task: String,
    /// `running`, or how the delegated run ended.
    pub status: String,
}

/// The run that delegated `run`, if any, and the runs `run` delegated, oldest first (at
/// most 100; a round starts at most [`delegation::MAX_PER_ROUND`]).
pub async fn links(
    client: &impl GenericClient,
    run: RunId,
) -> Result<(Option<Link>, Vec<Link>), DbError> {
    let rows = client
        .query(
            "(SELECT d.parent_run_id, w.slug, d.task, d.status, true FROM delegations d
              JOIN workspaces w ON w.id = d.workspace_id WHERE d.child_run_id = $1)
             UNION ALL
             (SELECT d.child_run_id, w.slug, d.task, d.status, false FROM delegations d
              JOIN workspaces w ON w.id = d.workspace_id WHERE d.parent_run_id = $1
              ORDER BY d.created_at LIMIT 100)",
            &[&run],
        )
        .await?;
    let mut parent = None;
    let mut children = Vec::new();
    for r in &rows {
        let link = Link {
            run: r.get(0),
            workspace: r.get(1),
            task: r.get(2),
            status: r.get(3),
        };
        if r.get::<_, bool>(4) {
            parent = Some(link);
        } else {
            children.push(link);
        }
    }
    Ok((parent, children))
}

#[cfg(test)]
mod tests;
