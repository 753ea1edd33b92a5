//! The console's overview (docs/console.md) through the real ingest: the last hour's runs per
//! minute by platform and their time to answer, drawn as inline SVG beside the numbers; each
//! stage's queue and consumers; an open breaker; the spend and the killswitch's form. `/console`
//! and a login land on it.

use hermes::Service;
use hermes_testkit::TestEnv;
use redis::AsyncCommands;
use reqwest::header::LOCATION;

use crate::console::{get, logged_in};

/// A run on `platform` that started `ago_secs` ago and completed `took_ms` later.
async fn answered_run(env: &TestEnv, platform: &str, ago_secs: i64, took_ms: i64) {
    env.db()
        .get()
        .await
        .unwrap()
        .execute(
            "INSERT INTO agent_runs (id, platform, sender_id, chat_id, status, tier, created_at, finished_at)
             VALUES (gen_random_uuid(), $1, 's', 'c', 'completed', 'free',
                     now() - make_interval(secs => $2),
                     now() - make_interval(secs => $2) + make_interval(secs => $3))",
            &[&platform, &(ago_secs as f64), &(took_ms as f64 / 1000.0)],
        )
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_overview_shows_the_hour_the_queues_an_open_breaker_and_the_killswitch() {
    let mut env = TestEnv::new().await;
    env.set("HERMES_CONSOLE", "true")
        .set("LLM_GLOBAL_DAILY_BUDGET_USD", "20");
    answered_run(&env, "telegram", 30, 1_200).await;
    answered_run(&env, "telegram", 90, 800).await;
    answered_run(&env, "slack", 20 * 60, 4_000).await;
    // Delivery's breaker for Telegram, open for another hour, as delivery writes it.
    let until = chrono::Utc::now().timestamp_millis() + 3_600_000;
    let mut redis = redis::Client::open(env.vars["REDIS_URL"].as_str())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let key = format!("{}:breaker:telegram:open", env.ns);
    let _: () = redis.set_ex(&key, until, 3600).await.unwrap();
    let fleet = env.start(&[Service::Ingest]).await;

    let cookie = logged_in(&fleet).await;
    let root = get(&fleet, "/console", &cookie).await;
    assert_eq!(root.headers()[LOCATION], "/console/overview");
    let page = get(&fleet, "/console/overview", &cookie).await;
    assert_eq!(page.status(), 200);
    let csp = page.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(!csp.contains("unsafe-inline"), "{csp}");
    let page = page.text().await.unwrap();
    assert!(page.contains("3 runs in the last 60 minutes"), "{page}");
    assert!(page.contains("<td>telegram</td><td>2</td>"), "{page}");
    assert!(page.contains("<td>slack</td><td>1</td>"), "{page}");
    assert!(
        page.contains("3 runs answered in the last 60 minutes: p50 1.2 s"),
        "{page}"
    );
    assert!(
        page.contains("<title>time to answer, p50 and p99"),
        "{page}"
    );
    for stage in ["router", "llm", "tools", "delivery", "webhooks"] {
        assert!(
            page.contains(&format!("<a href=\"/console/parked?stage={stage}\">0</a>")),
            "{stage}: {page}"
        );
    }
    assert!(
        page.contains("<strong>telegram</strong> open until"),
        "{page}"
    );
    assert!(page.contains("Turn the killswitch on"), "{page}");
    assert!(
        page.contains("<title>today&#39;s spend against the daily cap</title>"),
        "{page}"
    );

    let _: () = redis.del(&key).await.unwrap();
    let page = get(&fleet, "/console/overview", &cookie)
        .await
        .text()
        .await
        .unwrap();
    assert!(
        page.contains("Every platform's breaker is closed"),
        "{page}"
    );
    fleet.stop().await.unwrap();
}
