//! Answers stream to the Forge (docs/agents.md, "Answers stream to the Forge"): the answer
//! of a Forge chat run (a `CHAT_MESSAGE_POSTED` wake, which names its `threadId`) goes to
//! the thread as the contract's draft: `chat.startDraft {threadId}`, then
//! `chat.appendDraftChunk {threadId, draftId, delta}` as the model streams, then
//! `chat.finalizeDraft {threadId, draftId, body}` with the whole answer. A Forge without the
//! three draft tools gets `chat.appendMessage {threadId, body}` once, with the whole answer.
//!
//! The tools stage holds the Forge's session, so after the preflight it follows the run's
//! event stream (the llm stage streams the model's deltas there, delivery writes the final
//! event) and relays it. Chunks are coalesced as Telegram drafts are: one call at a time,
//! at most one per [`GATE`], each carrying all the text that arrived meanwhile, and a
//! chunk that fails is not retried, since the final body carries the whole answer. So a
//! slow Forge gets fewer, larger chunks and loses nothing.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use hermes_cache::run_events::{Attempts, FOLLOW_RENEW, RunEvent, RunEvents, Waiters};
use hermes_runtime::Ctx;
use hermes_types::ids::RunId;
use hermes_types::model::Outcome as RunOutcome;
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::forge::{Refused, call, counter, forge_tool};
use crate::handler::Outcome;
use crate::registry::{Registry, Tool};

/// The contract's chat tools.
const START: &str = "chat.startDraft";
const CHUNK: &str = "chat.appendDraftChunk";
const FINALIZE: &str = "chat.finalizeDraft";
const APPEND: &str = "chat.appendMessage";

/// The least time between two draft chunks of one answer; what streams meanwhile waits
/// and goes in the next chunk.
pub const GATE: Duration = Duration::from_millis(300);

/// How often the run's stream is read again when no wake-up came (Redis pub/sub lost).
const BACKSTOP: Duration = Duration::from_millis(500);

/// How long an answer is followed at most: a run that never ends is not followed forever.
const FOLLOW_LIMIT: Duration = Duration::from_secs(30 * 60);

/// How many times the final body is tried: it is the answer, so a failure is tried again.
const FINAL_TRIES: u32 = 3;

/// The relays of one tools replica: what they read the runs' streams with.
#[derive(Clone)]
pub struct Relays {
    ctx: Ctx,
    events: RunEvents,
    /// Woken when a followed run's stream grows; subscribed on the first relay.
    waiters: Arc<OnceLock<Waiters>>,
}

impl Relays {
    pub fn new(ctx: Ctx) -> Self {
        let events = RunEvents::new(ctx.cache.clone(), &ctx.config);
        Self {
            ctx,
            events,
            waiters: Arc::default(),
        }
    }

    /// Relay `run`'s answer to the Forge's `thread`. The run is followed before this
    /// returns, so its model call (sent after) streams every delta where the relay reads it.
    pub async fn start(&self, registry: Registry, run: RunId, thread: String) {
        if let Err(e) = self.events.follow(run).await {
            // The final event is then not stored either: the relay would wait in vain.
            tracing::warn!(%run, error = %e, "cannot follow the Forge run's stream; its answer is not relayed");
            return;
        }
        let waiters = self
            .waiters
            .get_or_init(|| {
                let waiters = Waiters::default();
                waiters.spawn_subscriber(self.ctx.cache.clone(), self.ctx.stop.clone());
                waiters
            })
            .clone();
        let relay = self.clone();
        tokio::spawn(async move { relay.relay(&waiters, registry, run, thread).await });
    }

    /// Follow the stream until its final event, relaying as it goes.
    async fn relay(&self, waiters: &Waiters, registry: Registry, run: RunId, thread: String) {
        let guard = waiters.register(run);
        let count = counter(&self.ctx);
        let answer = Answer::open(&registry, thread, &count).await;
        let (mut last, mut attempts) = ("0".to_string(), Attempts::default());
        let (mut unsent, mut streamed) = (String::new(), String::new());
        let mut next_chunk = Instant::now();
        let mut followed = Instant::now();
        let deadline = Instant::now() + FOLLOW_LIMIT;
        loop {
            let events = self
                .events
                .read_after(run, &last)
                .await
                .unwrap_or_else(|e| {
                    tracing::debug!(%run, error = %e, "Forge run stream unreadable now");
                    Vec::new()
                });
            for (id, event) in events {
                last = id;
                match event {
                    RunEvent::Delta {
                        text,
                        round,
                        attempt,
                    } if attempts.admit(round, attempt.clone()) => {
                        unsent.push_str(&text);
                        streamed.push_str(&text);
                    }
                    RunEvent::Final { outcome } => {
                        return answer.finish(body(&outcome), &count).await;
                    }
                    RunEvent::Closed => {
                        // The outcome was too large for the stream: what streamed is sent.
                        tracing::warn!(%run, "Forge run's final event by reference; the streamed text is its body");
                        return answer.finish(&streamed, &count).await;
                    }
                    _ => {}
                }
            }
            if !unsent.trim().is_empty() && Instant::now() >= next_chunk {
                answer.chunk(&std::mem::take(&mut unsent), &count).await;
                next_chunk = Instant::now() + GATE;
            }
            if followed.elapsed() >= FOLLOW_RENEW {
                let _ = self.events.follow(run).await;
                followed = Instant::now();
            }
            if Instant::now() >= deadline {
                tracing::warn!(%run, "the Forge run did not end within the follow limit; its answer is not relayed");
                return;
            }
            let wait = if unsent.is_empty() {
                BACKSTOP
            } else {
                next_chunk.saturating_duration_since(Instant::now())
            };
            tokio::select! {
                () = guard.notify.notified() => {}
                () = tokio::time::sleep(wait) => {}
            }
        }
    }
}

/// The text the thread gets for a run's outcome.
fn body(outcome: &RunOutcome) -> &str {
    match outcome {
        RunOutcome::Answered { text, .. } => text,
        RunOutcome::Failed { message, .. } => message,
    }
}

/// Where the answer goes in the Forge.
enum Answer {
    /// A draft the Forge opened, chunks appended as they stream.
    Draft {
        thread: String,
        draft_id: String,
        chunk: Arc<dyn Tool>,
        finalize: Arc<dyn Tool>,
    },
    /// One message at the end (a Forge without drafts, or whose draft could not open).
    Message {
        thread: String,
        append: Option<Arc<dyn Tool>>,
    },
}

impl Answer {
    /// Open a draft in `thread` where the Forge has the three draft tools.
    async fn open(registry: &Registry, thread: String, count: &impl Fn(&str, Outcome)) -> Self {
        let tools = (
            forge_tool(registry, START),
            forge_tool(registry, CHUNK),
            forge_tool(registry, FINALIZE),
        );
        let append = forge_tool(registry, APPEND);
        let (Some(start), Some(chunk), Some(finalize)) = tools else {
            return Self::Message { thread, append };
        };
        match call(&start, START, json!({"threadId": thread}), count).await {
            Ok(answer) => match draft_id(&answer) {
                Some(draft_id) => {
                    return Self::Draft {
                        thread,
                        draft_id,
                        chunk,
                        finalize,
                    };
                }
                None => {
                    tracing::warn!("{START} answered no draftId; the answer goes as one message")
                }
            },
            Err(Refused(reason)) => {
                tracing::warn!(reason, "no draft opened; the answer goes as one message")
            }
        }
        Self::Message { thread, append }
    }

    /// Append `delta` to the draft (nothing for a single message).
    async fn chunk(&self, delta: &str, count: &impl Fn(&str, Outcome)) {
        if let Self::Draft {
            thread,
            draft_id,
            chunk,
            ..
        } = self
        {
            let args = json!({"threadId": thread, "draftId": draft_id, "delta": delta});
            if let Err(Refused(reason)) = call(chunk, CHUNK, args, count).await {
                tracing::info!(reason, "draft chunk not taken; the final body carries it");
            }
        }
    }

    /// Post the whole answer: the draft's final body, or one message.
    async fn finish(&self, body: &str, count: &impl Fn(&str, Outcome)) {
        let (tool, name, args) = match self {
            Self::Draft {
                thread,
                draft_id,
                finalize,
                ..
            } => (
                Some(finalize),
                FINALIZE,
                json!({"threadId": thread, "draftId": draft_id, "body": body}),
            ),
            Self::Message { thread, append } => (
                append.as_ref(),
                APPEND,
                json!({"threadId": thread, "body": body}),
            ),
        };
        let Some(tool) = tool else {
            tracing::warn!("the Forge offers no {APPEND} tool: the answer is not posted");
            return;
        };
        for attempt in 1..=FINAL_TRIES {
            match call(tool, name, args.clone(), count).await {
                Ok(_) => return,
                Err(Refused(reason)) => {
                    tracing::warn!(reason, attempt, "the answer was not posted to the Forge")
                }
            }
        }
    }
}

/// The `draftId` of a `chat.startDraft` answer (or its `id`).
fn draft_id(answer: &str) -> Option<String> {
    let v: Value = serde_json::from_str(answer).ok()?;
    ["draftId", "id"]
        .iter()
        .find_map(|k| v.get(*k).and_then(Value::as_str).map(str::to_owned))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_draft_id_is_read_from_draft_id_or_id() {
        assert_eq!(draft_id(r#"{"draftId":"drf_1"}"#).as_deref(), Some("drf_1"));
        assert_eq!(draft_id(r#"{"id":"drf_2"}"#).as_deref(), Some("drf_2"));
        assert_eq!(draft_id(r#"{"ok":true}"#), None);
        assert_eq!(draft_id("text"), None);
    }
}
