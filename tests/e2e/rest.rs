//! The REST channel: keys, 202 with a run id, answers by callback and by polling.

use std::time::Duration;

use hermes::Service;
use hermes_db::api_keys;
use hermes_testkit::{KEY, TestEnv, eventually};
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rest_message_is_answered_by_callback_and_by_polling() {
    let callback = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/hook"))
        .respond_with(ResponseTemplate::new(204))
        .mount(&callback)
        .await;
    let mut env = TestEnv::new().await;
    env.set("HERMES_INBOUND_BURST", "3")
        .set("HERMES_INBOUND_PER_MINUTE", "1")
        .set(
            "HERMES_SECRET_KEYS",
            "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=",
        )
        .set("HERMES_CALLBACK_ALLOW", "127.0.0.1");
    let db = env.db();
    let client = db.get().await.unwrap();
    let ring = hermes_net::keyring::KeyRing::new(&env.config().router.secret_keys);
    let shop = api_keys::create(
        &client,
        "shop",
        Some(&format!("{}/hook", callback.uri())),
        ring.as_ref(),
    )
    .await
    .unwrap();
    let key = shop.secret_key;
    let other = api_keys::create(&client, "someone else", None, None)
        .await
        .unwrap()
        .secret_key;
    env.key_user(shop.key.id, "u1", 10).await;
    let fleet = env.start(&Service::ALL).await;
    let http = reqwest::Client::new();
    let send = |key: &str, body: Value| {
        http.post(fleet.url("/v1/messages"))
            .bearer_auth(key)
            .json(&body)
            .send()
    };

    assert_eq!(
        send("hk_not_a_key", json!({"sender_id": "u1", "text": "x"}))
            .await
            .unwrap()
            .status(),
        401
    );
    let bad = send(&key, json!({"sender_id": "", "text": "x"}))
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);
    let bad = send(
        &key,
        json!({"sender_id": "u1", "media_url": "ftp://x/y.png"}),
    )
    .await
    .unwrap();
    assert_eq!(bad.status(), 400);

    let resp = send(&key, json!({"sender_id": "u1", "text": "hello rest", "message_id": "m-1", "metadata": {"order": 7}}))
        .await
        .unwrap();
    assert_eq!(resp.status(), 202);
    let run_id = resp.json::<Value>().await.unwrap()["run_id"]
        .as_str()
        .unwrap()
        .to_string();

    // The callback receives the answer.
    let hook: Value = eventually(Duration::from_secs(20), "the callback", || async {
        let reqs = callback.received_requests().await.unwrap();
        reqs.first()
            .map(|r| serde_json::from_slice(&r.body).unwrap())
    })
    .await;
    assert_eq!(hook["run_id"], run_id.as_str());
    assert_eq!(hook["outcome"]["status"], "answered");
    assert_eq!(hook["outcome"]["text"], "echo: hello rest");

    // Polling shows the same, to the key that sent it and to the operator only.
    let poll = |k: &str| {
        http.get(fleet.url(&format!("/v1/runs/{run_id}")))
            .bearer_auth(k)
            .send()
    };
    let run: Value = eventually(Duration::from_secs(10), "the run completed", || async {
        let v: Value = poll(&key).await.ok()?.json().await.ok()?;
        (v["status"] == "completed").then_some(v)
    })
    .await;
    assert_eq!(run["output"], "echo: hello rest");
    assert_eq!(run["platform"], "rest");
    // The mock counts words: three out, and the user's two plus the soul's system prompt in.
    assert_eq!(run["usage"]["output_tokens"], 3);
    assert!(run["usage"]["input_tokens"].as_u64().unwrap() > 2);
    assert_eq!(poll(KEY).await.unwrap().status(), 200);
    assert_eq!(poll(&other).await.unwrap().status(), 404);
    assert_eq!(
        http.get(fleet.url("/v1/runs/not-a-uuid"))
            .bearer_auth(&key)
            .send()
            .await
            .unwrap()
            .status(),
        404
    );

    // The same message id again is not routed again.
    let dup = send(
        &key,
        json!({"sender_id": "u1", "text": "hello rest", "message_id": "m-1"}),
    )
    .await
    .unwrap();
    assert_eq!(dup.status(), 200);
    let dup: Value = dup.json().await.unwrap();
    assert_eq!(dup["status"], "duplicate");
    assert_eq!(dup["run_id"], run_id.as_str());

    // Over the sender's rate: 429 with Retry-After.
    let mut limited = None;
    for i in 0..4 {
        let r = send(
            &key,
            json!({"sender_id": "u1", "text": format!("more {i}")}),
        )
        .await
        .unwrap();
        if r.status() == 429 {
            limited = Some(r);
            break;
        }
    }
    let limited = limited.expect("the sender is limited");
    assert!(
        limited.headers()["retry-after"]
            .to_str()
            .unwrap()
            .parse::<u64>()
            .unwrap()
            >= 1
    );
    fleet.stop().await.unwrap();
}
