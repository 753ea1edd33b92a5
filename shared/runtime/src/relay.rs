//! The outbox relay (docs/architecture.md#2-every-state-change-travels-with-its-message-the-outbox): publishes with publisher confirms
//! the `outbox` rows nobody else publishes, and marks them published.
//!
//! Stages publish the rows they commit themselves (`eager.rs`), and this process's marker
//! (started with the relay) marks them; the relay sweeps up the rest: rows of other writers
//! (ingest, the scheduler, operators' sends), rows whose eager publish failed, and rows whose
//! writer's hold passed unmarked (a crash). It claims rows with `FOR UPDATE SKIP LOCKED` (so
//! any number of replicas share the work), wakes on `LISTEN hermes_outbox` (a trigger
//! notifies on insert, except for rows a stage publishes itself), and polls as a backstop.
//! Published rows and old idempotency records (the stages' and the API's expired
//! `Idempotency-Key` records) are swept periodically.

use std::time::Duration;

use hermes_bus::{Bus, Outgoing, Stage};
use hermes_db::{Db, DbError, stmt};
use hermes_telemetry::Metrics;
use hermes_types::ids::MessageId;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

pub mod eager;

/// Rows claimed per relay round.
const BATCH: i64 = 256;
/// Backstop poll when no notification arrives.
const POLL: Duration = Duration::from_secs(1);
/// Published outbox rows and processed-message records are kept this long.
const RETENTION: &str = "3 days";

/// Publishes outbox rows. One per process is enough; more are harmless.
pub struct Relay {
    db: Db,
    bus: Bus,
    metrics: Metrics,
    wake: std::sync::Arc<Notify>,
    /// How long the marker gathers published rows before one statement marks them.
    gather: Duration,
}

impl Relay {
    pub fn new(db: Db, bus: Bus, metrics: Metrics) -> Self {
        Self {
            db,
            bus,
            metrics,
            wake: std::sync::Arc::new(Notify::new()),
            gather: eager::GATHER,
        }
    }

    /// Let the marker gather published rows for `gather` before marking them
    /// (`HERMES_OUTBOX_MARK_GATHER_MS`; 10 ms unless set).
    pub fn gather(mut self, gather: Duration) -> Self {
        self.gather = gather;
        self
    }

    /// Claim, publish and mark one batch. Returns how many rows were published and how
    /// many failed to publish (they stay unpublished for the next round).
    pub async fn publish_batch(&self) -> Result<(usize, usize), DbError> {
        let mut client = self.db.get().await?;
        let tx = client.transaction().await?;
        // Only rows of stages this build knows: a row naming another stage (written by a
        // newer build during a rolling upgrade, or by hand) waits for a relay that knows it,
        // and never fills a batch so that the rows behind it starve. `sweep` reports it.
        // Only rows nobody holds: a stage publishes its own rows during their hold.
        let known: Vec<&str> = Stage::ALL.iter().map(|s| s.as_str()).collect();
        let rows = tx
            .query(
                &stmt(
                    &tx,
                    "SELECT id, message_id, stage, traceparent, body FROM outbox
                 WHERE published_at IS NULL AND stage = ANY($2)
                   AND (held_until IS NULL OR held_until < now())
                 ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED",
                )
                .await?,
                &[&BATCH, &known],
            )
            .await?;
        if rows.is_empty() {
            return Ok((0, 0));
        }
        let mut publishes = Vec::with_capacity(rows.len());
        for row in &rows {
            let id: i64 = row.get(0);
            let stage_name: String = row.get(2);
            let Some(stage) = Stage::parse(&stage_name) else {
                // The claim asked for known stages only; nothing to publish it to here.
                continue;
            };
            let msg = Outgoing {
                stage,
                message_id: MessageId::from(row.get::<_, uuid::Uuid>(1)),
                traceparent: row.get(3),
                body: row.get(4),
            };
            let bus = self.bus.clone();
            publishes.push(async move { (id, bus.publish_outgoing(&msg).await) });
        }
        let results = futures_util::future::join_all(publishes).await;
        let mut done = Vec::new();
        let mut failed = Vec::new();
        let mut last_error = String::new();
        for (id, r) in results {
            match r {
                Ok(()) => done.push(id),
                Err(e) => {
                    last_error = e.to_string();
                    failed.push(id);
                }
            }
        }
        if !done.is_empty() {
            tx.execute(
                &stmt(
                    &tx,
                    "UPDATE outbox SET published_at = now() WHERE id = ANY($1)",
                )
                .await?,
                &[&done],
            )
            .await?;
        }
        if !failed.is_empty() {
            tx.execute(
                &stmt(
                    &tx,
                    "UPDATE outbox SET attempts = attempts + 1, last_error = $2 WHERE id = ANY($1)",
                )
                .await?,
                &[&failed, &last_error],
            )
            .await?;
            tracing::warn!(failed = failed.len(), error = %last_error, "outbox publish failed; will retry");
        }
        tx.commit().await?;
        self.metrics
            .stages
            .outbox_published
            .with_label_values(&["swept"])
            .inc_by(done.len() as u64);
        self.metrics
            .stages
            .outbox_publish_failures
            .inc_by(failed.len() as u64);
        Ok((done.len(), failed.len()))
    }

    /// Age in seconds of the oldest unpublished row (0 when none).
    pub async fn lag(&self) -> Result<f64, DbError> {
        let client = self.db.get().await?;
        let row = client
            .query_one(
                &stmt(
                    &client,
                    "SELECT COALESCE(EXTRACT(EPOCH FROM now() - min(created_at)), 0)::float8
                 FROM outbox WHERE published_at IS NULL",
                )
                .await?,
                &[],
            )
            .await?;
        Ok(row.get(0))
    }

    async fn sweep(&self) -> Result<(), DbError> {
        let client = self.db.get().await?;
        let known: Vec<&str> = Stage::ALL.iter().map(|s| s.as_str()).collect();
        let unknown = client
            .query(
                "SELECT stage, count(*) FROM outbox
                 WHERE published_at IS NULL AND NOT (stage = ANY($1)) GROUP BY stage",
                &[&known],
            )
            .await?;
        for row in unknown {
            // These rows also keep `hermes_outbox_lag_seconds` up until a relay that knows
            // their stage publishes them, so the outbox-lag alert names the problem too.
            tracing::error!(
                stage = row.get::<_, String>(0),
                rows = row.get::<_, i64>(1),
                "unpublished outbox rows name a stage this build does not know; a relay of a build that knows it will publish them"
            );
        }
        client
            .execute(
                &format!("DELETE FROM outbox WHERE published_at < now() - interval '{RETENTION}'"),
                &[],
            )
            .await?;
        client
            .execute(
                &format!("DELETE FROM processed_messages WHERE processed_at < now() - interval '{RETENTION}'"),
                &[],
            )
            .await?;
        // Send records of finished replies, and of replies parked and never replayed
        // (docs/channels.md, delivery).
        hermes_db::delivery_sends::prune(&client).await?;
        // What the platforms reported about sends, kept as long (docs/channels.md, statuses).
        hermes_db::platform_sends::prune(&client).await?;
        // Expired `Idempotency-Key` records and markers (docs/api.md, idempotency).
        hermes_db::idempotency::prune(&client).await?;
        Ok(())
    }

    /// Keep a LISTEN connection open and turn notifications into wake-ups; a (re)connection
    /// wakes too, since rows committed while nobody listened sent their NOTIFY to no one.
    fn spawn_listener(&self, stop: CancellationToken) {
        let wake = self.wake.clone();
        hermes_db::listen(&self.db, "hermes_outbox", stop, move |_| wake.notify_one());
    }

    /// Run until `stop`, then mark and publish what is left once more before returning.
    pub async fn run(self, stop: CancellationToken) {
        self.spawn_listener(stop.clone());
        let marker = tokio::spawn(eager::mark_until(
            self.db.clone(),
            self.metrics.clone(),
            self.gather,
            stop.clone(),
        ));
        self.db.local_relay().set_running(true);
        let mut last_sweep = std::time::Instant::now();
        let mut last_lag = std::time::Instant::now() - Duration::from_secs(60);
        let mut backoff = Duration::from_millis(100);
        loop {
            let published = match self.publish_batch().await {
                Ok((n, 0)) | Ok((n @ 1.., _)) => {
                    backoff = Duration::from_millis(100);
                    n
                }
                outcome => {
                    // Nothing went out (database or bus down): back off instead of spinning.
                    if let Err(e) = outcome {
                        tracing::warn!(error = %e, "outbox relay round failed");
                    }
                    tokio::select! {
                        _ = stop.cancelled() => break,
                        _ = tokio::time::sleep(backoff) => {}
                    }
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                    continue;
                }
            };
            if last_lag.elapsed() >= Duration::from_secs(5) {
                if let Ok(lag) = self.lag().await {
                    self.metrics.stages.outbox_lag.set(lag);
                }
                last_lag = std::time::Instant::now();
            }
            if last_sweep.elapsed() >= Duration::from_secs(600) {
                if let Err(e) = self.sweep().await {
                    tracing::warn!(error = %e, "outbox sweep failed");
                }
                last_sweep = std::time::Instant::now();
            }
            if published as i64 >= BATCH {
                continue;
            }
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = self.wake.notified() => {}
                _ = tokio::time::sleep(POLL) => {}
            }
        }
        // From here on commits must NOTIFY again (another process's relay will take them).
        self.db.local_relay().set_running(false);
        let _ = marker.await;
        // What the stopping stages published, marked; then a final flush of what is left.
        eager::mark_waiting(&self.db, &self.metrics).await;
        for _ in 0..10 {
            match self.publish_batch().await {
                Ok((0, _)) | Err(_) => break,
                Ok(_) => {}
            }
        }
        tracing::info!("outbox relay stopped");
    }
}
