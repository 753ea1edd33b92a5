//! Eager publishing (docs/architecture.md#2-every-state-change-travels-with-its-message-the-outbox): a stage publishes the outbox
//! rows it just committed itself, with confirms, instead of waking the relay to claim them
//! in a transaction of its own; this process's marker then marks every row its stages
//! published since its last statement with one `UPDATE`, outside any transaction.
//!
//! The rows were committed with a hold ([`HOLD`]): until it passes, the relays leave them to
//! their writer. A row whose publish failed is released to the relays at once; one the
//! writer never marked (it crashed between its commit and the mark, or the mark failed) is
//! swept up when its hold has passed, and published again, which every consumer's
//! idempotency record makes harmless.

use std::time::Duration;

use hermes_bus::{Bus, Outgoing};
use hermes_db::{Db, outbox};
use hermes_telemetry::Metrics;
use tokio_util::sync::CancellationToken;

/// How long the relays leave a row to the stage that committed it. Far above a publish
/// with confirm (milliseconds), far below the outbox-lag alert (30 s).
pub const HOLD: Duration = Duration::from_secs(5);

/// How long the relays leave the rows a commit on `db` writes now to their writer:
/// [`HOLD`] while this process's relay (and its marker) runs, else no hold (the relays
/// publish them).
pub fn hold(db: &Db) -> Option<Duration> {
    db.local_relay().running().then_some(HOLD)
}

/// Publish rows a stage committed (their ids beside them), then hand the confirmed ones to
/// the marker. A failed publish is counted, and its rows released to the relays.
pub async fn publish(db: &Db, bus: &Bus, metrics: &Metrics, rows: Vec<(i64, Outgoing)>) {
    if rows.is_empty() {
        return;
    }
    let sends = rows.iter().map(|(id, msg)| async move {
        let sent = bus.publish_outgoing(msg).await;
        (*id, sent)
    });
    let mut confirmed = Vec::with_capacity(rows.len());
    let mut failed = Vec::new();
    let mut last_error = String::new();
    for (id, sent) in futures_util::future::join_all(sends).await {
        match sent {
            Ok(()) => confirmed.push(id),
            Err(e) => {
                last_error = e.to_string();
                failed.push(id);
            }
        }
    }
    db.local_relay().published(&confirmed);
    if failed.is_empty() {
        return;
    }
    metrics
        .stages
        .outbox_publish_failures
        .inc_by(failed.len() as u64);
    tracing::warn!(failed = failed.len(), error = %last_error, "outbox publish failed; the relay will publish the rows");
    // Best effort: if even this fails, the hold runs out and the relay takes them anyway.
    let released = async {
        let client = db.get().await?;
        outbox::release(&client, &failed, &last_error).await
    };
    if let Err(e) = released.await {
        tracing::warn!(error = %e, "cannot release the rows to the relay; it takes them when their hold passes");
    }
}

/// How long the marker lets ids gather after the first arrives, unless
/// `HERMES_OUTBOX_MARK_GATHER_MS` says otherwise. Nobody waits for a mark (the messages are
/// out, their inputs acked), so tens of milliseconds cost nothing and let many messages share
/// one statement under load; 50 ms was the best of 0, 10, 50 and 200 in the fleet bench
/// (docs/performance.md, "The outbox marker's window").
pub(super) const GATHER: Duration = Duration::from_millis(50);

/// Mark what this process's stages published, one statement per round, until `stop`;
/// while a round gathers or its statement runs the next round's ids gather, so under load
/// many stages' rows share one statement.
pub(super) async fn mark_until(
    db: Db,
    metrics: Metrics,
    gather: Duration,
    stop: CancellationToken,
) {
    loop {
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = db.local_relay().marks_waiting() => {}
        }
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = tokio::time::sleep(gather) => {}
        }
        mark_waiting(&db, &metrics).await;
    }
}

/// Mark the ids waiting now, once. A failed mark leaves the rows to the relays after their
/// hold (published twice, harmless).
pub(super) async fn mark_waiting(db: &Db, metrics: &Metrics) {
    let ids = db.local_relay().take_published();
    if ids.is_empty() {
        return;
    }
    let marked = async {
        let client = db.get().await?;
        outbox::mark_published(&client, &ids).await
    };
    match marked.await {
        Ok(n) => metrics
            .stages
            .outbox_published
            .with_label_values(&["eager"])
            .inc_by(n),
        Err(e) => {
            tracing::warn!(rows = ids.len(), error = %e, "cannot mark published outbox rows; the relay publishes them again when their hold passes");
        }
    }
}
