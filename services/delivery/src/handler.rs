//! The delivery stage for one reply: close the run, then hand the reply to whoever waits.
//! The run row is closed in the transaction that records the message as processed, and
//! only then is the API caller told (through the run's event stream in Redis), so a caller
//! never learns of an answer the database does not hold. If Redis is down the caller
//! still gets the answer: ingest falls back to the row.

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
    type After = Reply;

    async fn prepare(&self, env: &Envelope) -> Result<Reply, StageError> {
        Ok(env.payload()?)
    }

    async fn commit(
        &self,
        env: &Envelope,
        reply: Reply,
        tx: &Transaction<'_>,
    ) -> Result<(Vec<Envelope>, Reply), StageError> {
        let closed = runs::finish(tx, env.run_id, &reply.outcome).await?;
        if closed {
            let status = match &reply.outcome {
                Outcome::Answered { .. } => "completed",
                Outcome::Failed { .. } => "failed",
            };
            self.ctx
                .metrics
                .runs
                .with_label_values(&[reply.platform.as_str(), status])
                .inc();
            tracing::info!(status, "run closed");
        }
        Ok((Vec::new(), reply))
    }

    async fn after_commit(&self, env: &Envelope, reply: Reply) {
        let platform = reply.platform.as_str();
        let outcome = match reply.platform {
            Platform::Api => {
                let event = RunEvent::Final {
                    outcome: reply.outcome,
                };
                match self.events.append(env.run_id, &event).await {
                    Ok(_) => "delivered",
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot append to the run's event stream; the caller reads the run row");
                        "deferred_to_database"
                    }
                }
            }
        };
        self.ctx
            .metrics
            .deliveries
            .with_label_values(&[platform, outcome])
            .inc();
    }
}
