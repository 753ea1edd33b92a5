//! The routing pipeline for one inbound message, top to bottom.

use anyhow::anyhow;
use hermes_shared::Ctx;
use hermes_shared::bus::Stage;
use hermes_shared::db::{Transaction, runs};
use hermes_shared::envelope::Envelope;
use hermes_shared::model::{ChatMessage, Inbound, LlmRequest, Role, ToolSpec};
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
    messages: Vec<ChatMessage>,
    tools: Vec<ToolSpec>,
}

/// The turns the model sees: the API caller's own conversation, or the channel message
/// as one user turn (history comes with the session store).
fn turns(inbound: &Inbound) -> Vec<ChatMessage> {
    if !inbound.conversation.is_empty() {
        return inbound.conversation.clone();
    }
    let mut text = inbound.event.text.clone().unwrap_or_default();
    for media in &inbound.event.media {
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(&format!("[{:?} attached]", media.kind).to_lowercase());
    }
    vec![ChatMessage::text(Role::User, text)]
}

impl Handler for Router {
    const STAGE: Stage = Stage::Router;
    type Prepared = Decision;
    type After = ();

    async fn prepare(&self, env: &Envelope) -> Result<Decision, StageError> {
        let inbound: Inbound = env.payload()?;
        let messages = turns(&inbound);
        let has_user_text = messages.iter().any(|m| {
            m.role == Role::User && m.content.as_deref().is_some_and(|c| !c.trim().is_empty())
        });
        if !has_user_text {
            return Err(StageError::Poison(anyhow!(
                "inbound message has no user text or media"
            )));
        }
        let tools = self.tools.tools().await?;
        Ok(Decision {
            inbound,
            messages,
            tools,
        })
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
            .messages
            .iter()
            .rev()
            .find(|m| m.role == Role::User)
            .and_then(|m| m.content.clone());
        let event = &d.inbound.event;
        let created = runs::create(
            tx,
            &runs::NewRun {
                id: env.run_id,
                platform: event.platform,
                sender_id: &event.sender_id,
                chat_id: &event.chat_id,
                external_message_id: event.external_message_id.as_deref(),
                tier,
                input_text: input_text.as_deref(),
                metadata: event.metadata.as_ref(),
                api_key_id: d.inbound.api_key_id,
                traceparent: env.traceparent.as_ref().map(|t| t.as_str()),
            },
        )
        .await?;
        if !created {
            // A replay of this run, or the same platform message under a new run id (a
            // duplicate webhook that slipped past ingest's fast check): already handled.
            tracing::info!("run already exists for this message; nothing to route");
            return Ok((Vec::new(), ()));
        }
        tracing::info!(tier = tier.as_str(), tools = d.tools.len(), "run routed");
        let request = LlmRequest {
            reply_to: d.inbound.reply_to(),
            tier,
            chain,
            messages: d.messages,
            tools: d.tools,
            tool_round: 0,
            usage_so_far: Default::default(),
            requested_model: d.inbound.requested_model,
        };
        Ok((vec![env.follow(&request)], ()))
    }
}
