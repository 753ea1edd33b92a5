//! `GET /v1/runs/{id}/events`: a run's life as server-sent events, resumable from any
//! replica (docs/api.md, run events).
//!
//! The events are the entries of the run's Redis stream, and each SSE event carries its
//! entry id as `id:`. A client that comes back with `Last-Event-ID` (to this replica or
//! another) gets every entry after that id, once: the stream is the same for every replica,
//! and entry ids only grow. The stream is read from its start even then, because which
//! processing of a model call the deltas follow (the first one) is decided by what came
//! before. The stream ends after the run's final event; while nothing happens a keep-alive
//! comment goes out; a client that resumes after the final event of a finished run is
//! answered `204 No Content`, which tells an `EventSource` to stop reconnecting. If Redis
//! lost the stream, the final event comes from the run's row in
//! PostgreSQL (without an id: there is nothing after it to resume), and so does a final
//! outcome too large for the stream's byte bound (its entry points to the row).
//!
//! A chat or Forge run's events are written only while someone follows it: following one
//! keeps its follower marker alive (docs/architecture.md#10-redis), so what happens from then on
//! is streamed; what happened before is not on the stream, and its outcome comes from the
//! row.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::time::Instant;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::Event;
use axum::response::{IntoResponse, Response};
use hermes_cache::run_events::{FOLLOW_RENEW, Readers, RunEvent, RunEvents, WaiterGuard, Wake};
use hermes_runtime::Ctx;
use hermes_runtime::http::{ApiError, ApiErrorCode};
use hermes_types::ids::RunId;
use hermes_types::model::{FailureCode, Outcome};
use serde_json::{Value, json};

use super::{Found, find};
use crate::rest::Caller;
use crate::stream::Attempts;
use crate::{AppState, wait};

/// A Redis stream entry id, `<milliseconds>-<sequence>`: ordered as the entries are.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct EntryId(u64, u64);

impl EntryId {
    fn parse(s: &str) -> Option<Self> {
        let (ms, seq) = s.trim().split_once('-')?;
        Some(Self(ms.parse().ok()?, seq.parse().ok()?))
    }
}

/// `GET /v1/runs/{id}/events`
pub async fn events(
    State(app): State<AppState>,
    axum::Extension(caller): axum::Extension<Caller>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let resume = match headers.get("last-event-id") {
        None => None,
        Some(v) => match v.to_str().ok().and_then(EntryId::parse) {
            Some(id) => Some(id),
            None => {
                return ApiError::bad_request(
                    ApiErrorCode::InvalidRequest,
                    "Last-Event-ID must be the id of an event of this stream, like 1700000000000-0",
                )
                .into_response();
            }
        },
    };
    let (run, found) = match find(&app, &caller, &id).await {
        Ok(found) => found,
        Err(e) => return e.into_response(),
    };
    if let (Some(after), Found::Row(row)) = (resume, &found)
        && row.status.is_final()
        && nothing_after(&app.events, run, after).await
    {
        // The client has had everything, the final event included: 204 tells an
        // `EventSource` to stop reconnecting.
        return StatusCode::NO_CONTENT.into_response();
    }
    // Registered before the first read: nothing appended after it can go unnoticed.
    let guard = app.waiters.register(run, Wake::Every);
    // A chat or Forge run's events are written only while someone follows it.
    let followed = match &found {
        Found::Row(row)
            if row.platform.map(Readers::of) == Some(Readers::Followers)
                && !row.status.is_final() =>
        {
            follow(&app.events, run).await;
            Some(Instant::now())
        }
        _ => None,
    };
    let follower = Follower {
        ctx: app.ctx.clone(),
        events: app.events.clone(),
        guard,
        run,
        last: "0".into(),
        resume,
        attempts: Attempts::default(),
        pending: VecDeque::new(),
        ended: false,
        quiet: wait::QuietTicks::default(),
        row_checked: false,
        followed,
    };
    let body = futures_util::stream::unfold(follower, |mut f| async move {
        loop {
            if let Some(event) = f.pending.pop_front() {
                return Some((Ok::<_, Infallible>(event), f));
            }
            if f.ended {
                return None;
            }
            f.advance().await;
        }
    });
    crate::stream::sse(&app.ctx, body)
}

/// Whether the run's stream holds nothing after `after` (an unreadable stream is read as
/// holding more: the follower then ends it from the row).
async fn nothing_after(events: &RunEvents, run: RunId, after: EntryId) -> bool {
    let after = format!("{}-{}", after.0, after.1);
    events
        .read_after(run, &after)
        .await
        .is_ok_and(|rest| rest.is_empty())
}

/// Follows one run's stream and queues the SSE events a client has not had yet.
struct Follower {
    ctx: Ctx,
    events: RunEvents,
    guard: WaiterGuard,
    run: RunId,
    /// The last entry read ("0": none yet).
    last: String,
    /// The client's `Last-Event-ID`: entries up to it were sent before.
    resume: Option<EntryId>,
    attempts: Attempts,
    pending: VecDeque<Event>,
    ended: bool,
    quiet: wait::QuietTicks,
    /// The row was read once because the stream was empty.
    row_checked: bool,
    /// When the run's follower marker was last set (a chat or Forge run's; `None` for a
    /// run whose events are written anyway).
    followed: Option<Instant>,
}

/// Mark `run` followed, so its events are written to its stream; Redis away only means the
/// final event comes from the row.
async fn follow(events: &RunEvents, run: RunId) {
    if let Err(e) = events.follow(run).await {
        tracing::debug!(%run, error = %e, "cannot mark the run followed; its row ends the stream");
    }
}

impl Follower {
    /// Read what the stream holds beyond the last entry read; when that is nothing, wait
    /// for a wake-up or the backstop tick (which now and then reads the run's row).
    async fn advance(&mut self) {
        match self.events.read_after(self.run, &self.last).await {
            Ok(batch) => {
                for (id, event) in batch {
                    self.last = id.clone();
                    let fresh = match (self.resume, EntryId::parse(&id)) {
                        (Some(after), Some(this)) => this > after,
                        _ => true,
                    };
                    let last = event.is_last();
                    if matches!(event, RunEvent::Closed) {
                        // The outcome did not fit the stream: the row holds it (read again
                        // on the backstop ticks if it cannot be read now).
                        if let Some(outcome) = wait::from_row(&self.ctx, self.run).await {
                            let (name, data) = final_event(self.run, outcome);
                            if fresh {
                                self.pending.push_back(
                                    Event::default().id(id).event(name).data(data.to_string()),
                                );
                            }
                            self.ended = true;
                            return;
                        }
                        continue;
                    }
                    if let Some((name, data)) = render(self.run, &mut self.attempts, event)
                        && fresh
                    {
                        self.pending
                            .push_back(Event::default().id(id).event(name).data(data.to_string()));
                    }
                    if last {
                        self.ended = true;
                        return;
                    }
                }
            }
            Err(e) => {
                tracing::debug!(run = %self.run, error = %e, "run stream unreadable; checking the run row");
                if let Some(outcome) = wait::from_row(&self.ctx, self.run).await {
                    return self.end_from_row(outcome);
                }
            }
        }
        if !self.pending.is_empty() {
            return;
        }
        // No stream at all (expired, or lost with Redis): a closed run's row answers at once.
        if self.last == "0" && !self.row_checked {
            self.row_checked = true;
            if let Some(outcome) = wait::from_row(&self.ctx, self.run).await {
                return self.end_from_row(outcome);
            }
        }
        if let Some(at) = self.followed
            && at.elapsed() >= FOLLOW_RENEW
        {
            follow(&self.events, self.run).await;
            self.followed = Some(Instant::now());
        }
        let quiet_tick = tokio::select! {
            _ = self.guard.notify.notified() => false,
            _ = tokio::time::sleep(wait::BACKSTOP) => true,
        };
        if quiet_tick && let Some(outcome) = self.quiet.tick(&self.ctx, self.run).await {
            self.end_from_row(outcome);
        }
    }

    /// The run closed but its final event is not on the stream (Redis lost it): the row's
    /// outcome ends the stream.
    fn end_from_row(&mut self, outcome: Outcome) {
        let (name, data) = final_event(self.run, outcome);
        self.pending
            .push_back(Event::default().event(name).data(data.to_string()));
        self.ended = true;
    }
}

/// The SSE event name and data of one stream entry (none for a delta of a processing the
/// client does not follow, or an empty one).
fn render(run: RunId, attempts: &mut Attempts, event: RunEvent) -> Option<(&'static str, Value)> {
    Some(match event {
        RunEvent::Queued { session_id, .. } => (
            "run.queued",
            json!({ "run_id": run, "status": "queued", "session_id": session_id }),
        ),
        RunEvent::Running { round } => (
            "run.running",
            json!({ "run_id": run, "status": "running", "round": round }),
        ),
        RunEvent::Delta {
            text,
            round,
            attempt,
        } => {
            if !attempts.admit(round, attempt) || text.is_empty() {
                return None;
            }
            (
                "message.delta",
                json!({ "run_id": run, "delta": text, "round": round }),
            )
        }
        RunEvent::ToolStarted {
            round,
            call_id,
            name,
            arguments,
        } => (
            "tool.started",
            json!({ "run_id": run, "round": round, "call_id": call_id, "name": name, "arguments": arguments }),
        ),
        RunEvent::ToolFinished {
            round,
            call_id,
            name,
            output,
            ok,
        } => (
            "tool.completed",
            json!({ "run_id": run, "round": round, "call_id": call_id, "name": name, "output": output, "ok": ok }),
        ),
        RunEvent::StopRequested => (
            "run.stopping",
            json!({ "run_id": run, "status": "stopping" }),
        ),
        RunEvent::Final { outcome } => final_event(run, outcome),
        // Read from the row by the follower.
        RunEvent::Closed => return None,
    })
}

/// The event that ends a run's stream: `run.completed`, `run.failed` or `run.cancelled`.
fn final_event(run: RunId, outcome: Outcome) -> (&'static str, Value) {
    match outcome {
        Outcome::Answered {
            text,
            model,
            usage,
            finish_reason,
            tools_used,
            ..
        } => (
            "run.completed",
            json!({
                "run_id": run,
                "status": "completed",
                "output": text,
                "model": model,
                "finish_reason": finish_reason.as_str(),
                "tools_used": tools_used,
                "usage": {
                    "input_tokens": usage.input_tokens,
                    "output_tokens": usage.output_tokens,
                    "total_tokens": usage.total(),
                },
            }),
        ),
        Outcome::Failed { code, message } => {
            let (name, status) = if code == FailureCode::Cancelled {
                ("run.cancelled", "cancelled")
            } else {
                ("run.failed", "failed")
            };
            (
                name,
                json!({
                    "run_id": run,
                    "status": status,
                    "error": { "code": code.as_str(), "message": message },
                }),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use hermes_types::model::Usage;

    use super::*;

    #[test]
    fn entry_ids_order_as_redis_orders_them() {
        let a = EntryId::parse("1700000000000-9").unwrap();
        let b = EntryId::parse("1700000000000-10").unwrap();
        let c = EntryId::parse("1700000000001-0").unwrap();
        assert!(a < b && b < c);
        for bad in ["", "12", "a-1", "1-b", "-1", "1-"] {
            assert_eq!(EntryId::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn each_entry_has_its_event_name() {
        let run = RunId::new();
        let mut attempts = Attempts::default();
        let mut name = |e: RunEvent| render(run, &mut attempts, e).map(|(n, _)| n);
        assert_eq!(
            name(RunEvent::Queued {
                api_key: None,
                session_id: None
            }),
            Some("run.queued")
        );
        assert_eq!(name(RunEvent::Running { round: 0 }), Some("run.running"));
        let delta = |attempt: &str, text: &str| RunEvent::Delta {
            text: text.into(),
            round: 0,
            attempt: Some(attempt.into()),
        };
        assert_eq!(name(delta("a", "Hel")), Some("message.delta"));
        assert_eq!(name(delta("b", "Hel")), None, "a second processing");
        assert_eq!(name(delta("a", "")), None, "nothing to say");
        assert_eq!(name(RunEvent::StopRequested), Some("run.stopping"));
        let (n, data) = final_event(
            run,
            Outcome::Failed {
                code: FailureCode::Cancelled,
                message: "stopped".into(),
            },
        );
        assert_eq!(n, "run.cancelled");
        assert_eq!(data["error"]["code"], "cancelled");
        let (n, data) = final_event(
            run,
            Outcome::Answered {
                text: "done".into(),
                model: "m".into(),
                usage: Usage {
                    input_tokens: 2,
                    output_tokens: 3,
                    cost_micro_usd: 0,
                },
                finish_reason: "stop".into(),
                tools_used: Vec::new(),
                transcript: Vec::new(),
            },
        );
        assert_eq!(n, "run.completed");
        assert_eq!(
            data["usage"],
            json!({"input_tokens": 2, "output_tokens": 3, "total_tokens": 5})
        );
    }
}
