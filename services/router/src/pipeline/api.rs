//! The OpenAI-compatible API's messages: the caller brings its own conversation, sampling
//! parameters and streaming choice; no user, no credit, no session. A run dispatched with an
//! engagement mode or a tool allowlist (`POST /v1/runs`) is offered, and may execute, only
//! what that policy allows, as an agent's run is (docs/api.md, runs).

use anyhow::anyhow;
use hermes_db::Transaction;
use hermes_runtime::stage::StageError;
use hermes_types::envelope::Envelope;
use hermes_types::model::{ChatMessage, Inbound, LlmRequest, Role, Tier, ToolSpec};

use super::{Decided, Decision, Router};
use crate::{messages, tool_gate};
use hermes_config::local_host_toolsets;

impl Router {
    pub(super) async fn prepare_api(&self, inbound: Inbound) -> Result<Decision, StageError> {
        let messages = messages::under_core_prompt(
            self.ctx.config.file.api.core_prompt(),
            messages::api_turns(&inbound),
        );
        let has_user_text = messages.iter().any(|m| {
            m.role == Role::User && m.content.as_deref().is_some_and(|c| !c.trim().is_empty())
        });
        if !has_user_text {
            return Err(StageError::Poison(anyhow!(
                "inbound message has no user text or media"
            )));
        }
        let client = self.ctx.db.get().await?;
        let mut catalog = self.tools.tools(&client).await?;
        // A scheduled job may narrow its tools to some toolsets (docs/api.md, jobs).
        if let Some(toolsets) = inbound.job.as_ref().and_then(|j| j.toolsets.as_ref()) {
            catalog.retain(|t| toolsets.contains(&t.toolset));
        }
        let policy = &inbound.policy;
        let local = local_host_toolsets(&self.ctx.config.file.mcp_servers);
        let tools = tool_gate::offered_to(
            catalog,
            &[],
            policy.engagement_mode,
            &local,
            policy.tool_allowlist.as_deref(),
        );
        Ok(Decision::Api {
            inbound,
            messages,
            tools,
        })
    }

    pub(super) async fn commit_api(
        &self,
        env: &Envelope,
        inbound: Inbound,
        messages: Vec<ChatMessage>,
        tools: Vec<ToolSpec>,
        tx: &Transaction<'_>,
    ) -> Result<(Vec<Envelope>, Decided), StageError> {
        let tier = self.ctx.config.file.api.tier;
        let input_text = messages
            .iter()
            .rev()
            .find(|m| m.role == Role::User)
            .and_then(|m| m.content.clone());
        if !self
            .create_run(env, &inbound, tier, input_text.as_deref(), tx)
            .await?
        {
            return Ok((Vec::new(), Decided::uncharged("duplicate")));
        }
        tracing::info!(tier = tier.as_str(), tools = tools.len(), "run routed");
        // Images go to the vision model, as a channel's do (docs/api.md, images); a scheduled
        // job's model override is tried first, the tier's chain after it.
        let mut chain = if messages.iter().any(|m| !m.images.is_empty()) {
            vec![self.ctx.config.file.router.vision_model.clone()]
        } else {
            self.tier_chain(tier)
        };
        if let Some(model) = inbound.job.as_ref().and_then(|j| j.model.as_ref()) {
            chain.retain(|m| m != model);
            chain.insert(0, model.clone());
        }
        let request = api_request(inbound, tier, chain, messages, tools);
        Ok((vec![env.follow(&request)], Decided::uncharged("routed")))
    }
}

/// The model call for an OpenAI-compatible API message: the caller's own conversation,
/// and its sampling parameters and streaming choice passed through unchanged (ingest
/// validated them), because they are the caller's to set, not the router's.
fn api_request(
    inbound: Inbound,
    tier: Tier,
    chain: Vec<String>,
    messages: Vec<ChatMessage>,
    tools: Vec<ToolSpec>,
) -> LlmRequest {
    // API callers have no agent: the tier's chain and the global provider secrets apply.
    LlmRequest {
        tools,
        requested_model: inbound.requested_model.clone(),
        params: inbound.params.clone(),
        stream: inbound.stream,
        api_key: inbound.api_key_id,
        // The tools stage refuses what the policy forbids, whatever the model asks for.
        policy: inbound.policy.clone(),
        ..LlmRequest::new(inbound.reply_to(), tier, chain, messages)
    }
}

#[cfg(test)]
mod tests {
    use chrono::Utc;
    use hermes_types::model::{CallParams, JsonSchemaFormat, MessageEvent, Platform};
    use serde_json::json;

    use super::*;

    fn api_inbound(params: CallParams, stream: bool) -> Inbound {
        Inbound {
            conversation: vec![ChatMessage::text(Role::User, "hi")],
            requested_model: Some("gpt-x".into()),
            params,
            stream,
            ..Inbound::of(MessageEvent {
                platform: Platform::Api,
                sender_id: "api".into(),
                chat_id: "run".into(),
                text: Some("hi".into()),
                media: Vec::new(),
                external_message_id: None,
                sender_name: None,
                received_at: Utc::now(),
                metadata: None,
            })
        }
    }

    #[test]
    fn the_callers_parameters_reach_the_model_call() {
        let params = CallParams {
            temperature: Some(0.2),
            top_p: Some(0.9),
            stop: vec!["END".into()],
            max_tokens: Some(64),
            response_format: Some(JsonSchemaFormat {
                name: "answer".into(),
                schema: json!({"type": "object"}),
                strict: true,
            }),
        };
        // Through JSON, as the message crosses the broker between ingest and the router.
        let wire = serde_json::to_vec(&api_inbound(params.clone(), true)).unwrap();
        let inbound: Inbound = serde_json::from_slice(&wire).unwrap();
        let messages = messages::api_turns(&inbound);
        let request = api_request(inbound, Tier::Free, vec!["m".into()], messages, Vec::new());
        assert_eq!(request.params, params);
        assert!(request.stream);
        assert_eq!(request.requested_model.as_deref(), Some("gpt-x"));
        assert!(request.exchange.is_none() && request.backend.is_none());
    }

    #[test]
    fn the_dispatch_policy_reaches_the_model_call() {
        use hermes_types::agent::EngagementMode;
        use hermes_types::model::ToolPolicy;
        let mut inbound = api_inbound(CallParams::default(), true);
        inbound.policy = ToolPolicy {
            engagement_mode: EngagementMode::Review,
            tool_allowlist: Some(vec!["web".into()]),
        };
        let wire = serde_json::to_vec(&inbound).unwrap();
        let inbound: Inbound = serde_json::from_slice(&wire).unwrap();
        let policy = inbound.policy.clone();
        let request = api_request(inbound, Tier::Free, Vec::new(), Vec::new(), Vec::new());
        assert_eq!(request.policy, policy);
    }

    #[test]
    fn defaults_stay_off_the_wire() {
        let inbound = api_inbound(CallParams::default(), false);
        let v = serde_json::to_value(&inbound).unwrap();
        assert!(v.get("params").is_none() && v.get("stream").is_none());
        let request = api_request(inbound, Tier::Free, Vec::new(), Vec::new(), Vec::new());
        assert!(request.params.is_default() && !request.stream);
    }
}
