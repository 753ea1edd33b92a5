//! Agents (docs/agents.md): internal personas answered by the fleet's models and external
//! runtimes woken by signed webhooks; created and changed by `hermes agents`, chosen for
//! each run by the router's dispatch.

use chrono::{DateTime, Utc};
use hermes_types::ids::{AgentId, DeliveryId, RunId, UserId, WorkspaceId};

use super::{Client, DbError, Transaction};
use crate::runs::CLOSED_SQL;
use hermes_types::agent::{AgentKind, AgentStatus, EngagementMode, Tone, WakeEvent};
use hermes_types::model::{BackendOverride, Tier};

/// One agent row (never the webhook secret, which stays encrypted in the database).
#[derive(Clone, Debug, serde::Serialize)]
pub struct Agent {
    pub id: AgentId,
    pub workspace_id: WorkspaceId,
    pub profile_key: String,
    pub kind: AgentKind,
    pub display_name: String,
    pub tone: Tone,
    pub role: Option<String>,
    pub role_instructions: Option<String>,
    pub tier: Option<Tier>,
    pub toolsets: Vec<String>,
    pub capabilities: Vec<String>,
    pub webhook_url: Option<String>,
    /// Wakes also carry Standard Webhooks headers (`webhook-id`, `-timestamp`, `-signature`).
    pub standard_webhooks: bool,
    pub max_concurrent: i32,
    pub status: AgentStatus,
    pub engagement_mode: EngagementMode,
    pub last_heartbeat_at: Option<DateTime<Utc>>,
    pub last_dispatched_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    /// The backend and model this agent answers on first (`hermes agents set --backend`).
    pub backend: Option<BackendOverride>,
    /// The local-host toolsets or tool names its runs may use (`--tool-allowlist`); None:
    /// no list applies (the engagement mode alone decides).
    pub tool_allowlist: Option<Vec<String>>,
    /// External agents: how long a run may wait for the agent's answer before its caller is
    /// given the fallback reply (docs/agents.md, "When an external run ends").
    pub reply_deadline_secs: i32,
    /// Internal agents: the tool rounds one run may take (the built-in persona takes one).
    pub max_tool_rounds: i32,
}

impl Agent {
    /// An external agent silent (no 2xx to a wake, no heartbeat) for longer than `window`
    /// at `now`: it counts as OFFLINE whatever its status says (docs/agents.md, "When an
    /// external run ends"). Internal agents are answered by the fleet and never go silent.
    pub fn is_silent(&self, window: std::time::Duration, now: DateTime<Utc>) -> bool {
        let heard = self.last_heartbeat_at.unwrap_or(self.created_at);
        self.kind == AgentKind::External
            && chrono::TimeDelta::from_std(window).is_ok_and(|w| heard < now - w)
    }

    /// How long a run of this agent may wait for its answer.
    pub fn reply_deadline(&self) -> std::time::Duration {
        std::time::Duration::from_secs(u64::try_from(self.reply_deadline_secs).unwrap_or(1))
    }
}

/// SQL true for an agent `a` that is not an external agent silent for longer than the
/// seconds in parameter `$n` (the query form of [`Agent::is_silent`]).
pub fn heard_within_sql(n: usize) -> String {
    format!(
        "(a.kind <> 'external' OR coalesce(a.last_heartbeat_at, a.created_at) \
         >= now() - make_interval(secs => ${n}::float8))"
    )
}

pub(crate) const COLUMNS: &str = "a.id, a.workspace_id, a.profile_key, a.kind, a.display_name, a.tone, \
    a.role, a.role_instructions, a.tier, a.toolsets, a.capabilities, a.webhook_url, \
    a.standard_webhooks, a.max_concurrent, a.status, a.engagement_mode, a.last_heartbeat_at, a.last_dispatched_at, \
    a.created_at, a.backend, a.backend_model, a.tool_allowlist, a.reply_deadline_secs, a.max_tool_rounds";

fn parse<T: std::str::FromStr<Err = String>>(
    row: &tokio_postgres::Row,
    col: &str,
) -> Result<T, DbError> {
    row.get::<_, String>(col).parse().map_err(DbError::Invalid)
}

pub(crate) fn agent_from(row: &tokio_postgres::Row) -> Result<Agent, DbError> {
    Ok(Agent {
        id: row.get("id"),
        workspace_id: row.get("workspace_id"),
        profile_key: row.get("profile_key"),
        kind: parse(row, "kind")?,
        display_name: row.get("display_name"),
        tone: parse(row, "tone")?,
        role: row.get("role"),
        role_instructions: row.get("role_instructions"),
        tier: row
            .get::<_, Option<String>>("tier")
            .map(|t| t.parse())
            .transpose()
            .map_err(DbError::Invalid)?,
        toolsets: row.get("toolsets"),
        capabilities: row.get("capabilities"),
        webhook_url: row.get("webhook_url"),
        standard_webhooks: row.get("standard_webhooks"),
        max_concurrent: row.get("max_concurrent"),
        status: parse(row, "status")?,
        engagement_mode: parse(row, "engagement_mode")?,
        last_heartbeat_at: row.get("last_heartbeat_at"),
        last_dispatched_at: row.get("last_dispatched_at"),
        created_at: row.get("created_at"),
        backend: match (
            row.get::<_, Option<String>>("backend"),
            row.get::<_, Option<String>>("backend_model"),
        ) {
            (Some(b), Some(model)) => Some(BackendOverride {
                backend: b.parse().map_err(DbError::Invalid)?,
                model,
            }),
            _ => None,
        },
        tool_allowlist: row.get("tool_allowlist"),
        reply_deadline_secs: row.get("reply_deadline_secs"),
        max_tool_rounds: row.get("max_tool_rounds"),
    })
}

/// An agent to create.
pub struct NewAgent<'a> {
    pub workspace: &'a str,
    pub profile_key: &'a str,
    pub kind: AgentKind,
    pub display_name: &'a str,
    pub tone: Tone,
    pub role: Option<&'a str>,
    pub role_instructions: Option<&'a str>,
    pub tier: Option<Tier>,
    pub toolsets: &'a [String],
    pub capabilities: &'a [String],
    pub webhook_url: Option<&'a str>,
    /// The signing secret, already sealed with the secret keys.
    pub webhook_secret_sealed: Option<&'a str>,
    pub max_concurrent: i32,
    pub engagement_mode: EngagementMode,
}

/// Create an agent; a profile key already taken in the workspace is an `Invalid` error.
pub async fn create(client: &Client, a: &NewAgent<'_>) -> Result<Agent, DbError> {
    let row = client
        .query_opt(
            &crate::stmt(
                client,
                "INSERT INTO agents (workspace_id, profile_key, kind, display_name, tone, role,
                                 role_instructions, tier, toolsets, capabilities, webhook_url,
                                 webhook_secret_enc, max_concurrent, engagement_mode)
             SELECT w.id, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14
             FROM workspaces w WHERE w.slug = $1
             ON CONFLICT (workspace_id, profile_key) DO NOTHING
             RETURNING id",
            )
            .await?,
            &[
                &a.workspace,
                &a.profile_key,
                &a.kind.as_str(),
                &a.display_name,
                &a.tone.as_str(),
                &a.role,
                &a.role_instructions,
                &a.tier.map(Tier::as_str),
                &a.toolsets,
                &a.capabilities,
                &a.webhook_url,
                &a.webhook_secret_sealed,
                &a.max_concurrent,
                &a.engagement_mode.as_str(),
            ],
        )
        .await?;
    let Some(row) = row else {
        let ws = client
            .query_opt(
                &crate::stmt(client, "SELECT 1 FROM workspaces WHERE slug = $1").await?,
                &[&a.workspace],
            )
            .await?;
        return Err(match ws {
            None => DbError::NotFound(format!("no workspace {:?}", a.workspace)),
            Some(_) => DbError::Refused(format!(
                "an agent with profile key {:?} already exists in workspace {:?}",
                a.profile_key, a.workspace
            )),
        });
    };
    get(client, row.get(0))
        .await?
        .ok_or_else(|| DbError::NotFound("agent vanished after insert".into()))
}

/// One agent by id.
pub async fn get(
    client: &impl super::GenericClient,
    id: AgentId,
) -> Result<Option<Agent>, DbError> {
    client
        .query_opt(
            &format!("SELECT {COLUMNS} FROM agents a WHERE a.id = $1"),
            &[&id],
        )
        .await?
        .map(|r| agent_from(&r))
        .transpose()
}

/// One agent by its profile key in a workspace (by slug).
pub async fn by_key(
    client: &impl super::GenericClient,
    workspace: &str,
    profile_key: &str,
) -> Result<Option<Agent>, DbError> {
    client
        .query_opt(
            &format!(
                "SELECT {COLUMNS} FROM agents a JOIN workspaces w ON w.id = a.workspace_id
                 WHERE w.slug = $1 AND a.profile_key = $2"
            ),
            &[&workspace, &profile_key],
        )
        .await?
        .map(|r| agent_from(&r))
        .transpose()
}

/// One agent by its profile key in a workspace (by id).
pub async fn by_key_in(
    client: &impl super::GenericClient,
    workspace_id: WorkspaceId,
    profile_key: &str,
) -> Result<Option<Agent>, DbError> {
    client
        .query_opt(
            &format!(
                "SELECT {COLUMNS} FROM agents a WHERE a.workspace_id = $1 AND a.profile_key = $2"
            ),
            &[&workspace_id, &profile_key],
        )
        .await?
        .map(|r| agent_from(&r))
        .transpose()
}

/// Agents of a workspace with the number of runs each has open.
pub async fn list(client: &Client, workspace: &str) -> Result<Vec<(Agent, i64)>, DbError> {
    client
        .query(
            &format!(
                "SELECT {COLUMNS}, (SELECT count(*) FROM agent_runs r WHERE r.agent_id = a.id
                                     AND r.status NOT IN {CLOSED_SQL}) AS open_runs
                 FROM agents a JOIN workspaces w ON w.id = a.workspace_id
                 WHERE w.slug = $1 ORDER BY a.profile_key"
            ),
            &[&workspace],
        )
        .await?
        .iter()
        .map(|r| Ok((agent_from(r)?, r.get("open_runs"))))
        .collect()
}

/// Does the workspace have any agent at all? (None: the built-in persona answers.)
pub async fn any(
    client: &impl super::GenericClient,
    workspace_id: WorkspaceId,
) -> Result<bool, DbError> {
    Ok(client
        .query_one(
            &crate::stmt(
                client,
                "SELECT EXISTS (SELECT 1 FROM agents WHERE workspace_id = $1)",
            )
            .await?,
            &[&workspace_id],
        )
        .await?
        .get(0))
}

/// Changes `hermes agents set` can make; `None` leaves a field alone.
#[derive(Default)]
pub struct AgentUpdate<'a> {
    pub display_name: Option<&'a str>,
    pub tone: Option<Tone>,
    pub role_instructions: Option<&'a str>,
    pub tier: Option<Tier>,
    pub toolsets: Option<&'a [String]>,
    pub capabilities: Option<&'a [String]>,
    pub webhook_url: Option<&'a str>,
    pub max_concurrent: Option<i32>,
    pub status: Option<AgentStatus>,
    pub engagement_mode: Option<EngagementMode>,
    pub standard_webhooks: Option<bool>,
    /// `Some(None)` removes the list; `Some(Some(list))` replaces it.
    pub tool_allowlist: Option<Option<&'a [String]>>,
    /// External agents: seconds a run may wait for the agent's answer.
    pub reply_deadline_secs: Option<i32>,
    /// Internal agents: the tool rounds one run may take (1 to 32).
    pub max_tool_rounds: Option<i32>,
}

/// Apply `u` to the agent; false when there is no such agent.
pub async fn update(client: &Client, id: AgentId, u: &AgentUpdate<'_>) -> Result<bool, DbError> {
    let n = client
        .execute(
            &crate::stmt(
                client,
                "UPDATE agents SET display_name = COALESCE($2, display_name),
                               tone = COALESCE($3, tone),
                               role_instructions = COALESCE($4, role_instructions),
                               tier = COALESCE($5, tier),
                               toolsets = COALESCE($6, toolsets),
                               capabilities = COALESCE($7, capabilities),
                               webhook_url = COALESCE($8, webhook_url),
                               max_concurrent = COALESCE($9, max_concurrent),
                               status = COALESCE($10, status),
                               engagement_mode = COALESCE($11, engagement_mode),
                               standard_webhooks = COALESCE($12, standard_webhooks),
                               tool_allowlist = CASE WHEN $13 THEN $14 ELSE tool_allowlist END,
                               reply_deadline_secs = COALESCE($15, reply_deadline_secs),
                               max_tool_rounds = COALESCE($16, max_tool_rounds),
                               updated_at = now()
             WHERE id = $1",
            )
            .await?,
            &[
                &id,
                &u.display_name,
                &u.tone.map(Tone::as_str),
                &u.role_instructions,
                &u.tier.map(Tier::as_str),
                &u.toolsets,
                &u.capabilities,
                &u.webhook_url,
                &u.max_concurrent,
                &u.status.map(AgentStatus::as_str),
                &u.engagement_mode.map(EngagementMode::as_str),
                &u.standard_webhooks,
                &u.tool_allowlist.is_some(),
                &u.tool_allowlist.flatten(),
                &u.reply_deadline_secs,
                &u.max_tool_rounds,
            ],
        )
        .await?;
    Ok(n == 1)
}

/// Pin the agent to a backend and model (`None`: back to the tier's chain). Returns the
/// previous setting, so a failed health check can restore it.
pub async fn set_backend(
    tx: &Transaction<'_>,
    id: AgentId,
    to: Option<&BackendOverride>,
) -> Result<Option<BackendOverride>, DbError> {
    let row = tx
        .query_opt(
            "SELECT backend, backend_model FROM agents WHERE id = $1 FOR UPDATE",
            &[&id],
        )
        .await?
        .ok_or_else(|| DbError::NotFound(format!("agent {id} does not exist")))?;
    let previous = match (
        row.get::<_, Option<String>>(0),
        row.get::<_, Option<String>>(1),
    ) {
        (Some(b), Some(model)) => Some(BackendOverride {
            backend: b.parse().map_err(DbError::Invalid)?,
            model,
        }),
        _ => None,
    };
    tx.execute(
        "UPDATE agents SET backend = $2, backend_model = $3, updated_at = now() WHERE id = $1",
        &[
            &id,
            &to.map(|o| o.backend.as_str()),
            &to.map(|o| o.model.as_str()),
        ],
    )
    .await?;
    Ok(previous)
}

/// Lock an agent row for dispatch (assignment and mentions): an explicit choice ignores
/// capacity, but the lock orders it against round robin's count of open runs.
pub async fn lock(tx: &Transaction<'_>, id: AgentId) -> Result<Option<Agent>, DbError> {
    tx.query_opt(
        &format!("SELECT {COLUMNS} FROM agents a WHERE a.id = $1 FOR UPDATE OF a"),
        &[&id],
    )
    .await?
    .map(|r| agent_from(&r))
    .transpose()
}

/// Remember that `id` was just dispatched to (round robin order).
pub async fn mark_dispatched(tx: &Transaction<'_>, id: AgentId) -> Result<(), DbError> {
    tx.execute(
        &crate::stmt(
            tx,
            "UPDATE agents SET last_dispatched_at = clock_timestamp() WHERE id = $1",
        )
        .await?,
        &[&id],
    )
    .await?;
    Ok(())
}

/// Record an activity event (the audit trail of runs and dispatch decisions).
pub async fn record_activity(
    tx: &Transaction<'_>,
    run_id: RunId,
    agent_id: Option<AgentId>,
    user_id: Option<UserId>,
    kind: &str,
    data: &serde_json::Value,
) -> Result<(), DbError> {
    tx.execute(
        &crate::stmt(
            tx,
            "INSERT INTO activity_events (run_id, agent_id, user_id, kind, data)
         VALUES ($1, $2, $3, $4, $5)",
        )
        .await?,
        &[&run_id, &agent_id, &user_id, &kind, data],
    )
    .await?;
    Ok(())
}

/// Owe an external agent a wake webhook for `run_id`; delivery fulfils the row.
pub async fn owe_wake(
    tx: &Transaction<'_>,
    delivery_id: DeliveryId,
    run_id: RunId,
    agent_id: AgentId,
    event: WakeEvent,
) -> Result<(), DbError> {
    tx.execute(
        &crate::stmt(
            tx,
            "INSERT INTO webhook_deliveries (id, run_id, agent_id, event) VALUES ($1, $2, $3, $4)",
        )
        .await?,
        &[&delivery_id, &run_id, &agent_id, &event.as_str()],
    )
    .await?;
    Ok(())
}

/// An external agent marked OFFLINE because it was silent past the presence window.
#[derive(Clone, Debug)]
pub struct WentSilent {
    pub id: AgentId,
    pub workspace_id: WorkspaceId,
    pub profile_key: String,
    /// Its last 2xx or heartbeat (None: never heard from since it was created).
    pub last_heartbeat_at: Option<DateTime<Utc>>,
}

/// Mark OFFLINE the external agents (at most `limit`) still ONLINE or BUSY although silent
/// for longer than `window`. Rows another replica holds are skipped: it is marking them.
pub async fn expire_presence(
    tx: &Transaction<'_>,
    window: std::time::Duration,
    limit: i64,
) -> Result<Vec<WentSilent>, DbError> {
    let rows = tx
        .query(
            &format!(
                "UPDATE agents SET status = 'OFFLINE', updated_at = now()
                 WHERE id IN (SELECT a.id FROM agents a
                              WHERE a.kind = 'external' AND a.status IN ('ONLINE', 'BUSY')
                                AND NOT {}
                              ORDER BY a.id LIMIT $2 FOR UPDATE SKIP LOCKED)
                 RETURNING id, workspace_id, profile_key, last_heartbeat_at",
                heard_within_sql(1)
            ),
            &[&window.as_secs_f64(), &limit],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| WentSilent {
            id: r.get(0),
            workspace_id: r.get(1),
            profile_key: r.get(2),
            last_heartbeat_at: r.get(3),
        })
        .collect())
}

/// The profile keys of every external agent (each workspace's), for the metric series that
/// start at 0 so alerts see an agent before its first expiry or re-wake.
pub async fn external_keys(client: &impl super::GenericClient) -> Result<Vec<String>, DbError> {
    Ok(client
        .query(
            "SELECT DISTINCT profile_key FROM agents WHERE kind = 'external' ORDER BY 1",
            &[],
        )
        .await?
        .iter()
        .map(|r| r.get(0))
        .collect())
}

/// How one agent's runs of a recent window went (the console's agents page).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RecentRuns {
    pub runs: i64,
    /// Median seconds from a run's creation to the agent's acknowledgement (external).
    pub ack_p50_secs: Option<f64>,
    /// Median seconds from a run's creation to its answer.
    pub answer_p50_secs: Option<f64>,
    /// Wakes sent beyond each run's first.
    pub rewakes: i64,
    /// Runs that ended `expired`: the agent never answered by the deadline.
    pub expired: i64,
}

/// How agent `id`'s runs created in the last `window` went.
pub async fn recent_runs(
    client: &Client,
    id: AgentId,
    window: std::time::Duration,
) -> Result<RecentRuns, DbError> {
    let r = client
        .query_one(
            "SELECT count(*),
                    percentile_cont(0.5) WITHIN GROUP (
                        ORDER BY extract(epoch FROM acked_at - created_at)),
                    percentile_cont(0.5) WITHIN GROUP (
                        ORDER BY extract(epoch FROM COALESCE(answered_at, finished_at) - created_at))
                        FILTER (WHERE status = 'completed'),
                    COALESCE(sum(GREATEST(wakes - 1, 0)), 0)::bigint,
                    count(*) FILTER (WHERE status = 'expired')
             FROM agent_runs
             WHERE agent_id = $1 AND created_at > now() - make_interval(secs => $2)",
            &[&id, &window.as_secs_f64()],
        )
        .await?;
    Ok(RecentRuns {
        runs: r.get(0),
        ack_p50_secs: r.get(1),
        answer_p50_secs: r.get(2),
        rewakes: r.get(3),
        expired: r.get(4),
    })
}
