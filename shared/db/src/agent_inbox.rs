//! What an external agent reads and writes through the MCP surface (docs/agents.md, "The
//! agent's side") besides claiming a run's reply ([`crate::inbox`]): its inbox filtered by
//! acknowledgement, the acknowledgement itself, its heartbeat, the context bundle's reads
//! (the run's metadata, the user's memory) and a run for a message the agent sends to another
//! conversation of the same user. Every statement is scoped to the calling agent, so another
//! agent's run reads as absent.

use chrono::{DateTime, Utc};
use hermes_types::agent::{AgentStatus, EngagementMode};
use hermes_types::ids::{AgentId, RunId, UserId};
use hermes_types::model::{Media, Platform};

use super::inbox::{EXTERNAL_COLUMNS, EXTERNAL_FROM, ExternalRun, external_from};
use super::{DbError, GenericClient, Transaction};
use crate::agents::{Agent, COLUMNS, agent_from};
use crate::runs::CLOSED_SQL;

/// Which open runs `inbox.list` shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AckFilter {
    /// Runs the agent has not acknowledged yet (the ones a wake announced).
    Unacked,
    /// Runs acknowledged and not yet answered.
    Acked,
    /// Both.
    All,
}

impl AckFilter {
    /// The spelling of `inbox.list`'s `status` argument.
    pub fn as_str(self) -> &'static str {
        match self {
            AckFilter::Unacked => "unacked",
            AckFilter::Acked => "acked",
            AckFilter::All => "all",
        }
    }

    /// The filter spelled `s`, if any.
    pub fn parse(s: &str) -> Option<Self> {
        [AckFilter::Unacked, AckFilter::Acked, AckFilter::All]
            .into_iter()
            .find(|f| f.as_str() == s)
    }
}

/// The agent's open runs whose reply is still owed, oldest first.
pub async fn open_runs(
    client: &impl GenericClient,
    agent: AgentId,
    filter: AckFilter,
    limit: i64,
) -> Result<Vec<ExternalRun>, DbError> {
    let acked = match filter {
        AckFilter::Unacked => Some(false),
        AckFilter::Acked => Some(true),
        AckFilter::All => None,
    };
    let rows = client
        .query(
            &format!(
                "SELECT {EXTERNAL_COLUMNS} FROM {EXTERNAL_FROM}
                 WHERE r.agent_id = $1 AND r.status NOT IN {CLOSED_SQL} AND r.answered_at IS NULL
                   AND r.held_at IS NULL
                   AND ($2::boolean IS NULL OR (r.acked_at IS NOT NULL) = $2)
                 ORDER BY r.created_at, r.id LIMIT $3"
            ),
            &[&agent, &acked, &limit],
        )
        .await?;
    rows.iter().map(external_from).collect()
}

/// How many runs the agent holds open (what its `max_concurrent` is counted against).
pub async fn open_count(client: &impl GenericClient, agent: AgentId) -> Result<i64, DbError> {
    let row = client
        .query_one(
            &format!(
                "SELECT count(*) FROM agent_runs WHERE agent_id = $1 AND status NOT IN {CLOSED_SQL}"
            ),
            &[&agent],
        )
        .await?;
    Ok(row.get(0))
}

/// The result of an acknowledgement.
#[derive(Clone, Debug)]
pub enum Acked {
    /// This call acknowledged the run (first time): the run as it was dispatched.
    First(Box<ExternalRun>),
    /// The run was acknowledged before, at this moment.
    Already(DateTime<Utc>),
    /// No such run of this agent.
    NotFound,
}

/// Acknowledge `run` for `agent`: the first call sets `acked_at` and records an
/// `activity_events` row (`run.acked`) in the same transaction; later calls change nothing.
pub async fn ack(tx: &Transaction<'_>, run: RunId, agent: AgentId) -> Result<Acked, DbError> {
    let row = tx
        .query_opt(
            "UPDATE agent_runs SET acked_at = now(), updated_at = now()
             WHERE id = $1 AND agent_id = $2 AND acked_at IS NULL
             RETURNING id",
            &[&run, &agent],
        )
        .await?;
    if row.is_none() {
        let before = tx
            .query_opt(
                "SELECT acked_at FROM agent_runs WHERE id = $1 AND agent_id = $2",
                &[&run, &agent],
            )
            .await?;
        return Ok(
            match before.and_then(|r| r.get::<_, Option<DateTime<Utc>>>(0)) {
                Some(at) => Acked::Already(at),
                None => Acked::NotFound,
            },
        );
    }
    let Some(found) = crate::inbox::get(tx, run, Some(agent)).await? else {
        return Ok(Acked::NotFound);
    };
    crate::agents::record_activity(
        tx,
        run,
        Some(agent),
        found.user_id,
        "run.acked",
        &serde_json::json!({ "acked_at": found.acked_at }),
    )
    .await?;
    Ok(Acked::First(Box::new(found)))
}

/// Record a heartbeat: `last_heartbeat_at = now()`, and the status `status` when given, else
/// OFFLINE → ONLINE (BUSY stays BUSY: the agent said it is busy). The agent after it.
pub async fn heartbeat(
    client: &impl GenericClient,
    agent: AgentId,
    status: Option<AgentStatus>,
) -> Result<Option<Agent>, DbError> {
    let row = client
        .query_opt(
            &format!(
                "UPDATE agents a SET last_heartbeat_at = now(),
                    status = COALESCE($2, CASE WHEN a.status = 'OFFLINE' THEN 'ONLINE' ELSE a.status END)
                 WHERE a.id = $1 RETURNING {COLUMNS}"
            ),
            &[&agent, &status.map(AgentStatus::as_str)],
        )
        .await?;
    row.map(|r| agent_from(&r)).transpose()
}

/// What the caller sent with the run (the REST channel's `metadata`, the API's dispatch
/// fields), for the context bundle.
pub async fn run_metadata(
    client: &impl GenericClient,
    run: RunId,
) -> Result<Option<serde_json::Value>, DbError> {
    let row = client
        .query_opt("SELECT metadata FROM agent_runs WHERE id = $1", &[&run])
        .await?;
    Ok(row.and_then(|r| r.get(0)))
}

/// The media references of the run's message, as the router recorded them with its inbound
/// interaction (none: it carried none).
pub async fn run_media(client: &impl GenericClient, run: RunId) -> Result<Vec<Media>, DbError> {
    let row = client
        .query_opt(
            "SELECT meta -> 'media' FROM interactions WHERE run_id = $1 AND direction = 'inbound'",
            &[&run],
        )
        .await?;
    media_from(row.and_then(|r| r.get(0)))
}

/// Media references read from an interaction's `meta -> 'media'` (absent: none).
pub fn media_from(value: Option<serde_json::Value>) -> Result<Vec<Media>, DbError> {
    value
        .map(serde_json::from_value)
        .transpose()
        .map_err(|e| DbError::Invalid(format!("an inbound message's media: {e}")))
        .map(Option::unwrap_or_default)
}

/// The user's newest free facts (not the structural values: [`crate::memory::structural`]),
/// as `(key, value)`, newest first.
pub async fn recent_facts(
    client: &impl GenericClient,
    user: UserId,
    limit: i64,
) -> Result<Vec<(String, String)>, DbError> {
    let rows = client
        .query(
            "SELECT key, value FROM user_memory WHERE user_id = $1 AND NOT structural
             ORDER BY id DESC LIMIT $2",
            &[&user, &limit],
        )
        .await?;
    Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
}

/// Whether `sender_id` on the chat `platform` is an activated channel of `user` (a chat
/// platform's sender, never a REST key's).
pub async fn is_users_chat(
    client: &impl GenericClient,
    user: UserId,
    platform: Platform,
    sender_id: &str,
) -> Result<bool, DbError> {
    let row = client
        .query_opt(
            "SELECT 1 FROM user_channels
             WHERE user_id = $1 AND platform = $2 AND sender_id = $3 AND api_key_id IS NULL
               AND activated",
            &[&user, &platform.as_str(), &sender_id],
        )
        .await?;
    Ok(row.is_some())
}

/// A message an agent sends to another conversation of its run's user (`chat.sendMessage`).
pub struct SentMessage<'a> {
    /// The new run that carries it.
    pub id: RunId,
    /// The agent's run it was sent from.
    pub from: &'a ExternalRun,
    pub engagement_mode: EngagementMode,
    pub platform: Platform,
    pub chat_id: &'a str,
}

/// Create the run of a message sent to another conversation: already answered (its reply is
/// queued in the same transaction, and delivery closes it), so it never shows in the agent's
/// inbox; nothing is charged. An `activity_events` row (`run.message_sent`) records where
/// it came from.
pub async fn create_sent(tx: &Transaction<'_>, m: &SentMessage<'_>) -> Result<(), DbError> {
    let meta = serde_json::json!({ "sent_from_run": m.from.id });
    tx.execute(
        "INSERT INTO agent_runs (id, platform, sender_id, chat_id, status, tier, user_id,
                                 agent_id, engagement_mode, contract_version, credits_charged,
                                 metadata, acked_at, answered_at)
         VALUES ($1, $2, $3, $3, 'routed', $4, $5, $6, $7, $8, 0, $9, now(), now())",
        &[
            &m.id,
            &m.platform.as_str(),
            &m.chat_id,
            &m.from.tier.as_str(),
            &m.from.user_id,
            &m.from.agent_id,
            &m.engagement_mode.as_str(),
            &m.from.contract_version,
            &meta,
        ],
    )
    .await?;
    crate::agents::record_activity(
        tx,
        m.id,
        Some(m.from.agent_id),
        m.from.user_id,
        "run.message_sent",
        &serde_json::json!({ "from_run": m.from.id, "platform": m.platform.as_str() }),
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::AckFilter;

    #[test]
    fn ack_filters_read_back_their_spelling() {
        for f in [AckFilter::Unacked, AckFilter::Acked, AckFilter::All] {
            assert_eq!(AckFilter::parse(f.as_str()), Some(f));
        }
        assert_eq!(AckFilter::parse("UNACKED"), None);
    }
}
