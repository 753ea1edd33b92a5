//! AgentRun rows: created by the router, advanced by each stage in the same transaction as
//! its other effects, closed only through [`close`] (by delivery, the stuck-run sweeper and
//! the parking hooks). A closed run never changes again.

use hermes_types::ids::{AgentId, ApiKeyId, RunId, SessionId, UserId};
use std::fmt;

use super::{Client, DbError, Transaction};

pub mod activity;
pub mod close;
pub mod search;
mod stop;
use hermes_types::agent::{CONTRACT_VERSION, Dispatch, EngagementMode};
use hermes_types::model::{ChatMessage, Platform, Provenance, Tier, Usage};
use hermes_types::trace::TraceParent;
pub use stop::{Begin, Checked, begin_call, check, request_stop};

/// The lifecycle of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunStatus {
    Routed,
    /// A stage is working on it (the llm stage began a model call).
    Running,
    AwaitingTools,
    /// A tool call of the run waits for an operator (docs/operator-mcp.md, approvals).
    AwaitingApproval,
    Completed,
    Failed,
    /// Stopped at a caller's request before it ended (docs/api.md, runs).
    Cancelled,
    /// An external agent's run past its reply deadline: its caller got the fallback reply
    /// and its credit back (docs/agents.md, "When an external run ends").
    Expired,
}

/// The closed statuses as an SQL list, for `status IN` / `NOT IN` (the partial indexes of
/// open and closed runs name the same list, migrations/0018).
pub const CLOSED_SQL: &str = "('completed', 'failed', 'cancelled', 'expired')";

impl RunStatus {
    /// Every status, in a run's order.
    pub const ALL: [RunStatus; 8] = [
        RunStatus::Routed,
        RunStatus::Running,
        RunStatus::AwaitingTools,
        RunStatus::AwaitingApproval,
        RunStatus::Completed,
        RunStatus::Failed,
        RunStatus::Cancelled,
        RunStatus::Expired,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Routed => "routed",
            RunStatus::Running => "running",
            RunStatus::AwaitingTools => "awaiting_tools",
            RunStatus::AwaitingApproval => "awaiting_approval",
            RunStatus::Completed => "completed",
            RunStatus::Failed => "failed",
            RunStatus::Cancelled => "cancelled",
            RunStatus::Expired => "expired",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [
            Self::Routed,
            Self::Running,
            Self::AwaitingTools,
            Self::AwaitingApproval,
            Self::Completed,
            Self::Failed,
            Self::Cancelled,
            Self::Expired,
        ]
        .into_iter()
        .find(|r| r.as_str() == s)
    }

    pub fn is_final(self) -> bool {
        matches!(
            self,
            RunStatus::Completed | RunStatus::Failed | RunStatus::Cancelled | RunStatus::Expired
        )
    }
}

impl fmt::Display for RunStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the router knows when it creates a run.
pub struct NewRun<'a> {
    pub id: RunId,
    pub platform: Platform,
    pub sender_id: &'a str,
    pub chat_id: &'a str,
    pub external_message_id: Option<&'a str>,
    pub tier: Tier,
    pub input_text: Option<&'a str>,
    pub metadata: Option<&'a serde_json::Value>,
    pub api_key_id: Option<ApiKeyId>,
    pub traceparent: Option<&'a str>,
}

/// Insert the run; false when it already exists (a replay) or another run already holds
/// the same platform message (a duplicate webhook).
pub async fn create(tx: &Transaction<'_>, run: &NewRun<'_>) -> Result<bool, DbError> {
    let n = tx
        .execute(
            &crate::stmt(tx, "INSERT INTO agent_runs (id, platform, sender_id, chat_id, external_message_id, status,
                                     tier, input_text, metadata, api_key_id, traceparent)
             VALUES ($1, $2, $3, $4, $5, 'routed', $6, $7, $8, $9, $10) ON CONFLICT DO NOTHING").await?,
            &[
                &run.id.as_uuid(),
                &run.platform.as_str(),
                &run.sender_id,
                &run.chat_id,
                &run.external_message_id,
                &run.tier.as_str(),
                &run.input_text,
                &run.metadata,
                &run.api_key_id,
                &run.traceparent,
            ],
        )
        .await?;
    Ok(n == 1)
}

/// The run that holds message `external_id` of `platform` sent with `api_key` (`None`: the
/// operator key or a chat platform), whatever its age: a caller repeating a message is told
/// this run, never handed a new one the unique index will refuse.
pub async fn find_by_message(
    client: &Client,
    platform: Platform,
    api_key: Option<ApiKeyId>,
    external_id: &str,
) -> Result<Option<RunId>, DbError> {
    let row = client
        .query_opt(
            &crate::stmt(
                client,
                "SELECT id FROM agent_runs WHERE platform = $1 AND external_message_id = $3
                 AND COALESCE(api_key_id, '00000000-0000-0000-0000-000000000000'::uuid)
                   = COALESCE($2::uuid, '00000000-0000-0000-0000-000000000000'::uuid)",
            )
            .await?,
            &[&platform.as_str(), &api_key, &external_id],
        )
        .await?;
    Ok(row.map(|r| RunId::from(r.get::<_, uuid::Uuid>(0))))
}

/// The router's decision about a run, recorded in the transaction that created it.
pub struct Routing<'a> {
    pub user_id: UserId,
    pub agent_id: Option<AgentId>,
    pub session_id: Option<SessionId>,
    pub dispatch: Option<&'a Dispatch>,
    pub engagement_mode: Option<EngagementMode>,
    pub credits_charged: i64,
    pub tier: Tier,
    pub provenance: Option<&'a Provenance>,
}

/// Record who the run is for, which agent answers it, and how it was chosen.
pub async fn set_routing(tx: &Transaction<'_>, id: RunId, r: &Routing<'_>) -> Result<(), DbError> {
    let dispatch = r
        .dispatch
        .map(serde_json::to_value)
        .transpose()
        .map_err(|e| DbError::Invalid(e.to_string()))?;
    let provenance = r.provenance.map(Provenance::to_meta);
    tx.execute(
        &crate::stmt(
            tx,
            "UPDATE agent_runs SET user_id = $2, agent_id = $3, session_id = $4, dispatch = $5,
                engagement_mode = $6, contract_version = $7, credits_charged = $8, tier = $9,
                provenance = $10, updated_at = now()
         WHERE id = $1",
        )
        .await?,
        &[
            &id.as_uuid(),
            &r.user_id,
            &r.agent_id,
            &r.session_id,
            &dispatch,
            &r.engagement_mode.map(EngagementMode::as_str),
            &r.engagement_mode.map(|_| CONTRACT_VERSION),
            &r.credits_charged,
            &r.tier.as_str(),
            &provenance,
        ],
    )
    .await?;
    Ok(())
}

/// How an agent's run with no user (a Forge's wake) was routed: the agent, its dispatch,
/// the engagement mode and the contract version the dispatcher named.
pub struct AgentRouting<'a> {
    pub agent_id: AgentId,
    pub dispatch: &'a Dispatch,
    pub engagement_mode: EngagementMode,
    pub contract_version: &'a str,
}

/// Record an agent's routing on the run `id`, created in the same transaction.
pub async fn set_agent_routing(
    tx: &Transaction<'_>,
    id: RunId,
    r: &AgentRouting<'_>,
) -> Result<(), DbError> {
    let dispatch = serde_json::to_value(r.dispatch).map_err(|e| DbError::Invalid(e.to_string()))?;
    tx.execute(
        &crate::stmt(
            tx,
            "UPDATE agent_runs SET agent_id = $2, dispatch = $3, engagement_mode = $4,
                contract_version = $5, updated_at = now()
             WHERE id = $1",
        )
        .await?,
        &[
            &id.as_uuid(),
            &r.agent_id,
            &dispatch,
            &r.engagement_mode.as_str(),
            &r.contract_version,
        ],
    )
    .await?;
    Ok(())
}

/// Everything the router records about a routed run besides the run itself: its routing,
/// the inbound interaction and the dispatch activity event (see [`create_routed`]).
pub struct Routed<'a> {
    pub routing: Routing<'a>,
    /// The user's turn as logged in `interactions`, with its `meta`.
    pub text: &'a str,
    pub inbound_meta: &'a serde_json::Value,
    /// The `activity_events` kind and data.
    pub activity: &'a str,
    pub activity_data: &'a serde_json::Value,
}

/// Create a routed run with its routing, its inbound interaction and its activity event in
/// one statement. False (and nothing written) when the run exists already or another run
/// holds the same platform message.
pub async fn create_routed(
    tx: &Transaction<'_>,
    run: &NewRun<'_>,
    r: &Routed<'_>,
) -> Result<bool, DbError> {
    let g = &r.routing;
    let dispatch = g
        .dispatch
        .map(serde_json::to_value)
        .transpose()
        .map_err(|e| DbError::Invalid(e.to_string()))?;
    let provenance = g.provenance.map(Provenance::to_meta);
    let row = tx
        .query_one(
            &crate::stmt(
                tx,
                &format!("WITH r AS (INSERT INTO agent_runs (id, platform, sender_id, chat_id,
                                external_message_id, status, tier, input_text, metadata,
                                api_key_id, traceparent, user_id, agent_id, session_id, dispatch,
                                engagement_mode, contract_version, credits_charged, provenance)
                            VALUES ($1, $2, $3, $4, $5, 'routed', $6, $7, $8, $9, $10, $11, $12,
                                    $13, $14, $15, $16, $17, $18)
                            ON CONFLICT DO NOTHING RETURNING id),
                      i AS (INSERT INTO interactions (run_id, user_id, session_id, direction, text, meta)
                            SELECT id, $11, $13, 'inbound', $19, $20 FROM r
                            ON CONFLICT (run_id, direction) DO NOTHING
                            RETURNING id, run_id, user_id, session_id, direction, text),
                      e AS ({}),
                      a AS (INSERT INTO activity_events (run_id, agent_id, user_id, kind, data)
                            SELECT id, $12, $11, $21, $22 FROM r)
                 SELECT count(*) FROM r",
                // The inbound `message` event (docs/operator-mcp.md, events).
                crate::interactions::message_events("i", "$23")
            ),
            )
            .await?,
            &[
                &run.id.as_uuid(),
                &run.platform.as_str(),
                &run.sender_id,
                &run.chat_id,
                &run.external_message_id,
                &g.tier.as_str(),
                &run.input_text,
                &run.metadata,
                &run.api_key_id,
                &run.traceparent,
                &g.user_id,
                &g.agent_id,
                &g.session_id,
                &dispatch,
                &g.engagement_mode.map(EngagementMode::as_str),
                &g.engagement_mode.map(|_| CONTRACT_VERSION),
                &g.credits_charged,
                &provenance,
                &r.text,
                r.inbound_meta,
                &r.activity,
                r.activity_data,
                &crate::interactions::EVENT_TEXT_CHARS,
            ],
        )
        .await?;
    Ok(row.get::<_, i64>(0) == 1)
}

/// Move an open run to `status` (no effect on a closed run).
pub async fn advance(tx: &Transaction<'_>, id: RunId, status: RunStatus) -> Result<(), DbError> {
    tx.execute(
        &crate::stmt(
            tx,
            "UPDATE agent_runs SET status = $2, updated_at = now()
         WHERE id = $1 AND status NOT IN ('completed', 'failed', 'cancelled', 'expired')",
        )
        .await?,
        &[&id.as_uuid(), &status.as_str()],
    )
    .await?;
    Ok(())
}

/// Put run `id` in session `session`: an API run of a chain of responses, which has no
/// user and so no [`Routing`] (docs/api.md, "Responses").
pub async fn set_session(
    tx: &Transaction<'_>,
    id: RunId,
    session: SessionId,
) -> Result<(), DbError> {
    tx.execute(
        &crate::stmt(
            tx,
            "UPDATE agent_runs SET session_id = $2, updated_at = now() WHERE id = $1",
        )
        .await?,
        &[&id.as_uuid(), &session],
    )
    .await?;
    Ok(())
}

/// A run as stored.
#[derive(Clone, Debug)]
pub struct RunRow {
    pub id: RunId,
    pub platform: Option<Platform>,
    pub api_key_id: Option<ApiKeyId>,
    pub created_at: chrono::DateTime<chrono::Utc>,
    pub finished_at: Option<chrono::DateTime<chrono::Utc>>,
    pub status: RunStatus,
    pub output_text: Option<String>,
    pub error_code: Option<String>,
    /// What went wrong with a failed run, scrubbed: for operators only.
    pub error_detail: Option<String>,
    pub model: Option<String>,
    pub usage: Usage,
    pub tools_used: Vec<String>,
    /// The tool round of a completed run (empty when no tool ran).
    pub transcript: Vec<ChatMessage>,
    /// What the caller sent with the run (the REST channel's `metadata`; for `POST /v1/runs`
    /// its `session_id`, `previous_response_id` and dispatch fields).
    pub metadata: Option<serde_json::Value>,
    /// When a stop was asked for (`POST /v1/runs/{id}/stop`).
    pub stop_requested_at: Option<chrono::DateTime<chrono::Utc>>,
}

/// A stored transcript; one that no longer parses reads as none (it only adds context).
pub fn transcript_of(v: Option<serde_json::Value>) -> Vec<ChatMessage> {
    stored_list(v)
}

/// A JSON list kept beside a run (its transcript, its model calls) that only adds context:
/// one written by another build that no longer parses reads as none, so the run itself still
/// shows.
fn stored_list<T: serde::de::DeserializeOwned>(v: Option<serde_json::Value>) -> Vec<T> {
    v.and_then(|v| serde_json::from_value(v).ok())
        .unwrap_or_default()
}

/// The W3C `traceparent` the run was routed under (`None`: no such run, or none recorded),
/// whose trace id names the run's trace (docs/tracing.md).
pub async fn traceparent(client: &Client, id: RunId) -> Result<Option<TraceParent>, DbError> {
    let row = client
        .query_opt(
            "SELECT traceparent FROM agent_runs WHERE id = $1",
            &[&id.as_uuid()],
        )
        .await?;
    Ok(row
        .and_then(|r| r.get::<_, Option<String>>(0))
        .and_then(|t| TraceParent::parse(&t)))
}

/// Run `id`'s model calls, each with its own model, usage and time
/// (docs/console.md, "A run's page"): none for a run still open, one no model answered, one
/// closed before they were kept (migration 0042), or a list that no longer parses.
pub async fn model_calls(
    client: &Client,
    id: RunId,
) -> Result<Vec<hermes_types::model::ModelCall>, DbError> {
    let row = client
        .query_opt(
            "SELECT model_calls FROM agent_runs WHERE id = $1",
            &[&id.as_uuid()],
        )
        .await?;
    Ok(stored_list(
        row.and_then(|r| r.get::<_, Option<serde_json::Value>>(0)),
    ))
}

pub async fn get(client: &Client, id: RunId) -> Result<Option<RunRow>, DbError> {
    let row = client
        .query_opt(
            &crate::stmt(
                client,
                "SELECT status, output_text, error_code, model, tokens_in, tokens_out, tools_used,
                    platform, api_key_id, created_at, finished_at, cost_micro_usd, error_detail,
                    transcript, metadata, stop_requested_at
             FROM agent_runs WHERE id = $1",
            )
            .await?,
            &[&id.as_uuid()],
        )
        .await?;
    Ok(row.map(|r| RunRow {
        id,
        platform: Platform::parse(r.get(7)),
        api_key_id: r.get(8),
        created_at: r.get(9),
        finished_at: r.get(10),
        status: RunStatus::parse(r.get(0)).unwrap_or(RunStatus::Failed),
        output_text: r.get(1),
        error_code: r.get(2),
        error_detail: r.get(12),
        model: r.get(3),
        usage: Usage {
            input_tokens: r.get::<_, i64>(4) as u64,
            output_tokens: r.get::<_, i64>(5) as u64,
            cost_micro_usd: r.get::<_, i64>(11) as u64,
        },
        tools_used: r.get(6),
        transcript: transcript_of(r.get(13)),
        metadata: r.get(14),
        stop_requested_at: r.get(15),
    }))
}

/// The fleet's open runs (not yet completed, failed, cancelled or expired) and the distinct
/// agents they belong to, read from the partial index of open runs in one statement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpenRuns {
    /// Runs in flight.
    pub runs: i64,
    /// Agents (internal or external) with at least one run in flight.
    pub agents: i64,
}

/// [`OpenRuns`] now.
pub async fn count_open(client: &Client) -> Result<OpenRuns, DbError> {
    let row = client
        .query_one(
            "SELECT count(*), count(DISTINCT agent_id) FROM agent_runs
             WHERE status NOT IN ('completed', 'failed', 'cancelled', 'expired')",
            &[],
        )
        .await?;
    Ok(OpenRuns {
        runs: row.get(0),
        agents: row.get(1),
    })
}

#[cfg(test)]
mod stored_tests {
    use hermes_types::model::ModelCall;
    use serde_json::json;

    use super::stored_list;

    #[test]
    fn a_kept_list_that_no_longer_parses_reads_as_none_and_a_good_one_as_written() {
        let call = json!([{"round": 0, "at": "2026-11-29T08:00:00Z", "model": "fast",
                           "usage": {"input_tokens": 3, "output_tokens": 4}, "ms": 5}]);
        let read: Vec<ModelCall> = stored_list(Some(call));
        assert_eq!((read.len(), read[0].usage.output_tokens), (1, 4));
        let other_shape: Vec<ModelCall> = stored_list(Some(json!({"calls": 1})));
        assert!(other_shape.is_empty());
        assert!(stored_list::<ModelCall>(None).is_empty());
    }
}
