//! Round-robin dispatch (docs/agents.md, "Dispatch"): the eligible agent dispatched to
//! longest ago, chosen inside the run's transaction so that capacity holds however many
//! messages arrive at once.

use hermes_types::ids::WorkspaceId;

use super::agents::{Agent, COLUMNS, agent_from};
use super::{DbError, Transaction};
use crate::runs::CLOSED_SQL;

/// Keeps round-robin locks apart from the other two-key advisory locks (sessions use
/// their own class).
const ROUND_ROBIN_LOCK_CLASS: i32 = 0x5252_4f42; // "RROB"

/// Agents `a` round robin may choose in workspace `$1` for capability `$2`, capacity aside;
/// `$3` is the presence window in seconds (an external agent silent longer is passed over
/// even before the presence sweep marks it OFFLINE).
fn eligible() -> String {
    format!(
        "a.workspace_id = $1 AND a.status = 'ONLINE' AND {}
         AND (cardinality(a.capabilities) = 0 OR '*' = ANY (a.capabilities) OR $2 = ANY (a.capabilities))",
        super::agents::heard_within_sql(3)
    )
}

/// Round robin: the eligible agent dispatched to longest ago, locked for this transaction.
/// Eligible = ONLINE, heard from within `presence` (external agents), capability match (no
/// capabilities, `*`, or `capability`), and fewer open runs than `max_concurrent`.
///
/// The choice of a workspace's round robin is serialized until commit by a transaction
/// advisory lock: a choice must see every earlier choice's open run to keep capacity and the
/// turn, and those runs are only visible once their transactions commit. Skipping the agent
/// rows other transactions hold (the earlier `SKIP LOCKED`) sent every message beyond the
/// number of agents to the default persona whenever messages arrived together. The lock is
/// taken after the user's row lock and statements run in READ COMMITTED, so the choice that
/// follows it sees everything committed while it waited. Transactions of other workspaces,
/// assignments and mentions never take it, nor does a workspace with no agent round robin
/// could choose: most messages of most installs, whose commits would otherwise be
/// serialized on it, and could deadlock on it with a group commit holding user rows.
pub async fn next(
    tx: &Transaction<'_>,
    workspace_id: WorkspaceId,
    capability: &str,
    presence: std::time::Duration,
) -> Result<Option<Agent>, DbError> {
    let eligible = eligible();
    let presence = presence.as_secs_f64();
    // Capacity is left to the locked choice below: it needs the earlier choices' runs.
    let exists = format!("SELECT EXISTS (SELECT 1 FROM agents a WHERE {eligible})");
    let any_eligible: bool = tx
        .query_one(
            &crate::stmt(tx, &exists).await?,
            &[&workspace_id, &capability, &presence],
        )
        .await?
        .get(0);
    if !any_eligible {
        return Ok(None);
    }
    tx.execute(
        &crate::stmt(tx, "SELECT pg_advisory_xact_lock($1, hashtext($2::text))").await?,
        &[&ROUND_ROBIN_LOCK_CLASS, &workspace_id.as_uuid().to_string()],
    )
    .await?;
    // FOR UPDATE (no SKIP LOCKED): a row held by an assignment or a mention is waited for
    // briefly rather than passed over.
    let sql = format!(
        "SELECT {COLUMNS} FROM agents a
         WHERE {eligible}
           AND (SELECT count(*) FROM agent_runs r WHERE r.agent_id = a.id
                  AND r.status NOT IN {CLOSED_SQL}) < a.max_concurrent
         ORDER BY a.last_dispatched_at ASC NULLS FIRST, a.profile_key
         LIMIT 1 FOR UPDATE OF a"
    );
    let row = tx
        .query_opt(
            &crate::stmt(tx, &sql).await?,
            &[&workspace_id, &capability, &presence],
        )
        .await?;
    row.map(|r| agent_from(&r)).transpose()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use hermes_types::agent::{AgentKind, EngagementMode, Tone};
    use hermes_types::ids::{AgentId, RunId};
    use tokio::sync::Barrier;

    use super::*;
    use crate::Db;
    use crate::agents::{self, NewAgent};
    use crate::scratch::{ScratchDb, server_from_env};

    async fn agent(db: &Db, key: &str, max_concurrent: i32) -> Agent {
        let c = db.get().await.unwrap();
        agents::create(
            &c,
            &NewAgent {
                workspace: "default",
                profile_key: key,
                kind: AgentKind::Internal,
                display_name: key,
                tone: Tone::Chill,
                role: None,
                role_instructions: None,
                tier: None,
                toolsets: &[],
                capabilities: &[],
                webhook_url: None,
                webhook_secret_sealed: None,
                max_concurrent,
                engagement_mode: EngagementMode::Execute,
            },
        )
        .await
        .unwrap()
    }

    /// One message's dispatch as the router commits it: choose, mark, open the run.
    async fn dispatch(tx: &Transaction<'_>, workspace: WorkspaceId) -> Option<AgentId> {
        let chosen = next(tx, workspace, "general", PRESENCE).await.unwrap()?;
        agents::mark_dispatched(tx, chosen.id).await.unwrap();
        tx.execute(
            "INSERT INTO agent_runs (id, platform, sender_id, status, tier, agent_id)
             VALUES ($1, 'rest', 's', 'routed', 'free', $2)",
            &[&RunId::new(), &chosen.id],
        )
        .await
        .unwrap();
        Some(chosen.id)
    }

    const AT_ONCE: usize = 12;
    /// The default presence window (the agents here are internal, which never go silent).
    const PRESENCE: std::time::Duration = std::time::Duration::from_secs(900);

    #[tokio::test]
    async fn messages_dispatched_at_once_all_reach_agents_in_turn_within_capacity() {
        let scratch = ScratchDb::claim(&server_from_env(), "hermes_scratch")
            .await
            .unwrap();
        let db = Db::new(&scratch.url, AT_ONCE).unwrap();
        let (per_agent, to_persona, after) = at_once(&db).await;
        drop(db);
        scratch.drop_now().await.unwrap();
        assert_eq!(
            to_persona, 0,
            "every message reached an agent: {per_agent:?}"
        );
        assert_eq!(
            per_agent,
            BTreeMap::from([("ana", 4), ("ben", 4), ("cy", 4)]),
            "in turn, within capacity"
        );
        assert_eq!(
            after, None,
            "every agent is at capacity: the persona answers"
        );
    }

    /// Twelve messages dispatched at once over three agents of capacity four, then one more:
    /// the runs per agent, those left to the persona, and the last message's agent.
    async fn at_once(db: &Db) -> (BTreeMap<&'static str, usize>, usize, Option<AgentId>) {
        let mut keys = BTreeMap::new();
        let mut workspace = None;
        for key in ["ana", "ben", "cy"] {
            let a = agent(db, key, 4).await;
            workspace = Some(a.workspace_id);
            keys.insert(a.id, key);
        }
        let workspace = workspace.unwrap();
        // Every transaction is open, holding its connection, before any of them chooses.
        let barrier = Arc::new(Barrier::new(AT_ONCE));
        let tasks: Vec<_> = (0..AT_ONCE)
            .map(|_| {
                let (db, barrier) = (db.clone(), barrier.clone());
                tokio::spawn(async move {
                    let mut client = db.get().await.unwrap();
                    let tx = client.transaction().await.unwrap();
                    tx.execute("SELECT 1", &[]).await.unwrap();
                    barrier.wait().await;
                    let chosen = dispatch(&tx, workspace).await;
                    tx.commit().await.unwrap();
                    chosen
                })
            })
            .collect();
        let mut per_agent: BTreeMap<&str, usize> = BTreeMap::new();
        let mut to_persona = 0;
        for task in tasks {
            match task.await.unwrap() {
                Some(id) => *per_agent.entry(keys[&id]).or_default() += 1,
                None => to_persona += 1,
            }
        }
        let mut client = db.get().await.unwrap();
        let tx = client.transaction().await.unwrap();
        let after = dispatch(&tx, workspace).await;
        (per_agent, to_persona, after)
    }

    /// A workspace without an agent round robin could choose takes no lock: its messages'
    /// commits are neither serialized on it nor can they deadlock on it with a group commit
    /// that holds user rows (a 60 s broker outage's backlog, routed with no agents, found both).
    #[tokio::test]
    async fn a_workspace_without_eligible_agents_takes_no_lock() {
        let scratch = ScratchDb::claim(&server_from_env(), "hermes_scratch")
            .await
            .unwrap();
        let db = Db::new(&scratch.url, 2).unwrap();
        let workspace = {
            let c = db.get().await.unwrap();
            c.query_one("SELECT id FROM workspaces WHERE slug = 'default'", &[])
                .await
                .unwrap()
                .get::<_, WorkspaceId>(0)
        };
        let mut client = db.get().await.unwrap();
        let tx = client.transaction().await.unwrap();
        assert!(
            next(&tx, workspace, "general", PRESENCE)
                .await
                .unwrap()
                .is_none()
        );
        let held: i64 = db
            .get()
            .await
            .unwrap()
            .query_one(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid::bigint = $1
                   AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
                &[&i64::from(ROUND_ROBIN_LOCK_CLASS)],
            )
            .await
            .unwrap()
            .get(0);
        tx.rollback().await.unwrap();
        drop(client);
        drop(db);
        scratch.drop_now().await.unwrap();
        assert_eq!(held, 0, "no round-robin lock is held");
    }

    /// An external agent silent past the presence window is passed over while its status
    /// still says ONLINE (the presence sweep has not run), and chosen again once heard from.
    #[tokio::test]
    async fn a_silent_external_agent_is_passed_over_before_the_sweep() {
        let scratch = ScratchDb::claim(&server_from_env(), "hermes_scratch")
            .await
            .unwrap();
        let db = Db::new(&scratch.url, 2).unwrap();
        let a = agent(&db, "quiet", 2).await;
        let c = db.get().await.unwrap();
        c.execute(
            "UPDATE agents SET kind = 'external', webhook_url = 'https://agent.example/forge',
                 webhook_secret_enc = 'sealed', last_heartbeat_at = now() - interval '1 hour'
             WHERE id = $1",
            &[&a.id],
        )
        .await
        .unwrap();
        let silent = agents::get(&c, a.id).await.unwrap().unwrap();
        assert_eq!(silent.status.as_str(), "ONLINE");
        assert!(silent.is_silent(PRESENCE, chrono::Utc::now()));
        let mut client = db.get().await.unwrap();
        let tx = client.transaction().await.unwrap();
        let chosen = next(&tx, a.workspace_id, "general", PRESENCE)
            .await
            .unwrap();
        tx.rollback().await.unwrap();
        assert!(chosen.is_none(), "a silent agent is not chosen");

        c.execute(
            "UPDATE agents SET last_heartbeat_at = now() WHERE id = $1",
            &[&a.id],
        )
        .await
        .unwrap();
        let heard = agents::get(&c, a.id).await.unwrap().unwrap();
        assert!(!heard.is_silent(PRESENCE, chrono::Utc::now()));
        let tx = client.transaction().await.unwrap();
        let chosen = next(&tx, a.workspace_id, "general", PRESENCE)
            .await
            .unwrap();
        tx.rollback().await.unwrap();
        assert_eq!(chosen.map(|c| c.id), Some(a.id), "heard from: chosen");
        drop((c, client));
        drop(db);
        scratch.drop_now().await.unwrap();
    }
}
