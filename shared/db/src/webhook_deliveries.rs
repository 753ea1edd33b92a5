//! Wake webhooks owed to external agents (`webhook_deliveries`, written by the router):
//! what delivery needs to send one, and the record of every attempt. A delivered wake also
//! marks its agent reachable (docs/agents.md: the heartbeat is implicit).

use chrono::{DateTime, Utc};
use hermes_types::ids::{AgentId, DeliveryId, WorkspaceId};

use super::{DbError, GenericClient, Transaction};

/// Where a wake stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WakeStatus {
    /// Not delivered yet (possibly waiting for a queued retry).
    Pending,
    /// An attempt got a 2xx.
    Delivered,
    /// Given up: parked (schedule used up, a permanent refusal, or a refused address).
    Failed,
}

impl WakeStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            WakeStatus::Pending => "pending",
            WakeStatus::Delivered => "delivered",
            WakeStatus::Failed => "failed",
        }
    }

    fn parse(s: &str) -> Result<Self, DbError> {
        match s {
            "pending" => Ok(WakeStatus::Pending),
            "delivered" => Ok(WakeStatus::Delivered),
            "failed" => Ok(WakeStatus::Failed),
            other => Err(DbError::Invalid(format!("unknown wake status {other:?}"))),
        }
    }
}

/// Everything needed to send one wake: the row and its agent and workspace.
#[derive(Clone, Debug)]
pub struct WakeTarget {
    pub status: WakeStatus,
    pub attempts: i32,
    pub agent_id: AgentId,
    pub webhook_url: Option<String>,
    /// The Fernet token of the agent's signing secret (None: it signs with its workspace's).
    pub secret_sealed: Option<String>,
    /// The Fernet token of the workspace's synthetic signing secret, if it has one.
    pub workspace_secret_sealed: Option<String>,
    pub standard_webhooks: bool,
    pub workspace_id: WorkspaceId,
    pub workspace_slug: String,
    pub workspace_name: String,
    /// The contract's `workspace.key`: the workspace's own, else derived from its slug.
    pub workspace_key: String,
}

/// The wake `id` and its agent; `None` when there is no such row.
pub async fn target(
    client: &impl GenericClient,
    id: DeliveryId,
) -> Result<Option<WakeTarget>, DbError> {
    let row = client
        .query_opt(
            &super::stmt(
                client,
                "SELECT d.status, d.attempts, a.id AS agent_id, a.webhook_url,
                        a.webhook_secret_enc, a.standard_webhooks,
                        w.id AS workspace_id, w.slug, w.name, w.key AS workspace_key,
                        w.webhook_secret_enc AS workspace_secret_enc
                   FROM webhook_deliveries d
                   JOIN agents a ON a.id = d.agent_id
                   JOIN workspaces w ON w.id = a.workspace_id
                  WHERE d.id = $1",
            )
            .await?,
            &[&id],
        )
        .await?;
    row.map(|r| {
        Ok(WakeTarget {
            status: WakeStatus::parse(r.get("status"))?,
            attempts: r.get("attempts"),
            agent_id: r.get("agent_id"),
            webhook_url: r.get("webhook_url"),
            secret_sealed: r.get("webhook_secret_enc"),
            workspace_secret_sealed: r.get("workspace_secret_enc"),
            standard_webhooks: r.get("standard_webhooks"),
            workspace_id: r.get("workspace_id"),
            workspace_key: r
                .get::<_, Option<String>>("workspace_key")
                .unwrap_or_else(|| crate::workspaces::derived_key(r.get("slug"))),
            workspace_slug: r.get("slug"),
            workspace_name: r.get("name"),
        })
    })
    .transpose()
}

/// One attempt that did not deliver.
pub struct FailedAttempt<'a> {
    /// HTTP attempts made (the in-call tries of this delivery of the message).
    pub tries: i32,
    pub status_code: Option<i32>,
    /// Credentials scrubbed.
    pub error: &'a str,
    /// When the queued retry is due; `None` when the wake is given up (parked).
    pub next_attempt_at: Option<DateTime<Utc>>,
}

/// Record a failed attempt: still pending with its next attempt time, or failed for good.
pub async fn record_failure(
    client: &impl GenericClient,
    id: DeliveryId,
    a: &FailedAttempt<'_>,
) -> Result<(), DbError> {
    let status = if a.next_attempt_at.is_some() {
        WakeStatus::Pending
    } else {
        WakeStatus::Failed
    };
    client
        .execute(
            &super::stmt(
                client,
                "UPDATE webhook_deliveries
                    SET attempts = attempts + $2, last_status_code = $3, last_error = $4,
                        last_attempt_at = now(), next_attempt_at = $5, status = $6
                  WHERE id = $1 AND status <> 'delivered'",
            )
            .await?,
            &[
                &id,
                &a.tries,
                &a.status_code,
                &a.error,
                &a.next_attempt_at,
                &status.as_str(),
            ],
        )
        .await?;
    Ok(())
}

/// Record the delivering attempt and mark the agent reachable (docs/agents.md
/// `recordAgentReachable`: `last_heartbeat_at` bumped, OFFLINE → ONLINE; BUSY stays BUSY,
/// since the agent chose it), in the caller's transaction.
pub async fn record_delivered(
    tx: &Transaction<'_>,
    id: DeliveryId,
    tries: i32,
    status_code: i32,
) -> Result<(), DbError> {
    tx.execute(
        &super::stmt(
            tx,
            "WITH d AS (
                 UPDATE webhook_deliveries
                    SET attempts = attempts + $2, last_status_code = $3, last_error = NULL,
                        last_attempt_at = now(), next_attempt_at = NULL,
                        status = 'delivered', delivered_at = now()
                  WHERE id = $1
              RETURNING agent_id)
             UPDATE agents
                SET last_heartbeat_at = now(),
                    status = CASE WHEN status = 'OFFLINE' THEN 'ONLINE' ELSE status END,
                    updated_at = now()
              WHERE id = (SELECT agent_id FROM d)",
        )
        .await?,
        &[&id, &tries, &status_code],
    )
    .await?;
    Ok(())
}
