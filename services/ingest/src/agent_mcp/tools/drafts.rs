//! `chat.startDraft`, `chat.appendDraftChunk` and `chat.finalizeDraft`: an answer streamed
//! chunk by chunk. The text so far is kept in PostgreSQL ([`hermes_db::drafts`]), so any
//! replica continues a draft. Each chunk goes onto the run's event stream as a delta (what
//! `GET /v1/runs/{id}/events` and streaming API callers read, tagged with the draft id as
//! its attempt so two drafts never interleave), and, when the run's reply goes to Telegram,
//! a `DraftUpdate` is queued for delivery to show the text so far in one edited message.
//! Finalizing is the run's answer, carrying the draft id so the draft is not shown twice.

use hermes_cache::run_events::{Appended, RunEvent};
use hermes_db::drafts;
use hermes_db::inbox::ExternalRun;
use hermes_types::ids::{DraftId, RunId};
use hermes_types::model::DraftUpdate;
use serde_json::{Value, json};

use super::{Args, Call, MAX_TEXT, ensure_open, own_run, queue, tx_error};
use crate::agent_mcp::errors::{ErrorCode, ToolError};

fn draft_not_found() -> ToolError {
    ToolError::new(ErrorCode::NotFound, "no such draft of this run")
}

/// The run a draft call is about: the one named (`runId` or `threadId`), else the draft's.
async fn run_of(
    client: &impl hermes_db::GenericClient,
    call: &Call<'_>,
    args: &Args,
    draft: DraftId,
) -> Result<RunId, ToolError> {
    if let Some(run) = args.opt_run_id()? {
        return Ok(run);
    }
    drafts::get(client, draft, Some(call.agent.id))
        .await?
        .map(|d| d.run_id)
        .ok_or_else(draft_not_found)
}

/// `chat.startDraft`
pub async fn start(call: &Call<'_>, args: &Args) -> Result<Value, ToolError> {
    let client = call.db().await?;
    let run = own_run(&client, call, args.run_id()?).await?;
    ensure_open(&run)?;
    let id = drafts::start(&client, run.id, call.agent.id).await?;
    Ok(json!({ "runId": run.id, "threadId": run.id, "draftId": id }))
}

/// `chat.appendDraftChunk`
pub async fn append_chunk(call: &Call<'_>, args: &Args) -> Result<Value, ToolError> {
    let draft_id: DraftId = args.id("draftId")?;
    let delta = args
        .opt_str("delta")?
        .ok_or_else(|| ToolError::invalid("delta is required"))?
        .to_string();
    if delta.is_empty() || delta.len() > MAX_TEXT || delta.contains('\0') {
        return Err(ToolError::invalid(format!(
            "delta must be 1 to {MAX_TEXT} bytes without the NUL character"
        )));
    }
    let mut client = call.db().await?;
    let tx = client.transaction().await.map_err(tx_error)?;
    let run_id = run_of(&tx, call, args, draft_id).await?;
    let run = own_run(&tx, call, run_id).await?;
    ensure_open(&run)?;
    let Some(draft) = drafts::append(&tx, draft_id, call.agent.id, &delta).await? else {
        return Err(
            match drafts::get(&tx, draft_id, Some(call.agent.id)).await? {
                Some(d) if d.run_id == run.id => ToolError::run_ended(),
                _ => draft_not_found(),
            },
        );
    };
    if draft.run_id != run.id {
        return Err(draft_not_found());
    }
    if draft.body.len() > MAX_TEXT {
        return Err(ToolError::invalid(format!(
            "the draft would be longer than {MAX_TEXT} bytes"
        )));
    }
    // Only a platform that shows drafts (Telegram, Slack) is sent the updates.
    if hermes_channels::Sender::shows_drafts(run.platform) {
        let update = DraftUpdate {
            draft_id,
            reply_to: run.reply_to(),
            text: draft.body.clone(),
            chunks: draft.chunks,
        };
        queue(&tx, run.id, &update).await?;
    }
    tx.commit().await.map_err(tx_error)?;
    let event = RunEvent::Delta {
        text: delta,
        round: 0,
        attempt: Some(draft_id.to_string()),
    };
    // The stream is best effort: the final answer carries the whole text anyway.
    // Written where a reader can exist: a chat run's only while someone follows it.
    let streamed = match call.app.events.append(run.id, run.platform, &event).await {
        Ok(appended) => matches!(appended, Appended::Written(_)),
        Err(e) => {
            tracing::warn!(run = %run.id, error = %e, "draft delta not streamed; the answer carries it");
            false
        }
    };
    Ok(json!({
        "runId": run.id,
        "threadId": run.id,
        "draftId": draft_id,
        "chunks": draft.chunks,
        "length": draft.body.chars().count(),
        "streamed": streamed,
    }))
}

/// `chat.finalizeDraft`
pub async fn finalize(call: &Call<'_>, args: &Args) -> Result<Value, ToolError> {
    let draft: DraftId = args.id("draftId")?;
    let body = args.opt_text("body", MAX_TEXT)?;
    let run = run_of(&call.db().await?, call, args, draft).await?;
    super::chat::answer(call, run, body, Some(draft)).await
}

/// Finalize draft `id` of the claimed `run` in `tx` with `body`, else its text so far; the
/// final text.
pub async fn close(
    tx: &hermes_db::Transaction<'_>,
    call: &Call<'_>,
    run: &ExternalRun,
    id: DraftId,
    body: Option<&str>,
) -> Result<String, ToolError> {
    let draft = drafts::get(tx, id, Some(call.agent.id))
        .await?
        .filter(|d| d.run_id == run.id)
        .ok_or_else(draft_not_found)?;
    let text = body.map_or_else(|| draft.body.clone(), str::to_string);
    if text.trim().is_empty() {
        return Err(ToolError::invalid(
            "the draft is empty: append a chunk or give a body",
        ));
    }
    if !drafts::finalize(tx, id, call.agent.id, &text).await? {
        return Err(ToolError::run_ended());
    }
    Ok(text)
}
