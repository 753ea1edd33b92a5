//! The tools stage for one request: run every call the model asked for (each bounded in
//! time), append the results as tool turns, and send the conversation back to the llm stage.
//!
//! An API run's event stream is told when each call starts and finishes (docs/api.md,
//! runs). Before the round, the run's stop request is read: a run asked to stop runs no tool
//! and ends `cancelled`; a round of a run already closed (swept and refunded) runs nothing
//! and is acked. (The calls of a round run side by side, so that one check is the safe point
//! before each of them.)
//!
//! A round with a call that needs an operator's approval and has no answer yet runs
//! nothing: its commit records the waiting calls with the round and sets the run
//! `awaiting_approval`, and emits nothing (docs/operator-mcp.md, approvals). The answer that
//! leaves no call waiting queues the round again with every answer; then allowed calls
//! run, denied and timed-out ones get a structured denial, and the others run as usual.
//! Either message is processed once (the stage's processed-message record), so a round
//! never runs twice.
//!
//! While the calls run, a Telegram chat keeps seeing the typing action (`hermes-presence`).
//!
//! A Forge run's first message here is its preflight (`crate::forge`): the contract's list,
//! ack and bundle, done before the model is called; a chat run's answer is then relayed to
//! its thread as it streams, and its whole answer comes back here as a message of its own
//! once delivery closed the run (`crate::forge_answer`).

use std::sync::{Arc, RwLock};
use std::time::Instant;

use tracing::Instrument;

use hermes_bus::Stage;
use hermes_cache::run_events::{RunEvent, RunEvents};
use hermes_db::approvals::{self, Approval};
use hermes_db::forge_answers::{self, Owed};
use hermes_db::{Transaction, runs};
use hermes_presence::Presence;
use hermes_runtime::Ctx;
use hermes_runtime::stage::{Handler, ParkCause, StageError};
use hermes_types::envelope::{Envelope, MessageKind};
use hermes_types::ids::RunId;
use hermes_types::model::{
    ChatMessage, ForgeAnswer, ForgePreflight, LlmRequest, Platform, Reply, ToolCall, ToolRequest,
    ToolResult, parked,
};
use hermes_types::sync;

use crate::approval;
use crate::forge::Refused;
use crate::forge_answer::Posted;
use crate::policy::{self, Permit, RefusalReason};
use crate::registry::{Registry, ToolError};
use crate::spans;

pub struct ToolStage {
    ctx: Ctx,
    /// Swapped whole by a reload; a call in flight keeps the registry it started with.
    registry: Arc<RwLock<Registry>>,
    events: RunEvents,
    presence: Presence,
    /// Relays Forge chat runs' answers to their threads.
    answers: crate::forge_answer::Relays,
}

/// Where a round's tool calls are announced: an API run's event stream, or nowhere.
#[derive(Clone, Copy)]
struct Announce<'a> {
    events: Option<&'a RunEvents>,
    run: RunId,
    round: u8,
}

impl Announce<'_> {
    async fn send(&self, event: RunEvent) {
        if let Some(events) = self.events
            && let Err(e) = events.append(self.run, Platform::Api, &event).await
        {
            // Only the progress event is lost: the result still reaches the model.
            tracing::warn!(run = %self.run, error = %e, "cannot append a tool event");
        }
    }
}

impl ToolStage {
    /// A Forge run's preflight (docs/agents.md, "The loop, enforced"); a run asked to stop
    /// makes no call.
    async fn preflight(&self, env: &Envelope, stop: bool) -> Result<Preflighted, StageError> {
        let pre: ForgePreflight = env.payload()?;
        if stop {
            tracing::info!("stop requested: no Forge call");
            return Ok(Preflighted {
                next: Err(Reply::cancelled(&pre.request)),
                owed: None,
            });
        }
        let registry = sync::read(&self.registry).clone();
        let count = crate::forge::counter(&self.ctx);
        let thread = pre.target.thread_id.clone();
        let mut request = crate::forge::run(&registry, pre, count).await;
        // A chat run's answer streams to its thread: the model streams, a relay follows,
        // and the run owes the thread its whole answer.
        let owed = match (&mut request, thread) {
            (Ok(request), Some(thread)) => {
                request.stream = true;
                Some(self.answers.open(&registry, env.run_id, thread).await)
            }
            _ => None,
        };
        Ok(Preflighted {
            next: request,
            owed,
        })
    }

    /// Post a Forge chat run's whole answer where its preflight recorded it; a copy finds
    /// it posted. The run is closed by now, so it is not checked.
    async fn answer(&self, env: &Envelope) -> Result<Round, StageError> {
        let answer: ForgeAnswer = env.payload()?;
        let owed = {
            let client = self.ctx.db.get().await?;
            forge_answers::unposted(&client, env.run_id).await?
        };
        let Some(owed) = owed else {
            return Err(StageError::Duplicate("the Forge answer is posted already"));
        };
        let registry = sync::read(&self.registry).clone();
        let posted = self.answers.post(&registry, &owed, &answer.body).await;
        let outcome = match &posted {
            Ok(Posted::Posted) => "posted",
            Ok(Posted::RunEnded(_)) => "run_ended",
            Err(_) => "failed",
        };
        self.ctx
            .metrics
            .tools
            .forge_answers
            .with_label_values(&[outcome])
            .inc();
        match posted {
            Ok(Posted::Posted) => {}
            // Settled like a posted one: a copy of the message finds nothing owed.
            Ok(Posted::RunEnded(Refused(reason))) => tracing::info!(
                reason,
                "the Forge run has its reply already; this answer is not posted"
            ),
            Err(Refused(reason)) => return Err(StageError::Transient(anyhow::anyhow!(reason))),
        }
        Ok(Round::Posted)
    }

    pub fn new(ctx: Ctx, registry: Arc<RwLock<Registry>>) -> anyhow::Result<Self> {
        let events = RunEvents::new(ctx.cache.clone(), &ctx.config);
        let presence = Presence::new(&ctx.config.delivery, ctx.metrics.clone())?;
        let answers = crate::forge_answer::Relays::new(ctx.clone());
        Ok(Self {
            ctx,
            registry,
            events,
            presence,
            answers,
        })
    }

    fn count_delegations(&self, counted: &[(&'static str, usize)]) {
        let m = &self.ctx.metrics.tools.delegations;
        for &(outcome, n) in counted.iter().filter(|(_, n)| *n > 0) {
            m.with_label_values(&[outcome]).inc_by(n as u64);
        }
    }

    async fn run_call(
        &self,
        permit: Permit<'_>,
        call: &ToolCall,
        announce: Announce<'_>,
    ) -> String {
        let started = Instant::now();
        let registry = sync::read(&self.registry).clone();
        announce
            .send(RunEvent::ToolStarted {
                round: announce.round,
                call_id: call.id.clone(),
                name: call.name.clone(),
                arguments: call.arguments.clone(),
            })
            .await;
        let done = execute(&registry, permit, call).await;
        announce
            .send(RunEvent::ToolFinished {
                round: announce.round,
                call_id: call.id.clone(),
                name: call.name.clone(),
                output: done.text.clone(),
                ok: done.outcome == Outcome::Ok,
            })
            .await;
        let m = &self.ctx.metrics;
        // A name the run was not offered is the model's invention: never a label of its own.
        let label = if matches!(
            done.outcome,
            Outcome::UnknownTool | Outcome::Refused(RefusalReason::NotOffered)
        ) {
            "unknown"
        } else {
            call.name.as_str()
        };
        m.tools
            .calls
            .with_label_values(&[label, done.outcome.as_str()])
            .inc();
        if let Outcome::Refused(reason) = done.outcome {
            m.tools.refusals.with_label_values(&[reason.as_str()]).inc();
        }
        m.tools
            .duration
            .with_label_values(&[label])
            .observe(started.elapsed().as_secs_f64());
        spans::finish(
            done.outcome.as_str(),
            done.outcome != Outcome::Ok,
            &done.text,
        );
        tracing::info!(
            tool = call.name,
            outcome = done.outcome.as_str(),
            ms = started.elapsed().as_millis() as u64,
            "tool call"
        );
        done.text
    }
}

/// How one call ended (the `outcome` label of `hermes_tool_calls_total`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    Error,
    Timeout,
    UnknownTool,
    /// Refused by the run's policy, never executed.
    Refused(RefusalReason),
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Error => "error",
            Outcome::Timeout => "timeout",
            Outcome::UnknownTool => "unknown_tool",
            Outcome::Refused(_) => "refused",
        }
    }
}

/// One executed (or refused) call: its outcome and the text the model gets.
#[derive(Clone, Debug)]
pub struct Executed {
    pub outcome: Outcome,
    pub text: String,
}

/// Run `call` from `registry` if `permit` allows it, bounded by the tool's deadline. A tool
/// the run was not offered is refused before the registry is even asked, so a model cannot
/// reach a tool that intent gating, its agent's toolsets or its mode withheld.
pub async fn execute(registry: &Registry, permit: Permit<'_>, call: &ToolCall) -> Executed {
    let policy = permit.policy;
    if !permit.offers(&call.name) {
        let reason = RefusalReason::NotOffered;
        return Executed {
            outcome: Outcome::Refused(reason),
            text: policy::refusal_text(&call.name, reason, policy),
        };
    }
    let Some(tool) = registry.get(&call.name) else {
        return Executed {
            outcome: Outcome::UnknownTool,
            text: format!("error: no tool named {:?} is available", call.name),
        };
    };
    if let Err(reason) = policy::check(policy, tool.as_ref()) {
        return Executed {
            outcome: Outcome::Refused(reason),
            text: policy::refusal_text(&call.name, reason, policy),
        };
    }
    let deadline = tool.deadline();
    // Under the run's policy: an MCP server sampling during the call sees it applied to the
    // tools it offers the model (docs/tools-and-mcp.md, "Tools in sampling").
    let running = crate::mcp::as_run(policy, tool.call(&call.arguments));
    let (outcome, text) = match tokio::time::timeout(deadline, running).await {
        Ok(Ok(out)) => (Outcome::Ok, out),
        Ok(Err(e @ ToolError::Timeout(_))) => (Outcome::Timeout, format!("error: {e}")),
        Ok(Err(e)) => (Outcome::Error, format!("error: {e}")),
        Err(_) => (
            Outcome::Timeout,
            format!("error: {} did not finish within {deadline:?}", call.name),
        ),
    };
    Executed { outcome, text }
}

/// What `prepare` did with a round.
pub enum Round {
    /// The calls ran; the request carries their results, and `answered` the calls of it
    /// that had waited for an operator (for the metrics).
    Ran {
        req: ToolRequest,
        answered: Vec<Approval>,
        /// Delegation calls refused, and whether this was a held round resumed.
        delegations: Vec<(&'static str, usize)>,
    },
    /// A stop was asked for: no call ran and the run ends `cancelled`.
    Stopped(ToolRequest),
    /// A Forge run's preflight ran (crate::forge).
    Preflight(Box<Preflighted>),
    /// A Forge chat run's whole answer was posted to its thread.
    Posted,
    /// Calls wait for an operator (their ids): no call ran.
    Awaiting {
        req: ToolRequest,
        calls: Vec<String>,
    },
    /// Calls delegated to other workspaces start these runs; the round, with the results
    /// of its other calls, waits for them (crate::delegate).
    Delegating {
        req: ToolRequest,
        children: Vec<crate::delegate::Child>,
        /// Delegation calls refused (for the metrics).
        refused: usize,
    },
}

/// What a Forge run's preflight leaves to commit: the model call to make, or the reply that
/// ends the run without one; and, for a chat run, where its answer is owed.
pub struct Preflighted {
    next: Result<LlmRequest, Reply>,
    owed: Option<Owed>,
}

/// What a round's commit leaves to count once it is committed.
pub enum Counted {
    Nothing,
    /// These calls now wait.
    Requested(usize),
    /// These calls waited and were answered; delegation calls by outcome.
    Answered(Vec<Approval>, Vec<(&'static str, usize)>),
    /// Delegation calls by outcome (`started`, `refused`, `resumed`), for the metrics.
    Delegations(Vec<(&'static str, usize)>),
}

impl Handler for ToolStage {
    const STAGE: Stage = Stage::Tools;
    type Prepared = Round;
    type After = Counted;

    async fn prepare(&self, env: &Envelope) -> Result<Round, StageError> {
        if env.kind == MessageKind::ForgeAnswer {
            return self.answer(env).await;
        }
        let checked = {
            let client = self.ctx.db.get().await?;
            runs::check(&client, env.run_id).await?
        };
        if checked == runs::Checked::Closed {
            // Swept and refunded already: a late round runs no tool (docs/architecture.md#4-poison-is-parked-never-looped).
            self.ctx
                .metrics
                .run_events
                .late_messages
                .with_label_values(&[Self::STAGE.as_str()])
                .inc();
            return Err(StageError::Duplicate("run closed"));
        }
        let stop = checked == (runs::Checked::Open { stop: true });
        if env.kind == MessageKind::ForgePreflight {
            return Ok(Round::Preflight(Box::new(self.preflight(env, stop).await?)));
        }
        let mut req: ToolRequest = env.payload()?;
        if stop {
            tracing::info!("stop requested: no tool call");
            return Ok(Round::Stopped(req));
        }
        let waiting: Vec<String> = {
            let registry = sync::read(&self.registry);
            approval::waiting(registry.approvals(), &req)
                .iter()
                .map(|c| c.id.clone())
                .collect()
        };
        if !waiting.is_empty() {
            tracing::info!(
                calls = waiting.len(),
                "tool calls wait for an operator's approval"
            );
            return Ok(Round::Awaiting {
                req,
                calls: waiting,
            });
        }
        let answered = if req.decisions.is_empty() {
            Vec::new()
        } else {
            let client = self.ctx.db.get().await?;
            approvals::of_round(&client, env.run_id, req.request.tool_round).await?
        };
        // Delegation calls start runs elsewhere (crate::delegate); those that cannot get
        // their refusal as their result now.
        let permit = Permit::of(&req.request);
        let plan = crate::delegate::plan(&self.ctx, env.run_id, &req, permit).await?;
        // Results on arrival come only from a held round: this one resumes.
        let resumed = usize::from(!req.results.is_empty());
        let refused = plan.refused.len();
        req.results.extend(plan.refused);
        let delegating: Vec<String> = plan.children.iter().map(|c| c.call_id.clone()).collect();
        // The person keeps seeing the typing action while the tools run (docs/channels.md,
        // "Presence").
        let working = self.presence.working(&req.request.reply_to, None);
        let started = Instant::now();
        let permit = Permit::of(&req.request);
        let announce = Announce {
            events: (req.request.reply_to.platform == Platform::Api).then_some(&self.events),
            run: env.run_id,
            round: req.request.tool_round,
        };
        let results = futures_util::future::join_all(req.calls.iter().map(|c| {
            let server = sync::read(&self.registry)
                .get(&c.name)
                .and_then(|t| t.mcp_server().map(str::to_string));
            let span = spans::tool(c, server.as_deref(), &answered);
            let (req, delegating) = (&req, &delegating);
            async move {
                if let Some(text) = req.result_of(&c.id) {
                    return Some(text.to_owned());
                }
                if delegating.contains(&c.id) {
                    return None;
                }
                Some(match approval::decision(req, &c.id) {
                    Some(d) if !d.verdict.runs() => {
                        let text = approval::denial_text(&c.name, d);
                        spans::finish(d.verdict.as_str(), true, &text);
                        text
                    }
                    _ => self.run_call(permit, c, announce).await,
                })
            }
            .instrument(span)
        }))
        .await;
        drop(working);
        if !plan.children.is_empty() {
            // Held until the delegated runs end: what the other calls returned is kept with
            // the round, so they never run again (docs/a2a.md).
            let made: Vec<ToolResult> = req
                .calls
                .iter()
                .zip(results)
                .filter_map(|(call, text)| Some((call, text?)))
                .filter(|(call, _)| req.result_of(&call.id).is_none())
                .map(|(call, text)| ToolResult {
                    call_id: call.id.clone(),
                    text,
                })
                .collect();
            req.results.extend(made);
            tracing::info!(
                runs = plan.children.len(),
                "tool round held for the runs it delegated"
            );
            return Ok(Round::Delegating {
                req,
                children: plan.children,
                refused,
            });
        }
        let results: Vec<String> = results.into_iter().map(Option::unwrap_or_default).collect();
        if let Some(x) = req.request.exchange.as_mut() {
            x.provenance.tool_exec_ms += started.elapsed().as_millis() as u64;
            x.provenance
                .tools
                .extend(req.calls.iter().map(|c| c.name.clone()));
        }
        for (call, result) in req.calls.iter().zip(results) {
            req.request
                .messages
                .push(ChatMessage::tool_result(call.id.clone(), result));
        }
        req.request.tool_round += 1;
        req.decisions.clear();
        req.results.clear();
        let delegations = vec![("refused", refused), ("resumed", resumed)];
        Ok(Round::Ran {
            req,
            answered,
            delegations,
        })
    }

    async fn commit(
        &self,
        env: &Envelope,
        round: Round,
        tx: &Transaction<'_>,
    ) -> Result<(Vec<Envelope>, Counted), StageError> {
        let (next, counted) = match round {
            Round::Ran {
                req,
                answered,
                delegations,
            } => (
                env.follow(&req.request),
                Counted::Answered(answered, delegations),
            ),
            Round::Stopped(req) => (
                env.follow(&Reply::cancelled(&req.request)),
                Counted::Nothing,
            ),
            Round::Preflight(pre) => {
                if let Some(owed) = &pre.owed {
                    forge_answers::record(tx, env.run_id, owed).await?;
                }
                match pre.next {
                    Ok(request) => (env.follow(&request), Counted::Nothing),
                    Err(reply) => (env.follow(&reply), Counted::Nothing),
                }
            }
            Round::Posted => {
                if !forge_answers::mark_posted(tx, env.run_id).await? {
                    return Err(StageError::Duplicate(
                        "a copy of the Forge answer posted it",
                    ));
                }
                return Ok((Vec::new(), Counted::Nothing));
            }
            Round::Awaiting { req, calls } => {
                let waiting: Vec<&ToolCall> =
                    req.calls.iter().filter(|c| calls.contains(&c.id)).collect();
                let timeout = self.ctx.config.tools.approvals.timeout;
                let rows = approvals::request(tx, env.run_id, &req, &waiting, timeout).await?;
                let requested = rows.iter().filter(|a| a.decided_at.is_none()).count();
                return Ok((Vec::new(), Counted::Requested(requested)));
            }
            Round::Delegating {
                req,
                children,
                refused,
            } => {
                let n = children.len();
                let started = crate::delegate::commit(tx, env, &req, children).await?;
                let counted = vec![("started", n), ("refused", refused)];
                return Ok((started, Counted::Delegations(counted)));
            }
        };
        Ok((vec![next], counted))
    }

    async fn after_commit(&self, _env: &Envelope, counted: Counted) {
        let m = &self.ctx.metrics.operator;
        match counted {
            Counted::Nothing => {}
            Counted::Delegations(counted) => self.count_delegations(&counted),
            Counted::Requested(n) => m
                .approvals
                .with_label_values(&["requested"])
                .inc_by(n as u64),
            Counted::Answered(answered, delegations) => {
                self.count_delegations(&delegations);
                for a in answered {
                    let (approvals::Status::Decided(verdict), Some(waited)) =
                        (a.status, a.waited_secs())
                    else {
                        continue;
                    };
                    m.approvals.with_label_values(&[verdict.as_str()]).inc();
                    m.approval_wait
                        .with_label_values(&[verdict.as_str()])
                        .observe(waited);
                }
            }
        }
    }

    /// A message parked on its way to an answer ends its run with a failure reply
    /// (docs/architecture.md, "4. Poison is parked, never looped").
    async fn on_parked(&self, env: &Envelope, _cause: ParkCause) -> anyhow::Result<Vec<Envelope>> {
        Ok(parked::failure_reply(env)?.into_iter().collect())
    }
}

#[cfg(test)]
mod tests;
