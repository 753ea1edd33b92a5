//! `agent.inbox.list`, `agent.inbox.ack` and `agent.context.bundle` (also callable as
//! `inbox.list`, `inbox.ack`, `context.bundle`): the agent finds its runs, acknowledges
//! them (the inbox, not the wake, is the source of truth), and reads what it needs to
//! answer one, the message's attachments included (as references). The bundle is there only while the run waits for its reply (`RUN_ENDED`
//! after), and in a group run it holds none of the user's memory: the group-chat rule of
//! the fleet's own prompts (docs/security.md, "Conversations and tools").

use hermes_db::agent_inbox::{self, AckFilter, Acked};
use hermes_db::inbox::ExternalRun;
use hermes_db::{memory, sessions};
use hermes_types::agent::{CONTRACT_VERSION, EngagementMode};
use hermes_types::model::ChatKind;
use serde_json::{Value, json};

use super::{Args, Call, DEFAULT_LIST, MAX_LIST, ensure_open, own_run, tx_error};
use crate::agent_mcp::errors::ToolError;

/// Turns of the run's conversation the bundle carries.
const RECENT_TURNS: usize = 20;
/// Free facts about the user the bundle carries (the newest).
const RECENT_FACTS: i64 = 50;

/// A run as the inbox shows it.
fn entry(r: &ExternalRun) -> Value {
    json!({
        "runId": r.id,
        // The contract's names of the same run (docs/agents.md, "Threads and issues").
        "issueId": r.id,
        "threadId": r.id,
        "platform": r.platform.as_str(),
        "chatId": r.chat_id,
        "senderId": r.sender_id,
        "text": r.input_text,
        "status": r.status.as_str(),
        "engagementMode": r.engagement_mode.map(EngagementMode::as_str),
        "dispatch": r.dispatch,
        "createdAt": r.created_at,
        "ackedAt": r.acked_at,
        "deadlineAt": r.deadline_at,
        "wakes": r.wakes,
    })
}

/// `inbox.list`
pub async fn list(call: &Call<'_>, args: &Args) -> Result<Value, ToolError> {
    let filter = match args.opt_str("status")? {
        None => AckFilter::Unacked,
        Some(s) => AckFilter::parse(s)
            .ok_or_else(|| ToolError::invalid("status must be unacked, acked or all"))?,
    };
    let limit = args.opt_int("limit", 1, MAX_LIST)?.unwrap_or(DEFAULT_LIST);
    let client = call.db().await?;
    let runs = agent_inbox::open_runs(&client, call.agent.id, filter, limit).await?;
    Ok(json!({
        "status": filter.as_str(),
        "runs": runs.iter().map(entry).collect::<Vec<_>>(),
    }))
}

/// `inbox.ack`
pub async fn ack(call: &Call<'_>, args: &Args) -> Result<Value, ToolError> {
    let run = args.run_id()?;
    let mut client = call.db().await?;
    let tx = client.transaction().await.map_err(tx_error)?;
    let acked = agent_inbox::ack(&tx, run, call.agent.id).await?;
    tx.commit().await.map_err(tx_error)?;
    match acked {
        Acked::First(r) => {
            call.app
                .ctx
                .metrics
                .agents
                .time_to_ack
                .with_label_values(&[call.profile_key()])
                .observe(r.age_secs());
            Ok(json!({ "runId": run, "acked": true, "ackedAt": r.acked_at, "first": true }))
        }
        Acked::Already(at) => {
            Ok(json!({ "runId": run, "acked": true, "ackedAt": at, "first": false }))
        }
        Acked::NotFound => Err(ToolError::run_not_found()),
    }
}

/// What the run may do, as the contract's `runProtocol` says it.
fn run_protocol(call: &Call<'_>, r: &ExternalRun) -> Value {
    let mode = r.engagement_mode;
    let execute = mode == Some(EngagementMode::Execute);
    // Host-side tools: none in the restricted modes; in EXECUTE the agent's allowlist, or
    // without one its toolsets (as the wake names them).
    let allowlist = if execute {
        call.agent
            .tool_allowlist
            .clone()
            .unwrap_or_else(|| call.agent.toolsets.clone())
    } else {
        Vec::new()
    };
    json!({
        "runId": r.id,
        "contractVersion": r.contract_version.as_deref().unwrap_or(CONTRACT_VERSION),
        "engagementMode": mode.map(EngagementMode::as_str),
        "mutationAllowed": execute,
        "toolAllowlist": allowlist,
    })
}

/// What the agent is told of a group run (as the fleet's own prompt tells its model).
const GROUP_NOTE: &str = "A group chat: every member reads your answer. Answer the member who wrote to you. The user's memory is not shown in a group run.";

/// Whether the run's chat is a group: on a chat platform a private chat's id is its
/// sender's, so a chat that is not the sender's own is a group (a Telegram group or
/// supergroup). The run row keeps no more than that.
fn chat_kind(r: &ExternalRun) -> ChatKind {
    if r.platform.is_chat() && !r.chat_id.is_empty() && r.chat_id != r.sender_id {
        ChatKind::Group
    } else {
        ChatKind::Direct
    }
}

/// `context.bundle`
pub async fn bundle(call: &Call<'_>, args: &Args) -> Result<Value, ToolError> {
    let client = call.db().await?;
    let run = own_run(&client, call, args.run_id()?).await?;
    // A run with its reply is done: its session has moved on, and what the bundle shows
    // (turns, memory, facts) is the user's current state, not the run's.
    ensure_open(&run)?;
    let group = chat_kind(&run) == ChatKind::Group;
    let metadata = agent_inbox::run_metadata(&client, run.id).await?;
    let platform = Some(run.platform.as_str());
    let attachments: Vec<Value> = agent_inbox::run_media(&client, run.id)
        .await?
        .iter()
        .map(|m| m.attachment(platform))
        .collect();
    let turns = match run.session_id {
        Some(s) => sessions::history(&client, s, RECENT_TURNS).await?,
        None => Vec::new(),
    };
    let conversation: Vec<Value> = turns
        .iter()
        .map(|t| json!({ "role": t.role, "text": t.content }))
        .collect();
    let user = match run.user_id {
        Some(id) => {
            // In a group every member reads the answer: what the user told the bot
            // elsewhere (a private chat) stays out of it.
            let (known, facts) = if group {
                (Vec::new(), Vec::new())
            } else {
                (
                    memory::structural(&client, id).await?,
                    agent_inbox::recent_facts(&client, id, RECENT_FACTS).await?,
                )
            };
            let display_name = hermes_db::users::get(&client, id)
                .await?
                .and_then(|u| u.display_name);
            json!({
                "id": id,
                "displayName": display_name,
                "memory": known.iter().map(|m| (m.key.clone(), json!(m.value))).collect::<serde_json::Map<_, _>>(),
                "facts": facts.iter().map(|(k, v)| json!({ "key": k, "value": v })).collect::<Vec<_>>(),
                "memoryWithheld": group,
            })
        }
        None => Value::Null,
    };
    let chat = if group {
        json!({ "kind": "group", "note": GROUP_NOTE })
    } else {
        json!({ "kind": "direct" })
    };
    Ok(json!({
        "run": entry(&run),
        "message": {
            "text": run.input_text,
            "platform": run.platform.as_str(),
            "chatId": run.chat_id,
            "senderId": run.sender_id,
            "receivedAt": run.created_at,
            "metadata": metadata,
            // References to the files the user sent, as operators read them
            // (`attachments_fetch`): a file id or the URL the platform sent, never bytes.
            "attachments": attachments,
        },
        "conversation": conversation,
        "chat": chat,
        "user": user,
        "runProtocol": run_protocol(call, &run),
    }))
}
