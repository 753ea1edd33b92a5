//! `permissions_list_open` and `permissions_respond`: the tool calls waiting for an operator
//! (docs/operator-mcp.md, "Approvals"). The answer goes through
//! `hermes_db::approvals::answer` in a transaction of its own, which decides a call exactly
//! once however many operators answer at once; the one that did not decide it is told the
//! earlier verdict.

use hermes_db::approvals::{self, Answered, Approval};
use hermes_types::ids::ApprovalId;
use hermes_types::model::Verdict;
use serde_json::{Value, json};

use super::{DEFAULT_LIST, MAX_LIST};
use crate::Operator;
use crate::args::Args;
use crate::catalog::{Spec, limit, object, string};
use crate::error::{ErrorCode, ToolError};

/// The longest reason kept with an answer.
pub const MAX_REASON: usize = 2000;

/// `permissions_list_open`.
pub const LIST_OPEN: Spec = Spec {
    name: "permissions_list_open",
    description: "Tool calls waiting for an operator's approval, oldest first: the tool, its \
        arguments, the run, platform and sender it serves, the agent, and when it times out \
        (a call not answered by then is denied).",
    schema: || object(json!({ "limit": limit(DEFAULT_LIST, MAX_LIST) }), &[]),
};

/// `permissions_respond`.
pub const RESPOND: Spec = Spec {
    name: "permissions_respond",
    description: "Allow or deny one waiting tool call. Exactly one answer decides it: a call \
        already answered (by another operator or its timeout) is reported with that verdict. \
        An allow after the call's deadline is refused (DEADLINE_PASSED) and the call is denied \
        as timed out.",
    schema: || {
        object(
            json!({
                "approval_id": {
                    "type": "string", "format": "uuid",
                    "description": "The call, as permissions_list_open shows it",
                },
                "decision": { "type": "string", "enum": ["allow", "deny"] },
                "reason": string("Why (shown to the model with a denial)", MAX_REASON),
            }),
            &["approval_id", "decision"],
        )
    },
};

/// A call as the tools show it.
fn shown(a: &Approval) -> Value {
    json!({
        "approval_id": a.id,
        "run_id": a.run_id,
        "tool": a.tool,
        "call_id": a.call_id,
        "arguments": a.arguments,
        "status": a.status.as_str(),
        "platform": a.platform,
        "sender_id": a.sender_id,
        "agent": a.agent,
        "requested_at": a.created_at,
        "deadline_at": a.deadline_at,
        "decided_by": a.decided_by,
        "decided_at": a.decided_at,
        "reason": a.reason,
    })
}

/// `permissions_list_open`.
pub async fn list_open(op: &Operator, args: &Args) -> Result<Value, ToolError> {
    let limit = args.limit(DEFAULT_LIST, MAX_LIST)?;
    let client = op.db().await?;
    let open = approvals::list_open(&client, limit).await?;
    Ok(json!({ "approvals": open.iter().map(shown).collect::<Vec<_>>() }))
}

/// `permissions_respond`.
pub async fn respond(op: &Operator, args: &Args) -> Result<Value, ToolError> {
    let id: ApprovalId = args.parsed("approval_id", "an approval id (a UUID)")?;
    let verdict = match args.str("decision", 5)? {
        "allow" => Verdict::Allowed,
        "deny" => Verdict::Denied,
        other => {
            return Err(ToolError::invalid(format!(
                "decision must be \"allow\" or \"deny\", not {other:?}"
            ))
            .with("argument", "decision"));
        }
    };
    let reason = args
        .opt_str("reason", MAX_REASON)?
        .map(str::trim)
        .filter(|r| !r.is_empty());
    let by = op.caller.name();
    let mut client = op.db().await?;
    let tx = client.transaction().await?;
    let answered = approvals::answer(&tx, id, verdict, Some(&by), reason).await?;
    tx.commit().await?;
    Ok(match answered {
        // Counted (hermes_approvals_total, the wait) by the tools stage when the round
        // resumes, whichever way it was answered: not here too.
        Answered::Decided { approval, resumed } => {
            json!({ "outcome": "decided", "verdict": verdict.as_str(), "resumed": resumed, "approval": shown(&approval) })
        }
        Answered::AlreadyDecided(approval) => json!({
            "outcome": "already_decided",
            "verdict": approval.status.as_str(),
            "approval": shown(&approval),
        }),
        Answered::PastDeadline { approval, .. } => {
            return Err(ToolError::new(
                ErrorCode::DeadlinePassed,
                format!(
                    "the call's deadline passed at {}: it can no longer be allowed, and was denied as timed_out",
                    approval.deadline_at.to_rfc3339()
                ),
            )
            .with("verdict", Verdict::TimedOut.as_str())
            .with("approval", shown(&approval)));
        }
        Answered::NotFound => return Err(ToolError::not_found(format!("no approval {id}"))),
    })
}
