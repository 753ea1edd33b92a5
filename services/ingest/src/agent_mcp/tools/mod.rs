//! The tools of the agent MCP surface (docs/agents.md, "The agent's side"), one file per
//! group, and what they share: the calling agent (the key's linked agent, external only),
//! argument parsing with clear refusals, the run checks every run tool makes (the run is
//! the caller's, open, and its reply not yet given), the engagement-mode gate of mutations,
//! and the metrics of each call. Both transports (JSON-RPC and the REST alias) call [`call`].

mod agents;
mod catalog;
mod chat;
mod drafts;
mod inbox;
mod memory;

use hermes_db::agents::Agent;
use hermes_db::inbox::ExternalRun;
use hermes_db::{Client, DbError};
use hermes_types::agent::{AgentKind, EngagementMode};
use hermes_types::envelope::{Envelope, Payload};
use hermes_types::ids::{AgentId, RunId};
use serde_json::{Map, Value};

pub use catalog::Tool;

use super::auth::Identity;
use super::errors::{ErrorCode, ToolError};
use crate::AppState;

/// Longest answer, delta or message text (as the REST channel's messages).
pub const MAX_TEXT: usize = 64 * 1024;
/// Longest `runs.fail` reason kept (longer is cut, not refused: it is for operators).
pub const MAX_REASON: usize = 2000;
/// Longest remembered value.
pub const MAX_MEMORY_VALUE: usize = 1000;
/// `inbox.list`'s default and largest `limit`.
pub const DEFAULT_LIST: i64 = 25;
pub const MAX_LIST: i64 = 100;

/// One tool call: the calling agent and the application's handles.
pub struct Call<'a> {
    pub app: &'a AppState,
    pub agent: Agent,
}

impl Call<'_> {
    /// A connection to PostgreSQL.
    async fn db(&self) -> Result<Client, ToolError> {
        Ok(self.app.ctx.db.get().await?)
    }

    /// The agent's profile key (the metrics' `agent` label).
    fn profile_key(&self) -> &str {
        &self.agent.profile_key
    }
}

/// Run `tool` with `args` as `identity`, counted in `hermes_mcp_calls_total{tool,outcome}`.
pub async fn call(
    app: &AppState,
    identity: Identity,
    tool: Tool,
    args: Value,
) -> Result<Value, ToolError> {
    let result = run(app, identity, tool, args).await;
    let outcome = match &result {
        Ok(_) => "ok",
        Err(e) => e.code.as_str(),
    };
    app.ctx
        .metrics
        .agents
        .mcp_calls
        .with_label_values(&[tool.name(), outcome])
        .inc();
    if let Err(e) = &result {
        tracing::info!(
            tool = tool.name(),
            code = e.code.as_str(),
            "agent MCP call refused"
        );
    }
    result
}

/// Count a call of a tool that does not exist.
pub fn count_unknown(app: &AppState) {
    app.ctx
        .metrics
        .agents
        .mcp_calls
        .with_label_values(&["unknown", ErrorCode::UnknownTool.as_str()])
        .inc();
}

async fn run(
    app: &AppState,
    identity: Identity,
    tool: Tool,
    args: Value,
) -> Result<Value, ToolError> {
    let agent_id = identity.agent.ok_or_else(|| {
        ToolError::new(
            ErrorCode::Unauthorized,
            "this key speaks for no agent: agent tools need a key made with `hermes api-keys create --agent <profileKey>`",
        )
    })?;
    let agent = calling_agent(app, agent_id).await?;
    let args = Args::parse(tool, args)?;
    let call = Call { app, agent };
    match tool {
        Tool::AgentsMe => agents::me(&call).await,
        Tool::AgentsHeartbeat => agents::heartbeat(&call, &args).await,
        Tool::InboxList => inbox::list(&call, &args).await,
        Tool::InboxAck => inbox::ack(&call, &args).await,
        Tool::ContextBundle => inbox::bundle(&call, &args).await,
        Tool::ChatAppendMessage => chat::append_message(&call, &args).await,
        Tool::ChatStartDraft => drafts::start(&call, &args).await,
        Tool::ChatAppendDraftChunk => drafts::append_chunk(&call, &args).await,
        Tool::ChatFinalizeDraft => drafts::finalize(&call, &args).await,
        Tool::RunsFail => chat::fail(&call, &args).await,
        Tool::MemoryRemember => memory::remember(&call, &args).await,
        Tool::ChatSendMessage => chat::send_message(&call, &args).await,
    }
}

/// The key's agent, which must be external: an internal agent's runs are answered by the
/// fleet's own models, and a second answerer would race them.
async fn calling_agent(app: &AppState, id: AgentId) -> Result<Agent, ToolError> {
    let client = app.ctx.db.get().await?;
    let agent = hermes_db::agents::get(&client, id).await?.ok_or_else(|| {
        ToolError::new(ErrorCode::Unauthorized, "the key's agent no longer exists")
    })?;
    if agent.kind != AgentKind::External {
        return Err(ToolError::new(
            ErrorCode::Unauthorized,
            format!(
                "agent {} is internal: the fleet answers its runs; agent tools serve external agents",
                agent.profile_key
            ),
        ));
    }
    Ok(agent)
}

/// The arguments that name a run: Hermes's own and the contract's (an issue and a chat
/// thread are both the run in Hermes).
const RUN_REFERENCES: [&str; 3] = ["runId", "issueId", "threadId"];

/// A tool's arguments: a JSON object holding only the names the tool's schema describes.
pub struct Args {
    map: Map<String, Value>,
    /// Which of [`RUN_REFERENCES`] the tool takes (for the message when none is given).
    run_names: Vec<&'static str>,
}

impl Args {
    /// `args` (absent or null: none) checked against `tool`'s argument names.
    fn parse(tool: Tool, args: Value) -> Result<Self, ToolError> {
        let map = match args {
            Value::Null => Map::new(),
            Value::Object(map) => map,
            _ => return Err(ToolError::invalid("arguments must be a JSON object")),
        };
        let known = tool.params();
        if let Some(unknown) = map.keys().find(|k| !known.contains(k)) {
            return Err(ToolError::invalid(format!(
                "{} takes no argument {unknown:?} (it takes: {})",
                tool.name(),
                if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                }
            )));
        }
        let run_names = RUN_REFERENCES
            .into_iter()
            .filter(|n| known.iter().any(|k| k == n))
            .collect();
        Ok(Self { map, run_names })
    }

    /// A string argument, if given (`null` counts as absent).
    fn opt_str(&self, name: &str) -> Result<Option<&str>, ToolError> {
        match self.map.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(_) => Err(ToolError::invalid(format!("{name} must be a string"))),
        }
    }

    /// A required text of 1 to `max` bytes, free of the NUL character (which PostgreSQL
    /// cannot store) and not only whitespace.
    fn text(&self, name: &str, max: usize) -> Result<String, ToolError> {
        self.opt_text(name, max)?
            .ok_or_else(|| ToolError::invalid(format!("{name} is required")))
    }

    /// [`Args::text`], optional.
    fn opt_text(&self, name: &str, max: usize) -> Result<Option<String>, ToolError> {
        let Some(s) = self.opt_str(name)? else {
            return Ok(None);
        };
        if s.trim().is_empty() {
            return Err(ToolError::invalid(format!("{name} must not be empty")));
        }
        if s.len() > max {
            return Err(ToolError::invalid(format!(
                "{name} is longer than {max} bytes"
            )));
        }
        if s.contains('\0') {
            return Err(ToolError::invalid(format!(
                "{name} may not contain the NUL character"
            )));
        }
        Ok(Some(s.to_string()))
    }

    /// A required id argument (a UUID).
    fn id<T: std::str::FromStr>(&self, name: &str) -> Result<T, ToolError> {
        let s = self
            .opt_str(name)?
            .ok_or_else(|| ToolError::invalid(format!("{name} is required")))?;
        s.trim()
            .parse()
            .map_err(|_| ToolError::invalid(format!("{name} is not an id (a UUID)")))
    }

    /// The run the call is about, if named: `runId`, or the contract's `issueId` or
    /// `threadId`, which in Hermes name the run too (docs/agents.md, "Threads and issues").
    /// A tool's schema says which of them it takes; two that name different runs are refused.
    fn opt_run_id(&self) -> Result<Option<RunId>, ToolError> {
        let mut named: Option<(&str, RunId)> = None;
        for name in RUN_REFERENCES {
            if self.opt_str(name)?.is_none() {
                continue;
            }
            let id: RunId = self.id(name)?;
            match named {
                Some((first, other)) if other != id => {
                    return Err(ToolError::invalid(format!(
                        "{first} and {name} name different runs: give one"
                    )));
                }
                _ => named = Some((name, id)),
            }
        }
        Ok(named.map(|(_, id)| id))
    }

    /// The run the call is about (see [`Args::opt_run_id`]), required.
    fn run_id(&self) -> Result<RunId, ToolError> {
        self.opt_run_id()?.ok_or_else(|| {
            ToolError::invalid(format!("{} is required", self.run_names.join(" or ")))
        })
    }

    /// An optional integer within `min..=max`.
    fn opt_int(&self, name: &str, min: i64, max: i64) -> Result<Option<i64>, ToolError> {
        hermes_mcp_server::int_argument(&self.map, name, min, max).map_err(ToolError::invalid)
    }
}

/// The run `id` of the calling agent (another agent's run is not found).
async fn own_run(
    client: &impl hermes_db::GenericClient,
    call: &Call<'_>,
    id: RunId,
) -> Result<ExternalRun, ToolError> {
    hermes_db::inbox::get(client, id, Some(call.agent.id))
        .await?
        .ok_or_else(ToolError::run_not_found)
}

/// Refuse a run that is closed or whose reply was already given.
fn ensure_open(run: &ExternalRun) -> Result<(), ToolError> {
    if run.status.is_final() || run.answered_at.is_some() {
        return Err(ToolError::run_ended());
    }
    Ok(())
}

/// A mutation beyond the run's own reply is allowed only in EXECUTE runs.
fn ensure_mutation_allowed(run: &ExternalRun, tool: Tool) -> Result<(), ToolError> {
    let mode = run.engagement_mode;
    if mode == Some(EngagementMode::Execute) {
        return Ok(());
    }
    Err(ToolError::new(
        ErrorCode::MutationNotAllowed,
        format!(
            "{} is not allowed in a {} run: only EXECUTE runs may change anything beyond their own reply",
            tool.name(),
            mode.map_or("mode-less", EngagementMode::as_str)
        ),
    )
    .with("engagementMode", mode.map(EngagementMode::as_str))
    .with("tool", tool.name()))
}

/// Queue `payload` of run `run` in the outbox of `tx` (published once it commits).
async fn queue<P: Payload>(
    tx: &hermes_db::Transaction<'_>,
    run: RunId,
    payload: &P,
) -> Result<(), ToolError> {
    let env = Envelope::new(run, None, payload);
    hermes_db::inbox::enqueue(tx, &[env]).await?;
    Ok(())
}

/// Map the error of opening a transaction.
fn tx_error(e: impl Into<DbError>) -> ToolError {
    ToolError::from(e.into())
}
