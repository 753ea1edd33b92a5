//! The tools stage for one request: run every call the model asked for (each bounded in
//! time), append the results as tool turns, and send the conversation back to the llm stage.

use std::time::Instant;

use hermes_shared::Ctx;
use hermes_shared::bus::Stage;
use hermes_shared::db::Transaction;
use hermes_shared::envelope::Envelope;
use hermes_shared::model::{ChatMessage, ToolCall, ToolRequest};
use hermes_shared::stage::{Handler, StageError};

use crate::registry::{Registry, ToolError};

pub struct ToolStage {
    ctx: Ctx,
    registry: Registry,
}

impl ToolStage {
    pub fn new(ctx: Ctx, registry: Registry) -> Self {
        Self { ctx, registry }
    }

    async fn run_call(&self, call: &ToolCall) -> String {
        let started = Instant::now();
        let (outcome, text) = match self.registry.get(&call.name) {
            None => (
                "unknown_tool",
                format!("error: no tool named {:?} is available", call.name),
            ),
            Some(tool) => {
                let deadline = tool.deadline();
                match tokio::time::timeout(deadline, tool.call(&call.arguments)).await {
                    Ok(Ok(out)) => ("ok", out),
                    Ok(Err(e @ ToolError::Timeout(_))) => ("timeout", format!("error: {e}")),
                    Ok(Err(e)) => ("error", format!("error: {e}")),
                    Err(_) => (
                        "timeout",
                        format!("error: {} did not finish within {deadline:?}", call.name),
                    ),
                }
            }
        };
        let m = &self.ctx.metrics;
        let label = if outcome == "unknown_tool" {
            "unknown"
        } else {
            call.name.as_str()
        };
        m.tool_calls.with_label_values(&[label, outcome]).inc();
        m.tool_duration
            .with_label_values(&[label])
            .observe(started.elapsed().as_secs_f64());
        tracing::info!(
            tool = call.name,
            outcome,
            ms = started.elapsed().as_millis() as u64,
            "tool call"
        );
        text
    }
}

impl Handler for ToolStage {
    const STAGE: Stage = Stage::Tools;
    type Prepared = ToolRequest;
    type After = ();

    async fn prepare(&self, env: &Envelope) -> Result<ToolRequest, StageError> {
        let mut req: ToolRequest = env.payload()?;
        let started = Instant::now();
        let results =
            futures_util::future::join_all(req.calls.iter().map(|c| self.run_call(c))).await;
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
