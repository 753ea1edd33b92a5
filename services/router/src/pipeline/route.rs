//! The commit of a known user's message (`docs/architecture.md`, "How a message travels",
//! step 4), as named steps: charge the credit or answer with the upgrade prompt, continue
//! the session, choose who answers, record the routed run, then wake the external agent or
//! build the model call.

use hermes_config::local_host_toolsets;
use hermes_db::agents::{self, Agent};
use hermes_db::inbox::FirstWake;
use hermes_db::{Transaction, credits, inbox, runs, sessions};
use hermes_runtime::stage::StageError;
use hermes_types::agent::{AgentKind, CONTRACT_VERSION, EngagementMode, WakeEvent};
use hermes_types::envelope::Envelope;
use hermes_types::ids::{DeliveryId, SessionId};
use hermes_types::model::{
    AgentWake, Exchange, FinishReason, LlmRequest, Reply, Tier, ToolPolicy, ToolSpec,
    agent_tool_rounds,
};

use super::run_row::new_run;
use super::{Decided, Routed, Router};
use crate::soul::{self, Persona};
use crate::{dispatch, messages, tool_gate};

/// Who answers a routed message and on what terms, settled in `commit` under the user's
/// row lock.
struct Assignment {
    chosen: dispatch::Chosen,
    session: SessionId,
    tier: Tier,
    mode: EngagementMode,
    /// The agent's tool allowlist (None: no list applies).
    allowlist: Option<Vec<String>>,
    /// The tools the run is offered: the only ones the tools stage will run for it.
    offered: Vec<ToolSpec>,
    credits_charged: i64,
}

impl Assignment {
    fn agent(&self) -> Option<&Agent> {
        self.chosen.agent.as_ref()
    }
}

impl Router {
    /// A known user's message, in order: charge the credit (or answer with the upgrade
    /// prompt), continue the session, choose who answers, record the routed run, then wake
    /// the external agent or ask the model.
    pub(super) async fn commit_route(
        &self,
        env: &Envelope,
        r: Routed,
        tx: &Transaction<'_>,
    ) -> Result<(Vec<Envelope>, Decided), StageError> {
        let credits_charged = match self.charge_credit(env, &r, tx).await? {
            Ok(cost) => cost,
            Err(balance) => {
                let prompt = self.commit_upgrade_prompt(env, &r, balance, tx).await?;
                return Ok((prompt, Decided::uncharged("upgrade")));
            }
        };
        let session = self.continue_session(&r, tx).await?;
        let chosen = self.choose_agent(&r, tx).await?;
        let agent = chosen.agent.as_ref();
        let mode = agent.map(|a| a.engagement_mode).unwrap_or_default();
        let allowlist = agent.and_then(|a| a.tool_allowlist.clone());
        let local = local_host_toolsets(&self.ctx.config.mcp_servers);
        let offered = tool_gate::offered_to(
            r.tools.clone(),
            agent.map(|a| a.toolsets.as_slice()).unwrap_or_default(),
            mode,
            &local,
            allowlist.as_deref(),
        );
        let assignment = Assignment {
            tier: agent.and_then(|a| a.tier).unwrap_or(r.who.user.tier),
            mode,
            allowlist,
            offered,
            chosen,
            session,
            credits_charged,
        };
        self.record_routed_run(env, &r, &assignment, tx).await?;
        if let Some(a) = assignment.agent().filter(|a| a.kind == AgentKind::External) {
            let wake = self
                .wake_external_agent(env, &r, a, &assignment, tx)
                .await?;
            let decided = Decided {
                decision: "external",
                credits_charged,
            };
            return Ok((wake.into_iter().collect(), decided));
        }
        let decided = Decided {
            decision: "routed",
            credits_charged,
        };
        Ok((
            vec![env.follow(&self.model_request(r, &assignment))],
            decided,
        ))
    }

    /// Step 2, the credit, under the user's row lock so concurrent messages never
    /// double-spend: the cost charged, or the balance that falls short. The run row is
    /// written last, with everything known; if it turns out to be a duplicate the whole
    /// transaction (this charge included) is rolled back.
    async fn charge_credit(
        &self,
        env: &Envelope,
        r: &Routed,
        tx: &Transaction<'_>,
    ) -> Result<Result<i64, i64>, StageError> {
        let cost = i64::from(self.ctx.config.router.credits_per_message);
        match credits::charge(tx, r.who.user.id, env.run_id, cost).await? {
            credits::Charge::Insufficient { balance } => return Ok(Err(balance)),
            credits::Charge::Charged { .. } | credits::Charge::AlreadyCharged => {}
        }
        Ok(Ok(cost))
    }

    /// Out of credits: the run is recorded uncharged and the user gets the upgrade prompt.
    async fn commit_upgrade_prompt(
        &self,
        env: &Envelope,
        r: &Routed,
        balance: i64,
        tx: &Transaction<'_>,
    ) -> Result<Vec<Envelope>, StageError> {
        let settings = &self.ctx.config.router;
        let user = &r.who.user;
        if !self
            .record_uncharged(env, &r.inbound, user, Some(&r.text), tx)
            .await?
        {
            return Err(StageError::Duplicate("the run exists already"));
        }
        tracing::info!(balance, "out of credits: upgrade prompt");
        let prompt = settings
            .upgrade_prompt
            .replace("{referral_code}", &user.referral_code)
            .replace("{upgrade_url}", &settings.upgrade_url);
        Ok(vec![env.follow(&Reply::notice(
            r.inbound.reply_to(),
            FinishReason::CreditsExhausted,
            prompt,
        ))])
    }

    /// Step 4 for real: the session this message belongs to. The charge holds the user's
    /// row lock, which serializes this user's messages.
    async fn continue_session(
        &self,
        r: &Routed,
        tx: &Transaction<'_>,
    ) -> Result<SessionId, StageError> {
        let event = &r.inbound.event;
        let session = sessions::current_or_start_locked(
            tx,
            r.who.user.id,
            event.platform,
            &event.chat_id,
            r.now,
            self.ctx.config.router.session_idle(),
        )
        .await?;
        Ok(session.id)
    }

    /// Dispatch: assignment, mention, round robin, or the default persona.
    async fn choose_agent(
        &self,
        r: &Routed,
        tx: &Transaction<'_>,
    ) -> Result<dispatch::Chosen, StageError> {
        let ask = dispatch::Ask {
            presence: &self.presence,
            heard_within: self.ctx.config.router.agent_presence,
            paused: self.ctx.config.dispatcher.paused_assignments,
        };
        let chosen = dispatch::choose(tx, &ask, &r.who, &r.text, r.intent).await?;
        self.ctx
            .metrics
            .router
            .dispatches
            .with_label_values(&[chosen.dispatch.mode.as_str(), dispatch::kind_label(&chosen)])
            .inc();
        Ok(chosen)
    }

    /// The run row with its routing, its inbound interaction and the activity event, in
    /// one statement. A run that exists already (a redelivery, or the same platform message
    /// under another run id) is a duplicate: the charge, the session touch and the dispatch
    /// roll back with it.
    async fn record_routed_run(
        &self,
        env: &Envelope,
        r: &Routed,
        a: &Assignment,
        tx: &Transaction<'_>,
    ) -> Result<(), StageError> {
        let agent = a.agent();
        let mut intent_meta = serde_json::json!({ "intent": r.provenance.intent });
        // The message's files as references (a platform's file id or the URL it sent, never
        // a download URL or bytes), for operators (`attachments_fetch`).
        let media = &r.inbound.event.media;
        if !media.is_empty() {
            intent_meta["media"] = serde_json::json!(media);
        }
        let mut dispatch_data =
            serde_json::json!({ "dispatch": a.chosen.dispatch, "engagement_mode": a.mode });
        // What an external agent's wake names, so that its re-wakes name the same.
        if agent.is_some_and(|chosen| chosen.kind == AgentKind::External) {
            dispatch_data["tool_allowlist"] = serde_json::json!(host_tool_allowlist(a));
            dispatch_data["wake_event"] =
                serde_json::json!(WakeEvent::of_run(r.inbound.event.platform));
        }
        let routing = runs::Routing {
            user_id: r.who.user.id,
            agent_id: agent.map(|a| a.id),
            session_id: Some(a.session),
            dispatch: Some(&a.chosen.dispatch),
            engagement_mode: Some(a.mode),
            credits_charged: a.credits_charged,
            tier: a.tier,
            provenance: Some(&r.provenance),
        };
        let created = runs::create_routed(
            tx,
            &new_run(env, &r.inbound, a.tier, Some(&r.text)),
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
            return Err(StageError::Duplicate("the run exists already"));
        }
        Ok(())
    }

    /// An external runtime answers: owe it a signed wake; the run is its inbox entry. A
    /// pull-only agent (no webhook URL) is not woken, and a run held for a paused agent is
    /// woken when the agent is ONLINE again (`external::release`): no wake now for either.
    async fn wake_external_agent(
        &self,
        env: &Envelope,
        r: &Routed,
        agent: &Agent,
        a: &Assignment,
        tx: &Transaction<'_>,
    ) -> Result<Option<Envelope>, StageError> {
        let run_id = env.run_id;
        let first = if a.chosen.held {
            FirstWake::Held
        } else if agent.webhook_url.is_none() {
            FirstWake::PullOnly
        } else {
            FirstWake::Woken
        };
        // The run waits for its agent until the reply deadline (docs/agents.md, "When an
        // external run ends").
        inbox::start_wait(tx, run_id, agent.reply_deadline(), first).await?;
        tracing::info!(
            agent = agent.profile_key,
            deadline_secs = agent.reply_deadline_secs,
            first_wake = ?first,
            "run dispatched to an external agent"
        );
        if first == FirstWake::Held {
            self.ctx
                .metrics
                .agents
                .held_runs
                .with_label_values(&[agent.profile_key.as_str(), "held"])
                .inc();
        }
        if first != FirstWake::Woken {
            return Ok(None);
        }
        let delivery_id = DeliveryId::new();
        // A person's chat message is the contract's CHAT_MESSAGE_POSTED (docs/agents.md,
        // "Signed agent webhooks"); the row records the event the wake names.
        let event = WakeEvent::of_run(r.inbound.event.platform);
        agents::owe_wake(tx, delivery_id, run_id, agent.id, event).await?;
        Ok(Some(env.follow(&AgentWake {
            delivery_id,
            agent_id: agent.id,
            profile_key: agent.profile_key.clone(),
            event,
            dispatch: a.chosen.dispatch.clone(),
            engagement_mode: a.mode,
            contract_version: CONTRACT_VERSION.into(),
            tool_allowlist: host_tool_allowlist(a),
            message: r.inbound.event.clone(),
        })))
    }

    /// Step 8 onwards goes to the llm stage: the model chain, the persona's system prompt
    /// over the session's history, and the tools this agent and mode are offered.
    fn model_request(&self, r: Routed, a: &Assignment) -> LlmRequest {
        let settings = &self.ctx.config.router;
        let agent = a.agent();
        // Step 8, the model choice: the vision model for images, else the tier's chain.
        let chain = if r.image_intent.is_some() {
            vec![settings.vision_model.clone()]
        } else {
            self.tier_chain(a.tier)
        };
        let persona = Persona::of(agent, &settings.persona);
        let tools = a.offered.clone();
        // A session that rolled over since `prepare` starts with no history.
        let history = if r.session_seen == Some(a.session) {
            r.history
        } else {
            Vec::new()
        };
        let mut system = soul::compose(&persona, &r.base, r.recall_block.as_deref());
        // The image intent's instruction (`[router.vision]`) is the vision call's last
        // system block.
        if let Some(i) = r.image_intent {
            system.push(settings.vision.instruction(i).to_string());
        }
        let messages = messages::conversation(system, history, r.user_turn);
        tracing::info!(
            tier = a.tier.as_str(),
            tools = tools.len(),
            dispatch = a.chosen.dispatch.mode.as_str(),
            "run routed"
        );
        LlmRequest {
            tools,
            requested_model: r.inbound.requested_model.clone(),
            exchange: Some(Exchange {
                user_id: r.who.user.id,
                session_id: a.session,
                tier: a.tier,
                user_text: r.text,
                provenance: r.provenance,
            }),
            // An agent moved to another backend at run time answers there first.
            backend: agent.and_then(|a| a.backend.clone()),
            workspace: agent.map(|a| a.workspace_id),
            api_key: r.inbound.api_key_id,
            // The agent's engagement mode and allowlist govern what its tool calls may
            // execute; the tools stage also refuses anything not in `tools`.
            policy: ToolPolicy {
                engagement_mode: a.mode,
                tool_allowlist: a.allowlist.clone(),
            },
            // An agent's run takes up to its own bound of tool rounds; the built-in
            // persona's keeps the single round of a chat message.
            max_tool_rounds: agent.map_or(1, |a| agent_tool_rounds(a.max_tool_rounds)),
            // Photos by reference; the llm stage fetches them for each call.
            media: r.media,
            inbound_message_id: r.inbound.user_message_id().map(str::to_string),
            ..LlmRequest::new(r.inbound.reply_to(), a.tier, chain, messages)
        }
    }
}

/// Host-side tools an external run may use (docs/agents.md): none in the restricted modes;
/// in EXECUTE, the agent's allowlist as configured, or without one the toolsets of the
/// tools it was offered.
fn host_tool_allowlist(a: &Assignment) -> Vec<String> {
    if a.mode != EngagementMode::Execute {
        return Vec::new();
    }
    if let Some(list) = &a.allowlist {
        return list.clone();
    }
    let mut sets: Vec<String> = a.offered.iter().map(|t| t.toolset.clone()).collect();
    sets.sort();
    sets.dedup();
    sets
}
