//! Streamed chat completions (`"stream": true`): the answer reaches the caller as server-sent
//! events of OpenAI `chat.completion.chunk` objects while the model produces it.
//!
//! The llm stage appends a `Delta` per piece of text to the run's event stream in Redis and
//! delivery appends the `Final` outcome. Like [`crate::wait`], this reads that stream from
//! the last entry seen whenever the run's waiter is woken (or on the backstop tick), and reads
//! the run row in PostgreSQL when Redis cannot be read. Each event becomes chunks:
//!
//! 1. `delta: {"role": "assistant"}` at once, so the client sees the answer begin;
//! 2. `delta: {"content": …}` per streamed piece of text;
//! 3. on an answer: any text the caller has not seen yet, an empty delta with the
//!    `finish_reason`, with `stream_options.include_usage` a chunk with `choices: []` and
//!    `usage`, then `[DONE]`.
//!
//! When a tool starts and when it finishes, a named event goes out, `event:
//! hermes.tool.progress` with `{"tool", "call_id", "status"}`: named, so that SDKs reading
//! unnamed `data:` lines as completion chunks pass it by (docs/api.md, streaming).
//!
//! A failed run ends with `data: {"error": …}` and `[DONE]`, and so does one that outlasts
//! `HERMES_RUN_TIMEOUT_SECS` (`run_timeout`; the run itself goes on). While nothing happens a
//! `: keep-alive` comment goes out every 15 s so that proxies keep the connection open.
//! A caller who hangs up drops the stream, and with it the run's waiter.
//!
//! Following the run's stream ([`follow`]) is shared with the Responses API
//! (`crate::responses`), which renders the same events as its own ([`Render`]).

use std::collections::VecDeque;
use std::convert::Infallible;
use std::time::{Duration, Instant};

use axum::http::HeaderValue;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use hermes_cache::run_events::{RunEvent, RunEvents, WaiterGuard};
use hermes_runtime::Ctx;
use hermes_types::ids::RunId;
use hermes_types::model::Outcome;
use serde_json::json;

use crate::wait;

mod chunks;

use chunks::Answer;

/// How long the connection may stay silent before a keep-alive comment goes out.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// The SSE payload that ends every stream, as OpenAI sends it.
const DONE: &str = "[DONE]";

/// Stream the answer of `run`, already accepted by the broker, to the caller.
///
/// `guard` must have been registered before the message was published, so that no event
/// can be appended before anyone listens for its wake-up.
pub fn respond(
    ctx: &Ctx,
    events: &RunEvents,
    guard: WaiterGuard,
    run: RunId,
    model: String,
    include_usage: bool,
) -> Response {
    follow(
        ctx,
        events,
        guard,
        run,
        Answer::new(run, model, include_usage),
    )
}

/// One server-sent event: its `event:` name (none: a plain `data:` line) and its data.
#[derive(Debug)]
pub(crate) struct Frame {
    pub event: Option<&'static str>,
    pub data: String,
}

impl Frame {
    /// A `data:` line alone, as chat completions' chunks go out.
    fn data(data: String) -> Self {
        Self { event: None, data }
    }
}

/// What turns one run's events into one API's server-sent events (no I/O, so each can be
/// tested on its own). [`follow`] reads the run's stream and calls it.
pub(crate) trait Render: Send + 'static {
    /// The events that open the stream, before the run produced anything.
    fn start(&mut self) -> Vec<Frame>;
    /// A piece of answer text from the processing the caller follows.
    fn delta(&mut self, text: &str) -> Vec<Frame>;
    /// Deltas of a later processing of a model call were dropped: the final answer may not
    /// continue what was streamed (see [`unseen`]).
    fn superseded(&mut self);
    /// A tool started or finished (`RunEvent::ToolStarted` / `ToolFinished`).
    fn tool(&mut self, event: RunEvent) -> Vec<Frame>;
    /// The run ended: the closing events.
    fn end(&mut self, outcome: Outcome) -> Vec<Frame>;
    /// The run outlasted the caller's wait (it goes on): the closing events.
    fn timeout(&mut self, message: &str) -> Vec<Frame>;
}

/// Follow `run`'s event stream and send what `render` makes of it as server-sent events.
pub(crate) fn follow<R: Render>(
    ctx: &Ctx,
    events: &RunEvents,
    guard: WaiterGuard,
    run: RunId,
    mut render: R,
) -> Response {
    let timeout = ctx.config.ingest.run_timeout;
    let pending = render.start().into();
    let reader = Reader {
        ctx: ctx.clone(),
        events: events.clone(),
        guard,
        run,
        deadline: Instant::now() + timeout,
        timeout,
        last: "0".into(),
        render,
        attempts: Attempts::default(),
        pending,
        ended: false,
        quiet: wait::QuietTicks::default(),
    };
    let body = futures_util::stream::unfold(reader, |mut r| async move {
        loop {
            if let Some(frame) = r.pending.pop_front() {
                let mut event = Event::default().data(frame.data);
                if let Some(name) = frame.event {
                    event = event.event(name);
                }
                return Some((Ok::<_, Infallible>(event), r));
            }
            if r.ended {
                return None;
            }
            r.advance().await;
        }
    });
    sse(ctx, body)
}

/// Server-sent events from `body`, with keep-alive comments while it is quiet, and unbuffered
/// by proxies (every streamed answer of the API goes out this way). A stream still open after
/// `HERMES_STREAM_MAX_SECS` ends with a `hermes.stream.closed` event ([`within_lifetime`]).
pub(crate) fn sse<S>(ctx: &Ctx, body: S) -> Response
where
    S: futures_util::Stream<Item = Result<Event, Infallible>> + Send + 'static,
{
    let body = within_lifetime(
        body,
        ctx.config.ingest.stream_max_lifetime,
        ctx.metrics
            .limits
            .streams_cut
            .with_label_values(&["lifetime"]),
    );
    let mut resp = Sse::new(body)
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE).text("keep-alive"))
        .into_response();
    // Tells nginx-style proxies not to buffer the stream, which would defeat it.
    resp.headers_mut()
        .insert("x-accel-buffering", HeaderValue::from_static("no"));
    resp
}

/// The name of the event that ends a stream open for its whole lifetime.
pub(crate) const CLOSED_EVENT: &str = "hermes.stream.closed";

/// `body` until `lifetime` has passed, then a named `hermes.stream.closed` event (which
/// OpenAI's SDKs pass by; an `EventSource` reconnects with `Last-Event-ID` and resumes a
/// run's stream), counted in `cut`, and the end. A stream may hold a connection, a slot and
/// one of its key's slots for no longer.
pub(crate) fn within_lifetime<S>(
    body: S,
    lifetime: Duration,
    cut: prometheus::IntCounter,
) -> impl futures_util::Stream<Item = Result<Event, Infallible>> + Send + 'static
where
    S: futures_util::Stream<Item = Result<Event, Infallible>> + Send + 'static,
{
    let expiry = Box::pin(tokio::time::sleep(lifetime));
    futures_util::stream::unfold(
        (Box::pin(body), expiry, false),
        move |(mut body, mut expiry, closed)| {
            let cut = cut.clone();
            async move {
                if closed {
                    return None;
                }
                tokio::select! {
                    biased;
                    item = futures_util::StreamExt::next(&mut body) => {
                        item.map(|event| (event, (body, expiry, false)))
                    }
                    _ = expiry.as_mut() => {
                        cut.inc();
                        let data = json!({ "reason": "lifetime", "max_secs": lifetime.as_secs() });
                        let event = Event::default().event(CLOSED_EVENT).data(data.to_string());
                        Some((Ok(event), (body, expiry, true)))
                    }
                }
            }
        },
    )
}

/// Follows one run's event stream and queues the server-sent events it produces.
struct Reader<R> {
    ctx: Ctx,
    events: RunEvents,
    guard: WaiterGuard,
    run: RunId,
    deadline: Instant,
    timeout: Duration,
    /// The last stream entry read ("0": none yet).
    last: String,
    render: R,
    /// Which processing of each model call the caller follows.
    attempts: Attempts,
    /// Events produced but not yet sent.
    pending: VecDeque<Frame>,
    /// The last event has been produced.
    ended: bool,
    quiet: wait::QuietTicks,
}

impl<R: Render> Reader<R> {
    /// Read what the run's stream holds beyond the last entry seen; when that is nothing,
    /// wait for a wake-up, the backstop tick or the deadline.
    async fn advance(&mut self) {
        match self.events.read_after(self.run, &self.last).await {
            Ok(batch) => {
                for (id, event) in batch {
                    self.last = id;
                    match event {
                        RunEvent::Delta {
                            text,
                            round,
                            attempt,
                        } => {
                            if self.attempts.admit(round, attempt) {
                                self.pending.extend(self.render.delta(&text));
                            } else {
                                self.render.superseded();
                            }
                        }
                        RunEvent::Final { outcome } => return self.end(outcome),
                        // The outcome was too large for the stream: the row holds it (read
                        // again on the backstop ticks if it cannot be read now).
                        RunEvent::Closed => {
                            if let Some(outcome) = wait::from_row(&self.ctx, self.run).await {
                                return self.end(outcome);
                            }
                        }
                        tool @ (RunEvent::ToolStarted { .. } | RunEvent::ToolFinished { .. }) => {
                            self.pending.extend(self.render.tool(tool));
                        }
                        RunEvent::Queued { .. }
                        | RunEvent::Running { .. }
                        | RunEvent::StopRequested => {}
                    }
                }
            }
            Err(e) => {
                tracing::debug!(run = %self.run, error = %e, "run stream unreadable; checking the run row");
                if let Some(outcome) = wait::from_row(&self.ctx, self.run).await {
                    return self.end(outcome);
                }
            }
        }
        if !self.pending.is_empty() {
            // Send what arrived before waiting for more.
            return;
        }
        let now = Instant::now();
        if now >= self.deadline {
            // The row may hold an outcome whose final event never reached the stream.
            if let Some(outcome) = wait::from_row(&self.ctx, self.run).await {
                return self.end(outcome);
            }
            let message = format!(
                "no answer within {}s; the run {} goes on",
                self.timeout.as_secs(),
                self.run
            );
            self.pending.extend(self.render.timeout(&message));
            self.ended = true;
            return;
        }
        let quiet_tick = tokio::select! {
            _ = self.guard.notify.notified() => false,
            _ = tokio::time::sleep(wait::BACKSTOP.min(self.deadline - now)) => true,
        };
        if quiet_tick && let Some(outcome) = self.quiet.tick(&self.ctx, self.run).await {
            self.end(outcome);
        }
    }

    fn end(&mut self, outcome: Outcome) {
        self.pending.extend(self.render.end(outcome));
        self.ended = true;
    }
}

/// The part of a run's final answer `text` a caller who was streamed `streamed` has not
/// seen. The final text is always whole, but not all of it may have been streamed: an
/// answer from the response cache or the run row never was, and the llm stage stops
/// streaming when Redis fails mid-answer. (After a tool round the streamed text may also
/// hold the first call's words and be no prefix of the answer, which then has been streamed
/// already.) When an attempt that streamed died and another answered (`superseded`), the
/// answer may not continue the first attempt's words: then it follows them whole, after a
/// blank line, rather than be lost.
pub(crate) fn unseen(streamed: &str, superseded: bool, text: &str) -> String {
    if streamed.is_empty() {
        return text.to_string();
    }
    match text.strip_prefix(streamed) {
        Some(rest) => rest.to_string(),
        None if superseded => format!("\n\n{text}"),
        None => String::new(),
    }
}

pub(crate) use hermes_cache::run_events::Attempts;
