//! The dreaming engine end to end (docs/models-and-budgets.md, "The dreaming engine"): a
//! week with conversations is dreamt once, into one insight and at most 3 knowledge gaps,
//! by one model call metered against the user; a user silent that week costs no call; a
//! second look at the same week writes nothing; the user's next answer has the insight in
//! its system prompt.

use std::time::Duration;

use chrono::{DateTime, Utc};
use hermes::Service;
use hermes_db::Db;
use hermes_telemetry::Metrics;
use hermes_testkit::{TestEnv, count, eventually, metric, queued_llm_requests, send};
use hermes_types::envelope::Envelope;
use hermes_types::ids::{RunId, UserId};
use hermes_types::model::{Dream, Platform, Tier};
use uuid::Uuid;
use wiremock::matchers::{body_string_contains, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// What the fake model dreams: one insight and four gaps (one more than is kept).
const DREAM: &str = r#"{"insight":"Books sushi for four most Fridays","knowledge_gaps":["favourite sushi place","dietary restrictions of the group","usual booking hour","budget per person"]}"#;
/// Marks the dream call among the provider's requests (its system prompt).
const DREAM_MARK: &str = "dreaming engine";

/// A session of `user` on the REST channel at `at`, with one message and its answer.
async fn conversation(db: &Db, user: UserId, at: DateTime<Utc>, said: &str) {
    let c = db.get().await.unwrap();
    let session = Uuid::now_v7();
    c.execute(
        "INSERT INTO sessions (id, user_id, platform, channel_id, started_at, last_activity_at)
         VALUES ($1, $2, 'rest', 'chat', $3, $3)",
        &[&session, &user, &at],
    )
    .await
    .unwrap();
    c.execute(
        "INSERT INTO interactions (run_id, user_id, session_id, direction, text, created_at)
         VALUES ($1, $2, $3, 'inbound', $4, $5), ($1, $2, $3, 'outbound', 'Booked!', $5)",
        &[&Uuid::now_v7(), &user, &session, &said, &at],
    )
    .await
    .unwrap();
}

/// The provider's dream calls so far, as their bodies.
async fn dream_calls(provider: &MockServer) -> Vec<String> {
    provider
        .received_requests()
        .await
        .unwrap_or_default()
        .iter()
        .map(|r| String::from_utf8_lossy(&r.body).into_owned())
        .filter(|b| b.contains(DREAM_MARK))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_week_of_conversations_is_dreamt_once_and_reaches_the_next_soul() {
    let provider = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/chat/completions"))
        .and(body_string_contains(DREAM_MARK))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(hermes_testkit::openai_answer(DREAM, 300, 40)),
        )
        .mount(&provider)
        .await;
    Mock::given(method("POST"))
        .and(path("/chat/completions"))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(hermes_testkit::openai_answer("Sure!", 20, 2)),
        )
        .mount(&provider)
        .await;
    let mut env = TestEnv::new().await;
    env.openai_mock(&provider.uri())
        .set("HERMES_DREAMING_CHECK_SECS", "1");
    let dreamer = env.user(Platform::Rest, "dreamer", 10).await;
    let quiet = env.user(Platform::Rest, "quiet", 10).await;
    let db = env.db();
    let last_week = hermes_router::dreaming::last_week(Utc::now());
    conversation(
        &db,
        dreamer.id,
        last_week + chrono::Duration::days(4),
        "book sushi for four on Friday again",
    )
    .await;
    // The quiet user talked the week before: nothing to dream about last week.
    conversation(
        &db,
        quiet.id,
        last_week - chrono::Duration::days(3),
        "a message of long ago",
    )
    .await;

    let fleet = env.start(&Service::ALL).await;
    eventually(Duration::from_secs(30), "the week dreamt", || async {
        let c = db.get().await.ok()?;
        let row = c
            .query_opt(
                "SELECT status FROM user_dreams WHERE user_id = $1 AND status <> 'queued'",
                &[&dreamer.id],
            )
            .await
            .ok()??;
        Some(row.get::<_, String>(0))
    })
    .await;
    let kinds = |user: UserId| {
        let db = db.clone();
        async move {
            let c = db.get().await.unwrap();
            c.query(
                "SELECT kind, text FROM user_insights WHERE user_id = $1 ORDER BY id",
                &[&user],
            )
            .await
            .unwrap()
            .iter()
            .map(|r| (r.get::<_, String>(0), r.get::<_, String>(1)))
            .collect::<Vec<_>>()
        }
    };
    let written = kinds(dreamer.id).await;
    assert_eq!(
        written,
        vec![
            ("insight".into(), "Books sushi for four most Fridays".into()),
            ("knowledge_gap".into(), "favourite sushi place".into()),
            (
                "knowledge_gap".into(),
                "dietary restrictions of the group".into()
            ),
            ("knowledge_gap".into(), "usual booking hour".into()),
        ],
        "one insight and at most 3 gaps"
    );
    assert!(kinds(quiet.id).await.is_empty());
    assert_eq!(
        count(
            &db,
            "SELECT count(*) FROM user_dreams WHERE user_id = $1",
            &[&quiet.id]
        )
        .await,
        0
    );
    // One call, with the week's conversation, asking for the structured shape; none for
    // the quiet user.
    let calls = dream_calls(&provider).await;
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert!(calls[0].contains("book sushi for four on Friday again"));
    assert!(calls[0].contains("json_schema") && calls[0].contains("knowledge_gaps"));
    assert!(!calls[0].contains("a message of long ago"));
    // Metered against the user, as their other calls are.
    eventually(
        Duration::from_secs(30),
        "the dream's tokens metered",
        || async {
            let c = db.get().await.ok()?;
            let used: i64 = c
                .query_one(
                    "SELECT coalesce(sum(used), 0)::bigint FROM llm_token_usage
                  WHERE user_id = $1 AND window_kind = 'day'",
                    &[&dreamer.id],
                )
                .await
                .ok()?
                .get(0);
            (used >= 340).then_some(())
        },
    )
    .await;

    // A second look at the same week queues nothing, and a replayed dream of it (a new
    // message id) makes no call and writes nothing.
    let ctx = hermes_runtime::Ctx::without_broker(env.config(), Metrics::new())
        .await
        .unwrap();
    assert_eq!(
        hermes_router::dreaming::tick(&ctx, Utc::now())
            .await
            .unwrap(),
        0
    );
    let bus = env.bus().await;
    let replay = Envelope::new(
        RunId::new(),
        None,
        &Dream {
            user_id: dreamer.id,
            week_start: last_week,
            tier: Tier::Free,
        },
    );
    bus.publish(&replay).await.unwrap();
    eventually(Duration::from_secs(30), "the replay skipped", || async {
        let m = fleet.metrics().await;
        metric(&m, "hermes_dreams_total{outcome=\"skipped\"}").filter(|n| *n >= 1.0)
    })
    .await;
    assert_eq!(kinds(dreamer.id).await, written);
    assert_eq!(dream_calls(&provider).await.len(), 1);
    let m = fleet.metrics().await;
    assert_eq!(
        metric(&m, "hermes_dreams_total{outcome=\"written\"}"),
        Some(1.0)
    );
    assert_eq!(
        metric(&m, "hermes_dream_tokens_total{direction=\"input\"}"),
        Some(300.0)
    );

    // The next answer's system prompt carries the insight and the gaps.
    send(&bus, "dreamer", "any plans for this week?").await;
    eventually(Duration::from_secs(30), "the next request", || async {
        let reqs = queued_llm_requests(&db).await;
        (!reqs.is_empty()).then_some(())
    })
    .await;
    let req = &queued_llm_requests(&db).await[0];
    let prompt: String = req["messages"]
        .as_array()
        .unwrap()
        .iter()
        .take_while(|m| m["role"] == "system")
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .collect::<Vec<_>>()
        .join("\n\n");
    assert!(
        prompt.contains("WEEKLY INSIGHT") && prompt.contains("Books sushi for four most Fridays"),
        "{prompt}"
    );
    assert!(
        prompt.contains("KNOWLEDGE GAPS") && prompt.contains("usual booking hour"),
        "{prompt}"
    );
    assert!(!prompt.contains("budget per person"), "{prompt}");
    bus.close().await;
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_dreaming_off_no_week_is_queued() {
    let mut env = TestEnv::new().await;
    env.set("HERMES_DREAMING", "false");
    let user = env.user(Platform::Rest, "sleeper", 10).await;
    let db = env.db();
    let last_week = hermes_router::dreaming::last_week(Utc::now());
    conversation(&db, user.id, last_week + chrono::Duration::days(1), "hello").await;
    let config = env.config();
    assert!(!config.router.dreaming.on);
    // The router's loop returns at once when off: it never looks.
    let ctx = hermes_runtime::Ctx::without_broker(config, Metrics::new())
        .await
        .unwrap();
    tokio::time::timeout(
        Duration::from_secs(5),
        hermes_router::dreaming::run(ctx.clone()),
    )
    .await
    .expect("the loop ends when dreaming is off");
    assert_eq!(count(&db, "SELECT count(*) FROM user_dreams", &[]).await, 0);
}
