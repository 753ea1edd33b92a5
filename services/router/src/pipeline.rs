//! The routing pipeline for one inbound message, top to bottom.

use anyhow::anyhow;
use hermes_shared::Ctx;
use hermes_shared::bus::Stage;
use hermes_shared::db::{Transaction, runs};
use hermes_shared::envelope::Envelope;
use hermes_shared::model::{Inbound, LlmRequest, Role, ToolSpec};
use hermes_shared::stage::{Handler, StageError};

use crate::tools::ToolCatalog;

/// The router's stage handler.
pub struct Router {
    ctx: Ctx,
    tools: ToolCatalog,
}

impl Router {
    pub fn new(ctx: Ctx) -> Self {
        let tools = ToolCatalog::new(ctx.db.clone());
        Self { ctx, tools }
    }
}

/// What the router decided before opening its transaction.
pub struct Decision {
    inbound: Inbound,
    tools: Vec<ToolSpec>,
}

impl Handler for Router {
    const STAGE: Stage = Stage::Router;
    type Prepared = Decision;
    type After = ();

    async fn prepare(&self, env: &Envelope) -> Result<Decision, StageError> {
        let inbound: Inbound = env.payload()?;
        if !inbound.messages.iter().any(|m| m.role == Role::User) {
            return Err(StageError::Poison(anyhow!(
                "inbound message has no user turn"
            )));
        }
        let tools = self.tools.tools().await?;
        Ok(Decision { inbound, tools })
    }

    async fn commit(
        &self,
        env: &Envelope,
        d: Decision,
        tx: &Transaction<'_>,
    ) -> Result<(Vec<Envelope>, ()), StageError> {
        let tier = self.ctx.config.file.api.tier;
        let chain = self
            .ctx
            .config
            .file
            .tiers
            .get(&tier)
            .cloned()
            .unwrap_or_default();
        let input_text = d
            .inbound
            .messages
            .iter()
            .rev()
            .find(|m| m.role == Role::User)
            .and_then(|m| m.content.clone());
        let created = runs::create(
            tx,
            &runs::NewRun {
                id: env.run_id,
                platform: d.inbound.platform,
                sender_id: &d.inbound.sender_id,
                tier,
                input_text: input_text.as_deref(),
                traceparent: env.traceparent.as_ref().map(|t| t.as_str()),
            },
        )
        .await?;
        if !created {
            // The same run arrived under a new message id (a replay): the run already moved on.
            tracing::info!("run already exists; nothing to route");
            return Ok((Vec::new(), ()));
        }
        tracing::info!(tier = tier.as_str(), tools = d.tools.len(), "run routed");
        let request = LlmRequest {
            platform: d.inbound.platform,
            tier,
            chain,
            messages: d.inbound.messages,
            tools: d.tools,
            tool_round: 0,
            usage_so_far: Default::default(),
            requested_model: d.inbound.requested_model,
        };
        Ok((vec![env.follow(&request)], ()))
    }
}
