//! `message/stream` and `SendStreamingMessage` (docs/a2a.md): the task's updates as
//! server-sent events, each `data:` one JSON-RPC response with the request's id. The run's
//! event stream is followed as the chat completions' is ([`crate::stream::follow`]); this
//! renders it:
//!
//! 1. the task, `submitted`;
//! 2. a status update `working` when the run's first text or tool call arrives;
//! 3. each piece of answer text as an update of the `answer` artifact (`append` after the
//!    first);
//! 4. at the end, the whole answer as the artifact (`append: false`, `lastChunk: true`,
//!    replacing what was streamed: a redelivered model call may not continue it), then the
//!    final status update (`completed`, `canceled` or `failed`; 0.3 marks it `final`).
//!
//! 0.3 results carry their `kind`; 1.0 results are wrapped in the member that names them
//! (`task`, `statusUpdate`, `artifactUpdate`).

use hermes_cache::run_events::RunEvent;
use hermes_types::model::Outcome;
use serde_json::{Value, json};

use super::rpc::{self, Version};
use super::task::{State, Task, artifact};
use crate::stream::{Frame, Render};

/// Renders one task's run events as A2A stream responses.
pub struct Updates {
    task: Task,
    version: Version,
    /// The request's id, answered in every event.
    id: Value,
    /// A status update `working` went out.
    working: bool,
    /// Answer text went out as artifact updates.
    streamed: bool,
}

impl Updates {
    pub fn new(task: Task, version: Version, id: Value) -> Self {
        Self {
            task,
            version,
            id,
            working: false,
            streamed: false,
        }
    }

    fn frame(&self, member: &str, kind: &str, mut result: Value) -> Frame {
        let result = match self.version {
            Version::V03 => {
                result["kind"] = json!(kind);
                result
            }
            Version::V10 => json!({ member: result }),
        };
        Frame {
            event: None,
            data: rpc::success(&self.id, result).to_string(),
        }
    }

    fn status_update(&self, last: bool) -> Frame {
        let mut update = json!({
            "taskId": self.task.id.to_string(),
            "contextId": self.task.context_id,
            "status": self.task.status(self.version),
        });
        // 0.3 marks the last event; 1.0 ends the stream after a terminal state.
        if self.version == Version::V03 {
            update["final"] = json!(last);
        }
        self.frame("statusUpdate", "status-update", update)
    }

    fn artifact_update(&self, text: &str, append: bool, last_chunk: bool) -> Frame {
        let update = json!({
            "taskId": self.task.id.to_string(),
            "contextId": self.task.context_id,
            "artifact": artifact(self.version, text),
            "append": append,
            "lastChunk": last_chunk,
        });
        self.frame("artifactUpdate", "artifact-update", update)
    }

    /// `working`, once.
    fn working(&mut self) -> Vec<Frame> {
        if self.working {
            return Vec::new();
        }
        self.working = true;
        self.task.state = State::Working;
        vec![self.status_update(false)]
    }
}

impl Render for Updates {
    fn start(&mut self) -> Vec<Frame> {
        let task = self.task.render(self.version, None);
        vec![self.frame("task", "task", task)]
    }

    fn delta(&mut self, text: &str) -> Vec<Frame> {
        if text.is_empty() {
            return Vec::new();
        }
        let mut frames = self.working();
        frames.push(self.artifact_update(text, self.streamed, false));
        self.streamed = true;
        frames
    }

    fn superseded(&mut self) {
        // The final artifact replaces what was streamed whatever happened: nothing to do.
    }

    fn tool(&mut self, _event: RunEvent) -> Vec<Frame> {
        self.working()
    }

    fn end(&mut self, outcome: Outcome) -> Vec<Frame> {
        let mut frames = self.working();
        self.task = self.task.clone().ended(Some(outcome));
        if let Some(answer) = self.task.answer.clone() {
            frames.push(self.artifact_update(&answer, false, true));
        }
        frames.push(self.status_update(true));
        frames
    }

    fn timeout(&mut self, message: &str) -> Vec<Frame> {
        // The task goes on; the caller reads it later with tasks/get (GetTask).
        self.task.state = State::Working;
        self.task.failure = Some(message.to_string());
        let frame = self.status_update(true);
        self.task.failure = None;
        vec![frame]
    }
}

#[cfg(test)]
mod tests {
    use hermes_types::ids::RunId;
    use hermes_types::model::FinishReason;

    use super::*;

    fn results(frames: &[Frame]) -> Vec<Value> {
        frames
            .iter()
            .map(|f| serde_json::from_str::<Value>(&f.data).unwrap()["result"].clone())
            .collect()
    }

    fn run(version: Version) -> Vec<Value> {
        let task = Task::submitted(RunId::new(), "c".into(), "m".into(), "hi".into());
        let mut u = Updates::new(task, version, json!(7));
        let mut frames = u.start();
        frames.extend(u.delta("Hel"));
        frames.extend(u.delta("lo"));
        frames.extend(u.end(Outcome::Answered {
            text: "Hello".into(),
            model: "m".into(),
            usage: Default::default(),
            finish_reason: FinishReason::Stop,
            tools_used: Vec::new(),
            transcript: Vec::new(),
        }));
        assert!(frames.iter().all(|f| f.data.contains("\"id\":7")));
        results(&frames)
    }

    #[test]
    fn a_streamed_task_goes_submitted_working_pieces_answer_completed() {
        let r = run(Version::V10);
        assert_eq!(r.len(), 6, "{r:?}");
        assert_eq!(r[0]["task"]["status"]["state"], "TASK_STATE_SUBMITTED");
        assert_eq!(
            r[1]["statusUpdate"]["status"]["state"],
            "TASK_STATE_WORKING"
        );
        assert_eq!(r[2]["artifactUpdate"]["append"], false);
        assert_eq!(r[3]["artifactUpdate"]["append"], true);
        let last_piece = &r[4]["artifactUpdate"];
        assert_eq!(last_piece["artifact"]["parts"][0]["text"], "Hello");
        assert_eq!(
            (
                last_piece["append"].clone(),
                last_piece["lastChunk"].clone()
            ),
            (json!(false), json!(true))
        );
        assert_eq!(
            r[5]["statusUpdate"]["status"]["state"],
            "TASK_STATE_COMPLETED"
        );

        let r = run(Version::V03);
        assert_eq!(r[0]["kind"], "task");
        assert_eq!(r[1]["kind"], "status-update");
        assert_eq!(r[1]["final"], false);
        assert_eq!(r[4]["kind"], "artifact-update");
        assert_eq!(
            (r[5]["status"]["state"].clone(), r[5]["final"].clone()),
            (json!("completed"), json!(true))
        );
    }
}
