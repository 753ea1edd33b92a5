//! What each A2A method does with the runs (docs/a2a.md). A send records the task (its
//! workspace, context, key and text) and hands the run to the broker as `POST /v1/runs`
//! does, with the context's earlier turns as its history, the workspace's role as its
//! instructions, the workspace's model chosen when it is configured, and the workspace's
//! provider secrets. A get reads the task's run row; a cancel is the run's stop
//! ([`crate::runs::ask_to_stop`]), after which the task is shown as it stands a few seconds
//! later (`canceled` once the run reached its safe point).

use std::time::Duration;

use axum::http::HeaderMap;
use axum::response::Response;
use hermes_cache::run_events::{WaiterGuard, Wake};
use hermes_db::a2a_tasks::{self, NewTask};
use hermes_db::runs;
use hermes_db::workspace_api::Profile;
use hermes_db::workspaces::Workspace;
use hermes_runtime::http::ApiErrorCode;
use hermes_types::ids::RunId;
use hermes_types::model::{ApiSession, ChatMessage, Inbound, Role};
use hermes_types::trace::TraceParent;
use serde_json::{Value, json};

use super::message::{self, Incoming};
use super::rpc::{Code, RpcError, Version};
use super::stream::Updates;
use super::task::Task;
use crate::AppState;
use crate::rest::Caller;

/// Most earlier turns of a context a new message is answered with (its latest ones).
const MAX_CONTEXT_TURNS: i64 = 20;

/// How long a cancel waits for the run to reach its safe point before answering.
const CANCEL_WAIT: Duration = Duration::from_secs(10);

/// Who calls which workspace, in which version.
pub struct Context<'a> {
    pub app: &'a AppState,
    pub caller: &'a Caller,
    pub headers: &'a HeaderMap,
    pub workspace: &'a Workspace,
    pub profile: &'a Profile,
    pub version: Version,
}

fn unavailable<E>(_: E) -> RpcError {
    RpcError::internal("cannot reach the task store right now; retry shortly")
}

fn not_found(id: &str) -> RpcError {
    RpcError::new(
        Code::TaskNotFound,
        format!("no task {id} in this workspace"),
    )
}

/// `message/send`, `SendMessage`: the task, once ended unless the caller asked not to wait
/// (a wait longer than `HERMES_RUN_TIMEOUT_SECS` answers the task still `working`).
pub async fn send(cx: &Context<'_>, params: &Value) -> Result<Value, RpcError> {
    let p = message::send_params(cx.version, params)?;
    let (task, guard) = start(cx, &p.message).await?;
    let task = if p.blocking {
        let app = cx.app;
        let timeout = app.ctx.config.ingest.run_timeout;
        let outcome = crate::wait::outcome(&app.ctx, &app.events, guard, task.id, timeout).await;
        task.ended(outcome)
    } else {
        task
    };
    let shown = task.render(cx.version, p.history_length);
    Ok(match cx.version {
        Version::V03 => shown,
        Version::V10 => json!({ "task": shown }),
    })
}

/// `message/stream`, `SendStreamingMessage`: the task's updates as server-sent events.
pub async fn stream(cx: &Context<'_>, id: &Value, params: &Value) -> Result<Response, RpcError> {
    let p = message::send_params(cx.version, params)?;
    let (task, guard) = start(cx, &p.message).await?;
    let run = task.id;
    let updates = Updates::new(task, cx.version, id.clone());
    Ok(crate::stream::follow(
        &cx.app.ctx,
        &cx.app.events,
        guard,
        run,
        updates,
    ))
}

/// `tasks/get`, `GetTask`.
pub async fn get(cx: &Context<'_>, params: &Value) -> Result<Value, RpcError> {
    let q = message::task_query(params)?;
    let task = find(cx, &q.id).await?.ok_or_else(|| not_found(&q.id))?;
    Ok(task.render(cx.version, q.history_length))
}

/// `tasks/cancel`, `CancelTask`: the run's stop.
pub async fn cancel(cx: &Context<'_>, params: &Value) -> Result<Value, RpcError> {
    let q = message::task_query(params)?;
    let task = find(cx, &q.id).await?.ok_or_else(|| not_found(&q.id))?;
    if task.state.is_terminal() {
        return Err(RpcError::new(
            Code::TaskNotCancelable,
            format!("the task already ended: {:?}", task.state),
        ));
    }
    // Registered before the stop, so its end cannot slip past the wait.
    let guard = cx.app.waiters.register(task.id, Wake::Every);
    if let Err(e) = crate::runs::ask_to_stop(cx.app, cx.caller, &q.id).await {
        return Err(match e.code {
            ApiErrorCode::NotFound => not_found(&q.id),
            // Not routed yet (a moment), or ended meanwhile.
            ApiErrorCode::RunQueued | ApiErrorCode::RunFinished => {
                RpcError::new(Code::TaskNotCancelable, e.message)
            }
            _ => RpcError::internal(e.message),
        });
    }
    let app = cx.app;
    let outcome = crate::wait::outcome(&app.ctx, &app.events, guard, task.id, CANCEL_WAIT).await;
    Ok(task.ended(outcome).render(cx.version, q.history_length))
}

/// The task `id` of this workspace as the caller may see it, read from its run.
async fn find(cx: &Context<'_>, id: &str) -> Result<Option<Task>, RpcError> {
    let Ok(run) = id.parse::<RunId>() else {
        return Ok(None);
    };
    let client = cx.app.ctx.db.get().await.map_err(unavailable)?;
    let Some(stored) = a2a_tasks::get(&client, cx.workspace.id, run, cx.caller.key_id())
        .await
        .map_err(unavailable)?
    else {
        return Ok(None);
    };
    let row = runs::get(&client, run).await.map_err(unavailable)?;
    let mut task = Task::submitted(run, stored.context_id, stored.message_id, stored.input);
    task.at = stored.created_at;
    Ok(Some(task.read(row.as_ref())))
}

/// The conversation a message of `context` is answered with (the workspace's role, the
/// context's earlier turns of this caller, the message) and the session it goes on: the
/// context's, opened by its first run.
async fn conversation(
    cx: &Context<'_>,
    client: &hermes_db::Client,
    context: &str,
    text: &str,
) -> Result<(Vec<ChatMessage>, ApiSession), RpcError> {
    let turns = a2a_tasks::context_turns(
        client,
        cx.workspace.id,
        context,
        cx.caller.key_id(),
        MAX_CONTEXT_TURNS,
    )
    .await
    .map_err(unavailable)?;
    let mut messages: Vec<ChatMessage> = cx
        .profile
        .role
        .iter()
        .map(|r| ChatMessage::text(Role::System, r.clone()))
        .collect();
    let session = ApiSession::continuing(turns.iter().rev().find_map(|t| t.session));
    for turn in turns {
        messages.push(ChatMessage::text(Role::User, turn.input));
        if let Some(answer) = turn.answer {
            messages.push(ChatMessage::text(Role::Assistant, answer));
        }
    }
    messages.push(ChatMessage::text(Role::User, text));
    Ok((messages, session))
}

/// Record a task for `m` and hand its run to the broker; the waiter for its end was
/// registered before, so a fast answer cannot slip past it.
async fn start(cx: &Context<'_>, m: &Incoming) -> Result<(Task, WaiterGuard), RpcError> {
    if let Some(id) = &m.task_id {
        // A task here ends with its answer: none takes more input.
        return Err(match find(cx, id).await? {
            Some(_) => RpcError::new(
                Code::UnsupportedOperation,
                format!(
                    "task {id} takes no more input: send without taskId, in its contextId to continue the conversation"
                ),
            ),
            None => not_found(id),
        });
    }
    let app = cx.app;
    let context_id = m
        .context_id
        .clone()
        .unwrap_or_else(|| uuid::Uuid::now_v7().to_string());
    let client = app.ctx.db.get().await.map_err(unavailable)?;
    let (conversation, session) = conversation(cx, &client, &context_id, &m.text).await?;
    let run = RunId::new();
    a2a_tasks::insert(
        &client,
        &NewTask {
            run_id: run,
            workspace_id: cx.workspace.id,
            api_key_id: cx.caller.key_id(),
            context_id: &context_id,
            message_id: &m.message_id,
            input: &m.text,
        },
    )
    .await
    .map_err(unavailable)?;
    // The workspace's model goes first when the install configures it; otherwise the API
    // tier's chain answers (docs/a2a.md).
    let chosen_model = cx
        .profile
        .model
        .as_deref()
        .and_then(|name| crate::model_choice::choose(&app.ctx.config.models, name).ok())
        .flatten();
    let inbound = Inbound {
        conversation,
        requested_model: cx.profile.model.clone(),
        chosen_model,
        api_key_id: cx.caller.key_id(),
        // Streamed onto the run's events, which the streaming methods follow.
        stream: true,
        // A context is one session, as operators see conversations.
        api_session: Some(session),
        workspace: Some(cx.workspace.id),
        ..Inbound::of(crate::chat::api_event(
            "a2a",
            run,
            Some(m.text.clone()),
            Some(json!({"a2a": {
                "workspace": cx.workspace.id.to_string(),
                "context_id": context_id,
                "message_id": m.message_id,
            }})),
        ))
    };
    let traceparent =
        crate::webhooks::traceparent(cx.headers).unwrap_or_else(TraceParent::generate);
    let Some(guard) = crate::chat::hand_over(app, run, &traceparent, &inbound).await else {
        // No run exists: neither may the task.
        if let Err(e) = a2a_tasks::forget(&client, run).await {
            tracing::warn!(%run, error = %e, "cannot forget the task of an unqueued run");
        }
        return Err(RpcError::internal(
            "the task could not be queued; retry shortly",
        ));
    };
    tracing::info!(%run, workspace = %cx.workspace.id, version = cx.version.as_str(), "a2a task accepted");
    let task = Task::submitted(run, context_id, m.message_id.clone(), m.text.clone());
    Ok((task, guard))
}
