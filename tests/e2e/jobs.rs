//! Scheduled jobs through `/api/jobs` (docs/api.md, jobs): who may do what, what is refused
//! and why, pause and resume, a run now delivered to the key's signed callback, and a
//! delete that stops the job's run in flight. The scheduler's exactly-once runs are in
//! `jobs_schedule.rs`.

use std::time::Duration;

use hermes::Service;
use hermes_db::api_keys::{self, KeyScope};
use hermes_testkit::{Fleet, KEY, TestEnv, eventually, telegram_send_message, telegram_sent};
use hermes_types::model::Platform;
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const SECRET_KEYS: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";

/// A key with only the `jobs` scope (and `callback` as its callback URL).
pub(crate) async fn jobs_key(env: &TestEnv, callback: Option<&str>) -> api_keys::Created {
    let client = env.db().get().await.unwrap();
    let ring = hermes_net::keyring::KeyRing::new(&env.config().router.secret_keys);
    let key = api_keys::create(&client, "jobs", callback, ring.as_ref())
        .await
        .unwrap();
    api_keys::set_scopes(&client, key.key.id, &[KeyScope::Jobs])
        .await
        .unwrap();
    key
}

/// One call to `/api/jobs…` with `key`: the status and the JSON body.
pub(crate) async fn call(
    fleet: &Fleet,
    verb: &str,
    route: &str,
    key: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let http = reqwest::Client::new();
    let mut req = http
        .request(verb.parse().unwrap(), fleet.url(route))
        .bearer_auth(key);
    if let Some(b) = body {
        req = req.json(&b);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

/// Create a job with `key`; its id.
pub(crate) async fn create_job(fleet: &Fleet, key: &str, job: Value) -> String {
    let (status, made) = call(fleet, "POST", "/api/jobs", key, Some(job)).await;
    assert_eq!(status, 201, "{made}");
    made["id"].as_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_are_created_read_changed_and_refused_clearly() {
    let mut env = TestEnv::new().await;
    env.set("HERMES_SECRET_KEYS", SECRET_KEYS);
    let mine = jobs_key(&env, Some("https://shop.example/hook")).await;
    let theirs = jobs_key(&env, None).await;
    let client = env.db().get().await.unwrap();
    let chat_only = api_keys::create(&client, "chat", None, None).await.unwrap();
    api_keys::set_scopes(&client, chat_only.key.id, &[KeyScope::Chat])
        .await
        .unwrap();
    env.user(Platform::Telegram, "4242", 10).await;
    let model = env.config().models.keys().next().unwrap().clone();
    // Ingest alone: no scheduler moves next_run_at under the test.
    let fleet = env.start(&[Service::Ingest]).await;
    let key = mine.secret_key.as_str();
    let good = json!({"name": "digest", "prompt": "summarize the day",
                      "schedule": {"every_seconds": 3600}, "target": {"type": "callback"}});

    assert_eq!(
        call(&fleet, "GET", "/api/jobs", "hk_nope", None).await.0,
        401
    );
    let (status, body) = call(&fleet, "GET", "/api/jobs", &chat_only.secret_key, None).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (403, Some("forbidden"))
    );

    // Each refusal names its field.
    for (patch, code) in [
        (
            json!({"schedule": {"cron": "61 * * * *"}}),
            "invalid_schedule",
        ),
        (
            json!({"schedule": {"cron": "0 * * * * *"}}),
            "invalid_schedule",
        ),
        (
            json!({"schedule": {"cron": "0 9 * * *", "timezone": "Mars/Base"}}),
            "invalid_schedule",
        ),
        (
            json!({"schedule": {"every_seconds": 0}}),
            "invalid_schedule",
        ),
        // Text is taken as the document writes it, and checked like an object.
        (json!({"schedule": "every 30s"}), "invalid_schedule"),
        (json!({"schedule": "every fortnight"}), "invalid_schedule"),
        (json!({"schedule": "0 25 * * *"}), "invalid_schedule"),
        (json!({"schedule": null}), "invalid_schedule"),
        (json!({"target": {"type": "email"}}), "invalid_target"),
        (
            json!({"target": {"type": "chat", "platform": "telegram", "chat_id": "4242"}}),
            "invalid_target",
        ),
        (json!({"model": "no-such-model"}), "invalid_request"),
        (json!({"model": "acme:some-model"}), "unknown_provider"),
        (json!({"model": "openai:not-configured"}), "model_not_found"),
        (json!({"name": ""}), "invalid_request"),
        (json!({"prompt": "  "}), "invalid_request"),
        (json!({"toolsets": []}), "invalid_request"),
        (json!({"colour": "red"}), "invalid_json"),
    ] {
        let mut body = good.clone();
        for (k, v) in patch.as_object().unwrap() {
            body[k] = v.clone();
        }
        let (status, answer) = call(&fleet, "POST", "/api/jobs", key, Some(body.clone())).await;
        assert_eq!(status, 400, "{body} was accepted: {answer}");
        assert_eq!(answer["error"]["code"], code, "{body}: {answer}");
    }
    // The operator has no callback; a chat must be linked to a user.
    let (status, answer) = call(&fleet, "POST", "/api/jobs", KEY, Some(good.clone())).await;
    assert_eq!(
        (status, answer["error"]["code"].as_str()),
        (400, Some("invalid_target"))
    );
    let unlinked = json!({"name": "n", "prompt": "p", "schedule": {"every_seconds": 60},
                          "target": {"type": "chat", "platform": "telegram", "chat_id": "999"}});
    let (status, answer) = call(&fleet, "POST", "/api/jobs", KEY, Some(unlinked)).await;
    assert_eq!(
        (status, answer["error"]["code"].as_str()),
        (400, Some("invalid_target"))
    );
    let chat = json!({"name": "morning", "prompt": "good morning", "target":
                      {"type": "chat", "platform": "telegram", "chat_id": "4242"},
                      "schedule": {"cron": "0 9 * * *", "timezone": "Europe/Paris"}});
    let (status, operators) = call(&fleet, "POST", "/api/jobs", KEY, Some(chat)).await;
    assert_eq!(status, 201, "{operators}");

    let mut with_model = good.clone();
    with_model["model"] = json!(model);
    with_model["toolsets"] = json!(["web"]);
    let (status, job) = call(&fleet, "POST", "/api/jobs", key, Some(with_model)).await;
    assert_eq!(status, 201, "{job}");
    let id = job["id"].as_str().unwrap().to_string();
    let route = format!("/api/jobs/{id}");
    assert_eq!(job["object"], "hermes.job");
    assert_eq!(job["schedule"], json!({"every_seconds": 3600}));
    assert_eq!(job["paused"], false);
    let first_due = job["next_run_at"].as_str().unwrap().to_string();

    // A key sees its own jobs; the operator sees every job.
    let (_, list) = call(&fleet, "GET", "/api/jobs", key, None).await;
    assert_eq!(list["data"].as_array().unwrap().len(), 1);
    let (_, list) = call(&fleet, "GET", "/api/jobs", KEY, None).await;
    assert_eq!(list["data"].as_array().unwrap().len(), 2);
    for (k, expected) in [(key, 200), (KEY, 200), (theirs.secret_key.as_str(), 404)] {
        assert_eq!(call(&fleet, "GET", &route, k, None).await.0, expected);
    }
    assert_eq!(
        call(&fleet, "GET", "/api/jobs/nope", key, None).await.0,
        404
    );
    let (status, _) = call(
        &fleet,
        "POST",
        &format!("{route}/pause"),
        &theirs.secret_key,
        None,
    )
    .await;
    assert_eq!(status, 404);
    let (_, got) = call(&fleet, "GET", &route, key, None).await;
    assert!(got.get("last_run").is_none(), "never ran: {got}");

    // PATCH merges: the prompt changes, the rest stays; a new schedule counts from now.
    let (status, patched) = call(
        &fleet,
        "PATCH",
        &route,
        key,
        Some(json!({"prompt": "summarize the week"})),
    )
    .await;
    assert_eq!(status, 200, "{patched}");
    assert_eq!(patched["prompt"], "summarize the week");
    assert_eq!(patched["name"], "digest");
    assert_eq!(patched["next_run_at"], first_due.as_str());
    let (status, _) = call(
        &fleet,
        "PATCH",
        &route,
        key,
        Some(json!({"schedule": {"every_seconds": -1}})),
    )
    .await;
    assert_eq!(status, 400);
    let (_, patched) = call(
        &fleet,
        "PATCH",
        &route,
        key,
        Some(json!({"schedule": {"cron": "*/5 * * * *"}, "model": null})),
    )
    .await;
    assert_eq!(patched["schedule"], json!({"cron": "*/5 * * * *"}));
    assert_eq!(patched["model"], Value::Null);
    // A configured model named provider:model is stored as its logical name.
    let (status, patched) = call(
        &fleet,
        "PATCH",
        &route,
        key,
        Some(json!({"model": "ollama:llama3.1"})),
    )
    .await;
    assert_eq!(status, 200, "{patched}");
    assert_eq!(patched["model"], "ollama");
    let (_, patched) = call(&fleet, "PATCH", &route, key, Some(json!({"model": null}))).await;
    assert_eq!(patched["model"], Value::Null);
    assert_eq!(patched["toolsets"], json!(["web"]));
    assert_ne!(patched["next_run_at"], first_due.as_str());
    // A schedule written as text is kept as its object.
    for (text, stored) in [
        ("every 2h", json!({"every_seconds": 7200})),
        ("0 8 * * 1-5", json!({"cron": "0 8 * * 1-5"})),
    ] {
        let change = Some(json!({"schedule": text}));
        let (status, patched) = call(&fleet, "PATCH", &route, key, change).await;
        assert_eq!((status, &patched["schedule"]), (200, &stored), "{patched}");
    }

    // Pause suspends the next time; resume counts it from now.
    let (_, paused) = call(&fleet, "POST", &format!("{route}/pause"), key, None).await;
    assert_eq!(
        (paused["paused"].as_bool(), &paused["next_run_at"]),
        (Some(true), &Value::Null)
    );
    let (_, resumed) = call(&fleet, "POST", &format!("{route}/resume"), key, None).await;
    assert_eq!(resumed["paused"], false);
    let next: chrono::DateTime<chrono::Utc> =
        resumed["next_run_at"].as_str().unwrap().parse().unwrap();
    assert!(next > chrono::Utc::now());

    // The operator's listing names both jobs, their owners and targets.
    let (code, out, err) = env.hermes(&["jobs", "list", "--json"]).await;
    assert_eq!(code, 0, "{err}");
    let listed: Value = serde_json::from_str(&out).unwrap();
    let listed = listed.as_array().unwrap();
    assert_eq!(listed.len(), 2);
    let row = listed.iter().find(|j| j["id"] == id.as_str()).unwrap();
    assert_eq!(row["api_key_id"], mine.key.id.to_string());
    assert_eq!(row["target"], "callback");
    assert!(
        listed
            .iter()
            .any(|j| j["target"] == "chat" && j["api_key_id"].is_null())
    );

    let (status, deleted) = call(&fleet, "DELETE", &route, key, None).await;
    assert_eq!((status, deleted["deleted"].as_bool()), (200, Some(true)));
    assert_eq!(call(&fleet, "GET", &route, key, None).await.0, 404);
    assert_eq!(call(&fleet, "DELETE", &route, key, None).await.0, 404);
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_run_now_is_answered_to_its_keys_signed_callback() {
    let callback = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/hook"))
        .respond_with(ResponseTemplate::new(204))
        .mount(&callback)
        .await;
    let mut env = TestEnv::new().await;
    env.set("HERMES_SECRET_KEYS", SECRET_KEYS)
        .set("HERMES_CALLBACK_ALLOW", "127.0.0.1");
    let key = jobs_key(&env, Some(&format!("{}/hook", callback.uri()))).await;
    let fleet = env.start(&Service::ALL).await;
    let k = key.secret_key.as_str();
    let (status, job) = call(
        &fleet,
        "POST",
        "/api/jobs",
        k,
        Some(json!({
        "name": "report", "prompt": "daily report", "schedule": {"every_seconds": 86400},
        "target": {"type": "callback"}})),
    )
    .await;
    assert_eq!(status, 201, "{job}");
    let route = format!("/api/jobs/{}", job["id"].as_str().unwrap());
    let (status, queued) = call(&fleet, "POST", &format!("{route}/run"), k, None).await;
    assert_eq!((status, queued["status"].as_str()), (202, Some("queued")));
    let run_id = queued["run_id"].as_str().unwrap().to_string();

    let hook: (Value, bool) = eventually(Duration::from_secs(20), "the callback", || async {
        let reqs = callback.received_requests().await.unwrap();
        reqs.first().map(|r| {
            (
                serde_json::from_slice(&r.body).unwrap(),
                r.headers.contains_key("webhook-signature"),
            )
        })
    })
    .await;
    assert_eq!(hook.0["run_id"], run_id.as_str());
    assert_eq!(hook.0["outcome"]["text"], "echo: daily report");
    assert!(hook.1, "the callback is signed");

    let got: Value = eventually(Duration::from_secs(10), "the last run", || async {
        let (_, v) = call(&fleet, "GET", &route, k, None).await;
        (v["last_run"]["status"] == "completed").then_some(v)
    })
    .await;
    assert_eq!(got["last_run"]["run_id"], run_id.as_str());
    assert_eq!(got["last_run"]["trigger"], "manual");
    assert_eq!(got["last_run"]["output"], "echo: daily report");
    // Run now leaves the schedule alone, and the run is metered to the key.
    assert_eq!(got["next_run_at"], job["next_run_at"]);
    let c = env.db().get().await.unwrap();
    let owner: Option<uuid::Uuid> = c
        .query_one(
            "SELECT api_key_id FROM agent_runs WHERE id = $1::text::uuid",
            &[&run_id],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(owner, Some(key.key.id.as_uuid()));
    assert_eq!(callback.received_requests().await.unwrap().len(), 1);
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_job_asks_its_run_in_flight_to_stop() {
    // A model that takes far longer than the test: the run stays in flight.
    let provider = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(hermes_testkit::openai_answer("late", 1, 1))
                .set_delay(Duration::from_secs(120)),
        )
        .mount(&provider)
        .await;
    let mut env = TestEnv::new().await;
    // The model call is still in flight when the test ends: the stop waits out its grace.
    env.openai_mock(&provider.uri())
        .set("HERMES_SHUTDOWN_GRACE_SECS", "1");
    let fleet = env.start(&Service::ALL).await;
    let slow =
        json!({"name": "slow", "prompt": "take your time", "schedule": {"every_seconds": 86400}});
    let route = format!("/api/jobs/{}", create_job(&fleet, KEY, slow).await);
    let (_, queued) = call(&fleet, "POST", &format!("{route}/run"), KEY, None).await;
    let run_id: uuid::Uuid = queued["run_id"].as_str().unwrap().parse().unwrap();
    let db = env.db();
    eventually(
        Duration::from_secs(20),
        "the run routed and at the model",
        || async {
            let c = db.get().await.ok()?;
            c.query_opt("SELECT 1 FROM agent_runs WHERE id = $1", &[&run_id])
                .await
                .ok()??;
            (provider.received_requests().await?.len() == 1).then_some(())
        },
    )
    .await;
    let (status, deleted) = call(&fleet, "DELETE", &route, KEY, None).await;
    assert_eq!(status, 200);
    assert_eq!(deleted["stopping_runs"], json!([run_id]));
    let asked: bool = db
        .get()
        .await
        .unwrap()
        .query_one(
            "SELECT stop_requested_at IS NOT NULL FROM agent_runs WHERE id = $1",
            &[&run_id],
        )
        .await
        .unwrap()
        .get(0);
    assert!(asked, "the run in flight was asked to stop");
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_job_is_answered_in_the_chat_and_charged_to_its_user() {
    let telegram = MockServer::start().await;
    telegram_send_message("123:abc")
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"ok": true, "result": {"message_id": 1}})),
        )
        .mount(&telegram)
        .await;
    let mut env = TestEnv::new().await;
    env.set("TELEGRAM_BOT_TOKEN", "123:abc")
        .set("TELEGRAM_API_BASE_URL", &telegram.uri());
    let user = env.user(Platform::Telegram, "4242", 10).await;
    let fleet = env.start(&Service::ALL).await;
    let id = create_job(
        &fleet,
        KEY,
        json!({
        "name": "morning", "prompt": "good morning", "schedule": {"cron": "0 9 * * *"},
        "target": {"type": "chat", "platform": "telegram", "chat_id": "4242"}}),
    )
    .await;
    let (status, _) = call(&fleet, "POST", &format!("/api/jobs/{id}/run"), KEY, None).await;
    assert_eq!(status, 202);

    // The typing action shown while the run works comes first: only sends are looked at.
    let sent: Value = eventually(Duration::from_secs(20), "the chat answered", || async {
        telegram_sent(&telegram).await.into_iter().next()
    })
    .await;
    assert_eq!(sent["chat_id"], "4242");
    assert!(
        sent["text"]
            .as_str()
            .unwrap()
            .contains("echo: good morning"),
        "{sent}"
    );
    // Like a message the user sent: one credit of theirs.
    let credits: i64 = eventually(Duration::from_secs(10), "the charge", || async {
        let c = env.db().get().await.ok()?;
        let left: i64 = c
            .query_one("SELECT credits FROM users WHERE id = $1", &[&user.id])
            .await
            .ok()?
            .get(0);
        (left < 10).then_some(left)
    })
    .await;
    assert_eq!(credits, 9);
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_on_its_way_when_its_job_is_deleted_is_dropped_by_the_router() {
    let env = TestEnv::new().await;
    // Ingest alone: the run now waits in the outbox, with no relay or router to take it.
    let ingest = env.start(&[Service::Ingest]).await;
    let id = create_job(
        &ingest,
        KEY,
        json!({
        "name": "gone", "prompt": "never answered", "schedule": {"every_seconds": 86400}}),
    )
    .await;
    let route = format!("/api/jobs/{id}");
    let (_, queued) = call(&ingest, "POST", &format!("{route}/run"), KEY, None).await;
    let run_id: uuid::Uuid = queued["run_id"].as_str().unwrap().parse().unwrap();
    let (status, deleted) = call(&ingest, "DELETE", &route, KEY, None).await;
    assert_eq!((status, &deleted["stopping_runs"]), (200, &json!([])));
    ingest.stop().await.unwrap();

    let fleet = env.start(&Service::ALL).await;
    eventually(Duration::from_secs(20), "the router's decision", || async {
        let m = fleet.metrics().await;
        hermes_testkit::metric(
            &m,
            "hermes_router_decisions_total{decision=\"job_deleted\"}",
        )
        .filter(|n| *n == 1.0)
    })
    .await;
    let runs: i64 = env
        .db()
        .get()
        .await
        .unwrap()
        .query_one("SELECT count(*) FROM agent_runs WHERE id = $1", &[&run_id])
        .await
        .unwrap()
        .get(0);
    assert_eq!(runs, 0, "no run was made for the deleted job");
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_holds_a_bounded_number_of_jobs_run_no_more_often_than_the_minimum() {
    let mut env = TestEnv::new().await;
    env.set("HERMES_JOBS_PER_KEY", "2")
        .set("HERMES_JOB_MIN_INTERVAL_SECS", "120");
    let key = jobs_key(&env, None).await;
    // Ingest alone: no scheduler runs anything under the test.
    let fleet = env.start(&[Service::Ingest]).await;
    let k = key.secret_key.as_str();
    let job = |schedule: Value| json!({"name": "j", "prompt": "p", "schedule": schedule});

    // Too frequent, by interval or by cron expression: refused, naming the setting.
    for schedule in [
        json!({"every_seconds": 60}),
        json!({"cron": "* * * * *"}),
        json!({"cron": "0,1 9 * * *"}),
    ] {
        let (status, body) =
            call(&fleet, "POST", "/api/jobs", k, Some(job(schedule.clone()))).await;
        assert_eq!(status, 400, "{schedule}: {body}");
        assert_eq!(body["error"]["code"], "invalid_schedule");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("HERMES_JOB_MIN_INTERVAL_SECS"),
            "{message}"
        );
    }
    let first = create_job(&fleet, k, job(json!({"cron": "*/5 * * * *"}))).await;
    create_job(&fleet, k, job(json!({"every_seconds": 120}))).await;
    // The key holds its two jobs: a third is refused; the operator's are not counted.
    let (status, body) = call(
        &fleet,
        "POST",
        "/api/jobs",
        k,
        Some(job(json!({"every_seconds": 3600}))),
    )
    .await;
    assert_eq!(status, 429, "{body}");
    assert_eq!(body["error"]["code"], "job_limit_reached");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("HERMES_JOBS_PER_KEY=2"),
        "{body}"
    );
    create_job(&fleet, KEY, job(json!({"every_seconds": 3600}))).await;

    // A schedule changed to run too often is refused; one kept from before the limit stays.
    let route = format!("/api/jobs/{first}");
    let (status, body) = call(
        &fleet,
        "PATCH",
        &route,
        k,
        Some(json!({"schedule": {"every_seconds": 30}})),
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("invalid_schedule"))
    );
    env.db()
        .get()
        .await
        .unwrap()
        .execute(
            "UPDATE jobs SET schedule = '{\"every_seconds\": 1}' WHERE id = $1::text::uuid",
            &[&first],
        )
        .await
        .unwrap();
    let (status, body) = call(&fleet, "PATCH", &route, k, Some(json!({"name": "renamed"}))).await;
    assert_eq!(status, 200, "{body}");

    // Run now: once, then not again within the minimum.
    let (status, _) = call(&fleet, "POST", &format!("{route}/run"), k, None).await;
    assert_eq!(status, 202);
    let resp = reqwest::Client::new()
        .post(fleet.url(&format!("{route}/run")))
        .bearer_auth(k)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 429);
    let wait: u64 = resp.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=120).contains(&wait), "{wait}");
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "job_too_frequent");
    let runs = hermes_testkit::count(
        &env.db(),
        "SELECT count(*) FROM job_runs WHERE job_id = $1::text::uuid",
        &[&first],
    )
    .await;
    assert_eq!(runs, 1);

    // Deleting one makes room again.
    assert_eq!(call(&fleet, "DELETE", &route, k, None).await.0, 200);
    create_job(&fleet, k, job(json!({"every_seconds": 3600}))).await;
    let metrics = fleet.metrics().await;
    let refused = |limit: &str| {
        hermes_testkit::metric(
            &metrics,
            &format!("hermes_tenant_limit_refusals_total{{limit=\"{limit}\"}}"),
        )
    };
    assert_eq!(refused("jobs_per_key"), Some(1.0));
    assert_eq!(
        refused("job_interval"),
        Some(5.0),
        "three creations, a patch, a run now"
    );
    fleet.stop().await.unwrap();
}
