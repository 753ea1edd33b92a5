//! The routing pipeline for one inbound message, top to bottom (seed 001, "The routing
//! decision tree"). `prepare` does the reads and the slow work outside any transaction
//! (steps 1, 3–7); `commit` makes the decision durable in one transaction: the run, the
//! credit (step 2), the session, the dispatch, the inbound interaction, and the next
//! message (step 8 onwards runs in the llm stage, or in an external agent).

use std::time::Instant;

use anyhow::anyhow;
use chrono::{DateTime, Utc};
use hermes_bus::Stage;
use hermes_cache::history::{HistoryCipher, HistoryStore, SessionScope};
use hermes_config::local_host_toolsets;
use hermes_db::users::{self, Resolved};
use hermes_db::{Transaction, agents, credits, runs, sessions};
use hermes_runtime::Ctx;
use hermes_runtime::stage::{GroupCommit, Handler, StageError};
use hermes_types::agent::{AgentKind, CONTRACT_VERSION, EngagementMode};
use hermes_types::envelope::Envelope;
use hermes_types::intent::Intent;
use hermes_types::model::{
    AgentWake, ChatMessage, Exchange, Inbound, LlmRequest, Platform, Provenance, Reply, Role,
    ToolPolicy, ToolSpec,
};

use crate::dispatch;
use crate::messages;
use crate::recall::{Recall, RecallOutcome};
use crate::soul::{self, Persona, Soul};
use crate::tool_gate;
use crate::tools::ToolCatalog;
use crate::{intent, trivial};

/// The router's stage handler.
pub struct Router {
    ctx: Ctx,
    tools: ToolCatalog,
    soul: Soul,
    recall: Recall,
    history: Option<HistoryStore>,
    presence: dispatch::Presence,
}

impl Router {
    /// The router as configured. Fails when the embeddings client cannot be built.
    pub fn new(ctx: Ctx) -> anyhow::Result<Self> {
        let settings = &ctx.config.file.router;
        let recall = Recall::from_settings(&settings.recall, &ctx.config.router)?;
        let history = HistoryCipher::new(&ctx.config.router.session_keys)
            .map(|c| HistoryStore::new(ctx.cache.clone(), c, settings.session_idle()));
        if history.is_none() {
            tracing::warn!(
                "HERMES_SESSION_KEYS is not set: session history is read from PostgreSQL for every message"
            );
        }
        if !recall.is_on() {
            tracing::info!("HERMES_EMBEDDINGS_URL is not set: semantic recall is off");
        }
        Ok(Self {
            tools: ToolCatalog::new(),
            soul: Soul::new(ctx.cache.clone(), ctx.metrics.clone()),
            recall,
            history,
            presence: dispatch::Presence::default(),
            ctx,
        })
    }
}

/// What the router decided before opening its transaction. `Clone`: a group commit keeps a
/// copy to redo a message alone when its group is rolled back.
#[derive(Clone)]
pub enum Decision {
    /// The OpenAI-compatible API: the caller brings its conversation; no user, no credit.
    Api {
        inbound: Inbound,
        messages: Vec<ChatMessage>,
        tools: Vec<ToolSpec>,
    },
    /// Step 1's fallback: nobody known (or activated) sends from here.
    Signup { inbound: Inbound },
    /// A known user's message, ready to be charged and dispatched.
    Route(Box<Routed>),
}

/// Everything prepared for a known user's message.
#[derive(Clone)]
pub struct Routed {
    inbound: Inbound,
    who: Resolved,
    text: String,
    intent: Intent,
    vision: bool,
    /// The session the history below belongs to (None: a new session starts).
    session_seen: Option<uuid::Uuid>,
    now: DateTime<Utc>,
    base: String,
    recall_block: Option<String>,
    history: Vec<ChatMessage>,
    user_turn: ChatMessage,
    tools: Vec<ToolSpec>,
    provenance: Provenance,
}

impl Handler for Router {
    const STAGE: Stage = Stage::Router;
    type Prepared = Decision;
    type After = ();
    // `prepare` only reads; the commit's idempotency record catches a duplicate.
    const PRECHECK_DUPLICATES: bool = false;

    async fn prepare(&self, env: &Envelope) -> Result<Decision, StageError> {
        let inbound: Inbound = env.payload()?;
        if inbound.event.platform == Platform::Api {
            return self.prepare_api(inbound).await;
        }
        let event = &inbound.event;
        let text = messages::user_text(event);
        if text.trim().is_empty() && event.media.is_empty() {
            return Err(StageError::Poison(anyhow!(
                "inbound message has no text or media"
            )));
        }
        let client = self.ctx.db.get().await?;

        // 1. Resolve the user (and the session this message would continue); unknown or
        // not activated → signup prompt, no credit.
        let Some((who, latest)) =
            users::resolve_with_session(&client, event.platform, &event.sender_id, &event.chat_id)
                .await?
                .filter(|(r, _)| r.activated)
        else {
            return Ok(Decision::Signup { inbound });
        };
        // 2 (credits) happens in `commit`, under the user's row lock.
        // The session clock (its injection point is `sessions::current_or_start`'s `now`).
        let now = Utc::now();
        let idle = chrono::TimeDelta::from_std(self.ctx.config.file.router.session_idle())
            .unwrap_or(chrono::TimeDelta::MAX);
        let session_seen = latest
            .filter(|(_, last)| now.signed_duration_since(*last) <= idle)
            .map(|(id, _)| id);

        // 3 and 4 side by side (the queries pipeline on one connection): the soul's cached
        // base and the session history; semantic recall (skipped for trivial messages).
        let started = Instant::now();
        let session_side = async {
            let base = self
                .soul
                .base(&client, who.user.id, session_seen, now)
                .await?;
            let history = match session_seen {
                Some(session) => self.history_of(&client, event, session).await?,
                None => Vec::new(),
            };
            Ok::<_, StageError>((base, history))
        };
        let (session_side, (recall_block, recall_used)) =
            tokio::join!(session_side, self.recall_for(&client, &who, &text));
        let (base, history) = session_side?;
        let soul_load = started.elapsed();
        self.ctx
            .metrics
            .soul_load_duration
            .observe(soul_load.as_secs_f64());

        // 5. Images: their intent picks the vision path and the toolsets.
        let image_intent = messages::has_image(event).then(|| intent::classify_image(Some(&text)));
        let intent = match image_intent {
            Some(i) => messages::intent_of_image(i),
            None => intent::classify_in_context(&text, &history),
        };

        // 6. The current message as a turn (with image blocks).
        let user_turn = messages::user_turn(event, &text);

        // 7. Gate the tools by intent.
        let catalog = self.tools.tools(&client).await?;
        let gated = tool_gate::gate(intent, &catalog, &self.ctx.config.file.router.tool_gate);
        self.ctx
            .metrics
            .tool_schema_tokens_saved
            .inc_by(gated.schema_tokens_saved);

        let provenance = Provenance {
            soul_load_ms: soul_load.as_millis() as u64,
            semantic_recall_used: recall_used,
            intent: Some(match image_intent {
                Some(i) => i.as_str().to_string(),
                None => intent.as_str().to_string(),
            }),
            schema_tokens_saved: gated.schema_tokens_saved,
            ..Provenance::default()
        };
        Ok(Decision::Route(Box::new(Routed {
            text,
            intent,
            vision: image_intent.is_some(),
            session_seen,
            now,
            base,
            recall_block,
            history,
            user_turn,
            tools: gated.tools,
            provenance,
            inbound,
            who,
        })))
    }

    async fn commit(
        &self,
        env: &Envelope,
        decision: Decision,
        tx: &Transaction<'_>,
    ) -> Result<(Vec<Envelope>, ()), StageError> {
        let out = match decision {
            Decision::Api {
                inbound,
                messages,
                tools,
            } => self.commit_api(env, inbound, messages, tools, tx).await?,
            Decision::Signup { inbound } => self.commit_signup(env, inbound, tx).await?,
            Decision::Route(r) => self.commit_route(env, *r, tx).await?,
        };
        Ok((out, ()))
    }
}

impl GroupCommit for Router {
    /// A known user's commit starts with the charge, which locks the user's row.
    fn lock_key(decision: &Decision) -> Option<uuid::Uuid> {
        match decision {
            Decision::Route(r) => Some(r.who.user.id),
            Decision::Api { .. } | Decision::Signup { .. } => None,
        }
    }
}

impl Router {
    /// Create the run row; false when it exists already (a redelivery, or a duplicate
    /// webhook that slipped past ingest's fast check).
    async fn create_run(
        &self,
        env: &Envelope,
        inbound: &Inbound,
        tier: hermes_types::model::Tier,
        input_text: Option<&str>,
        tx: &Transaction<'_>,
    ) -> Result<bool, StageError> {
        let event = &inbound.event;
        let created = runs::create(
            tx,
            &runs::NewRun {
                id: env.run_id,
                platform: event.platform,
                sender_id: &event.sender_id,
                chat_id: &event.chat_id,
                external_message_id: event.external_message_id.as_deref(),
                tier,
                input_text,
                metadata: event.metadata.as_ref(),
                api_key_id: inbound.api_key_id,
                traceparent: env.traceparent.as_ref().map(|t| t.as_str()),
            },
        )
        .await?;
        if !created {
            tracing::info!("run already exists for this message; nothing to route");
            self.decided("duplicate");
        }
        Ok(created)
    }

    fn decided(&self, decision: &str) {
        self.ctx
            .metrics
            .router_decisions
            .with_label_values(&[decision])
            .inc();
    }

    async fn commit_signup(
        &self,
        env: &Envelope,
        inbound: Inbound,
        tx: &Transaction<'_>,
    ) -> Result<Vec<Envelope>, StageError> {
        let text = inbound.event.text.as_deref();
        if !self
            .create_run(env, &inbound, hermes_types::model::Tier::Free, text, tx)
            .await?
        {
            return Ok(Vec::new());
        }
        let settings = &self.ctx.config.file.router;
        let prompt = settings
            .signup_prompt
            .replace("{signup_url}", &settings.signup_url);
        tracing::info!("unknown or inactive sender: signup prompt");
        self.decided("signup");
        Ok(vec![env.follow(&Reply::notice(
            inbound.reply_to(),
            "signup_required",
            prompt,
        ))])
    }

    async fn commit_route(
        &self,
        env: &Envelope,
        r: Routed,
        tx: &Transaction<'_>,
    ) -> Result<Vec<Envelope>, StageError> {
        let settings = &self.ctx.config.file.router;
        let user = &r.who.user;
        let run_id = env.run_id.as_uuid();

        // 2. Credits, under the user's row lock: concurrent messages never double-spend. The
        // run row is written last, with everything known; if it turns out to be a duplicate
        // the whole transaction (this charge included) is rolled back.
        let cost = i64::from(settings.credits_per_message);
        let charged = match credits::charge(tx, user.id, run_id, cost).await? {
            credits::Charge::Insufficient { balance } => {
                if !self
                    .create_run(env, &r.inbound, user.tier, Some(&r.text), tx)
                    .await?
                {
                    return Err(StageError::Duplicate("the run exists already"));
                }
                tracing::info!(balance, "out of credits: upgrade prompt");
                runs::set_routing(
                    tx,
                    env.run_id,
                    &runs::Routing {
                        user_id: user.id,
                        agent_id: None,
                        session_id: None,
                        dispatch: None,
                        engagement_mode: None,
                        credits_charged: 0,
                        tier: user.tier,
                        provenance: None,
                    },
                )
                .await?;
                self.decided("upgrade");
                let prompt = settings
                    .upgrade_prompt
                    .replace("{referral_code}", &user.referral_code)
                    .replace("{upgrade_url}", &settings.upgrade_url);
                return Ok(vec![env.follow(&Reply::notice(
                    r.inbound.reply_to(),
                    "credits_exhausted",
                    prompt,
                ))]);
            }
            credits::Charge::Charged { .. } => cost,
            credits::Charge::AlreadyCharged => cost,
        };
        self.ctx
            .metrics
            .credits
            .with_label_values(&["charge"])
            .inc_by(cost as u64);

        // 4 (for real): the session (the charge above holds the user's row lock, which
        // serializes this user's messages); a rollover since `prepare` empties the history.
        let event = &r.inbound.event;
        let session = sessions::current_or_start_locked(
            tx,
            user.id,
            event.platform,
            &event.chat_id,
            r.now,
            settings.session_idle(),
        )
        .await?;
        let history = if r.session_seen == Some(session.id) {
            r.history
        } else {
            Vec::new()
        };

        // Dispatch: assignment, mention, round robin, or the default persona.
        let chosen = dispatch::choose(tx, &self.presence, &r.who, &r.text, r.intent).await?;
        self.ctx
            .metrics
            .dispatches
            .with_label_values(&[chosen.dispatch.mode.as_str(), dispatch::kind_label(&chosen)])
            .inc();
        let agent = chosen.agent.as_ref();
        let tier = agent.and_then(|a| a.tier).unwrap_or(user.tier);
        let mode = agent.map(|a| a.engagement_mode).unwrap_or_default();

        // The run's routing, its inbound interaction and the activity event: one statement.
        let intent_meta = serde_json::json!({ "intent": r.provenance.intent });
        let dispatch_data =
            serde_json::json!({ "dispatch": chosen.dispatch, "engagement_mode": mode });
        let routing = runs::Routing {
            user_id: user.id,
            agent_id: agent.map(|a| a.id),
            session_id: Some(session.id),
            dispatch: Some(&chosen.dispatch),
            engagement_mode: Some(mode),
            credits_charged: charged,
            tier,
            provenance: Some(&r.provenance),
        };
        let event = &r.inbound.event;
        let created = runs::create_routed(
            tx,
            &runs::NewRun {
                id: env.run_id,
                platform: event.platform,
                sender_id: &event.sender_id,
                chat_id: &event.chat_id,
                external_message_id: event.external_message_id.as_deref(),
                tier,
                input_text: Some(&r.text),
                metadata: event.metadata.as_ref(),
                api_key_id: r.inbound.api_key_id,
                traceparent: env.traceparent.as_ref().map(|t| t.as_str()),
            },
            &runs::Routed {
                routing,
                text: &r.text,
                inbound_meta: &intent_meta,
                activity: "run.dispatched",
                activity_data: &dispatch_data,
            },
        )
        .await?;
        if !created {
            // A redelivery, or the same platform message under another run id: roll back
            // the charge, the session touch and the dispatch with it.
            self.decided("duplicate");
            return Err(StageError::Duplicate("the run exists already"));
        }

        if let Some(a) = agent.filter(|a| a.kind == AgentKind::External) {
            // External runtime: owe it a signed wake; the run is its inbox entry.
            let delivery_id = uuid::Uuid::now_v7();
            agents::owe_wake(tx, delivery_id, run_id, a.id, "AGENT_ASSIGNED").await?;
            tracing::info!(agent = a.profile_key, "run dispatched to an external agent");
            self.decided("external");
            let wake = AgentWake {
                delivery_id,
                agent_id: a.id,
                profile_key: a.profile_key.clone(),
                event: "AGENT_ASSIGNED".into(),
                dispatch: chosen.dispatch.clone(),
                engagement_mode: mode,
                contract_version: CONTRACT_VERSION.into(),
                tool_allowlist: host_tool_allowlist(mode, &r.tools),
                message: r.inbound.event.clone(),
            };
            return Ok(vec![env.follow(&wake)]);
        }

        // 8. Model choice: the tier's chain, or the vision model for images.
        let chain = if r.vision {
            vec![settings.vision_model.clone()]
        } else {
            self.ctx
                .config
                .file
                .tiers
                .get(&tier)
                .cloned()
                .unwrap_or_default()
        };
        let persona = match agent {
            Some(a) => Persona {
                name: a.display_name.clone(),
                tone: a.tone,
                role_instructions: a.role_instructions.clone(),
            },
            None => Persona {
                name: settings.persona.name.clone(),
                tone: settings.persona.tone,
                role_instructions: Some(settings.persona.role_instructions.clone()),
            },
        };
        let tools = match agent {
            Some(a) if !a.toolsets.is_empty() => r
                .tools
                .into_iter()
                .filter(|t| a.toolsets.contains(&t.toolset))
                .collect(),
            _ => r.tools,
        };
        // Local-host toolsets are not even offered in restricted modes (the tools stage
        // refuses their calls anyway).
        let tools = if mode == EngagementMode::Execute {
            tools
        } else {
            let local = local_host_toolsets(&self.ctx.config.file.mcp_servers);
            tools
                .into_iter()
                .filter(|t| !local.contains(&t.toolset))
                .collect()
        };
        let system = soul::compose(&persona, &r.base, r.recall_block.as_deref());
        let mut messages = Vec::with_capacity(history.len() + system.len() + 1);
        messages.extend(
            system
                .into_iter()
                .map(|block| ChatMessage::text(Role::System, block)),
        );
        messages.extend(history);
        messages.push(r.user_turn);
        tracing::info!(
            tier = tier.as_str(),
            tools = tools.len(),
            dispatch = chosen.dispatch.mode.as_str(),
            "run routed"
        );
        self.decided("routed");
        let request = LlmRequest {
            tools,
            requested_model: r.inbound.requested_model.clone(),
            exchange: Some(Exchange {
                user_id: user.id,
                session_id: session.id,
                tier,
                user_text: r.text,
                provenance: r.provenance,
            }),
            // An agent moved to another backend at run time answers there first.
            backend: agent.and_then(|a| a.backend.clone()),
            workspace: agent.map(|a| a.workspace_id),
            // The agent's engagement mode governs what its tool calls may execute.
            policy: ToolPolicy {
                engagement_mode: mode,
                tool_allowlist: None,
            },
            ..LlmRequest::new(r.inbound.reply_to(), tier, chain, messages)
        };
        Ok(vec![env.follow(&request)])
    }

    /// Recall for this message, or why not; returns the block and whether recall ran.
    async fn recall_for(
        &self,
        client: &hermes_db::Client,
        who: &Resolved,
        text: &str,
    ) -> (Option<String>, bool) {
        let m = &self.ctx.metrics;
        if trivial::is_trivial(text) {
            m.semantic_recall_skipped_trivial.inc();
            return (None, false);
        }
        match self.recall.recall(client, who.user.id, text).await {
            RecallOutcome::Used(block) => {
                let label = if block.is_some() { "used" } else { "empty" };
                m.semantic_recall.with_label_values(&[label]).inc();
                (block, true)
            }
            RecallOutcome::Off => {
                m.semantic_recall.with_label_values(&["off"]).inc();
                (None, false)
            }
            RecallOutcome::Failed(why) => {
                m.semantic_recall.with_label_values(&["failed"]).inc();
                tracing::warn!(error = why, "semantic recall failed; answering without it");
                (None, false)
            }
        }
    }

    /// The session's history: from the encrypted Redis cache, or rebuilt from PostgreSQL
    /// (and cached again) on a miss.
    async fn history_of(
        &self,
        client: &hermes_db::Client,
        event: &hermes_types::model::MessageEvent,
        session: uuid::Uuid,
    ) -> Result<Vec<ChatMessage>, StageError> {
        let max = self.ctx.config.file.router.history_max_turns;
        let scope = SessionScope::new(event.platform, event.chat_id.clone());
        if let Some(store) = &self.history
            && let Some(h) = store.load(&scope).await
        {
            return Ok(h);
        }
        let rebuilt = sessions::history(client, session, max).await?;
        if let Some(store) = &self.history {
            store.save(&scope, &rebuilt).await;
        }
        Ok(rebuilt)
    }

    async fn prepare_api(&self, inbound: Inbound) -> Result<Decision, StageError> {
        let messages = messages::api_turns(&inbound);
        let has_user_text = messages.iter().any(|m| {
            m.role == Role::User && m.content.as_deref().is_some_and(|c| !c.trim().is_empty())
        });
        if !has_user_text {
            return Err(StageError::Poison(anyhow!(
                "inbound message has no user text or media"
            )));
        }
        let client = self.ctx.db.get().await?;
        let tools = self.tools.tools(&client).await?;
        Ok(Decision::Api {
            inbound,
            messages,
            tools,
        })
    }

    async fn commit_api(
        &self,
        env: &Envelope,
        inbound: Inbound,
        messages: Vec<ChatMessage>,
        tools: Vec<ToolSpec>,
        tx: &Transaction<'_>,
    ) -> Result<Vec<Envelope>, StageError> {
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
            return Ok(Vec::new());
        }
        tracing::info!(tier = tier.as_str(), tools = tools.len(), "run routed");
        self.decided("routed");
        let chain = self
            .ctx
            .config
            .file
            .tiers
            .get(&tier)
            .cloned()
            .unwrap_or_default();
        let request = api_request(inbound, tier, chain, messages, tools);
        Ok(vec![env.follow(&request)])
    }
}

/// The model call for an OpenAI-compatible API message: the caller's own conversation,
/// and its sampling parameters and streaming choice passed through unchanged (ingest
/// validated them), because they are the caller's to set, not the router's.
fn api_request(
    inbound: Inbound,
    tier: hermes_types::model::Tier,
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
        ..LlmRequest::new(inbound.reply_to(), tier, chain, messages)
    }
}

/// Host-side toolsets a run may use (seed 000): none in the restricted modes; in EXECUTE,
/// the toolsets of the tools it was offered.
fn host_tool_allowlist(mode: EngagementMode, tools: &[ToolSpec]) -> Vec<String> {
    if mode != EngagementMode::Execute {
        return Vec::new();
    }
    let mut sets: Vec<String> = tools.iter().map(|t| t.toolset.clone()).collect();
    sets.sort();
    sets.dedup();
    sets
}

#[cfg(test)]
mod tests {
    use hermes_types::model::{CallParams, JsonSchemaFormat, MessageEvent, Tier};
    use serde_json::json;

    use super::*;

    fn api_inbound(params: CallParams, stream: bool) -> Inbound {
        Inbound {
            event: MessageEvent {
                platform: Platform::Api,
                sender_id: "api".into(),
                chat_id: "run".into(),
                text: Some("hi".into()),
                media: Vec::new(),
                external_message_id: None,
                sender_name: None,
                received_at: Utc::now(),
                metadata: None,
            },
            conversation: vec![ChatMessage::text(Role::User, "hi")],
            requested_model: Some("gpt-x".into()),
            callback_url: None,
            api_key_id: None,
            params,
            stream,
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
    fn defaults_stay_off_the_wire() {
        let inbound = api_inbound(CallParams::default(), false);
        let v = serde_json::to_value(&inbound).unwrap();
        assert!(v.get("params").is_none() && v.get("stream").is_none());
        let request = api_request(inbound, Tier::Free, Vec::new(), Vec::new(), Vec::new());
        assert!(request.params.is_default() && !request.stream);
    }
}
