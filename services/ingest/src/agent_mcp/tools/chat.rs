//! `chat.appendMessage`, `runs.fail` and `chat.sendMessage`: how a run's one reply is given
//! (an answer or a failure) and how an EXECUTE run writes to another conversation of its
//! user. A reply is claimed ([`hermes_db::inbox::claim_reply`]) in the transaction that
//! queues it for delivery, so a run gets exactly one, whichever call comes first; delivery
//! sends it to the user's channel or API caller and closes the run (refunding a failure).

use hermes_db::agent_inbox::{self, SentMessage};
use hermes_db::inbox::{self, ExternalRun, Unclaimed};
use hermes_types::ids::{DraftId, RunId};
use hermes_types::model::{FailureCode, FinishReason, Outcome, Platform, Reply, ReplyTo, Usage};
use serde_json::{Value, json};

use super::{
    Args, Call, MAX_REASON, MAX_TEXT, Tool, ensure_mutation_allowed, ensure_open, own_run, queue,
    tx_error,
};
use crate::agent_mcp::errors::ToolError;

/// What the user is told when the agent gives a run up.
const FAILED_TEXT: &str = "Sorry, the agent could not answer this message. Your credit was not used; please try again later.";

/// The answered reply of `run` with `text` (finishing draft `draft`, if any).
fn answered(call: &Call<'_>, run: &ExternalRun, text: String, draft: Option<DraftId>) -> Reply {
    Reply {
        reply_to: run.reply_to(),
        outcome: Outcome::Answered {
            text,
            model: format!("agent:{}", call.profile_key()),
            usage: Usage::default(),
            finish_reason: FinishReason::Stop,
            tools_used: Vec::new(),
            transcript: Vec::new(),
        },
        exchange: run.exchange(),
        detail: None,
        draft_id: draft,
        operator: None,
        calls: Vec::new(),
    }
}

/// The claimed run, or the refusal of one that is not the agent's or already ended.
fn claimed(r: Result<ExternalRun, Unclaimed>) -> Result<ExternalRun, ToolError> {
    r.map_err(|e| match e {
        Unclaimed::NotFound => ToolError::run_not_found(),
        Unclaimed::Ended => ToolError::run_ended(),
    })
}

/// How the agent ended a run (the `outcome` of `hermes_agent_runs_total`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ended {
    Answered,
    Failed,
}

impl Ended {
    fn as_str(self) -> &'static str {
        match self {
            Ended::Answered => "answered",
            Ended::Failed => "failed",
        }
    }
}

/// Count an ended run by outcome, and an answer's time to answer.
fn count_end(call: &Call<'_>, run: &ExternalRun, ended: Ended) {
    let m = &call.app.ctx.metrics.agents;
    m.runs
        .with_label_values(&[call.profile_key(), ended.as_str()])
        .inc();
    if ended == Ended::Answered {
        m.time_to_answer
            .with_label_values(&[call.profile_key()])
            .observe(run.age_secs());
    }
}

/// Claim `run_id`'s reply and queue its answer `text` in one transaction.
pub async fn answer(
    call: &Call<'_>,
    run_id: RunId,
    text: Option<String>,
    draft: Option<DraftId>,
) -> Result<Value, ToolError> {
    let mut client = call.db().await?;
    let tx = client.transaction().await.map_err(tx_error)?;
    let run = claimed(inbox::claim_reply(&tx, run_id, Some(call.agent.id)).await?)?;
    let text = match draft {
        // The draft's final text: the body given, else the text so far.
        Some(d) => super::drafts::close(&tx, call, &run, d, text.as_deref()).await?,
        None => text.ok_or_else(|| ToolError::invalid("body is required"))?,
    };
    queue(&tx, run.id, &answered(call, &run, text, draft)).await?;
    tx.commit().await.map_err(tx_error)?;
    count_end(call, &run, Ended::Answered);
    Ok(json!({ "runId": run.id, "threadId": run.id, "status": "answered", "draftId": draft }))
}

/// `chat.appendMessage`
pub async fn append_message(call: &Call<'_>, args: &Args) -> Result<Value, ToolError> {
    let run = args.run_id()?;
    let body = args.text("body", MAX_TEXT)?;
    answer(call, run, Some(body), None).await
}

/// A reason fit for the run's record: credentials scrubbed, control characters dropped,
/// at most [`MAX_REASON`] bytes (cut at a character boundary).
fn scrub(reason: &str) -> String {
    let clean: String = hermes_net::redact::redact(reason, &[])
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let mut end = clean.len().min(MAX_REASON);
    while !clean.is_char_boundary(end) {
        end -= 1;
    }
    clean[..end].to_string()
}

/// `runs.fail`
pub async fn fail(call: &Call<'_>, args: &Args) -> Result<Value, ToolError> {
    let run_id = args.run_id()?;
    // A long reason is cut rather than refused: it is for operators, and the failure matters.
    let reason = args.text("reason", usize::MAX)?;
    let mut client = call.db().await?;
    let tx = client.transaction().await.map_err(tx_error)?;
    let run = claimed(inbox::claim_reply(&tx, run_id, Some(call.agent.id)).await?)?;
    let reply = Reply {
        exchange: run.exchange(),
        detail: Some(format!("agent {}: {}", call.profile_key(), scrub(&reason))),
        // A draft the agent gave up on is replaced by the failure message in the chat.
        draft_id: run.open_draft,
        ..Reply::failed(run.reply_to(), FailureCode::AgentFailed, FAILED_TEXT)
    };
    queue(&tx, run.id, &reply).await?;
    tx.commit().await.map_err(tx_error)?;
    count_end(call, &run, Ended::Failed);
    Ok(json!({ "runId": run.id, "status": "failed" }))
}

/// `chat.sendMessage`: a message to another chat of the run's user, carried by a run of its
/// own that is created answered, so delivery sends it and closes it.
pub async fn send_message(call: &Call<'_>, args: &Args) -> Result<Value, ToolError> {
    let run_id = args.run_id()?;
    let platform = args
        .opt_str("platform")?
        .ok_or_else(|| ToolError::invalid("platform is required"))?;
    let platform = Platform::parse(platform)
        .filter(|p| p.is_chat())
        .ok_or_else(|| {
            let chats: Vec<&str> = Platform::ALL
                .into_iter()
                .filter(|p| p.is_chat())
                .map(Platform::as_str)
                .collect();
            ToolError::invalid(format!("platform must be one of {}", chats.join(", ")))
        })?;
    let chat_id = args.text("chatId", 128)?;
    let body = args.text("body", MAX_TEXT)?;
    let mut client = call.db().await?;
    let tx = client.transaction().await.map_err(tx_error)?;
    let run = own_run(&tx, call, run_id).await?;
    ensure_mutation_allowed(&run, Tool::ChatSendMessage)?;
    ensure_open(&run)?;
    let user = run
        .user_id
        .ok_or_else(|| ToolError::invalid("the run has no user to write to"))?;
    if !agent_inbox::is_users_chat(&tx, user, platform, &chat_id).await? {
        return Err(ToolError::invalid(format!(
            "{chat_id:?} on {} is not a chat linked to this run's user",
            platform.as_str()
        )));
    }
    let sent = RunId::new();
    let mode = run.engagement_mode.unwrap_or_default();
    agent_inbox::create_sent(
        &tx,
        &SentMessage {
            id: sent,
            from: &run,
            engagement_mode: mode,
            platform,
            chat_id: &chat_id,
        },
    )
    .await?;
    let reply = Reply {
        reply_to: ReplyTo::chat(platform, chat_id.clone()),
        ..answered(call, &run, body, None)
    };
    // Not an exchange of that conversation: nothing is logged as an answer to a turn.
    let reply = Reply {
        exchange: None,
        ..reply
    };
    queue(&tx, sent, &reply).await?;
    tx.commit().await.map_err(tx_error)?;
    Ok(json!({ "runId": run.id, "sentRunId": sent, "status": "queued" }))
}

#[cfg(test)]
mod tests {
    use super::scrub;

    #[test]
    fn a_reason_is_scrubbed_of_controls_and_cut_at_a_character() {
        assert_eq!(scrub("upstream\ntimeout"), "upstream timeout");
        let long = "é".repeat(super::MAX_REASON);
        let cut = scrub(&long);
        assert!(cut.len() <= super::MAX_REASON && cut.chars().all(|c| c == 'é'));
    }
}
