//! The tools stage for one request: run every call the model asked for (each bounded in
//! time), append the results as tool turns, and send the conversation back to the llm stage.

use std::sync::{Arc, RwLock};
use std::time::Instant;

use hermes_bus::Stage;
use hermes_db::Transaction;
use hermes_runtime::Ctx;
use hermes_runtime::stage::{Handler, StageError};
use hermes_types::envelope::Envelope;
use hermes_types::model::{ChatMessage, ToolCall, ToolPolicy, ToolRequest};
use hermes_types::sync;

use crate::policy::{self, RefusalReason};
use crate::registry::{Registry, ToolError};

pub struct ToolStage {
    ctx: Ctx,
    /// Swapped whole by a reload; a call in flight keeps the registry it started with.
    registry: Arc<RwLock<Registry>>,
}

impl ToolStage {
    pub fn new(ctx: Ctx, registry: Arc<RwLock<Registry>>) -> Self {
        Self { ctx, registry }
    }

    async fn run_call(&self, policy: &ToolPolicy, call: &ToolCall) -> String {
        let started = Instant::now();
        let registry = sync::read(&self.registry).clone();
        let done = execute(&registry, policy, call).await;
        let m = &self.ctx.metrics;
        let label = if done.outcome == Outcome::UnknownTool {
            "unknown"
        } else {
            call.name.as_str()
        };
        m.tool_calls
            .with_label_values(&[label, done.outcome.as_str()])
            .inc();
        if let Outcome::Refused(reason) = done.outcome {
            m.tool_refusals.with_label_values(&[reason.as_str()]).inc();
        }
        m.tool_duration
            .with_label_values(&[label])
            .observe(started.elapsed().as_secs_f64());
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

/// Run `call` from `registry` under `policy`, bounded by the tool's deadline.
pub async fn execute(registry: &Registry, policy: &ToolPolicy, call: &ToolCall) -> Executed {
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
    let (outcome, text) = match tokio::time::timeout(deadline, tool.call(&call.arguments)).await {
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

impl Handler for ToolStage {
    const STAGE: Stage = Stage::Tools;
    type Prepared = ToolRequest;
    type After = ();

    async fn prepare(&self, env: &Envelope) -> Result<ToolRequest, StageError> {
        let mut req: ToolRequest = env.payload()?;
        let started = Instant::now();
        let policy = req.request.policy.clone();
        let results =
            futures_util::future::join_all(req.calls.iter().map(|c| self.run_call(&policy, c)))
                .await;
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
        Ok(req)
    }

    async fn commit(
        &self,
        env: &Envelope,
        req: ToolRequest,
        _tx: &Transaction<'_>,
    ) -> Result<(Vec<Envelope>, ()), StageError> {
        Ok((vec![env.follow(&req.request)], ()))
    }
}
