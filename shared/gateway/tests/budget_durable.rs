//! Budgets, spend and the killswitch are money, not what may be lost (docs/models-and-budgets.md,
//! where budgets live): against the real PostgreSQL and Redis, with Redis cut by a chaos proxy
//! or "restarted" (this test's namespace flushed; never the shared server), users are still
//! metered from PostgreSQL, the day's spend is still counted, an on killswitch stays on, and
//! a reservation whose release cannot reach Redis ends with its lease.

mod common;

use std::sync::Arc;
use std::time::Duration;

use hermes_cache::Cache;
use hermes_config::Config;
use hermes_db::budgets::Window;
use hermes_gateway::Gateway;
use hermes_gateway::backends::Backends;
use hermes_telemetry::Metrics;
use hermes_testkit::{Server, TestEnv, eventually};
use hermes_types::ids::UserId;
use hermes_types::model::{FailureCode, LlmRequest, Tier};
use secrecy::SecretString;
use serde_json::json;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// One model; each call of [`ask`] reserves ceil(len("be brief" + "q") / 4) + 100 = 103
/// tokens, against a day of 1,000.
const CONFIG: &str = r#"
[tiers]
free = ["gpt"]
starter = ["gpt"]
pro = ["gpt"]
venue-growth = ["gpt"]

[router]
vision_model = "gpt"

[models.gpt]
id = "gpt-4o-mini"
backend = "openai"
max_output_tokens = 100
input_price = "0.15"
output_price = "0.60"

[llm.cache]
enabled = false

[llm.budgets.free]
daily_tokens = 1000
monthly_tokens = 100000
"#;

/// A test's servers: its database, its Redis namespace (maybe behind a proxy), a fake model.
struct Setup {
    env: TestEnv,
    openai: MockServer,
    /// Redis itself, never through the proxy: to flush this test's keys.
    direct_redis: String,
    dir: std::path::PathBuf,
}

impl Drop for Setup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

async fn setup() -> Setup {
    setup_with(CONFIG).await
}

/// [`setup`] with another configuration file.
async fn setup_with(config: &str) -> Setup {
    let mut env = TestEnv::new().await;
    let openai = MockServer::start().await;
    let dir = std::env::temp_dir().join(format!("hermes-budget-{}", env.ns));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("hermes.toml"), config).unwrap();
    env.vars.remove("HERMES_PROVIDER");
    env.set("OPENAI_API_KEY", "sk-openai")
        .set("OPENAI_BASE_URL", &openai.uri());
    let direct_redis = env.vars["REDIS_URL"].clone();
    Setup {
        env,
        openai,
        direct_redis,
        dir,
    }
}

impl Setup {
    fn config(&self) -> Arc<Config> {
        let vars = self.env.vars.clone();
        Arc::new(
            Config::from_lookup(
                &move |k| vars.get(k).cloned(),
                Some(&self.dir.join("hermes.toml")),
            )
            .expect("test configuration"),
        )
    }

    /// A gateway of one process of the fleet: its own metrics, Redis connection and memory.
    fn gateway(&self) -> (Gateway, Metrics) {
        let config = self.config();
        let metrics = Metrics::new();
        let cache =
            Cache::new(&config.redis_url, config.namespace.clone(), metrics.clone()).unwrap();
        let backends = Backends::new(config.clone(), None).unwrap();
        let gateway = Gateway::with_parts(
            config,
            metrics.clone(),
            backends,
            cache,
            Some(self.env.db()),
        );
        (gateway, metrics)
    }

    /// What a Redis restart without persistence does to this test: every key of its
    /// namespace gone (the shared server is never flushed).
    async fn forget_redis(&self) {
        let metrics = Metrics::new();
        let cache = Cache::new(
            &SecretString::from(self.direct_redis.clone()),
            self.config().namespace.clone(),
            metrics,
        )
        .unwrap();
        let mut c = cache.conn();
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg(cache.key("*"))
            .query_async(&mut c)
            .await
            .unwrap();
        assert!(!keys.is_empty(), "the namespace had keys to forget");
        let _: i64 = redis::cmd("DEL")
            .arg(&keys)
            .query_async(&mut c)
            .await
            .unwrap();
    }

    async fn answer(&self, r: ResponseTemplate) {
        Mock::given(method("POST"))
            .and(path("/chat/completions"))
            .respond_with(r)
            .mount(&self.openai)
            .await;
    }

    async fn hits(&self) -> usize {
        self.openai
            .received_requests()
            .await
            .unwrap_or_default()
            .len()
    }
}

fn ok(input: u64, output: u64) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-4o-mini",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": input, "completion_tokens": output, "total_tokens": input + output}
    }))
}

fn ask() -> LlmRequest {
    common::request(Tier::Free, &["gpt"], "q")
}

fn fallbacks(metrics: &Metrics, what: &str) -> u64 {
    metrics.budgets.fallback.with_label_values(&[what]).get()
}

/// A user spends 950 of their 1,000 tokens today.
async fn spend_950(gateway: &Gateway, user: UserId) {
    gateway.complete(&ask(), Some(user), None).await.unwrap();
    assert_eq!(gateway.budgets().used(user).await.unwrap(), (950, 950));
}

#[tokio::test]
async fn with_redis_cut_a_user_under_budget_is_answered_and_one_over_is_refused() {
    let mut s = setup().await;
    let redis = s.env.behind_proxy(Server::Redis).await;
    s.answer(ok(900, 50)).await;
    let (gateway, metrics) = s.gateway();
    let (spender, fresh) = (UserId::new(), UserId::new());
    spend_950(&gateway, spender).await;

    redis.set_down(true);
    let answered = gateway.complete(&ask(), Some(fresh), None).await;
    assert!(
        answered.is_ok(),
        "a user under budget is answered while Redis is down: {:?}",
        answered.err().map(|e| e.user_message())
    );
    let refused = gateway
        .complete(&ask(), Some(spender), None)
        .await
        .err()
        .expect("950 + 103 is over the day's 1,000");
    assert_eq!(refused.code(), FailureCode::BudgetExceeded);
    assert_eq!(
        s.hits().await,
        2,
        "the refused call never reached the model"
    );
    assert!(fallbacks(&metrics, "reserve") >= 2);
    // The answered call's usage is durable, and readable without Redis.
    assert_eq!(gateway.budgets().used(fresh).await.unwrap(), (950, 950));
    assert_eq!(
        metrics.budgets.fail_open.get(),
        0,
        "the spend cap was read from PostgreSQL, not skipped"
    );

    // Back: the spend settled while Redis was away counts there too.
    redis.set_down(false);
    eventually(Duration::from_secs(10), "Redis answers again", || async {
        gateway.budgets().status().await.ok()
    })
    .await;
    let refused = gateway.complete(&ask(), Some(fresh), None).await.err();
    assert_eq!(refused.map(|e| e.code()), Some(FailureCode::BudgetExceeded));
}

#[tokio::test]
async fn a_call_over_the_months_budget_is_refused_as_such_with_redis_and_after_a_restart() {
    // A month of 1,000 whose earlier days settled 900 (a month row with no row for today):
    // today's 103 fit the day and not the month, so only the monthly window can refuse.
    let config = CONFIG.replace("monthly_tokens = 100000", "monthly_tokens = 1000");
    let s = setup_with(&config).await;
    s.answer(ok(900, 50)).await;
    let (gateway, metrics) = s.gateway();
    let user = UserId::new();
    let month = Window::Month.starts(chrono::Utc::now().date_naive());
    s.env
        .db()
        .get()
        .await
        .unwrap()
        .execute(
            "INSERT INTO llm_token_usage (user_id, window_kind, starts, used)
             VALUES ($1, 'month', $2, 900)",
            &[&user, &month],
        )
        .await
        .unwrap();
    for when in ["read from PostgreSQL into Redis", "after a Redis restart"] {
        let refused = gateway
            .complete(&ask(), Some(user), None)
            .await
            .err()
            .unwrap_or_else(|| panic!("{when}: 900 + 103 is over the month's 1,000"));
        assert_eq!(refused.code(), FailureCode::BudgetExceeded, "{when}");
        assert!(
            refused.user_message().contains("this month's usage limit"),
            "{when}: {}",
            refused.user_message()
        );
        if when.starts_with("read") {
            s.forget_redis().await;
        }
    }
    assert_eq!(
        s.hits().await,
        0,
        "the refused calls never reached the model"
    );
    let rejections = |window: &str| {
        metrics
            .budgets
            .rejections
            .with_label_values(&[window])
            .get()
    };
    assert_eq!(
        (rejections("user_monthly"), rejections("user_daily")),
        (2, 0)
    );
    // Another user, with nothing settled this month, is answered under the same budget.
    assert!(
        gateway
            .complete(&ask(), Some(UserId::new()), None)
            .await
            .is_ok()
    );
}

#[tokio::test]
async fn after_a_redis_restart_the_days_spend_is_still_counted() {
    let mut s = setup().await;
    s.env.set("LLM_GLOBAL_DAILY_BUDGET_USD", "1.00");
    s.answer(ok(900, 50)).await;
    let (gateway, metrics) = s.gateway();
    let user = UserId::new();
    spend_950(&gateway, user).await;
    let spent = gateway.budgets().status().await.unwrap().spent_today_usd;
    // 900 × $0.15/M + 50 × $0.60/M = 165 µ$.
    assert!((spent - 0.000165).abs() < 1e-12, "{spent}");

    s.forget_redis().await;
    let refused = gateway.complete(&ask(), Some(user), None).await.err();
    assert_eq!(
        refused.map(|e| e.code()),
        Some(FailureCode::BudgetExceeded),
        "the day's 950 tokens are not forgotten with Redis"
    );
    assert_eq!(s.hits().await, 1);
    assert!(fallbacks(&metrics, "seed") >= 1);
    assert_eq!(gateway.budgets().used(user).await.unwrap(), (950, 950));
    let spent_after = gateway.budgets().status().await.unwrap().spent_today_usd;
    assert!((spent_after - 0.000165).abs() < 1e-12, "{spent_after}");
}

#[tokio::test]
async fn an_on_killswitch_stays_on_through_a_redis_restart_and_an_outage() {
    let mut s = setup().await;
    let redis = s.env.behind_proxy(Server::Redis).await;
    s.answer(ok(1, 1)).await;
    let (operator, _) = s.gateway();
    operator.budgets().killswitch_on("drill").await.unwrap();

    s.forget_redis().await;
    let (replica, _) = s.gateway();
    let paused = replica.complete(&ask(), None, None).await.err();
    assert_eq!(
        paused.map(|e| e.code()),
        Some(FailureCode::SpendingPaused),
        "a restarted Redis does not turn the killswitch off"
    );

    redis.set_down(true);
    let (fresh_replica, metrics) = s.gateway();
    let paused = fresh_replica.complete(&ask(), None, None).await.err();
    assert_eq!(
        paused.map(|e| e.code()),
        Some(FailureCode::SpendingPaused),
        "with Redis down the killswitch is read from PostgreSQL"
    );
    assert!(fallbacks(&metrics, "killswitch") >= 1);
    assert_eq!(s.hits().await, 0);

    redis.set_down(false);
    eventually(
        Duration::from_secs(10),
        "the killswitch goes off",
        || async { operator.budgets().killswitch_off().await.ok() },
    )
    .await;
    // Every replica sees it within a second (one that read PostgreSQL during the outage
    // reuses that answer for at most a second).
    eventually(Duration::from_secs(10), "calls resume", || async {
        replica.complete(&ask(), None, None).await.ok()
    })
    .await;
}

#[tokio::test]
async fn the_reservation_of_a_call_that_failed_while_redis_was_cut_is_released() {
    let mut s = setup().await;
    // Holds are leased for twice the longest call: 2 s here.
    s.env.set("HERMES_LLM_TIMEOUT_SECS", "1");
    let redis = s.env.behind_proxy(Server::Redis).await;
    s.answer(ResponseTemplate::new(400).set_delay(Duration::from_millis(300)))
        .await;
    let (gateway, _) = s.gateway();
    let user = UserId::new();
    let call = {
        let gateway = gateway.clone();
        tokio::spawn(async move { gateway.complete(&ask(), Some(user), None).await })
    };
    eventually(Duration::from_secs(5), "the model has the call", || async {
        (s.hits().await > 0).then_some(())
    })
    .await;
    // The release of the failed call cannot reach Redis.
    redis.set_down(true);
    assert!(call.await.unwrap().is_err(), "the model refused the call");
    redis.set_down(false);
    eventually(
        Duration::from_secs(10),
        "the failed call's hold is gone",
        || async { (gateway.budgets().used(user).await.ok() == Some((0, 0))).then_some(()) },
    )
    .await;
}

#[tokio::test]
async fn a_reservation_of_a_killed_process_ends_with_its_lease() {
    let mut s = setup().await;
    s.env.set("HERMES_LLM_TIMEOUT_SECS", "1");
    let (gateway, _) = s.gateway();
    let user = UserId::new();
    let budget = hermes_config::TierBudget {
        daily_tokens: 1000,
        monthly_tokens: 10_000,
    };
    let held = gateway.budgets().reserve(user, budget, 300).await.unwrap();
    assert_eq!(gateway.budgets().used(user).await.unwrap(), (300, 300));
    // kill -9: neither settle nor drop ever runs.
    std::mem::forget(held);
    eventually(Duration::from_secs(10), "the hold's lease ends", || async {
        (gateway.budgets().used(user).await.ok() == Some((0, 0))).then_some(())
    })
    .await;
}

#[tokio::test]
async fn concurrent_calls_are_metered_exactly_in_redis_and_in_postgresql() {
    let s = setup().await;
    // 103 tokens reserved per call against a day of 1,000: nine fit.
    s.answer(ok(3, 2).set_delay(Duration::from_millis(300)))
        .await;
    let (gateway, _) = s.gateway();
    let user = UserId::new();
    let calls = (0..40).map(|_| {
        let g = gateway.clone();
        tokio::spawn(async move { g.complete(&ask(), Some(user), None).await })
    });
    let results = futures_util::future::join_all(calls).await;
    let answered = results.iter().filter(|r| matches!(r, Ok(Ok(_)))).count();
    assert_eq!(answered, 9);
    assert_eq!(gateway.budgets().used(user).await.unwrap(), (45, 45));
    let db = s.env.direct_db();
    let row = hermes_db::budgets::tokens_used(
        &db.get().await.unwrap(),
        user,
        chrono::Utc::now().date_naive(),
    )
    .await
    .unwrap();
    assert_eq!(
        (row.day, row.month),
        (45, 45),
        "every settle reached PostgreSQL once"
    );
}
