//! The routing pipeline for one inbound message, top to bottom (docs/models-and-budgets.md, "The routing
//! decision tree"). `prepare` does the reads and the slow work outside any transaction
//! (steps 1, 3–7); `commit` makes the decision durable in one transaction: the run, the
//! credit (step 2), the session, the dispatch, the inbound interaction, and the next
//! message (step 8 onwards runs in the llm stage, or in an external agent). The commit of
//! a known user's message is in [`route`], as named steps; the OpenAI-compatible API's
//! messages are in [`api`]; a Forge's wakes in [`forge`].

mod api;
mod forge;
mod route;
pub(crate) mod run_row;

use hermes_types::ids::SessionId;
use std::sync::Arc;
use std::time::Instant;

use anyhow::anyhow;
use chrono::{DateTime, Utc};
use hermes_bus::Stage;
use hermes_cache::history::{HistoryCipher, HistoryStore};
use hermes_db::users::{self, Resolved};
use hermes_db::{Transaction, jobs, runs, sessions};
use hermes_runtime::Ctx;
use hermes_runtime::stage::{GroupCommit, Handler, ParkCause, StageError};
use hermes_types::envelope::Envelope;
use hermes_types::intent::{ImageIntent, Intent};
use hermes_types::model::parked;
use hermes_types::model::{
    ChatMessage, FinishReason, Inbound, MediaRef, Platform, Provenance, Reply, Tier, ToolSpec,
};

use crate::dispatch;
use crate::media::MediaStep;
use crate::messages;
use crate::recall::{Recall, RecallOutcome};
use crate::soul::Soul;
use crate::tool_gate;
use crate::tools::ToolCatalog;
use crate::{intent, trivial};
use hermes_db::memory::Fact;

/// The router's stage handler.
pub struct Router {
    ctx: Ctx,
    tools: ToolCatalog,
    soul: Soul,
    recall: Recall,
    history: Option<HistoryStore>,
    presence: dispatch::Presence,
    media: MediaStep,
    grants: api::KeyGrants,
    orchestrators: crate::delegation::Orchestrators,
}

/// The decision of a chat message held for its burst.
const HELD: &str = "burst_held";

/// What one message's commit decided, counted only once the commit holds: a commit group
/// that is rolled back and redone message by message must not count anything twice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decided {
    /// `routed`, `external`, `forge`, `upgrade`, `signup`, `media_refused`, `duplicate`,
    /// `job_deleted` or `burst_held`.
    pub decision: &'static str,
    /// Credits the commit charged (0 when none).
    pub credits_charged: i64,
}

impl Decided {
    fn uncharged(decision: &'static str) -> Self {
        Self {
            decision,
            credits_charged: 0,
        }
    }
}

impl Router {
    /// The router as configured. Fails when the embeddings client cannot be built.
    pub fn new(ctx: Ctx) -> anyhow::Result<Self> {
        let settings = &ctx.config.router;
        let recall = Recall::from_settings(settings)?;
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
            tools: ToolCatalog::listening(&ctx.db, ctx.stop.clone()),
            soul: Soul::new(ctx.cache.clone(), ctx.metrics.clone()),
            recall,
            history,
            presence: dispatch::Presence::default(),
            media: MediaStep::new(&ctx.config, ctx.metrics.router.media_fetches.clone())?,
            grants: api::KeyGrants::default(),
            orchestrators: crate::delegation::Orchestrators::default(),
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
    /// Step 1b's fallback: a known user's file the model cannot use; `notice` tells them.
    MediaRefused {
        inbound: Inbound,
        who: Box<Resolved>,
        notice: String,
    },
    /// A known user's message, ready to be charged and dispatched.
    Route(Box<Routed>),
    /// A Forge's wake: its internal agent runs the agent loop; no user, no credit.
    Forge(Box<forge::ForgeRun>),
    /// A chat message held in its conversation's quiet window (docs/channels.md, bursts).
    Hold { inbound: Inbound },
}

impl Decision {
    /// The message decided on.
    fn inbound(&self) -> &Inbound {
        match self {
            Decision::Api { inbound, .. }
            | Decision::Signup { inbound }
            | Decision::MediaRefused { inbound, .. }
            | Decision::Hold { inbound } => inbound,
            Decision::Route(r) => &r.inbound,
            Decision::Forge(f) => f.inbound(),
        }
    }
}

/// Everything prepared for a known user's message.
#[derive(Clone)]
pub struct Routed {
    inbound: Inbound,
    who: Resolved,
    text: String,
    intent: Intent,
    /// An image's intent: the vision model answers, with the intent's instruction.
    image_intent: Option<ImageIntent>,
    /// A chat platform's photos, by reference (fetched by the llm stage).
    media: Vec<MediaRef>,
    /// The session the history below belongs to (None: a new session starts).
    session_seen: Option<SessionId>,
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
    type After = Decided;
    // `prepare` only reads; the commit's idempotency record catches a duplicate.
    const PRECHECK_DUPLICATES: bool = false;

    async fn prepare(&self, env: &Envelope) -> Result<Decision, StageError> {
        let inbound: Inbound = env.payload()?;
        match inbound.event.platform {
            Platform::Api => return self.prepare_api(inbound).await,
            Platform::Forge => return self.prepare_forge(inbound).await,
            _ => {}
        }
        let event = &inbound.event;
        if event.text.as_deref().unwrap_or_default().trim().is_empty() && event.media.is_empty() {
            return Err(StageError::Poison(anyhow!(
                "inbound message has no text or media"
            )));
        }
        // Bursts: held until the conversation is quiet, then routed as one turn.
        if crate::bursts::holds(&self.ctx, &inbound) {
            return Ok(Decision::Hold { inbound });
        }
        let client = self.ctx.db.get().await?;

        // 1. Resolve the user (and the session this message would continue); unknown or
        // not activated → signup prompt, no credit.
        let Some((who, latest)) = users::resolve_with_session(
            &client,
            event.platform,
            inbound.api_key_id,
            &event.sender_id,
            &event.chat_id,
        )
        .await?
        .filter(|(r, _)| r.activated) else {
            return Ok(Decision::Signup { inbound });
        };
        // 1b. A chat platform's files: voice transcribed into the text, what the model
        // cannot use answered with a notice (docs/channels.md, media). No connection is
        // held while a file downloads. A user without the credit for the message is not
        // transcribed for: the commit answers with the upgrade prompt.
        let cost = i64::from(self.ctx.config.router.credits_per_message);
        let (text, client) =
            if event.platform.is_chat() && !event.media.is_empty() && who.user.credits >= cost {
                drop(client);
                // Boxed: the download and transcription futures are large, and most messages
                // carry no file.
                let text = match Box::pin(self.media.text_of(event)).await {
                    Ok(text) => text,
                    Err(notice) => {
                        return Ok(Decision::MediaRefused {
                            inbound,
                            who: Box::new(who),
                            notice,
                        });
                    }
                };
                (text, self.ctx.db.get().await?)
            } else {
                (messages::user_text(event), client)
            };
        // 2 (credits) happens in `commit`, under the user's row lock.
        // The session clock (its injection point is `sessions::current_or_start`'s `now`).
        let now = Utc::now();
        let idle = chrono::TimeDelta::from_std(self.ctx.config.router.session_idle())
            .unwrap_or(chrono::TimeDelta::MAX);
        let session_seen = latest
            .filter(|(_, last)| now.signed_duration_since(*last) <= idle)
            .map(|(id, _)| id);

        // 3 and 4 side by side (the queries pipeline on one connection): the soul's cached
        // base, the session history, and the facts semantic recall ranks (skipped for
        // trivial messages); the ranking's embeddings call comes once the connection is
        // back in the pool.
        let started = Instant::now();
        let session_side = async {
            let base = self
                .soul
                .base(&client, who.user.id, session_seen, now, inbound.chat_kind)
                .await?;
            let history = match session_seen {
                Some(session) => self.history_of(&client, session).await?,
                None => Vec::new(),
            };
            Ok::<_, StageError>((base, history))
        };
        let (session_side, recall_facts) =
            tokio::join!(session_side, self.recall_facts(&client, &who, &text));
        let (base, history) = session_side?;
        let soul_load = started.elapsed();
        self.ctx
            .metrics
            .router
            .soul_load_duration
            .observe(soul_load.as_secs_f64());

        // 5. Images: their intent picks the vision path, its instruction and its toolsets.
        let image_intent = messages::has_image(event).then(|| intent::classify_image(Some(&text)));
        let intent = match image_intent {
            Some(i) => messages::intent_of_image(i),
            None => intent::classify_in_context(&text, &history),
        };

        // 6. The current message as a turn (with image blocks).
        let user_turn = messages::user_turn(event, &text);

        // 7. Gate the tools by intent. A chat's run never delegates (docs/a2a.md).
        let catalog = crate::delegation::without(self.tools.tools(&client).await?);
        drop(client);
        let (recall_block, recall_used) = self.recall_rank(recall_facts, &text).await;
        let router = &self.ctx.config.router;
        let gated = match image_intent {
            Some(i) => tool_gate::gate_to(Some(&router.vision.toolsets(i)), &catalog),
            None => tool_gate::gate(intent, &catalog, &router.tool_gate),
        };
        self.ctx
            .metrics
            .router
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
            media: messages::platform_images(event),
            text,
            intent,
            image_intent,
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
    ) -> Result<(Vec<Envelope>, Decided), StageError> {
        // A scheduled job's run whose job was deleted on its way here is not run; the
        // job's row stays held until this commit, so a delete after this point finds the
        // run and asks it to stop (docs/api.md, jobs).
        if let Some(job) = decision.inbound().job.as_ref().and_then(|j| j.job_id)
            && !jobs::hold(tx, job).await?
        {
            tracing::info!(job_id = %job, "the job was deleted: its run is dropped");
            return Ok((Vec::new(), Decided::uncharged("job_deleted")));
        }
        run_row::open_windows(decision.inbound(), tx).await?;
        match decision {
            Decision::Api {
                inbound,
                messages,
                tools,
            } => self.commit_api(env, inbound, messages, tools, tx).await,
            Decision::Signup { inbound } => self.commit_signup(env, inbound, tx).await,
            Decision::MediaRefused {
                inbound,
                who,
                notice,
            } => {
                self.commit_media_refused(env, inbound, &who, notice, tx)
                    .await
            }
            Decision::Route(r) => self.commit_route(env, *r, tx).await,
            Decision::Forge(f) => self.commit_forge(env, *f, tx).await,
            Decision::Hold { inbound } => {
                let held = crate::bursts::hold(env, &inbound, tx).await?;
                let decision = if held { HELD } else { "duplicate" };
                Ok((Vec::new(), Decided::uncharged(decision)))
            }
        }
    }

    /// Counted once the commit holds: a group that is rolled back and redone message by
    /// message must not count its decisions twice.
    async fn after_commit(&self, _env: &Envelope, decided: Decided) {
        self.decided(decided.decision);
        if decided.decision == HELD {
            self.ctx
                .metrics
                .router
                .bursts
                .with_label_values(&["held"])
                .inc();
        }
        if decided.credits_charged > 0 {
            self.ctx
                .metrics
                .router
                .credits
                .with_label_values(&["charge"])
                .inc_by(decided.credits_charged as u64);
        }
    }

    /// A platform message routed already under another run (a lost dedupe key).
    fn on_duplicate(&self, _env: &Envelope, _why: &'static str) {
        self.decided("duplicate");
    }

    /// A message parked on its way to an answer ends its run with a failure reply
    /// (docs/architecture.md, "4. Poison is parked, never looped").
    async fn on_parked(&self, env: &Envelope, _cause: ParkCause) -> anyhow::Result<Vec<Envelope>> {
        Ok(parked::failure_reply(env)?.into_iter().collect())
    }
}

impl GroupCommit for Router {
    /// A known user's commit starts with the charge, which locks the user's row.
    fn lock_key(decision: &Decision) -> Option<uuid::Uuid> {
        match decision {
            Decision::Route(r) => Some(r.who.user.id.as_uuid()),
            Decision::Api { .. }
            | Decision::Signup { .. }
            | Decision::MediaRefused { .. }
            | Decision::Forge(_)
            | Decision::Hold { .. } => None,
        }
    }
}

impl Router {
    /// Count a routing decision in `hermes_router_decisions_total`.
    fn decided(&self, decision: &str) {
        self.ctx
            .metrics
            .router
            .decisions
            .with_label_values(&[decision])
            .inc();
    }

    async fn commit_signup(
        &self,
        env: &Envelope,
        inbound: Inbound,
        tx: &Transaction<'_>,
    ) -> Result<(Vec<Envelope>, Decided), StageError> {
        let text = inbound.event.text.as_deref();
        if !self.create_run(env, &inbound, Tier::Free, text, tx).await? {
            return Ok((Vec::new(), Decided::uncharged("duplicate")));
        }
        let settings = &self.ctx.config.router;
        let prompt = settings
            .signup_prompt
            .replace("{signup_url}", &settings.signup_url);
        tracing::info!("unknown or inactive sender: signup prompt");
        let notice = Reply::notice(inbound.reply_to(), FinishReason::SignupRequired, prompt);
        Ok((vec![env.follow(&notice)], Decided::uncharged("signup")))
    }

    /// A file the model cannot use: the run is recorded uncharged, for the user, and they
    /// are told why (docs/channels.md, media).
    async fn commit_media_refused(
        &self,
        env: &Envelope,
        inbound: Inbound,
        who: &Resolved,
        notice: String,
        tx: &Transaction<'_>,
    ) -> Result<(Vec<Envelope>, Decided), StageError> {
        let text = inbound.event.text.as_deref();
        if !self
            .record_uncharged(env, &inbound, &who.user, text, tx)
            .await?
        {
            return Ok((Vec::new(), Decided::uncharged("duplicate")));
        }
        tracing::info!("a file the model cannot use: notice, no credit");
        let reply = Reply::notice(inbound.reply_to(), FinishReason::MediaUnusable, notice);
        Ok((
            vec![env.follow(&reply)],
            Decided::uncharged("media_refused"),
        ))
    }

    /// A known user's run answered without a model and not charged (the upgrade prompt, a
    /// refused file): the run row with its user and no session. False when the run exists
    /// already.
    async fn record_uncharged(
        &self,
        env: &Envelope,
        inbound: &Inbound,
        user: &users::User,
        text: Option<&str>,
        tx: &Transaction<'_>,
    ) -> Result<bool, StageError> {
        if !self.create_run(env, inbound, user.tier, text, tx).await? {
            return Ok(false);
        }
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
        Ok(true)
    }

    /// The tier's chain of logical models.
    fn tier_chain(&self, tier: Tier) -> Vec<String> {
        self.ctx
            .config
            .tiers
            .get(&tier)
            .cloned()
            .unwrap_or_default()
    }

    /// Recall's facts for this message (on the connection), or why there is nothing to rank.
    async fn recall_facts(
        &self,
        client: &hermes_db::Client,
        who: &Resolved,
        text: &str,
    ) -> Result<Arc<Vec<Fact>>, RecallOutcome> {
        if trivial::is_trivial(text) {
            self.ctx
                .metrics
                .router
                .semantic_recall_skipped_trivial
                .inc();
            return Err(RecallOutcome::Skipped);
        }
        self.recall.facts(client, who.user.id, text).await
    }

    /// Rank the facts against the message (no connection held); returns the block and
    /// whether recall ran.
    async fn recall_rank(
        &self,
        facts: Result<Arc<Vec<Fact>>, RecallOutcome>,
        text: &str,
    ) -> (Option<String>, bool) {
        let m = &self.ctx.metrics;
        let outcome = match facts {
            Ok(facts) => self.recall.rank(&facts, text).await,
            Err(outcome) => outcome,
        };
        match outcome {
            RecallOutcome::Skipped => (None, false),
            RecallOutcome::Used(block) => {
                let label = if block.is_some() { "used" } else { "empty" };
                m.router.semantic_recall.with_label_values(&[label]).inc();
                (block, true)
            }
            RecallOutcome::Off => {
                m.router.semantic_recall.with_label_values(&["off"]).inc();
                (None, false)
            }
            RecallOutcome::Failed(why) => {
                m.router
                    .semantic_recall
                    .with_label_values(&["failed"])
                    .inc();
                tracing::warn!(error = why, "semantic recall failed; answering without it");
                (None, false)
            }
        }
    }

    /// The session's history: from the encrypted Redis cache, or rebuilt from PostgreSQL
    /// (and cached again) on a miss. Keyed by the session, which is one user's in one chat:
    /// in a group, each member's model sees only that member's turns.
    async fn history_of(
        &self,
        client: &hermes_db::Client,
        session: SessionId,
    ) -> Result<Vec<ChatMessage>, StageError> {
        let max = self.ctx.config.router.history_max_turns;
        if let Some(store) = &self.history
            && let Some(h) = store.load(session).await
        {
            return Ok(h);
        }
        let rebuilt = sessions::history(client, session, max).await?;
        if let Some(store) = &self.history {
            store.save(session, &rebuilt).await;
        }
        Ok(rebuilt)
    }
}
