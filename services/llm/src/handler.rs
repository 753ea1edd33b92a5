//! The llm stage for one message. A model request: call the model chain, then either hand
//! its tool calls to the tools stage or emit the final reply. A run takes at most its
//! request's `max_tool_rounds` tool rounds: one for chat messages and API runs, an agent's
//! own bound for its runs (a Forge wake's loop takes several); a model still asking for
//! tools after the last round is answered with what it has, never looped. A memory
//! extraction: see [`crate::memory`]; a user's weekly dream: see [`crate::dreaming`].
//!
//! Before each model call the run is marked `running` and its stop request read in one
//! statement: a run asked to stop (docs/api.md, runs) makes no further model call and ends
//! `cancelled`; a run already closed (answered, or failed and refunded by the stuck-run
//! sweeper) makes none either, and its late message is acked without a reply.

use hermes_bus::Stage;
use hermes_cache::run_events::{RunEvent, RunEvents};
use hermes_db::{Transaction, runs};
use hermes_runtime::Ctx;
use hermes_runtime::stage::{Handler, ParkCause, StageError};
use hermes_types::envelope::{Envelope, MessageKind};
use hermes_types::model::{
    ChatMessage, LlmRequest, ModelCall, Outcome, Platform, Reply, Role, ToolRequest, parked,
    record_call,
};

use crate::dreaming::{Dreamed, Dreamer, Dreamt};
use crate::images::ImageFetcher;
use crate::memory::{Extracted, Memorized, MemoryWriter};
use crate::stream::RunStream;
pub use hermes_gateway::RETRY_MESSAGE;
use hermes_gateway::gateway::{Gateway, GatewayError, Served};
use hermes_presence::Presence;

/// Put before raw tool output when the model could not phrase it.
pub const TOOL_DISCLAIMER: &str =
    "I couldn't finish composing an answer, but here is what my tools returned:";

/// The llm stage: model requests, memory extractions and dreams from `{ns}.llm`.
pub struct LlmStage {
    ctx: Ctx,
    gateway: Gateway,
    memory: MemoryWriter,
    dreamer: Dreamer,
    events: RunEvents,
    images: ImageFetcher,
    presence: Presence,
}

impl LlmStage {
    /// The stage calling models through `gateway`, with the memory writer of `ctx`.
    pub fn new(ctx: Ctx, gateway: Gateway) -> anyhow::Result<Self> {
        let memory = MemoryWriter::new(ctx.clone());
        let dreamer = Dreamer::new(ctx.clone());
        let events = RunEvents::new(ctx.cache.clone(), &ctx.config);
        let images = ImageFetcher::new(
            &ctx.config,
            ctx.metrics.router.media_fetches.clone(),
            ctx.metrics.limits.clone(),
        );
        let presence = Presence::new(&ctx.config.delivery, ctx.metrics.clone())?;
        Ok(Self {
            ctx,
            gateway,
            memory,
            dreamer,
            events,
            images,
            presence,
        })
    }

    /// Call the model chain for `request`, an API caller's image URLs and a chat
    /// platform's photos fetched first.
    async fn complete(&self, env: &Envelope, request: &LlmRequest) -> Result<Served, GatewayError> {
        let inlined = match self.images.inline(request).await {
            Ok(inlined) => inlined,
            Err(why) => return Err(GatewayError::Input(why)),
        };
        let request = inlined.as_ref().unwrap_or(request);
        let user = request.exchange.as_ref().map(|x| x.user_id);
        if request.stream {
            let stream = RunStream::start(
                &self.ctx,
                env.run_id,
                request.reply_to.platform,
                request.tool_round,
            );
            let result = self.gateway.complete(request, user, Some(&stream)).await;
            // Every delta is on the run's stream before the final event can be.
            stream.finish().await;
            result
        } else {
            self.gateway.complete(request, user, None).await
        }
    }

    /// The safe point before a model call: mark the run `running` (and say so on an API
    /// run's event stream); true when a stop was asked for, and no call must be made. A
    /// message this stage processed already (a redelivery) is a duplicate, found in the same
    /// statement: the stage's own duplicate check is folded in here. A message of a closed
    /// run is acked without a call.
    async fn begin_call(&self, env: &Envelope, request: &LlmRequest) -> Result<bool, StageError> {
        let begun = {
            let client = self.ctx.db.get().await?;
            runs::begin_call(&client, env.run_id, Self::STAGE.as_str(), env.id).await?
        };
        let stop = match begun {
            runs::Begin::Processed => return Err(StageError::Duplicate("processed already")),
            // Swept, refunded and told already (docs/architecture.md#4-poison-is-parked-never-looped): a late or
            // backlogged request of it calls no model and sends no second reply.
            runs::Begin::Closed => {
                self.ctx
                    .metrics
                    .run_events
                    .late_messages
                    .with_label_values(&[Self::STAGE.as_str()])
                    .inc();
                return Err(StageError::Duplicate("run closed"));
            }
            runs::Begin::Call { stop } => stop,
        };
        if !stop && request.reply_to.platform == Platform::Api {
            let event = RunEvent::Running {
                round: request.tool_round,
            };
            if let Err(e) = self.events.append(env.run_id, Platform::Api, &event).await {
                // Only the lifecycle event is lost; the run goes on.
                tracing::warn!(error = %e, "cannot append the running event");
            }
        }
        Ok(stop)
    }
}

/// A model request and what the gateway made of it.
pub struct Called {
    request: LlmRequest,
    result: Result<Served, GatewayError>,
    /// When the call began and how long it took, failover included, for the run's record
    /// of its calls.
    at: chrono::DateTime<chrono::Utc>,
    took: std::time::Duration,
}

/// What `prepare` did with a model request.
pub enum Call {
    /// The model was called.
    Made(Called),
    /// A stop was asked for: no call was made and the run ends `cancelled`.
    Stopped(LlmRequest),
}

/// What `prepare` found, by message kind.
pub enum Prepared {
    /// A model request ([`MessageKind::LlmRequest`]); boxed because it is ten times the
    /// size of an extraction and the future holding it is already large.
    Call(Box<Call>),
    /// A memory extraction ([`MessageKind::MemoryExtract`]).
    Memory(Extracted),
    /// A user's weekly dream ([`MessageKind::Dream`]).
    Dream(Dreamt),
}

/// What a commit leaves for `after_commit`: the outcome of an extraction or a dream, for
/// counting and soul invalidation.
pub enum Done {
    Memory(Memorized),
    Dream(Dreamed),
}

impl Handler for LlmStage {
    const STAGE: Stage = Stage::Llm;
    type Prepared = Prepared;
    /// The extraction's or dream's outcome; `None` for requests.
    type After = Option<Done>;
    /// A model request checks in `begin_call`, in the statement that marks its run running;
    /// an extraction or a dream checks first thing in `prepare`.
    const PRECHECK_DUPLICATES: bool = false;

    async fn prepare(&self, env: &Envelope) -> Result<Prepared, StageError> {
        if matches!(env.kind, MessageKind::MemoryExtract | MessageKind::Dream) {
            let processed = {
                let client = self.ctx.db.get().await?;
                hermes_db::already_processed(&client, Self::STAGE.as_str(), env.id).await?
            };
            if processed {
                return Err(StageError::Duplicate("processed already"));
            }
            if env.kind == MessageKind::Dream {
                let job = env.payload()?;
                return Ok(Prepared::Dream(
                    self.dreamer.prepare(&self.gateway, job).await?,
                ));
            }
            let job = env.payload()?;
            return Ok(Prepared::Memory(
                self.memory.prepare(&self.gateway, job).await,
            ));
        }
        // Any other kind fails to decode here and is parked as poison.
        let request: LlmRequest = env.payload()?;
        if self.begin_call(env, &request).await? {
            tracing::info!("stop requested: no model call");
            return Ok(Prepared::Call(Box::new(Call::Stopped(request))));
        }
        // The person sees their message read and being answered while the model works
        // (docs/channels.md, "Presence"); best effort, on its own task.
        let read = request
            .inbound_message_id
            .as_deref()
            .filter(|_| request.tool_round == 0);
        let working = self.presence.working(&request.reply_to, read);
        let (at, started) = (chrono::Utc::now(), std::time::Instant::now());
        let result = self.complete(env, &request).await;
        let took = started.elapsed();
        drop(working);
        // PostgreSQL away while the workspace's secrets were read: hold the message like any
        // other outage (docs/architecture.md#4-poison-is-parked-never-looped); the global keys are never the fallback.
        let result = match result {
            Err(GatewayError::WorkspaceSecrets(e)) if e.error.is_unavailable() => {
                return Err(e.error.into());
            }
            other => other,
        };
        Ok(Prepared::Call(Box::new(Call::Made(Called {
            request,
            result,
            at,
            took,
        }))))
    }

    async fn commit(
        &self,
        env: &Envelope,
        prepared: Prepared,
        tx: &Transaction<'_>,
    ) -> Result<(Vec<Envelope>, Option<Done>), StageError> {
        match prepared {
            Prepared::Call(c) => match *c {
                Call::Made(c) => Ok((self.commit_call(env, c, tx).await?, None)),
                Call::Stopped(request) => Ok((vec![env.follow(&Reply::cancelled(&request))], None)),
            },
            Prepared::Memory(x) => Ok((
                Vec::new(),
                Some(Done::Memory(self.memory.commit(x, tx).await?)),
            )),
            Prepared::Dream(d) => Ok((
                Vec::new(),
                Some(Done::Dream(self.dreamer.commit(d, tx).await?)),
            )),
        }
    }

    async fn after_commit(&self, _env: &Envelope, after: Option<Done>) {
        match after {
            Some(Done::Memory(outcome)) => self.memory.after_commit(outcome).await,
            Some(Done::Dream(dreamed)) => self.dreamer.after_commit(dreamed).await,
            None => {}
        }
    }

    /// A message parked on its way to an answer ends its run with a failure reply; a parked
    /// memory extraction or a dream leaves nothing open
    /// (docs/architecture.md, "4. Poison is parked, never looped").
    async fn on_parked(&self, env: &Envelope, _cause: ParkCause) -> anyhow::Result<Vec<Envelope>> {
        Ok(parked::failure_reply(env)?.into_iter().collect())
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
            at,
            took,
        } = c;
        let reply_to = request.reply_to.clone();
        let call = call_of(&request, &result, at, took);
        record_call(&mut request.calls, call);
        let reply = match result {
            Ok(Served {
                completion,
                backend,
                cache_hit,
                ..
            }) => {
                let mut usage = request.usage_so_far;
                usage += completion.usage;
                if !completion.tool_calls.is_empty() && request.may_take_tool_round() {
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
                        decisions: Vec::new(),
                        results: Vec::new(),
                    });
                    return Ok(vec![next]);
                }
                let text = match completion.text {
                    Some(t) => t,
                    // A tool request after the run's last round: answer with what we have.
                    None => tool_output_fallback(&request),
                };
                note_backend(&mut request, &backend, usage, cache_hit);
                Reply {
                    reply_to: reply_to.clone(),
                    exchange: request.exchange.clone(),
                    detail: None,
                    draft_id: None,
                    operator: None,
                    calls: std::mem::take(&mut request.calls),
                    outcome: Outcome::Answered {
                        text,
                        model: request.requested_model.clone().unwrap_or(backend),
                        usage,
                        finish_reason: completion.finish_reason,
                        tools_used: tools_used(&request),
                        transcript: tool_round_transcript(&request),
                    },
                }
            }
            Err(e) if request.tool_round > 0 => {
                tracing::warn!(error = %e.detail(), "model failed after the tool round; answering with tool output");
                Reply {
                    reply_to: reply_to.clone(),
                    exchange: request.exchange.clone(),
                    detail: None,
                    draft_id: None,
                    operator: None,
                    calls: request.calls.clone(),
                    outcome: Outcome::Answered {
                        text: tool_output_fallback(&request),
                        model: request
                            .requested_model
                            .clone()
                            .unwrap_or_else(|| "tools".into()),
                        usage: request.usage_so_far,
                        finish_reason: hermes_types::model::FinishReason::ToolFallback,
                        tools_used: tools_used(&request),
                        transcript: tool_round_transcript(&request),
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
                    draft_id: None,
                    calls: request.calls.clone(),
                    ..Reply::failed(reply_to, code, e.user_message())
                }
            }
        };
        Ok(vec![env.follow(&reply)])
    }
}

/// What the run's record keeps of this call: the hop that answered and its own usage, or,
/// of a failed call, the first model it would have tried and why it failed.
fn call_of(
    request: &LlmRequest,
    result: &Result<Served, GatewayError>,
    at: chrono::DateTime<chrono::Utc>,
    took: std::time::Duration,
) -> ModelCall {
    let ms = took.as_millis().try_into().unwrap_or(u64::MAX);
    match result {
        Ok(served) => ModelCall {
            round: request.tool_round,
            at,
            model: served.backend.clone(),
            usage: served.completion.usage,
            cache_hit: served.cache_hit,
            finish_reason: Some(served.completion.finish_reason.clone()),
            error: None,
            ms,
        },
        Err(e) => ModelCall {
            round: request.tool_round,
            at,
            model: request
                .backend
                .as_ref()
                .map(|b| b.model.clone())
                .or_else(|| request.requested_model.clone())
                .or_else(|| request.chain.first().cloned())
                .unwrap_or_default(),
            usage: Default::default(),
            cache_hit: false,
            finish_reason: None,
            error: Some(e.code()),
            ms,
        },
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

/// The tool rounds this run made, as they stand in the conversation after them: from the
/// first assistant turn that asked for tools after the last user turn, every turn on. A
/// caller's own earlier tool turns (sent in its conversation, before its last turn) are not
/// the run's: before the first round (`tool_round == 0`) there is none.
fn tool_round_transcript(request: &LlmRequest) -> Vec<ChatMessage> {
    if request.tool_round == 0 {
        return Vec::new();
    }
    let after_user = request
        .messages
        .iter()
        .rposition(|m| m.role == Role::User)
        .map_or(0, |i| i + 1);
    let start = request.messages[after_user..]
        .iter()
        .position(|m| m.role == Role::Assistant && !m.tool_calls.is_empty());
    start.map_or_else(Vec::new, |i| request.messages[after_user + i..].to_vec())
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

#[cfg(test)]
mod tests {
    use hermes_types::model::{Platform, ReplyTo, Tier, ToolCall};

    use super::*;

    fn request(messages: Vec<ChatMessage>, tool_round: u8) -> LlmRequest {
        let reply_to = ReplyTo {
            platform: Platform::Api,
            chat_id: "c".into(),
            callback_url: None,
            quote: None,
            interaction: None,
        };
        LlmRequest {
            tool_round,
            ..LlmRequest::new(reply_to, Tier::Free, Vec::new(), messages)
        }
    }

    fn asking(id: &str) -> ChatMessage {
        ChatMessage {
            tool_calls: vec![ToolCall {
                id: id.into(),
                name: "current_time".into(),
                arguments: serde_json::json!({}),
                signature: None,
            }],
            ..ChatMessage::text(Role::Assistant, "Let me check.")
        }
    }

    #[test]
    fn the_transcript_is_the_runs_own_tool_round_only() {
        // The caller's own earlier tool turn, then this run's round.
        let conversation = vec![
            ChatMessage::text(Role::User, "hi"),
            asking("theirs"),
            ChatMessage::tool_result("theirs", "old"),
            ChatMessage::text(Role::User, "what time is it?"),
        ];
        assert!(tool_round_transcript(&request(conversation.clone(), 0)).is_empty());
        let mut after = conversation;
        after.push(asking("call_1"));
        after.push(ChatMessage::tool_result("call_1", "noon"));
        let transcript = tool_round_transcript(&request(after.clone(), 1));
        assert_eq!(transcript, after[4..]);
        // Several rounds of one run are all its own.
        after.push(asking("call_2"));
        after.push(ChatMessage::tool_result("call_2", "later"));
        let transcript = tool_round_transcript(&request(after.clone(), 2));
        assert_eq!(transcript, after[4..]);
    }
}
