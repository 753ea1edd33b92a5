//! A task is a run (docs/a2a.md): its id is the run's id, its state is read from the run's
//! status, its answer is the task's artifact (`answer`) and the agent's message in its
//! history, and a failure's message is its status message. Shown in either version's shapes:
//! 0.3 with `kind` discriminators and kebab-case states, 1.0 with `TASK_STATE_*` and
//! `ROLE_*` enums and parts named by their member.

use chrono::{DateTime, SecondsFormat, Utc};
use hermes_db::runs::{RunRow, RunStatus};
use hermes_types::ids::RunId;
use hermes_types::model::{FailureCode, Outcome};
use serde_json::{Value, json};

use super::rpc::Version;

/// The id of the artifact that holds a task's answer.
pub const ANSWER_ARTIFACT: &str = "answer";

/// A task's state, from its run's status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// Accepted, not yet routed.
    Submitted,
    /// Routed and running (a tool call waiting for an operator's approval too: the caller
    /// has nothing to add).
    Working,
    Completed,
    Canceled,
    /// Failed or expired.
    Failed,
}

impl State {
    /// The state of a run with `status`.
    pub fn of(status: RunStatus) -> Self {
        match status {
            RunStatus::Routed => State::Submitted,
            RunStatus::Running | RunStatus::AwaitingTools | RunStatus::AwaitingApproval => {
                State::Working
            }
            RunStatus::Completed => State::Completed,
            RunStatus::Cancelled => State::Canceled,
            RunStatus::Failed | RunStatus::Expired => State::Failed,
        }
    }

    /// Whether the task has ended.
    pub fn is_terminal(self) -> bool {
        matches!(self, State::Completed | State::Canceled | State::Failed)
    }

    fn wire(self, version: Version) -> &'static str {
        match (version, self) {
            (Version::V03, State::Submitted) => "submitted",
            (Version::V03, State::Working) => "working",
            (Version::V03, State::Completed) => "completed",
            (Version::V03, State::Canceled) => "canceled",
            (Version::V03, State::Failed) => "failed",
            (Version::V10, State::Submitted) => "TASK_STATE_SUBMITTED",
            (Version::V10, State::Working) => "TASK_STATE_WORKING",
            (Version::V10, State::Completed) => "TASK_STATE_COMPLETED",
            (Version::V10, State::Canceled) => "TASK_STATE_CANCELED",
            (Version::V10, State::Failed) => "TASK_STATE_FAILED",
        }
    }
}

/// Who wrote a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    User,
    Agent,
}

/// A task as a caller sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct Task {
    pub id: RunId,
    pub context_id: String,
    /// The caller's message: its id and text.
    pub message_id: String,
    pub input: String,
    pub state: State,
    /// The answer, once completed.
    pub answer: Option<String>,
    /// What went wrong, once failed or canceled.
    pub failure: Option<String>,
    pub at: DateTime<Utc>,
}

impl Task {
    /// A task just accepted.
    pub fn submitted(id: RunId, context_id: String, message_id: String, input: String) -> Self {
        Self {
            id,
            context_id,
            message_id,
            input,
            state: State::Submitted,
            answer: None,
            failure: None,
            at: Utc::now(),
        }
    }

    /// The task as its run's row shows it (`None`: not routed yet).
    pub fn read(mut self, row: Option<&RunRow>) -> Self {
        let Some(row) = row else {
            return self;
        };
        self.state = State::of(row.status);
        self.at = row.finished_at.unwrap_or(row.created_at);
        match self.state {
            State::Completed => self.answer = Some(row.output_text.clone().unwrap_or_default()),
            State::Failed | State::Canceled => self.failure = row.output_text.clone(),
            _ => {}
        }
        self
    }

    /// The task once its run ended with `outcome` (`None`: still running after the wait).
    pub fn ended(mut self, outcome: Option<Outcome>) -> Self {
        self.at = Utc::now();
        match outcome {
            Some(Outcome::Answered { text, .. }) => {
                self.state = State::Completed;
                self.answer = Some(text);
            }
            Some(Outcome::Failed { code, message }) => {
                self.state = if code == FailureCode::Cancelled {
                    State::Canceled
                } else {
                    State::Failed
                };
                self.failure = Some(message);
            }
            None => self.state = State::Working,
        }
        self
    }

    /// The task in `version`'s shape, with at most `history_length` messages of history.
    pub fn render(&self, version: Version, history_length: Option<usize>) -> Value {
        let mut history = vec![self.message(version, Role::User)];
        if self.answer.is_some() {
            history.push(self.message(version, Role::Agent));
        }
        let keep = history_length.unwrap_or(history.len()).min(history.len());
        let history: Vec<Value> = history.split_off(history.len() - keep);
        let artifacts: Vec<Value> = self
            .answer
            .as_deref()
            .map(|a| artifact(version, a))
            .into_iter()
            .collect();
        let mut task = json!({
            "id": self.id.to_string(),
            "contextId": self.context_id,
            "status": self.status(version),
            "artifacts": artifacts,
            "history": history,
        });
        if version == Version::V03 {
            task["kind"] = json!("task");
        }
        task
    }

    /// The task's status: its state, when it was reached, and a failure's message.
    pub fn status(&self, version: Version) -> Value {
        let mut status = json!({
            "state": self.state.wire(version),
            "timestamp": self.at.to_rfc3339_opts(SecondsFormat::Millis, true),
        });
        if let Some(failure) = &self.failure {
            status["message"] = message(
                version,
                Role::Agent,
                &format!("{}-status", self.id),
                &self.context_id,
                &self.id.to_string(),
                failure,
            );
        }
        status
    }

    /// The caller's message or the agent's answer as a message of the task.
    fn message(&self, version: Version, role: Role) -> Value {
        let (id, text) = match role {
            Role::User => (self.message_id.clone(), self.input.as_str()),
            Role::Agent => (
                format!("{}-answer", self.id),
                self.answer.as_deref().unwrap_or_default(),
            ),
        };
        message(
            version,
            role,
            &id,
            &self.context_id,
            &self.id.to_string(),
            text,
        )
    }
}

/// A text part.
pub fn text_part(version: Version, text: &str) -> Value {
    match version {
        Version::V03 => json!({"kind": "text", "text": text}),
        Version::V10 => json!({"text": text}),
    }
}

/// The artifact holding an answer (or a piece of one, while it streams).
pub fn artifact(version: Version, text: &str) -> Value {
    json!({
        "artifactId": ANSWER_ARTIFACT,
        "name": ANSWER_ARTIFACT,
        "parts": [text_part(version, text)],
    })
}

/// A message of a task.
fn message(version: Version, role: Role, id: &str, context: &str, task: &str, text: &str) -> Value {
    let role = match (version, role) {
        (Version::V03, Role::User) => "user",
        (Version::V03, Role::Agent) => "agent",
        (Version::V10, Role::User) => "ROLE_USER",
        (Version::V10, Role::Agent) => "ROLE_AGENT",
    };
    let mut m = json!({
        "messageId": id,
        "contextId": context,
        "taskId": task,
        "role": role,
        "parts": [text_part(version, text)],
    });
    if version == Version::V03 {
        m["kind"] = json!("message");
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task() -> Task {
        Task::submitted(RunId::new(), "c".into(), "m".into(), "hi".into())
    }

    #[test]
    fn every_run_status_is_a_task_state() {
        assert_eq!(State::of(RunStatus::Routed), State::Submitted);
        assert_eq!(State::of(RunStatus::AwaitingApproval), State::Working);
        assert_eq!(State::of(RunStatus::Expired), State::Failed);
        assert_eq!(State::of(RunStatus::Cancelled), State::Canceled);
        assert!(State::Canceled.is_terminal() && !State::Working.is_terminal());
    }

    #[test]
    fn a_completed_task_shows_its_answer_in_each_versions_shape() {
        let done = task().ended(Some(Outcome::Answered {
            text: "hello".into(),
            model: "m".into(),
            usage: Default::default(),
            finish_reason: hermes_types::model::FinishReason::Stop,
            tools_used: Vec::new(),
            transcript: Vec::new(),
        }));
        let v03 = done.render(Version::V03, None);
        assert_eq!(v03["kind"], "task");
        assert_eq!(v03["status"]["state"], "completed");
        assert_eq!(
            v03["artifacts"][0]["parts"][0],
            json!({"kind": "text", "text": "hello"})
        );
        assert_eq!(v03["history"][1]["role"], "agent");
        let v10 = done.render(Version::V10, Some(1));
        assert!(v10.get("kind").is_none());
        assert_eq!(v10["status"]["state"], "TASK_STATE_COMPLETED");
        assert_eq!(v10["artifacts"][0]["parts"][0], json!({"text": "hello"}));
        assert_eq!(v10["history"].as_array().unwrap().len(), 1);
        assert_eq!(v10["history"][0]["role"], "ROLE_AGENT");
        assert_eq!(done.render(Version::V10, Some(0))["history"], json!([]));
    }

    #[test]
    fn a_cancelled_run_is_a_canceled_task_with_its_message() {
        let t = task().ended(Some(Outcome::Failed {
            code: FailureCode::Cancelled,
            message: "stopped".into(),
        }));
        let v = t.render(Version::V10, None);
        assert_eq!(v["status"]["state"], "TASK_STATE_CANCELED");
        assert_eq!(v["status"]["message"]["parts"][0]["text"], "stopped");
        assert_eq!(v["artifacts"], json!([]));
        assert_eq!(task().ended(None).state, State::Working);
    }
}
