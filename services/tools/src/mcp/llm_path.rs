//! Sampling answered by the llm stage's gateway in this process: the same providers,
//! killswitch, global spend cap, call slots and failover as every other model call. The
//! platform pays: no user's token budget is charged. The tools a server offers go to the
//! model as our tool specs, and its tool calls come back as they are.

use std::sync::Arc;

use hermes_config::Config;
use hermes_gateway::Gateway;
use hermes_types::model::{ChatMessage, LlmRequest, Platform, ReplyTo, Role, Tier};

use super::sampling::{Complete, CompleteFuture, SamplingAnswer, SamplingRequest};

pub struct GatewaySampling {
    gateway: Gateway,
    config: Arc<Config>,
}

impl GatewaySampling {
    pub fn new(gateway: Gateway, config: Arc<Config>) -> Self {
        Self { gateway, config }
    }
}

impl Complete for GatewaySampling {
    fn models(&self) -> Vec<String> {
        self.config.models.keys().cloned().collect()
    }

    /// The first model of the free tier's chain.
    fn default_model(&self) -> Option<String> {
        self.config
            .tiers
            .get(&Tier::Free)
            .and_then(|chain| chain.first().cloned())
    }

    fn complete<'a>(&'a self, model: &'a str, request: &'a SamplingRequest) -> CompleteFuture<'a> {
        Box::pin(async move {
            let mut messages = Vec::with_capacity(request.messages.len() + 1);
            if let Some(system) = &request.system {
                messages.push(ChatMessage::text(Role::System, system.clone()));
            }
            messages.extend(request.messages.iter().cloned());
            // Never delivered: the gateway only reads the tier, chain, messages and params.
            let mut llm = LlmRequest::new(
                ReplyTo {
                    platform: Platform::Api,
                    chat_id: String::new(),
                    callback_url: None,
                    quote: None,
                    interaction: None,
                },
                Tier::Free,
                vec![model.to_owned()],
                messages,
            );
            llm.tools = request.tools.clone();
            llm.params.max_tokens = Some(request.max_tokens);
            llm.params.temperature = request.temperature;
            let served = self
                .gateway
                .complete(&llm, None, None)
                .await
                .map_err(|e| e.to_string())?;
            let completion = served.completion;
            let stop_reason = match completion.finish_reason.as_str() {
                _ if !completion.tool_calls.is_empty() => "toolUse",
                "length" | "max_tokens" | "MAX_TOKENS" => "maxTokens",
                _ => "endTurn",
            };
            let usage = completion.usage;
            Ok(SamplingAnswer {
                text: completion.text.unwrap_or_default(),
                tool_calls: completion.tool_calls,
                model: model.to_owned(),
                stop_reason: stop_reason.to_owned(),
                input_tokens: usage.input_tokens,
                output_tokens: usage.output_tokens,
            })
        })
    }
}
