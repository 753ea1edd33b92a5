//! Budgets of API callers and of the platform's own calls (docs/models-and-budgets.md): a
//! memory extraction is metered against the user whose exchange it reads.

use std::time::Duration;

use hermes::Service;
use hermes_db::api_keys;
use hermes_testkit::{TestEnv, eventually, metric};
use serde_json::json;

use crate::tenants::{final_run, send_as_alice};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_extraction_is_metered_against_the_user() {
    let env = TestEnv::new().await;
    let db = env.db();
    let client = db.get().await.unwrap();
    let key = api_keys::create(&client, "shop", None, None).await.unwrap();
    let user = env.key_user(key.key.id, "alice", 10).await;
    let fleet = env.start(&Service::ALL).await;
    let http = reqwest::Client::new();
    let url = send_as_alice(
        &fleet,
        &key.secret_key,
        "I am vegetarian and I live in Lisbon",
    )
    .await;
    let run = final_run(&http, &url, &key.secret_key).await;
    let answer_tokens = run["usage"]["total_tokens"].as_i64().unwrap();
    eventually(Duration::from_secs(20), "the memory extraction", || async {
        let text = fleet.metrics().await;
        ["saved", "none", "failed"]
            .iter()
            .any(|o| {
                metric(
                    &text,
                    &format!("hermes_memory_extractions_total{{outcome=\"{o}\"}}"),
                )
                .is_some_and(|n| n > 0.0)
            })
            .then_some(())
    })
    .await;
    let used: i64 = eventually(Duration::from_secs(10), "the usage row", || async {
        let c = db.get().await.ok()?;
        let row = c
            .query_opt(
                "SELECT used FROM llm_token_usage WHERE user_id = $1 AND window_kind = 'day'",
                &[&user.id],
            )
            .await
            .ok()??;
        Some(row.get(0))
    })
    .await;
    assert!(
        used > answer_tokens,
        "the extraction's tokens were not counted against the user: {used} used, the answer alone took {answer_tokens}"
    );
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_keys_have_scopes_rates_and_budgets_of_their_own() {
    use wiremock::matchers::method;
    use wiremock::{Mock, MockServer, ResponseTemplate};
    let provider = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(hermes_testkit::openai_answer("ok", 1000, 1000)),
        )
        .mount(&provider)
        .await;
    let mut env = TestEnv::new().await;
    env.openai_mock(&provider.uri());
    let create = |args: &'static [&'static str]| {
        let env = &env;
        async move {
            let mut all = vec!["api-keys", "create", "--json"];
            all.extend_from_slice(args);
            let (code, out, err) = env.hermes_with_stdin(&all, "").await;
            assert_eq!(code, 0, "{err}");
            serde_json::from_str::<serde_json::Value>(&out).unwrap()["key"]
                .as_str()
                .unwrap()
                .to_string()
        }
    };
    let rest_only = create(&["--name", "rest"]).await;
    let tokens = create(&["--name", "t", "--scope", "chat", "--daily-tokens", "1500"]).await;
    let dollars = create(&["--name", "d", "--scope", "chat", "--daily-usd", "0.000001"]).await;
    let rate = create(&[
        "--name",
        "r",
        "--scope",
        "chat",
        "--scope",
        "messages",
        "--requests-per-minute",
        "1",
    ])
    .await;
    let fleet = env.start(&Service::ALL).await;
    let http = reqwest::Client::new();
    let chat = |key: &str, text: &str| {
        http.post(fleet.url("/v1/chat/completions"))
            .bearer_auth(key)
            .json(&json!({"model": "hermes", "messages": [{"role": "user", "content": text}]}))
            .send()
    };
    let status = |r: reqwest::Response| r.status().as_u16();

    // Scopes: each key reaches only its surfaces.
    assert_eq!(status(chat(&rest_only, "scoped out").await.unwrap()), 403);
    let posted = http
        .post(fleet.url("/v1/messages"))
        .bearer_auth(&tokens)
        .json(&json!({"sender_id": "alice", "text": "hi"}))
        .send()
        .await
        .unwrap();
    assert_eq!(status(posted), 403);

    // Token and dollar budgets: the first call spends them, the next is refused.
    for (key, name) in [(&tokens, "tokens"), (&dollars, "dollars")] {
        assert_eq!(
            status(chat(key, &format!("{name} one")).await.unwrap()),
            200
        );
        let refused = chat(key, &format!("{name} two")).await.unwrap();
        assert_eq!(refused.status(), 429, "{name}");
        let body: serde_json::Value = refused.json().await.unwrap();
        assert_eq!(body["error"]["code"], "budget_exceeded", "{name}: {body}");
    }

    // The request rate is the key's own.
    assert_eq!(status(chat(&rate, "rate one").await.unwrap()), 200);
    let limited = chat(&rate, "rate two").await.unwrap();
    assert_eq!(limited.status(), 429);
    assert!(limited.headers().contains_key("retry-after"));

    // The operator key is bounded only by the platform's limits.
    assert_eq!(
        status(chat(hermes_testkit::KEY, "operator").await.unwrap()),
        200
    );
    fleet.stop().await.unwrap();

    // `set` changes what was named (0 clears a limit), `list` shows it, never the key.
    let (_, listed, _) = env
        .hermes_with_stdin(&["api-keys", "list", "--json"], "")
        .await;
    let listed: serde_json::Value = serde_json::from_str(&listed).unwrap();
    let t = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["name"] == "t")
        .unwrap();
    assert_eq!(t["access"], "scopes chat, tokens/day 1500");
    assert!(!listed.to_string().contains(&tokens));
    let id = t["id"].as_str().unwrap();
    let (code, out, err) = env
        .hermes_with_stdin(
            &[
                "api-keys",
                "set",
                id,
                "--daily-tokens",
                "0",
                "--monthly-usd",
                "2.5",
            ],
            "",
        )
        .await;
    assert_eq!(code, 0, "{err}");
    assert!(out.ends_with("scopes chat, usd/month $2.500000\n"), "{out}");
    let (code, out, err) = env
        .hermes_with_stdin(&["api-keys", "rotate-secret", id], "")
        .await;
    assert_eq!(code, 1, "no HERMES_SECRET_KEYS to seal it with: {out}");
    assert!(err.contains("HERMES_SECRET_KEYS"), "{err}");
}
