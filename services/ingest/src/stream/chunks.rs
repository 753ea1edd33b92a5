//! Chat completions' own rendering of a followed run (docs/api.md, "Streaming"): each
//! event as OpenAI `chat.completion.chunk` objects, tool progress as named
//! `hermes.tool.progress` events, a failure or a timeout as an error event, `[DONE]` last.
//! Following the run is the parent module's ([`super::follow`]); this only renders.

use hermes_cache::run_events::RunEvent;
use hermes_runtime::http::ApiErrorCode;
use hermes_types::ids::RunId;
use hermes_types::model::{Outcome, Usage};
use serde_json::{Value, json};

use super::{DONE, Frame, Render, unseen};

/// Turns one run's events into `chat.completion.chunk` payloads (no I/O, so it can be
/// tested on its own).
pub(super) struct Answer {
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
    pub(super) fn new(run: RunId, model: String, include_usage: bool) -> Self {
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
        let (text, usage, finish_reason, tool_calls) = match outcome {
            Outcome::Answered {
                text,
                usage,
                finish_reason,
                tools_used,
                ..
            } => (text, usage, finish_reason, tools_used.len()),
            Outcome::Failed { code, message } => return self.error(code.as_str(), &message),
        };
        let mut out = Vec::with_capacity(4);
        let unseen = unseen(&self.streamed, self.superseded, &text);
        if !unseen.is_empty() {
            out.extend(self.delta(&unseen));
        }
        out.push(self.choice(json!({}), Some(finish_reason.as_str())));
        if self.include_usage {
            out.push(self.usage(usage, tool_calls));
        }
        out.push(DONE.into());
        out
    }

    fn usage(&self, usage: Usage, tool_calls_made: usize) -> String {
        let mut chunk = self.chunk(json!([]));
        chunk["usage"] = crate::openai::usage(usage, tool_calls_made);
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
        frames(self.error(ApiErrorCode::RunTimeout.as_str(), message))
    }
}

#[cfg(test)]
mod tests {
    use hermes_types::model::FailureCode;

    use super::*;
    use crate::stream::Attempts;

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
            json!({"prompt_tokens": 2, "completion_tokens": 3, "total_tokens": 5, "cost_usd": 0.0, "tool_calls_made": 0})
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
