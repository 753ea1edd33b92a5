//! `messages_send`: a message to a known chat, sent by the delivery stage like any reply
//! (its retries, breakers, rate gates and parking apply; `hermes_db::operator_send`), and
//! the outcome, waited for up to `wait_ms`. A call with only `handle` reports the outcome
//! of an earlier send. Each operator key may send `HERMES_OPERATOR_SENDS_PER_MINUTE`
//! messages a minute; a retry with the same `idempotency_key` sends nothing more and is
//! not counted (docs/operator-mcp.md, messages_send).

use std::time::Duration;

use hermes_cache::rate_limit::{RateLimiter, Verdict};
use hermes_db::operator_send::{
    self, MAX_IDEMPOTENCY_KEY, MAX_IMAGE_URL, MAX_TEXT_CHARS, Queued, Send, SendStatus, Target,
};
use hermes_types::ids::RunId;
use serde_json::{Value, json};

use crate::Operator;
use crate::args::Args;
use crate::catalog::{Spec, object, string};
use crate::error::{ErrorCode, ToolError};

/// The longest `target` (a platform, a colon and a chat id).
const MAX_TARGET: usize = 160;
/// The longest `text` in bytes (4096 characters of up to 4 bytes).
const MAX_TEXT_BYTES: usize = MAX_TEXT_CHARS * 4;
/// How long a send waits for its outcome by default, and at most.
const DEFAULT_WAIT_MS: i64 = 5_000;
const MAX_WAIT_MS: i64 = 30_000;

/// `messages_send`.
pub const SEND: Spec = Spec {
    name: "messages_send",
    description: "Send a message to a known chat (see channels_list): target \
        \"telegram:<chat>\", \"whatsapp:<number>\" or \"instagram:<id>\", with text and \
        optionally an https image (sent as a photo with the text as caption). Delivered like \
        any reply, with retries; waits up to wait_ms for the outcome: status sent, failed \
        (with reason) or queued (call again with only the handle to learn the outcome). Pass \
        an idempotency_key to make retries of the same call send once.",
    schema: || {
        object(
            json!({
                "target": string("telegram:<chat>, whatsapp:<number> or instagram:<id>", MAX_TARGET),
                "text": string(&format!("The message (at most {MAX_TEXT_CHARS} characters)"), MAX_TEXT_BYTES),
                "image_url": string("An https image to send with the text", MAX_IMAGE_URL),
                "idempotency_key": string("The same key on a retried call sends once (yours alone)", MAX_IDEMPOTENCY_KEY),
                "wait_ms": {
                    "type": "integer", "minimum": 0, "maximum": MAX_WAIT_MS, "default": DEFAULT_WAIT_MS,
                    "description": format!("How long to wait for the outcome (default {DEFAULT_WAIT_MS}, at most {MAX_WAIT_MS})"),
                },
                "handle": string("Only this: the outcome of an earlier send (its handle)", 40),
            }),
            &[],
        )
    },
};

/// The answer for `run` in `status`.
fn status_json(run: RunId, status: &SendStatus) -> Value {
    let mut out = json!({ "handle": run, "status": status.as_str() });
    if let SendStatus::Failed { reason } = status {
        out["reason"] = reason.clone().into();
    }
    out
}

/// The answer of a send of `run` in `status`, counted under `platform`.
fn outcome(op: &Operator, platform: &str, run: RunId, status: &SendStatus) -> Value {
    op.ctx
        .metrics
        .operator
        .sends
        .with_label_values(&[platform, status.as_str()])
        .inc();
    status_json(run, status)
}

/// A refusal, counted.
fn refused(op: &Operator, platform: &str, e: ToolError) -> ToolError {
    let outcome = match e.code {
        ErrorCode::RateLimited => "rate_limited",
        _ => "refused",
    };
    op.ctx
        .metrics
        .operator
        .sends
        .with_label_values(&[platform, outcome])
        .inc();
    e
}

/// The refusal of a target no user is linked to, counted.
fn unknown_chat(op: &Operator, target: &Target) -> ToolError {
    let e = ToolError::new(
        ErrorCode::UnknownChat,
        format!("{target} is not a known chat (channels_list shows them)"),
    )
    .with("argument", "target");
    refused(op, target.platform.as_str(), e)
}

/// The status of `run` once closed or after `wait`, or NOT_FOUND if it is not the caller's.
async fn settled(
    op: &Operator,
    run: RunId,
    by: &str,
    wait: Duration,
) -> Result<SendStatus, ToolError> {
    operator_send::await_status(op.ctx.event_hub(), run, by, wait)
        .await?
        .ok_or_else(|| {
            ToolError::not_found("no message you sent has this handle").with("argument", "handle")
        })
}

/// Take one of the caller's sends this minute, or refuse with the wait.
async fn take_send(op: &Operator, by: &str) -> Result<(), ToolError> {
    let limiter = RateLimiter::new(op.ctx.cache.clone());
    let verdict = limiter
        .take(
            &format!("operator_sends:{by}"),
            op.ctx.config.ingest.operator_sends,
        )
        .await
        .map_err(|e| {
            tracing::warn!(error = %e, "operator send rate limit unavailable");
            ToolError::new(
                ErrorCode::Unavailable,
                "the rate limiter is unavailable; retry",
            )
        })?;
    match verdict {
        Verdict::Limited { retry_after } => {
            let secs = retry_after.as_secs_f64().ceil().max(1.0) as u64;
            Err(ToolError::new(
                ErrorCode::RateLimited,
                format!(
                    "over {} messages a minute for this key; retry in {secs} s",
                    op.ctx.config.ingest.operator_sends.per_minute
                ),
            )
            .with("retry_after_secs", secs))
        }
        Verdict::Allowed | Verdict::Seen => Ok(()),
    }
}

/// `messages_send`.
pub async fn send(op: &Operator, args: &Args) -> Result<Value, ToolError> {
    let by = op.caller.name();
    let wait = Duration::from_millis(
        args.opt_int("wait_ms", 0, MAX_WAIT_MS)?
            .unwrap_or(DEFAULT_WAIT_MS) as u64,
    );
    if let Some(run) = args.opt_parsed::<RunId>("handle", "a handle messages_send returned")? {
        if args.opt_str("target", MAX_TARGET)?.is_some() || args.opt_str("text", 1)?.is_some() {
            return Err(ToolError::invalid(
                "pass handle alone to read a send's outcome",
            ));
        }
        return Ok(status_json(run, &settled(op, run, &by, wait).await?));
    }
    let target: Target =
        args.str("target", MAX_TARGET)?
            .parse()
            .map_err(|e: operator_send::BadSend| {
                ToolError::invalid(e.to_string()).with("argument", "target")
            })?;
    let platform = target.platform.as_str();
    let bad = |e: operator_send::BadSend, arg: &str| {
        refused(
            op,
            platform,
            ToolError::invalid(e.to_string()).with("argument", arg),
        )
    };
    let text = operator_send::compose(
        args.opt_str("text", MAX_TEXT_BYTES)?.unwrap_or(""),
        args.opt_str("image_url", MAX_IMAGE_URL)?,
    )
    .map_err(|e| bad(e, "text"))?;
    let key = args
        .opt_str("idempotency_key", MAX_IDEMPOTENCY_KEY)?
        .map(operator_send::idempotency_key)
        .transpose()
        .map_err(|e| bad(e, "idempotency_key"))?;
    // A retry of a send already queued costs nothing: it reports that send.
    if let Some(key) = key {
        let run = operator_send::run_for_key(&by, key);
        if operator_send::status(&op.db().await?, run, &by)
            .await?
            .is_some()
        {
            let status = settled(op, run, &by, wait).await?;
            return Ok(outcome(op, platform, run, &status));
        }
    }
    // An unknown chat is refused before the rate limit counts the call (and again, in
    // the transaction that queues, should its link go meanwhile).
    if operator_send::known_chat(&op.db().await?, &target, None)
        .await?
        .is_none()
    {
        return Err(unknown_chat(op, &target));
    }
    take_send(op, &by)
        .await
        .map_err(|e| refused(op, platform, e))?;
    let send = Send {
        by: &by,
        target: &target,
        text: &text,
        idempotency_key: key,
        workspace: None,
        session_idle: op.ctx.config.router.session_idle(),
    };
    let run = match operator_send::queue(&mut op.db().await?, &send).await? {
        Queued::New(run) | Queued::Again(run) => run,
        Queued::UnknownChat => return Err(unknown_chat(op, &target)),
    };
    let status = settled(op, run, &by, wait).await?;
    Ok(outcome(op, platform, run, &status))
}
