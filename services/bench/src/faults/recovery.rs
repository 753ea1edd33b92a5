//! How a fault run measures recovery: each fault's watcher (from its moment to the first
//! answer and to every message taken by then answered), and the final wait until every
//! message is answered and no run is open (docs/faults.md).

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::load::Seen;
use super::{FaultsBench, RECOVERY_BOUND};
use crate::fleet_process::Fleet;

/// Watch fault `n`'s recovery from the moment `fault_at` tells: how long until the first
/// answer, and until every message taken by then is answered; the line to print, once the
/// fault has said what it was (none when it failed).
pub(super) async fn watch(
    n: usize,
    seen: Arc<Seen>,
    fault_at: tokio::sync::oneshot::Receiver<Instant>,
    what: tokio::sync::oneshot::Receiver<(String, &'static str)>,
) -> Option<(usize, String)> {
    let back = fault_at.await.ok()?;
    let (backlog, answered_then) = (seen.taken(), seen.answered());
    let mut poll = tokio::time::interval(Duration::from_millis(50));
    let mut first = None;
    let recovered = tokio::time::timeout(Duration::from_secs(RECOVERY_BOUND), async {
        while seen.answered() < backlog {
            if first.is_none() && seen.answered() > answered_then {
                first = Some(back.elapsed());
            }
            poll.tick().await;
        }
    })
    .await
    .is_ok();
    let all = back.elapsed();
    let first = first.unwrap_or(all);
    let (what, when) = what.await.ok()?;
    let line = if recovered {
        format!(
            "{what}: first answer {:.2} s after {when}; the {backlog} messages taken by then answered {:.2} s after {when}",
            first.as_secs_f64(),
            all.as_secs_f64()
        )
    } else {
        format!(
            "{what}: the {backlog} messages accepted by then not answered within {RECOVERY_BOUND} s"
        )
    };
    eprintln!("faults: {line}");
    Some((n, line))
}

/// Wait until every message is answered and no run is open, at most `--settle-secs`.
pub(super) async fn settle(
    args: &FaultsBench,
    seen: &Seen,
    db: &hermes_db::Db,
    fleet: &mut Fleet,
    revived: &mut Vec<String>,
) -> bool {
    let mut poll = tokio::time::interval(Duration::from_millis(500));
    tokio::time::timeout(Duration::from_secs(args.settle_secs), async {
        loop {
            poll.tick().await;
            revived.extend(fleet.revive());
            let refused = seen.api.refused.load(std::sync::atomic::Ordering::SeqCst);
            if seen.answered() < args.messages - refused {
                continue;
            }
            let open = match db.get().await {
                Ok(c) => c
                    .query_one(
                        "SELECT count(*) FROM agent_runs WHERE status NOT IN ('completed', 'failed', 'cancelled', 'expired')",
                        &[],
                    )
                    .await
                    .map(|r| r.get::<_, i64>(0))
                    .unwrap_or(1),
                Err(_) => 1,
            };
            if open == 0 {
                return;
            }
        }
    })
    .await
    .is_ok()
}
