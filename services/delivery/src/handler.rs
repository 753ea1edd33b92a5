//! The delivery stage for one reply: close the run, then hand the reply to whoever waits.
//!
//! The run row is closed in the transaction that records the message as processed, and
//! only then is a waiting API caller told (through the run's event stream in Redis), so a
//! caller never learns of an answer the database does not hold; if Redis is down the
//! caller still gets it from the row. A REST caller's callback is POSTed before the commit
//! so a failed callback is retried with the message (and parked when it keeps failing).
//! Replies to chat platforms wait for their senders: they are parked in
//! `{ns}.delivery.dead`, intact, for `hermes dlq replay` once a sender is configured.

use std::time::Duration;

use anyhow::anyhow;
use hermes_shared::Ctx;
use hermes_shared::bus::Stage;
use hermes_shared::cache::run_events::{RunEvent, RunEvents};
use hermes_shared::db::{Transaction, runs};
use hermes_shared::envelope::Envelope;
use hermes_shared::failure::FailureReason;
use hermes_shared::model::{Outcome, Platform, Reply};
use hermes_shared::stage::{Handler, StageError};
use serde_json::json;

use crate::bookkeeping::Bookkeeping;

pub struct DeliveryStage {
    ctx: Ctx,
    events: RunEvents,
    http: reqwest::Client,
    books: Bookkeeping,
}

impl DeliveryStage {
    pub fn new(ctx: Ctx) -> anyhow::Result<Self> {
        let events = RunEvents::new(ctx.cache.clone());
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .user_agent(concat!("hermes/", env!("CARGO_PKG_VERSION")))
            .build()?;
        let books = Bookkeeping::new(&ctx);
        Ok(Self {
            ctx,
            events,
            http,
            books,
        })
    }

    /// POST the outcome to a REST caller's callback URL.
    async fn callback(
        &self,
        env: &Envelope,
        url: &str,
        outcome: &Outcome,
    ) -> Result<(), StageError> {
        let body = json!({ "run_id": env.run_id, "outcome": outcome });
        let resp = self
            .http
            .post(url)
            .header("x-hermes-run-id", env.run_id.to_string())
            .json(&body)
            .send()
            .await
            .map_err(|e| StageError::Retry {
                reason: FailureReason::from_reqwest(&e),
                error: anyhow!("callback failed: {}", e.without_url()),
            })?;
        match FailureReason::from_status(resp.status()) {
            None => Ok(()),
            Some(reason) => Err(StageError::Retry {
                reason,
                error: anyhow!("callback answered {}", resp.status()),
            }),
        }
    }
}

impl Handler for DeliveryStage {
    const STAGE: Stage = Stage::Delivery;
    type Prepared = Reply;
    type After = Reply;

    async fn prepare(&self, env: &Envelope) -> Result<Reply, StageError> {
        let reply: Reply = env.payload()?;
        match reply.reply_to.platform {
            Platform::Api => {}
            Platform::Rest => {
                if let Some(url) = &reply.reply_to.callback_url {
                    self.callback(env, url, &reply.outcome).await?;
                }
            }
            p @ (Platform::Telegram | Platform::Whatsapp | Platform::Instagram) => {
                self.ctx
                    .metrics
                    .deliveries
                    .with_label_values(&[p.as_str(), "no_sender"])
                    .inc();
                return Err(StageError::Poison(anyhow!(
                    "no sender for {} in this build: reply parked for replay",
                    p.as_str()
                )));
            }
        }
        Ok(reply)
    }

    async fn commit(
        &self,
        env: &Envelope,
        reply: Reply,
        tx: &Transaction<'_>,
    ) -> Result<(Vec<Envelope>, Reply), StageError> {
        let closed = runs::finish(tx, env.run_id, &reply.outcome).await?;
        let mut next = Vec::new();
        if closed {
            next = self.books.record(tx, env, &reply).await?;
            let status = match &reply.outcome {
                Outcome::Answered { .. } => "completed",
                Outcome::Failed { .. } => "failed",
            };
            self.ctx
                .metrics
                .runs
                .with_label_values(&[reply.reply_to.platform.as_str(), status])
                .inc();
            tracing::info!(status, "run closed");
        }
        Ok((next, reply))
    }

    async fn after_commit(&self, env: &Envelope, reply: Reply) {
        self.books.remember(&reply).await;
        let platform = reply.reply_to.platform.as_str();
        let event = RunEvent::Final {
            outcome: reply.outcome,
        };
        let outcome = match self.events.append(env.run_id, &event).await {
            Ok(_) => "delivered",
            Err(e) => {
                tracing::warn!(error = %e, "cannot append to the run's event stream; the caller reads the run row");
                "deferred_to_database"
            }
        };
        self.ctx
            .metrics
            .deliveries
            .with_label_values(&[platform, outcome])
            .inc();
    }
}
