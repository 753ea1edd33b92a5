//! Answers stream to the Forge (docs/agents.md, "Answers stream to the Forge"): the answer
//! of a Forge chat run (a `CHAT_MESSAGE_POSTED` wake, which names its `threadId`) goes to
//! the thread as the contract's draft: `chat.startDraft {threadId}`, then
//! `chat.appendDraftChunk {threadId, draftId, delta}` as the model streams, then
//! `chat.finalizeDraft {threadId, draftId, body}` with the whole answer. A Forge without the
//! three draft tools gets `chat.appendMessage {threadId, body}` once, with the whole answer.
//!
//! The two halves differ in what they promise. The draft is opened by the preflight, which
//! records the thread and the draft in `forge_answers` with the model call it commits. The
//! chunks are a view: this replica follows the run's event stream (the llm stage streams
//! the model's deltas there) and relays them, coalesced as Telegram drafts are: one call at
//! a time, at most one per [`GATE`], each carrying all the text that arrived meanwhile, and
//! a chunk that fails is not retried. The whole answer is the promise: delivery emits a
//! `ForgeAnswer` message in the transaction that closes the run, and whichever tools
//! replica takes it posts the body to the recorded draft (or as one message) and marks it
//! posted in the transaction that acknowledges it. So a slow Forge gets fewer, larger
//! chunks, and a replica that dies mid-answer loses at most the rest of the chunks.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use hermes_cache::run_events::{Attempts, FOLLOW_RENEW, RunEvent, RunEvents, Waiters, Wake};
use hermes_db::forge_answers::Owed;
use hermes_runtime::Ctx;
use hermes_types::ids::RunId;
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::forge::{self, Refused, call, counter, forge_tool};
use crate::handler::Outcome;
use crate::registry::{Registry, Tool, ToolError};

/// The contract's chat tools.
const START: &str = "chat.startDraft";
const CHUNK: &str = "chat.appendDraftChunk";
const FINALIZE: &str = "chat.finalizeDraft";
const APPEND: &str = "chat.appendMessage";

/// The code of a Forge's refusal of a run that has its reply already.
const RUN_ENDED: &str = "RUN_ENDED";

/// The least time between two draft chunks of one answer; what streams meanwhile waits
/// and goes in the next chunk.
pub const GATE: Duration = Duration::from_millis(300);

/// How often the run's stream is read again when no wake-up came (Redis pub/sub lost).
const BACKSTOP: Duration = Duration::from_millis(500);

/// How long an answer is followed at most: a run that never ends is not followed forever.
const FOLLOW_LIMIT: Duration = Duration::from_secs(30 * 60);

/// How many times the final body is tried in one delivery of its message, before the
/// message is requeued (and, past the queue's delivery limit, parked).
const FINAL_TRIES: u32 = 3;

/// The relays of one tools replica: what they read the runs' streams with.
#[derive(Clone)]
pub struct Relays {
    ctx: Ctx,
    events: RunEvents,
    /// Woken when a followed run's stream grows; subscribed on the first relay.
    waiters: Arc<OnceLock<Waiters>>,
}

/// A draft open in a Forge thread: where the chunks go.
struct Draft {
    thread: String,
    draft_id: String,
    chunk: Arc<dyn Tool>,
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

    /// Open `run`'s answer in the Forge's `thread`: a draft where the Forge has the three
    /// draft tools, its chunks relayed from here on; what the preflight records. The run is
    /// followed before this returns, so its model call (sent after) streams every delta
    /// where the relay reads it.
    pub async fn open(&self, registry: &Registry, run: RunId, thread: String) -> Owed {
        let count = counter(&self.ctx);
        let Some(draft) = open_draft(registry, &thread, &count).await else {
            return Owed {
                thread_id: thread,
                draft_id: None,
            };
        };
        let owed = Owed {
            thread_id: thread,
            draft_id: Some(draft.draft_id.clone()),
        };
        if let Err(e) = self.events.follow(run).await {
            // The deltas are then not stored: the draft stays empty until the final body.
            tracing::warn!(%run, error = %e, "cannot follow the Forge run's stream; its draft gets only the final body");
            return owed;
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
        tokio::spawn(async move { relay.relay(&waiters, draft, run).await });
        owed
    }

    /// Follow the stream until its final event, relaying the deltas as chunks.
    async fn relay(&self, waiters: &Waiters, draft: Draft, run: RunId) {
        let guard = waiters.register(run, Wake::Every);
        let count = counter(&self.ctx);
        let (mut last, mut attempts) = ("0".to_string(), Attempts::default());
        let mut unsent = String::new();
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
                    } if attempts.admit(round, attempt.clone()) => unsent.push_str(&text),
                    // The run is closed: its whole answer is on its way as its own message.
                    RunEvent::Final { .. } | RunEvent::Closed => return,
                    _ => {}
                }
            }
            if !unsent.trim().is_empty() && Instant::now() >= next_chunk {
                draft.chunk(&std::mem::take(&mut unsent), &count).await;
                next_chunk = Instant::now() + GATE;
            }
            if followed.elapsed() >= FOLLOW_RENEW {
                let _ = self.events.follow(run).await;
                followed = Instant::now();
            }
            if Instant::now() >= deadline {
                tracing::warn!(%run, "the Forge run did not end within the follow limit; its draft gets no more chunks");
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

    /// Post the whole answer `body` where `owed` says: the draft's final body, or one
    /// message. Tried [`FINAL_TRIES`] times; the last failure is the error. A Forge that
    /// refuses it because the run has its reply already ([`RUN_ENDED`]) ends the tries.
    pub async fn post(
        &self,
        registry: &Registry,
        owed: &Owed,
        body: &str,
    ) -> Result<Posted, Refused> {
        let count = counter(&self.ctx);
        let (name, args) = match &owed.draft_id {
            Some(draft_id) => (
                FINALIZE,
                json!({"threadId": owed.thread_id, "draftId": draft_id, "body": body}),
            ),
            None => (APPEND, json!({"threadId": owed.thread_id, "body": body})),
        };
        let tool = forge_tool(registry, name)
            .ok_or_else(|| Refused(format!("the Forge offers no {name} tool (yet)")))?;
        let mut refused = Refused(String::new());
        for attempt in 1..=FINAL_TRIES {
            match forge::attempt(&tool, args.clone(), &count).await {
                Ok(_) => return Ok(Posted::Posted),
                Err(ToolError::Refused(text)) if has_its_reply(&text) => {
                    return Ok(Posted::RunEnded(forge::refused(
                        name,
                        &ToolError::Refused(text),
                    )));
                }
                Err(e) => {
                    let r = forge::refused(name, &e);
                    tracing::warn!(
                        reason = r.0,
                        attempt,
                        "the answer was not posted to the Forge"
                    );
                    refused = r;
                }
            }
        }
        Err(refused)
    }
}

/// How a whole answer's post ended.
#[derive(Debug)]
pub enum Posted {
    /// The Forge took it.
    Posted,
    /// The Forge's run has its reply already (the agent answered it with a tool of the
    /// contract, or it ended on the Forge's side): this answer has nowhere to go, and trying
    /// again cannot change that. The reason is the Forge's refusal.
    RunEnded(Refused),
}

/// Whether a Forge's refusal says its run has its reply already: its code, first in the
/// refusal's text (`RUN_ENDED: …`), as the agent MCP surface writes it (docs/agents.md,
/// "Errors and refusals").
fn has_its_reply(refusal: &str) -> bool {
    refusal.trim_start().starts_with(RUN_ENDED)
}

/// Open a draft in `thread` where the Forge has the three draft tools; `None`: the answer
/// goes as one message.
async fn open_draft(
    registry: &Registry,
    thread: &str,
    count: &impl Fn(&str, Outcome),
) -> Option<Draft> {
    let (start, chunk) = (forge_tool(registry, START)?, forge_tool(registry, CHUNK)?);
    forge_tool(registry, FINALIZE)?;
    match call(&start, START, json!({"threadId": thread}), count).await {
        Ok(answer) => match draft_id(&answer) {
            Some(draft_id) => {
                return Some(Draft {
                    thread: thread.to_owned(),
                    draft_id,
                    chunk,
                });
            }
            None => tracing::warn!("{START} answered no draftId; the answer goes as one message"),
        },
        Err(Refused(reason)) => {
            tracing::warn!(reason, "no draft opened; the answer goes as one message")
        }
    }
    None
}

impl Draft {
    /// Append `delta` to the draft; a chunk not taken is not tried again, since the final
    /// body carries it.
    async fn chunk(&self, delta: &str, count: &impl Fn(&str, Outcome)) {
        let args = json!({"threadId": self.thread, "draftId": self.draft_id, "delta": delta});
        if let Err(Refused(reason)) = call(&self.chunk, CHUNK, args, count).await {
            tracing::info!(reason, "draft chunk not taken; the final body carries it");
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

    #[test]
    fn only_a_run_ended_refusal_says_the_run_has_its_reply() {
        assert!(has_its_reply(
            "RUN_ENDED: the run has ended: its reply was already given"
        ));
        assert!(!has_its_reply(
            "UNAVAILABLE: PostgreSQL could not be reached; retry"
        ));
        assert!(!has_its_reply("NOT_FOUND: no such draft"));
        assert!(!has_its_reply("the run RUN_ENDED somewhere in the text"));
    }
}
