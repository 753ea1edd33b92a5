//! An external agent's inbox (docs/agents.md, "The agent's side"): its open runs, and the one
//! step every way a run ends goes through — claiming the run's reply. An answer
//! (`chat.appendMessage`, `chat.finalizeDraft`), a failure (`runs.fail`) and the expiry
//! sweeper each claim the reply in the transaction that queues it, so exactly one reply is
//! ever produced for a run, whichever comes first; delivery then closes the run.

use chrono::{DateTime, Utc};
use hermes_types::envelope::Envelope;
use hermes_types::ids::{AgentId, DraftId, RunId, SessionId, UserId};
use hermes_types::model::{Exchange, Platform, Provenance, ReplyTo, Tier};
use hermes_types::stage::Outgoing;

use super::{DbError, GenericClient, Transaction, outbox};
use crate::runs::{CLOSED_SQL, RunStatus};
use hermes_types::agent::EngagementMode;

pub mod due;

/// An external agent's run as its inbox shows it.
#[derive(Clone, Debug)]
pub struct ExternalRun {
    pub id: RunId,
    pub agent_id: AgentId,
    pub platform: Platform,
    pub chat_id: String,
    pub sender_id: String,
    pub input_text: Option<String>,
    pub user_id: Option<UserId>,
    pub session_id: Option<SessionId>,
    pub tier: Tier,
    pub status: RunStatus,
    /// The mode the run was dispatched in (`None`: not recorded, treated as restricted).
    pub engagement_mode: Option<EngagementMode>,
    pub contract_version: Option<String>,
    pub dispatch: Option<serde_json::Value>,
    /// Where a REST caller's answer is POSTed (its key's callback URL).
    pub callback_url: Option<String>,
    pub created_at: DateTime<Utc>,
    pub acked_at: Option<DateTime<Utc>>,
    pub answered_at: Option<DateTime<Utc>>,
    pub deadline_at: Option<DateTime<Utc>>,
    pub wakes: i32,
    /// The draft the agent was streaming and never finalized, if any: a failure or expiry
    /// reply names it, so the chat's half-shown draft is replaced rather than left hanging.
    pub open_draft: Option<DraftId>,
}

/// The columns [`external_from`] reads, of `agent_runs r` joined with `api_keys k`.
pub const EXTERNAL_COLUMNS: &str = "r.id, r.agent_id, r.platform, r.chat_id, r.sender_id, \
    r.input_text, r.user_id, r.session_id, r.tier, r.status, r.engagement_mode, \
    r.contract_version, r.dispatch, k.callback_url, r.created_at, r.acked_at, r.answered_at, \
    r.deadline_at, r.wakes, \
    (SELECT d.id FROM agent_drafts d WHERE d.run_id = r.id AND d.finalized_at IS NULL \
     ORDER BY d.created_at DESC LIMIT 1) AS open_draft";

/// `agent_runs r` with the key that sent it, for [`EXTERNAL_COLUMNS`].
pub const EXTERNAL_FROM: &str = "agent_runs r LEFT JOIN api_keys k ON k.id = r.api_key_id";

/// Read a row selected with [`EXTERNAL_COLUMNS`].
pub fn external_from(row: &tokio_postgres::Row) -> Result<ExternalRun, DbError> {
    let platform: String = row.get("platform");
    let tier: String = row.get("tier");
    Ok(ExternalRun {
        id: row.get("id"),
        agent_id: row.get("agent_id"),
        platform: Platform::parse(&platform)
            .ok_or_else(|| DbError::Invalid(format!("unknown platform {platform:?}")))?,
        chat_id: row.get::<_, Option<String>>("chat_id").unwrap_or_default(),
        sender_id: row.get("sender_id"),
        input_text: row.get("input_text"),
        user_id: row.get("user_id"),
        session_id: row.get("session_id"),
        tier: tier.parse().map_err(DbError::Invalid)?,
        status: RunStatus::parse(row.get("status"))
            .ok_or_else(|| DbError::Invalid("unknown run status".into()))?,
        engagement_mode: row
            .get::<_, Option<String>>("engagement_mode")
            .map(|m| m.parse())
            .transpose()
            .map_err(DbError::Invalid)?,
        contract_version: row.get("contract_version"),
        dispatch: row.get("dispatch"),
        callback_url: row.get("callback_url"),
        created_at: row.get("created_at"),
        acked_at: row.get("acked_at"),
        answered_at: row.get("answered_at"),
        deadline_at: row.get("deadline_at"),
        wakes: row.get("wakes"),
        open_draft: row.get("open_draft"),
    })
}

impl ExternalRun {
    /// Where the run's reply goes.
    pub fn reply_to(&self) -> ReplyTo {
        ReplyTo {
            platform: self.platform,
            chat_id: self.chat_id.clone(),
            callback_url: self.callback_url.clone(),
            quote: None,
            interaction: None,
        }
    }

    /// The exchange delivery logs and adds to the session's history (a channel user's run).
    pub fn exchange(&self) -> Option<Exchange> {
        Some(Exchange {
            user_id: self.user_id?,
            session_id: self.session_id?,
            tier: self.tier,
            user_text: self.input_text.clone().unwrap_or_default(),
            provenance: Provenance::default(),
        })
    }

    /// Seconds from the run's dispatch to now (for the time-to-ack and time-to-answer metrics).
    pub fn age_secs(&self) -> f64 {
        (Utc::now() - self.created_at).num_milliseconds().max(0) as f64 / 1000.0
    }
}

/// Why a reply could not be claimed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unclaimed {
    /// No such run, or not this agent's (the two look the same to the caller).
    NotFound,
    /// The run is closed, or its reply was claimed already (answered, failed or expired).
    Ended,
}

/// One external run, read without a lock (`agent`: only if it is that agent's).
pub async fn get(
    client: &impl GenericClient,
    run_id: RunId,
    agent: Option<AgentId>,
) -> Result<Option<ExternalRun>, DbError> {
    let row = client
        .query_opt(
            &format!(
                "SELECT {EXTERNAL_COLUMNS} FROM {EXTERNAL_FROM}
                 WHERE r.id = $1 AND r.agent_id IS NOT NULL
                   AND ($2::uuid IS NULL OR r.agent_id = $2)"
            ),
            &[&run_id, &agent],
        )
        .await?;
    row.map(|r| external_from(&r)).transpose()
}

/// Claim the run's reply, in the transaction that will queue it: the run is locked, and
/// marked answered only if it is open and nobody claimed its reply yet.
pub async fn claim_reply(
    tx: &Transaction<'_>,
    run_id: RunId,
    agent: Option<AgentId>,
) -> Result<Result<ExternalRun, Unclaimed>, DbError> {
    let row = tx
        .query_opt(
            &format!(
                "SELECT {EXTERNAL_COLUMNS}, r.status IN {CLOSED_SQL} AS closed
                 FROM {EXTERNAL_FROM}
                 WHERE r.id = $1 AND r.agent_id IS NOT NULL
                   AND ($2::uuid IS NULL OR r.agent_id = $2)
                 FOR UPDATE OF r"
            ),
            &[&run_id, &agent],
        )
        .await?;
    let Some(row) = row else {
        return Ok(Err(Unclaimed::NotFound));
    };
    let run = external_from(&row)?;
    if row.get::<_, bool>("closed") || run.answered_at.is_some() {
        return Ok(Err(Unclaimed::Ended));
    }
    tx.execute(
        "UPDATE agent_runs SET answered_at = now(), updated_at = now() WHERE id = $1",
        &[&run_id],
    )
    .await?;
    Ok(Ok(run))
}

/// Queue `messages` (a claimed run's reply, a draft update) in the outbox of `tx`: the relay
/// publishes them once the transaction commits.
pub async fn enqueue(tx: &Transaction<'_>, messages: &[Envelope]) -> Result<(), DbError> {
    let out: Vec<Outgoing> = messages.iter().map(Outgoing::from_envelope).collect();
    outbox::enqueue(tx, &out).await
}

/// How an external run's wait for its agent starts (docs/agents.md, "When an external run
/// ends").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FirstWake {
    /// Woken now: its first wake is owed in the same transaction.
    Woken,
    /// Its agent is pull-only (no webhook URL): never woken, it finds the run in its inbox.
    PullOnly,
    /// Its agent is BUSY or OFFLINE: held, unwoken and out of the inbox, until the agent is
    /// ONLINE again (or the deadline passes).
    Held,
}

/// Start an external run's wait for its agent, in the transaction that dispatches it: its
/// reply deadline (`deadline` from now) and how it starts.
pub async fn start_wait(
    tx: &Transaction<'_>,
    run_id: RunId,
    deadline: std::time::Duration,
    first: FirstWake,
) -> Result<(), DbError> {
    let wakes: i32 = i32::from(first == FirstWake::Woken);
    let held = first == FirstWake::Held;
    tx.execute(
        &crate::stmt(
            tx,
            "UPDATE agent_runs SET deadline_at = now() + make_interval(secs => $2), wakes = $3,
                 held_at = CASE WHEN $4 THEN now() END
             WHERE id = $1",
        )
        .await?,
        &[&run_id, &deadline.as_secs_f64(), &wakes, &held],
    )
    .await?;
    Ok(())
}

/// The reply deadline of a run (`None`: the run has none, not being an external agent's
/// run of this build, or does not exist).
pub async fn deadline_of(
    client: &impl GenericClient,
    run_id: RunId,
) -> Result<Option<DateTime<Utc>>, DbError> {
    Ok(client
        .query_opt(
            "SELECT deadline_at FROM agent_runs WHERE id = $1",
            &[&run_id],
        )
        .await?
        .and_then(|r| r.get(0)))
}
