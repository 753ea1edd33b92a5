//! A Forge run's preflight (docs/agents.md, "The loop, enforced"): the contract requires
//! every woken agent to list its unacked runs, acknowledge the woken one (always, even for
//! a silent no-op) and read its context bundle before acting. Hermes does these three calls
//! itself, through the Forge's MCP server (`[mcp_servers.forge]`, whose session this stage
//! holds), before the model is called, so a model that skips a step cannot leave the run
//! unacknowledged. The bundle then ends the model's user turn.
//!
//! Read top to bottom: find the three tools, list, find the woken run, acknowledge it, read
//! its bundle, put it in the model's context. Any step that cannot be done fails the run
//! with the step's reason and no model call.

use std::sync::Arc;

use hermes_runtime::Ctx;
use hermes_types::model::{
    FORGE_MCP_SERVER, FailureCode, ForgePreflight, ForgeTarget, InboxRun, LlmRequest, Reply, Role,
};
use serde_json::{Value, json};

use crate::handler::Outcome;
use crate::mcp::naming;
use crate::registry::{Registry, Tool, ToolError};

/// The contract's tools the preflight calls, in order.
const LIST: &str = "agent.inbox.list";
const ACK: &str = "agent.inbox.ack";
const BUNDLE: &str = "agent.context.bundle";

/// What the person behind a failed Forge run's caller is told (the Forge shows it nowhere;
/// the run's `error_detail` holds the reason).
const FAILED_TEXT: &str = "Hermes could not take up this Forge run.";

/// Longest excerpt of a Forge's answer kept in a failure's reason.
const MAX_EXCERPT: usize = 300;

/// Why the preflight stopped: the run fails with this reason.
#[derive(Debug, PartialEq, Eq)]
pub struct Refused(pub String);

/// The three tools of the Forge's MCP server.
struct LoopTools {
    list: Arc<dyn Tool>,
    ack: Arc<dyn Tool>,
    bundle: Arc<dyn Tool>,
}

/// Run the preflight of `pre`: the model request to make, with the bundle in its context,
/// or the failure reply that ends the run.
pub async fn run(
    registry: &Registry,
    pre: ForgePreflight,
    count: impl Fn(&str, Outcome),
) -> Result<LlmRequest, Reply> {
    let ForgePreflight {
        mut request,
        target,
    } = pre;
    match steps(registry, &target, &count).await {
        Ok((run, bundle)) => {
            into_context(&mut request, &run, &bundle);
            tracing::info!(
                forge_run = run.run_id,
                "Forge run listed, acknowledged and read"
            );
            Ok(request)
        }
        Err(Refused(reason)) => {
            tracing::warn!(reason, "Forge run failed before the model call");
            Err(Reply {
                exchange: request.exchange.clone(),
                detail: Some(reason),
                ..Reply::failed(
                    request.reply_to.clone(),
                    FailureCode::ForgeLoopFailed,
                    FAILED_TEXT,
                )
            })
        }
    }
}

/// The loop's first three steps: the woken run and the text of its bundle.
async fn steps(
    registry: &Registry,
    target: &ForgeTarget,
    count: &impl Fn(&str, Outcome),
) -> Result<(InboxRun, String), Refused> {
    let tools = find_tools(registry)?;
    if target.is_empty() {
        return Err(Refused(
            "the wake names no run: neither issue.id nor run.id".into(),
        ));
    }
    let inbox = call(&tools.list, LIST, json!({"status": "unacked"}), count).await?;
    let run = find_woken_run(target, &inbox)?;
    call(&tools.ack, ACK, json!({"runId": run.run_id}), count).await?;
    // In a Forge the bundle is the issue's; a Forge whose inbox has no issue ids has the
    // run as its issue (as Hermes's own surface does).
    let issue = run.issue_id.clone().unwrap_or_else(|| run.run_id.clone());
    let bundle = call(&tools.bundle, BUNDLE, json!({"issueId": issue}), count).await?;
    Ok((run, bundle))
}

/// The Forge's three tools by their registered names (`agent.inbox.list` →
/// `mcp_forge_agent_inbox_list`); a Forge without one of them cannot be worked.
fn find_tools(registry: &Registry) -> Result<LoopTools, Refused> {
    let get = |tool: &str| {
        forge_tool(registry, tool).ok_or_else(|| {
            Refused(format!(
                "the Forge (MCP server {FORGE_MCP_SERVER:?}) offers no {tool} tool \
                     (not configured, not connected, or the Forge lacks it)"
            ))
        })
    };
    Ok(LoopTools {
        list: get(LIST)?,
        ack: get(ACK)?,
        bundle: get(BUNDLE)?,
    })
}

/// The Forge's tool the contract names `tool`, as registered (`agents.me` →
/// `mcp_forge_agents_me`), if the Forge is connected and offers it.
pub(crate) fn forge_tool(registry: &Registry, tool: &str) -> Option<Arc<dyn Tool>> {
    registry.get(&naming::tool_name(FORGE_MCP_SERVER, tool))
}

/// The woken run in the `agent.inbox.list` answer `inbox`.
fn find_woken_run(target: &ForgeTarget, inbox: &str) -> Result<InboxRun, Refused> {
    let parsed: Value = serde_json::from_str(inbox)
        .map_err(|_| Refused(format!("{LIST} did not answer JSON: {}", excerpt(inbox))))?;
    target.find(&parsed).ok_or_else(|| {
        Refused(format!(
            "the Forge's unacked inbox has no run of this wake (issue {}, run {})",
            target.issue_id.as_deref().unwrap_or("-"),
            target.run_id.as_deref().unwrap_or("-"),
        ))
    })
}

/// Call `tool` (the contract's `name`) with `arguments`, bounded by its deadline; `count`
/// records the outcome under the tool's registered name. Presence uses it too
/// ([`crate::forge_presence`]).
pub(crate) async fn call(
    tool: &Arc<dyn Tool>,
    name: &str,
    arguments: Value,
    count: &impl Fn(&str, Outcome),
) -> Result<String, Refused> {
    attempt(tool, arguments, count)
        .await
        .map_err(|e| refused(name, &e))
}

/// [`call`], with the tool's error as it came: whether the Forge refused the call (its
/// answer, [`ToolError::Refused`]) or did not answer.
pub(crate) async fn attempt(
    tool: &Arc<dyn Tool>,
    arguments: Value,
    count: &impl Fn(&str, Outcome),
) -> Result<String, ToolError> {
    let deadline = tool.deadline();
    let result = tokio::time::timeout(deadline, tool.call(&arguments)).await;
    let (outcome, answer) = match result {
        Ok(Ok(text)) => (Outcome::Ok, Ok(text)),
        Ok(Err(e @ ToolError::Timeout(_))) => (Outcome::Timeout, Err(e)),
        Ok(Err(e)) => (Outcome::Error, Err(e)),
        Err(_) => (
            Outcome::Timeout,
            Err(ToolError::Timeout(format!("no answer within {deadline:?}"))),
        ),
    };
    count(&tool.spec().name, outcome);
    answer
}

/// The failure of the contract's `name` as a run's reason.
pub(crate) fn refused(name: &str, e: &ToolError) -> Refused {
    Refused(format!("{name} failed: {}", excerpt(&e.to_string())))
}

/// What counts a Forge call as a tool call (`hermes_tool_calls_total`), under its
/// registered name: the preflight, presence and answers alike.
pub(crate) fn counter(ctx: &Ctx) -> impl Fn(&str, Outcome) + '_ {
    |name, outcome| {
        ctx.metrics
            .tools
            .calls
            .with_label_values(&[name, outcome.as_str()])
            .inc();
    }
}

/// At most [`MAX_EXCERPT`] bytes of `text` (cut on a character boundary).
fn excerpt(text: &str) -> &str {
    let mut end = text.len().min(MAX_EXCERPT);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// End the request's last user turn with what the preflight did and the bundle, so the
/// model reads the truth before it acts. (The bundle is the Forge's data: it goes in the
/// user turn with the wake, never in the system prompt.)
fn into_context(request: &mut LlmRequest, run: &InboxRun, bundle: &str) {
    let note = format!(
        "\n\nHermes listed your unacked runs, acknowledged run {} and read the context bundle \
         of issue {}:\n{bundle}",
        run.run_id,
        run.issue_id.as_deref().unwrap_or(&run.run_id),
    );
    match request
        .messages
        .iter_mut()
        .rev()
        .find(|m| m.role == Role::User)
    {
        Some(turn) => turn.content.get_or_insert_with(String::new).push_str(&note),
        None => request
            .messages
            .push(hermes_types::model::ChatMessage::text(
                Role::User,
                note.trim_start(),
            )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    use hermes_types::model::{ChatMessage, ReplyTo, Tier, ToolSpec};

    use crate::registry::ToolFuture;

    /// The calls the fake Forge's tools received: (tool, arguments).
    type Calls = Arc<Mutex<Vec<(String, Value)>>>;

    /// A Forge tool that records its calls and answers `answer`.
    struct Fake {
        name: &'static str,
        answer: Result<String, String>,
        calls: Calls,
    }

    impl Tool for Fake {
        fn spec(&self) -> ToolSpec {
            ToolSpec {
                name: naming::tool_name(FORGE_MCP_SERVER, self.name),
                description: "d".into(),
                parameters: json!({"type": "object"}),
                toolset: naming::toolset(FORGE_MCP_SERVER),
            }
        }

        fn call<'a>(&'a self, arguments: &'a Value) -> ToolFuture<'a> {
            self.calls
                .lock()
                .unwrap()
                .push((self.name.to_string(), arguments.clone()));
            let answer = self.answer.clone().map_err(ToolError::Failed);
            Box::pin(async move { answer })
        }
    }

    fn forge(tools: &[(&'static str, Result<String, String>)]) -> (Registry, Calls) {
        let calls = Arc::new(Mutex::new(Vec::new()));
        let registry = tools.iter().fold(Registry::default(), |r, (name, answer)| {
            r.with(Fake {
                name,
                answer: answer.clone(),
                calls: calls.clone(),
            })
        });
        (registry, calls)
    }

    fn preflight() -> ForgePreflight {
        let to = ReplyTo {
            platform: hermes_types::model::Platform::Forge,
            chat_id: "c".into(),
            callback_url: None,
            quote: None,
            interaction: None,
        };
        let messages = vec![
            ChatMessage::text(Role::System, "s"),
            ChatMessage::text(Role::User, "Forge wake AGENT_ASSIGNED:\n{}"),
        ];
        ForgePreflight {
            request: LlmRequest::new(to, Tier::Free, Vec::new(), messages),
            target: ForgeTarget {
                issue_id: Some("iss_1".into()),
                run_id: None,
                thread_id: None,
            },
        }
    }

    fn inbox() -> Result<String, String> {
        Ok(json!({"runs": [{"runId": "run_0", "issueId": "iss_0"}, {"runId": "run_1", "issueId": "iss_1"}]}).to_string())
    }

    #[tokio::test]
    async fn the_loop_lists_acks_and_reads_before_the_model_and_the_bundle_ends_the_user_turn() {
        let (registry, calls) = forge(&[
            (LIST, inbox()),
            (ACK, Ok("{\"acked\":true}".into())),
            (BUNDLE, Ok("{\"issue\":\"the truth\"}".into())),
        ]);
        let request = run(&registry, preflight(), |_, _| {}).await.unwrap();
        let calls = calls.lock().unwrap().clone();
        assert_eq!(
            calls,
            [
                (LIST.to_string(), json!({"status": "unacked"})),
                (ACK.to_string(), json!({"runId": "run_1"})),
                (BUNDLE.to_string(), json!({"issueId": "iss_1"})),
            ]
        );
        let turn = request.messages[1].content.as_deref().unwrap();
        assert!(turn.starts_with("Forge wake AGENT_ASSIGNED:\n{}"), "{turn}");
        assert!(turn.ends_with("{\"issue\":\"the truth\"}"), "{turn}");
        assert!(turn.contains("acknowledged run run_1"), "{turn}");
    }

    #[tokio::test]
    async fn a_missing_tool_or_run_or_a_failed_call_fails_the_run_with_its_reason() {
        let reason = |r: Reply| r.detail.unwrap();
        // No bundle tool: nothing is called at all.
        let (registry, calls) = forge(&[(LIST, inbox()), (ACK, Ok("{}".into()))]);
        let failed = run(&registry, preflight(), |_, _| {}).await.unwrap_err();
        assert!(matches!(
            failed.outcome,
            hermes_types::model::Outcome::Failed {
                code: FailureCode::ForgeLoopFailed,
                ..
            }
        ));
        assert!(reason(failed).contains("offers no agent.context.bundle"));
        assert!(calls.lock().unwrap().is_empty());
        // The inbox lacks the woken run: listed, nothing acknowledged.
        let (registry, calls) = forge(&[
            (LIST, Ok("{\"runs\":[]}".into())),
            (ACK, Ok("{}".into())),
            (BUNDLE, Ok("{}".into())),
        ]);
        let failed = run(&registry, preflight(), |_, _| {}).await.unwrap_err();
        assert!(reason(failed).contains("no run of this wake (issue iss_1"));
        assert_eq!(calls.lock().unwrap().len(), 1);
        // The ack is refused: no bundle read.
        let (registry, calls) = forge(&[
            (LIST, inbox()),
            (ACK, Err("RUN_NOT_FOUND".into())),
            (BUNDLE, Ok("{}".into())),
        ]);
        let failed = run(&registry, preflight(), |_, _| {}).await.unwrap_err();
        assert_eq!(reason(failed), "agent.inbox.ack failed: RUN_NOT_FOUND");
        assert_eq!(calls.lock().unwrap().len(), 2);
    }
}
