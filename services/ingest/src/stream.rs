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
use hermes_types::model::{Outcome, Usage};
use serde_json::{Value, json};

use crate::wait;

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
    let timeout = ctx.config.run_timeout;
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
        ctx.config.stream_max_lifetime,
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

/// The first processing of each model call round a caller saw deltas from. A model call
/// redelivered after a crash streams again under a new attempt; its deltas are dropped, so
/// the caller never sees two attempts interleaved ("HelHello wor…"), and the final answer's
/// remainder comes at the end (see [`Answer::end`]).
#[derive(Default)]
pub(crate) struct Attempts {
    followed: std::collections::HashMap<u8, String>,
}

impl Attempts {
    /// Forward this delta? Deltas without an attempt (an older llm build) always pass.
    pub(crate) fn admit(&mut self, round: u8, attempt: Option<String>) -> bool {
        let Some(attempt) = attempt else {
            return true;
        };
        match self.followed.get(&round) {
            None => {
                self.followed.insert(round, attempt);
                true
            }
            Some(first) => *first == attempt,
        }
    }
}

/// Turns one run's events into `chat.completion.chunk` payloads (no I/O, so it can be
/// tested on its own).
struct Answer {
    id: String,
    model: String,
    /// Unix seconds, the same on every chunk as OpenAI does.
    created: i64,
    include_usage: bool,
    /// The text sent so far.
    streamed: String,
    /// Deltas of a later attempt were dropped: the answer that ends the run may not continue
    /// what was streamed.
    superseded: bool,
}

impl Answer {
    fn new(run: RunId, model: String, include_usage: bool) -> Self {
        Self {
            id: format!("chatcmpl-{run}"),
            model,
            created: chrono::Utc::now().timestamp(),
            include_usage,
            streamed: String::new(),
            superseded: false,
        }
    }

    fn chunk(&self, choices: Value) -> Value {
        let mut chunk = json!({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": choices,
        });
        if self.include_usage {
            // OpenAI marks every chunk but the last `usage: null` when usage was asked for.
            chunk["usage"] = Value::Null;
        }
        chunk
    }

    fn choice(&self, delta: Value, finish_reason: Option<&str>) -> String {
        self.chunk(json!([{ "index": 0, "delta": delta, "finish_reason": finish_reason }]))
            .to_string()
    }

    /// The first chunk: the assistant's turn begins.
    fn start(&self) -> String {
        self.choice(json!({ "role": "assistant" }), None)
    }

    /// A content chunk for a piece of streamed text (none for an empty piece).
    fn delta(&mut self, text: &str) -> Option<String> {
        if text.is_empty() {
            return None;
        }
        self.streamed.push_str(text);
        Some(self.choice(json!({ "content": text }), None))
    }

    /// The closing payloads for the run's outcome, `[DONE]` last.
    fn end(&mut self, outcome: Outcome) -> Vec<String> {
        let (text, usage, finish_reason) = match outcome {
            Outcome::Answered {
                text,
                usage,
                finish_reason,
                ..
            } => (text, usage, finish_reason),
            Outcome::Failed { code, message } => return self.error(code.as_str(), &message),
        };
        let mut out = Vec::with_capacity(4);
        let unseen = unseen(&self.streamed, self.superseded, &text);
        if !unseen.is_empty() {
            out.extend(self.delta(&unseen));
        }
        out.push(self.choice(json!({}), Some(finish_reason.as_str())));
        if self.include_usage {
            out.push(self.usage(usage));
        }
        out.push(DONE.into());
        out
    }

    fn usage(&self, usage: Usage) -> String {
        let mut chunk = self.chunk(json!([]));
        chunk["usage"] = json!({
            "prompt_tokens": usage.input_tokens,
            "completion_tokens": usage.output_tokens,
            "total_tokens": usage.total(),
        });
        chunk.to_string()
    }

    /// The data of a `hermes.tool.progress` event. The official SDKs hand the data of every
    /// named event to their callers as one more chunk, so it is a chunk with no choices (a
    /// caller reading `choices[0]?.delta` skips it), with the tool's progress beside.
    fn tool_progress(&self, tool: &str, call_id: &str, status: &str) -> String {
        let mut chunk = self.chunk(json!([]));
        chunk["tool"] = json!(tool);
        chunk["call_id"] = json!(call_id);
        chunk["status"] = json!(status);
        chunk.to_string()
    }

    /// An error event in OpenAI's shape, then `[DONE]`: the status line went out long ago.
    fn error(&self, code: &str, message: &str) -> Vec<String> {
        vec![
            json!({ "error": { "message": message, "type": code, "code": code } }).to_string(),
            DONE.into(),
        ]
    }
}

fn frames(payloads: impl IntoIterator<Item = String>) -> Vec<Frame> {
    payloads.into_iter().map(Frame::data).collect()
}

impl Render for Answer {
    fn start(&mut self) -> Vec<Frame> {
        frames([Answer::start(self)])
    }

    fn delta(&mut self, text: &str) -> Vec<Frame> {
        frames(Answer::delta(self, text))
    }

    fn superseded(&mut self) {
        self.superseded = true;
    }

    fn tool(&mut self, event: RunEvent) -> Vec<Frame> {
        let (name, call_id, status) = match event {
            RunEvent::ToolStarted { name, call_id, .. } => (name, call_id, "started"),
            RunEvent::ToolFinished {
                name, call_id, ok, ..
            } => (name, call_id, if ok { "completed" } else { "failed" }),
            _ => return Vec::new(),
        };
        vec![Frame {
            event: Some("hermes.tool.progress"),
            data: self.tool_progress(&name, &call_id, status),
        }]
    }

    fn end(&mut self, outcome: Outcome) -> Vec<Frame> {
        frames(Answer::end(self, outcome))
    }

    fn timeout(&mut self, message: &str) -> Vec<Frame> {
        frames(self.error("run_timeout", message))
    }
}

#[cfg(test)]
mod tests {
    use hermes_types::model::FailureCode;

    use super::*;

    fn answered(text: &str) -> Outcome {
        Outcome::Answered {
            text: text.into(),
            model: "claude-haiku".into(),
            usage: Usage {
                input_tokens: 2,
                output_tokens: 3,
                cost_micro_usd: 0,
            },
            finish_reason: "stop".into(),
            tools_used: Vec::new(),
            transcript: Vec::new(),
        }
    }

    fn parsed(payloads: &[String]) -> Vec<Value> {
        payloads
            .iter()
            .filter(|p| p.as_str() != DONE)
            .map(|p| serde_json::from_str(p).unwrap())
            .collect()
    }

    fn content(chunks: &[Value]) -> String {
        chunks
            .iter()
            .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
            .collect()
    }

    #[test]
    fn a_streamed_answer_ends_with_finish_usage_and_done() {
        let run = RunId::new();
        let mut a = Answer::new(run, "hermes".into(), true);
        let mut out = vec![a.start()];
        out.extend(a.delta("echo:"));
        out.extend(a.delta(""));
        out.extend(a.delta(" hi"));
        out.extend(a.end(answered("echo: hi")));
        assert_eq!(out.last().map(String::as_str), Some(DONE));
        let chunks = parsed(&out);
        assert_eq!(chunks.len(), 5, "{chunks:?}");
        assert_eq!(
            chunks[0]["choices"][0]["delta"],
            json!({"role": "assistant"})
        );
        assert_eq!(content(&chunks), "echo: hi");
        for c in &chunks {
            assert_eq!(c["id"], format!("chatcmpl-{run}"));
            assert_eq!(c["object"], "chat.completion.chunk");
            assert_eq!(c["model"], "hermes");
            assert_eq!(c["created"], chunks[0]["created"]);
        }
        assert_eq!(chunks[3]["choices"][0]["delta"], json!({}));
        assert_eq!(chunks[3]["choices"][0]["finish_reason"], "stop");
        assert!(chunks[3]["usage"].is_null());
        assert_eq!(chunks[4]["choices"], json!([]));
        assert_eq!(
            chunks[4]["usage"],
            json!({"prompt_tokens": 2, "completion_tokens": 3, "total_tokens": 5})
        );
    }

    #[test]
    fn an_answer_that_was_not_streamed_comes_whole() {
        let mut a = Answer::new(RunId::new(), "hermes".into(), false);
        let out = a.end(answered("from the cache"));
        let chunks = parsed(&out);
        assert_eq!(content(&chunks), "from the cache");
        assert_eq!(chunks.len(), 2);
        assert!(chunks.iter().all(|c| c.get("usage").is_none()));
        assert_eq!(out.last().map(String::as_str), Some(DONE));
    }

    #[test]
    fn a_stream_cut_short_is_completed_from_the_final_text() {
        let mut a = Answer::new(RunId::new(), "hermes".into(), false);
        let mut out: Vec<String> = a.delta("echo:").into_iter().collect();
        out.extend(a.end(answered("echo: all of it")));
        assert_eq!(content(&parsed(&out)), "echo: all of it");
    }

    #[test]
    fn text_streamed_before_a_tool_round_is_not_repeated() {
        let mut a = Answer::new(RunId::new(), "hermes".into(), false);
        let mut out: Vec<String> = a.delta("Let me check. ").into_iter().collect();
        out.extend(a.delta("It is noon."));
        out.extend(a.end(answered("It is noon.")));
        assert_eq!(content(&parsed(&out)), "Let me check. It is noon.");
    }

    /// Two processings of one model call write into one run's stream; the caller follows
    /// the first of each round and never sees them interleaved.
    #[test]
    fn deltas_of_a_second_attempt_never_interleave_with_the_first() {
        let mut attempts = Attempts::default();
        let mut a = Answer::new(RunId::new(), "hermes".into(), false);
        let events = [
            (0, "first", "Hel"),
            (0, "second", "Hel"),
            (0, "first", "lo wor"),
            (0, "second", "lo wor"),
            (0, "second", "ld"),
        ];
        let mut out = Vec::new();
        for (round, attempt, text) in events {
            if attempts.admit(round, Some(attempt.to_string())) {
                out.extend(a.delta(text));
            } else {
                a.superseded = true;
            }
        }
        // The first attempt died after "Hello wor"; the second's answer continues it.
        out.extend(a.end(answered("Hello world")));
        assert_eq!(content(&parsed(&out)), "Hello world");
    }

    #[test]
    fn a_later_round_is_a_continuation_not_another_attempt() {
        let mut attempts = Attempts::default();
        assert!(attempts.admit(0, Some("a".into())));
        assert!(
            attempts.admit(1, Some("b".into())),
            "the call after the tool round"
        );
        assert!(
            !attempts.admit(1, Some("c".into())),
            "a redelivery of that call"
        );
        assert!(attempts.admit(1, None), "an older llm build's deltas pass");
    }

    #[test]
    fn an_answer_that_does_not_continue_a_dead_attempt_follows_it_whole() {
        let mut attempts = Attempts::default();
        let mut a = Answer::new(RunId::new(), "hermes".into(), false);
        let mut out = Vec::new();
        assert!(attempts.admit(0, Some("first".into())));
        out.extend(a.delta("Sure, the"));
        assert!(!attempts.admit(0, Some("second".into())));
        a.superseded = true;
        out.extend(a.end(answered("Of course: noon.")));
        assert_eq!(content(&parsed(&out)), "Sure, the\n\nOf course: noon.");
    }

    #[test]
    fn a_failure_is_an_error_event_then_done() {
        let mut a = Answer::new(RunId::new(), "hermes".into(), true);
        let out = a.end(Outcome::Failed {
            code: FailureCode::ProviderRejected,
            message: "no".into(),
        });
        assert_eq!(out.len(), 2);
        assert_eq!(
            serde_json::from_str::<Value>(&out[0]).unwrap(),
            json!({"error": {"message": "no", "type": "provider_rejected", "code": "provider_rejected"}})
        );
        assert_eq!(out[1], DONE);
    }
}
