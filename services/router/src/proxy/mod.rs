//! Proxy mode (docs/api.md, "Proxy mode"): with `GATEWAY_PROXY_URL` set, this install is an
//! edge. Its router stage routes nothing: it forwards every accepted message to the upstream
//! Hermes's REST channel and leaves the answer to come back through ingest's
//! `/proxy/replies` into this install's own delivery.
//!
//! Each message, in order:
//! 1. `record`: the run row (so operators and the stuck-run sweeper see it), the platform's
//!    24-hour window (this install's delivery sends the answer), and where the answer goes,
//!    in one transaction before anything leaves, so an answer that comes back at once always
//!    finds its way;
//! 2. `forward`: `POST /v1/messages` with the run id as `message_id`, tried again with a
//!    growing pause (or the upstream's `Retry-After`) while the upstream is unreachable or
//!    busy, the message held unacked meanwhile, so nothing is lost and nothing parked by an
//!    outage; a redelivered message is sent again under the same id, and the upstream takes
//!    it once;
//! 3. the commit notes the upstream's run id. A message the upstream refuses for good is
//!    parked, its run ended with a failure reply.

mod upstream;

use std::time::Duration;

use anyhow::anyhow;
use hermes_db::{Transaction, proxied, runs};
use hermes_runtime::Ctx;
use hermes_runtime::stage::{self, Handler, ParkCause, StageError};
use hermes_types::envelope::Envelope;
use hermes_types::ids::RunId;
use hermes_types::model::parked;
use hermes_types::model::{FailureCode, Inbound, Platform, Reply, Tier};
use hermes_types::stage::Stage;

use crate::pipeline::run_row::{new_run, open_windows};
use upstream::{Forward, Upstream};

/// The first pause before forwarding again; it doubles up to [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(250);
const MAX_PAUSE: Duration = Duration::from_secs(30);

/// Run the edge's router until `ctx.stop`: the forwarder, and the sweepers that end runs no
/// answer came back for and remove expired rows.
pub async fn run(ctx: Ctx) -> anyhow::Result<()> {
    let Some(settings) = ctx.config.proxy.clone() else {
        return Err(anyhow!("proxy mode needs GATEWAY_PROXY_URL"));
    };
    let forwarder = Forwarder {
        upstream: Upstream::new(&settings)?,
        ctx: ctx.clone(),
    };
    tracing::info!(upstream = %settings.url, "proxy mode: forwarding every message upstream");
    let sweeper = tokio::spawn(crate::sweeper::run(ctx.clone()));
    let retention = tokio::spawn(crate::retention::run(ctx.clone()));
    stage::run(ctx, forwarder).await;
    let _ = sweeper.await;
    let _ = retention.await;
    Ok(())
}

/// Forwards the router queue's messages upstream.
pub struct Forwarder {
    ctx: Ctx,
    upstream: Upstream,
}

/// What `prepare` settled.
pub enum Forwarded {
    /// The upstream has it, as its run (when it named one).
    Taken(Option<uuid::Uuid>),
    /// Not a message the upstream's REST channel can answer (an API caller's conversation,
    /// a job's run, a Forge wake): its run ends with this failure.
    Unforwardable(Box<Reply>),
}

/// Whether the upstream can answer `inbound` through its REST channel, the answer coming
/// back to this install's delivery: a person's chat message, or a REST message.
fn forwardable(inbound: &Inbound) -> bool {
    let platform = inbound.event.platform;
    (platform.is_chat() || platform == Platform::Rest)
        && inbound.job.is_none()
        && inbound.forge.is_none()
}

impl Forwarder {
    /// Step 1: the run row, the window and the proxied row, before anything leaves.
    async fn record(&self, env: &Envelope, inbound: &Inbound) -> Result<(), StageError> {
        let mut client = self.ctx.db.get().await?;
        let tx = client
            .transaction()
            .await
            .map_err(hermes_db::DbError::from)?;
        let text = inbound.event.text.as_deref();
        // The edge knows no user or tier: the upstream decides who answers and how.
        runs::create(&tx, &new_run(env, inbound, Tier::Free, text)).await?;
        open_windows(inbound, &tx).await?;
        proxied::record(&tx, env.run_id, &inbound.reply_to()).await?;
        tx.commit().await.map_err(hermes_db::DbError::from)?;
        Ok(())
    }

    /// Step 2: forward until the upstream takes the message or refuses it for good.
    async fn forward(
        &self,
        run: RunId,
        inbound: &Inbound,
    ) -> Result<Option<uuid::Uuid>, StageError> {
        let mut pause = FIRST_PAUSE;
        let mut tries = 0u32;
        loop {
            tries += 1;
            let (outcome, result) = match self.upstream.forward(run, inbound).await {
                Forward::Taken {
                    upstream_run,
                    duplicate,
                } => (
                    if duplicate { "duplicate" } else { "accepted" },
                    Some(Ok(upstream_run)),
                ),
                Forward::Refused(why) => ("refused", Some(Err(StageError::Poison(anyhow!(why))))),
                Forward::Later { why, wait } => {
                    tracing::warn!(%run, tries, %why, "upstream cannot take the message yet; holding it");
                    let wait = wait.unwrap_or(pause).min(MAX_PAUSE);
                    pause = (pause * 2).min(MAX_PAUSE);
                    self.count("retried");
                    tokio::select! {
                        _ = tokio::time::sleep(wait) => continue,
                        // Shutting down: back to the queue, for another replica or the next start.
                        _ = self.ctx.stop.cancelled() => return Err(StageError::Transient(anyhow!(why))),
                    }
                }
            };
            self.count(outcome);
            if let Some(result) = result {
                return result;
            }
        }
    }

    fn count(&self, outcome: &str) {
        self.ctx
            .metrics
            .router
            .proxy_forwards
            .with_label_values(&[outcome])
            .inc();
    }
}

impl Handler for Forwarder {
    const STAGE: Stage = Stage::Router;
    type Prepared = Forwarded;
    type After = ();

    async fn prepare(&self, env: &Envelope) -> Result<Forwarded, StageError> {
        let inbound: Inbound = env.payload().map_err(|e| StageError::Poison(e.into()))?;
        if !forwardable(&inbound) {
            tracing::warn!(
                platform = inbound.event.platform.as_str(),
                "proxy mode cannot forward this message"
            );
            return Ok(Forwarded::Unforwardable(Box::new(Reply::failed(
                inbound.reply_to(),
                FailureCode::Invalid,
                "This install forwards chat and REST messages only.",
            ))));
        }
        self.record(env, &inbound).await?;
        let upstream = self.forward(env.run_id, &inbound).await?;
        tracing::info!(run = %env.run_id, upstream = ?upstream, "forwarded upstream");
        Ok(Forwarded::Taken(upstream))
    }

    async fn commit(
        &self,
        env: &Envelope,
        prepared: Forwarded,
        tx: &Transaction<'_>,
    ) -> Result<(Vec<Envelope>, ()), StageError> {
        match prepared {
            Forwarded::Taken(upstream) => {
                proxied::forwarded(tx, env.run_id, upstream).await?;
                Ok((Vec::new(), ()))
            }
            Forwarded::Unforwardable(reply) => Ok((vec![env.follow(reply.as_ref())], ())),
        }
    }

    /// A message parked here (refused upstream) ends its run with a failure reply, as the
    /// routing pipeline's do.
    async fn on_parked(&self, env: &Envelope, _cause: ParkCause) -> anyhow::Result<Vec<Envelope>> {
        Ok(parked::failure_reply(env)?.into_iter().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hermes_types::model::{ForgeWake, JobRunOptions, MessageEvent};

    fn on(platform: Platform) -> Inbound {
        Inbound::of(MessageEvent {
            platform,
            sender_id: "1".into(),
            chat_id: "1".into(),
            text: Some("hi".into()),
            media: Vec::new(),
            external_message_id: None,
            sender_name: None,
            received_at: chrono::Utc::now(),
            metadata: None,
        })
    }

    #[test]
    fn chat_and_rest_messages_are_forwarded_and_the_rest_are_not() {
        for p in [
            Platform::Telegram,
            Platform::Whatsapp,
            Platform::Teams,
            Platform::Rest,
        ] {
            assert!(forwardable(&on(p)), "{p:?}");
        }
        assert!(!forwardable(&on(Platform::Api)));
        let mut job = on(Platform::Telegram);
        job.job = Some(JobRunOptions::default());
        assert!(!forwardable(&job));
        let mut wake = on(Platform::Forge);
        wake.forge = Some(ForgeWake {
            agent_id: hermes_types::ids::AgentId::new(),
            workspace_id: hermes_types::ids::WorkspaceId::new(),
            delivery_id: "d".into(),
            event: "AGENT_ASSIGNED".into(),
            contract_version: None,
        });
        assert!(!forwardable(&wake));
    }
}
