//! PostgreSQL and Redis over TLS: `sslmode=require|verify-full` (with `sslrootcert`) in
//! `DATABASE_URL` and `rediss://` in `REDIS_URL`, against the shared servers behind the
//! testkit's TLS terminator (`docs/deploy.md`, "TLS to PostgreSQL and Redis").

use hermes::Service;
use hermes_cache::Cache;
use hermes_config::Namespace;
use hermes_db::Db;
use hermes_telemetry::Metrics;
use hermes_testkit::tls::TestCa;
use hermes_testkit::{Server, TestEnv};
use secrecy::SecretString;

/// The names of the local servers' certificates.
const LOCAL: &[&str] = &["localhost", "127.0.0.1"];

/// `url` with its query parameter `key` set to `value`.
fn with_param(url: &str, key: &str, value: &str) -> String {
    let mut url = url::Url::parse(url).unwrap();
    let pairs: Vec<(String, String)> = url
        .query_pairs()
        .filter(|(k, _)| k != key)
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    url.query_pairs_mut()
        .clear()
        .extend_pairs(pairs)
        .append_pair(key, value);
    url.to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fleet_reaches_postgres_and_redis_over_verified_tls() {
    let mut env = TestEnv::new().await;
    let ca = TestCa::new();
    let (pg, pg_tls) = env.tls_url(Server::Postgres, &ca, LOCAL).await;
    let (redis, redis_tls) = env.tls_url(Server::Redis, &ca, LOCAL).await;
    env.set("DATABASE_URL", &pg).set("REDIS_URL", &redis);
    let fleet = env.start(&Service::ALL).await;
    let resp = fleet.chat("over tls").await;
    assert_eq!(resp.status(), 200);
    let body: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(body["choices"][0]["message"]["content"], "echo: over tls");
    assert!(pg_tls.sessions() > 0, "PostgreSQL was reached over TLS");
    assert!(redis_tls.sessions() > 0, "Redis was reached over TLS");
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_full_refuses_a_wrong_name_or_an_unknown_ca_and_require_does_not_verify() {
    let env = TestEnv::new().await;
    let ca = TestCa::new();
    let stranger = TestCa::new();
    let trusted = ca.path().display().to_string();

    let (wrong_name, t) = env
        .tls_url(Server::Postgres, &ca, &["db.elsewhere.example"])
        .await;
    let db = Db::new(&SecretString::from(wrong_name), 1).unwrap();
    let err = db.ping().await.expect_err("a certificate for another name");
    assert_eq!(t.sessions(), 0, "{err}");

    let (unknown_ca, t) = env.tls_url(Server::Postgres, &stranger, LOCAL).await;
    let unknown_ca = with_param(&unknown_ca, "sslrootcert", &trusted);
    let db = Db::new(&SecretString::from(unknown_ca.clone()), 1).unwrap();
    let err = db
        .ping()
        .await
        .expect_err("a certificate from an unknown CA");
    assert_eq!(t.sessions(), 0, "{err}");

    // `require` encrypts without verifying, as libpq does.
    let require = with_param(&unknown_ca, "sslmode", "require");
    let db = Db::new(&SecretString::from(require), 1).unwrap();
    db.ping()
        .await
        .expect("require does not verify the certificate");
    assert_eq!(t.sessions(), 1);

    let ns = Namespace::parse(&env.ns).unwrap();
    let (redis, t) = env.tls_url(Server::Redis, &stranger, LOCAL).await;
    let redis = with_param(&redis, "sslrootcert", &trusted);
    let cache = Cache::new(&SecretString::from(redis), ns.clone(), Metrics::new()).unwrap();
    cache
        .ping()
        .await
        .expect_err("a Redis certificate from an unknown CA");
    assert_eq!(t.sessions(), 0);

    let (redis, t) = env
        .tls_url(Server::Redis, &ca, &["cache.elsewhere.example"])
        .await;
    let cache = Cache::new(&SecretString::from(redis), ns, Metrics::new()).unwrap();
    cache
        .ping()
        .await
        .expect_err("a Redis certificate for another name");
    assert_eq!(t.sessions(), 0);
}
