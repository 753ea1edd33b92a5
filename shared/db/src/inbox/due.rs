//! External runs that are owed something by the clock (docs/agents.md, "When an external run
//! ends"): runs past their reply deadline, whose reply the expiry sweeper claims, and runs
//! the agent has not acknowledged, woken again on the re-wake schedule. Every router replica
//! sweeps: rows are taken `FOR UPDATE SKIP LOCKED`, so each run is claimed or re-woken by one
//! replica, and a run whose reply is being claimed by its agent at that moment is skipped
//! (the claim locks it too) and looked at again on the next sweep.

use std::time::Duration;

use hermes_types::ids::RunId;

use super::{EXTERNAL_COLUMNS, EXTERNAL_FROM, ExternalRun, external_from};
use crate::runs::CLOSED_SQL;
use crate::{DbError, Transaction};

/// A run due for expiry or a re-wake, with its agent's profile key (the metrics' label).
#[derive(Clone, Debug)]
pub struct DueRun {
    pub run: ExternalRun,
    pub profile_key: String,
}

/// Claim the replies of the open runs (at most `limit`) past their reply deadline that
/// nobody answered, in `tx`: each is marked answered, so the agent's own answer, arriving
/// later, finds it ended. The caller queues each run's fallback reply in the same `tx`.
pub async fn claim_expired(tx: &Transaction<'_>, limit: i64) -> Result<Vec<DueRun>, DbError> {
    let rows = tx
        .query(
            &format!(
                "SELECT {EXTERNAL_COLUMNS}, a.profile_key
                 FROM {EXTERNAL_FROM} JOIN agents a ON a.id = r.agent_id
                 WHERE r.deadline_at <= now() AND r.answered_at IS NULL
                   AND r.status NOT IN {CLOSED_SQL}
                 ORDER BY r.deadline_at LIMIT $1
                 FOR UPDATE OF r SKIP LOCKED"
            ),
            &[&limit],
        )
        .await?;
    let due = due_from(&rows)?;
    let ids: Vec<RunId> = due.iter().map(|d| d.run.id).collect();
    tx.execute(
        "UPDATE agent_runs SET answered_at = now(), updated_at = now() WHERE id = ANY($1)",
        &[&ids],
    )
    .await?;
    Ok(due)
}

/// A run to wake again, with what its wake carries besides the run.
#[derive(Clone, Debug)]
pub struct Rewake {
    pub due: DueRun,
    /// The platform's id of the message (the wake's `run` block).
    pub external_message_id: Option<String>,
    /// A REST caller's data kept with the run.
    pub metadata: Option<serde_json::Value>,
    /// The host-side tools the first wake named (recorded with the dispatch).
    pub tool_allowlist: Vec<String>,
    /// The message's media references (recorded with its inbound interaction): a re-wake
    /// repeats them.
    pub media: Vec<hermes_types::model::Media>,
}

/// Take the open, unacknowledged, unanswered runs (at most `limit`) whose next re-wake is
/// due: a run woken `n` times (`n` ≥ 1) is due once `delays[n - 1]` has passed since its
/// latest wake was owed, while its deadline is ahead and `n` ≤ `delays.len()`. Each taken
/// run's wake count goes up by one in `tx`; the caller owes each a wake in the same `tx`.
pub async fn take_rewakes(
    tx: &Transaction<'_>,
    delays: &[Duration],
    limit: i64,
) -> Result<Vec<Rewake>, DbError> {
    if delays.is_empty() {
        return Ok(Vec::new());
    }
    let delays: Vec<f64> = delays.iter().map(Duration::as_secs_f64).collect();
    // A pull-only agent (no webhook URL) is never woken; its runs have no wake to repeat.
    let out = rewakes_where(
        tx,
        "r.deadline_at > now() AND r.answered_at IS NULL AND r.acked_at IS NULL
           AND r.status NOT IN {CLOSED} AND r.held_at IS NULL AND a.webhook_url IS NOT NULL
           AND r.wakes BETWEEN 1 AND cardinality($1::float8[])
           AND (SELECT max(d.created_at) FROM webhook_deliveries d WHERE d.run_id = r.id)
               + make_interval(secs => ($1::float8[])[r.wakes]) <= now()",
        &[&delays, &limit],
    )
    .await?;
    let ids: Vec<RunId> = out.iter().map(|r| r.due.run.id).collect();
    tx.execute(
        "UPDATE agent_runs SET wakes = wakes + 1, updated_at = now() WHERE id = ANY($1)",
        &[&ids],
    )
    .await?;
    Ok(out)
}

/// Take the held runs (at most `limit`) whose agent is ONLINE again and heard from within
/// `presence` (docs/agents.md, "BUSY pauses the dispatcher"), while their deadline is ahead:
/// each is released in `tx` (no longer held; its first wake counted when its agent has a
/// webhook URL). The caller owes those a wake in the same `tx`; a pull-only agent's run
/// simply appears in its inbox.
pub async fn take_released(
    tx: &Transaction<'_>,
    presence: Duration,
    limit: i64,
) -> Result<Vec<Released>, DbError> {
    let presence = presence.as_secs_f64();
    let heard = crate::agents::heard_within_sql(1);
    let rows = rewakes_where(
        tx,
        &format!(
            "r.held_at IS NOT NULL AND r.deadline_at > now() AND r.answered_at IS NULL
               AND r.status NOT IN {{CLOSED}} AND a.status = 'ONLINE' AND {heard}"
        ),
        &[&presence, &limit],
    )
    .await?;
    let mut out = Vec::with_capacity(rows.len());
    for r in rows {
        let wake = tx
            .query_one(
                "UPDATE agent_runs r SET held_at = NULL, updated_at = now(),
                     wakes = CASE WHEN a.webhook_url IS NULL THEN 0 ELSE 1 END
                 FROM agents a WHERE a.id = r.agent_id AND r.id = $1
                 RETURNING a.webhook_url IS NOT NULL",
                &[&r.due.run.id],
            )
            .await?;
        out.push(Released {
            woken: wake.get(0),
            rewake: r,
        });
    }
    Ok(out)
}

/// A held run released to its agent.
#[derive(Clone, Debug)]
pub struct Released {
    /// What its wake carries.
    pub rewake: Rewake,
    /// Whether it is to be woken (false: its agent is pull-only).
    pub woken: bool,
}

/// The runs matching `condition` (on `r`, the run, and `a`, its agent; `{CLOSED}` stands for
/// the closed statuses; its last parameter is the limit), locked, with what a wake carries.
async fn rewakes_where(
    tx: &Transaction<'_>,
    condition: &str,
    params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
) -> Result<Vec<Rewake>, DbError> {
    let limit = params.len();
    let condition = condition.replace("{CLOSED}", CLOSED_SQL);
    let rows = tx
        .query(
            &format!(
                "SELECT {EXTERNAL_COLUMNS}, a.profile_key, r.external_message_id, r.metadata,
                        (SELECT e.data -> 'tool_allowlist' FROM activity_events e
                         WHERE e.run_id = r.id AND e.kind = 'run.dispatched'
                         ORDER BY e.id LIMIT 1) AS tool_allowlist,
                        (SELECT i.meta -> 'media' FROM interactions i
                         WHERE i.run_id = r.id AND i.direction = 'inbound') AS media
                 FROM {EXTERNAL_FROM} JOIN agents a ON a.id = r.agent_id
                 WHERE {condition}
                 ORDER BY r.deadline_at LIMIT ${limit}
                 FOR UPDATE OF r SKIP LOCKED"
            ),
            params,
        )
        .await?;
    let mut out = Vec::with_capacity(rows.len());
    for (row, due) in rows.iter().zip(due_from(&rows)?) {
        // Recorded by the dispatch of every run that has a deadline; absent only for a run
        // dispatched with no host-side tools named.
        let tool_allowlist = row
            .get::<_, Option<serde_json::Value>>("tool_allowlist")
            .map(serde_json::from_value)
            .transpose()
            .map_err(|e| DbError::Invalid(format!("the dispatch's tool_allowlist: {e}")))?
            .unwrap_or_default();
        out.push(Rewake {
            due,
            external_message_id: row.get("external_message_id"),
            metadata: row.get("metadata"),
            tool_allowlist,
            media: crate::agent_inbox::media_from(row.get("media"))?,
        });
    }
    Ok(out)
}

fn due_from(rows: &[tokio_postgres::Row]) -> Result<Vec<DueRun>, DbError> {
    rows.iter()
        .map(|row| {
            Ok(DueRun {
                run: external_from(row)?,
                profile_key: row.get("profile_key"),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Db;
    use crate::scratch::{ScratchDb, server_from_env};
    use hermes_types::ids::AgentId;

    /// An external agent and one open run of it: created `age_secs` ago, its deadline
    /// `deadline_in_secs` from now (negative: past), woken `wakes` times, the latest wake
    /// owed `woken_secs_ago` ago.
    async fn run(
        db: &Db,
        agent: AgentId,
        age_secs: f64,
        deadline_in_secs: f64,
        wakes: i32,
        woken_secs_ago: f64,
    ) -> RunId {
        let c = db.get().await.unwrap();
        let id = RunId::new();
        c.execute(
            "INSERT INTO agent_runs (id, platform, sender_id, chat_id, status, tier, agent_id,
                 dispatch, created_at, deadline_at, wakes)
             VALUES ($1, 'telegram', 's', 'c', 'routed', 'free', $2,
                 '{\"mode\":\"ROUND_ROBIN\",\"chosen\":\"quiet\",\"reason\":\"round-robin\"}',
                 now() - make_interval(secs => $3), now() + make_interval(secs => $4), $5)",
            &[&id, &agent, &age_secs, &deadline_in_secs, &wakes],
        )
        .await
        .unwrap();
        c.execute(
            "INSERT INTO webhook_deliveries (id, run_id, agent_id, event, created_at)
             VALUES ($1, $2, $3, 'AGENT_ASSIGNED', now() - make_interval(secs => $4))",
            &[&uuid::Uuid::now_v7(), &id, &agent, &woken_secs_ago],
        )
        .await
        .unwrap();
        id
    }

    async fn taken(db: &Db, delays: &[Duration]) -> Vec<RunId> {
        let mut c = db.get().await.unwrap();
        let tx = c.transaction().await.unwrap();
        let r = take_rewakes(&tx, delays, 100).await.unwrap();
        tx.commit().await.unwrap();
        r.iter().map(|r| r.due.run.id).collect()
    }

    #[tokio::test]
    async fn the_clock_owes_expiries_re_wakes_on_schedule_and_spares_them_from_the_stuck_sweeper() {
        let scratch = ScratchDb::claim(&server_from_env(), "hermes_scratch")
            .await
            .unwrap();
        let db = Db::new(&scratch.url, 2).unwrap();
        let agent: AgentId = db
            .get()
            .await
            .unwrap()
            .query_one(
                "INSERT INTO agents (workspace_id, profile_key, kind, display_name, webhook_url,
                     webhook_secret_enc)
                 SELECT id, 'quiet', 'external', 'Quiet', 'https://agent.example', 'sealed'
                 FROM workspaces WHERE slug = 'default' RETURNING id",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        let min = Duration::from_secs(60);
        // Woken once 90 s ago: the first re-wake (after 60 s) is due; the second is not yet.
        let due_now = run(&db, agent, 90.0, 600.0, 1, 90.0).await;
        // Woken 30 s ago, and a run whose two re-wakes were sent: neither is due.
        run(&db, agent, 30.0, 600.0, 1, 30.0).await;
        run(&db, agent, 900.0, 600.0, 3, 400.0).await;
        let past_deadline = run(&db, agent, 700.0, -5.0, 1, 700.0).await;
        assert_eq!(taken(&db, &[min, min * 5]).await, vec![due_now]);
        assert!(
            taken(&db, &[min, min * 5]).await.is_empty(),
            "the count went up"
        );
        assert!(taken(&db, &[]).await.is_empty(), "no schedule, no re-wake");

        // Only the run past its deadline expires, once.
        let mut c = db.get().await.unwrap();
        let tx = c.transaction().await.unwrap();
        let expired: Vec<RunId> = claim_expired(&tx, 100)
            .await
            .unwrap()
            .iter()
            .map(|d| d.run.id)
            .collect();
        assert_eq!(expired, vec![past_deadline]);
        assert!(claim_expired(&tx, 100).await.unwrap().is_empty());
        tx.rollback().await.unwrap();

        // The stuck-run sweeper leaves external runs to their deadline: a run created 15
        // minutes ago with its deadline ahead is not stuck; one 15 minutes past it is.
        let old_deadline_ahead = run(&db, agent, 1000.0, 60.0, 1, 1000.0).await;
        let long_past = run(&db, agent, 2000.0, -1000.0, 1, 2000.0).await;
        let tx = c.transaction().await.unwrap();
        let swept: Vec<RunId> =
            crate::runs::close::stuck(&tx, Duration::from_secs(900), 100, "stuck")
                .await
                .unwrap()
                .iter()
                .map(|r| r.id)
                .collect();
        tx.rollback().await.unwrap();
        assert!(!swept.contains(&old_deadline_ahead));
        assert!(
            !swept.contains(&past_deadline),
            "5 s past: the expiry sweeper's"
        );
        assert!(swept.contains(&long_past));
        drop(c);
        drop(db);
        scratch.drop_now().await.unwrap();
    }
}
