//! The llm stage's operator controls end to end, through the real `hermes` binary and the
//! whole fleet: moving an agent to another backend at run time (health-checked, rolled back
//! on failure) with a workspace-level key, and the killswitch with its refund.

use std::time::Duration;

use hermes::Service;
use hermes_testkit::{TestEnv, eventually, send};
use hermes_types::model::Platform;
use serde_json::{Value, json};
use wiremock::matchers::{header, method, path, path_regex};
use wiremock::{Mock, MockServer, ResponseTemplate};

const SECRET_KEYS: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";

/// The answers the user got, oldest first: (text, meta).
async fn answers(env: &TestEnv, n: i64) -> Vec<(String, Value)> {
    let db = env.db();
    eventually(Duration::from_secs(30), "answers logged", || async {
        let c = db.get().await.ok()?;
        let rows = c
            .query(
                "SELECT text, meta FROM interactions WHERE direction = 'outbound' ORDER BY id",
                &[],
            )
            .await
            .ok()?;
        (rows.len() as i64 >= n).then(|| rows.iter().map(|r| (r.get(0), r.get(1))).collect())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_moves_to_another_backend_at_run_time_with_its_workspace_key() {
    let gemini = MockServer::start().await;
    let mut env = TestEnv::new().await;
    env.set("HERMES_SECRET_KEYS", SECRET_KEYS)
        .set("GEMINI_BASE_URL", &gemini.uri());
    let (code, _, err) = env
        .hermes_with_stdin(
            &[
                "agents", "create", "mizu", "--name", "Mizu", "--tone", "hype",
            ],
            "",
        )
        .await;
    assert_eq!(code, 0, "{err}");

    // No Gemini key anywhere yet: the switch is refused and nothing changes.
    let move_args = [
        "agents",
        "set",
        "mizu",
        "--backend",
        "gemini",
        "--model",
        "gemini-2.5-flash",
    ];
    let (code, _, err) = env.hermes_with_stdin(&move_args, "").await;
    assert_eq!(code, 1);
    assert!(err.contains("GEMINI_API_KEY"), "{err}");

    // The workspace gets its own key, which the health check and the calls must use.
    let (code, out, err) = env
        .hermes_with_stdin(
            &["workspaces", "secret", "set", "GEMINI_API_KEY"],
            "ws-gemini-key\n",
        )
        .await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("GEMINI_API_KEY set"), "{out}");
    let (code, _, err) = env
        .hermes_with_stdin(&["workspaces", "secret", "clear", "ANTHROPIC_API_KEY"], "")
        .await;
    assert_eq!(code, 0, "{err}");
    let (_, listed, _) = env
        .hermes_with_stdin(&["workspaces", "secret", "list"], "")
        .await;
    assert!(listed.contains("GEMINI_API_KEY") && !listed.contains("ws-gemini-key"));
    assert!(
        listed
            .lines()
            .any(|l| l.starts_with("ANTHROPIC_API_KEY") && l.contains("cleared")),
        "{listed}"
    );
    let (code, _, err) = env
        .hermes_with_stdin(&["workspaces", "secret", "set", "SOME_TOKEN"], "x")
        .await;
    assert_eq!(code, 1);
    assert!(err.contains("is not a provider key"), "{err}");

    // A failing health check rolls the switch back.
    Mock::given(method("GET"))
        .and(path("/models"))
        .respond_with(ResponseTemplate::new(503))
        .up_to_n_times(1)
        .mount(&gemini)
        .await;
    let (code, _, err) = env.hermes_with_stdin(&move_args, "").await;
    assert_eq!(code, 1);
    assert!(
        err.contains("rolled back") && err.contains("tier's chain"),
        "{err}"
    );
    let (_, shown, _) = env
        .hermes_with_stdin(&["agents", "show", "mizu", "--json"], "")
        .await;
    assert_eq!(
        serde_json::from_str::<Value>(&shown).unwrap()["backend"],
        Value::Null
    );

    // A healthy backend (answering only the workspace's key) takes the agent.
    Mock::given(method("GET"))
        .and(path("/models"))
        .and(header("x-goog-api-key", "ws-gemini-key"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"models": []})))
        .mount(&gemini)
        .await;
    let (code, out, err) = env.hermes_with_stdin(&move_args, "").await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("gemini (gemini-2.5-flash)"), "{out}");

    Mock::given(method("POST"))
        .and(path_regex(r"^/models/gemini-2\.5-flash:generateContent$"))
        .and(header("x-goog-api-key", "ws-gemini-key"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "candidates": [{"content": {"role": "model", "parts": [{"text": "Hola from Gemini!"}]},
                            "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": 40, "candidatesTokenCount": 6, "totalTokenCount": 46},
            "modelVersion": "gemini-2.5-flash"
        })))
        .mount(&gemini)
        .await;
    env.user(Platform::Rest, "ana", 5).await;
    let fleet = env.start(&Service::ALL).await;
    let bus = env.bus().await;
    send(&bus, "ana", "hello there").await;
    let got = answers(&env, 1).await;
    assert_eq!(got[0].0, "Hola from Gemini!");
    assert_eq!(got[0].1["llm_backend"], "agent:gemini");
    assert_eq!(got[0].1["tokens_in"], 40);
    let sent: Value = gemini
        .received_requests()
        .await
        .unwrap()
        .into_iter()
        .find(|r| r.url.path().ends_with(":generateContent"))
        .unwrap()
        .body_json()
        .unwrap();
    assert!(
        sent["systemInstruction"]["parts"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("You are Mizu"),
        "the persona is the first system block: {sent}"
    );

    // Back to the tier's chain (the mock) for the next message, no restart.
    let (code, _, err) = env
        .hermes_with_stdin(&["agents", "set", "mizu", "--backend", "none"], "")
        .await;
    assert_eq!(code, 0, "{err}");
    send(&bus, "ana", "and now?").await;
    let got = answers(&env, 2).await;
    assert_eq!(got[1].0, "echo: and now?");
    bus.close().await;
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_killswitch_pauses_every_call_and_refunds_the_credit() {
    let env = TestEnv::new().await;
    let user = env.user(Platform::Rest, "bo", 3).await;
    let (code, out, err) = env
        .hermes_with_stdin(&["killswitch", "on", "--reason", "drill"], "")
        .await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("killswitch ON"), "{out}");
    let (_, status, _) = env.hermes_with_stdin(&["killswitch", "status"], "").await;
    assert!(
        status.contains("ON since") && status.contains("drill"),
        "{status}"
    );

    let fleet = env.start(&Service::ALL).await;
    let bus = env.bus().await;
    send(&bus, "bo", "anyone there?").await;
    let db = env.db();
    let credits: i64 = eventually(Duration::from_secs(30), "the refund", || async {
        let c = db.get().await.ok()?;
        let refunds: i64 = c
            .query_one(
                "SELECT count(*) FROM credit_ledger WHERE user_id = $1 AND reason = 'refund'",
                &[&user.id],
            )
            .await
            .ok()?
            .get(0);
        let credits: i64 = c
            .query_one("SELECT credits FROM users WHERE id = $1", &[&user.id])
            .await
            .ok()?
            .get(0);
        (refunds == 1).then_some(credits)
    })
    .await;
    assert_eq!(credits, 3, "the paused call cost nothing");
    let c = db.get().await.unwrap();
    let row = c
        .query_one(
            "SELECT status, error_code FROM agent_runs ORDER BY created_at DESC LIMIT 1",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "failed");
    assert_eq!(
        row.get::<_, Option<String>>(1).as_deref(),
        Some("spending_paused")
    );
    assert!(
        fleet
            .metrics()
            .await
            .contains("hermes_llm_budget_rejections_total{scope=\"killswitch\"} 1")
    );

    let (code, out, _) = env.hermes_with_stdin(&["killswitch", "off"], "").await;
    assert_eq!(code, 0);
    assert!(out.contains("killswitch OFF"), "{out}");
    send(&bus, "bo", "back?").await;
    let db2 = env.db();
    eventually(Duration::from_secs(30), "an answer after the killswitch", || async {
        let c = db2.get().await.ok()?;
        let n: i64 = c
            .query_one(
                "SELECT count(*) FROM interactions WHERE direction = 'outbound' AND text = 'echo: back?'",
                &[],
            )
            .await
            .ok()?
            .get(0);
        (n == 1).then_some(())
    })
    .await;
    bus.close().await;
    fleet.stop().await.unwrap();
}
