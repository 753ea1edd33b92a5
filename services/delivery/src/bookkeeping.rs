//! The router's bookkeeping contract for a finished exchange (docs/models-and-budgets.md, steps 9–10 of the routing pipeline), done
//! where the run closes: the answer is logged as an interaction with its provenance `meta`,
//! the session's activity moves on, a failed run's refund (made once by `runs::close`,
//! whoever retries) is counted, and memory extraction is queued so it never delays the
//! reply. The session history cache is extended after the commit. An operator's message
//! (`messages_send`, docs/operator-mcp.md) answers no turn: it is logged as an outbound
//! message of its conversation with `meta` `{source: "operator", by}`, and no memory is
//! extracted from it.

use chrono::Utc;
use hermes_cache::Cache;
use hermes_cache::history::{HistoryCipher, HistoryStore};
use hermes_db::runs::close::Closed;
use hermes_db::{DbError, Transaction, interactions, sessions};
use hermes_runtime::Ctx;
use hermes_telemetry::Metrics;
use hermes_types::envelope::Envelope;
use hermes_types::model::{
    ChatMessage, Exchange, MemoryExtract, OperatorMessage, Outcome, Reply, Role,
};

/// Writes what a finished exchange leaves behind.
pub struct Bookkeeping {
    history: Option<HistoryStore>,
    max_turns: usize,
    metrics: Metrics,
}

impl Bookkeeping {
    pub fn new(ctx: &Ctx) -> Self {
        let settings = &ctx.config.router;
        Self {
            history: history_store(&ctx.cache, ctx),
            max_turns: settings.history_max_turns,
            metrics: ctx.metrics.clone(),
        }
    }

    /// In the transaction that closed the run (`closed`, which refunded a failed run, whoever
    /// sent the failure: the llm stage, or a parked message's reply, which may not carry the
    /// exchange): the interaction and session. Returns the messages to emit (memory
    /// extraction).
    pub async fn record(
        &self,
        tx: &Transaction<'_>,
        env: &Envelope,
        reply: &Reply,
        closed: Closed,
    ) -> Result<Vec<Envelope>, DbError> {
        let run_id = env.run_id;
        if closed.refunded {
            self.metrics
                .router
                .credits
                .with_label_values(&["refund"])
                .inc();
            tracing::info!("credit refunded: the run ended without an answer");
        }
        if let Outcome::Failed { .. } = &reply.outcome {
            return Ok(Vec::new());
        }
        if let (Some(op), Outcome::Answered { text, .. }) = (&reply.operator, &reply.outcome) {
            log_operator_message(tx, run_id, op, text).await?;
            return Ok(Vec::new());
        }
        let Some(x) = &reply.exchange else {
            return Ok(Vec::new());
        };
        match &reply.outcome {
            Outcome::Answered { text, .. } => {
                let logged = interactions::log_interaction(
                    tx,
                    run_id,
                    x.user_id,
                    x.session_id,
                    interactions::Direction::Outbound,
                    text,
                    &x.provenance.to_meta(),
                )
                .await?;
                sessions::touch(tx, x.session_id, Utc::now()).await?;
                if !logged {
                    return Ok(Vec::new());
                }
                Ok(vec![env.follow(&MemoryExtract {
                    user_id: x.user_id,
                    tier: x.tier,
                    user_text: x.user_text.clone(),
                    answer: text.clone(),
                })])
            }
            Outcome::Failed { .. } => Ok(Vec::new()),
        }
    }

    /// After the commit that closed the run: extend the history cache of the exchange's own
    /// session. A late answer of a session that is over lands in that session's entry, which
    /// no later message reads; a copy of a reply already closed adds nothing.
    pub async fn remember(&self, reply: &Reply) {
        if let (Some(store), Some(op), Outcome::Answered { text, .. }) =
            (&self.history, &reply.operator, &reply.outcome)
        {
            let said = [ChatMessage::text(Role::Assistant, text.clone())];
            store.append(op.session_id, &said, self.max_turns).await;
            return;
        }
        let (Some(store), Some(x)) = (&self.history, &reply.exchange) else {
            return;
        };
        if let Outcome::Answered { text, .. } = &reply.outcome {
            store
                .append(x.session_id, &turns(x, text), self.max_turns)
                .await;
        }
    }
}

/// Log an operator's sent message in its conversation and move the session's activity on.
async fn log_operator_message(
    tx: &Transaction<'_>,
    run_id: hermes_types::ids::RunId,
    op: &OperatorMessage,
    text: &str,
) -> Result<(), DbError> {
    let meta = serde_json::json!({ "source": "operator", "by": op.by });
    interactions::log_interaction(
        tx,
        run_id,
        op.user_id,
        op.session_id,
        interactions::Direction::Outbound,
        text,
        &meta,
    )
    .await?;
    sessions::touch(tx, op.session_id, Utc::now()).await
}

fn turns(x: &Exchange, answer: &str) -> [ChatMessage; 2] {
    [
        ChatMessage::text(Role::User, x.user_text.clone()),
        ChatMessage::text(Role::Assistant, answer),
    ]
}

fn history_store(cache: &Cache, ctx: &Ctx) -> Option<HistoryStore> {
    HistoryCipher::new(&ctx.config.router.session_keys)
        .map(|c| HistoryStore::new(cache.clone(), c, ctx.config.router.session_idle()))
}
