//! The Forge contract's dispatcher side, item 7 (docs/agents.md, "JWT bearers"): short-lived
//! JWT bearers on `/api/mcp` beside API keys. Every token here is minted by PyJWT
//! (`tests/jwt/mint.py`), an implementation independent of Hermes, so what is accepted and
//! refused is checked against a library written from RFC 7519. HS256 and EdDSA tokens speak
//! for the agent in their `sub`, under any of several listed keys picked by `kid`; expired,
//! future-dated, wrong-audience and `alg: none` tokens are refused, each in its own test.

use std::process::Stdio;

use hermes::Service;
use hermes_testkit::{Fleet, TestEnv, metric};
use hermes_types::agent::EngagementMode;
use hermes_types::ids::AgentId;
use hermes_types::model::Platform;
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;

use crate::agent_mcp::{Mcp, assign, env_with, external_agent, peer};
use crate::forge_contract::{closed_as, listed, message};

/// The HS256 secrets listed (the old and the new of a rotation).
const OLD_SECRET: &str = "forge-jwt-old-secret-0123456789abcdef";
const NEW_SECRET: &str = "forge-jwt-new-secret-0123456789abcdef";
/// The Ed25519 private key's 32-byte seed (base64url); its public key is listed.
const ED_SEED: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8";

/// The Python with PyJWT: `HERMES_PYJWT_PYTHON` (scripts/test installs a pinned one and sets
/// it), else `python3` if it has PyJWT and cryptography. Without either the tests are skipped
/// (said on stderr), except in CI.
pub(crate) async fn pyjwt() -> Option<String> {
    if let Ok(path) = std::env::var("HERMES_PYJWT_PYTHON") {
        return Some(path);
    }
    let found = tokio::process::Command::new("python3")
        .args(["-c", "import jwt, cryptography"])
        .stderr(Stdio::null())
        .status()
        .await
        .is_ok_and(|s| s.success());
    if found {
        return Some("python3".into());
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "PyJWT is missing: scripts/test installs it (tests/jwt/requirements.txt)"
    );
    eprintln!("SKIPPED: PyJWT is not installed (scripts/test installs it); the JWT tests need it");
    None
}

/// What `tests/jwt/mint.py` prints for `ask`.
pub(crate) async fn mint(python: &str, ask: Value) -> String {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/jwt/mint.py");
    let mut child = tokio::process::Command::new(python)
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python runs");
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(ask.to_string().as_bytes()).await.unwrap();
    drop(stdin);
    let out = child.wait_with_output().await.unwrap();
    assert!(
        out.status.success(),
        "mint.py: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// Seconds since the epoch.
fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

/// Claims for `agent` from the configured issuer to the configured audience, issued
/// `issued` seconds from now and expiring `expires` seconds from now.
fn claims(agent: AgentId, issued: i64, expires: i64) -> Value {
    json!({"iss": "forge", "aud": "hermes", "sub": agent,
           "iat": now() + issued, "exp": now() + expires})
}

/// A test environment taking JWTs under three keys (two HS256, one EdDSA), an external agent
/// victor and a REST user assigned to it; PyJWT's Python. `None` when PyJWT is missing.
async fn setup(peer: &wiremock::MockServer) -> Option<(String, TestEnv, AgentId)> {
    let python = pyjwt().await?;
    let public = mint(&python, json!({"public": ED_SEED})).await;
    let mut env = env_with(peer).await;
    env.set(
        "HERMES_MCP_JWT_KEYS",
        &format!("old:HS256:{OLD_SECRET},new:HS256:{NEW_SECRET},ed:EdDSA:{public}"),
    )
    .set("HERMES_MCP_JWT_ISSUER", "forge")
    .set("HERMES_MCP_JWT_AUDIENCE", "hermes");
    let victor = external_agent(&env, peer, "victor", EngagementMode::Execute).await;
    let user = env.user(Platform::Rest, "jwt-user", 10).await;
    assign(&env, user.id, victor).await;
    Some((python, env, victor))
}

/// An HS256 token under the key `kid` signed with `secret`.
async fn hs256(python: &str, kid: &str, secret: &str, claims: Value) -> String {
    mint(
        python,
        json!({"alg": "HS256", "key": secret, "kid": kid, "claims": claims}),
    )
    .await
}

/// `token` is refused on both transports: 401 with `WWW-Authenticate: Bearer` semantics
/// (JSON-RPC `-32001`), and 401 on the REST alias.
async fn assert_refused(fleet: &Fleet, token: &str) {
    let mcp = Mcp::new(fleet, token);
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                      "params": {"name": "agents.me", "arguments": {}}});
    let (status, answer) = mcp.post_raw(body.to_string()).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{answer}");
    assert_eq!(answer["error"]["code"], -32001, "{answer}");
    let (status, answer) = mcp.rest("agents.me", json!({})).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{answer}");
}

/// The count of JWT bearers with `outcome`.
async fn jwt_outcomes(fleet: &Fleet, outcome: &str) -> Option<f64> {
    let m = fleet.metrics().await;
    metric(
        &m,
        &format!(r#"hermes_mcp_jwt_total{{outcome="{outcome}"}}"#),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item_7_pyjwt_hs256_and_eddsa_tokens_speak_for_their_agent_under_rotated_keys() {
    let peer = peer().await;
    let Some((python, env, victor)) = setup(&peer).await else {
        return;
    };
    let fleet = env.start(&Service::ALL).await;
    let bus = env.bus().await;

    // The whole loop with an HS256 token under the old key.
    let old = hs256(&python, "old", OLD_SECRET, claims(victor, 0, 600)).await;
    let mcp = Mcp::new(&fleet, &old);
    let me = mcp.ok("agents.me", json!({})).await;
    assert_eq!(me["id"], json!(victor));
    let run = message(&bus, Platform::Rest, "jwt-user", "by jwt", Vec::new()).await;
    listed(&mcp, run).await;
    mcp.ok("agent.inbox.ack", json!({"runId": run})).await;
    // The new key of the rotation and the EdDSA key speak for the same agent; so does the
    // REST alias.
    let new = hs256(&python, "new", NEW_SECRET, claims(victor, 0, 600)).await;
    let ed = mint(
        &python,
        json!({"alg": "EdDSA", "key": ED_SEED, "kid": "ed", "claims": claims(victor, 0, 900)}),
    )
    .await;
    for token in [&new, &ed] {
        let (status, me) = mcp.with_key(token).rest("agents.me", json!({})).await;
        assert_eq!((status, me["id"].clone()), (StatusCode::OK, json!(victor)));
    }
    Mcp::new(&fleet, &ed)
        .ok(
            "chat.appendMessage",
            json!({"threadId": run, "body": "signed with Ed25519"}),
        )
        .await;
    closed_as(&env, run, "completed").await;

    // A key no longer listed, a secret that is not the key's, an algorithm other than the
    // key's, and a token living longer than 15 minutes are refused.
    let gone = hs256(&python, "retired", OLD_SECRET, claims(victor, 0, 600)).await;
    let forged = hs256(
        &python,
        "old",
        "not-the-old-secret-0123456789abcdefgh",
        claims(victor, 0, 600),
    )
    .await;
    let confused = hs256(&python, "ed", OLD_SECRET, claims(victor, 0, 600)).await;
    let long = hs256(&python, "old", OLD_SECRET, claims(victor, 0, 3600)).await;
    for token in [&gone, &forged, &confused, &long] {
        assert_refused(&fleet, token).await;
    }
    // Each was tried on both transports.
    for outcome in ["unknown_key", "signature", "algorithm", "too_long"] {
        assert_eq!(jwt_outcomes(&fleet, outcome).await, Some(2.0), "{outcome}");
    }
    assert!(jwt_outcomes(&fleet, "accepted").await >= Some(4.0));
    bus.close().await;
    fleet.stop().await.unwrap();
}

/// Start an ingest for `token`'s refusal, which must be counted as `outcome`.
async fn refused_as(token_for: impl AsyncFnOnce(&str, AgentId) -> String, outcome: &str) {
    let peer = peer().await;
    let Some((python, env, victor)) = setup(&peer).await else {
        return;
    };
    let fleet = env.start(&[Service::Ingest]).await;
    // The same agent with a good token is accepted: the refusal is the token's own fault.
    let good = hs256(&python, "old", OLD_SECRET, claims(victor, 0, 600)).await;
    Mcp::new(&fleet, &good).ok("agents.me", json!({})).await;
    let token = token_for(&python, victor).await;
    assert_refused(&fleet, &token).await;
    assert_eq!(jwt_outcomes(&fleet, outcome).await, Some(2.0), "{outcome}");
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item_7_an_expired_token_is_refused() {
    refused_as(
        async |py, victor| hs256(py, "old", OLD_SECRET, claims(victor, -700, -120)).await,
        "expired",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item_7_a_future_dated_token_is_refused() {
    refused_as(
        async |py, victor| {
            let mut c = claims(victor, 300, 600);
            c["nbf"] = json!(now() + 300);
            hs256(py, "old", OLD_SECRET, c).await
        },
        "future_dated",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item_7_a_token_for_another_audience_is_refused() {
    refused_as(
        async |py, victor| {
            let mut c = claims(victor, 0, 600);
            c["aud"] = json!("another-service");
            hs256(py, "old", OLD_SECRET, c).await
        },
        "audience",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item_7_an_alg_none_token_is_refused() {
    refused_as(
        async |py, victor| {
            mint(
                py,
                json!({"alg": "none", "kid": "old", "claims": claims(victor, 0, 600)}),
            )
            .await
        },
        "algorithm",
    )
    .await;
}
