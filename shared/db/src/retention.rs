//! Retention (`docs/security.md`, "What is stored where, and for how long"): rows past their
//! family's retention are deleted oldest first, in small batches, each batch its own short
//! transaction that skips rows other transactions hold (`FOR UPDATE SKIP LOCKED`), so a sweep
//! never waits on the stages nor makes them wait. Old `credit_ledger` rows are not dropped
//! but folded, per user, into one `summary` row that keeps the ledger adding up to the
//! balance; the charge of a run still open (which a refund would look for) is never folded.
//! Several routers may sweep at once: each batch first takes a transaction-level advisory
//! lock and a replica that does not get it leaves the round to the one that did.

use hermes_config::Retention;
use hermes_types::ids::UserId;

use crate::{Db, DbError};

/// The tables the sweeper removes rows from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Table {
    AgentRuns,
    ActivityEvents,
    WebhookDeliveries,
    Interactions,
    Events,
    Sessions,
    MessageStatuses,
    UserMemory,
    CreditLedger,
    Responses,
    ForgeDeliveries,
    WhatsappWindows,
    ProxiedMessages,
    A2aTasks,
}

impl Table {
    /// The table's name (the metric label).
    pub fn as_str(self) -> &'static str {
        match self {
            Table::AgentRuns => "agent_runs",
            Table::ActivityEvents => "activity_events",
            Table::WebhookDeliveries => "webhook_deliveries",
            Table::Interactions => "interactions",
            Table::Events => "events",
            Table::Sessions => "sessions",
            Table::MessageStatuses => "message_statuses",
            Table::UserMemory => "user_memory",
            Table::CreditLedger => "credit_ledger",
            Table::Responses => "responses",
            Table::ForgeDeliveries => "forge_deliveries",
            Table::WhatsappWindows => "whatsapp_windows",
            Table::ProxiedMessages => "proxied_messages",
            Table::A2aTasks => "a2a_tasks",
        }
    }
}

/// Key of the advisory lock one sweeping replica holds per batch ("RETAIN").
const LOCK_KEY: i64 = 0x5245_5441_494E;

/// A row of this age is past `$1` days. `$2` is the batch size.
const CUTOFF: &str = "now() - make_interval(days => $1)";

/// One batch's `DELETE` per table: the oldest expired rows nobody else holds.
fn batch_sql(table: Table) -> String {
    let (key, from_where, order) = match table {
        Table::AgentRuns => (
            "id",
            // A run stays while a response stands on it (swept before, by its own days).
            format!(
                "agent_runs WHERE status IN ('completed', 'failed', 'cancelled', 'expired') AND created_at < {CUTOFF} \
                 AND NOT EXISTS (SELECT 1 FROM responses p WHERE p.run_id = agent_runs.id)"
            ),
            "created_at",
        ),
        Table::ActivityEvents => (
            "id",
            format!("activity_events WHERE created_at < {CUTOFF}"),
            "created_at",
        ),
        Table::WebhookDeliveries => (
            "id",
            format!("webhook_deliveries WHERE status <> 'pending' AND created_at < {CUTOFF}"),
            "created_at",
        ),
        Table::Interactions => (
            "id",
            format!("interactions WHERE created_at < {CUTOFF}"),
            "created_at",
        ),
        // The operators' event log (docs/operator-mcp.md): it quotes messages, so it is kept
        // as long as they are.
        Table::Events => (
            "id",
            format!("events WHERE created_at < {CUTOFF}"),
            "created_at",
        ),
        Table::Sessions => (
            "id",
            format!("sessions WHERE last_activity_at < {CUTOFF}"),
            "last_activity_at",
        ),
        Table::MessageStatuses => (
            "(platform, platform_message_id, status)",
            format!("message_statuses WHERE recorded_at < {CUTOFF}"),
            "recorded_at",
        ),
        // Facts extracted from conversations or remembered by external agents; what
        // operators set stays until changed or erased.
        Table::UserMemory => (
            "id",
            format!(
                "user_memory WHERE source IN ('extracted', 'agent') AND NOT structural \
                 AND updated_at < {CUTOFF}"
            ),
            "updated_at",
        ),
        Table::Responses => (
            "id",
            format!("responses WHERE created_at < {CUTOFF}"),
            "created_at",
        ),
        Table::ForgeDeliveries => (
            "delivery_id",
            format!("forge_deliveries WHERE received_at < {CUTOFF}"),
            "received_at",
        ),
        // When a chat's user last wrote, and their name: kept as long as their messages. No
        // index on the time (it changes with every message; the table has a row per chat).
        Table::WhatsappWindows => (
            "chat_id",
            format!("whatsapp_windows WHERE last_inbound_at < {CUTOFF}"),
            "last_inbound_at",
        ),
        // Proxy mode's ledger (docs/api.md, "Proxy mode"): where a forwarded run's answer
        // goes, kept as long as the run.
        Table::ProxiedMessages => (
            "run_id",
            format!("proxied_messages WHERE created_at < {CUTOFF}"),
            "created_at",
        ),
        // What A2A callers sent (docs/a2a.md): kept as long as the conversations' messages.
        Table::A2aTasks => (
            "run_id",
            format!("a2a_tasks WHERE created_at < {CUTOFF}"),
            "created_at",
        ),
        Table::CreditLedger => unreachable!("the ledger is summarised, not deleted"),
    };
    let name = table.as_str();
    let columns = key.trim_matches(['(', ')']);
    format!(
        "DELETE FROM {name} WHERE {key} IN \
         (SELECT {columns} FROM {from_where} ORDER BY {order} LIMIT $2 FOR UPDATE SKIP LOCKED)"
    )
}

/// The tables of each family with its retention in days, in the order they are swept
/// (messages before their sessions, events and responses before their runs).
fn families(r: &Retention) -> [(Table, u32); 14] {
    [
        (Table::Interactions, r.conversations_days),
        (Table::A2aTasks, r.conversations_days),
        (Table::WhatsappWindows, r.conversations_days),
        (Table::Events, r.conversations_days),
        (Table::Sessions, r.conversations_days),
        (Table::Responses, r.responses_days),
        (Table::ActivityEvents, r.runs_days),
        (Table::WebhookDeliveries, r.runs_days),
        (Table::AgentRuns, r.runs_days),
        (Table::ProxiedMessages, r.runs_days),
        (Table::MessageStatuses, r.statuses_days),
        (Table::UserMemory, r.facts_days),
        (Table::CreditLedger, r.ledger_days),
        (Table::ForgeDeliveries, r.forge_deliveries_days),
    ]
}

/// What one sweep did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Swept {
    /// Rows removed per table (for the ledger: rows folded away, net of the summaries).
    pub removed: Vec<(Table, u64)>,
    /// Another replica held the sweep lock: this one stopped early.
    pub yielded: bool,
}

/// Sweep every family once, `batch` rows per transaction, until nothing expired is left.
pub async fn sweep(db: &Db, retention: &Retention, batch: i64) -> Result<Swept, DbError> {
    let mut swept = Swept::default();
    for (table, days) in families(retention) {
        if days == 0 {
            continue;
        }
        let days = i32::try_from(days).unwrap_or(i32::MAX);
        let mut total = 0u64;
        loop {
            let removed = if table == Table::CreditLedger {
                fold_ledger(db, days, batch).await?
            } else {
                delete_batch(db, table, days, batch).await?
            };
            let Some(removed) = removed else {
                swept.yielded = true;
                break;
            };
            total += removed.rows;
            if !removed.more {
                break;
            }
        }
        if total > 0 {
            swept.removed.push((table, total));
        }
        if swept.yielded {
            break;
        }
    }
    Ok(swept)
}

/// What one batch removed, and whether a full batch suggests more.
struct Batch {
    rows: u64,
    more: bool,
}

/// One batch of `table`; `None` when another replica holds the lock.
async fn delete_batch(
    db: &Db,
    table: Table,
    days: i32,
    batch: i64,
) -> Result<Option<Batch>, DbError> {
    let mut client = db.get().await?;
    let tx = client.transaction().await?;
    if !locked(&tx).await? {
        return Ok(None);
    }
    let rows = tx.execute(&batch_sql(table), &[&days, &batch]).await?;
    tx.commit().await?;
    Ok(Some(Batch {
        rows,
        more: rows as i64 >= batch,
    }))
}

async fn locked(tx: &crate::Transaction<'_>) -> Result<bool, DbError> {
    Ok(tx
        .query_one("SELECT pg_try_advisory_xact_lock($1)", &[&LOCK_KEY])
        .await?
        .get(0))
}

/// Fold the expired ledger rows of up to `batch` users; `None` when another replica holds
/// the lock. A user is folded only with two or more foldable rows, so a lone summary stays.
async fn fold_ledger(db: &Db, days: i32, batch: i64) -> Result<Option<Batch>, DbError> {
    let client = db.get().await?;
    let users: Vec<UserId> = client
        .query(
            &format!(
                "SELECT l.user_id FROM credit_ledger l
                 WHERE l.created_at < {CUTOFF} AND {FOLDABLE}
                 GROUP BY l.user_id HAVING count(*) > 1 LIMIT $2"
            ),
            &[&days, &batch],
        )
        .await?
        .iter()
        .map(|r| r.get(0))
        .collect();
    drop(client);
    let mut rows = 0;
    for user in &users {
        match fold_user(db, *user, days).await? {
            Some(n) => rows += n,
            None => return Ok(None),
        }
    }
    Ok(Some(Batch {
        rows,
        more: users.len() as i64 >= batch,
    }))
}

/// A ledger row that may be folded: not the charge or refund of a run still open.
const FOLDABLE: &str = "NOT EXISTS (SELECT 1 FROM agent_runs r WHERE r.id = l.run_id \
                        AND r.status NOT IN ('completed', 'failed', 'cancelled', 'expired'))";

/// Fold one user's expired rows into one `summary` row (in their place: the newest folded
/// row's id, time and balance); returns the rows removed net of the summary.
async fn fold_user(db: &Db, user: UserId, days: i32) -> Result<Option<u64>, DbError> {
    let mut client = db.get().await?;
    let tx = client.transaction().await?;
    if !locked(&tx).await? {
        return Ok(None);
    }
    // Charges and refunds of this user serialize on the user row: so does the fold.
    tx.execute("SELECT 1 FROM users WHERE id = $1 FOR UPDATE", &[&user])
        .await?;
    let gone = tx
        .query(
            &format!(
                "DELETE FROM credit_ledger l WHERE l.user_id = $2 AND l.created_at < {CUTOFF}
                   AND {FOLDABLE}
                 RETURNING l.id, l.delta, l.balance_after, l.created_at"
            ),
            &[&days, &user],
        )
        .await?;
    if gone.len() < 2 {
        // Another fold got here first: leave the row as it was.
        tx.rollback().await?;
        return Ok(Some(0));
    }
    let newest = gone
        .iter()
        .max_by_key(|r| r.get::<_, i64>(0))
        .expect("two rows or more");
    let delta: i64 = gone.iter().map(|r| r.get::<_, i64>(1)).sum();
    let id: i64 = newest.get(0);
    let balance: i64 = newest.get(2);
    let at: chrono::DateTime<chrono::Utc> = newest.get(3);
    let note = format!("summary of {} older rows", gone.len());
    tx.execute(
        "INSERT INTO credit_ledger (id, user_id, run_id, reason, delta, balance_after, note, created_at)
         VALUES ($1, $2, NULL, 'summary', $3, $4, $5, $6)",
        &[&id, &user, &delta, &balance, &note, &at],
    )
    .await?;
    tx.commit().await?;
    Ok(Some(gone.len() as u64 - 1))
}
