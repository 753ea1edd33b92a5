//! The operator MCP server's events (docs/operator-mcp.md, events): `events_wait` woken by
//! an inbound Telegram message, and a client that reads part of the log through one
//! replica and resumes with its cursor on another, across a restart of the first, getting
//! every event exactly once, in log order.
//!
//! The tools are called on in-process operator tool sets, one per "replica": each has its
//! own context (pool, event hub and `LISTEN` connection), and nothing but the cursor
//! passes between them, as between two ingest replicas behind a load balancer.

use std::collections::HashSet;
use std::time::Duration;

use hermes::Service;
use hermes_mcp_server::{CallError, ToolSet};
use hermes_operator::{Caller, Operator, Transport};
use hermes_runtime::Ctx;
use hermes_telemetry::Metrics;
use hermes_testkit::{TestEnv, eventually, openai_fake};
use hermes_types::model::Platform;
use serde_json::{Value, json};

use crate::agent_mcp::{TG_SECRET, env_with, peer};
use hermes_testkit::telegram_text;

/// An operator tool set with a context of its own: one replica's view.
pub(crate) struct Op(Operator);

impl Op {
    pub(crate) async fn new(env: &TestEnv) -> Self {
        let ctx = Ctx::connect(env.config(), Metrics::new()).await.unwrap();
        Self(Operator::new(ctx, Caller::OperatorKey, Transport::Http))
    }

    /// The result of `tool`, or the refusal's error object.
    pub(crate) async fn call(&self, tool: &str, args: Value) -> Result<Value, Value> {
        match self.0.call(tool, args).await {
            Ok(v) => Ok(v),
            Err(CallError::Refused(r)) => {
                let mut e = json!({ "code": r.code, "message": r.message });
                for (k, v) in r.details {
                    e[k] = v;
                }
                Err(e)
            }
            Err(CallError::UnknownTool(t)) => panic!("no tool {t}"),
        }
    }

    pub(crate) async fn ok(&self, tool: &str, args: Value) -> Value {
        self.call(tool, args)
            .await
            .unwrap_or_else(|e| panic!("{tool} refused: {e}"))
    }

    /// The error object of a call that must be refused.
    pub(crate) async fn refused(&self, tool: &str, args: Value) -> Value {
        match self.call(tool, args).await {
            Ok(v) => panic!("{tool} answered {v}"),
            Err(e) => e,
        }
    }

    /// The head of the log: where a client that wants only what comes next starts.
    pub(crate) async fn latest(&self) -> String {
        let page = self
            .ok("events_poll", json!({ "after_cursor": "latest" }))
            .await;
        assert_eq!(page["events"], json!([]));
        page["next_cursor"].as_str().unwrap().to_string()
    }

    /// Stop this replica's context (its hub's listener with it).
    fn stop(self) {
        self.0.ctx.stop.cancel();
    }
}

/// A fleet whose model answers "noted" and whose Telegram sends reach `peer`.
async fn fleet_env(peer: &wiremock::MockServer, model: &wiremock::MockServer) -> TestEnv {
    let mut env = env_with(peer).await;
    env.openai_mock(&model.uri())
        .set("HERMES_INBOUND_BURST", "1000")
        .set("HERMES_INBOUND_PER_MINUTE", "6000");
    env
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_wait_is_woken_by_an_inbound_telegram_message() {
    let (peer, model) = (peer().await, openai_fake("noted").await);
    let env = fleet_env(&peer, &model).await;
    env.user(Platform::Telegram, "5151", 5).await;
    let fleet = env.start(&Service::ALL).await;
    let op = Op::new(&env).await;

    // The wait starts from the head of the log read before the message is sent, so it
    // returns the message whether it is already waiting when the message commits or not;
    // only a wake-up that never comes makes it end empty, at its timeout.
    let from = op.latest().await;
    let waiting = tokio::spawn(async move {
        let page = op
            .ok(
                "events_wait",
                json!({ "after_cursor": from, "kinds": ["message"], "timeout_ms": 60_000 }),
            )
            .await;
        (op, page)
    });
    fleet
        .telegram_update(TG_SECRET, &telegram_text(5151, 1, "is anyone there?"))
        .await;
    let (op, page) = waiting.await.unwrap();
    let event = &page["events"][0];
    assert_eq!(event["kind"], "message", "{page}");
    assert_eq!(event["direction"], "inbound");
    assert_eq!(event["text"], "is anyone there?");
    assert_eq!(event["platform"], "telegram");
    assert_eq!(event["chat_id"], "5151");
    assert!(event["conversation"].is_string() && event["run_id"].is_string());
    // The page is not full, so the next read starts after every event shown by then, of any
    // kind: at the message, or past the run's later events when they had already settled.
    assert!(
        position(&page["next_cursor"]) >= position(&event["cursor"]),
        "{page}"
    );

    // Nothing after it but the answer: a wait for another inbound message times out empty,
    // keeping a cursor past what it skipped.
    let quiet = op
        .ok(
            "events_wait",
            json!({ "after_cursor": page["next_cursor"], "kinds": ["delivery_failed"],
                    "timeout_ms": 1 }),
        )
        .await;
    assert_eq!(quiet["events"], json!([]));
    assert!(quiet["next_cursor"].is_string());
    for bad in [json!("12.x"), json!(-1), json!(1.5), json!(true)] {
        let refused = op
            .refused("events_wait", json!({ "after_cursor": bad }))
            .await;
        assert_eq!(refused["code"], "INVALID_ARGUMENT", "{bad}");
    }
    op.stop();
    fleet.stop().await.unwrap();
}

/// Every `message` event of the log, as (cursor, run, direction), read straight from it.
async fn log_of(env: &TestEnv) -> Vec<(String, Value, Value)> {
    let c = env.db().get().await.unwrap();
    let page = hermes_db::events::after(
        &c,
        hermes_db::events::Cursor::START,
        &hermes_db::events::Filter::default(),
        1000,
    )
    .await
    .unwrap();
    page.events
        .iter()
        .map(|e| {
            (
                e.cursor.to_string(),
                json!(e.run_id),
                e.body["direction"].clone(),
            )
        })
        .collect()
}

/// Read pages of `limit` through `op` from `cursor` `pages` times, appending to `seen`.
async fn read(op: &Op, cursor: &mut String, pages: usize, seen: &mut Vec<(String, Value, Value)>) {
    for _ in 0..pages {
        let page = op
            .ok(
                "events_poll",
                json!({ "after_cursor": cursor, "limit": 7, "kinds": ["message"] }),
            )
            .await;
        for e in page["events"].as_array().unwrap() {
            seen.push((
                e["cursor"].as_str().unwrap().to_string(),
                e["run_id"].clone(),
                e["direction"].clone(),
            ));
        }
        *cursor = page["next_cursor"].as_str().unwrap().to_string();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cursor_resumed_on_another_replica_yields_each_event_once() {
    const N: usize = 20;
    let (peer, model) = (peer().await, openai_fake("noted").await);
    let env = fleet_env(&peer, &model).await;
    // One chat each: answers to one chat go at most once a second
    // (`HERMES_DELIVERY_CHAT_PER_SEC`), and this test is about the events, not the pacing.
    for i in 0..N as i64 {
        env.user(Platform::Telegram, &(5252 + i).to_string(), 100)
            .await;
    }
    let fleet = env.start(&Service::ALL).await;
    let one = Op::new(&env).await;
    let two = Op::new(&env).await;
    for i in 0..N as i64 {
        fleet
            .telegram_update(
                TG_SECRET,
                &telegram_text(5252 + i, 100 + i, &format!("message {i}")),
            )
            .await;
    }
    // Every message in and its answer out: 2N events, all settled.
    let log = eventually(Duration::from_secs(60), "2N message events", || async {
        let log = log_of(&env).await;
        (log.len() == 2 * N).then_some(log)
    })
    .await;

    let mut cursor = "0".to_string();
    let mut seen = Vec::new();
    read(&one, &mut cursor, 2, &mut seen).await;
    read(&two, &mut cursor, 2, &mut seen).await;
    // Replica one restarts: a new context, a new pool and listener; the cursor still holds.
    one.stop();
    let one = Op::new(&env).await;
    read(&one, &mut cursor, 1, &mut seen).await;
    read(&two, &mut cursor, 3, &mut seen).await;
    // The end of the log: a wait on the other replica times out empty, in place.
    let end = two
        .ok(
            "events_wait",
            json!({ "after_cursor": cursor, "kinds": ["message"], "timeout_ms": 1 }),
        )
        .await;
    assert_eq!(end["events"], json!([]));
    assert_eq!(end["next_cursor"], cursor.as_str());

    let unique: HashSet<&String> = seen.iter().map(|(c, ..)| c).collect();
    assert_eq!(unique.len(), seen.len(), "no event twice");
    assert_eq!(seen, log, "every event once, in log order");
    let inbound = seen.iter().filter(|(.., d)| d == "inbound").count();
    assert_eq!(inbound, N);
    one.stop();
    two.stop();
    fleet.stop().await.unwrap();
}

/// A `tx.id` cursor as the pair it orders by.
fn position(cursor: &Value) -> (i64, i64) {
    let text = cursor.as_str().expect("a cursor is a string");
    let (tx, id) = text.split_once('.').expect("a cursor is tx.id");
    (tx.parse().unwrap(), id.parse().unwrap())
}

/// What names an event whatever its cursor's form: its run and direction.
fn identities(events: &Value) -> Vec<(Value, Value)> {
    events
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["run_id"].clone(), e["direction"].clone()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn integer_cursors_read_the_log_and_every_cursor_works_in_either_form() {
    const N: usize = 4;
    let (peer, model) = (peer().await, openai_fake("noted").await);
    let env = fleet_env(&peer, &model).await;
    env.user(Platform::Telegram, "5353", 100).await;
    let fleet = env.start(&Service::ALL).await;
    for i in 0..N {
        fleet
            .telegram_update(
                TG_SECRET,
                &telegram_text(5353, 200 + i as i64, &format!("m{i}")),
            )
            .await;
    }
    eventually(Duration::from_secs(60), "2N message events", || async {
        (log_of(&env).await.len() == 2 * N).then_some(())
    })
    .await;
    let op = Op::new(&env).await;
    let poll = |after: Value| {
        let op = &op;
        async move {
            op.ok(
                "events_poll",
                json!({ "after_cursor": after, "kinds": ["message"] }),
            )
            .await
        }
    };

    // As the MCP document writes it: after_cursor=0, the whole log, integer cursors back.
    let all = poll(json!(0)).await;
    let events = all["events"].as_array().unwrap().clone();
    assert_eq!(events.len(), 2 * N, "{all}");
    assert!(events.iter().all(|e| e["cursor"].is_i64()), "{all}");
    assert!(all["next_cursor"].is_i64());
    // Today's text form reads the same log, its cursors naming the same events.
    let text = poll(json!("0")).await;
    assert_eq!(identities(&text["events"]), identities(&all["events"]));
    for (t, i) in text["events"].as_array().unwrap().iter().zip(&events) {
        let (_, id) = t["cursor"].as_str().unwrap().split_once('.').unwrap();
        assert_eq!(id.parse::<i64>().unwrap(), i["cursor"].as_i64().unwrap());
    }

    // Every cursor handed out resumes at the same place in either form.
    let rest = identities(&json!(events[3..]));
    let k = events[2]["cursor"].as_i64().unwrap();
    let t = text["events"][2]["cursor"].as_str().unwrap().to_string();
    for after in [json!(k), json!(k.to_string()), json!(t)] {
        let page = poll(after.clone()).await;
        assert_eq!(identities(&page["events"]), rest, "after {after}");
    }

    // The end of the log, by the integer next_cursor: a wait times out empty, in place.
    let end = op
        .ok(
            "events_wait",
            json!({ "after_cursor": all["next_cursor"], "kinds": ["message"], "timeout_ms": 1 }),
        )
        .await;
    assert_eq!(end["events"], json!([]));
    assert_eq!(end["next_cursor"], all["next_cursor"]);
    // And as a string it is the same end.
    let end = poll(json!(all["next_cursor"].to_string())).await;
    assert_eq!(end["events"], json!([]));
    op.stop();
    fleet.stop().await.unwrap();
}
