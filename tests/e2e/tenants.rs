//! Keys and tenants (docs/security.md): what one REST key sends, reads and is told stays its
//! own — its senders, its message ids, its signed callbacks — and what goes wrong with a
//! provider or a workspace's secrets reaches callers as a code and a sentence, never as the
//! provider's text.

use std::time::Duration;

use hermes::Service;
use hermes_db::api_keys;
use hermes_testkit::{TestEnv, eventually};
use serde_json::{Value, json};

/// Send `text` as REST sender `alice` with `key`; the URL of its run.
pub(crate) async fn send_as_alice(fleet: &hermes_testkit::Fleet, key: &str, text: &str) -> String {
    let body = json!({"sender_id": "alice", "text": text});
    let (status, sent) = fleet.post_json("/v1/messages", key, &body).await;
    assert_eq!(status, 202, "{sent}");
    fleet.url(&format!("/v1/runs/{}", sent["run_id"].as_str().unwrap()))
}

/// The run at `url` as `key` polls it, once final.
pub(crate) async fn final_run(http: &reqwest::Client, url: &str, key: &str) -> Value {
    eventually(Duration::from_secs(20), "the run to end", || async {
        let v: Value = http
            .get(url)
            .bearer_auth(key)
            .send()
            .await
            .ok()?
            .json()
            .await
            .ok()?;
        matches!(v["status"].as_str(), Some("completed" | "failed")).then_some(v)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rest_senders_and_message_ids_belong_to_their_key() {
    let env = TestEnv::new().await;
    let db = env.db();
    let client = db.get().await.unwrap();
    let a = api_keys::create(&client, "shop a", None, None)
        .await
        .unwrap();
    let b = api_keys::create(&client, "shop b", None, None)
        .await
        .unwrap();
    let alice = env.key_user(a.key.id, "alice", 10).await;
    let fleet = env.start(&Service::ALL).await;
    let http = reqwest::Client::new();
    let run_url = |run: &Value| fleet.url(&format!("/v1/runs/{}", run.as_str().unwrap()));
    let credits = || async {
        let c = db.get().await.unwrap();
        hermes_db::users::get(&c, alice.id)
            .await
            .unwrap()
            .unwrap()
            .credits
    };

    // Key B names key A's sender and message id: a stranger of its own, not A's user (no
    // credit of A's spent), and routed, not "duplicate".
    let (status, by_b) = fleet
        .post_json(
            "/v1/messages",
            &b.secret_key,
            &json!({"sender_id": "alice", "text": "spend alice's credit", "message_id": "m-1"}),
        )
        .await;
    assert_eq!(status, 202, "{by_b}");
    let run_b = final_run(&http, &run_url(&by_b["run_id"]), &b.secret_key).await;
    let user_of_b: Option<uuid::Uuid> = client
        .query_one(
            "SELECT user_id FROM agent_runs WHERE id = $1::text::uuid",
            &[&by_b["run_id"].as_str().unwrap()],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(user_of_b, None, "key B reached key A's user: {run_b}");
    assert_eq!(credits().await, 10);

    // Key A's own message with the same id is its own run, answered for alice.
    let (status, by_a) = fleet
        .post_json(
            "/v1/messages",
            &a.secret_key,
            &json!({"sender_id": "alice", "text": "hello", "message_id": "m-1"}),
        )
        .await;
    assert_eq!(status, 202, "key A's message was taken for key B's: {by_a}");
    assert_ne!(by_a["run_id"], by_b["run_id"]);
    let run_a = final_run(&http, &run_url(&by_a["run_id"]), &a.secret_key).await;
    assert_eq!(run_a["output"], "echo: hello");
    assert_eq!(credits().await, 9);

    // A true duplicate is told the run that answers it...
    let repeat = json!({"sender_id": "alice", "text": "hello", "message_id": "m-1"});
    let (status, dup) = fleet
        .post_json("/v1/messages", &a.secret_key, &repeat.clone())
        .await;
    assert_eq!((status, &dup["status"]), (200, &json!("duplicate")));
    assert_eq!(dup["run_id"], by_a["run_id"]);

    // ...also once Redis has forgotten the id (24 h later, or restarted): never a new run id
    // that the unique index refuses and that then 404s for ever.
    let redis = redis::Client::open(env.vars["REDIS_URL"].as_str()).unwrap();
    let mut c = redis.get_multiplexed_async_connection().await.unwrap();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{}:dedupe:*", env.ns))
        .query_async(&mut c)
        .await
        .unwrap();
    assert!(!keys.is_empty());
    let _: () = redis::cmd("DEL")
        .arg(&keys)
        .query_async(&mut c)
        .await
        .unwrap();
    let (status, later) = fleet
        .post_json("/v1/messages", &a.secret_key, &repeat)
        .await;
    assert_eq!(
        (status, &later["status"]),
        (200, &json!("duplicate")),
        "{later}"
    );
    assert_eq!(later["run_id"], by_a["run_id"]);
    assert_eq!(credits().await, 9);
    fleet.stop().await.unwrap();
}

/// Fernet keys sealing the callback secrets in these tests.
const SECRET_KEYS: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";

/// A key with a callback to `callback`, and its signing secret.
async fn callback_key(env: &TestEnv, callback: &str) -> api_keys::Created {
    let client = env.db().get().await.unwrap();
    let ring = hermes_net::keyring::KeyRing::new(&env.config().router.secret_keys);
    let created = api_keys::create(&client, "shop", Some(callback), ring.as_ref())
        .await
        .unwrap();
    env.key_user(created.key.id, "alice", 10).await;
    created
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_callback_to_a_private_address_is_refused() {
    let hook = wiremock::MockServer::start().await;
    wiremock::Mock::given(wiremock::matchers::method("POST"))
        .respond_with(wiremock::ResponseTemplate::new(204))
        .mount(&hook)
        .await;
    let mut env = TestEnv::new().await;
    // No HERMES_CALLBACK_ALLOW: 127.0.0.1 is loopback, not public.
    env.set("HERMES_SECRET_KEYS", SECRET_KEYS);
    let key = callback_key(&env, &format!("{}/hook", hook.uri())).await;
    let fleet = env.start(&Service::ALL).await;
    let http = reqwest::Client::new();
    let (status, sent) = fleet
        .post_json(
            "/v1/messages",
            &key.secret_key,
            &json!({"sender_id": "alice", "text": "hello"}),
        )
        .await;
    assert_eq!(status, 202);
    let run_url = fleet.url(&format!("/v1/runs/{}", sent["run_id"].as_str().unwrap()));
    let run = final_run(&http, &run_url, &key.secret_key).await;
    assert_eq!(run["status"], "failed", "{run}");
    assert!(
        hook.received_requests().await.unwrap().is_empty(),
        "the callback reached a loopback address"
    );
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callbacks_are_signed_with_the_keys_secret_and_never_redirected() {
    use hermes_net::signing::{standard_key, standard_signature};
    use wiremock::matchers::{method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};
    let hook = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/hook"))
        .respond_with(ResponseTemplate::new(204))
        .mount(&hook)
        .await;
    Mock::given(method("POST"))
        .and(path("/moved"))
        .respond_with(
            ResponseTemplate::new(307).insert_header("location", format!("{}/stolen", hook.uri())),
        )
        .mount(&hook)
        .await;
    Mock::given(method("POST"))
        .and(path("/stolen"))
        .respond_with(ResponseTemplate::new(204))
        .mount(&hook)
        .await;
    let mut env = TestEnv::new().await;
    env.set("HERMES_SECRET_KEYS", SECRET_KEYS)
        .set("HERMES_CALLBACK_ALLOW", "127.0.0.1");
    let key = callback_key(&env, &format!("{}/hook", hook.uri())).await;
    let db = env.db();
    let client = db.get().await.unwrap();
    let ring = hermes_net::keyring::KeyRing::new(&env.config().router.secret_keys).unwrap();
    let fleet = env.start(&Service::ALL).await;
    let http = reqwest::Client::new();
    let hooked = |n: usize| {
        let hook = &hook;
        async move {
            eventually(Duration::from_secs(20), "the callback", || async {
                let reqs = hook.received_requests().await.unwrap();
                let reqs: Vec<_> = reqs
                    .into_iter()
                    .filter(|r| r.url.path() == "/hook")
                    .collect();
                (reqs.len() >= n).then(|| reqs[n - 1].clone())
            })
            .await
        }
    };
    let verifies = |req: &wiremock::Request, secret: &str| {
        let header = |n: &str| req.headers.get(n).unwrap().to_str().unwrap().to_string();
        let ts: i64 = header("webhook-timestamp").parse().unwrap();
        let expected = standard_signature(
            &standard_key(secret.as_bytes()),
            &header("webhook-id"),
            ts,
            &req.body,
        );
        header("webhook-signature") == expected
    };

    fleet
        .post_json(
            "/v1/messages",
            &key.secret_key,
            &json!({"sender_id": "alice", "text": "one"}),
        )
        .await;
    let first = hooked(1).await;
    let secret = key.callback_secret.clone().unwrap();
    assert!(
        verifies(&first, &secret),
        "not signed with the key's secret"
    );

    // Rotated: the new secret signs, the old one no longer verifies.
    let rotated = api_keys::rotate_secret(&client, key.key.id, &ring)
        .await
        .unwrap()
        .unwrap();
    fleet
        .post_json(
            "/v1/messages",
            &key.secret_key,
            &json!({"sender_id": "alice", "text": "two"}),
        )
        .await;
    let second = hooked(2).await;
    assert!(verifies(&second, &rotated));
    assert!(!verifies(&second, &secret));

    // A callback answered with a redirect is not followed: the run fails for its caller.
    let moved = api_keys::create(
        &client,
        "moved",
        Some(&format!("{}/moved", hook.uri())),
        Some(&ring),
    )
    .await
    .unwrap();
    env.key_user(moved.key.id, "bob", 10).await;
    let (_, sent) = fleet
        .post_json(
            "/v1/messages",
            &moved.secret_key,
            &json!({"sender_id": "bob", "text": "three"}),
        )
        .await;
    let run_url = fleet.url(&format!("/v1/runs/{}", sent["run_id"].as_str().unwrap()));
    let run = final_run(&http, &run_url, &moved.secret_key).await;
    assert_eq!(run["status"], "failed", "{run}");
    let stolen = hook
        .received_requests()
        .await
        .unwrap()
        .iter()
        .filter(|r| r.url.path() == "/stolen")
        .count();
    assert_eq!(stolen, 0, "the callback followed a redirect");
    fleet.stop().await.unwrap();
}
