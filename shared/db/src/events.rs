//! The event log operators' MCP clients follow (docs/operator-mcp.md, events): messages in
//! and out, approvals requested and resolved, replies that could not be delivered. Each
//! event is written in the transaction of what it records, so it exists exactly when that
//! does, and a client reads the log by cursor from any replica, after any restart.
//!
//! **Why the position is `(tx, id)` and not `id`.** Ids come from a sequence when a row is
//! inserted, but transactions commit in any order: a reader could see id 44 committed while
//! 43's transaction still runs, move its cursor to 44, and never see 43. So each row also
//! records its transaction (`tx`), and a reader is shown only rows whose transaction is
//! older than the oldest transaction still running (`pg_snapshot_xmin`): those can no longer
//! change, and no transaction still to commit can add a row before them in `(tx, id)`
//! order. The cost is that a row waits for every older running transaction to end (a few
//! milliseconds normally; a transaction left open anywhere on the server holds events back,
//! which [`Page::held_back`] reports).

use std::fmt;
use std::str::FromStr;

use hermes_types::ids::{RunId, SessionId, WorkspaceId};
use hermes_types::model::Platform;
use serde_json::Value;

use super::{DbError, GenericClient};

/// The `LISTEN` channel an insert into `events` notifies at commit.
pub const CHANNEL: &str = "hermes_events";

/// What an event records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// A message logged in a conversation, inbound or outbound.
    Message,
    /// A tool call began waiting for an operator.
    ApprovalRequested,
    /// A waiting call was allowed, denied or timed out.
    ApprovalResolved,
    /// A reply that could not be delivered and was given up on.
    DeliveryFailed,
}

impl EventKind {
    pub const ALL: [EventKind; 4] = [
        EventKind::Message,
        EventKind::ApprovalRequested,
        EventKind::ApprovalResolved,
        EventKind::DeliveryFailed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Message => "message",
            EventKind::ApprovalRequested => "approval_requested",
            EventKind::ApprovalResolved => "approval_resolved",
            EventKind::DeliveryFailed => "delivery_failed",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

/// A position in the log: the writing transaction and the row's id. Written `"<tx>.<id>"`;
/// `"0"` (or `"0.0"`) is the start of the log.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Cursor {
    tx: i64,
    id: i64,
}

impl Cursor {
    /// Before every event.
    pub const START: Cursor = Cursor { tx: 0, id: 0 };

    /// The integer form of this position (docs/operator-mcp.md, events): the sequence
    /// number of the event it is after, `0` before every event. [`at_sequence`] reads it
    /// back into the same position.
    pub fn sequence(&self) -> i64 {
        self.id
    }
}

/// The position an integer cursor names: just after event `seq` (its writing transaction
/// read from the log). An event no longer in the log (retention) or not yet written stands
/// after the newest transaction of the events numbered below it, so nothing already read is
/// shown again and nothing after it is skipped.
pub async fn at_sequence(client: &impl GenericClient, seq: i64) -> Result<Cursor, DbError> {
    if seq <= 0 {
        return Ok(Cursor::START);
    }
    let tx: i64 = client
        .query_one(
            "SELECT COALESCE(
                 (SELECT tx::text::bigint FROM events WHERE id = $1),
                 (SELECT tx::text::bigint FROM events WHERE id < $1 ORDER BY tx DESC LIMIT 1),
                 0)",
            &[&seq],
        )
        .await?
        .get(0);
    Ok(Cursor { tx, id: seq })
}

impl fmt::Display for Cursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.tx, self.id)
    }
}

/// A cursor that is not one this log gave out.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not an event cursor (use the next_cursor an earlier call returned, or \"0\")")]
pub struct BadCursor(pub String);

impl FromStr for Cursor {
    type Err = BadCursor;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || BadCursor(s.chars().take(64).collect());
        let s = s.trim();
        if s == "0" {
            return Ok(Cursor::START);
        }
        let (tx, id) = s.split_once('.').ok_or_else(bad)?;
        let tx: i64 = tx.parse().map_err(|_| bad())?;
        let id: i64 = id.parse().map_err(|_| bad())?;
        if tx < 0 || id < 0 {
            return Err(bad());
        }
        Ok(Cursor { tx, id })
    }
}

/// An event to write.
#[derive(Clone, Debug)]
pub struct NewEvent<'a> {
    pub kind: EventKind,
    /// The tenant; `None` takes the run's user's workspace.
    pub workspace_id: Option<WorkspaceId>,
    pub platform: Option<Platform>,
    pub chat_id: Option<&'a str>,
    pub session_id: Option<SessionId>,
    pub run_id: Option<RunId>,
    pub body: Value,
}

impl NewEvent<'_> {
    /// An event of `kind` about `run_id`, with `body`.
    pub fn of_run(kind: EventKind, run_id: RunId, body: Value) -> Self {
        Self {
            kind,
            workspace_id: None,
            platform: None,
            chat_id: None,
            session_id: None,
            run_id: Some(run_id),
            body,
        }
    }
}

/// Write `event` in the caller's transaction (its `NOTIFY` goes out at commit).
pub async fn record(client: &impl GenericClient, event: &NewEvent<'_>) -> Result<(), DbError> {
    client
        .execute(
            "INSERT INTO events (kind, workspace_id, platform, chat_id, session_id, run_id, body)
             SELECT $1, COALESCE($2, (SELECT u.workspace_id FROM agent_runs r
                                      JOIN users u ON u.id = r.user_id WHERE r.id = $6)),
                    $3, $4, $5, $6, $7",
            &[
                &event.kind.as_str(),
                &event.workspace_id,
                &event.platform.map(|p| p.as_str()),
                &event.chat_id,
                &event.session_id,
                &event.run_id,
                &event.body,
            ],
        )
        .await?;
    Ok(())
}

/// An event as read.
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    pub cursor: Cursor,
    pub kind: EventKind,
    pub workspace_id: Option<WorkspaceId>,
    pub platform: Option<String>,
    pub chat_id: Option<String>,
    pub session_id: Option<SessionId>,
    pub run_id: Option<RunId>,
    pub body: Value,
    pub created_at: chrono::DateTime<chrono::Utc>,
}

/// Which events a reader wants (every field `None`: all of them).
#[derive(Clone, Debug, Default)]
pub struct Filter {
    pub kinds: Option<Vec<EventKind>>,
    pub platform: Option<Platform>,
    pub session_id: Option<SessionId>,
}

/// One read of the log.
#[derive(Clone, Debug, PartialEq)]
pub struct Page {
    /// The events after the cursor that match, in log order.
    pub events: Vec<Event>,
    /// Where the next read starts: after the last event returned, or, when the page is not
    /// full, after every event that can be shown now (matching or not), so a filtered
    /// reader does not scan the same rows again.
    pub next: Cursor,
    /// Committed events exist beyond what could be shown, held back by an older transaction
    /// still running: a waiting reader looks again shortly instead of waiting for a
    /// notification that their release does not send.
    pub held_back: bool,
}

/// The shown part of the log: rows whose transaction is older than every one running.
const SETTLED: &str = "tx < pg_snapshot_xmin(pg_current_snapshot())";

/// The settled part as of a horizon read once (parameter `$n`): a read of the log is two
/// statements (the page, then where the next read starts), and each statement has its own
/// snapshot, so with [`SETTLED`] in both the horizon could move between them and the next
/// cursor pass an event the page did not hold.
fn settled_before(n: u8) -> String {
    format!("tx < ${n}::bigint::text::xid8")
}

/// The events after `after` that match `filter`, at most `limit` (1..=1000).
pub async fn after(
    client: &impl GenericClient,
    after: Cursor,
    filter: &Filter,
    limit: i64,
) -> Result<Page, DbError> {
    let limit = limit.clamp(1, 1000);
    let kinds: Option<Vec<&str>> = filter
        .kinds
        .as_ref()
        .map(|k| k.iter().map(|k| k.as_str()).collect());
    let platform = filter.platform.map(|p| p.as_str());
    let position = "(tx, id) > ($1::bigint::text::xid8, $2::bigint)";
    let horizon: i64 = client
        .query_one(
            "SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint",
            &[],
        )
        .await?
        .get(0);
    let rows = client
        .query(
            &format!(
                "SELECT tx::text::bigint AS txn, id, kind, workspace_id, platform, chat_id,
                        session_id, run_id, body, created_at
                 FROM events
                 WHERE {position} AND {settled}
                   AND ($3::text[] IS NULL OR kind = ANY($3))
                   AND ($4::text IS NULL OR platform = $4)
                   AND ($5::uuid IS NULL OR session_id = $5)
                 ORDER BY tx, id LIMIT $6",
                settled = settled_before(7)
            ),
            &[
                &after.tx,
                &after.id,
                &kinds,
                &platform,
                &filter.session_id,
                &limit,
                &horizon,
            ],
        )
        .await?;
    let mut events = Vec::with_capacity(rows.len());
    for r in &rows {
        let kind: &str = r.get("kind");
        let kind = EventKind::parse(kind)
            .ok_or_else(|| DbError::Invalid(format!("unknown event kind {kind:?}")))?;
        events.push(Event {
            cursor: Cursor {
                tx: r.get("txn"),
                id: r.get("id"),
            },
            kind,
            workspace_id: r.get("workspace_id"),
            platform: r.get("platform"),
            chat_id: r.get("chat_id"),
            session_id: r.get("session_id"),
            run_id: r.get("run_id"),
            body: r.get("body"),
            created_at: r.get("created_at"),
        });
    }
    let full = events.len() as i64 == limit;
    let edge = client
        .query_one(
            &format!(
                "SELECT (SELECT tx::text::bigint FROM events WHERE {position} AND {settled}
                         ORDER BY tx DESC, id DESC LIMIT 1) AS tx,
                        (SELECT id FROM events WHERE {position} AND {settled}
                         ORDER BY tx DESC, id DESC LIMIT 1) AS id,
                        EXISTS (SELECT 1 FROM events WHERE {position} AND NOT ({settled}))
                          AS held_back",
                settled = settled_before(3)
            ),
            &[&after.tx, &after.id, &horizon],
        )
        .await?;
    let next = match (full, events.last()) {
        (true, Some(last)) => last.cursor,
        _ => match (edge.get::<_, Option<i64>>("tx"), edge.get("id")) {
            (Some(tx), Some(id)) => Cursor { tx, id },
            _ => events.last().map_or(after, |e| e.cursor),
        },
    };
    Ok(Page {
        events,
        next,
        held_back: edge.get("held_back"),
    })
}

/// The position after every event that can be shown now: where a reader that wants only
/// what happens from now on starts.
pub async fn head(client: &impl GenericClient) -> Result<Cursor, DbError> {
    let row = client
        .query_opt(
            &format!(
                "SELECT tx::text::bigint AS tx, id FROM events WHERE {SETTLED}
                 ORDER BY tx DESC, id DESC LIMIT 1"
            ),
            &[],
        )
        .await?;
    Ok(row.map_or(Cursor::START, |r| Cursor {
        tx: r.get("tx"),
        id: r.get("id"),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_reads_back_what_it_writes_and_refuses_anything_else() {
        let c = Cursor { tx: 812, id: 44 };
        assert_eq!(c.to_string().parse::<Cursor>(), Ok(c));
        assert_eq!("0".parse::<Cursor>(), Ok(Cursor::START));
        assert_eq!("0.0".parse::<Cursor>(), Ok(Cursor::START));
        for bad in ["", "42", "a.b", "1.-2", "-1.2", "1.2.3", "1;DROP"] {
            assert!(bad.parse::<Cursor>().is_err(), "{bad:?}");
        }
        assert!(Cursor { tx: 2, id: 1 } > Cursor { tx: 1, id: 9 });
    }

    /// Read until `want` events show (other tests' transactions on the shared server may
    /// hold the horizon back for a moment), within a generous bound.
    async fn settled(db: &crate::Db, want: usize) -> Page {
        let client = db.get().await.unwrap();
        hermes_testkit_core::eventually(
            std::time::Duration::from_secs(60),
            &format!("{want} events readable"),
            || async {
                let page = after(&client, Cursor::START, &Filter::default(), 100)
                    .await
                    .unwrap();
                (page.events.len() >= want).then_some(page)
            },
        )
        .await
    }

    /// The reason for the `(tx, id)` position: a transaction that took its id first but
    /// commits last must not be skipped by a reader that already saw a later id.
    #[tokio::test]
    async fn an_event_committed_late_with_an_early_transaction_is_never_skipped() {
        crate::scratch::ScratchDb::with(|db| async move {
            let message = |run: RunId| NewEvent::of_run(EventKind::Message, run, Value::Null);
            let (early, late) = (RunId::new(), RunId::new());
            let mut x = db.get().await.unwrap();
            let x = x.transaction().await.unwrap();
            // X takes its transaction id first, then Y writes, and commits, before X does.
            x.execute("SELECT pg_current_xact_id()", &[]).await.unwrap();
            let mut y = db.get().await.unwrap();
            let y = y.transaction().await.unwrap();
            record(&y, &message(late)).await.unwrap();
            y.commit().await.unwrap();
            record(&x, &message(early)).await.unwrap();

            let client = db.get().await.unwrap();
            let page = after(&client, Cursor::START, &Filter::default(), 100)
                .await
                .unwrap();
            assert!(page.events.is_empty(), "Y's event waits for X: {page:?}");
            assert!(page.held_back);
            assert_eq!(page.next, Cursor::START);

            x.commit().await.unwrap();
            let page = settled(&db, 2).await;
            let runs: Vec<_> = page.events.iter().map(|e| e.run_id.unwrap()).collect();
            // Log order is transaction order: X's event first, though its id is larger.
            assert_eq!(runs, vec![early, late]);
            assert!(page.events[0].cursor.id > page.events[1].cursor.id);
            assert_eq!(page.next, page.events[1].cursor);
            let rest = after(&client, page.next, &Filter::default(), 100)
                .await
                .unwrap();
            assert!(rest.events.is_empty());
            assert_eq!(rest.next, page.next, "an empty read keeps its place");
            assert_eq!(head(&client).await.unwrap(), page.next);

            // A filter that matches nothing still moves the cursor past what it scanned.
            let none = Filter {
                kinds: Some(vec![EventKind::DeliveryFailed]),
                ..Filter::default()
            };
            let skipped = after(&client, Cursor::START, &none, 100).await.unwrap();
            assert!(skipped.events.is_empty());
            assert_eq!(skipped.next, page.next);
            // A full page stops at its last event.
            let one = after(&client, Cursor::START, &Filter::default(), 1)
                .await
                .unwrap();
            assert_eq!(one.next, one.events[0].cursor);
        })
        .await
    }

    #[test]
    fn every_kind_reads_back() {
        for k in EventKind::ALL {
            assert_eq!(EventKind::parse(k.as_str()), Some(k));
        }
    }
}
