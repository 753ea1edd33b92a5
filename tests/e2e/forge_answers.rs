//! Answers stream to the Forge (docs/agents.md, "Answers stream to the Forge", contract item
//! 12), against the fake Forge written from the contract's text: a chat run's answer goes
//! `chat.startDraft`, `chat.appendDraftChunk` as the model streams, `chat.finalizeDraft` with
//! the whole answer; a Forge without drafts gets `chat.appendMessage`; a slow Forge gets
//! fewer, larger chunks and the whole answer still; and the whole answer reaches its draft
//! when the tools replica that opened it is killed before the model answers.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::response::Response;
use axum::routing::post;
use futures_util::stream;
use hermes::Service;
use hermes_testkit::{Fleet, TestEnv, eventually};
use serde_json::{Value, json};
use wiremock::MockServer;

use crate::fake_forge::{CONTRACT_TOOLS, Call, FakeForge};
use crate::forge_agent::{closed, contract_wake, forge_agent_env, forge_tools_published};
use crate::forge_wakes::wake;

/// When the model may send piece `i` of its answer (`i` = the number of pieces, for the
/// end of the stream): paced on what the fake Forge has seen, never on the clock.
#[derive(Clone, Copy)]
enum Pace {
    /// Every piece at once.
    Free,
    /// Piece `i` once the Forge has received `i` draft chunks: each piece is relayed alone.
    ChunkByChunk,
    /// The rest of the answer once the Forge has received its first draft chunk, which the
    /// slow Forge then holds: the rest arrives while that call is in flight.
    AfterTheFirstChunk,
    /// Nothing until the test sets the flag.
    Held(&'static AtomicBool),
}

impl Pace {
    /// Whether piece `i` may go, the Forge having received `chunks` draft chunks.
    fn allows(self, i: usize, chunks: usize) -> bool {
        match self {
            Pace::Free => true,
            Pace::ChunkByChunk => chunks >= i,
            Pace::AfterTheFirstChunk => chunks >= usize::from(i > 0),
            Pace::Held(released) => released.load(Ordering::SeqCst),
        }
    }
}

/// A model server that streams `pieces` as one answer (an OpenAI-compatible
/// `POST /v1/chat/completions` with `stream: true`), paced by `pace` on `forge`; its base URL.
async fn streaming_model(pieces: &'static [&'static str], forge: &FakeForge, pace: Pace) -> String {
    let forge = forge.clone();
    let app = Router::new().route(
        "/v1/chat/completions",
        post(move || async move {
            let frames = pieces
                .iter()
                .map(|p| json!({"id": "c1", "object": "chat.completion.chunk", "model": "gpt-test", "choices": [{"index": 0, "delta": {"content": p}, "finish_reason": null}]}))
                .chain([json!({"id": "c1", "object": "chat.completion.chunk", "model": "gpt-test", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 10, "completion_tokens": 4, "total_tokens": 14}})])
                .map(|v| format!("data: {v}\n\n"))
                .chain(["data: [DONE]\n\n".to_string()])
                .enumerate()
                .collect::<Vec<_>>();
            let body = stream::unfold(frames.into_iter(), move |mut rest| {
                let forge = forge.clone();
                async move {
                    let (i, frame) = rest.next()?;
                    let i = i.min(pieces.len());
                    eventually(Duration::from_secs(30), "the model's pace", || {
                        let seen = args_of(&forge.run_calls(), "chat.appendDraftChunk").len();
                        async move { pace.allows(i, seen).then_some(()) }
                    })
                    .await;
                    Some((Ok::<_, std::io::Error>(frame), rest))
                }
            });
            Response::builder()
                .header("content-type", "text/event-stream")
                .body(Body::from_stream(body))
                .unwrap()
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}")
}

/// A fleet answering `forge` (with `tools` tools) with the streaming model at `model`; the
/// Forge's server is kept with it.
async fn fleet(forge: &FakeForge, tools: usize, model: &str) -> (TestEnv, Fleet, MockServer) {
    let forge_server = forge.serve().await;
    let env = forge_agent_env(&forge_server, model).await;
    let fleet = env.start(&Service::ALL).await;
    forge_tools_published(&env, tools).await;
    (env, fleet, forge_server)
}

/// Wake `victor` in a chat thread for the inbox run on `issue`; the run's closed status.
async fn chat_run(env: &TestEnv, fleet: &Fleet, issue: &str) -> String {
    let taken = wake(
        fleet,
        &contract_wake("CHAT_MESSAGE_POSTED", issue),
        &format!("dlv_{issue}"),
    )
    .await;
    closed(env, taken).await.0
}

/// Wait until the Forge saw a call of `tool`; every call but presence then.
async fn until_called(forge: &FakeForge, tool: &str) -> Vec<Call> {
    eventually(Duration::from_secs(30), tool, || async {
        let calls = forge.run_calls();
        calls.iter().any(|c| c.tool == tool).then_some(calls)
    })
    .await
}

/// The calls of `tool` among `calls`, by their arguments.
fn args_of(calls: &[Call], tool: &str) -> Vec<Value> {
    calls
        .iter()
        .filter(|c| c.tool == tool)
        .map(|c| c.arguments.clone())
        .collect()
}

/// Wait until one `forge_answers` row matches `filter`.
async fn one_row(env: &TestEnv, filter: &str) {
    let (db, sql) = (
        env.db(),
        format!("SELECT count(*) FROM forge_answers WHERE {filter}"),
    );
    eventually(Duration::from_secs(30), filter, || async {
        (hermes_testkit::count(&db, &sql, &[]).await == 1).then_some(())
    })
    .await;
}

const ANSWER: [&str; 4] = ["Hello", " from", " Hermes", "."];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item_12_a_chat_answer_streams_as_a_draft_and_finalizes_with_the_whole_body() {
    let forge = FakeForge::new();
    forge.assign("run_1", "iss_1");
    let model = streaming_model(&ANSWER, &forge, Pace::ChunkByChunk).await;
    let (env, fleet, _forge) = fleet(&forge, 9, &model).await;
    assert_eq!(chat_run(&env, &fleet, "iss_1").await, "completed");
    let calls = until_called(&forge, "chat.finalizeDraft").await;
    let tools: Vec<&str> = calls.iter().map(|c| c.tool.as_str()).collect();
    assert_eq!(tools[..3], CONTRACT_TOOLS[..3], "the preflight first");
    assert_eq!(tools[3], "chat.startDraft");
    assert_eq!(calls[3].arguments, json!({"threadId": "thr_iss_1"}));
    let chunks = args_of(&calls, "chat.appendDraftChunk");
    // Each piece went only once the one before it had reached the Forge: one chunk each,
    // streamed as they came.
    assert_eq!(chunks.len(), ANSWER.len(), "{chunks:?}");
    let streamed: String = chunks
        .iter()
        .map(|c| {
            assert_eq!(c["draftId"], "drf_thr_iss_1");
            assert_eq!(c["threadId"], "thr_iss_1");
            c["delta"].as_str().unwrap().to_string()
        })
        .collect();
    assert!("Hello from Hermes.".starts_with(&streamed), "{streamed:?}");
    assert_eq!(
        args_of(&calls, "chat.finalizeDraft"),
        [
            json!({"threadId": "thr_iss_1", "draftId": "drf_thr_iss_1", "body": "Hello from Hermes."})
        ]
    );
    assert_eq!(tools.last(), Some(&"chat.finalizeDraft"));
    assert!(args_of(&calls, "chat.appendMessage").is_empty());
    eventually(
        Duration::from_secs(30),
        "the answer counted posted",
        || async {
            let metrics = fleet.metrics().await;
            let posted = r#"hermes_forge_answers_total{outcome="posted"}"#;
            (hermes_testkit::metric(&metrics, posted) == Some(1.0)).then_some(())
        },
    )
    .await;
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item_12_a_forge_without_drafts_gets_the_whole_answer_by_append_message() {
    let forge = FakeForge::with_tools(&[
        "agent.inbox.list",
        "agent.inbox.ack",
        "agent.context.bundle",
        "chat.appendMessage",
    ]);
    forge.assign("run_2", "iss_2");
    let model = streaming_model(&ANSWER, &forge, Pace::Free).await;
    let (env, fleet, _forge) = fleet(&forge, 4, &model).await;
    assert_eq!(chat_run(&env, &fleet, "iss_2").await, "completed");
    let calls = until_called(&forge, "chat.appendMessage").await;
    let tools: Vec<&str> = calls.iter().map(|c| c.tool.as_str()).collect();
    assert_eq!(tools[..3], CONTRACT_TOOLS[..3], "the preflight first");
    assert_eq!(
        tools[3..],
        ["chat.appendMessage"],
        "then the whole answer, once"
    );
    assert_eq!(
        calls[3].arguments,
        json!({"threadId": "thr_iss_2", "body": "Hello from Hermes."})
    );
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item_12_a_slow_forge_gets_fewer_larger_chunks_and_the_whole_answer() {
    const PIECES: [&str; 8] = [
        "One", " two", " three", " four", " five", " six", " seven", ".",
    ];
    // Each chunk and the finalization take a second; the rest of the answer streams while the
    // first chunk is held.
    let forge = FakeForge::new().slow_drafts(Duration::from_secs(1));
    forge.assign("run_3", "iss_3");
    let model = streaming_model(&PIECES, &forge, Pace::AfterTheFirstChunk).await;
    let (env, fleet, _forge) = fleet(&forge, 9, &model).await;
    assert_eq!(chat_run(&env, &fleet, "iss_3").await, "completed");
    let calls = until_called(&forge, "chat.finalizeDraft").await;
    let chunks = args_of(&calls, "chat.appendDraftChunk");
    assert!(
        !chunks.is_empty() && chunks.len() < PIECES.len() / 2,
        "coalesced: {chunks:?}"
    );
    let whole = PIECES.concat();
    let streamed: String = chunks
        .iter()
        .map(|c| c["delta"].as_str().unwrap().to_string())
        .collect();
    assert!(whole.starts_with(&streamed), "{streamed:?}");
    assert_eq!(
        args_of(&calls, "chat.finalizeDraft")[0]["body"],
        json!(whole),
        "the final body is the whole answer"
    );
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item_12_the_whole_answer_reaches_its_draft_when_the_replica_that_opened_it_dies() {
    static RELEASED: AtomicBool = AtomicBool::new(false);
    let forge = FakeForge::new();
    forge.assign("run_4", "iss_4");
    let model = streaming_model(&ANSWER, &forge, Pace::Held(&RELEASED)).await;
    let forge_server = forge.serve().await;
    let env = forge_agent_env(&forge_server, &model).await;
    let fleet = env
        .start(&[
            Service::Ingest,
            Service::Router,
            Service::Llm,
            Service::Delivery,
        ])
        .await;
    let first = env.start_killable(&[Service::Tools]).await;
    forge_tools_published(&env, 9).await;
    let taken = wake(
        &fleet,
        &contract_wake("CHAT_MESSAGE_POSTED", "iss_4"),
        "dlv_iss_4",
    )
    .await;

    // The preflight opened the draft and committed where the answer is owed; the model has
    // not answered. The replica dies there, as a pod does.
    one_row(&env, "draft_id = 'drf_thr_iss_4'").await;
    first.kill();
    let second = env.start(&[Service::Tools]).await;
    RELEASED.store(true, Ordering::SeqCst);

    assert_eq!(closed(&env, taken).await.0, "completed");
    let calls = until_called(&forge, "chat.finalizeDraft").await;
    assert_eq!(args_of(&calls, "chat.startDraft").len(), 1, "one draft");
    assert_eq!(
        args_of(&calls, "chat.finalizeDraft"),
        [
            json!({"threadId": "thr_iss_4", "draftId": "drf_thr_iss_4", "body": "Hello from Hermes."})
        ],
        "the whole answer, to the draft the dead replica opened"
    );
    assert!(args_of(&calls, "chat.appendMessage").is_empty());
    one_row(&env, "posted_at IS NOT NULL").await;
    second.stop().await.unwrap();
    fleet.stop().await.unwrap();
}
