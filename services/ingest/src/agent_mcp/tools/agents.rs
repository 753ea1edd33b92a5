//! `agents.me` and `agents.heartbeat`: the calling agent's own row, read from the key's
//! link (no profile key argument), and its presence.

use hermes_db::agent_inbox;
use hermes_db::agents::Agent;
use hermes_types::agent::AgentStatus;
use serde_json::{Value, json};

use super::{Args, Call};
use crate::agent_mcp::errors::{ErrorCode, ToolError};

/// The agent as the tools show it, with its open-run count.
fn describe(a: &Agent, open_runs: i64) -> Value {
    json!({
        "id": a.id,
        "profileKey": a.profile_key,
        "displayName": a.display_name,
        "kind": a.kind.as_str(),
        "role": a.role,
        "capabilities": a.capabilities,
        "maxConcurrent": a.max_concurrent,
        "status": a.status.as_str(),
        "engagementMode": a.engagement_mode.as_str(),
        "toolAllowlist": a.tool_allowlist,
        "replyDeadlineSecs": a.reply_deadline_secs,
        "lastHeartbeatAt": a.last_heartbeat_at,
        "openRuns": open_runs,
    })
}

/// `agents.me`
pub async fn me(call: &Call<'_>) -> Result<Value, ToolError> {
    let client = call.db().await?;
    let open = agent_inbox::open_count(&client, call.agent.id).await?;
    Ok(describe(&call.agent, open))
}

/// `agents.heartbeat`
pub async fn heartbeat(call: &Call<'_>, args: &Args) -> Result<Value, ToolError> {
    let status = args
        .opt_str("status")?
        .map(|s| {
            // The spelling is exact on the wire (the schema's enum), unlike the CLI's.
            AgentStatus::ALL
                .iter()
                .copied()
                .find(|v| v.as_str() == s)
                .ok_or_else(|| ToolError::invalid("status must be ONLINE, BUSY or OFFLINE"))
        })
        .transpose()?;
    let client = call.db().await?;
    let agent = agent_inbox::heartbeat(&client, call.agent.id, status)
        .await?
        .ok_or_else(|| {
            ToolError::new(ErrorCode::Unauthorized, "the key's agent no longer exists")
        })?;
    let open = agent_inbox::open_count(&client, agent.id).await?;
    Ok(describe(&agent, open))
}
