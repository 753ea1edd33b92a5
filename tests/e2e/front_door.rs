//! The front door against strangers (docs/security.md, "The front door under slow or hostile
//! clients"): bodies whose signature covers them are read in a small pool of their own and
//! never take one of `HERMES_MAX_IN_FLIGHT` before it holds, under a short deadline of their
//! own; the Forge route is not there without a secret; unknown Bearer keys are refused
//! outside the slots and limited per client address, while known callers go on.

use std::time::Duration;

use hermes::Service;
use hermes_channels::meta::verify::sign_hub;
use hermes_testkit::{Fleet, KEY, TestEnv, eventually, metric};
use reqwest::StatusCode;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::forge_wakes::{SECRET as FORGE_SECRET, forge_env, now, signed};

const TELEGRAM: &str = "telegram-secret-0123456789";
const META: &str = "meta-app-secret-0123456789";

/// A connection that sent `head` (a request whose body never ends) and holds it open.
async fn hold(fleet: &Fleet, head: String) -> TcpStream {
    let mut stream = TcpStream::connect(fleet.http).await.unwrap();
    stream.write_all(head.as_bytes()).await.unwrap();
    stream
}

/// A POST to `path` with `headers` announcing 1000 bytes of body and sending one.
fn slow_post(path: &str, headers: &[(String, String)]) -> String {
    let mut head = format!("POST {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n");
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("content-length: 1000\r\n\r\n{");
    head
}

/// The value of `series` on the fleet's metrics (0 when absent).
async fn value(fleet: &Fleet, series: &str) -> f64 {
    metric(&fleet.metrics().await, series).unwrap_or(0.0)
}

/// The headers of a slow, signed-looking request to each route whose signature covers the
/// body (the signatures are of another body: they will not hold, but only once read).
fn signed_routes() -> Vec<(&'static str, Vec<(String, String)>)> {
    let hub = vec![(
        "x-hub-signature-256".to_string(),
        sign_hub(META.as_bytes(), b"{}"),
    )];
    vec![
        ("/webhooks/whatsapp", hub.clone()),
        ("/webhooks/instagram", hub),
        (
            "/agents/forge",
            signed(FORGE_SECRET, now(), "dlv_slow", b"{}"),
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_signed_bodies_wait_in_their_own_pool_and_never_take_a_callers_slot() {
    let mut env = TestEnv::new().await;
    forge_env(&mut env)
        .set("WHATSAPP_APP_SECRET", META)
        .set("INSTAGRAM_APP_SECRET", META)
        .set("HERMES_MAX_IN_FLIGHT", "2")
        .set("HERMES_UNVERIFIED_BODIES", "3")
        // Shed at once here: the test counts what is shed while the pool is full.
        .set("HERMES_UNVERIFIED_BODY_QUEUE_SECS", "0")
        .set("HERMES_UNVERIFIED_BODY_TIMEOUT_SECS", "600")
        .set("HERMES_HTTP_BODY_TIMEOUT_SECS", "600");
    let fleet = env.start(&[Service::Ingest]).await;
    // Four strangers per route send a signature header and a body that never ends.
    let mut strangers = Vec::new();
    for (path, headers) in signed_routes() {
        for _ in 0..4 {
            strangers.push(hold(&fleet, slow_post(path, &headers)).await);
        }
    }
    // Three are read in the pool; the nine others are shed at once, never queued.
    eventually(
        Duration::from_secs(10),
        "the pool full, the rest shed",
        || async {
            let m = fleet.metrics().await;
            let reading = metric(&m, "hermes_http_unverified_bodies");
            let shed = metric(&m, "hermes_http_shed_total{pool=\"unverified_body\"}");
            (reading == Some(3.0) && shed == Some(9.0)).then_some(())
        },
    )
    .await;
    // A caller Hermes knows has both slots to itself.
    let http = reqwest::Client::new();
    for _ in 0..2 {
        let models = http
            .get(fleet.url("/v1/models"))
            .bearer_auth(KEY)
            .send()
            .await
            .unwrap();
        assert_eq!(models.status(), StatusCode::OK);
    }
    assert_eq!(
        value(&fleet, "hermes_http_shed_total{pool=\"in_flight\"}").await,
        0.0
    );
    // The strangers leave: a real webhook is read and taken again.
    drop(strangers);
    eventually(Duration::from_secs(10), "the pool emptied", || async {
        (value(&fleet, "hermes_http_unverified_bodies").await == 0.0).then_some(())
    })
    .await;
    let body = br#"{"object":"instagram","entry":[]}"#;
    let resp = http
        .post(fleet.url("/webhooks/instagram"))
        .header("content-type", "application/json")
        .header("x-hub-signature-256", sign_hub(META.as_bytes(), body))
        .body(body.to_vec())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    // A wrong signature is refused once its body is read.
    let resp = http
        .post(fleet.url("/webhooks/whatsapp"))
        .header("x-hub-signature-256", sign_hub(b"another-secret", body))
        .body(body.to_vec())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_body_that_never_ends_is_cut_at_its_own_short_deadline() {
    let mut env = TestEnv::new().await;
    forge_env(&mut env)
        .set("HERMES_UNVERIFIED_BODY_TIMEOUT_SECS", "1")
        .set("HERMES_HTTP_BODY_TIMEOUT_SECS", "600");
    let fleet = env.start(&[Service::Ingest]).await;
    let (path, headers) = signed_routes().pop().unwrap();
    let mut stream = hold(&fleet, slow_post(path, &headers)).await;
    let mut got = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut got))
        .await
        .expect("cut long before HERMES_HTTP_BODY_TIMEOUT_SECS")
        .ok();
    let answer = String::from_utf8_lossy(&got);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("body_timeout"), "{answer}");
    assert_eq!(
        value(
            &fleet,
            "hermes_http_slow_clients_total{phase=\"unverified_body\"}"
        )
        .await,
        1.0
    );
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_forge_route_is_not_mounted_without_a_secret_and_takes_no_slot() {
    let mut env = TestEnv::new().await;
    env.set("TELEGRAM_WEBHOOK_SECRET", TELEGRAM)
        .set("HERMES_MAX_IN_FLIGHT", "1")
        .set("HERMES_HTTP_BODY_TIMEOUT_SECS", "600");
    let fleet = env.start(&[Service::Ingest]).await;
    // The only slot: a Telegram update whose body never ends.
    let holder = hold(
        &fleet,
        slow_post(
            "/webhooks/telegram",
            &[("x-telegram-bot-api-secret-token".into(), TELEGRAM.into())],
        ),
    )
    .await;
    let http = reqwest::Client::new();
    eventually(Duration::from_secs(10), "the slot taken", || async {
        let resp = http
            .get(fleet.url("/v1/models"))
            .bearer_auth(KEY)
            .send()
            .await
            .ok()?;
        (resp.status() == StatusCode::SERVICE_UNAVAILABLE).then_some(())
    })
    .await;
    let body = b"{}";
    let mut req = http.post(fleet.url("/agents/forge")).body(body.to_vec());
    for (k, v) in signed(FORGE_SECRET, now(), "dlv_1", body) {
        req = req.header(k, v);
    }
    let resp = req.send().await.unwrap();
    assert_eq!(
        resp.status(),
        StatusCode::NOT_FOUND,
        "no route, no slot, no 503"
    );
    let error: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(error["error"]["code"], "not_found");
    // Hung up first: a stop waits out its grace for a request still being read.
    drop(holder);
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_keys_are_refused_outside_the_slots_and_limited_per_client_address() {
    let mut env = TestEnv::new().await;
    env.set("TELEGRAM_WEBHOOK_SECRET", TELEGRAM)
        .set("HERMES_MAX_IN_FLIGHT", "1")
        .set("HERMES_KEY_MISSES_PER_MINUTE", "3")
        .set("HERMES_HTTP_BODY_TIMEOUT_SECS", "600");
    let fleet = env.start(&[Service::Ingest]).await;
    let holder = hold(
        &fleet,
        slow_post(
            "/webhooks/telegram",
            &[("x-telegram-bot-api-secret-token".into(), TELEGRAM.into())],
        ),
    )
    .await;
    let http = reqwest::Client::new();
    let get =
        |path: &'static str, key: &'static str| http.get(fleet.url(path)).bearer_auth(key).send();
    eventually(Duration::from_secs(10), "the slot taken", || async {
        (get("/v1/models", KEY).await.ok()?.status() == StatusCode::SERVICE_UNAVAILABLE)
            .then_some(())
    })
    .await;
    // Every slot is taken, yet strangers are told 401 at once: their look-up holds none.
    for key in [
        "made-up-key-000000000001",
        "made-up-key-000000000002",
        "made-up-key-000000000002",
    ] {
        assert_eq!(
            get("/v1/models", key).await.unwrap().status(),
            StatusCode::UNAUTHORIZED
        );
    }
    // A fourth unknown key from this address is refused unread, on every surface.
    for path in [
        "/v1/models",
        "/v1/runs/0190b7a4-0000-7000-8000-000000000000",
    ] {
        let resp = get(path, "made-up-key-000000000003").await.unwrap();
        assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS, "{path}");
        assert!(resp.headers().contains_key("retry-after"));
        let error: serde_json::Value = resp.json().await.unwrap();
        assert_eq!(error["error"]["code"], "too_many_unknown_keys");
    }
    let mcp = http
        .post(fleet.url("/mcp"))
        .bearer_auth("made-up-key-000000000004")
        .json(&serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
        .send()
        .await
        .unwrap();
    assert_eq!(mcp.status(), StatusCode::TOO_MANY_REQUESTS);
    // The operator key is not held back by the address's misses: it reaches the (full) slot.
    assert_eq!(
        get("/v1/models", KEY).await.unwrap().status(),
        StatusCode::SERVICE_UNAVAILABLE
    );
    let m = fleet.metrics().await;
    for (outcome, n) in [("looked_up", 2.0), ("cached", 1.0), ("rate_limited", 3.0)] {
        let series = format!("hermes_api_key_misses_total{{outcome=\"{outcome}\"}}");
        assert_eq!(metric(&m, &series), Some(n), "{series}\n{m}");
    }
    drop(holder);
    eventually(Duration::from_secs(10), "the slot free again", || async {
        (get("/v1/models", KEY).await.ok()?.status() == StatusCode::OK).then_some(())
    })
    .await;
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_body_beyond_the_pool_waits_for_a_place_instead_of_being_shed() {
    let mut env = TestEnv::new().await;
    env.set("WHATSAPP_APP_SECRET", META)
        .set("HERMES_UNVERIFIED_BODIES", "1")
        .set("HERMES_UNVERIFIED_BODY_QUEUE_SECS", "600")
        .set("HERMES_UNVERIFIED_BODY_TIMEOUT_SECS", "600")
        .set("HERMES_HTTP_BODY_TIMEOUT_SECS", "600");
    let fleet = env.start(&[Service::Ingest]).await;
    let (path, headers) = signed_routes().remove(0);
    // The one place: a body that never ends.
    let holder = hold(&fleet, slow_post(path, &headers)).await;
    eventually(Duration::from_secs(10), "the place taken", || async {
        (value(&fleet, "hermes_http_unverified_bodies").await == 1.0).then_some(())
    })
    .await;
    // A whole body with a signature of another body: it waits for the place, then is read
    // and refused for its signature, never shed.
    let waiting = {
        let url = fleet.url(path);
        let headers = headers.clone();
        tokio::spawn(async move {
            let mut req = reqwest::Client::new()
                .post(url)
                .header("content-type", "application/json")
                .body("{\"object\":\"whatsapp_business_account\"}");
            for (k, v) in &headers {
                req = req.header(k.as_str(), v.as_str());
            }
            req.send().await.unwrap().status()
        })
    };
    // It waits: not shed, not read.
    eventually(
        Duration::from_secs(10),
        "the second body waiting",
        || async { (value(&fleet, "hermes_http_unverified_waiting").await == 1.0).then_some(()) },
    )
    .await;
    drop(holder);
    let status = tokio::time::timeout(Duration::from_secs(30), waiting)
        .await
        .expect("answered once the place is free")
        .unwrap();
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(
        value(&fleet, "hermes_http_shed_total{pool=\"unverified_body\"}").await,
        0.0
    );
    fleet.stop().await.unwrap();
}
