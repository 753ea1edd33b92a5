//! The llm stage for one message. A model request: call the model chain, then either hand
//! its tool calls to the tools stage (at most one tool round per message) or emit the final
//! reply. A memory extraction: see [`crate::memory`].

use hermes_bus::Stage;
use hermes_db::{Transaction, runs};
use hermes_runtime::Ctx;
use hermes_runtime::stage::{Handler, StageError};
use hermes_types::envelope::{Envelope, MessageKind};
use hermes_types::model::{ChatMessage, LlmRequest, Outcome, Reply, Role, ToolRequest};

use crate::images::ImageFetcher;
use crate::memory::{Extracted, Memorized, MemoryWriter};
use crate::stream::RunStream;
pub use hermes_gateway::RETRY_MESSAGE;
use hermes_gateway::gateway::{Gateway, GatewayError, Served};

/// Put before raw tool output when the model could not phrase it.
pub const TOOL_DISCLAIMER: &str =
    "I couldn't finish composing an answer, but here is what my tools returned:";

/// The llm stage: model requests and memory extractions from `{ns}.llm`.
pub struct LlmStage {
    ctx: Ctx,
    gateway: Gateway,
    memory: MemoryWriter,
    images: ImageFetcher,
}

impl LlmStage {
    /// The stage calling models through `gateway`, with the memory writer of `ctx`.
    pub fn new(ctx: Ctx, gateway: Gateway) -> Self {
        let memory = MemoryWriter::new(ctx.clone());
        let images = ImageFetcher::new(&ctx.config);
        Self {
            ctx,
            gateway,
            memory,
            images,
        }
    }

    /// Call the model chain for `request`, an API caller's image URLs fetched first.
    async fn complete(&self, env: &Envelope, request: &LlmRequest) -> Result<Served, GatewayError> {
        let inlined = match self.images.inline(request).await {
            Ok(inlined) => inlined,
            Err(why) => return Err(GatewayError::Input(why)),
        };
        let request = inlined.as_ref().unwrap_or(request);
        let user = request.exchange.as_ref().map(|x| x.user_id);
        if request.stream {
            let stream = RunStream::start(&self.ctx, env.run_id, request.tool_round);
            let result = self.gateway.complete(request, user, Some(&stream)).await;
            // Every delta is on the run's stream before the final event can be.
            stream.finish().await;
            result
        } else {
            self.gateway.complete(request, user, None).await
        }
    }
}

/// A model request and what the gateway made of it.
pub struct Called {
    request: LlmRequest,
    result: Result<Served, GatewayError>,
}

/// What `prepare` found, by message kind.
pub enum Prepared {
    /// A model request ([`MessageKind::LlmRequest`]); boxed because it is ten times the
    /// size of an extraction and the future holding it is already large.
    Call(Box<Called>),
    /// A memory extraction ([`MessageKind::MemoryExtract`]).
    Memory(Extracted),
}

impl Handler for LlmStage {
    const STAGE: Stage = Stage::Llm;
    type Prepared = Prepared;
    /// The extraction's outcome, for counting and soul invalidation; `None` for requests.
    type After = Option<Memorized>;

    async fn prepare(&self, env: &Envelope) -> Result<Prepared, StageError> {
        if env.kind == MessageKind::MemoryExtract {
            let job = env.payload()?;
            return Ok(Prepared::Memory(
                self.memory.prepare(&self.gateway, job).await,
            ));
        }
        // Any other kind fails to decode here and is parked as poison.
        let request: LlmRequest = env.payload()?;
        let result = self.complete(env, &request).await;
        // PostgreSQL away while the workspace's secrets were read: hold the message like any
        // other outage (docs/architecture.md §4); the global keys are never the fallback.
        let result = match result {
            Err(GatewayError::WorkspaceSecrets(e)) if e.error.is_unavailable() => {
                return Err(e.error.into());
            }
            other => other,
        };
        Ok(Prepared::Call(Box::new(Called { request, result })))
    }

    async fn commit(
        &self,
        env: &Envelope,
        prepared: Prepared,
        tx: &Transaction<'_>,
    ) -> Result<(Vec<Envelope>, Option<Memorized>), StageError> {
        match prepared {
            Prepared::Call(c) => Ok((self.commit_call(env, *c, tx).await?, None)),
            Prepared::Memory(x) => Ok((Vec::new(), Some(self.memory.commit(x, tx).await?))),
        }
    }

    async fn after_commit(&self, _env: &Envelope, after: Option<Memorized>) {
        if let Some(outcome) = after {
            self.memory.after_commit(outcome).await;
        }
    }
}

impl LlmStage {
    /// The effects of a model request: the tool request of the round, or the reply.
    async fn commit_call(
        &self,
        env: &Envelope,
        c: Called,
        tx: &Transaction<'_>,
    ) -> Result<Vec<Envelope>, StageError> {
        let Called {
            mut request,
            result,
        } = c;
        let reply_to = request.reply_to.clone();
        let reply = match result {
            Ok(Served {
                completion,
                backend,
                cache_hit,
                ..
            }) => {
                let mut usage = request.usage_so_far;
                usage += completion.usage;
                if !completion.tool_calls.is_empty() && request.tool_round == 0 {
                    let names: Vec<&str> = completion
                        .tool_calls
                        .iter()
                        .map(|c| c.name.as_str())
                        .collect();
                    tracing::info!(backend, tools = ?names, "model asked for tools");
                    request.messages.push(ChatMessage {
                        role: Role::Assistant,
                        content: completion.text.clone(),
                        tool_calls: completion.tool_calls.clone(),
                        tool_call_id: None,
                        images: Vec::new(),
                    });
                    request.usage_so_far = usage;
                    note_backend(&mut request, &backend, usage, cache_hit);
                    runs::advance(tx, env.run_id, runs::RunStatus::AwaitingTools).await?;
                    let next = env.follow(&ToolRequest {
                        request,
                        calls: completion.tool_calls,
                    });
                    return Ok(vec![next]);
                }
                let text = match completion.text {
                    Some(t) => t,
                    // A second tool request after the single allowed round: answer with what we have.
                    None => tool_output_fallback(&request),
                };
                note_backend(&mut request, &backend, usage, cache_hit);
                Reply {
                    reply_to: reply_to.clone(),
                    exchange: request.exchange.clone(),
                    detail: None,
                    outcome: Outcome::Answered {
                        text,
                        model: request.requested_model.clone().unwrap_or(backend),
                        usage,
                        finish_reason: completion.finish_reason,
                        tools_used: tools_used(&request),
                    },
                }
            }
            Err(e) if request.tool_round > 0 => {
                tracing::warn!(error = %e.detail(), "model failed after the tool round; answering with tool output");
                Reply {
                    reply_to: reply_to.clone(),
                    exchange: request.exchange.clone(),
                    detail: None,
                    outcome: Outcome::Answered {
                        text: tool_output_fallback(&request),
                        model: request
                            .requested_model
                            .clone()
                            .unwrap_or_else(|| "tools".into()),
                        usage: request.usage_so_far,
                        finish_reason: hermes_types::model::FinishReason::ToolFallback,
                        tools_used: tools_used(&request),
                    },
                }
            }
            Err(e) => {
                let code = e.code();
                let detail = e.detail();
                tracing::warn!(error = %detail, code = code.as_str(), "no answer from the model");
                Reply {
                    exchange: request.exchange.clone(),
                    detail: Some(detail),
                    ..Reply::failed(reply_to, code, e.user_message())
                }
            }
        };
        Ok(vec![env.follow(&reply)])
    }
}

/// The raw tool results of the round, behind the disclaimer.
fn tool_output_fallback(request: &LlmRequest) -> String {
    let outputs: Vec<&str> = request
        .messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .filter_map(|m| m.content.as_deref())
        .collect();
    format!("{TOOL_DISCLAIMER}\n{}", outputs.join("\n"))
}

fn tools_used(request: &LlmRequest) -> Vec<String> {
    request
        .messages
        .iter()
        .flat_map(|m| m.tool_calls.iter().map(|c| c.name.clone()))
        .collect()
}

/// Record in the exchange's provenance which backend answered and the usage so far.
fn note_backend(
    request: &mut LlmRequest,
    backend: &str,
    usage: hermes_types::model::Usage,
    cache_hit: bool,
) {
    if let Some(x) = request.exchange.as_mut() {
        x.provenance.llm_backend = Some(backend.to_string());
        x.provenance.llm_cache_hit = cache_hit;
        x.provenance.tokens_in = usage.input_tokens;
        x.provenance.tokens_out = usage.output_tokens;
        x.provenance.cost_micro_usd = usage.cost_micro_usd;
    }
}
