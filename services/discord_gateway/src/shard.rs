//! One shard on this replica: wait for its lease, hold the session while the lease is
//! held (reconnecting and resuming across connections), and hand the lease back when the
//! process stops or Discord refuses the shard for good.

use std::sync::Arc;
use std::time::Duration;

use rand::Rng;
use tokio_util::sync::CancellationToken;

use crate::Shared;
use crate::connection::{self, Ended};
use crate::lease::{Asked, Leases};
use crate::protocol::{self, Shard};
use crate::session::Session;

/// How long after the holder's lease would expire a standby looks again: PostgreSQL's
/// `now()` has moved on by then.
const EXPIRY_MARGIN: Duration = Duration::from_millis(20);

/// The longest wait between tries to connect.
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// How the shard's session ended while its lease was held.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    /// The lease was lost or the process stops.
    Stopped,
    /// Discord closed with a code after which it must not reconnect.
    Fatal(u16),
}

/// Hold `shard` whenever its lease is free, until `stop`; the close code when Discord
/// refused the shard for good.
pub async fn hold(
    shared: Arc<Shared>,
    leases: Leases,
    shard: Shard,
    stop: CancellationToken,
) -> Option<u16> {
    let m = &shared.metrics;
    let label = shard.label();
    loop {
        // Looked at again when the holder's lease would expire, so that a dead holder's
        // shard is taken within one lease period of its last renewal.
        let mut next_look = leases.every();
        let took_over = match leases.acquire(shard).await {
            Ok(Asked::Held { took_over }) => Some(took_over),
            Ok(Asked::Taken { left }) => {
                next_look = (left + EXPIRY_MARGIN).min(leases.every());
                None
            }
            Err(e) => {
                tracing::warn!(%shard, error = %e, "cannot ask for the shard's lease");
                None
            }
        };
        if let Some(took_over) = took_over {
            if took_over {
                m.lease_takeovers.with_label_values(&[&label]).inc();
                tracing::info!(%shard, "took over the shard of a replica whose lease expired");
            }
            m.shards_held.inc();
            let lost = stop.child_token();
            let keeper = tokio::spawn({
                let (leases, lost, shared) = (leases.clone(), lost.clone(), shared.clone());
                async move { leases.keep(shard, lost, || shared.is_up(shard)).await }
            });
            let outcome = sessions(&shared, shard, &lost).await;
            lost.cancel();
            let _ = keeper.await;
            m.shards_held.dec();
            shared.set_session(shard, false);
            if stop.is_cancelled() || matches!(outcome, Outcome::Fatal(_)) {
                leases.release(shard).await;
            }
            if let Outcome::Fatal(code) = outcome {
                m.fatal_closes.with_label_values(&[&code.to_string()]).inc();
                tracing::error!(
                    %shard,
                    code,
                    reason = protocol::fatal_reason(code),
                    "Discord refused the shard: it is stopped until the configuration changes and the connector restarts"
                );
                return Some(code);
            }
        }
        tokio::select! {
            _ = stop.cancelled() => return None,
            () = tokio::time::sleep(next_look) => {}
        }
    }
}

/// Run `shard`'s session over as many connections as it takes, until `lost` or a fatal
/// close.
async fn sessions(shared: &Shared, shard: Shard, lost: &CancellationToken) -> Outcome {
    let mut session = Session::new(shard);
    // Connections in a row that never reached READY or RESUMED.
    let mut failures: u32 = 0;
    loop {
        let mut established = false;
        let ended = connection::run(shared, &mut session, lost, &mut established).await;
        shared.set_session(shard, false);
        // A connection that reached READY or RESUMED starts the count again, unless the
        // broker refused: resuming at once would only replay into the same refusal.
        failures = match (&ended, established) {
            (Ended::Unconfirmed, _) | (_, false) => failures.saturating_add(1),
            (_, true) => 0,
        };
        let wait = match ended {
            Ended::Stopped => return Outcome::Stopped,
            Ended::Fatal(code) => return Outcome::Fatal(code),
            Ended::Reconnect(why) => {
                tracing::info!(%shard, why, "Discord Gateway connection ended: reconnecting");
                backoff(failures)
            }
            Ended::Unconfirmed => {
                tracing::warn!(%shard, "the broker did not confirm a message: resuming to have it again");
                backoff(failures)
            }
            Ended::IdentifyAfter(wait) => wait.max(backoff(failures)),
        };
        tokio::select! {
            _ = lost.cancelled() => return Outcome::Stopped,
            () = tokio::time::sleep(wait) => {}
        }
    }
}

/// The wait before the next connection after `failures` in a row: none after a session
/// that was up (Discord asks for an immediate resume), then doubling from half a second
/// to a minute, jittered.
fn backoff(failures: u32) -> Duration {
    if failures == 0 {
        return Duration::ZERO;
    }
    let base = Duration::from_millis(500).saturating_mul(1 << failures.min(8).saturating_sub(1));
    base.min(MAX_BACKOFF)
        .mul_f64(rand::rng().random_range(0.5..=1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_is_none_after_a_live_session_and_grows_to_a_minute() {
        assert_eq!(backoff(0), Duration::ZERO);
        let first = backoff(1);
        assert!(first >= Duration::from_millis(250) && first <= Duration::from_millis(500));
        assert!(backoff(30) <= MAX_BACKOFF && backoff(30) >= MAX_BACKOFF / 2);
    }
}
