//! The delivery stage for one reply: hand it to whoever waits and close the run.
//! For API callers that is the run's event stream in Redis; the run row in PostgreSQL is
//! closed in the same transaction that records the message as processed, so the answer is
//! never lost even if Redis is (ingest falls back to the row).

use hermes_shared::Ctx;
use hermes_shared::bus::Stage;
use hermes_shared::cache::run_events::{RunEvent, RunEvents};
use hermes_shared::db::{Transaction, runs};
use hermes_shared::envelope::Envelope;
use hermes_shared::model::{Outcome, Platform, Reply};
use hermes_shared::stage::{Handler, StageError};

pub struct DeliveryStage {
    ctx: Ctx,
    events: RunEvents,
}

impl DeliveryStage {
    pub fn new(ctx: Ctx) -> Self {
        let events = RunEvents::new(ctx.cache.clone());
        Self { ctx, events }
    }
}

impl Handler for DeliveryStage {
    const STAGE: Stage = Stage::Delivery;
    type Prepared = Reply;

    async fn prepare(&self, env: &Envelope) -> Result<Reply, StageError> {
        let reply: Reply = env.payload()?;
        match reply.platform {
            Platform::Api => {
                let event = RunEvent::Final {
                    outcome: reply.outcome.clone(),
                };
                if let Err(e) = self.events.append(env.run_id, &event).await {
                    // The caller still gets the answer from the run row; only latency suffers.
                    tracing::warn!(error = %e, "cannot append to the run's event stream; the run row carries the answer");
                }
            }
        }
        Ok(reply)
    }

    async fn commit(
        &self,
        env: &Envelope,
        reply: Reply,
        tx: &Transaction<'_>,
    ) -> Result<Vec<Envelope>, StageError> {
        let closed = runs::finish(tx, env.run_id, &reply.outcome).await?;
        let (status, outcome) = match &reply.outcome {
            Outcome::Answered { .. } => ("completed", "delivered"),
            Outcome::Failed { .. } => ("failed", "delivered_error"),
        };
        let platform = reply.platform.as_str();
        self.ctx
            .metrics
            .deliveries
            .with_label_values(&[platform, outcome])
            .inc();
        if closed {
            self.ctx
                .metrics
                .runs
                .with_label_values(&[platform, status])
                .inc();
            tracing::info!(status, "run closed");
        }
        Ok(Vec::new())
    }
}
