//! Proxy mode (docs/api.md, "Proxy mode"), with two fleets: an edge (ingest, its forwarding
//! router, delivery; no model) takes a Telegram user's message and forwards it to the
//! upstream fleet's REST channel through a chaos proxy; the upstream answers with its model
//! and posts the answer back to the edge's `/proxy/replies`, and the edge's own delivery
//! sends it to Telegram. While the upstream is unreachable the edge holds the message and
//! forwards it once it is back; nothing is lost or doubled. Forged answers are refused.

use std::time::Duration;

use hermes::Service;
use hermes_db::api_keys;
use hermes_net::signing::standard_headers;
use hermes_testkit::chaos::ChaosProxy;
use hermes_testkit::{TestEnv, eventually, telegram_fake, telegram_text, telegram_texts_to};
use serde_json::json;

const TG_SECRET: &str = "edge-tg-secret-0123";
const TG_TOKEN: &str = "4242:edge-bot";
const SECRET_KEYS: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";

/// How many messages the upstream routed for the edge's key.
async fn upstream_runs(env: &TestEnv) -> i64 {
    env.db()
        .get()
        .await
        .unwrap()
        .query_one(
            "SELECT count(*) FROM agent_runs WHERE platform = 'rest'",
            &[],
        )
        .await
        .unwrap()
        .get(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edge_forwards_to_its_upstream_holds_through_an_outage_and_delivers_each_answer_once() {
    // The upstream: the whole fleet, with a REST key for the edge. Its callback URL is set
    // once the edge's address is known.
    let mut up_env = TestEnv::new().await;
    up_env
        .set("HERMES_SECRET_KEYS", SECRET_KEYS)
        .set("HERMES_CALLBACK_ALLOW", "127.0.0.1");
    let ring = hermes_net::keyring::KeyRing::new(&up_env.config().router.secret_keys);
    let client = up_env.db().get().await.unwrap();
    let edge_key = api_keys::create(
        &client,
        "edge",
        Some("http://127.0.0.1:9/proxy/replies"),
        ring.as_ref(),
    )
    .await
    .unwrap();
    let callback_secret = edge_key.callback_secret.clone().unwrap();
    up_env.key_user(edge_key.key.id, "telegram:4242", 10).await;
    let upstream = up_env.start(&Service::ALL).await;
    let link = ChaosProxy::start(upstream.http).await;

    // The edge: Telegram in and out, forwarding through the proxy.
    let telegram = telegram_fake(TG_TOKEN).await;
    let mut edge_env = TestEnv::new().await;
    edge_env
        .set("TELEGRAM_WEBHOOK_SECRET", TG_SECRET)
        .set("TELEGRAM_BOT_TOKEN", TG_TOKEN)
        .set("TELEGRAM_API_BASE_URL", &telegram.uri())
        .set("GATEWAY_PROXY_URL", &format!("http://{}", link.addr))
        .set("GATEWAY_PROXY_KEY", &edge_key.secret_key)
        .set("GATEWAY_PROXY_SECRET", &callback_secret);
    let edge = edge_env
        .start(&[Service::Ingest, Service::Router, Service::Delivery])
        .await;
    client
        .execute(
            "UPDATE api_keys SET callback_url = $1 WHERE id = $2",
            &[&edge.url("/proxy/replies"), &edge_key.key.id],
        )
        .await
        .unwrap();

    // A message in: answered by the upstream's model, sent by the edge's delivery.
    edge.telegram_update(TG_SECRET, &telegram_text(4242, 1, "hello upstream"))
        .await;
    let sent = eventually(
        Duration::from_secs(30),
        "the answer reaches Telegram",
        || async {
            let texts = telegram_texts_to(&telegram, "4242").await;
            (!texts.is_empty()).then_some(texts)
        },
    )
    .await;
    assert_eq!(sent, ["echo: hello upstream"]);
    let edge_db = edge_env.db().get().await.unwrap();
    let status: String = eventually(
        Duration::from_secs(30),
        "the edge's run completes",
        || async {
            let s: String = edge_db
                .query_one(
                    "SELECT status FROM agent_runs WHERE platform = 'telegram'",
                    &[],
                )
                .await
                .unwrap()
                .get(0);
            (s == "completed").then_some(s)
        },
    )
    .await;
    assert_eq!(status, "completed");

    // The upstream away: the edge holds the next message and forwards it once it is back.
    link.set_down(true);
    edge.telegram_update(TG_SECRET, &telegram_text(4242, 2, "while you were out"))
        .await;
    eventually(
        Duration::from_secs(30),
        "the edge retries the upstream",
        || async {
            edge.metrics()
                .await
                .contains("hermes_proxy_forwards_total{outcome=\"retried\"}")
                .then_some(())
        },
    )
    .await;
    assert_eq!(
        upstream_runs(&up_env).await,
        1,
        "nothing reached the upstream"
    );
    link.set_down(false);
    let sent = eventually(
        Duration::from_secs(60),
        "the held message is answered",
        || async {
            let texts = telegram_texts_to(&telegram, "4242").await;
            (texts.len() == 2).then_some(texts)
        },
    )
    .await;
    assert_eq!(sent[1], "echo: while you were out");
    assert_eq!(
        upstream_runs(&up_env).await,
        2,
        "each message routed once upstream"
    );

    // Forged or stray answers are refused and deliver nothing.
    let http = reqwest::Client::new();
    let post = |headers: Vec<(&'static str, String)>, body: String| {
        let mut req = http
            .post(edge.url("/proxy/replies"))
            .header("content-type", "application/json");
        for (n, v) in headers {
            req = req.header(n, v);
        }
        req.body(body).send()
    };
    let answer = |message_id: &str| {
        json!({"run_id": uuid::Uuid::now_v7(), "message_id": message_id,
               "outcome": {"status": "answered", "text": "forged", "model": "m",
                           "usage": {"input_tokens": 1, "output_tokens": 1},
                           "finish_reason": "stop"}})
        .to_string()
    };
    let now = chrono::Utc::now().timestamp();
    let stray = answer(&uuid::Uuid::now_v7().to_string());
    let id = uuid::Uuid::now_v7().to_string();
    let signed = standard_headers(callback_secret.as_bytes(), &id, now, stray.as_bytes());
    assert_eq!(
        post(signed.to_vec(), stray.clone()).await.unwrap().status(),
        404
    );
    let wrong = standard_headers(
        b"whsec_AAAAAAAAAAAAAAAAAAAAAA==",
        &id,
        now,
        stray.as_bytes(),
    );
    assert_eq!(
        post(wrong.to_vec(), stray.clone()).await.unwrap().status(),
        401
    );
    let stale = standard_headers(
        callback_secret.as_bytes(),
        &id,
        now - 3600,
        stray.as_bytes(),
    );
    assert_eq!(
        post(stale.to_vec(), stray.clone()).await.unwrap().status(),
        401
    );
    assert_eq!(post(Vec::new(), stray).await.unwrap().status(), 401);
    assert_eq!(telegram_texts_to(&telegram, "4242").await.len(), 2);

    edge.stop().await.unwrap();
    upstream.stop().await.unwrap();
}
